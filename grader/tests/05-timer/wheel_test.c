/* wheel_test.c - the timer wheel alone, in virtual time (numbers, no clock). */
#include <stdlib.h>

#include "stage05.h"

LAB_SUITE(timer_wheel, 10);

static struct timer_wheel *new_wheel(void)
{
    struct timer_wheel *w = timer_wheel_new(ORIGIN_NS);
    cr_assert_not_null(w, "timer_wheel_new returned NULL");
    return w;
}

/* n timers (their log made here), timer i due at a random time within
 * spans[i % nspans] after ORIGIN_NS, each inserted; free the array. */
static struct rec_timer *random_timers(struct timer_wheel *w, struct rec_log *log, unsigned n, uint64_t *rng,
                                       const uint64_t *spans, unsigned nspans)
{
    rec_log_init(log, n);
    struct rec_timer *t = calloc(n, sizeof *t);
    cr_assert_not_null(t, "out of memory in the test itself");
    for (unsigned i = 0; i < n; i++) {
        rec_timer_init(&t[i], log, (int)i, ORIGIN_NS + 1 + lab_rand(rng) % spans[i % nspans]);
        timer_wheel_insert(w, &t[i].entry, t[i].deadline);
    }
    return t;
}

LAB_TEST(timer_wheel, empty_wheel, 5)
{
    struct timer_wheel *w = new_wheel();
    cr_assert_eq(timer_wheel_len(w), 0, "a new wheel holds %zu timers; expected 0", timer_wheel_len(w));
    cr_assert_eq(timer_wheel_next_expiration(w), TIMER_WHEEL_NEVER,
                 "a new wheel's next expiration must be TIMER_WHEEL_NEVER");
    cr_assert_eq(timer_wheel_advance(w, ORIGIN_NS + DAY_NS, 0), 0, "advancing an empty wheel fired something");
    cr_assert_eq(timer_wheel_next_expiration(w), TIMER_WHEEL_NEVER,
                 "an empty wheel's next expiration must stay TIMER_WHEEL_NEVER after an advance");
    timer_wheel_free(w);
}

/* Deadlines on every level, inserted out of order, fire in deadline order,
 * each at exactly its deadline rounded up to the tick. */
LAB_TEST(timer_wheel, expiry_order_across_levels, 3) /* the reference: 0.08 s */
{
    static const uint64_t offs[] = {
        3 * DAY_NS + 5,          /* level 4 */
        70 * MS_NS,              /* level 1 */
        1,                       /* level 0, rounds up to 1 ms */
        5 * SEC_NS + 300000,     /* level 2 */
        40 * 60 * SEC_NS + 17,   /* level 3 */
        30 * DAY_NS + 999999,    /* level 5 */
        63 * MS_NS,              /* level 0, last slot */
        64 * MS_NS,              /* level 1, first slot */
        5 * HOUR_NS,             /* level 4 (just) */
        4095 * MS_NS + 1,        /* level 1 -> 2 boundary, rounded up */
    };
    enum { N = sizeof offs / sizeof offs[0] };
    struct timer_wheel *w = new_wheel();
    struct rec_log log;
    rec_log_init(&log, 64);
    log.now = ORIGIN_NS;
    struct rec_timer t[N];
    for (int i = 0; i < N; i++) {
        rec_timer_init(&t[i], &log, i, ORIGIN_NS + offs[i]);
        timer_wheel_insert(w, &t[i].entry, t[i].deadline);
    }
    cr_assert_eq(timer_wheel_len(w), N, "after %d inserts timer_wheel_len says %zu", N, timer_wheel_len(w));
    rec_run_to_empty(w, &log, 1000);
    cr_assert_eq(log.n, N, "%zu of %d timers fired while running the wheel to empty", log.n, N);
    for (size_t k = 0; k < log.n; k++) {
        int i = log.ids[k];
        if (k > 0)
            cr_assert_leq(t[log.ids[k - 1]].deadline, t[i].deadline,
                          "timers fired out of order: deadline +%llu ns fired after +%llu ns "
                          "(timer_wheel.h contract 3)",
                          (unsigned long long)(t[log.ids[k - 1]].deadline - ORIGIN_NS),
                          (unsigned long long)(t[i].deadline - ORIGIN_NS));
        cr_assert_eq(log.at[k], tick_up(t[i].deadline),
                     "a timer due at +%llu ns fired at +%llu ns; driven by next_expiration it must fire "
                     "exactly at its deadline rounded up to the tick (+%llu ns): %s",
                     (unsigned long long)(t[i].deadline - ORIGIN_NS),
                     (unsigned long long)(log.at[k] - ORIGIN_NS),
                     (unsigned long long)(tick_up(t[i].deadline) - ORIGIN_NS),
                     log.at[k] < tick_up(t[i].deadline)
                         ? "never before it (timer_wheel.h contract 1)"
                         : "next_expiration must not answer a time past it, and that advance must fire it "
                           "(timer_wheel.h contracts 5 and 2)");
    }
    rec_log_free(&log);
    timer_wheel_free(w);
}

