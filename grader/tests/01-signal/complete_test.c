/* complete_test.c - contract clause 5: completion is terminal. */
#include "stage01.h"

static int first_value, second_value, third_value;

LAB_SUITE(signal_complete, 5);

LAB_TEST(signal_complete, duplicate_refused, 5)
{
    struct signal *p;
    struct signal_future *f;
    struct counting_waker *task = counting_waker_new("task");
    struct signal_output out;
    new_signal(record_drop, &p, &f);

    cr_assert_eq(signal_complete(p, &first_value), SIGNAL_OK, "the first signal_complete must return SIGNAL_OK");
    enum signal_status st = signal_complete(p, &second_value);
    cr_assert_eq(st, SIGNAL_ALREADY_COMPLETE, "a second signal_complete returned %s; it must be refused with SIGNAL_ALREADY_COMPLETE (contract 5)", status_name(st));
    cr_assert_eq(dropped_calls(), 0u, "the refused value was passed to drop_value; a refused caller keeps its value (contract 5)");

    expect_ready(poll_with(f, task, &out), &out, SIGNAL_VALUE, &first_value,
                 "the poll after a refused second completion (the first value must win)");

    signal_future_drop(f);
    signal_drop(p);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called although the only stored value was taken by the future");
    expect_books_balanced(task);
}

LAB_TEST(signal_complete, duplicate_after_taken_refused, 5)
{
    struct signal *p;
    struct signal_future *f;
    struct counting_waker *task = counting_waker_new("task");
    struct signal_output out;
    new_signal(record_drop, &p, &f);

    cr_assert_eq(signal_complete(p, &first_value), SIGNAL_OK, "the first signal_complete must return SIGNAL_OK");
    expect_ready(poll_with(f, task, &out), &out, SIGNAL_VALUE, &first_value, "the poll after completion");

    enum signal_status st = signal_complete(p, &second_value);
    cr_assert_eq(st, SIGNAL_ALREADY_COMPLETE, "signal_complete after the value was taken returned %s; completion is terminal, it must be SIGNAL_ALREADY_COMPLETE (contract 5)", status_name(st));
    expect_ready(poll_with(f, task, &out), &out, SIGNAL_CONSUMED, NULL, "a poll after Ready and a refused completion");

    signal_drop(p);
    signal_future_drop(f);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called; the first value was taken and the second refused, so nothing was the signal's to drop");
    expect_books_balanced(task);
}

LAB_TEST(signal_complete, duplicate_does_not_wake_again, 5)
{
    struct signal *p;
    struct signal_future *f;
    struct counting_waker *task = counting_waker_new("task");
    struct signal_output out;
    new_signal(record_drop, &p, &f);

    cr_assert_eq(poll_with(f, task, &out), POLL_PENDING, "the first poll returned Ready before any completion");
    cr_assert_eq(signal_complete(p, &first_value), SIGNAL_OK, "the first signal_complete must return SIGNAL_OK");
    cr_assert_eq(counting_waker_woken(task), 1u, "the first completion woke the task %u times; it must wake it exactly once", counting_waker_woken(task));
    enum signal_status st2 = signal_complete(p, &second_value);
    enum signal_status st3 = signal_complete(p, &third_value);
    cr_assert_eq(st2, SIGNAL_ALREADY_COMPLETE, "a second signal_complete returned %s; expected SIGNAL_ALREADY_COMPLETE (contract 5)", status_name(st2));
    cr_assert_eq(st3, SIGNAL_ALREADY_COMPLETE, "a third signal_complete returned %s; expected SIGNAL_ALREADY_COMPLETE (contract 5)", status_name(st3));
    cr_assert_eq(counting_waker_counts(task).live, 1, "after the completion the signal still holds a reference to the task's waker; complete must take it out and consume it with the wake");

    expect_ready(poll_with(f, task, &out), &out, SIGNAL_VALUE, &first_value, "the poll after the wake");
    signal_future_drop(f);
    signal_drop(p);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called on a value that was refused or taken");
    expect_books_balanced(task);
}
