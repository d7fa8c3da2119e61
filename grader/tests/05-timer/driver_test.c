/* driver_test.c - the time driver, sleep, join/select/timeout, on an
 * executor: in virtual time, except where real sleeping is the point. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "parker.h"
#include "stage05.h"

LAB_SUITE(time_driver, 10);
LAB_SUITE(sleep, 10);
LAB_SUITE(combinators, 10);
LAB_SUITE(timer_threads, 10);

/* ---- the driver's park ----------------------------------------------------- */

/* With a timer registered, park(forever) parks the inner driver exactly until
 * the timer's tick, and the timer fires in that one park. */
LAB_TEST(time_driver, park_timeout_is_next_expiration, 5)
{
    struct vstack s;
    vstack_new(&s);
    struct driver d = time_driver_driver(s.td);
    struct counting_waker *cw = counting_waker_new("task");
    struct waker wk = counting_waker_get(cw);
    struct time_timer t;
    time_timer_init(&t);
    uint64_t deadline = ORIGIN_NS + 250 * MS_NS + 400000; /* 250.4 ms */
    cr_assert_not(time_timer_poll(s.td, &t, deadline, &wk), "a timer 250 ms away said it was done");
    cr_assert_eq(time_driver_test_timers(s.td), 1, "one registered timer, the wheel holds %zu",
                 time_driver_test_timers(s.td));
    /* 250.4 ms lies in a level-1 slot: the first park may stop at that slot's
     * start (192 ms) and cascade; every park stops at or before the tick. */
    unsigned parks = 0;
    while (counting_waker_woken(cw) == 0 && parks < 8) {
        driver_park(d, DRIVER_PARK_FOREVER);
        parks++;
        uint64_t now = virtual_clock_now(s.vc);
        cr_assert_leq(now, tick_up(deadline), "the inner driver was parked until +%llu ns, past the only "
                      "timer's tick (+%llu ns): the park timeout must be the next expiration "
                      "(time_driver.h contract 1)",
                      (unsigned long long)(now - ORIGIN_NS), (unsigned long long)(tick_up(deadline) - ORIGIN_NS));
        if (now < deadline)
            cr_assert_eq(counting_waker_woken(cw), 0, "the timer fired at +%llu ns, before its deadline "
                         "(timer_wheel.h contract 1)",
                         (unsigned long long)(now - ORIGIN_NS));
    }
    uint64_t now = virtual_clock_now(s.vc);
    cr_assert_eq(counting_waker_woken(cw), 1, "the timer's waker was woken %u times after %u parks of the time "
                 "driver; expected 1: each park waits until the next expiration (time_driver.h contract 1) and "
                 "then fires what is due (contract 2)", counting_waker_woken(cw), parks);
    cr_assert_eq(now, tick_up(deadline), "the timer fired at +%llu ns; expected its tick, +%llu ns "
                 "(time_driver.h contract 1)",
                 (unsigned long long)(now - ORIGIN_NS), (unsigned long long)(tick_up(deadline) - ORIGIN_NS));
    cr_assert_leq(parks, 3, "%u parks to reach one timer at level 1: one per level is enough "
                  "(time_driver.h contract 1)", parks);
    cr_assert(time_timer_poll(s.td, &t, deadline, &wk), "a fired timer's poll did not say done");
    time_timer_cancel(s.td, &t);
    cr_assert_eq(counting_waker_counts(cw).live, 1, "a waker reference leaked: %ld live, expected 1 (the test's)",
                 counting_waker_counts(cw).live);
    counting_waker_free(cw);
    vstack_free(&s);
}

/* A deadline 0.3 ms away is a park of up to 1 ms that fires it, not a 0 ms
 * park and a spin. */
LAB_TEST(time_driver, sub_ms_remainder_is_not_a_spin, 5)
{
    struct vstack s;
    vstack_new(&s);
    struct driver d = time_driver_driver(s.td);
    virtual_clock_advance(s.vc, 5 * MS_NS + 700000); /* now: +5.7 ms */
    struct counting_waker *cw = counting_waker_new("task");
    struct waker wk = counting_waker_get(cw);
    struct time_timer t;
    time_timer_init(&t);
    uint64_t deadline = virtual_clock_now(s.vc) + 300000; /* +6.0 ms */
    cr_assert_not(time_timer_poll(s.td, &t, deadline, &wk), "a timer 0.3 ms away said it was done");
    for (int i = 0; i < 5 && counting_waker_woken(cw) == 0; i++)
        driver_park(d, DRIVER_PARK_FOREVER);
    cr_assert_eq(counting_waker_woken(cw), 1, "a timer 0.3 ms away was not fired after 5 parks "
                 "(time_driver.h contracts 1 and 2)");
    cr_assert_gt(virtual_clock_last_timeout(s.vc), 0, "the inner driver was parked with a 0 ns timeout for a "
                 "timer 0.3 ms away: a sub-ms remainder must not round down to 0, a spin (time_driver.h contract 1)");
    cr_assert_eq(virtual_clock_parks(s.vc), 1, "%llu inner parks for a timer 0.3 ms away; expected 1 "
                 "(time_driver.h contract 1)",
                 (unsigned long long)virtual_clock_parks(s.vc));
    time_timer_cancel(s.td, &t);
    cr_assert_eq(counting_waker_counts(cw).live, 1, "a waker reference leaked");
    counting_waker_free(cw);
    vstack_free(&s);
}

