/* shutdown_places_test.c - stage 05: executor_free with tasks waiting on
 * timers (armed on every level, beyond the wheel's range, inside a timeout)
 * and with tasks whose timer has fired but that have not run yet (queued by
 * the timer's wake), then time_driver_free: every timer cancelled by the
 * drop of its future, every waker the time driver held given back.
 *
 * The test checks the books itself; the rubric runs it under Valgrind. */
#include "join_checks.h"
#include "stage05.h"

LAB_SUITE(shutdown_at, 10);

static unsigned sleep_drops;

struct counted_sleep {
    struct sleep s;
};
static enum poll counted_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    return sleep_poll(&((struct counted_sleep *)self)->s, cx);
}
static void counted_drop(void *self)
{
    sleep_drop(&((struct counted_sleep *)self)->s);
    sleep_drops++;
}
static const struct future_vtable counted_vt = FUTURE_VTABLE_INIT(struct counted_sleep, 0, counted_poll, counted_drop);

static struct join_handle *spawn_sleep(struct executor *ex, struct time_driver *td, uint64_t deadline)
{
    struct counted_sleep cs = { .s = sleep_until(td, deadline) };
    struct join_handle *jh = executor_spawn(ex, future_of(&counted_vt, &cs), NULL);
    cr_assert_not_null(jh, "executor_spawn returned NULL");
    return jh;
}

LAB_TEST(shutdown_at, armed_and_fired_timers, 10)
{
    sleep_drops = 0;
    alloc_count_start();
    struct vstack s;
    vstack_new(&s);
    static const uint64_t after[] = { 2 * MS_NS, 5 * MS_NS, 70 * MS_NS, 5 * SEC_NS, 3 * DAY_NS,
                                      TIMER_WHEEL_RANGE_TICKS * MS_NS * 2 };
    enum { SLEEPS = sizeof after / sizeof after[0], FIRED = 2 }; /* the first FIRED are due after 10 ms */
    struct join_handle *jh[SLEEPS + 1];
    for (int i = 0; i < SLEEPS; i++)
        jh[i] = spawn_sleep(s.ex, s.td, ORIGIN_NS + after[i]);
    /* a timeout around a future that never finishes: its sleep is armed too */
    unsigned countdown_drops = 0;
    struct countdown never = { .left = -1, .drops = &countdown_drops };
    uint64_t never_out = 0;
    struct timeout to = timeout_new(countdown_future(&never), &never_out, s.td, HOUR_NS);
    jh[SLEEPS] = executor_spawn(s.ex, timeout_future(&to), NULL);
    cr_assert_not_null(jh[SLEEPS], "executor_spawn returned NULL");
    cr_assert_eq(executor_run_until_idle(s.ex), EXECUTOR_IDLE, "run_until_idle with sleeping tasks did not say "
                 "EXECUTOR_IDLE");
    cr_assert_eq(time_driver_test_timers(s.td), SLEEPS + 1, "%zu timers registered by %d sleeping tasks",
                 time_driver_test_timers(s.td), SLEEPS + 1);
    /* 10 ms pass; a zero-timeout park fires the two due timers, whose wakes
     * queue their tasks (this thread is outside run: the remote end) */
    virtual_clock_advance(s.vc, 10 * MS_NS);
    driver_park(time_driver_driver(s.td), 0);
    cr_assert_eq(time_driver_test_timers(s.td), SLEEPS + 1 - FIRED, "after 10 ms and a park, %zu timers are "
                 "registered; %d of %d were due", time_driver_test_timers(s.td), FIRED, SLEEPS + 1);
    executor_free(s.ex);
    cr_assert_eq(sleep_drops, SLEEPS, "executor_free dropped %u of the %d sleeping tasks' futures", sleep_drops,
                 SLEEPS);
    cr_assert_eq(countdown_drops, 1, "the future inside a pending timeout was dropped %u times by executor_free, "
                 "not once", countdown_drops);
    cr_assert_eq(time_driver_test_timers(s.td), 0, "%zu timers still registered after executor_free dropped every "
                 "task that armed one: dropping a sleep (or a timeout) must cancel its timer (sleep.h contract 3)",
                 time_driver_test_timers(s.td));
    for (int i = 0; i <= SLEEPS; i++)
        expect_join_cancelled(jh[i], i < FIRED ? "a task woken by its timer, not yet run" : "a sleeping task");
    time_driver_free(s.td);
    virtual_clock_free(s.vc);
    struct alloc_counts ac = alloc_count_stop();
    cr_assert_eq(ac.frees, ac.allocs, "%llu allocations, %llu frees after executor_free with tasks waiting on "
                 "timers: a sleep dropped while armed must give back the waker its timer held, or its task is "
                 "never freed (sleep.h contract 3)", (unsigned long long)ac.allocs, (unsigned long long)ac.frees);
}