/* The bound, exactly: advancing in arbitrary steps, a timer fires in the
 * first advance whose now is >= its deadline rounded up to the next 1 ms
 * tick, never in an earlier one. Hence never early, and late by less than
 * one tick (rounded-up deadline < deadline + 1 ms). */
LAB_TEST(timer_wheel, never_early_late_under_one_tick, 20)
{
    uint64_t rng = lab_seed();
    unsigned n = lab_scale(2000, 100);
    struct timer_wheel *w = new_wheel();
    struct rec_log log;
    /* sub-ms offsets, spread over levels 0..2 */
    static const uint64_t spans[] = { 64 * MS_NS, 4 * SEC_NS, 60 * SEC_NS };
    struct rec_timer *t = random_timers(w, &log, n, &rng, spans, 3);
    uint64_t prev = ORIGIN_NS, now = ORIGIN_NS;
    size_t seen = 0;
    while (timer_wheel_len(w) > 0) {
        now += lab_rand(&rng) % (3 * MS_NS); /* steps of 0 to 3 ms, in ns */
        rec_advance(w, &log, now);
        for (; seen < log.n; seen++) {
            struct rec_timer *x = &t[log.ids[seen]];
            cr_assert_geq(now, x->deadline, "a timer fired early: deadline +%llu ns, fired by an advance to +%llu ns; "
                          "it may fire only once now reaches its deadline rounded up to the tick "
                          "(timer_wheel.h contract 1)",
                          (unsigned long long)(x->deadline - ORIGIN_NS), (unsigned long long)(now - ORIGIN_NS));
            cr_assert_lt(prev, tick_up(x->deadline),
                         "a timer fired late: deadline +%llu ns (rounded up: +%llu ns) was already due at the "
                         "advance to +%llu ns, but fired only at the next one, +%llu ns (timer_wheel.h contract 2)",
                         (unsigned long long)(x->deadline - ORIGIN_NS),
                         (unsigned long long)(tick_up(x->deadline) - ORIGIN_NS),
                         (unsigned long long)(prev - ORIGIN_NS), (unsigned long long)(now - ORIGIN_NS));
        }
        prev = now;
    }
    cr_assert_eq(log.n, n, "%zu timers fired, %u were inserted", log.n, n);
    free(t);
    rec_log_free(&log);
    timer_wheel_free(w);
}

/* One nanosecond before the tick: not yet; at the tick: fired. */
LAB_TEST(timer_wheel, fires_at_the_tick_not_before, 5)
{
    struct timer_wheel *w = new_wheel();
    struct rec_log log;
    rec_log_init(&log, 4);
    struct rec_timer a;
    uint64_t d = ORIGIN_NS + 2 * SEC_NS + 250000; /* 2000.25 ms: rounds up to 2001 ms */
    rec_timer_init(&a, &log, 0, d);
    timer_wheel_insert(w, &a.entry, d);
    rec_advance(w, &log, d);
    cr_assert_eq(log.n, 0, "a timer fired at its exact deadline, which is not on a tick: it must wait for the tick "
                 "(timer_wheel.h contract 1)");
    rec_advance(w, &log, tick_up(d) - 1);
    cr_assert_eq(log.n, 0, "a timer fired 1 ns before its deadline's tick (timer_wheel.h contract 1)");
    cr_assert_eq(timer_wheel_next_expiration(w), tick_up(d),
                 "next expiration is +%llu ns; expected the deadline's tick, +%llu ns",
                 (unsigned long long)(timer_wheel_next_expiration(w) - ORIGIN_NS),
                 (unsigned long long)(tick_up(d) - ORIGIN_NS));
    rec_advance(w, &log, tick_up(d));
    cr_assert_eq(log.n, 1, "a timer did not fire at its deadline's tick (timer_wheel.h contract 2)");
    cr_assert_not(timer_entry_armed(&a.entry), "a fired entry still says it is armed");
    rec_log_free(&log);
    timer_wheel_free(w);
}