/* The caller's own timeout wins when it is earlier; nothing fires then. */
LAB_TEST(time_driver, caller_timeout_when_earlier, 5)
{
    struct vstack s;
    vstack_new(&s);
    struct driver d = time_driver_driver(s.td);
    struct counting_waker *cw = counting_waker_new("task");
    struct waker wk = counting_waker_get(cw);
    struct time_timer t;
    time_timer_init(&t);
    cr_assert_not(time_timer_poll(s.td, &t, ORIGIN_NS + 50 * MS_NS, &wk), "a timer 50 ms away said done");
    driver_park(d, (int64_t)(5 * MS_NS));
    cr_assert_eq(virtual_clock_now(s.vc), ORIGIN_NS + 5 * MS_NS, "park(5 ms) with a timer at 50 ms parked the "
                 "inner driver until +%llu ns; expected +5 ms, the caller's timeout (time_driver.h contract 1)",
                 (unsigned long long)(virtual_clock_now(s.vc) - ORIGIN_NS));
    cr_assert_eq(counting_waker_woken(cw), 0, "a timer 50 ms away fired after 5 ms");
    driver_park(d, DRIVER_PARK_FOREVER);
    cr_assert_eq(virtual_clock_now(s.vc), ORIGIN_NS + 50 * MS_NS, "the next park did not run to the timer "
                 "(time_driver.h contract 1)");
    cr_assert_eq(counting_waker_woken(cw), 1, "the timer did not fire at 50 ms (time_driver.h contract 2)");
    time_timer_cancel(s.td, &t);
    counting_waker_free(cw);
    vstack_free(&s);
}

/* ---- sleep on an executor, in virtual time ------------------------------------ */

/* Three days of virtual time in a handful of parks. */
LAB_TEST(sleep, days_in_virtual_time, 5)
{
    struct vstack s;
    vstack_new(&s);
    uint64_t deadline = ORIGIN_NS + 3 * DAY_NS + 7 * HOUR_NS + 123456789;
    struct sleep sl = sleep_until(s.td, deadline);
    enum executor_status st = executor_block_on(s.ex, sleep_future(&sl), NULL);
    cr_assert_eq(st, EXECUTOR_OK, "block_on(sleep 3 days) ended with %s", executor_status_str(st));
    uint64_t now = virtual_clock_now(s.vc);
    cr_assert_geq(now, deadline, "a 3-day sleep finished %llu ns early", (unsigned long long)(deadline - now));
    cr_assert_lt(now - deadline, MS_NS, "a 3-day sleep finished %llu ns late; at most one tick (1 ms) is allowed",
                 (unsigned long long)(now - deadline));
    cr_assert_leq(virtual_clock_parks(s.vc), 12, "%llu parks for one 3-day sleep, where one park per level of "
                  "the wheel is enough (time_driver.h contract 1)", (unsigned long long)virtual_clock_parks(s.vc));
    cr_assert_eq(time_driver_test_timers(s.td), 0, "a timer is still registered after the sleep finished");
    vstack_free(&s);
}

/* Many tasks sleeping: they finish in deadline order, none early, none more
 * than a tick late. */
LAB_TEST(sleep, tasks_wake_in_deadline_order, 10)
{
    struct vstack s;
    vstack_new(&s);
    uint64_t rng = lab_seed();
    enum { N = 200 };
    struct rec_log log;
    rec_log_init(&log, N);
    uint64_t deadline[N];
    for (int i = 0; i < N; i++) {
        deadline[i] = ORIGIN_NS + 1 + lab_rand(&rng) % (i % 2 ? 10 * SEC_NS : 2 * HOUR_NS);
        struct logged_sleep ls = logged_sleep_new(s.td, &log, i, deadline[i]);
        struct join_handle *h = executor_spawn(s.ex, logged_sleep_future(&ls), NULL);
        cr_assert_not_null(h, "spawn failed");
        join_handle_drop(h);
    }
    enum executor_status st = executor_run(s.ex);
    cr_assert_eq(st, EXECUTOR_OK, "run ended with %s", executor_status_str(st));
    cr_assert_eq(log.n, N, "%zu of %d sleeping tasks finished", log.n, N);
    for (size_t k = 0; k < log.n; k++) {
        uint64_t d = deadline[log.ids[k]], at = log.at[k];
        cr_assert_geq(at, d, "a sleep finished early: deadline +%llu ns, at +%llu ns",
                      (unsigned long long)(d - ORIGIN_NS), (unsigned long long)(at - ORIGIN_NS));
        cr_assert_lt(at - d, MS_NS, "a sleep finished %llu ns late (more than one tick)", (unsigned long long)(at - d));
        if (k > 0)
            cr_assert_leq(tick_up(deadline[log.ids[k - 1]]), tick_up(d), "sleeps finished out of deadline order");
    }
    rec_log_free(&log);
    vstack_free(&s);
}

