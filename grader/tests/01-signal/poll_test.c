/* poll_test.c - contract clauses 1, 2, 6 and 7: what a poll registers, which
 * waker is woken, and what a poll answers before and after the outcome. */
#include "stage01.h"

static int value_a, value_b;

LAB_SUITE(signal_poll, 5);

/* Clause 1: Pending only with a registered wake path. */
LAB_TEST(signal_poll, pending_registers, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    new_signal(NULL, &p, &f);

    enum poll r = poll_with(f, task, &out);
    cr_assert_eq(r, POLL_PENDING, "the first poll of a signal nobody completed returned Ready (outcome %s); it must return POLL_PENDING",
                 outcome_name(out.outcome));
    struct waker_counts c = counting_waker_counts(task);
    cr_assert_eq(c.clones, 1, "poll returned Pending after cloning the task's waker %u times; it must store exactly one clone (contract 1)", c.clones);
    cr_assert_eq(c.live, 2, "poll returned Pending but the signal holds %ld reference(s) to the task's waker; it must keep exactly one, to wake it later (contract 1)", c.live - 1);
    cr_assert_eq(counting_waker_woken(task), 0u, "poll woke the task's waker although nothing happened yet");

    cr_assert_eq(signal_complete(p, &value_a), SIGNAL_OK, "signal_complete on a fresh signal with a live future must return SIGNAL_OK");
    cr_assert_eq(counting_waker_woken(task), 1u, "signal_complete woke the registered waker %u times; it must wake it exactly once",
                 counting_waker_woken(task));

    r = poll_with(f, task, &out);
    expect_ready(r, &out, SIGNAL_VALUE, &value_a, "the poll after the wake");
    cr_assert_eq(counting_waker_counts(task).clones, 1u, "the Ready poll cloned the waker again; a Ready poll has nothing to register");

    signal_future_drop(f);
    signal_drop(p);
    expect_books_balanced(task);
}

/* Clause 2: two tasks poll in turn; only the most recent one is woken. */
LAB_TEST(signal_poll, latest_waker_only, 5)
{
    struct counting_waker *a = counting_waker_new("first task");
    struct counting_waker *b = counting_waker_new("second task");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    new_signal(NULL, &p, &f);

    cr_assert_eq(poll_with(f, a, &out), POLL_PENDING, "the first poll returned Ready before any completion");
    cr_assert_eq(poll_with(f, b, &out), POLL_PENDING, "the second poll returned Ready before any completion");

    struct waker_counts ca = counting_waker_counts(a), cb = counting_waker_counts(b);
    cr_assert_eq(cb.live, 2, "after a poll by a second task the signal holds %ld reference(s) to its waker; it must hold exactly one (the latest waker, contract 2)", cb.live - 1);
    cr_assert_eq(ca.live, 1, "after a poll by a second task the signal still holds the first task's waker (%ld reference(s)); replacing a stored waker must drop the old one (contract 2)", ca.live - 1);

    cr_assert_eq(signal_complete(p, &value_a), SIGNAL_OK, "signal_complete must return SIGNAL_OK");
    cr_assert_eq(counting_waker_woken(a), 0u, "the first task's waker was woken; only the most recently registered waker may be (contract 2)");
    cr_assert_eq(counting_waker_woken(b), 1u, "the latest waker was woken %u times; it must be woken exactly once (contract 2)", counting_waker_woken(b));

    expect_ready(poll_with(f, b, &out), &out, SIGNAL_VALUE, &value_a, "the second task's poll after the wake");

    signal_future_drop(f);
    signal_drop(p);
    expect_books_balanced(a);
    expect_books_balanced(b);
}