LAB_TEST(timer_wheel, cancel_before_fire, 5)
{
    struct timer_wheel *w = new_wheel();
    struct rec_log log;
    rec_log_init(&log, 4);
    struct rec_timer a, b;
    rec_timer_init(&a, &log, 0, ORIGIN_NS + 10 * MS_NS);
    rec_timer_init(&b, &log, 1, ORIGIN_NS + 20 * MS_NS);
    timer_wheel_insert(w, &a.entry, a.deadline);
    timer_wheel_insert(w, &b.entry, b.deadline);
    cr_assert(timer_wheel_cancel(w, &a.entry), "cancelling an armed timer must return true "
              "(timer_wheel.h contract 8)");
    cr_assert_eq(timer_wheel_len(w), 1, "after one cancel of two timers, len is %zu; expected 1", timer_wheel_len(w));
    cr_assert_eq(timer_wheel_next_expiration(w), tick_up(b.deadline),
                 "after cancelling the earlier of two timers, the next expiration was not the later one's tick: "
                 "the wheel still answered for the cancelled timer's slot (timer_wheel.h contracts 5 and 8)");
    cr_assert(timer_wheel_cancel(w, &b.entry), "cancelling an armed timer must return true "
              "(timer_wheel.h contract 8)");
    cr_assert_eq(timer_wheel_next_expiration(w), TIMER_WHEEL_NEVER,
                 "with every timer cancelled, the next expiration was not NEVER: the wheel still answered for a "
                 "slot whose timers were all cancelled (timer_wheel.h contracts 5 and 8)");
    rec_advance(w, &log, ORIGIN_NS + SEC_NS);
    cr_assert_eq(log.n, 0, "a cancelled timer fired (timer_wheel.h contract 8)");
    rec_log_free(&log);
    timer_wheel_free(w);
}

LAB_TEST(timer_wheel, cancel_after_fire_and_twice, 5)
{
    struct timer_wheel *w = new_wheel();
    struct rec_log log;
    rec_log_init(&log, 4);
    struct rec_timer a, b, c;
    rec_timer_init(&a, &log, 0, ORIGIN_NS + 10 * MS_NS);
    rec_timer_init(&b, &log, 1, ORIGIN_NS + 10 * MS_NS);
    rec_timer_init(&c, &log, 2, ORIGIN_NS + 10 * MS_NS);
    cr_assert_not(timer_wheel_cancel(w, &c.entry), "cancelling a timer never inserted must return false");
    timer_wheel_insert(w, &a.entry, a.deadline);
    timer_wheel_insert(w, &b.entry, b.deadline);
    cr_assert(timer_wheel_cancel(w, &b.entry), "cancelling an armed timer must return true "
              "(timer_wheel.h contract 8)");
    cr_assert_not(timer_wheel_cancel(w, &b.entry), "cancelling a timer twice: the second cancel must return false");
    cr_assert_eq(timer_wheel_len(w), 1, "a second cancel changed the count: len %zu, expected 1", timer_wheel_len(w));
    rec_advance(w, &log, ORIGIN_NS + 10 * MS_NS);
    cr_assert_eq(log.n, 1, "%zu timers fired; expected 1", log.n);
    cr_assert_not(timer_wheel_cancel(w, &a.entry), "cancelling a timer after it fired must return false");
    cr_assert_eq(timer_wheel_len(w), 0, "cancel after fire changed the count: len %zu", timer_wheel_len(w));
    cr_assert_eq(timer_wheel_next_expiration(w), TIMER_WHEEL_NEVER, "an empty wheel's next expiration must be NEVER");
    rec_log_free(&log);
    timer_wheel_free(w);
}

LAB_TEST(timer_wheel, rearm_moves_and_refires, 5)
{
    struct timer_wheel *w = new_wheel();
    struct rec_log log;
    rec_log_init(&log, 4);
    struct rec_timer a;
    rec_timer_init(&a, &log, 0, 0);
    timer_wheel_insert(w, &a.entry, ORIGIN_NS + 5 * SEC_NS);
    timer_wheel_insert(w, &a.entry, ORIGIN_NS + 10 * MS_NS); /* moves it */
    cr_assert_eq(timer_wheel_len(w), 1, "re-inserting an armed timer must move it, not add a second: len %zu "
                 "(timer_wheel.h contract 9)",
                 timer_wheel_len(w));
    cr_assert_eq(timer_wheel_next_expiration(w), ORIGIN_NS + 10 * MS_NS,
                 "after moving a timer from 5 s to 10 ms the next expiration must be 10 ms (timer_wheel.h contract 9)");
    rec_advance(w, &log, ORIGIN_NS + 10 * MS_NS);
    cr_assert_eq(log.n, 1, "the moved timer did not fire at its new deadline");
    timer_wheel_insert(w, &a.entry, ORIGIN_NS + 30 * MS_NS); /* re-arm after fire */
    cr_assert_eq(timer_wheel_len(w), 1, "a timer re-armed after firing must count once: len %zu", timer_wheel_len(w));
    rec_advance(w, &log, ORIGIN_NS + 6 * SEC_NS);
    cr_assert_eq(log.n, 2, "a timer re-armed after firing fired %zu times in total; expected 2 "
                 "(the old 5 s placement must be gone: timer_wheel.h contract 9)", log.n);
    rec_log_free(&log);
    timer_wheel_free(w);
}

/* The other way: a timer moved later, from level 0 to a higher level, must
 * not fire at its old deadline, and the old slot must not stay marked. */