/* Dropping a pending sleep cancels its timer at once and releases its waker. */
LAB_TEST(sleep, drop_cancels_at_once, 5)
{
    struct vstack s;
    vstack_new(&s);
    struct counting_waker *cw = counting_waker_new("task");
    struct waker wk = counting_waker_get(cw);
    struct context cx = context_from_waker(&wk);
    struct sleep sl = sleep_for(s.td, 10 * SEC_NS);
    struct future f = sleep_future(&sl);
    cr_assert_eq(future_poll(f, &cx, NULL), POLL_PENDING, "a 10 s sleep was Ready at once");
    cr_assert_eq(time_driver_test_timers(s.td), 1, "a pending sleep registered %zu timers; expected 1 "
                 "(sleep.h contract 1)",
                 time_driver_test_timers(s.td));
    cr_assert_eq(future_poll(f, &cx, NULL), POLL_PENDING, "a 10 s sleep was Ready at once");
    cr_assert_eq(time_driver_test_timers(s.td), 1, "a second poll registered a second timer (%zu; sleep.h contract 1)",
                 time_driver_test_timers(s.td));
    cr_assert_eq(counting_waker_counts(cw).clones, 1, "a re-poll by the same task cloned the waker again "
                 "(sleep.h contract 1)");
    future_drop(f);
    cr_assert_eq(time_driver_test_timers(s.td), 0, "dropping a pending sleep left its timer in the wheel; the drop "
                 "must cancel it at once (sleep.h contract 3)");
    cr_assert_eq(time_driver_test_next_expiration(s.td), TIMER_WHEEL_NEVER,
                 "after the only sleep was dropped, the next expiration must be NEVER (sleep.h contract 3)");
    cr_assert_eq(counting_waker_counts(cw).live, 1, "dropping a pending sleep kept its waker (%ld live); the drop "
                 "releases it (sleep.h contract 3)",
                 counting_waker_counts(cw).live);
    counting_waker_free(cw);
    vstack_free(&s);
}

LAB_TEST(sleep, past_deadline_is_ready_without_a_timer, 5)
{
    struct vstack s;
    vstack_new(&s);
    virtual_clock_advance(s.vc, SEC_NS);
    struct counting_waker *cw = counting_waker_new("task");
    struct waker wk = counting_waker_get(cw);
    struct context cx = context_from_waker(&wk);
    struct sleep sl = sleep_until(s.td, ORIGIN_NS + SEC_NS);
    cr_assert_eq(sleep_poll(&sl, &cx), POLL_READY, "a sleep whose deadline is now was not Ready");
    cr_assert_eq(time_driver_test_timers(s.td), 0, "a sleep already due registered a timer");
    cr_assert_eq(counting_waker_counts(cw).clones, 0, "a sleep already due cloned the waker");
    cr_assert_eq(sleep_poll(&sl, &cx), POLL_READY, "poll after Ready was not Ready");
    sleep_drop(&sl);
    counting_waker_free(cw);
    vstack_free(&s);
}

/* ---- join, select, timeout ---------------------------------------------------- */

LAB_TEST(combinators, join_waits_for_both, 5)
{
    struct vstack s;
    vstack_new(&s);
    struct sleep a = sleep_for(s.td, 10 * MS_NS), b = sleep_for(s.td, 30 * MS_NS);
    struct join2 j = join2_new(sleep_future(&a), NULL, sleep_future(&b), NULL);
    enum executor_status st = executor_block_on(s.ex, join2_future(&j), NULL);
    cr_assert_eq(st, EXECUTOR_OK, "block_on(join) ended with %s", executor_status_str(st));
    cr_assert_eq(virtual_clock_now(s.vc), ORIGIN_NS + 30 * MS_NS, "join of 10 ms and 30 ms sleeps finished at "
                 "+%llu ns; expected +30 ms", (unsigned long long)(virtual_clock_now(s.vc) - ORIGIN_NS));
    cr_assert_eq(time_driver_test_timers(s.td), 0, "timers left after join");
    vstack_free(&s);
}

