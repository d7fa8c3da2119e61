/* wake_probe_test.c - contract clause 5 for a lock of any kind.
 *
 * explore_test.c's wake test names a pthread lock held across the winner's wake;
 * a lock made of something else (a spinlock on an atomic flag, a ticket
 * lock) is out of its sight. Here the wake itself asks whether the API is
 * still usable (common/testing/wake_probe.h): inside the wake that a
 * completion, an expiry or a producer's drop gives the pending future, one
 * helper thread polls that future and another lives a fresh deadline
 * signal's whole life (new, poll, complete, a late expiry, poll, the three
 * drops). Each must finish while the wake is still running: a lock either
 * needs, held by the deciding thread, keeps it out until the wake returns.
 *
 * The probe cannot spoil a correct run: the future is idle while the
 * decision is made, the helper's poll is the one that takes the outcome
 * (the test never polls for it again), and the helpers are waited for
 * before any handle is dropped.
 */
#include "stage04.h"
#include "wake_probe.h"

static int the_value, fresh_value;

struct same_poll {
    struct deadline_signal_future *future;
    enum poll result;
    struct deadline_signal_output out;
};

static void poll_same(void *arg)
{
    struct same_poll *sp = arg;
    struct waker nw = noop_waker();
    struct context cx = context_from_waker(&nw);
    sp->result = deadline_signal_future_poll(sp->future, &cx, &sp->out);
}

struct fresh_life {
    int made;
    enum poll first, second;
    enum deadline_signal_status completed, expired;
};

static void live_fresh(void *arg)
{
    struct fresh_life *fl = arg;
    struct deadline_signal *p;
    struct deadline_signal_timer *t;
    struct deadline_signal_future *f;
    struct deadline_signal_output out;
    struct waker nw = noop_waker();
    struct context cx = context_from_waker(&nw);
    fl->made = deadline_signal_new(NULL, &p, &t, &f);
    if (fl->made != 0)
        return;
    fl->first = deadline_signal_future_poll(f, &cx, &out);
    fl->completed = deadline_signal_complete(p, &fresh_value);
    fl->expired = deadline_signal_expire(t);
    fl->second = deadline_signal_future_poll(f, &cx, &out);
    deadline_signal_drop(p);
    deadline_signal_timer_drop(t);
    deadline_signal_future_drop(f);
}

static void expect_fresh_life(const struct fresh_life *fl, const char *inside)
{
    cr_assert(fl->made == 0 && fl->first == POLL_PENDING && fl->completed == DEADLINE_SIGNAL_WON &&
              fl->expired == DEADLINE_SIGNAL_LOST_TO_VALUE && fl->second == POLL_READY,
              "a fresh deadline signal used from inside a %s did not behave: new %d, first poll %s, complete %s, "
              "expire %s, second poll %s (expected 0, Pending, WON, LOST_TO_VALUE, Ready)", inside, fl->made,
              fl->first == POLL_READY ? "Ready" : "Pending", status_name(fl->completed), status_name(fl->expired),
              fl->second == POLL_READY ? "Ready" : "Pending");
}