LAB_TEST(timer_wheel, rearm_later_waits, 5)
{
    struct timer_wheel *w = new_wheel();
    struct rec_log log;
    rec_log_init(&log, 4);
    struct rec_timer a;
    rec_timer_init(&a, &log, 0, 0);
    timer_wheel_insert(w, &a.entry, ORIGIN_NS + 10 * MS_NS);
    timer_wheel_insert(w, &a.entry, ORIGIN_NS + 5 * SEC_NS); /* moves it later */
    cr_assert_eq(timer_wheel_len(w), 1, "re-inserting an armed timer must move it, not add a second: len %zu "
                 "(timer_wheel.h contract 9)", timer_wheel_len(w));
    uint64_t next = timer_wheel_next_expiration(w);
    cr_assert(next > ORIGIN_NS + 10 * MS_NS && next <= ORIGIN_NS + 5 * SEC_NS, "after moving a timer from 10 ms to "
              "5 s the next expiration was %.3f s after the origin; expected after 10 ms and by 5 s (timer_wheel.h "
              "contract 9: the old placement is gone)", (double)(next - ORIGIN_NS) / 1e9);
    rec_advance(w, &log, ORIGIN_NS + 10 * MS_NS);
    cr_assert_eq(log.n, 0, "a timer moved from 10 ms to 5 s fired at 10 ms, its old deadline (timer_wheel.h "
                 "contract 9: re-inserting moves it)");
    rec_advance(w, &log, ORIGIN_NS + 5 * SEC_NS);
    cr_assert_eq(log.n, 1, "a timer moved from 10 ms to 5 s fired %zu times by 5 s; expected once (timer_wheel.h "
                 "contract 9)", log.n);
    cr_assert_eq(timer_wheel_len(w), 0, "len %zu after the only timer fired", timer_wheel_len(w));
    rec_log_free(&log);
    timer_wheel_free(w);
}

LAB_TEST(timer_wheel, many_timers_one_slot, 20)
{
    unsigned n = lab_scale(100000, 1000);
    struct timer_wheel *w = new_wheel();
    struct rec_log log;
    rec_log_init(&log, n);
    struct rec_timer *t = calloc(n, sizeof *t);
    cr_assert_not_null(t, "out of memory in the test itself");
    uint64_t d = ORIGIN_NS + 37 * MS_NS;
    for (unsigned i = 0; i < n; i++) {
        rec_timer_init(&t[i], &log, (int)i, d);
        timer_wheel_insert(w, &t[i].entry, d);
    }
    cr_assert_eq(timer_wheel_len(w), n, "len %zu after %u inserts", timer_wheel_len(w), n);
    cr_assert_eq(timer_wheel_next_expiration(w), d, "next expiration of %u timers at 37 ms is wrong", n);
    /* cancel every third */
    unsigned cancelled = 0;
    for (unsigned i = 0; i < n; i += 3) {
        cr_assert(timer_wheel_cancel(w, &t[i].entry), "cancel of an armed timer returned false");
        cancelled++;
    }
    rec_advance(w, &log, d - 1);
    cr_assert_eq(log.n, 0, "timers fired 1 ns before their tick");
    size_t fired = rec_advance(w, &log, d);
    cr_assert_eq(fired, n - cancelled, "one advance fired %zu of %u due timers; an advance fires every due timer, "
                 "however many share a slot (timer_wheel.h contract 2)", fired, n - cancelled);
    cr_assert_eq(log.n, n - cancelled, "%zu callbacks ran; expected %u", log.n, n - cancelled);
    for (size_t k = 0; k < log.n; k++)
        cr_assert_neq(log.ids[k] % 3, 0, "a cancelled timer (id %d) fired", log.ids[k]);
    cr_assert_eq(timer_wheel_len(w), 0, "len %zu after everything fired", timer_wheel_len(w));
    free(t);
    rec_log_free(&log);
    timer_wheel_free(w);
}

/* Deadlines days away start high and cascade through every level below,
 * and still fire exactly on their tick. */
