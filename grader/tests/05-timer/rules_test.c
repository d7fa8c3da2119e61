/* rules_test.c - rules of stages 01 and 02 where they come back in the
 * time driver, forced rather than hoped for.
 *
 * Wake outside every lock (time_driver.h contract 2): timers fire inside
 * timer_wheel_advance, under the driver's mutex; their wakers must be woken
 * after it is released. The wake-under-lock detector of stages 01 and 04
 * counts the wrapped locks the parking thread holds at every wake, for one
 * timer and for more timers than one batch holds.
 *
 * Unpark on an earlier deadline (time_driver.h contract 3): the owner parks
 * on a clock that stands still (still_clock.h), an inner driver that
 * records the timeout it was given and stays parked until it is unparked. The owner sleeps until a
 * later timer's deadline, or until its caller's timeout, or for ever; a
 * timer registered from the test's thread with an earlier deadline must
 * unpark that clock. It reads 1,000 s, not 0: a park-until kept as a
 * time relative to now compares as earlier than every absolute deadline.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "explore.h"
#include "parker.h"
#include "stage05.h"
#include "still_clock.h"
#include "store_buffer.h"

LAB_SUITE(timer_rules, 10);

/* ---- wake outside every lock ---------------------------------------------------- */

LAB_TEST(timer_rules, fire_wakes_outside_every_lock, 5)
{
    enum { N = 300 }; /* more than a batch of 32 (the reference's), or of 64, or of 256 */
    for (int mode = 0; mode < 3; mode++) { /* 0: one timer; 1: N over five parks; 2: N in one park */
        unsigned n = mode == 0 ? 1 : N;
        struct virtual_clock *vc = virtual_clock_new(ORIGIN_NS);
        cr_assert_not_null(vc, "virtual_clock_new failed");
        struct time_driver *td = time_driver_new(virtual_clock_driver(vc));
        cr_assert_not_null(td, "time_driver_new returned NULL");
        struct time_timer t[N];
        struct explore_waker *ew[N];
        for (unsigned i = 0; i < n; i++) {
            time_timer_init(&t[i]);
            ew[i] = explore_waker_new("timer");
            struct waker w = explore_waker_get(ew[i]);
            cr_assert_not(time_timer_poll(td, &t[i], ORIGIN_NS + (1 + i % 5) * MS_NS, &w),
                          "a timer 1 to 5 ms away was fired at once");
        }
        lab_sync_reset();
        lab_sync_track(true);
        if (mode != 1) {
            virtual_clock_advance(vc, 10 * MS_NS);
            driver_park(time_driver_driver(td), 0);  /* contract 5: a zero-timeout park fires what is due */
        } else {
            driver_park(time_driver_driver(td), DRIVER_PARK_FOREVER);  /* the clock jumps to the first */
            for (int i = 0; i < 10 && time_driver_test_timers(td) > 0; i++)
                driver_park(time_driver_driver(td), DRIVER_PARK_FOREVER);
        }
        lab_sync_track(false);
        const char *v = lab_sync_wake_under_lock();
        for (unsigned i = 0; i < n; i++)
            cr_assert_eq(explore_waker_woken(ew[i]), 1u, "timer %u of %u, due, was woken %u times by the parks "
                         "that advanced past its deadline, not once (time_driver.h contract 2)", i + 1, n,
                         explore_waker_woken(ew[i]));
        cr_assert_null(v, "%u timer(s) fired by a park: %s (time_driver.h contract 2: their wakers are woken "
                       "after the wheel's mutex is released). The next hint: make hint STAGE=5 "
                       "ITEM=wake-outside-every-lock", n, v);
        time_driver_free(td);
        virtual_clock_free(vc);
        for (unsigned i = 0; i < n; i++) {
            cr_assert_eq(explore_waker_live(ew[i]), 1, "the time driver kept a reference to a fired timer's waker");
            explore_waker_free(ew[i]);
        }
    }
}

/* ---- unpark on an earlier deadline --------------------------------------------------- */

/* The inner driver: a clock that stands still (still_clock.h) at
 * ORIGIN_NS, whose park waits for an unpark, however long its timeout (2 s
 * of real time at most). */