/* Clause 2 again: the latest waker may be one that was replaced before. */
LAB_TEST(signal_poll, latest_waker_back_and_forth, 5)
{
    struct counting_waker *a = counting_waker_new("task A");
    struct counting_waker *b = counting_waker_new("task B");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    new_signal(NULL, &p, &f);

    cr_assert_eq(poll_with(f, a, &out), POLL_PENDING, "poll by A returned Ready before any completion");
    cr_assert_eq(poll_with(f, b, &out), POLL_PENDING, "poll by B returned Ready before any completion");
    cr_assert_eq(poll_with(f, a, &out), POLL_PENDING, "poll by A (again) returned Ready before any completion");

    cr_assert_eq(counting_waker_counts(b).live, 1, "after A polled again, the signal still holds B's waker; the stored waker must follow the most recent poll (contract 2)");
    cr_assert_eq(counting_waker_counts(a).live, 2, "after A polled again, the signal holds %ld reference(s) to A's waker; it must hold exactly one (contract 2)",
                 counting_waker_counts(a).live - 1);

    cr_assert_eq(signal_complete(p, &value_a), SIGNAL_OK, "signal_complete must return SIGNAL_OK");
    cr_assert_eq(counting_waker_woken(b), 0u, "B was woken although A polled after it; only the most recent waker may be woken (contract 2)");
    cr_assert_eq(counting_waker_woken(a), 1u, "A, the most recent poller, was woken %u times; it must be woken exactly once", counting_waker_woken(a));

    expect_ready(poll_with(f, a, &out), &out, SIGNAL_VALUE, &value_a, "A's poll after the wake");
    signal_drop(p);
    signal_future_drop(f);
    expect_books_balanced(a);
    expect_books_balanced(b);
}

/* Clause 2: a re-poll by the same task goes through waker_clone_from. */
LAB_TEST(signal_poll, reuses_clone_from, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    new_signal(NULL, &p, &f);

    for (int i = 1; i <= 4; i++)
        cr_assert_eq(poll_with(f, task, &out), POLL_PENDING, "poll %d returned Ready before any completion", i);

    struct waker_counts c = counting_waker_counts(task);
    cr_assert_eq(c.clones, 1u, "four polls by the same task cloned its waker %u times; from the second poll on, the waker given will_wake() the stored one, and contract 2 allows one clone in all", c.clones);
    cr_assert_eq(c.drops, 0u, "four polls by the same task dropped its waker %u times; the stored waker was still right and should have been kept", c.drops);

    cr_assert_eq(signal_complete(p, &value_a), SIGNAL_OK, "signal_complete must return SIGNAL_OK");
    cr_assert_eq(counting_waker_woken(task), 1u, "the task's waker was woken %u times; it must be woken exactly once", counting_waker_woken(task));
    expect_ready(poll_with(f, task, &out), &out, SIGNAL_VALUE, &value_a, "the poll after the wake");

    signal_drop(p);
    signal_future_drop(f);
    expect_books_balanced(task);
}

/* Clause 6: completed before the first poll. */
LAB_TEST(signal_poll, ready_before_first_poll, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    new_signal(NULL, &p, &f);

    cr_assert_eq(signal_complete(p, &value_b), SIGNAL_OK, "signal_complete before any poll must return SIGNAL_OK");
    expect_ready(poll_with(f, task, &out), &out, SIGNAL_VALUE, &value_b, "the first poll of a completed signal");

    struct waker_counts c = counting_waker_counts(task);
    cr_assert_eq(c.clones, 0u, "the first poll of an already completed signal cloned the task's waker %u times; the poll was Ready, and a Ready poll registers no waker (contract 6)", c.clones);
    cr_assert_eq(c.wakes + c.wake_by_refs, 0u, "the first poll of an already completed signal woke the task's waker; it should just return Ready");

    signal_future_drop(f);
    signal_drop(p);
    expect_books_balanced(task);
}

/* Clauses 6 and 9: the producer left before the first poll. */
LAB_TEST(signal_poll, closed_before_first_poll, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    new_signal(NULL, &p, &f);

    signal_drop(p);
    expect_ready(poll_with(f, task, &out), &out, SIGNAL_CLOSED, NULL, "the first poll after the producer was dropped without completing (contract 6)");
    cr_assert_eq(counting_waker_counts(task).clones, 0u, "the first poll of a closed signal cloned the task's waker; a Ready poll must not register a waker");

    signal_future_drop(f);
    expect_books_balanced(task);
}