LAB_TEST(timer_wheel, cascades_through_every_level, 3) /* the reference: 0.08 s */
{
    static const uint64_t offs[] = {
        100 * DAY_NS + 3 * HOUR_NS + 7 * MS_NS + 1, /* level 5 */
        3 * DAY_NS + 17 * MS_NS + 500000,            /* level 4 */
        2 * HOUR_NS + 1,                             /* level 3 */
    };
    for (unsigned k = 0; k < sizeof offs / sizeof offs[0]; k++) {
        struct timer_wheel *w = new_wheel();
        struct rec_log log;
        rec_log_init(&log, 4);
        log.now = ORIGIN_NS;
        struct rec_timer a;
        rec_timer_init(&a, &log, 0, ORIGIN_NS + offs[k]);
        timer_wheel_insert(w, &a.entry, a.deadline);
        int level = timer_wheel_test_level(w, &a.entry), first = level;
        bool visited[TIMER_WHEEL_LEVELS] = { false };
        visited[level] = true;
        unsigned jumps = 0;
        while (timer_entry_armed(&a.entry) && jumps < 100) {
            uint64_t next = timer_wheel_next_expiration(w);
            cr_assert_leq(next, tick_up(a.deadline), "next expiration +%llu ns lies after the only timer's deadline "
                          "+%llu ns: a driver parking until then would oversleep (timer_wheel.h contract 5)",
                          (unsigned long long)(next - ORIGIN_NS), (unsigned long long)(a.deadline - ORIGIN_NS));
            rec_advance(w, &log, next);
            jumps++;
            if (timer_entry_armed(&a.entry)) {
                int l = timer_wheel_test_level(w, &a.entry);
                cr_assert_lt(l, level, "after its slot came round the timer stayed at level %d (was %d): "
                             "the cascade left it where it was (timer_wheel.h contract 2)", l, level);
                level = l;
                visited[l] = true;
            }
        }
        cr_assert_eq(log.n, 1, "a timer %llu ns away did not fire after %u jumps",
                     (unsigned long long)offs[k], jumps);
        cr_assert_eq(log.at[0], tick_up(a.deadline), "a timer %llu ns away fired at +%llu ns; expected +%llu ns, "
                     "%s",
                     (unsigned long long)offs[k], (unsigned long long)(log.at[0] - ORIGIN_NS),
                     (unsigned long long)(tick_up(a.deadline) - ORIGIN_NS),
                     log.at[0] < tick_up(a.deadline)
                         ? "its tick: cascading moves it down a level, never fires it before its tick "
                           "(timer_wheel.h contract 1)"
                         : "the first advance at or past its tick (timer_wheel.h contract 2)");
        cr_assert_leq(jumps, (unsigned)first + 1, "%u jumps for a timer starting at level %d: a cascade should "
                      "take it down at least one level per jump", jumps, first);
        (void)visited;
        rec_log_free(&log);
        timer_wheel_free(w);
    }
}

/* Beyond 2^36 ms (~2.2 years): kept exactly, never fired early. */
LAB_TEST(timer_wheel, beyond_the_range, 3)
{
    struct timer_wheel *w = new_wheel();
    struct rec_log log;
    rec_log_init(&log, 4);
    log.now = ORIGIN_NS;
    struct rec_timer a, b;
    uint64_t far = ORIGIN_NS + 5 * 365 * DAY_NS + 12345;
    rec_timer_init(&a, &log, 0, far);
    rec_timer_init(&b, &log, 1, ORIGIN_NS + 10 * MS_NS);
    timer_wheel_insert(w, &a.entry, far);
    timer_wheel_insert(w, &b.entry, b.deadline);
    unsigned jumps = rec_run_to_empty(w, &log, 1000);
    cr_assert_eq(log.n, 2, "%zu of 2 timers fired after %u jumps (one 5 years away)", log.n, jumps);
    cr_assert_eq(log.ids[1], 0, "the 5-year timer fired before the 10 ms one (timer_wheel.h contract 6)");
    cr_assert_eq(log.at[1], tick_up(far), "a timer 5 years away, beyond the wheel's range, fired at +%llu ns, %s its "
                 "tick +%llu ns (timer_wheel.h contract 6: it keeps its exact deadline); the next hint: make hint "
                 "STAGE=5 ITEM=cascade", (unsigned long long)(log.at[1] - ORIGIN_NS),
                 log.at[1] < tick_up(far) ? "before" : "after", (unsigned long long)(tick_up(far) - ORIGIN_NS));
    rec_log_free(&log);
    timer_wheel_free(w);
}

/* ---- inserting while firing ------------------------------------------------ */

struct rearmer {
    struct timer_entry entry;
    struct timer_wheel *w;
    uint64_t *now;
    uint64_t step;     /* re-arm at now + step */
    unsigned fires, max;
    uint64_t at[8];
};

static void rearm_fire(struct timer_entry *e, void *arg)
{
    struct rearmer *r = arg;
    if (r->fires < 8)
        r->at[r->fires] = *r->now;
    r->fires++;
    if (r->fires < r->max)
        timer_wheel_insert(r->w, e, *r->now + r->step);
}

/* A callback that re-arms 64 ms later hits the same level-0 slot index as the
 * one being drained: it must wait a full turn, not fire again now. */
