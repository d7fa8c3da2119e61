/* timer_bench.c - main() of the C timer benchmark binaries.
 *
 *   timer_<impl> bulk [warmup]
 *       sets up BENCH_TIMER_N (1,000,000) timers, runs `warmup` (1) untimed
 *       insert-all/cancel-all rounds, then one timed round; prints
 *       `insert_ns <total>`, `cancel_ns <total>` and `n <n>`.
 *       BENCH_BULK_SCATTER=1 scatters the inserts over the array.
 *   timer_<impl> fire
 *       BENCH_FIRE_N (100,000) timers, deadlines uniform over
 *       BENCH_FIRE_SPAN_MS (1000) ms starting BENCH_FIRE_LEAD_MS (200) ms after
 *       the start, so that registering them all is over before the first is
 *       due; prints the lateness (fire time - deadline, CLOCK_MONOTONIC)
 *       p50/p99/max in ns, the number of early fires, the CPU time of the
 *       process (CLOCK_PROCESS_CPUTIME_ID) and the wall time from the end of
 *       registration to the end of the run, and the registration's wall time.
 *
 * The pseudo-random numbers (splitmix64, fixed seeds) are the same in every
 * binary, Tokio's included: every implementation gets the same deadlines and
 * the same cancel order.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timer_bench.h"

uint64_t tb_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static size_t env_size(const char *name, size_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? (size_t)strtoull(v, NULL, 10) : dflt;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "timer bench: out of memory\n");
        exit(1);
    }
    memset(p, 0, n); /* touch every page before any timing */
    return p;
}

/* The bulk row's deadlines: uniform in [1, BENCH_BULK_MAX_MS] ms (600,000:
 * ten minutes), seed 1. The cancel order: a Fisher-Yates shuffle, seed 2. */
static int bulk(int warmup)
{
    size_t n = env_size("BENCH_TIMER_N", 1000000);
    uint64_t max_ms = env_size("BENCH_BULK_MAX_MS", 600000);
    uint32_t *dl = xmalloc(n * sizeof *dl), *order = xmalloc(n * sizeof *order);
    uint64_t s = 1;
    for (size_t i = 0; i < n; i++)
        dl[i] = (uint32_t)(1 + splitmix64(&s) % max_ms);
    s = 2;
    for (size_t i = 0; i < n; i++)
        order[i] = (uint32_t)i;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(splitmix64(&s) % i);
        uint32_t t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
    /* BENCH_BULK_SCATTER=1: the k-th insert goes to a random element of the
     * array (a second shuffle, seed 4), so that a slot's list neighbours are
     * not array neighbours; the cancel order is mapped the same way. */
    uint32_t *place = NULL;
    if (env_size("BENCH_BULK_SCATTER", 0)) {
        place = xmalloc(n * sizeof *place);
        for (size_t i = 0; i < n; i++)
            place[i] = (uint32_t)i;
        s = 4;
        for (size_t i = n; i > 1; i--) {
            size_t j = (size_t)(splitmix64(&s) % i);
            uint32_t t = place[i - 1];
            place[i - 1] = place[j];
            place[j] = t;
        }
        for (size_t k = 0; k < n; k++)
            order[k] = place[order[k]];
    }
    tb_bulk_setup(n);
    for (int w = 0; w < warmup; w++) {
        tb_bulk_insert(dl, place, n);
        tb_bulk_cancel(order, n);
    }
    uint64_t t0 = tb_now_ns();
    tb_bulk_insert(dl, place, n);
    uint64_t t1 = tb_now_ns();
    tb_bulk_cancel(order, n);
    uint64_t t2 = tb_now_ns();
    printf("impl %s\ninsert_ns %llu\ncancel_ns %llu\nn %zu\n", tb_name(),
           (unsigned long long)(t1 - t0), (unsigned long long)(t2 - t1), n);
    return 0;
}

static uint64_t reg_wall, reg_cpu;

void tb_registered(void)
{
    reg_wall = tb_now_ns();
    reg_cpu = cpu_ns();
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The fire row's deadlines: start + lead + uniform in [0, span) ns, seed 3. */
static int fire(void)
{
    size_t n = env_size("BENCH_FIRE_N", 100000);
    uint64_t span = env_size("BENCH_FIRE_SPAN_MS", 1000) * 1000000u;
    uint64_t lead = env_size("BENCH_FIRE_LEAD_MS", 200) * 1000000u;
    uint64_t *dl = xmalloc(n * sizeof *dl), *fired = xmalloc(n * sizeof *fired);
    int64_t *late = xmalloc(n * sizeof *late);
    uint64_t s = 3;
    uint64_t start = tb_now_ns();
    for (size_t i = 0; i < n; i++)
        dl[i] = start + lead + splitmix64(&s) % span;
    reg_wall = 0;
    tb_fire(dl, fired, n);
    uint64_t end_wall = tb_now_ns(), end_cpu = cpu_ns();
    if (!reg_wall) {
        fprintf(stderr, "timer bench: the adapter never called tb_registered\n");
        return 1;
    }
    size_t early = 0, missing = 0;
    for (size_t i = 0; i < n; i++) {
        if (!fired[i])
            missing++;
        late[i] = (int64_t)(fired[i] - dl[i]);
        early += late[i] < 0;
    }
    if (missing) {
        fprintf(stderr, "timer bench: %zu of %zu timers never fired\n", missing, n);
        return 1;
    }
    qsort(late, n, sizeof *late, cmp_i64);
    printf("impl %s\nn %zu\np50_ns %lld\np99_ns %lld\nmax_ns %lld\nmin_ns %lld\nearly %zu\n"
           "cpu_ns %llu\nwall_ns %llu\nreg_ns %llu\n",
           tb_name(), n, (long long)late[n / 2], (long long)late[n * 99 / 100],
           (long long)late[n - 1], (long long)late[0], early,
           (unsigned long long)(end_cpu - reg_cpu), (unsigned long long)(end_wall - reg_wall),
           (unsigned long long)(reg_wall - start));
    return 0;
}

int main(int argc, char **argv)
{
    const char *w = argc > 1 ? argv[1] : "bulk";
    if (strcmp(w, "bulk") == 0)
        return bulk(argc > 2 ? atoi(argv[2]) : 1);
    if (strcmp(w, "fire") == 0)
        return fire();
    fprintf(stderr, "unknown workload %s (bulk|fire)\n", w);
    return 2;
}