LAB_TEST(combinators, select_drops_the_loser, 5)
{
    struct vstack s;
    vstack_new(&s);
    struct sleep a = sleep_for(s.td, 30 * MS_NS), b = sleep_for(s.td, 10 * MS_NS);
    struct select2 sel = select2_new(sleep_future(&a), NULL, sleep_future(&b), NULL);
    int winner = -1;
    enum executor_status st = executor_block_on(s.ex, select2_future(&sel), &winner);
    cr_assert_eq(st, EXECUTOR_OK, "block_on(select) ended with %s", executor_status_str(st));
    cr_assert_eq(winner, 1, "select of a 30 ms and a 10 ms sleep: winner %d, expected 1", winner);
    cr_assert_eq(virtual_clock_now(s.vc), ORIGIN_NS + 10 * MS_NS, "select finished at +%llu ns; expected +10 ms",
                 (unsigned long long)(virtual_clock_now(s.vc) - ORIGIN_NS));
    cr_assert_eq(time_driver_test_timers(s.td), 0, "the losing sleep's timer is still in the wheel: select must "
                 "drop the loser at once (cancellation by drop)");
    vstack_free(&s);
}

/* The future finishes first: its output, TIMEOUT_OK, and the deadline's timer
 * is gone at once. */
LAB_TEST(combinators, timeout_future_first, 5)
{
    struct vstack s;
    vstack_new(&s);
    struct sleep inner = sleep_for(s.td, 20 * MS_NS);
    struct timeout to = timeout_new(sleep_future(&inner), NULL, s.td, HOUR_NS);
    enum timeout_result res = TIMEOUT_ELAPSED;
    enum executor_status st = executor_block_on(s.ex, timeout_future(&to), &res);
    cr_assert_eq(st, EXECUTOR_OK, "block_on(timeout) ended with %s", executor_status_str(st));
    cr_assert_eq(res, TIMEOUT_OK, "a 20 ms future under a 1 h timeout: result ELAPSED, expected OK");
    cr_assert_eq(virtual_clock_now(s.vc), ORIGIN_NS + 20 * MS_NS, "finished at +%llu ns; expected +20 ms",
                 (unsigned long long)(virtual_clock_now(s.vc) - ORIGIN_NS));
    cr_assert_eq(time_driver_test_timers(s.td), 0, "the 1 h deadline's timer is still registered after the "
                 "future won");
    vstack_free(&s);

    /* a plain future with an output, Ready after 3 self-wakes */
    vstack_new(&s);
    unsigned drops = 0;
    struct countdown c = { .left = 3, .drops = &drops };
    uint64_t out = 0;
    to = timeout_new(countdown_future(&c), &out, s.td, SEC_NS);
    st = executor_block_on(s.ex, timeout_future(&to), &res);
    cr_assert_eq(st, EXECUTOR_OK, "block_on(timeout) ended with %s", executor_status_str(st));
    cr_assert_eq(res, TIMEOUT_OK, "a ready future under timeout: result ELAPSED");
    cr_assert_eq(out, 42, "the future's output did not arrive through timeout (%llu)", (unsigned long long)out);
    cr_assert_eq(drops, 1, "the inner future was dropped %u times; expected once", drops);
    cr_assert_eq(time_driver_test_timers(s.td), 0, "the deadline's timer is still registered");
    vstack_free(&s);
}

/* The future never finishes: TIMEOUT_ELAPSED at the deadline, and the future
 * is dropped (cancelled) then. */
LAB_TEST(combinators, timeout_elapses, 5)
{
    struct vstack s;
    vstack_new(&s);
    unsigned drops = 0;
    struct countdown c = { .left = -1, .drops = &drops };
    uint64_t out = 0;
    struct timeout to = timeout_new(countdown_future(&c), &out, s.td, 2 * HOUR_NS + 1);
    enum timeout_result res = TIMEOUT_OK;
    enum executor_status st = executor_block_on(s.ex, timeout_future(&to), &res);
    cr_assert_eq(st, EXECUTOR_OK, "block_on(timeout of a never-ready future) ended with %s", executor_status_str(st));
    cr_assert_eq(res, TIMEOUT_ELAPSED, "a never-ready future under a 2 h timeout: result OK");
    uint64_t now = virtual_clock_now(s.vc), d = ORIGIN_NS + 2 * HOUR_NS + 1;
    cr_assert(now >= d && now - d < MS_NS, "the 2 h timeout fired at +%llu ns; expected within a tick after "
              "+%llu ns", (unsigned long long)(now - ORIGIN_NS), (unsigned long long)(d - ORIGIN_NS));
    cr_assert_eq(drops, 1, "the timed-out future was dropped %u times; expected once, when the deadline won", drops);
    cr_assert_eq(out, 0, "a timed-out future wrote an output");
    vstack_free(&s);
}

/* ---- threads ------------------------------------------------------------------ */

struct cross {
    struct time_driver *td;
    struct sleep sl;
    struct notify_waker *nw;
    atomic_bool parked_out;
    uint64_t register_ns; /* how long sleep_for and the first poll took together (the registrar's clock) */
};