LAB_TEST(timer_wheel, rearm_from_callback, 5)
{
    struct timer_wheel *w = new_wheel();
    uint64_t now = ORIGIN_NS;
    struct rearmer r = { .w = w, .now = &now, .step = 64 * MS_NS, .max = 3 };
    timer_entry_init(&r.entry, rearm_fire, &r);
    timer_wheel_insert(w, &r.entry, ORIGIN_NS + 5 * MS_NS);
    now = ORIGIN_NS + 5 * MS_NS;
    size_t fired = timer_wheel_advance(w, now, 0);
    cr_assert_eq(fired, 1, "an advance fired %zu times; a timer re-armed 64 ms ahead from its callback "
                 "must not fire again in the same advance (timer_wheel.h contract 7)", fired);
    cr_assert(timer_entry_armed(&r.entry), "a timer re-armed from its own callback is not armed");
    uint64_t next = timer_wheel_next_expiration(w);
    cr_assert(next > now && next <= ORIGIN_NS + 69 * MS_NS,
              "after a re-arm at +69 ms from a callback at +5 ms, next expiration is +%llu ns; expected after "
              "+5 ms and no later than +69 ms", (unsigned long long)(next - ORIGIN_NS));
    now = ORIGIN_NS + 68 * MS_NS;
    timer_wheel_advance(w, now, 0);
    cr_assert_eq(r.fires, 1, "the re-armed timer fired early, at +68 ms");
    now = ORIGIN_NS + 69 * MS_NS;
    timer_wheel_advance(w, now, 0);
    cr_assert_eq(r.fires, 2, "the re-armed timer did not fire at +69 ms");
    now = ORIGIN_NS + SEC_NS;
    timer_wheel_advance(w, now, 0);
    cr_assert_eq(r.fires, 3, "the twice re-armed timer fired %u times in all; expected 3", r.fires);
    cr_assert_eq(r.at[2], ORIGIN_NS + SEC_NS, "third fire at the wrong time");
    cr_assert_eq(timer_wheel_len(w), 0, "len %zu after the last fire", timer_wheel_len(w));
    timer_wheel_free(w);
}

/* A callback that re-arms at "now" (already due) fires in the next advance,
 * not this one, and next_expiration says it is due. */
LAB_TEST(timer_wheel, rearm_due_from_callback, 5)
{
    struct timer_wheel *w = new_wheel();
    uint64_t now = ORIGIN_NS;
    struct rearmer r = { .w = w, .now = &now, .step = 0, .max = 3 };
    timer_entry_init(&r.entry, rearm_fire, &r);
    timer_wheel_insert(w, &r.entry, ORIGIN_NS + 3 * MS_NS);
    now = ORIGIN_NS + 3 * MS_NS;
    size_t fired = timer_wheel_advance(w, now, 0);
    cr_assert_eq(fired, 1, "one advance fired %zu times: a timer re-armed as already due from its callback "
                 "must wait for the next advance, else a callback can loop an advance forever "
                 "(timer_wheel.h contract 7)", fired);
    cr_assert_leq(timer_wheel_next_expiration(w), now,
                  "a timer re-armed as already due must make next_expiration <= now (timer_wheel.h contract 5)");
    fired = timer_wheel_advance(w, now, 0);
    cr_assert_eq(fired, 1, "the due re-armed timer did not fire in the next advance (fired %zu; "
                 "timer_wheel.h contract 7)", fired);
    fired = timer_wheel_advance(w, now, 0);
    cr_assert_eq(fired, 1, "the due re-armed timer did not fire in the next advance (fired %zu; "
                 "timer_wheel.h contract 7)", fired);
    cr_assert_eq(timer_wheel_len(w), 0, "len %zu at the end", timer_wheel_len(w));
    timer_wheel_free(w);
}

struct canceller {
    struct timer_entry entry;
    struct timer_wheel *w;
    struct timer_entry *victim;
    bool cancelled;
    unsigned fires;
};

static void cancel_fire(struct timer_entry *e, void *arg)
{
    (void)e;
    struct canceller *c = arg;
    c->fires++;
    if (c->victim)
        c->cancelled = timer_wheel_cancel(c->w, c->victim);
}

LAB_TEST(timer_wheel, callback_cancels_a_sibling, 5)
{
    struct timer_wheel *w = new_wheel();
    struct canceller a = { .w = w }, b = { .w = w };
    a.victim = &b.entry;
    b.victim = &a.entry;
    timer_entry_init(&a.entry, cancel_fire, &a);
    timer_entry_init(&b.entry, cancel_fire, &b);
    timer_wheel_insert(w, &a.entry, ORIGIN_NS + 70 * MS_NS); /* the same level-1 slot, then the same tick */
    timer_wheel_insert(w, &b.entry, ORIGIN_NS + 70 * MS_NS);
    timer_wheel_advance(w, ORIGIN_NS + 80 * MS_NS, 0);
    cr_assert_eq(a.fires + b.fires, 1, "two timers on one tick, the first cancels the second from its callback: "
                 "%u fired; expected exactly 1", a.fires + b.fires);
    cr_assert(a.cancelled || b.cancelled, "the cancel from inside a callback returned false for an armed sibling");
    cr_assert_eq(timer_wheel_len(w), 0, "len %zu at the end", timer_wheel_len(w));
    cr_assert_eq(timer_wheel_next_expiration(w), TIMER_WHEEL_NEVER, "next expiration of an empty wheel");
    timer_wheel_free(w);
}

