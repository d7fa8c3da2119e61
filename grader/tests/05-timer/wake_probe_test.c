/* wake_probe_test.c - time_driver.h contract 2's "woken after the wheel's
 * mutex is released", for a lock of any kind.
 *
 * rules_test.c's timer_rules/fire_wakes_outside_every_lock names a pthread
 * lock held across a fired timer's wake; a lock made of something else (a
 * spinlock on an atomic) is out of its sight. Here the wake itself asks
 * whether the time driver is still usable (common/testing/wake_probe.h):
 * inside the wake of a fired timer (the only one due; the first of 300
 * fired by one park; the last of them), one helper thread polls the fired
 * timer again and registers and cancels another timer on the same driver,
 * and another uses a fresh driver (a timer registered, fired by a park,
 * the driver freed). Each must finish while the wake is still running: the
 * woken task, run at once on another thread, polls its sleep and registers
 * its next one. driver_usable_inside_the_drop asks the same inside the drop
 * of the waker a cancelled timer gives back (sleep.h contract 3: the
 * reference goes back after the unlock).
 */
#include "stage05.h"
#include "wake_probe.h"

struct same_driver {
    struct time_driver *td;
    struct time_timer *fired_one;
    uint64_t deadline;
    bool again;          /* time_timer_poll of the fired timer: true expected */
    bool other;          /* time_timer_poll of a timer an hour away: false expected */
};

static void use_same(void *arg)
{
    struct same_driver *sd = arg;
    struct waker nw = noop_waker();
    sd->again = time_timer_poll(sd->td, sd->fired_one, sd->deadline, &nw);
    struct time_timer other;
    time_timer_init(&other);
    sd->other = time_timer_poll(sd->td, &other, ORIGIN_NS + HOUR_NS, &nw);
    time_timer_cancel(sd->td, &other);
}

struct fresh_driver {
    bool made;
    bool before, after;  /* the timer's poll before the park (false) and after (true) */
};

static void use_fresh(void *arg)
{
    struct fresh_driver *fd = arg;
    struct waker nw = noop_waker();
    struct virtual_clock *vc = virtual_clock_new(ORIGIN_NS);
    struct time_driver *td = vc ? time_driver_new(virtual_clock_driver(vc)) : NULL;
    fd->made = td != NULL;
    if (td) {
        struct time_timer t;
        time_timer_init(&t);
        fd->before = time_timer_poll(td, &t, ORIGIN_NS + MS_NS, &nw);
        virtual_clock_advance(vc, 5 * MS_NS);
        driver_park(time_driver_driver(td), 0);
        fd->after = time_timer_poll(td, &t, ORIGIN_NS + MS_NS, &nw);
        time_timer_cancel(td, &t);
        time_driver_free(td);
    }
    if (vc)
        virtual_clock_free(vc);
}

LAB_TEST(timer_rules, driver_usable_inside_the_wake, 15)
{
    enum { N = 300 };
    static const char *const what[] = { "the one due timer", "the first of 300 timers", "the last of 300 timers" };
    for (int mode = 0; mode < 3; mode++) { /* 0: one timer; 1: the earliest of N; 2: the latest of N */
        unsigned n = mode == 0 ? 1 : N;
        unsigned probed = mode == 2 ? N - 1 : 0;
        struct virtual_clock *vc = virtual_clock_new(ORIGIN_NS);
        cr_assert_not_null(vc, "virtual_clock_new failed");
        struct time_driver *td = time_driver_new(virtual_clock_driver(vc));
        cr_assert_not_null(td, "time_driver_new returned NULL");
        static struct time_timer t[N];
        static struct counting_waker *cw[N];
        uint64_t deadline[N];
        for (unsigned i = 0; i < n; i++) {
            /* the probed timer alone in the first (mode 1) or the last (mode 2) tick */
            deadline[i] = i == probed ? ORIGIN_NS + (mode == 2 ? 7 : 1) * MS_NS : ORIGIN_NS + (2 + i % 5) * MS_NS;
            time_timer_init(&t[i]);
            cw[i] = counting_waker_new("timer");
            struct waker w = counting_waker_get(cw[i]);
            cr_assert_not(time_timer_poll(td, &t[i], deadline[i], &w), "a timer 1 to 7 ms away was fired at once");
        }
        struct same_driver sd = { .td = td, .fired_one = &t[probed], .deadline = deadline[probed] };
        struct fresh_driver fd = { .made = false };
        struct lab_wake_probe *probe = lab_wake_probe_new(SCALED_MS(1000));
        lab_wake_probe_add(probe, "time_timer_poll of the fired timer, and a timer registered and cancelled on the "
                           "same driver", use_same, &sd);
        lab_wake_probe_add(probe, "a fresh driver's timer registered, fired by a park, and the driver freed",
                           use_fresh, &fd);
        counting_waker_set_hook(cw[probed], lab_wake_probe_hook, probe);
        virtual_clock_advance(vc, 10 * MS_NS);
        driver_park(time_driver_driver(td), 0); /* contract 5: a zero-timeout park fires what is due */
        enum lab_probe_verdict v = lab_wake_probe_finish(probe);
        counting_waker_set_hook(cw[probed], NULL, NULL);
        const char *seen = lab_wake_probe_evidence(probe);
        cr_assert_neq(v, LAB_PROBE_NOT_RUN, "%s, due, was not woken by a park 10 ms on (time_driver.h contract 2)",
                      what[mode]);
        if (v == LAB_PROBE_STARVED)
            lab_cannot_judge("inside the wake of %s: %s", what[mode], seen);
        cr_assert_eq(v, LAB_PROBE_USABLE, "%s fired by a park: a lock the time driver needs was still held while its "
                     "waker was woken (time_driver.h contract 2: wakers are woken after every lock, of any kind, is "
                     "released): %s", what[mode], seen);
        cr_assert(sd.again && !sd.other, "from inside the wake of %s: time_timer_poll of the fired timer gave %s, of a "
                  "timer an hour away %s (expected true, false)", what[mode], sd.again ? "true" : "false",
                  sd.other ? "true" : "false");
        cr_assert(fd.made && !fd.before && fd.after, "from inside the wake of %s: a fresh driver's timer 1 ms away "
                  "polled %s before a park 5 ms on and %s after it (expected false, true)", what[mode],
                  fd.before ? "true" : "false", fd.after ? "true" : "false");
        lab_wake_probe_free(probe);
        time_driver_free(td);
        virtual_clock_free(vc);
        for (unsigned i = 0; i < n; i++) {
            struct waker_counts c = counting_waker_counts(cw[i]);
            cr_assert_eq(c.live, 1, "the time driver kept a reference to a fired timer's waker");
            counting_waker_free(cw[i]);
        }
    }
}

