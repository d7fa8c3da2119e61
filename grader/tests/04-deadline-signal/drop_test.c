/* drop_test.c - contract clauses 8 and 9: dropping one handle while the others
 * live. Dropping the future is cancellation; dropping the producer without a
 * value expires the signal; dropping the timer cancels the deadline and
 * decides nothing. */
#include "stage04.h"

static int the_value;

LAB_SUITE(deadline_drop, 5);

/* ---- clause 8: the future is dropped while the producer lives ------------- */

LAB_TEST(deadline_drop, future_drop_releases_waker, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct deadline_signal_output out;
    struct ds d = new_ds(record_drop);

    cr_assert_eq(poll_with(d.future, task, &out), POLL_PENDING, "the first poll returned Ready before any decision");
    cr_assert_eq(counting_waker_counts(task).live, 2, "a pending poll must leave exactly one reference to the task's waker in the signal");

    deadline_signal_future_drop(d.future);
    struct waker_counts c = counting_waker_counts(task);
    cr_assert_eq(c.live, 1, "right after deadline_signal_future_drop the signal still holds the task's waker (%ld reference(s)); dropping a pending future must release its stored waker at once, not when the producer or the timer goes (contract 8)", c.live - 1);
    cr_assert_eq(c.wakes + c.wake_by_refs, 0u, "deadline_signal_future_drop woke the waker it held, though the future it would wake is gone (contract 8: dropping the future cancels)");

    expect_status(deadline_signal_complete(d.producer, &the_value), DEADLINE_SIGNAL_NO_LISTENER,
                  "deadline_signal_complete after the future was dropped", "nobody can receive the value; the producer keeps it (contract 8)");
    expect_status(deadline_signal_expire(d.timer), DEADLINE_SIGNAL_NO_LISTENER,
                  "deadline_signal_expire after the future was dropped", "nothing was decided and nobody listens (contract 8)");
    cr_assert_eq(counting_waker_woken(task), 0u, "a decider woke a waker that belonged to a dropped future");

    deadline_signal_timer_drop(d.timer);
    deadline_signal_drop(d.producer);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called on a value deadline_signal_complete refused; the producer keeps it (contract 8)");
    expect_books_balanced(task);
}

LAB_TEST(deadline_drop, future_drop_before_poll_no_listener, 5)
{
    struct ds d = new_ds(record_drop);

    deadline_signal_future_drop(d.future);
    expect_status(deadline_signal_expire(d.timer), DEADLINE_SIGNAL_NO_LISTENER,
                  "deadline_signal_expire after the future was dropped (never polled)", "nobody listens (contract 8)");
    expect_status(deadline_signal_complete(d.producer, &the_value), DEADLINE_SIGNAL_NO_LISTENER,
                  "deadline_signal_complete after the future was dropped and a refused expire", "a refused expire decided nothing, and nobody listens (contract 8)");
    deadline_signal_drop(d.producer);
    deadline_signal_timer_drop(d.timer);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called on a value that was refused; the producer keeps it (contract 8)");
}

/* A decision made before the future was dropped stays the decision. */
LAB_TEST(deadline_drop, future_drop_after_decision, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct deadline_signal_output out;
    struct ds d = new_ds(record_drop);

    cr_assert_eq(poll_with(d.future, task, &out), POLL_PENDING, "the first poll returned Ready before any decision");
    expect_status(deadline_signal_expire(d.timer), DEADLINE_SIGNAL_WON, "deadline_signal_expire", "nothing was decided");
    deadline_signal_future_drop(d.future);
    expect_status(deadline_signal_complete(d.producer, &the_value), DEADLINE_SIGNAL_LOST_TO_EXPIRY,
                  "deadline_signal_complete after an expiry and the future's drop", "the decision came first: the producer lost to the expiry (contracts 4 and 8)");
    deadline_signal_drop(d.producer);
    deadline_signal_timer_drop(d.timer);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called on a value that lost; the producer keeps it");
    expect_books_balanced(task);
}

/* ---- clause 9: the producer leaves without a value ------------------------ */

LAB_TEST(deadline_drop, producer_drop_expires_and_wakes, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct deadline_signal_output out;
    struct ds d = new_ds(record_drop);

    cr_assert_eq(poll_with(d.future, task, &out), POLL_PENDING, "the first poll returned Ready before any decision");
    deadline_signal_drop(d.producer);
    cr_assert_eq(counting_waker_woken(task), 1u,
                 "dropping the producer without completing woke the waiting task %u times; it must expire the signal and wake the task exactly once, or the task waits for a value that can never come (contract 9)",
                 counting_waker_woken(task));
    expect_ready(poll_with(d.future, task, &out), &out, DEADLINE_SIGNAL_EXPIRED, NULL, "the poll after the producer was dropped without completing");
    expect_status(deadline_signal_expire(d.timer), DEADLINE_SIGNAL_LOST_TO_EXPIRY,
                  "deadline_signal_expire after the producer left", "the producer's drop expired the signal already (contract 9)");

    deadline_signal_future_drop(d.future);
    deadline_signal_timer_drop(d.timer);
    expect_books_balanced(task);
}