static void *cross_registrar(void *arg)
{
    struct cross *c = arg;
    lab_sleep_ms(50); /* let the owner park forever first */
    uint64_t before = time_driver_now(c->td);
    c->sl = sleep_for(c->td, 30 * MS_NS);
    struct waker wk = notify_waker_get(c->nw);
    struct context cx = context_from_waker(&wk);
    enum poll p = sleep_poll(&c->sl, &cx);
    c->register_ns = time_driver_now(c->td) - before;
    waker_drop(&wk);
    if (p == POLL_READY) { /* the test fails on this; do not leave the owner parked forever */
        atomic_store_explicit(&c->parked_out, true, memory_order_release); /* pairs with the owner's load */
        driver_unpark(time_driver_driver(c->td));
    }
    return (void *)(uintptr_t)p;
}

/* The owner parks with no timer (forever); another thread registers a sleep
 * 30 ms away: the owner must be unparked to re-park until it, and fire it. */
LAB_TEST(timer_threads, cross_thread_insert_unparks, 4) /* the reference: 0.15 s */
{
    struct parker *p = parker_new();
    cr_assert_not_null(p, "parker_new failed");
    struct time_driver *td = time_driver_new(parker_driver(p));
    cr_assert_not_null(td, "time_driver_new returned NULL");
    struct driver d = time_driver_driver(td);
    struct cross c = { .td = td, .nw = notify_waker_new() };
    atomic_init(&c.parked_out, false);
    pthread_t th;
    pthread_create(&th, NULL, cross_registrar, &c);
    bool fired = false;
    for (int i = 0; i < 50 && !fired; i++) {
        driver_park(d, DRIVER_PARK_FOREVER);
        fired = notify_waker_wait(c.nw, 0);
        if (atomic_load_explicit(&c.parked_out, memory_order_acquire))
            break; /* the registrar found its sleep Ready at once (asserted below) */
    }
    uint64_t end = time_driver_now(td);
    void *r;
    pthread_join(th, &r);
    if ((uintptr_t)r == POLL_READY && c.register_ns >= 30 * MS_NS)
        lab_cannot_judge("the registering thread took %.1f ms from sleep_for to its first poll: the 30 ms were "
                         "over before the poll (a machine too slow to judge)", (double)c.register_ns / 1e6);
    cr_assert_eq((uintptr_t)r, POLL_PENDING, "a sleep 30 ms away was Ready at once");
    cr_assert(fired, "the sleep registered from another thread never fired: the owner stayed parked past the "
              "sleep's deadline (time_driver.h contract 3); the next hint: make hint STAGE=5 "
              "ITEM=cross-thread-insert");
    cr_assert_geq(end, c.sl.deadline_ns, "the sleep fired %llu ns early", (unsigned long long)(c.sl.deadline_ns - end));
    sleep_drop(&c.sl);
    notify_waker_release(c.nw);
    time_driver_free(td);
    parker_release(p);
}

/* A task waiting only on a 200 ms real sleep: the thread sleeps (almost no
 * CPU) and the sleep ends at or after its deadline. */
static void real_sleep_200(uint64_t *late_ns, uint64_t *cpu_ns)
{
    struct parker *p = parker_new();
    cr_assert_not_null(p, "parker_new failed");
    struct time_driver *td = time_driver_new(parker_driver(p));
    cr_assert_not_null(td, "time_driver_new returned NULL");
    struct executor *ex = executor_new(time_driver_driver(td));
    cr_assert_not_null(ex, "executor_new failed");
    struct sleep sl = sleep_for(td, 200 * MS_NS);
    uint64_t deadline = sl.deadline_ns;
    uint64_t c0 = thread_cpu_ns();
    enum executor_status st = executor_block_on(ex, sleep_future(&sl), NULL);
    uint64_t end = monotonic_ns();
    *cpu_ns = thread_cpu_ns() - c0;
    cr_assert_eq(st, EXECUTOR_OK, "block_on(sleep 200 ms) ended with %s", executor_status_str(st));
    cr_assert_geq(end, deadline, "a 200 ms sleep ended %llu ns before its deadline (sleep.h contract 1)",
                  (unsigned long long)(deadline - end));
    *late_ns = end - deadline;
    executor_free(ex);
    time_driver_free(td);
    parker_release(p);
}

LAB_TEST(timer_threads, real_sleep_costs_no_cpu, 10)
{
    uint64_t late, cpu;
    real_sleep_200(&late, &cpu);
    lab_note("200 ms sleep: %.3f ms CPU, %.3f ms late", cpu / 1e6, late / 1e6);
    /* the bound stretches with the Valgrind lane, where that lane checks memory only */
    cr_assert_lt(cpu, 20 * MS_NS * LAB_TIMEOUT_SCALE, "waiting 200 ms on a sleep cost %.1f ms of CPU: the thread "
                 "must park until the deadline, not spin (time_driver.h contract 1)", cpu / 1e6);
}

/* ---- a callback re-arming during firing, through the driver --------------------- */

