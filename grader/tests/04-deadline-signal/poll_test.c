/* poll_test.c - contract clauses 1, 2 and 7: what a poll registers, which waker a
 * decision wakes, and what a poll answers after Ready. */
#include <stdio.h>

#include "stage04.h"

static int value_a, value_b;

LAB_SUITE(deadline_poll, 5);

/* ---- clause 1: Pending only with a registered wake path ------------------ */

/* expire_it: the timer decides instead of the producer. */
static void pending_registers(bool expire_it)
{
    struct counting_waker *task = counting_waker_new("task");
    struct deadline_signal_output out;
    struct ds d = new_ds(record_drop);

    enum poll r = poll_with(d.future, task, &out);
    cr_assert_eq(r, POLL_PENDING, "the first poll of a signal nobody decided returned Ready (outcome %s); it must return POLL_PENDING",
                 outcome_name(out.outcome));
    struct waker_counts c = counting_waker_counts(task);
    cr_assert_eq(c.clones, 1u, "poll returned Pending after cloning the task's waker %u times; it must store exactly one clone (contract 1)", c.clones);
    cr_assert_eq(c.live, 2, "poll returned Pending but the signal holds %ld reference(s) to the task's waker; it must keep exactly one, to wake it later (contract 1)", c.live - 1);
    cr_assert_eq(counting_waker_woken(task), 0u, "poll woke the task's waker although nothing was decided yet");

    if (expire_it)
        expect_status(deadline_signal_expire(d.timer), DEADLINE_SIGNAL_WON, "deadline_signal_expire on an undecided signal", "nothing was decided, so the timer wins");
    else
        expect_status(deadline_signal_complete(d.producer, &value_a), DEADLINE_SIGNAL_WON, "deadline_signal_complete on an undecided signal", "nothing was decided, so the producer wins");
    cr_assert_eq(counting_waker_woken(task), 1u, "deadline_signal_%s woke the registered waker %u times; the winner must take the stored waker out and wake it exactly once (contract 5)",
                 expire_it ? "expire" : "complete", counting_waker_woken(task));
    cr_assert_eq(counting_waker_counts(task).live, 1, "after the decision the signal still holds a reference to the task's waker; the winner must take it out and consume it with the wake (contract 5)");

    r = poll_with(d.future, task, &out);
    if (expire_it)
        expect_ready(r, &out, DEADLINE_SIGNAL_EXPIRED, NULL, "the poll after the timer's wake");
    else
        expect_ready(r, &out, DEADLINE_SIGNAL_VALUE, &value_a, "the poll after the producer's wake");
    cr_assert_eq(counting_waker_counts(task).clones, 1u, "the Ready poll cloned the waker again; a Ready poll has nothing to register (contract 1)");

    deadline_signal_future_drop(d.future);
    deadline_signal_drop(d.producer);
    deadline_signal_timer_drop(d.timer);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called, but the only value was delivered");
    expect_books_balanced(task);
}

LAB_TEST(deadline_poll, pending_registers_complete, 5)
{
    pending_registers(false);
}

LAB_TEST(deadline_poll, pending_registers_expire, 5)
{
    pending_registers(true);
}

/* Clause 1, second half: decided before the first poll, so that poll is
 * Ready and clones nothing. how: 0 complete, 1 expire, 2 producer dropped. */
static void ready_before_first_poll(int how)
{
    static const char *what[] = { "completed", "expired", "abandoned by its producer" };
    struct counting_waker *task = counting_waker_new("task");
    struct deadline_signal_output out;
    struct ds d = new_ds(NULL);

    if (how == 0)
        expect_status(deadline_signal_complete(d.producer, &value_b), DEADLINE_SIGNAL_WON, "deadline_signal_complete before any poll", "nothing was decided");
    else if (how == 1)
        expect_status(deadline_signal_expire(d.timer), DEADLINE_SIGNAL_WON, "deadline_signal_expire before any poll", "nothing was decided");
    else
        deadline_signal_drop(d.producer);

    char label[96];
    snprintf(label, sizeof label, "the first poll of a signal %s before it", what[how]);
    enum poll r = poll_with(d.future, task, &out);
    if (how == 0)
        expect_ready(r, &out, DEADLINE_SIGNAL_VALUE, &value_b, label);
    else
        expect_ready(r, &out, DEADLINE_SIGNAL_EXPIRED, NULL, label);
    struct waker_counts c = counting_waker_counts(task);
    cr_assert_eq(c.clones, 0u, "%s cloned the task's waker %u times; the poll that cloned it returned Ready, so nothing will ever use that clone (contract 1: Pending only with a registered waker)", label, c.clones);
    cr_assert_eq(c.wakes + c.wake_by_refs, 0u, "%s woke the task's waker, and returned Ready in the same call (contract 1)", label);

    deadline_signal_future_drop(d.future);
    if (how != 2)
        deadline_signal_drop(d.producer);
    deadline_signal_timer_drop(d.timer);
    expect_books_balanced(task);
}