LAB_TEST(timer_wheel, advance_limit, 5)
{
    struct timer_wheel *w = new_wheel();
    struct rec_log log;
    rec_log_init(&log, 16);
    struct rec_timer t[10];
    for (int i = 0; i < 10; i++) {
        rec_timer_init(&t[i], &log, i, ORIGIN_NS + (uint64_t)(1 + i % 2) * MS_NS);
        timer_wheel_insert(w, &t[i].entry, t[i].deadline);
    }
    log.now = ORIGIN_NS + 5 * MS_NS;
    size_t a = timer_wheel_advance(w, log.now, 3), b = timer_wheel_advance(w, log.now, 3);
    size_t c = timer_wheel_advance(w, log.now, 3), d = timer_wheel_advance(w, log.now, 3);
    cr_assert(a == 3 && b == 3 && c == 3 && d == 1, "advance with limit 3 over 10 due timers fired %zu, %zu, %zu, %zu; "
              "expected 3, 3, 3, 1", a, b, c, d);
    for (size_t k = 1; k < log.n; k++)
        cr_assert_leq(t[log.ids[k - 1]].deadline, t[log.ids[k]].deadline, "limited advances fired out of order");
    rec_log_free(&log);
    timer_wheel_free(w);
}

/* ---- the next expiration against a brute-force model ---------------------- */

/* For every operation, the model keeps the exact set of armed deadlines. What
 * any correct wheel must answer, from the contract:
 *   - NEVER exactly when nothing is armed;
 *   - never after the earliest rounded-up deadline (a driver would oversleep);
 *   - not before the start of the slot holding it: the earliest deadline's
 *     tick, truncated to the slot width of its level (the highest 6-bit group
 *     in which it differs from the wheel's time); on level 0 that is exact;
 *   - an advance fires exactly the timers whose rounded deadline is <= now. */
LAB_TEST(timer_wheel, next_expiration_matches_model, 20)
{
    uint64_t rng = lab_seed();
    unsigned n = 512, ops = lab_scale(40000, 2000);
    struct timer_wheel *w = new_wheel();
    struct rec_log log;
    rec_log_init(&log, 1);
    struct rec_timer *t = calloc(n, sizeof *t);
    bool *armed = calloc(n, sizeof *armed);
    cr_assert(t && armed, "out of memory in the test itself");
    for (unsigned i = 0; i < n; i++)
        rec_timer_init(&t[i], &log, (int)i, 0);
    uint64_t now = ORIGIN_NS;           /* the latest advance */
    uint64_t elapsed = 0;               /* its tick */
    for (unsigned op = 0; op < ops; op++) {
        unsigned i = (unsigned)(lab_rand(&rng) % n);
        unsigned kind = (unsigned)(lab_rand(&rng) % 10);
        const char *what;
        if (kind < 5) {
            static const uint64_t spans[] = { 64 * MS_NS, 4 * SEC_NS, 262 * SEC_NS, 4 * HOUR_NS, 12 * DAY_NS, 700 * DAY_NS };
            uint64_t span = spans[lab_rand(&rng) % 6];
            t[i].deadline = now + 1 + lab_rand(&rng) % span;
            timer_wheel_insert(w, &t[i].entry, t[i].deadline);
            armed[i] = true;
            what = "insert";
        } else if (kind < 8) {
            bool r = timer_wheel_cancel(w, &t[i].entry);
            cr_assert_eq(r, armed[i], "cancel returned %d for a timer that was %s", r, armed[i] ? "armed" : "not armed");
            armed[i] = false;
            what = "cancel";
        } else {
            uint64_t step = (kind == 8) ? lab_rand(&rng) % (3 * MS_NS) : lab_rand(&rng) % (2 * SEC_NS);
            now += step;
            elapsed = (now - ORIGIN_NS) / MS_NS;
            log.n = 0;
            log.now = now;
            size_t fired = timer_wheel_advance(w, now, 0);
            size_t expect = 0;
            for (unsigned j = 0; j < n; j++) {
                if (armed[j] && tick_up(t[j].deadline) <= now) {
                    cr_assert_not(timer_entry_armed(&t[j].entry), "op %u: a timer due at +%llu ns did not fire in "
                                  "an advance to +%llu ns (timer_wheel.h contract 2)", op,
                                  (unsigned long long)(t[j].deadline - ORIGIN_NS),
                                  (unsigned long long)(now - ORIGIN_NS));
                    armed[j] = false;
                    expect++;
                } else if (armed[j]) {
                    cr_assert(timer_entry_armed(&t[j].entry), "op %u: a timer due at +%llu ns fired early, in an "
                              "advance to +%llu ns (timer_wheel.h contract 1)", op,
                              (unsigned long long)(t[j].deadline - ORIGIN_NS),
                              (unsigned long long)(now - ORIGIN_NS));
                }
            }
            cr_assert_eq(fired, expect, "op %u: advance fired %zu timers; %zu were due (timer_wheel.h contracts 1 "
                         "and 2)", op, fired, expect);
            what = "advance";
        }
        size_t count = 0;
        uint64_t min_tick = UINT64_MAX;
        for (unsigned j = 0; j < n; j++) {
            if (!armed[j])
                continue;
            count++;
            uint64_t tk = (tick_up(t[j].deadline) - ORIGIN_NS) / MS_NS;
            if (tk < min_tick)
                min_tick = tk;
        }
        cr_assert_eq(timer_wheel_len(w), count, "op %u (%s): timer_wheel_len says %zu, %zu are armed", op, what,
                     timer_wheel_len(w), count);
        uint64_t next = timer_wheel_next_expiration(w);
        if (count == 0) {
            cr_assert_eq(next, TIMER_WHEEL_NEVER, "op %u (%s): nothing armed, but next expiration is not NEVER "
                         "(timer_wheel.h contract 5)", op, what);
            continue;
        }
        cr_assert_neq(next, TIMER_WHEEL_NEVER, "op %u (%s): %zu armed, but next expiration is NEVER "
                      "(timer_wheel.h contract 5)", op, what, count);
        uint64_t hi = ORIGIN_NS + min_tick * MS_NS;
        cr_assert_leq(next, hi, "op %u (%s): next expiration +%llu ns is after the earliest deadline's tick "
                      "+%llu ns: a driver parking until then oversleeps it (timer_wheel.h contract 5)",
                      op, what, (unsigned long long)(next - ORIGIN_NS), (unsigned long long)(hi - ORIGIN_NS));
        uint64_t diff = (elapsed ^ min_tick) | 63;
        int level = diff >= TIMER_WHEEL_RANGE_TICKS ? TIMER_WHEEL_LEVELS - 1 : (63 - __builtin_clzll(diff)) / 6;
        uint64_t width = UINT64_C(1) << (6 * level);
        uint64_t lo_tick = min_tick / width * width;
        if (lo_tick < elapsed)
            lo_tick = elapsed;
        uint64_t lo = ORIGIN_NS + lo_tick * MS_NS;
        cr_assert_geq(next, lo, "op %u (%s): next expiration +%llu ns is before the start of the earliest timer's "
                      "slot (+%llu ns, level %d): it must be the time of the earliest non-empty slot, never an "
                      "emptied one's (timer_wheel.h contract 5)", op, what, (unsigned long long)(next - ORIGIN_NS),
                      (unsigned long long)(lo - ORIGIN_NS), level);
    }
    for (unsigned i = 0; i < n; i++)
        timer_wheel_cancel(w, &t[i].entry);
    free(t);
    free(armed);
    rec_log_free(&log);
    timer_wheel_free(w);
}

