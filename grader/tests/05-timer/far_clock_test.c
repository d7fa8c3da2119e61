/* far_clock_test.c - stage 05: deadlines on a clock far from zero, across
 * 2^63 ns and past the wheel's full range (2^36 ticks, ~2.2 years) several
 * times over.
 *
 * The other tests start every clock at ORIGIN_NS (1000 s): a wheel or a
 * time driver that keeps times in a signed 64-bit integer, or that forgets
 * its elapsed ticks pass 2^36, passes them all. Here the clock starts one
 * and a half wheel ranges before 2^63 ns (about 292 years), so the run
 * crosses 2^63 (where an int64_t turns negative) and the wheel's time
 * crosses whole multiples of its range (where level 5's slots come round). */
#include <stdlib.h>

#include "stage05.h"

LAB_SUITE(far_clock, 10);

#define RANGE_NS (TIMER_WHEEL_RANGE_TICKS * TIMER_WHEEL_TICK_NS)
#define SIGN_NS (UINT64_C(1) << 63)
#define FAR_ORIGIN_NS (SIGN_NS - RANGE_NS - RANGE_NS / 2 + 777) /* off the ms grid too */

/* The tick boundary at or after t, on the grid of origin o. */
static uint64_t tick_up_from(uint64_t o, uint64_t t)
{
    if (t <= o)
        return o;
    uint64_t d = t - o;
    return o + (d + MS_NS - 1) / MS_NS * MS_NS;
}

/* Offsets from the origin: every level, the far end, across 2^63, and two
 * and three wheel ranges out (beyond the range: parked and re-inserted). */
static const uint64_t offsets[] = {
    1 * MS_NS,
    63 * MS_NS + 5,
    64 * MS_NS,
    5 * SEC_NS,
    HOUR_NS + 1,
    3 * DAY_NS,
    100 * DAY_NS,
    RANGE_NS - MS_NS,
    RANGE_NS + 5 * MS_NS,
    SIGN_NS - FAR_ORIGIN_NS - 1,     /* 1 ns before 2^63 */
    SIGN_NS - FAR_ORIGIN_NS,         /* 2^63 */
    SIGN_NS - FAR_ORIGIN_NS + MS_NS, /* just after */
    2 * RANGE_NS + 3 * HOUR_NS,
    3 * RANGE_NS - 1,
};
enum { N = sizeof offsets / sizeof offsets[0] };

static void expect_fired_on_time(struct rec_log *log, const uint64_t *deadline, uint64_t origin, size_t n,
                                 const char *where)
{
    cr_assert_eq(log->n, n, "%zu of %zu timers fired %s", log->n, n, where);
    uint64_t last = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t d = deadline[log->ids[i]], due = tick_up_from(origin, d);
        cr_assert_geq(log->at[i], d, "a timer with deadline origin + %llu ns fired %llu ns early %s "
                      "(never early: timer_wheel.h, contract 1)", (unsigned long long)(d - origin),
                      (unsigned long long)(d - log->at[i]), where);
        cr_assert_eq(log->at[i], due, "a timer with deadline origin + %llu ns fired at origin + %llu ns, not on "
                     "its tick (origin + %llu ns) %s (on its tick, a far one too: timer_wheel.h, contracts 1 and 6)",
                     (unsigned long long)(d - origin),
                     (unsigned long long)(log->at[i] - origin), (unsigned long long)(due - origin), where);
        cr_assert_geq(log->at[i], last, "timers fired out of deadline order %s", where);
        last = log->at[i];
    }
}

/* The wheel alone: timers across 2^63 and three wheel ranges, run to empty
 * the way a driver runs it; then, with the wheel's time past three ranges,
 * short timers again on every level. */
