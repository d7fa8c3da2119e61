/* drop_test.c - contract clauses 8 and 9: dropping one handle while the other
 * lives. Dropping the future is cancellation; dropping the producer without a
 * value closes the signal. */
#include "stage01.h"

static int the_value;

LAB_SUITE(signal_drop, 5);

/* Clause 8: the stored waker goes back at once; later completions are refused. */
LAB_TEST(signal_drop, future_drop_releases_waker, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    new_signal(record_drop, &p, &f);

    cr_assert_eq(poll_with(f, task, &out), POLL_PENDING, "the first poll returned Ready before any completion");
    cr_assert_eq(counting_waker_counts(task).live, 2, "a pending poll must leave exactly one reference to the task's waker in the signal");

    signal_future_drop(f);
    struct waker_counts c = counting_waker_counts(task);
    cr_assert_eq(c.live, 1, "right after signal_future_drop the signal still holds the task's waker (%ld reference(s)); dropping a pending future must release its stored waker at once, not when the producer goes (contract 8)", c.live - 1);
    cr_assert_eq(c.wakes + c.wake_by_refs, 0u, "signal_future_drop woke the waker; a cancelled future has nobody to wake, it should drop the waker");

    enum signal_status st = signal_complete(p, &the_value);
    cr_assert_eq(st, SIGNAL_NO_LISTENER, "signal_complete after the future was dropped returned %s; it must return SIGNAL_NO_LISTENER (contract 8)", status_name(st));
    cr_assert_eq(counting_waker_woken(task), 0u, "signal_complete woke a waker that belonged to a dropped future");

    signal_drop(p);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called on a value signal_complete refused; the caller keeps it (contract 8)");
    expect_books_balanced(task);
}

/* Clause 8 before any poll. */
LAB_TEST(signal_drop, future_drop_before_poll_no_listener, 5)
{
    struct signal *p;
    struct signal_future *f;
    new_signal(record_drop, &p, &f);

    signal_future_drop(f);
    enum signal_status st = signal_complete(p, &the_value);
    cr_assert_eq(st, SIGNAL_NO_LISTENER, "signal_complete after the future was dropped (never polled) returned %s; it must return SIGNAL_NO_LISTENER (contract 8)", status_name(st));
    st = signal_complete(p, &the_value);
    cr_assert_eq(st, SIGNAL_NO_LISTENER, "a second signal_complete with no listener returned %s; nothing was completed, so it is SIGNAL_NO_LISTENER again", status_name(st));
    signal_drop(p);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called on a value signal_complete refused; the caller keeps it (contract 8)");
}

/* Clause 9: the producer leaves without a value; the waiting task is woken
 * and the future resolves SIGNAL_CLOSED. */
LAB_TEST(signal_drop, producer_drop_wakes_closed, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    new_signal(record_drop, &p, &f);

    cr_assert_eq(poll_with(f, task, &out), POLL_PENDING, "the first poll returned Ready before the producer did anything");
    signal_drop(p);
    bool woken = counting_waker_wait_woken(task, 1, SCALED_MS(1000));
    cr_assert(woken, "the producer was dropped without completing and the pending future's waker was never woken: its task would wait forever (contract 9)");
    cr_assert_eq(counting_waker_woken(task), 1u, "dropping the producer woke the task %u times; once is enough", counting_waker_woken(task));

    expect_ready(poll_with(f, task, &out), &out, SIGNAL_CLOSED, NULL, "the poll after the producer was dropped without completing");
    cr_assert_eq(counting_waker_counts(task).clones, 1u, "the poll that reported SIGNAL_CLOSED cloned the waker again; a Ready poll registers nothing");

    signal_future_drop(f);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called but no value was ever stored");
    expect_books_balanced(task);
}

/* Clauses 9 and 10: dropping the producer after completing is not closing. */
LAB_TEST(signal_drop, producer_drop_after_complete_delivers, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    new_signal(record_drop, &p, &f);

    cr_assert_eq(signal_complete(p, &the_value), SIGNAL_OK, "signal_complete must return SIGNAL_OK");
    signal_drop(p);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called when the producer was dropped, but the future can still take the value");
    expect_ready(poll_with(f, task, &out), &out, SIGNAL_VALUE, &the_value,
                 "the first poll after the producer completed and then was dropped (the value must survive the producer; contract 9)");
    cr_assert_eq(counting_waker_counts(task).clones, 0u, "the Ready poll cloned the waker; a Ready poll registers nothing");

    signal_future_drop(f);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called on a value the future took");
    expect_books_balanced(task);
}

/* Clauses 9 and 10, with a waiting task: one wake, then the value. */
LAB_TEST(signal_drop, producer_drop_after_wake_delivers, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    new_signal(record_drop, &p, &f);

    cr_assert_eq(poll_with(f, task, &out), POLL_PENDING, "the first poll returned Ready before any completion");
    cr_assert_eq(signal_complete(p, &the_value), SIGNAL_OK, "signal_complete must return SIGNAL_OK");
    signal_drop(p);
    cr_assert_geq(counting_waker_woken(task), 1u, "the completion did not wake the pending future");
    expect_ready(poll_with(f, task, &out), &out, SIGNAL_VALUE, &the_value,
                 "the poll after completion and the producer's drop (dropping after completing must not turn the value into SIGNAL_CLOSED)");

    signal_future_drop(f);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called on a value the future took");
    expect_books_balanced(task);
}