/* A task that sleeps 1 ms, n times in a row: each wake re-registers a timer
 * while the driver may still be firing the batch. */
struct ticker {
    struct sleep sl;
    struct time_driver *td;
    unsigned left;
};

static enum poll ticker_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct ticker *t = self;
    while (t->left > 0) {
        if (sleep_poll(&t->sl, cx) == POLL_PENDING)
            return POLL_PENDING;
        sleep_drop(&t->sl);
        t->left--;
        t->sl = sleep_for(t->td, MS_NS);
    }
    return POLL_READY;
}

static void ticker_drop(void *self)
{
    struct ticker *t = self;
    sleep_drop(&t->sl);
}

static const struct future_vtable ticker_vt = FUTURE_VTABLE_INIT(struct ticker, 0, ticker_poll, ticker_drop);

LAB_TEST(time_driver, repeated_sleeps, 5)
{
    struct vstack s;
    vstack_new(&s);
    struct ticker t = { .td = s.td, .left = 1000 };
    t.sl = sleep_for(s.td, MS_NS);
    enum executor_status st = executor_block_on(s.ex, future_of(&ticker_vt, &t), NULL);
    cr_assert_eq(st, EXECUTOR_OK, "1000 sleeps of 1 ms in a row ended with %s", executor_status_str(st));
    uint64_t now = virtual_clock_now(s.vc);
    cr_assert(now >= ORIGIN_NS + 1000 * MS_NS && now <= ORIGIN_NS + 1001 * MS_NS,
              "1000 sleeps of 1 ms took %llu ns of virtual time; expected 1000 ms (each exactly one tick)",
              (unsigned long long)(now - ORIGIN_NS));
    cr_assert_eq(time_driver_test_timers(s.td), 0, "timers left after the ticker finished");
    vstack_free(&s);
}

/* ---- registrations and drops from many threads while the owner fires ----------- */

struct churn_shared {
    struct time_driver *td;
    int64_t owner_park_ns; /* each of the owner's parks: 2 ms, or 0 for an owner that only polls */
    atomic_bool stop;
    atomic_uint done;
};

static void *churn_owner(void *arg)
{
    struct churn_shared *c = arg;
    struct driver d = time_driver_driver(c->td);
    while (!atomic_load_explicit(&c->stop, memory_order_acquire)) /* pairs with the store in the test */
        driver_park(d, c->owner_park_ns);
    return NULL;
}

static void *churn_worker(void *arg)
{
    struct churn_shared *c = arg;
    uint64_t rng = lab_seed() ^ (uint64_t)(uintptr_t)&rng;
    struct notify_waker *nw = notify_waker_new();
    unsigned n = lab_scale(150, 20);
    for (unsigned i = 0; i < n; i++) {
        struct sleep sl = sleep_for(c->td, lab_rand(&rng) % (2 * MS_NS));
        struct waker wk = notify_waker_get(nw);
        struct context cx = context_from_waker(&wk);
        bool wait = lab_rand(&rng) % 2;
        /* half of them are polled until Ready (re-polled while the owner may
         * be firing them), half dropped while pending */
        while (sleep_poll(&sl, &cx) == POLL_PENDING && wait)
            notify_waker_wait(nw, 1);
        sleep_drop(&sl);
        waker_drop(&wk);
    }
    notify_waker_release(nw);
    atomic_fetch_add_explicit(&c->done, 1, memory_order_release); /* pairs with the test's acquire load */
    return NULL;
}

/* Three workers register, re-poll and drop sleeps while the owner parks with
 * owner_park_ns and fires; the wheel must be empty at the end. */
static void churn(int64_t owner_park_ns)
{
    struct parker *p = parker_new();
    cr_assert_not_null(p, "parker_new failed");
    struct churn_shared c = { .td = time_driver_new(parker_driver(p)), .owner_park_ns = owner_park_ns };
    cr_assert_not_null(c.td, "time_driver_new returned NULL");
    atomic_init(&c.stop, false);
    atomic_init(&c.done, 0);
    pthread_t owner, workers[3];
    pthread_create(&owner, NULL, churn_owner, &c);
    for (int i = 0; i < 3; i++)
        pthread_create(&workers[i], NULL, churn_worker, &c);
    for (int i = 0; i < 3; i++)
        pthread_join(workers[i], NULL);
    atomic_store_explicit(&c.stop, true, memory_order_release); /* pairs with the owner's acquire load */
    driver_unpark(time_driver_driver(c.td));
    pthread_join(owner, NULL);
    cr_assert_eq(atomic_load_explicit(&c.done, memory_order_acquire), 3, "a worker did not finish");
    cr_assert_eq(time_driver_test_timers(c.td), 0, "%zu timers left in the wheel after every sleep was dropped",
                 time_driver_test_timers(c.td));
    time_driver_free(c.td);
    parker_release(p);
}

