/* wake_probe_test.c - contract clause 4 for a lock of any kind.
 *
 * explore_test.c's wake test names a pthread lock held across the wake; a lock
 * made of something else (a spinlock on an atomic flag, a ticket lock) is
 * out of its sight. Here the wake itself asks whether the API is still
 * usable (common/testing/wake_probe.h): inside the wake of signal_complete
 * (or signal_drop), one helper thread polls the future just woken and
 * another lives a fresh signal's whole life (new, poll, complete, poll,
 * both drops). Each must finish while the wake is still running: a lock
 * either of them needs, held by the waking thread, keeps it out until the
 * wake returns, which is the deadlock a real executor meets when its worker
 * runs the woken task at once.
 *
 * api_usable_inside_the_drop asks the same inside the drop of the waker a
 * dropped future gives back (contract 8), which clause 4's reasoning covers.
 *
 * The probe cannot spoil a correct run: the future is idle while the
 * producer completes, the helper's poll is the one that takes the outcome
 * (the test never polls for it again), and the helpers are waited for
 * before either handle is dropped.
 */
#include "stage01.h"
#include "wake_probe.h"

static int the_value, fresh_value;

struct same_poll {
    struct signal_future *future;
    enum poll result;
    struct signal_output out;
};

static void poll_same(void *arg)
{
    struct same_poll *sp = arg;
    struct waker nw = noop_waker();
    struct context cx = context_from_waker(&nw);
    sp->result = signal_future_poll(sp->future, &cx, &sp->out);
}

struct fresh_life {
    int made;                   /* signal_new's result */
    enum poll first, second;
    enum signal_status status;
};

static void live_fresh(void *arg)
{
    struct fresh_life *fl = arg;
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    struct waker nw = noop_waker();
    struct context cx = context_from_waker(&nw);
    fl->made = signal_new(NULL, &p, &f);
    if (fl->made != 0)
        return;
    fl->first = signal_future_poll(f, &cx, &out);
    fl->status = signal_complete(p, &fresh_value);
    fl->second = signal_future_poll(f, &cx, &out);
    signal_drop(p);
    signal_future_drop(f);
}

static void expect_fresh_life(const struct fresh_life *fl, const char *inside)
{
    cr_assert_eq(fl->made, 0, "signal_new from inside a %s failed", inside);
    cr_assert(fl->first == POLL_PENDING && fl->status == SIGNAL_OK && fl->second == POLL_READY,
              "a fresh signal used from inside a %s did not behave: first poll %s, signal_complete %s, second poll "
              "%s (expected Pending, SIGNAL_OK, Ready)", inside, fl->first == POLL_READY ? "Ready" : "Pending",
              status_name(fl->status), fl->second == POLL_READY ? "Ready" : "Pending");
}