struct other_timer {
    struct time_driver *td;
    bool fired;          /* time_timer_poll of a timer an hour away: false expected */
};

static void use_other(void *arg)
{
    struct other_timer *ot = arg;
    struct waker nw = noop_waker();
    struct time_timer other;
    time_timer_init(&other);
    ot->fired = time_timer_poll(ot->td, &other, ORIGIN_NS + HOUR_NS, &nw);
    time_timer_cancel(ot->td, &other);
}

LAB_TEST(timer_rules, driver_usable_inside_the_drop, 15)
{
    struct virtual_clock *vc = virtual_clock_new(ORIGIN_NS);
    cr_assert_not_null(vc, "virtual_clock_new failed");
    struct time_driver *td = time_driver_new(virtual_clock_driver(vc));
    cr_assert_not_null(td, "time_driver_new returned NULL");
    struct time_timer t;
    time_timer_init(&t);
    struct counting_waker *cw = counting_waker_new("timer");
    struct waker w = counting_waker_get(cw);
    cr_assert_not(time_timer_poll(td, &t, ORIGIN_NS + 5 * MS_NS, &w), "a timer 5 ms away was fired at once");
    struct other_timer ot = { .td = td, .fired = true };
    struct fresh_driver fd = { .made = false };
    struct lab_wake_probe *probe = lab_wake_probe_new(SCALED_MS(1000));
    lab_wake_probe_add(probe, "a timer registered and cancelled on the same driver", use_other, &ot);
    lab_wake_probe_add(probe, "a fresh driver's timer registered, fired by a park, and the driver freed", use_fresh, &fd);
    counting_waker_set_hook(cw, lab_wake_probe_drop_hook, probe);
    time_timer_cancel(td, &t);
    enum lab_probe_verdict v = lab_wake_probe_finish(probe);
    counting_waker_set_hook(cw, NULL, NULL);
    const char *seen = lab_wake_probe_evidence(probe);
    cr_assert_neq(v, LAB_PROBE_NOT_RUN, "time_timer_cancel of a pending timer did not give back the waker its poll "
                  "stored (sleep.h contract 3: a cancelled timer keeps no reference)");
    if (v == LAB_PROBE_STARVED)
        lab_cannot_judge("inside the cancelled timer's waker drop: %s", seen);
    cr_assert_eq(v, LAB_PROBE_USABLE, "time_timer_cancel: a lock the time driver needs was still held while the "
                 "cancelled timer's waker was dropped (sleep.h contract 3: a waker's drop runs the executor's code, "
                 "so it comes after every lock, of any kind, is released): %s", seen);
    cr_assert(!ot.fired && fd.made && !fd.before && fd.after, "from inside the cancelled timer's waker drop: a timer an "
              "hour away polled %s; a fresh driver's timer 1 ms away polled %s before a park 5 ms on and %s after it "
              "(expected false; false, true)", ot.fired ? "true" : "false", fd.before ? "true" : "false",
              fd.after ? "true" : "false");
    lab_wake_probe_free(probe);
    time_driver_free(td);
    virtual_clock_free(vc);
    cr_assert_eq(counting_waker_counts(cw).live, 1, "the time driver kept a reference to a cancelled timer's waker");
    counting_waker_free(cw);
}