LAB_TEST(deadline_poll, ready_before_first_poll_value, 5)
{
    ready_before_first_poll(0);
}

LAB_TEST(deadline_poll, ready_before_first_poll_expired, 5)
{
    ready_before_first_poll(1);
}

LAB_TEST(deadline_poll, ready_before_first_poll_abandoned, 5)
{
    ready_before_first_poll(2);
}

/* ---- clause 2: the latest waker, exactly once ---------------------------- */

/* Two tasks poll in turn; only the most recent is woken, exactly once, and
 * the first one's reference is given back at the second poll. */
static void latest_waker(bool expire_it)
{
    struct counting_waker *a = counting_waker_new("first task");
    struct counting_waker *b = counting_waker_new("second task");
    struct deadline_signal_output out;
    struct ds d = new_ds(NULL);

    cr_assert_eq(poll_with(d.future, a, &out), POLL_PENDING, "the first poll returned Ready before any decision");
    cr_assert_eq(poll_with(d.future, b, &out), POLL_PENDING, "the second poll returned Ready before any decision");

    struct waker_counts ca = counting_waker_counts(a), cb = counting_waker_counts(b);
    cr_assert_eq(cb.live, 2, "after a poll by a second task the signal holds %ld reference(s) to its waker; it must hold exactly one (the latest waker, contract 2)", cb.live - 1);
    cr_assert_eq(ca.live, 1, "after a poll by a second task the signal still holds the first task's waker (%ld reference(s)); replacing a stored waker must drop the old one at once (contract 2)", ca.live - 1);

    const char *who = expire_it ? "deadline_signal_expire" : "deadline_signal_complete";
    enum deadline_signal_status st = expire_it ? deadline_signal_expire(d.timer) : deadline_signal_complete(d.producer, &value_a);
    expect_status(st, DEADLINE_SIGNAL_WON, who, "nothing was decided before");
    cr_assert_eq(counting_waker_woken(a), 0u, "%s woke the first task's waker; only the most recently registered waker may be woken (contract 2)", who);
    cr_assert_eq(counting_waker_woken(b), 1u, "%s woke the latest waker %u times; it must wake it exactly once (contract 2)", who, counting_waker_woken(b));

    if (expire_it)
        expect_ready(poll_with(d.future, b, &out), &out, DEADLINE_SIGNAL_EXPIRED, NULL, "the second task's poll after the wake");
    else
        expect_ready(poll_with(d.future, b, &out), &out, DEADLINE_SIGNAL_VALUE, &value_a, "the second task's poll after the wake");

    deadline_signal_future_drop(d.future);
    deadline_signal_timer_drop(d.timer);
    deadline_signal_drop(d.producer);
    expect_books_balanced(a);
    expect_books_balanced(b);
}

LAB_TEST(deadline_poll, latest_waker_complete, 5)
{
    latest_waker(false);
}

LAB_TEST(deadline_poll, latest_waker_expire, 5)
{
    latest_waker(true);
}

/* The latest waker may be one that was replaced before: A, B, A. */
LAB_TEST(deadline_poll, latest_waker_back_and_forth, 5)
{
    struct counting_waker *a = counting_waker_new("task A");
    struct counting_waker *b = counting_waker_new("task B");
    struct deadline_signal_output out;
    struct ds d = new_ds(NULL);

    cr_assert_eq(poll_with(d.future, a, &out), POLL_PENDING, "poll by A returned Ready before any decision");
    cr_assert_eq(poll_with(d.future, b, &out), POLL_PENDING, "poll by B returned Ready before any decision");
    cr_assert_eq(poll_with(d.future, a, &out), POLL_PENDING, "poll by A (again) returned Ready before any decision");

    cr_assert_eq(counting_waker_counts(b).live, 1, "after A polled again, the signal still holds B's waker; the stored waker must follow the most recent poll (contract 2)");
    cr_assert_eq(counting_waker_counts(a).live, 2, "after A polled again, the signal holds %ld reference(s) to A's waker; it must hold exactly one (contract 2)",
                 counting_waker_counts(a).live - 1);

    expect_status(deadline_signal_expire(d.timer), DEADLINE_SIGNAL_WON, "deadline_signal_expire", "nothing was decided before");
    cr_assert_eq(counting_waker_woken(b), 0u, "B was woken although A polled after it; only the most recent waker may be woken (contract 2)");
    cr_assert_eq(counting_waker_woken(a), 1u, "A, the most recent poller, was woken %u times; it must be woken exactly once", counting_waker_woken(a));

    expect_ready(poll_with(d.future, a, &out), &out, DEADLINE_SIGNAL_EXPIRED, NULL, "A's poll after the wake");
    deadline_signal_drop(d.producer);
    deadline_signal_timer_drop(d.timer);
    deadline_signal_future_drop(d.future);
    expect_books_balanced(a);
    expect_books_balanced(b);
}