LAB_TEST(signal_explore, api_usable_inside_the_wake, 10)
{
    for (int mode = 0; mode < 2; mode++) {
        const char *action = mode == 0 ? "signal_complete" : "signal_drop";
        struct signal *p;
        struct signal_future *f;
        struct signal_output out;
        new_signal(NULL, &p, &f);
        struct counting_waker *task = counting_waker_new("task");
        cr_assert_eq(poll_with(f, task, &out), POLL_PENDING, "the first poll returned Ready before the producer did anything");

        struct same_poll sp = { .future = f };
        struct fresh_life fl = { .made = -1 };
        struct lab_wake_probe *probe = lab_wake_probe_new(SCALED_MS(1000));
        lab_wake_probe_add(probe, "signal_future_poll of the signal being woken for", poll_same, &sp);
        lab_wake_probe_add(probe, "a fresh signal's new, poll, complete, poll and drops", live_fresh, &fl);
        counting_waker_set_hook(task, lab_wake_probe_hook, probe);
        if (mode == 0) {
            enum signal_status st = signal_complete(p, &the_value);
            cr_assert_eq(st, SIGNAL_OK, "signal_complete returned %s; expected SIGNAL_OK", status_name(st));
        } else {
            signal_drop(p);
        }
        enum lab_probe_verdict v = lab_wake_probe_finish(probe);
        counting_waker_set_hook(task, NULL, NULL);
        const char *seen = lab_wake_probe_evidence(probe);
        cr_assert_neq(v, LAB_PROBE_NOT_RUN, "%s did not wake the waker the pending poll registered%s", action,
                      mode == 0 ? " (contract 1: Pending means someone will wake you)"
                                : " (contract 9: a producer that leaves must wake the future)");
        if (v == LAB_PROBE_STARVED)
            lab_cannot_judge("inside the wake of %s: %s", action, seen);
        cr_assert_eq(v, LAB_PROBE_USABLE, "%s: a lock the API needs was still held while the waker was woken "
                     "(contract 4: the waking thread holds no lock at all, of any kind, while it wakes): %s",
                     action, seen);
        expect_fresh_life(&fl, "wake");
        if (mode == 0)
            expect_ready(sp.result, &sp.out, SIGNAL_VALUE, &the_value, "a poll made from inside the wake");
        else
            expect_ready(sp.result, &sp.out, SIGNAL_CLOSED, NULL, "a poll made from inside the wake");
        lab_wake_probe_free(probe);
        if (mode == 0)
            signal_drop(p);
        signal_future_drop(f);
        expect_books_balanced(task);
    }
}

/* A pending future dropped gives its stored waker back at once (contract 8),
 * and a waker's drop runs the executor's code as its wake does (contract 4:
 * "the same reasoning applies to waker_drop"): inside that drop, the
 * producer's signal_complete and a fresh signal's whole life finish. The
 * producer still holds its reference, so the block outlives the helpers;
 * its complete may come before or after the future is gone (either answer
 * is right while the drop runs), and only its finishing is judged. */
struct producer_call {
    struct signal *producer;
    enum signal_status status;
};

static void complete_producer(void *arg)
{
    struct producer_call *pc = arg;
    pc->status = signal_complete(pc->producer, &fresh_value);
}

LAB_TEST(signal_explore, api_usable_inside_the_drop, 10)
{
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    new_signal(NULL, &p, &f);
    struct counting_waker *task = counting_waker_new("task");
    cr_assert_eq(poll_with(f, task, &out), POLL_PENDING, "the first poll returned Ready before the producer did anything");
    struct producer_call pc = { .producer = p };
    struct fresh_life fl = { .made = -1 };
    struct lab_wake_probe *probe = lab_wake_probe_new(SCALED_MS(1000));
    lab_wake_probe_add(probe, "signal_complete of the producer whose future is being dropped", complete_producer, &pc);
    lab_wake_probe_add(probe, "a fresh signal's new, poll, complete, poll and drops", live_fresh, &fl);
    counting_waker_set_hook(task, lab_wake_probe_drop_hook, probe);
    signal_future_drop(f);
    enum lab_probe_verdict v = lab_wake_probe_finish(probe);
    counting_waker_set_hook(task, NULL, NULL);
    const char *seen = lab_wake_probe_evidence(probe);
    cr_assert_neq(v, LAB_PROBE_NOT_RUN, "signal_future_drop of a pending future did not give back the waker its poll "
                  "stored (contract 8: dropping the future releases its stored waker at once)");
    if (v == LAB_PROBE_STARVED)
        lab_cannot_judge("inside the stored waker's drop: %s", seen);
    cr_assert_eq(v, LAB_PROBE_USABLE, "signal_future_drop: a lock the API needs was still held while the stored waker "
                 "was dropped (contract 4: a waker's drop runs the executor's code too, so it comes after every lock, "
                 "of any kind, is released): %s", seen);
    expect_fresh_life(&fl, "waker's drop");
    lab_wake_probe_free(probe);
    signal_drop(p);
    expect_books_balanced(task);
}