LAB_TEST(timer_threads, concurrent_register_and_drop, 20)
{
    churn((int64_t)(2 * MS_NS));
}

/* The same churn beside an owner that parks with a zero timeout, again and
 * again, as an executor with tasks to run checks for fired timers between
 * them. Its parks follow one another with no sleep between, so a park that
 * reads the wheel before it takes the driver's mutex meets the workers'
 * registrations many times a run, under load and at ThreadSanitizer's scale
 * as much as alone; the 2 ms owner above gives that read a window of a few
 * instructions once a park. */
LAB_TEST(timer_threads, register_beside_a_polling_owner, 20)
{
    churn(0);
}

/* ---- cancellation by drop, seen before anyone drops the combinator ------------- */

/* Polls f by hand with a counting waker, parking the time driver between
 * polls, until Ready. */
static void poll_to_ready(struct vstack *s, struct future f, void *out, struct counting_waker *cw)
{
    struct waker wk = counting_waker_get(cw);
    struct context cx = context_from_waker(&wk);
    struct driver d = time_driver_driver(s->td);
    for (int i = 0; i < 20; i++) {
        if (future_poll(f, &cx, out) == POLL_READY)
            return;
        unsigned woken = counting_waker_woken(cw);
        for (int k = 0; k < 10 && counting_waker_woken(cw) == woken; k++)
            driver_park(d, DRIVER_PARK_FOREVER);
    }
    cr_assert_fail("a combinator of sleeps was not Ready after 20 polls");
}

LAB_TEST(combinators, loser_dropped_when_ready, 5)
{
    struct vstack s;
    vstack_new(&s);
    struct counting_waker *cw = counting_waker_new("task");
    struct sleep a = sleep_for(s.td, 10 * MS_NS), b = sleep_for(s.td, 30 * MS_NS);
    struct select2 sel = select2_new(sleep_future(&a), NULL, sleep_future(&b), NULL);
    int winner = -1;
    poll_to_ready(&s, select2_future(&sel), &winner, cw);
    cr_assert_eq(winner, 0, "select of a 10 ms and a 30 ms sleep: winner %d, expected 0", winner);
    cr_assert_eq(time_driver_test_timers(s.td), 0, "select returned Ready with the losing sleep's timer still in "
                 "the wheel: the loser must be dropped at once, not when select is dropped (combinators.h)");
    future_drop(select2_future(&sel));

    struct sleep inner = sleep_for(s.td, 10 * MS_NS);
    struct timeout to = timeout_new(sleep_future(&inner), NULL, s.td, HOUR_NS);
    enum timeout_result res = TIMEOUT_ELAPSED;
    poll_to_ready(&s, timeout_future(&to), &res, cw);
    cr_assert_eq(res, TIMEOUT_OK, "a 10 ms sleep under a 1 h timeout: ELAPSED");
    cr_assert_eq(time_driver_test_timers(s.td), 0, "timeout returned Ready with its deadline's timer still in the "
                 "wheel: the losing sleep must be dropped (cancelled) at once (combinators.h)");
    future_drop(timeout_future(&to));

    unsigned drops = 0;
    struct countdown c = { .left = -1, .drops = &drops };
    to = timeout_new(countdown_future(&c), NULL, s.td, 50 * MS_NS);
    poll_to_ready(&s, timeout_future(&to), &res, cw);
    cr_assert_eq(res, TIMEOUT_ELAPSED, "a never-ready future under a 50 ms timeout: OK");
    cr_assert_eq(drops, 1, "timeout returned ELAPSED but dropped the timed-out future %u times; it must drop it "
                 "at once, cancellation by drop (combinators.h)", drops);
    future_drop(timeout_future(&to));
    cr_assert_eq(drops, 1, "the timed-out future was dropped again when the timeout was dropped; a combinator drops "
                 "each child once (combinators.h)");
    cr_assert_eq(counting_waker_counts(cw).live, 1, "waker references leaked: %ld live, expected 1",
                 counting_waker_counts(cw).live);
    counting_waker_free(cw);
    vstack_free(&s);
}

/* A combinator polled by hand: a task's waker, and a first child Ready at
 * its first poll (a countdown from 0: output 42, drops counted). */
struct by_hand {
    struct vstack s;
    struct counting_waker *cw;
    struct waker wk;
    struct context cx;
    unsigned drops;
    struct countdown ready;
    uint64_t out;
};

static void by_hand_new(struct by_hand *h)
{
    vstack_new(&h->s);
    h->cw = counting_waker_new("task");
    h->wk = counting_waker_get(h->cw);
    h->cx = context_from_waker(&h->wk);
    h->drops = 0;
    h->ready = (struct countdown){ .left = 0, .drops = &h->drops };
    h->out = 0;
}