/* A re-poll by the same task goes through waker_clone_from: one clone. */
LAB_TEST(deadline_poll, reuses_clone_from, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct deadline_signal_output out;
    struct ds d = new_ds(NULL);

    for (int i = 1; i <= 4; i++)
        cr_assert_eq(poll_with(d.future, task, &out), POLL_PENDING, "poll %d returned Ready before any decision", i);

    struct waker_counts c = counting_waker_counts(task);
    cr_assert_eq(c.clones, 1u, "four polls by the same task cloned its waker %u times, although the stored waker "
                 "already woke that task (contract 2: a re-poll by the same task does not clone again); the "
                 "next hint: make hint STAGE=4 ITEM=latest-waker", c.clones);
    cr_assert_eq(c.drops, 0u, "four polls by the same task dropped its waker %u times; the stored waker was still right and should have been kept", c.drops);

    expect_status(deadline_signal_complete(d.producer, &value_a), DEADLINE_SIGNAL_WON, "deadline_signal_complete", "nothing was decided before");
    cr_assert_eq(counting_waker_woken(task), 1u, "the task's waker was woken %u times; it must be woken exactly once", counting_waker_woken(task));
    expect_ready(poll_with(d.future, task, &out), &out, DEADLINE_SIGNAL_VALUE, &value_a, "the poll after the wake");

    deadline_signal_drop(d.producer);
    deadline_signal_timer_drop(d.timer);
    deadline_signal_future_drop(d.future);
    expect_books_balanced(task);
}

/* ---- clause 7: poll after Ready -------------------------------------------- */

/* how: 0 complete, 1 expire, 2 producer dropped. The outcome comes out once,
 * then CONSUMED, no value, no waker touched. */
static void poll_after_ready(int how)
{
    struct counting_waker *first = counting_waker_new("first poller");
    struct counting_waker *later = counting_waker_new("poller after Ready");
    struct deadline_signal_output out;
    struct ds d = new_ds(record_drop);

    cr_assert_eq(poll_with(d.future, first, &out), POLL_PENDING, "the first poll returned Ready before any decision");
    if (how == 0)
        expect_status(deadline_signal_complete(d.producer, &value_a), DEADLINE_SIGNAL_WON, "deadline_signal_complete", "nothing was decided before");
    else if (how == 1)
        expect_status(deadline_signal_expire(d.timer), DEADLINE_SIGNAL_WON, "deadline_signal_expire", "nothing was decided before");
    else
        deadline_signal_drop(d.producer);

    if (how == 0)
        expect_ready(poll_with(d.future, first, &out), &out, DEADLINE_SIGNAL_VALUE, &value_a, "the poll after the wake");
    else
        expect_ready(poll_with(d.future, first, &out), &out, DEADLINE_SIGNAL_EXPIRED, NULL, "the poll after the wake");

    for (int i = 1; i <= 3; i++) {
        enum poll r = poll_with(d.future, later, &out);
        cr_assert_eq(r, POLL_READY, "poll %d after Ready returned Pending; a delivered outcome stays delivered: Ready with DEADLINE_SIGNAL_CONSUMED (contract 7)", i);
        cr_assert_neq(out.outcome, how == 0 ? DEADLINE_SIGNAL_VALUE : DEADLINE_SIGNAL_EXPIRED,
                      "poll %d after Ready delivered the outcome again (%s); it is delivered once, then DEADLINE_SIGNAL_CONSUMED (contract 7)",
                      i, outcome_name(out.outcome));
        expect_ready(r, &out, DEADLINE_SIGNAL_CONSUMED, NULL, "a poll after Ready");
    }
    struct waker_counts c = counting_waker_counts(later);
    cr_assert_eq(c.clones + c.drops + c.wakes + c.wake_by_refs, 0u,
                 "polls after Ready touched the waker (clones %u, drops %u, wakes %u); they must not register or wake anything (contract 7)",
                 c.clones, c.drops, c.wakes + c.wake_by_refs);

    deadline_signal_future_drop(d.future);
    deadline_signal_timer_drop(d.timer);
    if (how != 2)
        deadline_signal_drop(d.producer);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called on a value the future had already delivered; that value belongs to the caller now");
    expect_books_balanced(first);
    expect_books_balanced(later);
}

LAB_TEST(deadline_poll, poll_after_ready_value, 5)
{
    poll_after_ready(0);
}

LAB_TEST(deadline_poll, poll_after_ready_expired, 5)
{
    poll_after_ready(1);
}

LAB_TEST(deadline_poll, poll_after_ready_abandoned, 5)
{
    poll_after_ready(2);
}
