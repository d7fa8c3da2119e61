/* lock_test.c - contract clauses 5 and 9: the winner (and a producer that leaves
 * without a value) wakes the stored waker after releasing the lock.
 *
 * How it is detected: a hook runs inside the waker's wake, on the thread
 * that decided. The hook starts a probe thread that polls the future (which
 * needs the signal's lock) and, once the probe runs, gives it 200 ms. A wake
 * made after unlocking lets the probe through at once, and the probe sees
 * the outcome. A wake made under the lock keeps the probe stuck until the
 * wake returns: that is the bug, and the test says so.
 *
 * The probe cannot spoil a correct run: the future handle is idle while the
 * decider runs, the probe's poll is the one that takes the outcome (the test
 * checks what it got and never polls for it again), and the probe is joined
 * before any handle is dropped.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "side_thread.h"
#include "stage04.h"

static int the_value;

struct probe {
    struct deadline_signal_future *fut;
    struct counting_waker *probe_waker;
    struct side_hook hook; /* polls from inside the first wake, 200 ms from the moment it runs */
    enum poll result;    /* written by the probe, read after the join */
    struct deadline_signal_output out;
};

static void probe_poll(void *arg)
{
    struct probe *pr = arg;
    struct waker w = counting_waker_get(pr->probe_waker);
    struct context cx = context_from_waker(&w);
    pr->result = deadline_signal_future_poll(pr->fut, &cx, &pr->out);
}

enum decider { BY_COMPLETE, BY_EXPIRE, BY_PRODUCER_DROP };

static void run_probe_test(enum decider how)
{
    static const char *action[] = { "deadline_signal_complete", "deadline_signal_expire", "deadline_signal_drop (producer left without a value)" };
    struct counting_waker *task = counting_waker_new("task");
    struct counting_waker *probe_w = counting_waker_new("probe");
    struct deadline_signal_output out;
    struct ds d = new_ds(NULL);

    cr_assert_eq(poll_with(d.future, task, &out), POLL_PENDING, "the first poll returned Ready before any decision");

    struct probe pr = { .fut = d.future, .probe_waker = probe_w };
    pr.hook = (struct side_hook){ .at = SIDE_AT_FIRST_WAKE, .act = probe_poll, .arg = &pr, .ms = 200, .what = "probe" };
    counting_waker_set_hook(task, side_hook, &pr.hook);

    if (how == BY_COMPLETE)
        expect_status(deadline_signal_complete(d.producer, &the_value), DEADLINE_SIGNAL_WON, action[how], "nothing was decided");
    else if (how == BY_EXPIRE)
        expect_status(deadline_signal_expire(d.timer), DEADLINE_SIGNAL_WON, action[how], "nothing was decided");
    else
        deadline_signal_drop(d.producer);
    side_thread_join(&pr.hook.side);
    counting_waker_set_hook(task, NULL, NULL);

    cr_assert(pr.hook.started, "%s did not wake the waker the pending poll registered (%s)", action[how],
              how == BY_PRODUCER_DROP ? "contract 9: a producer that leaves expires the signal and wakes the task"
                                      : "contract 5: the winner wakes the waiting task");
    cr_assert(pr.hook.got_through,
              "%s woke the waker while the signal's lock was still held: inside the wake, a poll from "
              "another thread could not take the lock for 200 ms (contract 5: the winner wakes after "
              "unlocking). The next hint: make hint STAGE=4 ITEM=wake-outside-lock", action[how]);
    if (how == BY_COMPLETE)
        expect_ready(pr.result, &pr.out, DEADLINE_SIGNAL_VALUE, &the_value, "a poll made from inside the wake");
    else
        expect_ready(pr.result, &pr.out, DEADLINE_SIGNAL_EXPIRED, NULL, "a poll made from inside the wake");

    if (how != BY_PRODUCER_DROP)
        deadline_signal_drop(d.producer);
    deadline_signal_timer_drop(d.timer);
    deadline_signal_future_drop(d.future);
    expect_books_balanced(task);
    expect_books_balanced(probe_w);
}

LAB_SUITE(deadline_lock, 5);

LAB_TEST(deadline_lock, wake_outside_lock_complete, 5)
{
    run_probe_test(BY_COMPLETE);
}

LAB_TEST(deadline_lock, wake_outside_lock_expire, 5)
{
    run_probe_test(BY_EXPIRE);
}

LAB_TEST(deadline_lock, wake_outside_lock_producer_drop, 5)
{
    run_probe_test(BY_PRODUCER_DROP);
}