/* Few advances, each over many slots of every level below the hours': the
 * timers due by an advance all fire in it, and in the order of their
 * rounded deadlines, whichever slot of whichever level held them. They are
 * inserted in a random order, so no slot's list is in deadline order by
 * luck. */
LAB_TEST(timer_wheel, one_advance_fires_in_deadline_order, 10)
{
    uint64_t rng = lab_seed();
    unsigned n = lab_scale(3000, 300);
    static const uint64_t spans[] = { 64 * MS_NS, 4 * SEC_NS, 262 * SEC_NS, 4 * HOUR_NS };
    struct timer_wheel *w = new_wheel();
    struct rec_log log;
    struct rec_timer *t = random_timers(w, &log, n, &rng, spans, 4);
    uint64_t now = ORIGIN_NS;
    size_t from = 0;
    for (int step = 0; step < 5 && timer_wheel_len(w) > 0; step++) {
        uint64_t before = now;
        now += step < 4 ? 1 + lab_rand(&rng) % (2 * HOUR_NS) : 4 * HOUR_NS;
        rec_advance(w, &log, now);
        for (size_t k = from + 1; k < log.n; k++) {
            uint64_t a = tick_up(t[log.ids[k - 1]].deadline), b = tick_up(t[log.ids[k]].deadline);
            cr_assert_leq(a, b, "one advance, from +%.3f s to +%.3f s, fired %zu timers; the timer due at "
                          "+%.3f s (rounded to the tick) fired after one due at +%.3f s. Which timers fire in one "
                          "advance, and in what order (timer_wheel.h contract 3)? Where did each of those two "
                          "wait, and what did the advance know of each deadline when it fired it?",
                          (before - ORIGIN_NS) / 1e9, (now - ORIGIN_NS) / 1e9, log.n - from,
                          (b - ORIGIN_NS) / 1e9, (a - ORIGIN_NS) / 1e9);
        }
        for (size_t k = from; k < log.n; k++)
            cr_assert_geq(now, t[log.ids[k]].deadline, "a timer due at +%.3f s fired in an advance to +%.3f s "
                          "(timer_wheel.h contract 1)", (t[log.ids[k]].deadline - ORIGIN_NS) / 1e9,
                          (now - ORIGIN_NS) / 1e9);
        from = log.n;
    }
    cr_assert_eq(log.n, n, "%zu of %u timers fired in advances that passed every deadline (timer_wheel.h "
                 "contract 2)", log.n, n);
    free(t);
    rec_log_free(&log);
    timer_wheel_free(w);
}