/* Clause 7: poll after Ready gives SIGNAL_CONSUMED, no value, no waker touched. */
LAB_TEST(signal_poll, poll_after_ready_consumed, 5)
{
    struct counting_waker *first = counting_waker_new("first poller");
    struct counting_waker *later = counting_waker_new("poller after Ready");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    new_signal(record_drop, &p, &f);

    cr_assert_eq(signal_complete(p, &value_a), SIGNAL_OK, "signal_complete must return SIGNAL_OK");
    expect_ready(poll_with(f, first, &out), &out, SIGNAL_VALUE, &value_a, "the first poll after completion");

    for (int i = 1; i <= 3; i++) {
        enum poll r = poll_with(f, later, &out);
        cr_assert_eq(r, POLL_READY, "poll %d after Ready returned Pending; a completed future must stay Ready (contract 7)", i);
        cr_assert_neq(out.outcome, SIGNAL_VALUE, "poll %d after Ready delivered the value again (%p); the value must be delivered once, then SIGNAL_CONSUMED (contract 7)", i, out.value);
        expect_ready(r, &out, SIGNAL_CONSUMED, NULL, "a poll after Ready");
    }
    struct waker_counts c = counting_waker_counts(later);
    cr_assert_eq(c.clones + c.drops + c.wakes + c.wake_by_refs, 0u,
                 "polls after Ready touched the waker (clones %u, drops %u, wakes %u); they must not register or wake anything (contract 7)",
                 c.clones, c.drops, c.wakes + c.wake_by_refs);

    signal_future_drop(f);
    signal_drop(p);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called on a value the future had already taken; that value belongs to the caller now");
    expect_books_balanced(first);
    expect_books_balanced(later);
}

/* Clause 7 after a real wait: Pending, wake, Ready, then CONSUMED. */
LAB_TEST(signal_poll, poll_after_wake_ready_consumed, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    new_signal(NULL, &p, &f);

    cr_assert_eq(poll_with(f, task, &out), POLL_PENDING, "the first poll returned Ready before any completion");
    cr_assert_eq(signal_complete(p, &value_a), SIGNAL_OK, "signal_complete must return SIGNAL_OK");
    expect_ready(poll_with(f, task, &out), &out, SIGNAL_VALUE, &value_a, "the poll after the wake");
    struct waker_counts before = counting_waker_counts(task);
    expect_ready(poll_with(f, task, &out), &out, SIGNAL_CONSUMED, NULL, "the poll after Ready");
    struct waker_counts after = counting_waker_counts(task);
    cr_assert(before.clones == after.clones && before.drops == after.drops &&
                  before.wakes == after.wakes && before.wake_by_refs == after.wake_by_refs,
              "the poll after Ready touched the waker; it must not register or wake anything (contract 7)");

    signal_drop(p);
    signal_future_drop(f);
    expect_books_balanced(task);
}

/* Clause 7 after CLOSED: the closing is delivered once, then CONSUMED. */
LAB_TEST(signal_poll, poll_after_closed_consumed, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    new_signal(NULL, &p, &f);

    cr_assert_eq(poll_with(f, task, &out), POLL_PENDING, "the first poll returned Ready before the producer did anything");
    signal_drop(p);
    expect_ready(poll_with(f, task, &out), &out, SIGNAL_CLOSED, NULL, "the poll after the producer was dropped");
    expect_ready(poll_with(f, task, &out), &out, SIGNAL_CONSUMED, NULL, "the poll after the Ready that reported SIGNAL_CLOSED (contract 7)");
    cr_assert_eq(counting_waker_counts(task).clones, 1u, "polls after Ready cloned the waker; they must not register anything (contract 7)");

    signal_future_drop(f);
    expect_books_balanced(task);
}
