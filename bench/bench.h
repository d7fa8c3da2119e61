/* bench.h - what each C runtime's adapter gives the benchmark harness.
 *
 * bench.c owns main(): the command line, the clock, the warm-up, and the
 * allocation count. An adapter (naive/bench_naive.c, ref/bench_ref.c) runs the
 * two workloads on its runtime, the same shape as the Tokio side
 * (tokio/src/lib.rs):
 *
 *   yield  `rounds` times: spawn `tasks` tasks that each yield twice (a
 *          yield_future of common/testing with n = 2: 3 polls), then run
 *          until all have finished and joined.
 *   spawn  spawn n tasks that return their index at once (1 poll each),
 *          then join every handle in spawn order; returns the sum.
 */
#ifndef BENCH_BENCH_H
#define BENCH_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include "future.h"

void bench_yield_rounds(size_t rounds, size_t tasks);
uint64_t bench_spawn_join(uint64_t n);

/* The spawn row's task: Ready at its first poll with its index (uint64_t). */
struct ret_index {
    uint64_t i;
};
extern const struct future_vtable ret_index_vt;

#endif