LAB_TEST(deadline_explore, api_usable_inside_the_wake, 15)
{
    static const char *const what[] = { "deadline_signal_complete", "deadline_signal_expire", "deadline_signal_drop" };
    static const enum deadline_signal_outcome outcome[] = { DEADLINE_SIGNAL_VALUE, DEADLINE_SIGNAL_EXPIRED,
                                                            DEADLINE_SIGNAL_EXPIRED };
    for (int mode = 0; mode < 3; mode++) {
        struct ds d = new_ds(NULL);
        struct deadline_signal_output out;
        struct counting_waker *task = counting_waker_new("task");
        cr_assert_eq(poll_with(d.future, task, &out), POLL_PENDING,
                     "the first poll returned Ready before anything was decided");
        struct same_poll sp = { .future = d.future };
        struct fresh_life fl = { .made = -1 };
        struct lab_wake_probe *probe = lab_wake_probe_new(SCALED_MS(1000));
        lab_wake_probe_add(probe, "deadline_signal_future_poll of the signal being woken for", poll_same, &sp);
        lab_wake_probe_add(probe, "a fresh deadline signal's new, poll, complete, expire, poll and drops", live_fresh, &fl);
        counting_waker_set_hook(task, lab_wake_probe_hook, probe);
        if (mode == 0)
            deadline_signal_complete(d.producer, &the_value);
        else if (mode == 1)
            deadline_signal_expire(d.timer);
        else
            deadline_signal_drop(d.producer);
        enum lab_probe_verdict v = lab_wake_probe_finish(probe);
        counting_waker_set_hook(task, NULL, NULL);
        const char *seen = lab_wake_probe_evidence(probe);
        cr_assert_neq(v, LAB_PROBE_NOT_RUN, "%s did not wake the waker the pending poll registered", what[mode]);
        if (v == LAB_PROBE_STARVED)
            lab_cannot_judge("inside the wake of %s: %s", what[mode], seen);
        cr_assert_eq(v, LAB_PROBE_USABLE, "%s: a lock the API needs was still held while the waker was woken "
                     "(contract 5: the winner wakes after unlocking every lock, of any kind): %s", what[mode], seen);
        expect_fresh_life(&fl, "wake");
        expect_ready(sp.result, &sp.out, outcome[mode], mode == 0 ? &the_value : NULL, "a poll made from inside the wake");
        lab_wake_probe_free(probe);
        if (mode != 2)
            deadline_signal_drop(d.producer);
        deadline_signal_timer_drop(d.timer);
        deadline_signal_future_drop(d.future);
        expect_books_balanced(task);
    }
}

/* A pending future dropped gives its stored waker back at once (contract 8),
 * and that drop runs the executor's code as a wake does, so the same rule
 * holds (contract 5): inside it, the producer's complete and the timer's
 * expire (each may come before or after the future is gone; only their
 * finishing is judged) and a fresh deadline signal's whole life finish.
 * The producer and the timer still hold their references, so the state
 * outlives the helpers. */
struct deciders {
    struct ds d;
    enum deadline_signal_status completed, expired;
};

static void decide_both(void *arg)
{
    struct deciders *dc = arg;
    dc->completed = deadline_signal_complete(dc->d.producer, &fresh_value);
    dc->expired = deadline_signal_expire(dc->d.timer);
}

LAB_TEST(deadline_explore, api_usable_inside_the_drop, 15)
{
    struct deciders dc = { .d = new_ds(NULL) };
    struct deadline_signal_output out;
    struct counting_waker *task = counting_waker_new("task");
    cr_assert_eq(poll_with(dc.d.future, task, &out), POLL_PENDING, "the first poll returned Ready before anything was decided");
    struct fresh_life fl = { .made = -1 };
    struct lab_wake_probe *probe = lab_wake_probe_new(SCALED_MS(1000));
    lab_wake_probe_add(probe, "deadline_signal_complete and deadline_signal_expire of the signal whose future is being "
                       "dropped", decide_both, &dc);
    lab_wake_probe_add(probe, "a fresh deadline signal's new, poll, complete, expire, poll and drops", live_fresh, &fl);
    counting_waker_set_hook(task, lab_wake_probe_drop_hook, probe);
    deadline_signal_future_drop(dc.d.future);
    enum lab_probe_verdict v = lab_wake_probe_finish(probe);
    counting_waker_set_hook(task, NULL, NULL);
    const char *seen = lab_wake_probe_evidence(probe);
    cr_assert_neq(v, LAB_PROBE_NOT_RUN, "deadline_signal_future_drop of a pending future did not give back the waker its "
                  "poll stored (contract 8: dropping the future releases its stored waker at once)");
    if (v == LAB_PROBE_STARVED)
        lab_cannot_judge("inside the stored waker's drop: %s", seen);
    cr_assert_eq(v, LAB_PROBE_USABLE, "deadline_signal_future_drop: a lock the API needs was still held while the "
                 "stored waker was dropped (contract 5: a waker's drop runs the executor's code too, so it comes after "
                 "every lock, of any kind, is released): %s", seen);
    expect_fresh_life(&fl, "waker's drop");
    lab_wake_probe_free(probe);
    deadline_signal_drop(dc.d.producer);
    deadline_signal_timer_drop(dc.d.timer);
    expect_books_balanced(task);
}
