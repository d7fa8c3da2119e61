/* timer_bench.h - what each C timer implementation's adapter gives the timer
 * benchmark (timer_bench.c owns main(), the workloads' data and the clocks).
 * The Tokio side (tokio-time/src/main.rs) does the same work with the same
 * pseudo-random numbers.
 *
 *   bulk  n timers with random deadlines (tb_bulk_setup makes them, untimed),
 *         all inserted (tb_bulk_insert, timed), then all cancelled in a random
 *         order (tb_bulk_cancel, timed). Nothing fires: no time passes for the
 *         timers between the two phases (the clock is not advanced).
 *   fire  n timers with absolute deadlines spread over about a second; the
 *         adapter registers them all, calls tb_registered(), then runs its
 *         event loop until every one has fired, storing in fired_ns[i] the
 *         CLOCK_MONOTONIC time at which timer i's callback (or task) ran.
 */
#ifndef BENCH_TIMER_BENCH_H
#define BENCH_TIMER_BENCH_H

#include <stddef.h>
#include <stdint.h>

/* the adapter's name for the report, e.g. "libuv 1.44.2" */
const char *tb_name(void);

/* bulk: make n timers (untimed; called once per process) */
void tb_bulk_setup(size_t n);
/* for k = 0, 1, ..., n-1: start timer place[k] (timer k when place is NULL)
 * with a deadline deadline_ms[k] milliseconds after the implementation's
 * current time. place is a permutation that scatters the inserts over the
 * array (BENCH_BULK_SCATTER=1); NULL by default: inserts in array order. */
void tb_bulk_insert(const uint32_t *deadline_ms, const uint32_t *place, size_t n);
/* stop timer order[k] for k = 0, 1, ..., n-1 (a permutation of 0..n-1) */
void tb_bulk_cancel(const uint32_t *order, size_t n);

/* fire: register timer i at the absolute CLOCK_MONOTONIC deadline
 * deadline_ns[i], call tb_registered(), run until all have fired. */
void tb_fire(const uint64_t *deadline_ns, uint64_t *fired_ns, size_t n);
void tb_registered(void);

uint64_t tb_now_ns(void); /* CLOCK_MONOTONIC */

#endif