struct owner {
    struct time_driver *td;
    int64_t timeout;     /* the owner's park timeout */
};

static void *owner_parks(void *arg)
{
    struct owner *o = arg;
    driver_park(time_driver_driver(o->td), o->timeout);
    return NULL;
}

static void earlier_unparks(int64_t owner_timeout, uint64_t later_ns, const char *how)
{
    struct still_clock *g = still_clock_new(ORIGIN_NS, 2000, NULL);
    cr_assert_not_null(g, "out of memory");
    struct driver inner = still_clock_driver(g);
    struct time_driver *td = time_driver_new(inner);
    cr_assert_not_null(td, "time_driver_new returned NULL");
    struct counting_waker *cw = counting_waker_new("timer");
    struct waker w = counting_waker_get(cw);
    struct time_timer later, earlier;
    time_timer_init(&later);
    time_timer_init(&earlier);
    if (later_ns)
        cr_assert_not(time_timer_poll(td, &later, ORIGIN_NS + later_ns, &w), "a timer %llu ms away fired at once",
                      (unsigned long long)(later_ns / MS_NS));
    struct owner o = { .td = td, .timeout = owner_timeout };
    pthread_t th;
    pthread_create(&th, NULL, owner_parks, &o);
    bool parked = still_clock_wait_parked(g, -1, 1000) >= 0;
    if (parked) {
        struct still_counts before = still_clock_counts(g);
        int64_t t = before.last_timeout;
        lab_note("%s: the owner parked the inner driver for %lld ns", how, (long long)t);
        cr_assert_not(time_timer_poll(td, &earlier, ORIGIN_NS + MS_NS, &w), "a timer 1 ms away fired at once");
        bool back = still_clock_wait_unparked(g, 1000);
        unsigned after = still_clock_counts(g).unparks;
        if (!back)
            driver_unpark(inner); /* let the owner out before failing */
        pthread_join(th, NULL);
        cr_assert(after > before.unparks && back, "%s (inner park %lld ns), another thread registered a timer 1 ms away, "
                  "earlier than the deadline the owner sleeps until, and the inner driver was not unparked: the "
                  "owner would sleep past it (time_driver.h contract 3: a timer whose deadline comes before the "
                  "one the parked thread sleeps until unparks the inner driver, whatever set that sleep: a timer, "
                  "the caller's timeout, or nothing). The next hint: make hint STAGE=5 ITEM=earlier-deadline-unparks", how, (long long)t);
    } else {
        driver_unpark(inner);
        pthread_join(th, NULL);
        cr_assert_fail("%s: the owner's park never reached the inner driver within 1 s", how);
    }
    time_timer_cancel(td, &earlier);
    time_timer_cancel(td, &later);
    time_driver_free(td);
    still_clock_free(g);
    cr_assert_eq(counting_waker_counts(cw).live, 1, "a cancelled timer's waker was kept: %ld references live",
                 counting_waker_counts(cw).live);
    counting_waker_free(cw);
}

LAB_TEST(timer_rules, earlier_deadline_unparks_a_timed_park, 10)
{
    earlier_unparks(DRIVER_PARK_FOREVER, 10 * SEC_NS, "the owner parked until a timer 10 s away");
    earlier_unparks((int64_t)(5 * SEC_NS), 0, "the owner parked for its caller's 5 s timeout, no timer armed");
    earlier_unparks((int64_t)(5 * SEC_NS), 10 * SEC_NS, "the owner parked for its caller's 5 s timeout, a timer "
                    "10 s away");
    earlier_unparks(DRIVER_PARK_FOREVER, 0, "the owner parked for ever, no timer armed");
}

/* The same rule, with the registration made while the park is half done.
 * A park must look at the wheel and publish the time it sleeps until as
 * one step (one hold of the driver's lock): a registration that comes
 * between the two compares its deadline with a park that is not announced
 * yet, does not unpark, and the owner sleeps past the new timer. Where the
 * gap sits depends on how park is written, so every place is tried
 * (store_buffer.h, lab_sb_park_explore): park (4 s, a timer an hour away)
 * is single-stepped on a fresh driver, alone on its page, over stage 02's
 * parker (the real clock), and stopped right after its first access to the driver,
 * then its second, and so on, until it sleeps in the inner driver; at each
 * stop another thread registers a timer 200 ms away (blocked, if the stopped
 * park holds the lock, until it lets go), then park goes on. (A poll that
 * finds the deadline passed is Ready and registers nothing: that run is
 * not judged.) The park began
 * before that registration, and sleeps until a later time: it must be
 * unparked, and return within a second, every time. */
