/* explore_test.c - contract clauses 3 and 4 at every synchronisation point.
 *
 * race_test.c forces one window: a completion inside the first poll's clone. A
 * poll can open its window elsewhere (check under the lock, unlock, lock
 * again to register), and a wake can run under a lock other than the
 * signal's. Here the schedule explorer (common/testing/explore.h) runs a
 * first poll (thread A) against a completion or a drop of the producer
 * (thread B) in every order with at most two preemptions at the points
 * where either calls a lock, an unlock or the waker, and checks each: a poll
 * that returned Pending must have been woken, and the next poll is Ready.
 * The wake test counts the locks the waking thread holds, whichever they
 * are, and names the one that was held.
 */
#include <stdio.h>
#include <stdlib.h>

#include "explore.h"
#include "explore_checks.h"
#include "stage01.h"

LAB_SUITE(signal_explore, 10);

static int the_value;

struct scene {
    struct signal *producer;
    struct signal_future *future;
    struct explore_waker *task;
    bool close_instead;         /* B drops the producer instead of completing */
    enum poll first;            /* A's poll */
    struct signal_output out;
    enum signal_status status;  /* B's signal_complete */
};

static bool close_instead;      /* the scenario of the running test, read by setup */

static void *setup(void)
{
    struct scene *s = calloc(1, sizeof *s);
    cr_assert_not_null(s, "out of memory");
    new_signal(NULL, &s->producer, &s->future);
    s->task = explore_waker_new("task");
    s->close_instead = close_instead;
    return s;
}

static void first_poll(void *arg)
{
    struct scene *s = arg;
    struct waker w = explore_waker_get(s->task);
    struct context cx = context_from_waker(&w);
    s->first = signal_future_poll(s->future, &cx, &s->out);
}

static void producer_acts(void *arg)
{
    struct scene *s = arg;
    if (s->close_instead) {
        signal_drop(s->producer);
        s->producer = NULL;
    } else {
        s->status = signal_complete(s->producer, &the_value);
    }
}

static const char *check(void *arg)
{
    static char why[400];
    struct scene *s = arg;
    const char *what = s->close_instead ? "dropped the producer" : "completed the signal";
    enum signal_outcome expected = s->close_instead ? SIGNAL_CLOSED : SIGNAL_VALUE;
    if (!s->close_instead && s->status != SIGNAL_OK) {
        snprintf(why, sizeof why, "signal_complete returned %s while the future was alive; expected SIGNAL_OK",
                 status_name(s->status));
        return why;
    }
    if (s->first == POLL_READY)
        return s->out.outcome == expected ? NULL : "the first poll returned Ready with the wrong outcome";
    if (explore_waker_woken(s->task) == 0 && explore_waker_dropped(s->task) > 0) {
        /* the poll registered a clone and the other side threw it away:
         * the registration was in time, the producer's side is wrong */
        snprintf(why, sizeof why,
                 "lost wakeup: the first poll returned Pending with its waker stored, and %s took that waker out "
                 "and dropped it without waking it. %s (contract %s)", s->close_instead ? "signal_drop" : "signal_complete",
                 s->close_instead ? "A producer dropped without completing must wake the future"
                                  : "The completion must wake the waker it takes out",
                 s->close_instead ? "9" : "4");
        return why;
    }
    if (explore_waker_woken(s->task) == 0) {
        snprintf(why, sizeof why,
                 "lost wakeup: the first poll returned Pending, the other thread %s, and the task's waker was "
                 "never woken: the completion fell between the poll's look at the outcome and its registration "
                 "(contract 3); the schedule below shows where. The next hint: make hint STAGE=1 "
                 "ITEM=explored-check-register", what);
        return why;
    }
    struct waker w = explore_waker_get(s->task);
    struct context cx = context_from_waker(&w);
    if (signal_future_poll(s->future, &cx, &s->out) != POLL_READY || s->out.outcome != expected) {
        snprintf(why, sizeof why, "the task was woken after the other thread %s, but its next poll was not Ready "
                 "with %s", what, outcome_name(expected));
        return why;
    }
    return NULL;
}

static void teardown(void *arg)
{
    struct scene *s = arg;
    if (s->producer)
        signal_drop(s->producer);
    signal_future_drop(s->future);
    explore_waker_free_if_balanced(s->task);
    free(s);
}

static void explore_scene(bool close, const char *test)
{
    close_instead = close;
    struct explore_case c = { .a_name = "first poll", .b_name = close ? "drop" : "completion", .setup = setup,
                              .a = first_poll, .b = producer_acts, .check = check, .teardown = teardown };
    lab_explore_expect(&c, 2, 1, test);
}

LAB_TEST(signal_explore, poll_vs_complete, 10)
{
    explore_scene(false, "signal_explore/poll_vs_complete");
}

LAB_TEST(signal_explore, poll_vs_close, 10)
{
    explore_scene(true, "signal_explore/poll_vs_close");
}

/* Every lock the completing thread holds counts, not only the signal's. */
LAB_TEST(signal_explore, wake_outside_every_lock, 5)
{
    for (int mode = 0; mode < 2; mode++) {
        struct signal *p;
        struct signal_future *f;
        struct signal_output out;
        new_signal(NULL, &p, &f);
        struct explore_waker *task = explore_waker_new("task");
        struct waker w = explore_waker_get(task);
        struct context cx = context_from_waker(&w);
        cr_assert_eq(signal_future_poll(f, &cx, &out), POLL_PENDING, "the first poll returned Ready before the producer did anything");
        lab_sync_reset();
        lab_sync_track(true);
        if (mode == 0)
            signal_complete(p, &the_value);
        else
            signal_drop(p);
        lab_sync_track(false);
        const char *v = lab_sync_wake_under_lock();
        cr_assert_eq(explore_waker_woken(task), 1u, "%s did not wake the waker the pending poll registered (contract %s)",
                     mode == 0 ? "signal_complete" : "signal_drop", mode == 0 ? "1" : "9");
        cr_assert_null(v, "%s: %s (contract 4)", mode == 0 ? "signal_complete" : "signal_drop", v);
        if (mode == 0)
            signal_drop(p);
        signal_future_drop(f);
        cr_assert_eq(explore_waker_live(task), 1, "the signal kept a reference to the waker after both handles were dropped");
        explore_waker_free(task);
    }
}
