/* bench.c - main() of the C benchmark binaries.
 *
 *   bench_<runtime> <yield|spawn> [warmup] [reps]
 *       runs `warmup` untimed iterations, then prints `ns <wall time>` for
 *       each of `reps` timed ones (CLOCK_MONOTONIC around the whole workload).
 *   bench_<runtime>_allocs <yield|spawn> [warmup]
 *       the same program linked with common/testing/alloc_count.c through
 *       -Wl,--wrap=malloc,...; after the warm-up, counts the allocations of
 *       one iteration and prints `allocs <n> frees <n> tasks <n>`.
 *
 * Sizes come from the environment, shared with the Tokio binary:
 * BENCH_ROUNDS (200), BENCH_TASKS (500), BENCH_SPAWN_N (10000).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#ifdef BENCH_COUNT_ALLOCS
#include "measure.h"
#endif

static enum poll ret_index_poll(void *self, struct context *cx, void *out)
{
    (void)cx;
    *(uint64_t *)out = ((struct ret_index *)self)->i;
    return POLL_READY;
}

const struct future_vtable ret_index_vt =
    FUTURE_VTABLE_INIT(struct ret_index, sizeof(uint64_t), ret_index_poll, NULL);

static size_t env_size(const char *name, size_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? (size_t)strtoull(v, NULL, 10) : dflt;
}

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static size_t rounds, tasks, spawn_n;

static void once(int workload)
{
    if (workload == 'y') {
        bench_yield_rounds(rounds, tasks);
    } else {
        uint64_t sum = bench_spawn_join(spawn_n);
        if (sum != (uint64_t)spawn_n * (spawn_n - 1) / 2) {
            fprintf(stderr, "spawn/join lost a result: sum %llu\n", (unsigned long long)sum);
            exit(1);
        }
    }
}

int main(int argc, char **argv)
{
    const char *w = argc > 1 ? argv[1] : "yield";
    int warmup = argc > 2 ? atoi(argv[2]) : 1;
    int reps = argc > 3 ? atoi(argv[3]) : 1;
    int workload;
    if (strcmp(w, "yield") == 0)
        workload = 'y';
    else if (strcmp(w, "spawn") == 0)
        workload = 's';
    else {
        fprintf(stderr, "unknown workload %s (yield|spawn)\n", w);
        return 2;
    }
    rounds = env_size("BENCH_ROUNDS", 200);
    tasks = env_size("BENCH_TASKS", 500);
    spawn_n = env_size("BENCH_SPAWN_N", 10000);

    for (int i = 0; i < warmup; i++)
        once(workload);
#ifdef BENCH_COUNT_ALLOCS
    (void)reps;
    alloc_count_start();
    once(workload);
    struct alloc_counts c = alloc_count_stop();
    printf("allocs %llu frees %llu tasks %llu\n", (unsigned long long)c.allocs,
           (unsigned long long)c.frees,
           (unsigned long long)(workload == 'y' ? rounds * tasks : spawn_n));
#else
    for (int i = 0; i < reps; i++) {
        uint64_t t0 = now_ns();
        once(workload);
        uint64_t t1 = now_ns();
        printf("ns %llu\n", (unsigned long long)(t1 - t0));
    }
#endif
    return 0;
}
