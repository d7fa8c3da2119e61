/* decide_test.c - contract clauses 4 and 6: exactly one outcome wins, the loser
 * is told who won, and the decision stays made, also after delivery.
 *
 * Here the two deciders take turns on one thread, so every order is tested
 * deterministically; race_test.c makes them race. */
#include "stage04.h"

static int value_a, value_b;

LAB_SUITE(deadline_decide, 5);

/* The producer first, then the timer, with a task waiting. */
LAB_TEST(deadline_decide, complete_then_expire, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct deadline_signal_output out;
    struct ds d = new_ds(record_drop);

    cr_assert_eq(poll_with(d.future, task, &out), POLL_PENDING, "the first poll returned Ready before any decision");
    expect_status(deadline_signal_complete(d.producer, &value_a), DEADLINE_SIGNAL_WON,
                  "deadline_signal_complete on a waiting signal", "nothing was decided, so the producer wins (contract 4)");
    expect_status(deadline_signal_expire(d.timer), DEADLINE_SIGNAL_LOST_TO_VALUE,
                  "deadline_signal_expire after a completion", "the producer won; the timer loses and is told a value won (contract 4)");
    cr_assert_eq(counting_waker_woken(task), 1u, "the task was woken %u times; the winner wakes it once, and a losing expire wakes nobody (contract 4)",
                 counting_waker_woken(task));
    expect_ready(poll_with(d.future, task, &out), &out, DEADLINE_SIGNAL_VALUE, &value_a,
                 "the poll after the producer won and the timer lost (the future resolves to the winner)");

    deadline_signal_timer_drop(d.timer);
    deadline_signal_drop(d.producer);
    deadline_signal_future_drop(d.future);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called, but the only stored value was delivered");
    expect_books_balanced(task);
}

/* The timer first, then the producer: the producer keeps its value. */
LAB_TEST(deadline_decide, expire_then_complete, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct deadline_signal_output out;
    struct ds d = new_ds(record_drop);

    cr_assert_eq(poll_with(d.future, task, &out), POLL_PENDING, "the first poll returned Ready before any decision");
    expect_status(deadline_signal_expire(d.timer), DEADLINE_SIGNAL_WON,
                  "deadline_signal_expire on a waiting signal", "nothing was decided, so the timer wins (contract 4)");
    expect_status(deadline_signal_complete(d.producer, &value_a), DEADLINE_SIGNAL_LOST_TO_EXPIRY,
                  "deadline_signal_complete after an expiry", "the timer won; the producer loses, is told the signal expired, and keeps its value (contract 4)");
    cr_assert_eq(counting_waker_woken(task), 1u, "the task was woken %u times; the winner wakes it once, and a losing complete wakes nobody (contract 4)",
                 counting_waker_woken(task));
    expect_ready(poll_with(d.future, task, &out), &out, DEADLINE_SIGNAL_EXPIRED, NULL,
                 "the poll after the timer won and the producer lost (the future resolves to the winner, and the losing value is not delivered)");

    deadline_signal_drop(d.producer);
    deadline_signal_timer_drop(d.timer);
    deadline_signal_future_drop(d.future);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called on %p; a losing producer keeps its value, the signal never owned it (contract 4)",
                 dropped_last());
    expect_books_balanced(task);
}

/* Neither side polled yet: the same race, with nobody to wake. */
LAB_TEST(deadline_decide, decided_before_any_poll, 5)
{
    struct deadline_signal_output out;
    struct counting_waker *task = counting_waker_new("task");
    struct ds d = new_ds(record_drop);

    expect_status(deadline_signal_expire(d.timer), DEADLINE_SIGNAL_WON, "deadline_signal_expire before any poll", "nothing was decided (contract 4)");
    expect_status(deadline_signal_complete(d.producer, &value_b), DEADLINE_SIGNAL_LOST_TO_EXPIRY,
                  "deadline_signal_complete after an expiry, before any poll", "the timer won (contract 4)");
    expect_ready(poll_with(d.future, task, &out), &out, DEADLINE_SIGNAL_EXPIRED, NULL, "the first poll after the timer won");

    deadline_signal_future_drop(d.future);
    deadline_signal_drop(d.producer);
    deadline_signal_timer_drop(d.timer);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called on a value that lost; the producer keeps it (contract 4)");
    expect_books_balanced(task);
}

/* ---- clause 6: the decision is final --------------------------------------- */

