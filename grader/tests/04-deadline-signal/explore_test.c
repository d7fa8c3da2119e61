/* explore_test.c - contract clauses 3 and 4 at every synchronisation point.
 *
 * race_test.c forces one window: a decision inside the first poll's clone. Here
 * the schedule explorer (common/testing/explore.h) runs a first poll
 * (thread A) against a completion or an expiry (thread B) in every order
 * with at most two preemptions at the points where either calls a lock, an
 * unlock or the waker, and checks each: a poll that returned Pending must
 * have been woken, and the next poll delivers the winner. The wake test
 * counts the locks the deciding thread holds, whichever they are. The same
 * tests as stage 01's (grader/tests/01-signal/explore_test.c), on this API.
 */
#include <stdio.h>
#include <stdlib.h>

#include "explore.h"
#include "explore_checks.h"
#include "stage04.h"

LAB_SUITE(deadline_explore, 10);

static int the_value;

struct scene {
    struct ds ds;
    struct explore_waker *task;
    bool expire_instead;        /* B expires instead of completing */
    enum poll first;            /* A's poll */
    struct deadline_signal_output out;
    enum deadline_signal_status status;  /* B's decision */
};

static bool expire_instead;      /* the scenario of the running test, read by setup */

static void *setup(void)
{
    struct scene *s = calloc(1, sizeof *s);
    cr_assert_not_null(s, "out of memory");
    s->ds = new_ds(NULL);
    s->task = explore_waker_new("task");
    s->expire_instead = expire_instead;
    return s;
}

static void first_poll(void *arg)
{
    struct scene *s = arg;
    struct waker w = explore_waker_get(s->task);
    struct context cx = context_from_waker(&w);
    s->first = deadline_signal_future_poll(s->ds.future, &cx, &s->out);
}

static void decider_acts(void *arg)
{
    struct scene *s = arg;
    s->status = s->expire_instead ? deadline_signal_expire(s->ds.timer)
                                  : deadline_signal_complete(s->ds.producer, &the_value);
}

static const char *check(void *arg)
{
    static char why[400];
    struct scene *s = arg;
    const char *what = s->expire_instead ? "expired the signal" : "completed the signal";
    enum deadline_signal_outcome expected = s->expire_instead ? DEADLINE_SIGNAL_EXPIRED : DEADLINE_SIGNAL_VALUE;
    if (s->status != DEADLINE_SIGNAL_WON) {
        snprintf(why, sizeof why, "the only decider returned %s while the future was alive; expected DEADLINE_SIGNAL_WON",
                 status_name(s->status));
        return why;
    }
    if (s->first == POLL_READY)
        return s->out.outcome == expected ? NULL : "the first poll returned Ready with the wrong outcome";
    if (explore_waker_woken(s->task) == 0) {
        snprintf(why, sizeof why,
                 "lost wakeup: the first poll returned Pending, the other thread %s, and the task's waker was "
                 "never woken: the decision fell between the poll's look at the state and its registration "
                 "(contract 3); the schedule below shows where. The next hint: make hint STAGE=4 "
                 "ITEM=explored-check-register", what);
        return why;
    }
    struct waker w = explore_waker_get(s->task);
    struct context cx = context_from_waker(&w);
    if (deadline_signal_future_poll(s->ds.future, &cx, &s->out) != POLL_READY || s->out.outcome != expected) {
        snprintf(why, sizeof why, "the task was woken after the other thread %s, but its next poll was not Ready "
                 "with %s", what, outcome_name(expected));
        return why;
    }
    return NULL;
}

static void teardown(void *arg)
{
    struct scene *s = arg;
    deadline_signal_drop(s->ds.producer);
    deadline_signal_timer_drop(s->ds.timer);
    deadline_signal_future_drop(s->ds.future);
    explore_waker_free_if_balanced(s->task);
    free(s);
}

static void explore_scene(bool expire, const char *test)
{
    expire_instead = expire;
    struct explore_case c = { .a_name = "first poll", .b_name = expire ? "expiry" : "completion", .setup = setup,
                              .a = first_poll, .b = decider_acts, .check = check, .teardown = teardown };
    lab_explore_expect(&c, 2, 4, test);
}

LAB_TEST(deadline_explore, poll_vs_complete, 10)
{
    explore_scene(false, "deadline_explore/poll_vs_complete");
}

LAB_TEST(deadline_explore, poll_vs_expire, 10)
{
    explore_scene(true, "deadline_explore/poll_vs_expire");
}

/* Every lock the deciding thread holds counts, not only the signal's. */
LAB_TEST(deadline_explore, wake_outside_every_lock, 5)
{
    for (int mode = 0; mode < 3; mode++) {
        static const char *const what[] = { "deadline_signal_complete", "deadline_signal_expire", "deadline_signal_drop" };
        struct ds d = new_ds(NULL);
        struct deadline_signal_output out;
        struct explore_waker *task = explore_waker_new("task");
        struct waker w = explore_waker_get(task);
        struct context cx = context_from_waker(&w);
        cr_assert_eq(deadline_signal_future_poll(d.future, &cx, &out), POLL_PENDING,
                     "the first poll returned Ready before anything was decided");
        lab_sync_reset();
        lab_sync_track(true);
        if (mode == 0)
            deadline_signal_complete(d.producer, &the_value);
        else if (mode == 1)
            deadline_signal_expire(d.timer);
        else
            deadline_signal_drop(d.producer);
        lab_sync_track(false);
        const char *v = lab_sync_wake_under_lock();
        cr_assert_eq(explore_waker_woken(task), 1u, "%s did not wake the waker the pending poll registered", what[mode]);
        cr_assert_null(v, "%s: %s (contract 5: the winner wakes after unlocking, every lock); the next hint: "
                       "make hint STAGE=4 ITEM=wake-outside-every-lock", what[mode], v);
        if (mode != 2)
            deadline_signal_drop(d.producer);
        deadline_signal_timer_drop(d.timer);
        deadline_signal_future_drop(d.future);
        cr_assert_eq(explore_waker_live(task), 1, "the signal kept a reference to the waker after every handle was dropped");
        explore_waker_free(task);
    }
}