LAB_TEST(far_clock, wheel_across_the_sign_bit_and_its_range, 10)
{
    struct timer_wheel *w = timer_wheel_new(FAR_ORIGIN_NS);
    cr_assert_not_null(w, "timer_wheel_new returned NULL");
    struct rec_log log;
    rec_log_init(&log, 2 * N);
    log.now = FAR_ORIGIN_NS;
    struct rec_timer t[N];
    uint64_t deadline[N];
    for (int i = 0; i < N; i++) {
        deadline[i] = FAR_ORIGIN_NS + offsets[i];
        rec_timer_init(&t[i], &log, i, deadline[i]);
        timer_wheel_insert(w, &t[i].entry, deadline[i]);
    }
    unsigned jumps = rec_run_to_empty(w, &log, 10000);
    cr_assert_eq(timer_wheel_len(w), 0, "after %u jumps to the next expiration, %zu timers were still armed",
                 jumps, timer_wheel_len(w));
    expect_fired_on_time(&log, deadline, FAR_ORIGIN_NS, N, "on a clock that starts 1.5 wheel ranges before 2^63 ns");

    /* the wheel's time is now ~3 ranges (3 * 2^36 ticks) past its origin */
    uint64_t now = log.now;
    log.n = 0;
    for (int i = 0; i < N; i++) {
        deadline[i] = now + offsets[i % 9]; /* the short ones, up to just past one range */
        rec_timer_init(&t[i], &log, i, deadline[i]);
        timer_wheel_insert(w, &t[i].entry, deadline[i]);
    }
    jumps = rec_run_to_empty(w, &log, 10000);
    cr_assert_eq(timer_wheel_len(w), 0, "after %u jumps, %zu timers were still armed", jumps, timer_wheel_len(w));
    expect_fired_on_time(&log, deadline, FAR_ORIGIN_NS, N, "inserted after the wheel's time passed 3 times its range");
    rec_log_free(&log);
    timer_wheel_free(w);
}

/* Sleeps on an executor over a virtual clock at FAR_ORIGIN_NS: each ends at
 * or after its deadline and less than a tick after it, 2^63 included. */
LAB_TEST(far_clock, sleeps_across_the_sign_bit, 10)
{
    struct virtual_clock *vc = virtual_clock_new(FAR_ORIGIN_NS);
    cr_assert_not_null(vc, "out of memory in the test itself");
    struct time_driver *td = time_driver_new(virtual_clock_driver(vc));
    cr_assert_not_null(td, "time_driver_new returned NULL");
    struct executor *ex = executor_new(time_driver_driver(td));
    cr_assert_not_null(ex, "executor_new returned NULL");
    struct rec_log log;
    rec_log_init(&log, N);
    uint64_t deadline[N];
    struct join_handle *jh[N];
    for (int i = 0; i < N; i++) {
        deadline[i] = FAR_ORIGIN_NS + offsets[i];
        struct logged_sleep ls = logged_sleep_new(td, &log, i, deadline[i]);
        jh[i] = executor_spawn(ex, logged_sleep_future(&ls), NULL);
        cr_assert_not_null(jh[i], "executor_spawn returned NULL");
    }
    enum executor_status st = executor_run(ex);
    cr_assert_eq(st, EXECUTOR_OK, "run with sleeps across 2^63 ns ended with %s", executor_status_str(st));
    cr_assert_eq(log.n, N, "%zu of %d sleeps finished", log.n, N);
    for (size_t i = 0; i < log.n; i++) {
        uint64_t d = deadline[log.ids[i]];
        cr_assert_geq(log.at[i], d, "a sleep until origin + %llu ns (the clock started 1.5 wheel ranges before "
                      "2^63 ns) ended %llu ns early: a deadline across 2^63 ns was taken for one long past "
                      "(sleep.h; timer_wheel.h, contract 1); the next hint: make hint STAGE=5 ITEM=far-clock", (unsigned long long)(d - FAR_ORIGIN_NS),
                      (unsigned long long)(d - log.at[i]));
        cr_assert_lt(log.at[i] - d, MS_NS, "a sleep until origin + %llu ns ended %llu ns late: more than a tick "
                     "on an idle executor (time_driver.h, contract 5)", (unsigned long long)(d - FAR_ORIGIN_NS),
                     (unsigned long long)(log.at[i] - d));
    }
    for (int i = 0; i < N; i++)
        join_handle_drop(jh[i]);
    rec_log_free(&log);
    executor_free(ex);
    time_driver_free(td);
    virtual_clock_free(vc);
}