struct td_race {
    struct parker *p;
    struct time_driver *td;
    struct counting_waker *cw;
    struct waker w;
    struct time_timer later, earlier;
    bool ready_at_once; /* the registration's poll found its deadline passed: nothing registered */
};

static void td_race_park(void *arg)
{
    (void)driver_park(time_driver_driver(((struct td_race *)arg)->td), (int64_t)(4 * SEC_NS));
}

static void td_race_register(void *arg)
{
    struct td_race *x = arg;
    /* 200 ms away: the poll may wait for the stopped park's lock, and a
     * deadline that passes meanwhile is rightly Ready at once (sleep.h
     * contract 2), with nothing registered to unpark for */
    x->ready_at_once = time_timer_poll(x->td, &x->earlier, time_driver_now(x->td) + 200 * MS_NS, &x->w);
}

static void td_race_fresh(void *ctx, struct lab_sb_park *sp)
{
    struct td_race *x = ctx;
    x->p = parker_new();
    cr_assert_not_null(x->p, "parker_new failed");
    alloc_own_pages(true);
    x->td = time_driver_new(parker_driver(x->p));
    alloc_own_pages(false);
    cr_assert_not_null(x->td, "time_driver_new returned NULL");
    x->cw = counting_waker_new("timer");
    x->w = counting_waker_get(x->cw);
    time_timer_init(&x->later);
    time_timer_init(&x->earlier);
    x->ready_at_once = false;
    cr_assert_not(time_timer_poll(x->td, &x->later, time_driver_now(x->td) + 3600 * SEC_NS, &x->w),
                  "a timer an hour away fired at once");
    sp->arg = x;
    sp->page = (void *)((uintptr_t)x->td & ~(uintptr_t)4095);
}

static void td_race_done(void *ctx, struct lab_sb_park *sp)
{
    (void)sp;
    struct td_race *x = ctx;
    time_timer_cancel(x->td, &x->earlier);
    time_timer_cancel(x->td, &x->later);
    time_driver_free(x->td);
    parker_release(x->p);
    counting_waker_free(x->cw);
}

LAB_TEST(timer_rules, registration_after_every_access_of_park, 30)
{
#if !defined(__x86_64__)
    lab_cannot_judge("park is stopped by single-stepping with x86-64's trap flag; this machine is not x86-64");
#else
    struct td_race x;
    unsigned wake_ms = 1000u * (unsigned)LAB_TIMEOUT_SCALE;
    struct lab_sb_park sp = { .unpark = td_race_register, .park = td_race_park, .wake_ms = wake_ms };
    struct lab_sb_park_result r;
    long k;
    char note[256];
    const char *unjudged = lab_sb_park_explore(&sp, td_race_fresh, td_race_done, &x, 200, &k, &r,
                                               "the time driver", note, sizeof note);
    lab_note("%s", note);
    if (unjudged)
        lab_cannot_judge("%s", unjudged);
    if (!r.returned && x.ready_at_once)
        lab_cannot_judge("the registration found its timer's deadline (200 ms away when it began) already "
                         "passed and registered nothing: it was held that long (by the stopped park's lock, or "
                         "off the CPU), too long to judge the park");
    cr_assert(r.returned,
              "the time driver's park (4 s, the next timer an hour away) was single-stepped and stopped right "
              "after its access number %ld to the driver; there another thread registered a timer 200 ms away "
              "(and was not told it was due already); park then went on and was still asleep in the inner "
              "driver %u ms later. The park began before the registration and sleeps until a later "
              "time, so the registration had to unpark it (time_driver.h contract 3). When the registration "
              "looked, what could it learn of a park that had read the wheel but not yet said how long it "
              "sleeps? The next hint: make hint STAGE=5 ITEM=earlier-deadline-unparks",
              k + 1, wake_ms);
#endif
}