LAB_TEST(deadline_drop, producer_drop_after_complete_keeps_value, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct deadline_signal_output out;
    struct ds d = new_ds(record_drop);

    cr_assert_eq(poll_with(d.future, task, &out), POLL_PENDING, "the first poll returned Ready before any decision");
    expect_status(deadline_signal_complete(d.producer, &the_value), DEADLINE_SIGNAL_WON, "deadline_signal_complete", "nothing was decided");
    deadline_signal_drop(d.producer);
    cr_assert_eq(counting_waker_woken(task), 1u, "the task was woken %u times; the completion wakes it once and the producer's later drop changes nothing",
                 counting_waker_woken(task));
    expect_ready(poll_with(d.future, task, &out), &out, DEADLINE_SIGNAL_VALUE, &the_value,
                 "the poll after the producer completed and then was dropped (its value stays for the future)");
    deadline_signal_timer_drop(d.timer);
    deadline_signal_future_drop(d.future);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called on a value the future took");
    expect_books_balanced(task);
}

/* The producer leaves after the future did, nothing decided: clause 9 still
 * expires the signal (it asks only whether the producer completed), nobody
 * is woken (the future's drop gave its waker back), and the timer's later
 * expire comes after a decision: LOST_TO_EXPIRY, not NO_LISTENER (clause 8
 * answers NO_LISTENER only when nothing was decided before). */
LAB_TEST(deadline_drop, producer_drop_after_the_future_is_gone, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct deadline_signal_output out;
    struct ds d = new_ds(record_drop);

    cr_assert_eq(poll_with(d.future, task, &out), POLL_PENDING, "the first poll returned Ready before any decision");
    deadline_signal_future_drop(d.future);
    deadline_signal_drop(d.producer);
    struct waker_counts c = counting_waker_counts(task);
    cr_assert_eq(c.wakes + c.wake_by_refs, 0u,
                 "dropping the producer after the future was dropped woke the task's waker %u time(s); the future's drop had already given it back (contract 8)",
                 c.wakes + c.wake_by_refs);
    expect_status(deadline_signal_expire(d.timer), DEADLINE_SIGNAL_LOST_TO_EXPIRY,
                  "deadline_signal_expire after the future was dropped and then the producer left without completing",
                  "the producer's drop expired the signal (contract 9), so the expiry comes after a decision: it is told who won, not NO_LISTENER (contract 8 answers NO_LISTENER only when nothing was decided before)");
    deadline_signal_timer_drop(d.timer);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called though no value was ever stored");
    expect_books_balanced(task);
}

/* ---- clause 9: the timer is dropped without expiring ----------------------- */

LAB_TEST(deadline_drop, timer_drop_decides_nothing, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct deadline_signal_output out;
    struct ds d = new_ds(record_drop);

    cr_assert_eq(poll_with(d.future, task, &out), POLL_PENDING, "the first poll returned Ready before any decision");
    deadline_signal_timer_drop(d.timer);
    cr_assert_eq(counting_waker_woken(task), 0u,
                 "dropping the timer woke the waiting task; a cancelled deadline decides nothing, so there is nothing to wake for (contract 9)");
    cr_assert_eq(poll_with(d.future, task, &out), POLL_PENDING,
                 "after the timer was dropped, the poll returned Ready (outcome %s); a cancelled deadline decides nothing, the producer may still complete (contract 9)",
                 outcome_name(out.outcome));
    expect_status(deadline_signal_complete(d.producer, &the_value), DEADLINE_SIGNAL_WON,
                  "deadline_signal_complete after the timer was dropped", "a dropped timer decides nothing, so the producer still wins (contract 9)");
    cr_assert_eq(counting_waker_woken(task), 1u, "the completion woke the task %u times; exactly once", counting_waker_woken(task));
    expect_ready(poll_with(d.future, task, &out), &out, DEADLINE_SIGNAL_VALUE, &the_value, "the poll after the completion");

    deadline_signal_drop(d.producer);
    deadline_signal_future_drop(d.future);
    expect_books_balanced(task);
}

/* The same without the second poll, which would store the waker again and
 * hide a timer drop that had given it back: the task that polled once and
 * waits must still be woken by the producer's completion. */
LAB_TEST(deadline_drop, timer_drop_keeps_the_waiting_task, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct deadline_signal_output out;
    struct ds d = new_ds(record_drop);

    cr_assert_eq(poll_with(d.future, task, &out), POLL_PENDING, "the first poll returned Ready before any decision");
    deadline_signal_timer_drop(d.timer);
    expect_status(deadline_signal_complete(d.producer, &the_value), DEADLINE_SIGNAL_WON,
                  "deadline_signal_complete after the timer was dropped", "a dropped timer decides nothing, so the producer still wins (contract 9)");
    cr_assert_eq(counting_waker_woken(task), 1u,
                 "the task polled once, then the timer was dropped and the producer completed: the task was woken %u "
                 "times, expected once. Dropping the timer decides nothing (contract 9), so the waker the pending "
                 "poll stored stays for whoever decides", counting_waker_woken(task));
    expect_ready(poll_with(d.future, task, &out), &out, DEADLINE_SIGNAL_VALUE, &the_value, "the poll after the completion");

    deadline_signal_drop(d.producer);
    deadline_signal_future_drop(d.future);
    expect_books_balanced(task);
}