LAB_TEST(deadline_decide, complete_twice, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct deadline_signal_output out;
    struct ds d = new_ds(record_drop);

    cr_assert_eq(poll_with(d.future, task, &out), POLL_PENDING, "the first poll returned Ready before any decision");
    expect_status(deadline_signal_complete(d.producer, &value_a), DEADLINE_SIGNAL_WON, "the first deadline_signal_complete", "nothing was decided");
    expect_status(deadline_signal_complete(d.producer, &value_b), DEADLINE_SIGNAL_LOST_TO_VALUE,
                  "a second deadline_signal_complete", "a completion decided it already; the caller keeps the second value (contract 6)");
    cr_assert_eq(counting_waker_woken(task), 1u, "the task was woken %u times; a refused completion must not wake it again", counting_waker_woken(task));
    expect_ready(poll_with(d.future, task, &out), &out, DEADLINE_SIGNAL_VALUE, &value_a, "the poll after a refused second completion (the first value must win)");

    deadline_signal_drop(d.producer);
    deadline_signal_timer_drop(d.timer);
    deadline_signal_future_drop(d.future);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called; the first value was delivered and the second refused, so nothing was the signal's to drop");
    expect_books_balanced(task);
}

LAB_TEST(deadline_decide, expire_twice, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct deadline_signal_output out;
    struct ds d = new_ds(NULL);

    cr_assert_eq(poll_with(d.future, task, &out), POLL_PENDING, "the first poll returned Ready before any decision");
    expect_status(deadline_signal_expire(d.timer), DEADLINE_SIGNAL_WON, "the first deadline_signal_expire", "nothing was decided");
    expect_status(deadline_signal_expire(d.timer), DEADLINE_SIGNAL_LOST_TO_EXPIRY,
                  "a second deadline_signal_expire", "the signal has expired already (contract 6)");
    cr_assert_eq(counting_waker_woken(task), 1u, "the task was woken %u times; a refused expiry must not wake it again", counting_waker_woken(task));
    expect_ready(poll_with(d.future, task, &out), &out, DEADLINE_SIGNAL_EXPIRED, NULL, "the poll after two expiries");

    deadline_signal_drop(d.producer);
    deadline_signal_timer_drop(d.timer);
    deadline_signal_future_drop(d.future);
    expect_books_balanced(task);
}

/* After the outcome was delivered (CONSUMED), both deciders still lose, are
 * still told who won, and the future stays CONSUMED. */
static void after_consumed(bool expired_won)
{
    struct counting_waker *task = counting_waker_new("task");
    struct deadline_signal_output out;
    struct ds d = new_ds(record_drop);

    if (expired_won) {
        expect_status(deadline_signal_expire(d.timer), DEADLINE_SIGNAL_WON, "deadline_signal_expire", "nothing was decided");
        expect_ready(poll_with(d.future, task, &out), &out, DEADLINE_SIGNAL_EXPIRED, NULL, "the poll after the expiry");
    } else {
        expect_status(deadline_signal_complete(d.producer, &value_a), DEADLINE_SIGNAL_WON, "deadline_signal_complete", "nothing was decided");
        expect_ready(poll_with(d.future, task, &out), &out, DEADLINE_SIGNAL_VALUE, &value_a, "the poll after the completion");
    }
    enum deadline_signal_status want = lost_to(!expired_won);
    const char *why = expired_won ? "the timer won, and the outcome was delivered: the decision is final, and a poll after Ready stays CONSUMED (contracts 6 and 7)"
                                  : "the producer won, and the value was delivered: the decision is final, and a poll after Ready stays CONSUMED (contracts 6 and 7)";
    expect_status(deadline_signal_expire(d.timer), want, "deadline_signal_expire after the outcome was delivered", why);
    expect_status(deadline_signal_complete(d.producer, &value_b), want, "deadline_signal_complete after the outcome was delivered", why);
    expect_ready(poll_with(d.future, task, &out), &out, DEADLINE_SIGNAL_CONSUMED, NULL,
                 "a poll after Ready and two refused late decisions (a late loser must not revive the signal)");
    cr_assert_eq(counting_waker_counts(task).wakes + counting_waker_counts(task).wake_by_refs, 0u,
                 "a late decision woke the task; the outcome was delivered before, nobody waits");

    deadline_signal_future_drop(d.future);
    deadline_signal_drop(d.producer);
    deadline_signal_timer_drop(d.timer);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called on %p, a value that was delivered or refused", dropped_last());
    expect_books_balanced(task);
}

LAB_TEST(deadline_decide, late_deciders_after_value_consumed, 5)
{
    after_consumed(false);
}

LAB_TEST(deadline_decide, late_deciders_after_expiry_consumed, 5)
{
    after_consumed(true);
}