/* The first deadline beyond the range is exactly one range (2^36 ticks)
 * ahead (timer_wheel.h contract 6: "beyond the wheel's range (2^36 ticks
 * from now)"); with it, one a tick before and one a tick after, from a
 * wheel at 0 and from one 5 ms on: each fires on its tick, in order, never
 * early, and the wheel runs to empty. */
LAB_TEST(far_clock, exactly_one_range_ahead, 10)
{
    static const uint64_t ahead[] = { RANGE_NS - MS_NS, RANGE_NS, RANGE_NS + MS_NS };
    enum { M = sizeof ahead / sizeof ahead[0] };
    for (int round = 0; round < 2; round++) {
        struct timer_wheel *w = timer_wheel_new(0);
        cr_assert_not_null(w, "timer_wheel_new returned NULL");
        struct rec_log log;
        rec_log_init(&log, 2 * M);
        log.now = 0;
        uint64_t start = round == 0 ? 0 : 5 * MS_NS;
        rec_advance(w, &log, start);
        struct rec_timer t[M];
        uint64_t deadline[M];
        for (int i = 0; i < M; i++) {
            deadline[i] = start + ahead[i];
            rec_timer_init(&t[i], &log, i, deadline[i]);
            timer_wheel_insert(w, &t[i].entry, deadline[i]);
        }
        unsigned jumps = rec_run_to_empty(w, &log, 10000);
        cr_assert_eq(timer_wheel_len(w), 0, "after %u jumps to the next expiration, %zu of the timers one range ahead "
                     "were still armed", jumps, timer_wheel_len(w));
        expect_fired_on_time(&log, deadline, 0, M, round == 0 ? "(deadlines a range ahead of a wheel at 0)"
                                                              : "(deadlines a range ahead of a wheel 5 ms on)");
        rec_log_free(&log);
        timer_wheel_free(w);
    }
}

/* Level 5's current slot, a turn later. On a wheel whose time is past the
 * start of a level-5 slot (here 1.5 * 2^30 ticks, about 18.6 days), a
 * deadline up to a range ahead can land in the current slot's index: it
 * comes round a whole turn later, after every other slot of the level. A
 * timer half a range ahead (slot 33) and one beyond the range (parked at
 * the far end: the current slot's index, next turn) are armed: the next
 * expiration is no later than the nearer one, and both fire on their
 * ticks, the nearer first. */
LAB_TEST(far_clock, top_level_current_slot_comes_round_last, 10)
{
    uint64_t start = (UINT64_C(3) << 29) * MS_NS;
    const uint64_t ahead[] = { RANGE_NS / 2, 3 * RANGE_NS };
    enum { M = 2 };
    struct timer_wheel *w = timer_wheel_new(0);
    cr_assert_not_null(w, "timer_wheel_new returned NULL");
    struct rec_log log;
    rec_log_init(&log, 2 * M);
    rec_advance(w, &log, start);
    struct rec_timer t[M];
    uint64_t deadline[M];
    for (int i = M - 1; i >= 0; i--) {
        deadline[i] = start + ahead[i];
        rec_timer_init(&t[i], &log, i, deadline[i]);
        timer_wheel_insert(w, &t[i].entry, deadline[i]);
    }
    uint64_t next = timer_wheel_next_expiration(w);
    cr_assert_leq(next, deadline[0], "a wheel at 1.5 * 2^30 ticks held a timer half a range ahead (level 5, "
                  "slot 33) and one beyond the range (parked at the far end, in the current slot's index a turn "
                  "later): the next expiration was now + %llu ticks, after the nearer timer's deadline (now + "
                  "%llu ticks). Which slot of a level can hold a timer of the next turn, and when does it come round? "
                  "(timer_wheel.h, contract 5)",
                  (unsigned long long)((next - start) / MS_NS), (unsigned long long)(ahead[0] / MS_NS));
    unsigned jumps = rec_run_to_empty(w, &log, 10000);
    cr_assert_eq(timer_wheel_len(w), 0, "after %u jumps to the next expiration, %zu timers were still armed", jumps,
                 timer_wheel_len(w));
    expect_fired_on_time(&log, deadline, 0, M, "(a wheel at 1.5 * 2^30 ticks: half a range ahead, and beyond it)");
    rec_log_free(&log);
    timer_wheel_free(w);
}