static void by_hand_free(struct by_hand *h)
{
    cr_assert_eq(h->drops, 1, "the combinator dropped its Ready child %u times in all; expected once", h->drops);
    cr_assert_eq(counting_waker_counts(h->cw).live, 1, "waker references leaked: %ld live, expected 1",
                 counting_waker_counts(h->cw).live);
    counting_waker_free(h->cw);
    vstack_free(&h->s);
}

/* combinators.h, join2: "each child is polled only until it is Ready, and
 * dropped as soon as it is": a child that finished at the first poll is gone
 * after that poll, while the other still waits, not when the join goes (a
 * finished child may hold a stream or a signal future until dropped). */
LAB_TEST(combinators, join_drops_a_child_when_it_is_ready, 5)
{
    struct by_hand h;
    by_hand_new(&h);
    struct sleep b = sleep_for(h.s.td, 10 * MS_NS);
    struct join2 j = join2_new(countdown_future(&h.ready), &h.out, sleep_future(&b), NULL);
    cr_assert_eq(join2_poll(&j, &h.cx), POLL_PENDING, "join of a Ready future and a 10 ms sleep was Ready at once");
    cr_assert_eq(h.out, 42, "join's first poll did not poll its first child to Ready");
    cr_assert_eq(h.drops, 1, "join's first poll found its first child Ready, and that child was dropped %u times "
                 "before the poll returned; expected once: each child is dropped as soon as it is Ready, while "
                 "the other still waits (combinators.h, join2)", h.drops);
    poll_to_ready(&h.s, join2_future(&j), NULL, h.cw);
    future_drop(join2_future(&j));
    by_hand_free(&h);
}

/* combinators.h, timeout: "the future's output if it finishes first (or in
 * the same poll as the deadline)": a future Ready at the first poll, made
 * when the deadline has just passed, wins the tie. */
LAB_TEST(combinators, timeout_tie_goes_to_the_future, 5)
{
    struct by_hand h;
    by_hand_new(&h);
    struct timeout to = timeout_new(countdown_future(&h.ready), &h.out, h.s.td, 10 * MS_NS);
    virtual_clock_advance(h.s.vc, 10 * MS_NS);
    enum timeout_result res = TIMEOUT_ELAPSED;
    cr_assert_eq(timeout_poll(&to, &h.cx, &res), POLL_READY, "a timeout whose deadline had passed and whose "
                 "future was Ready was Pending");
    cr_assert_eq(res, TIMEOUT_OK, "the future was Ready at the poll in which its 10 ms deadline passed, and the "
                 "timeout answered TIMEOUT_ELAPSED; a future that finishes in the same poll as the deadline "
                 "wins (combinators.h, timeout)");
    cr_assert_eq(h.out, 42, "the future's output did not arrive through the timeout (%llu)",
                 (unsigned long long)h.out);
    cr_assert_eq(time_driver_test_timers(h.s.td), 0, "a timeout that finished left a timer in the wheel");
    timeout_drop(&to);
    by_hand_free(&h);
}

/* A sleep polled by one task, then by another (a future moved between
 * tasks, or a combinator that polls with a waker of its own): the waker it
 * replaced goes back at once, and only the latest is woken when it fires
 * (sleep.h contract 1: "with the latest waker"; stage 01's rule). */
LAB_TEST(sleep, latest_waker_only, 5)
{
    struct vstack s;
    vstack_new(&s);
    struct counting_waker *first = counting_waker_new("first task");
    struct counting_waker *second = counting_waker_new("second task");
    struct waker w1 = counting_waker_get(first), w2 = counting_waker_get(second);
    struct context c1 = context_from_waker(&w1), c2 = context_from_waker(&w2);
    struct sleep sl = sleep_for(s.td, 10 * MS_NS);
    struct future f = sleep_future(&sl);
    cr_assert_eq(future_poll(f, &c1, NULL), POLL_PENDING, "a 10 ms sleep was Ready at once");
    cr_assert_eq(future_poll(f, &c2, NULL), POLL_PENDING, "a 10 ms sleep was Ready at once");
    cr_assert_eq(counting_waker_counts(first).live, 1, "a re-poll with another task's waker kept the first task's "
                 "(%ld references live): the replaced waker goes back at the replacement (sleep.h contract 1: "
                 "the latest waker)", counting_waker_counts(first).live);
    virtual_clock_advance(s.vc, 20 * MS_NS);
    driver_park(time_driver_driver(s.td), 0);
    cr_assert_eq(counting_waker_woken(first), 0u, "the sleep fired and woke the task that polled it first, whose "
                 "waker a later poll had replaced (sleep.h contract 1: only the latest waker is woken)");
    cr_assert_eq(counting_waker_woken(second), 1u, "the sleep fired and woke the task that polled it last %u times; "
                 "expected once (sleep.h contract 1)", counting_waker_woken(second));
    cr_assert_eq(future_poll(f, &c2, NULL), POLL_READY, "the sleep was Pending after it fired");
    future_drop(f);
    counting_waker_free(first);
    counting_waker_free(second);
    vstack_free(&s);
}
