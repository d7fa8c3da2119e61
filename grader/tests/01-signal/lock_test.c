/* lock_test.c - contract clause 4: the waker is woken after the lock is released.
 *
 * How it is detected: a hook runs inside the waker's wake, on the thread
 * that is completing (or dropping) the producer. The hook starts a probe
 * thread that polls the future, which needs the signal's lock, and waits up
 * to 200 ms (from the moment the probe runs) for it. If the wake runs after unlocking, the probe gets the lock
 * at once and finds the outcome. If the wake runs under the lock, the probe
 * is stuck until the wake returns: that is the bug, and the test says so.
 *
 * The probe cannot spoil a correct run: the future handle is idle while the
 * producer is completing, the probe's poll is the one that takes the outcome
 * (the test checks what it got and never polls for it again), and the probe
 * is joined before either handle is dropped.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "side_thread.h"
#include "stage01.h"

static int the_value;

struct probe {
    struct signal_future *fut;
    struct counting_waker *probe_waker;
    struct side_hook hook; /* polls from inside the first wake, 200 ms from the moment it runs */
    enum poll result;      /* written by the probe, read after the join */
    struct signal_output out;
};

static void probe_poll(void *arg)
{
    struct probe *pr = arg;
    struct waker w = counting_waker_get(pr->probe_waker);
    struct context cx = context_from_waker(&w);
    pr->result = signal_future_poll(pr->fut, &cx, &pr->out);
}

/* mode 0: complete the signal; mode 1: drop the producer without completing */
static void run_probe_test(int mode)
{
    struct counting_waker *task = counting_waker_new("task");
    struct counting_waker *probe_w = counting_waker_new("probe");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    new_signal(NULL, &p, &f);

    cr_assert_eq(poll_with(f, task, &out), POLL_PENDING, "the first poll returned Ready before the producer did anything");

    struct probe pr = { .fut = f, .probe_waker = probe_w };
    pr.hook = (struct side_hook){ .at = SIDE_AT_FIRST_WAKE, .act = probe_poll, .arg = &pr, .ms = 200, .what = "probe" };
    counting_waker_set_hook(task, side_hook, &pr.hook);

    const char *action = mode == 0 ? "signal_complete" : "signal_drop";
    if (mode == 0) {
        enum signal_status st = signal_complete(p, &the_value);
        cr_assert_eq(st, SIGNAL_OK, "signal_complete returned %s; expected SIGNAL_OK", status_name(st));
    } else {
        signal_drop(p);
    }
    side_thread_join(&pr.hook.side);
    counting_waker_set_hook(task, NULL, NULL);

    cr_assert(pr.hook.started, "%s did not wake the waker the pending poll registered%s", action,
              mode == 0 ? " (contract 1: Pending means someone will wake you)" : " (contract 9: a producer that leaves must wake the future)");
    cr_assert(pr.hook.got_through,
              "%s woke the waker while the signal's lock was still held: inside the wake, a poll "
              "from another thread could not take the lock for 200 ms (contract 4: woken after "
              "unlocking). The next hint: make hint STAGE=1 ITEM=wake-outside-lock", action);
    if (mode == 0)
        expect_ready(pr.result, &pr.out, SIGNAL_VALUE, &the_value, "a poll made from inside the wake");
    else
        expect_ready(pr.result, &pr.out, SIGNAL_CLOSED, NULL, "a poll made from inside the wake");

    if (mode == 0)
        signal_drop(p);
    signal_future_drop(f);
    expect_books_balanced(task);
    expect_books_balanced(probe_w);
}

LAB_SUITE(signal_lock, 5);

LAB_TEST(signal_lock, wake_outside_lock_complete, 5)
{
    run_probe_test(0);
}

LAB_TEST(signal_lock, wake_outside_lock_close, 5)
{
    run_probe_test(1);
}
