/* perf_test.c - serial, self-relative: time at n and at 10n, against the
 * test's own O(1) lists making the same memory traffic in the same run. */
#include <stdlib.h>

#include "parker.h"
#include "stage05.h"

LAB_SUITE(timer_perf, 120);

static void nop_fire(struct timer_entry *e, void *arg)
{
    (void)e;
    (void)arg;
}

/* 0..n-1 in a random order (Fisher-Yates from *rng). */
static unsigned *shuffled(unsigned n, uint64_t *rng)
{
    unsigned *order = calloc(n, sizeof *order);
    cr_assert_not_null(order, "out of memory in the test itself");
    for (unsigned i = 0; i < n; i++)
        order[i] = i;
    for (unsigned i = n - 1; i > 0; i--) {
        unsigned j = (unsigned)(lab_rand(rng) % (i + 1));
        unsigned x = order[i];
        order[i] = order[j];
        order[j] = x;
    }
    return order;
}

/* n inserts (deadlines spread over every level), then n cancels in random
 * order, with a next-expiration query after every operation. Thread CPU
 * time, best of k. Returns ns. */
static uint64_t churn(unsigned n, uint64_t seed, uint64_t budget_ns)
{
    struct timer_entry *e = calloc(n, sizeof *e);
    cr_assert_not_null(e, "out of memory in the test itself");
    uint64_t rng = seed;
    for (unsigned i = 0; i < n; i++)
        timer_entry_init(&e[i], nop_fire, NULL);
    unsigned *order = shuffled(n, &rng);
    struct timer_wheel *w = timer_wheel_new(ORIGIN_NS);
    cr_assert_not_null(w, "timer_wheel_new returned NULL");
    uint64_t sink = 0;
    uint64_t t0 = thread_cpu_ns();
    for (unsigned i = 0; i < n; i++) {
        uint64_t span = UINT64_C(64) << (6 * (lab_rand(&rng) % 6)); /* ticks, one level's span */
        timer_wheel_insert(w, &e[i], ORIGIN_NS + MS_NS * (1 + lab_rand(&rng) % span));
        sink += timer_wheel_next_expiration(w);
        if ((i & 1023) == 0 && thread_cpu_ns() - t0 > budget_ns)
            break;
    }
    for (unsigned i = 0; i < n; i++) {
        timer_wheel_cancel(w, &e[order[i]]);
        sink += timer_wheel_next_expiration(w);
        if ((i & 1023) == 0 && thread_cpu_ns() - t0 > budget_ns)
            break;
    }
    uint64_t t = thread_cpu_ns() - t0;
    if (sink == 42)
        lab_note("(sink)");
    timer_wheel_free(w);
    free(order);
    free(e);
    return t;
}

/* The same churn over the test's own structure, O(1) by construction: 384
 * intrusive lists (a wheel's 6 levels of 64 slots) over entries of
 * sizeof(struct timer_entry), each insert linked at a list's head, each
 * cancel unlinked, the next expiration read from a bitmap. Its memory
 * traffic is a wheel's (a random list head, random neighbours on cancel), so
 * the time ten times the entries cost here is what the machine's caches
 * charge for ten times the data, not what the code under test adds. */
struct base_entry {
    struct base_entry *next, *prev;
    unsigned list;
};
static uint64_t base_churn(unsigned n, uint64_t seed)
{
    size_t stride = sizeof(struct timer_entry) > sizeof(struct base_entry) ? sizeof(struct timer_entry)
                                                                           : sizeof(struct base_entry);
    char *mem = calloc(n, stride);
    cr_assert_not_null(mem, "out of memory in the test itself");
    static struct base_entry heads[384];
    uint64_t bits[6] = { 0 };
    for (unsigned i = 0; i < 384; i++)
        heads[i].next = heads[i].prev = &heads[i];
    uint64_t rng = seed;
    unsigned *order = shuffled(n, &rng);
    uint64_t sink = 0;
    uint64_t t0 = thread_cpu_ns();
    for (unsigned i = 0; i < n; i++) {
        struct base_entry *e = (struct base_entry *)(mem + (size_t)i * stride);
        unsigned level = (unsigned)(lab_rand(&rng) % 6), l = level * 64 + (unsigned)(lab_rand(&rng) % 64);
        struct base_entry *h = &heads[l];
        e->list = l;
        e->next = h->next;
        e->prev = h;
        h->next->prev = e;
        h->next = e;
        bits[level] |= UINT64_C(1) << (l % 64);
        for (unsigned v = 0; v < 6; v++)
            sink += bits[v] ? (uint64_t)__builtin_ctzll(bits[v]) : 0;
    }
    for (unsigned i = 0; i < n; i++) {
        struct base_entry *e = (struct base_entry *)(mem + (size_t)order[i] * stride);
        e->prev->next = e->next;
        e->next->prev = e->prev;
        if (heads[e->list].next == &heads[e->list])
            bits[e->list / 64] &= ~(UINT64_C(1) << (e->list % 64));
        for (unsigned v = 0; v < 6; v++)
            sink += bits[v] ? (uint64_t)__builtin_ctzll(bits[v]) : 0;
    }
    uint64_t t = thread_cpu_ns() - t0;
    if (sink == 42)
        lab_note("(sink)");
    free(order);
    free(mem);
    return t;
}

LAB_TEST(timer_perf, linear_insert_cancel_query, 120)
{
    unsigned n = 2000, k = 5;
    uint64_t seed = lab_seed();
    uint64_t small = UINT64_MAX, big = UINT64_MAX, base_small = UINT64_MAX, base_big = UINT64_MAX;
    for (unsigned r = 0; r < k; r++) {
        uint64_t a = churn(n, seed + r, 2 * SEC_NS);
        if (a < small)
            small = a;
        uint64_t b = base_churn(n, seed + r);
        if (b < base_small)
            base_small = b;
    }
    /* a quadratic wheel is far past any bound at 100x the small run: stop there */
    for (unsigned r = 0; r < k; r++) {
        uint64_t b = churn(10 * n, seed + r, 100 * small + 50 * MS_NS);
        if (b < big)
            big = b;
        uint64_t c = base_churn(10 * n, seed + r);
        if (c < base_big)
            base_big = c;
        if (big > 100 * small)
            break;
    }
    double ratio = (double)big / (double)(small ? small : 1);
    double base = (double)base_big / (double)(base_small ? base_small : 1);
    /* An O(1) wheel costs about what the lists cost: 10x, more where 10n
     * entries no longer fit in the caches (the reference measured 8.5-13.6x,
     * the lists within 0.5 of it; at n = 10,000 both reached 15-34x with a
     * grading on the other core). Allowed: 25x, or 2.5 times the lists' own
     * ratio when that is larger. A scan of every entry measures 110-120x
     * (the 10n runs stop at 100x the small one). Past 60x a ratio the lists
     * explain is not judged: the machine cannot tell. */
    double bound = base * 2.5 > 25.0 ? base * 2.5 : 25.0;
    lab_note("insert/cancel/next-expiration: n=%u %.3f ms, 10n %.3f ms, ratio %.1f; O(1) lists ratio %.1f; bound %.1f",
             n, small / 1e6, big / 1e6, ratio, base, bound);
    if (ratio < bound && ratio >= 60.0)
        lab_cannot_judge("ten times the timers cost %.1f times the time, and on this machine even the test's own O(1) "
                         "lists cost %.1f times as much for ten times the entries: its caches cannot tell a linear "
                         "cost from its own, rerun", ratio, base);
    cr_assert_lt(ratio, bound, "ten times the timers cost %.1f times the time (n = %u: %.2f ms, 10n: %.2f ms; "
                 "allowed %.1f, the test's own O(1) lists took %.1f times as long for ten times the entries): "
                 "insert, cancel and the next-expiration query must each be O(1) in the number of timers "
                 "(an ordered list, or a scan of every entry, grows quadratically; timer_wheel.h contracts 4 and 5)",
                 ratio, n, small / 1e6, big / 1e6, bound, base);
}

/* The real-time sleep's lateness, generously: serial, nothing else running. */
LAB_TEST(timer_perf, real_sleep_lateness, 10)
{
    struct parker *p = parker_new();
    cr_assert_not_null(p, "parker_new failed");
    struct time_driver *td = time_driver_new(parker_driver(p));
    struct executor *ex = executor_new(time_driver_driver(td));
    cr_assert(td && ex, "time_driver_new or executor_new failed");
    uint64_t worst = 0;
    for (int i = 0; i < 3; i++) {
        struct sleep sl = sleep_for(td, 200 * MS_NS);
        uint64_t deadline = sl.deadline_ns;
        enum executor_status st = executor_block_on(ex, sleep_future(&sl), NULL);
        uint64_t end = monotonic_ns();
        cr_assert_eq(st, EXECUTOR_OK, "block_on(sleep 200 ms) ended with %s", executor_status_str(st));
        cr_assert_geq(end, deadline, "a 200 ms sleep ended early (sleep.h contract 1)");
        if (end - deadline > worst)
            worst = end - deadline;
    }
    lab_note("200 ms sleep, worst of 3: %.3f ms late", worst / 1e6);
    cr_assert_lt(worst, 50 * MS_NS, "a 200 ms sleep ended %.1f ms late (allowed: 50 ms): an idle driver must park "
                 "until the next expiration and fire then (time_driver.h contracts 1 and 5)", worst / 1e6);
    executor_free(ex);
    time_driver_free(td);
    parker_release(p);
}
