/* ownership_test.c - contract clause 10: each handle is released only by its own
 * drop function, the shared state lives until all three are gone, and a
 * value nobody took goes to drop_value exactly once. Also the type-erased
 * view and running out of memory.
 *
 * The allocation counter (measure.h) sees every malloc and free of the code
 * under test; the Valgrind lane runs the same tests and reports any invalid
 * access or leak on the way. */
#include <stdlib.h>

#include "stage04.h"

LAB_SUITE(deadline_ownership, 5);

enum handle { PRODUCER, TIMER, FUTURE };
static const char *handle_name[] = { "producer", "timer", "future" };

static void drop_handle(struct ds *d, enum handle h)
{
    switch (h) {
    case PRODUCER: deadline_signal_drop(d->producer); break;
    case TIMER: deadline_signal_timer_drop(d->timer); break;
    case FUTURE: deadline_signal_future_drop(d->future); break;
    }
}

/* The six orders in which three handles can go. */
static const enum handle orders[6][3] = {
    { PRODUCER, TIMER, FUTURE }, { PRODUCER, FUTURE, TIMER }, { TIMER, PRODUCER, FUTURE },
    { TIMER, FUTURE, PRODUCER }, { FUTURE, PRODUCER, TIMER }, { FUTURE, TIMER, PRODUCER },
};

enum decision { UNDECIDED, COMPLETED_UNTAKEN, COMPLETED_TAKEN, EXPIRED };
static const char *decision_name[] = { "nothing decided", "completed, value not taken", "completed, value taken", "expired" };

/* One signal, one decision, one drop order: the state must outlive the
 * first two drops and be freed by the third; drop_value exactly once for a
 * value nobody took, never otherwise. */
static void drop_in_order(enum decision dec, const enum handle order[3])
{
    struct counting_waker *task = counting_waker_new("task");
    struct deadline_signal_output out;
    unsigned drops_before = dropped_calls();

    alloc_count_start();
    int *value = malloc(sizeof *value); /* counted: freed by drop_value or by the test */
    cr_assert_not_null(value, "out of memory in the test");
    struct ds d = new_ds(record_drop_and_free);
    cr_assert_eq(poll_with(d.future, task, &out), POLL_PENDING, "the first poll returned Ready before any decision");
    bool value_stored = false;
    if (dec == COMPLETED_UNTAKEN || dec == COMPLETED_TAKEN) {
        expect_status(deadline_signal_complete(d.producer, value), DEADLINE_SIGNAL_WON, "deadline_signal_complete", "nothing was decided");
        value_stored = true;
    } else if (dec == EXPIRED) {
        expect_status(deadline_signal_expire(d.timer), DEADLINE_SIGNAL_WON, "deadline_signal_expire", "nothing was decided");
    }
    if (dec == COMPLETED_TAKEN) {
        expect_ready(poll_with(d.future, task, &out), &out, DEADLINE_SIGNAL_VALUE, value, "the poll after the completion");
        free(out.value); /* ours now */
        value_stored = false;
    }
    if (!value_stored && dec != COMPLETED_TAKEN)
        free(value); /* never handed over */

    for (int k = 0; k < 3; k++) {
        drop_handle(&d, order[k]);
        struct alloc_counts c = alloc_count_peek();
        if (k < 2)
            cr_assert_gt(c.allocs, c.frees,
                         "(%s; drop order %s, %s, %s) after dropping the %s, everything deadline_signal_new allocated was already freed; "
                         "the shared state must live until all three handles are gone (contract 10)",
                         decision_name[dec], handle_name[order[0]], handle_name[order[1]], handle_name[order[2]], handle_name[order[k]]);
    }
    struct alloc_counts c = alloc_count_stop();
    cr_assert_eq(c.allocs, c.frees,
                 "(%s; drop order %s, %s, %s) all three handles are gone but %llu of %llu allocations were not freed; "
                 "the last handle's drop must free the shared state, and an untaken value goes to drop_value (contract 10)",
                 decision_name[dec], handle_name[order[0]], handle_name[order[1]], handle_name[order[2]],
                 (unsigned long long)(c.allocs - c.frees), (unsigned long long)c.allocs);
    unsigned drops = dropped_calls() - drops_before;
    unsigned want = dec == COMPLETED_UNTAKEN;
    cr_assert_eq(drops, want,
                 "(%s; drop order %s, %s, %s) drop_value was called %u times; expected %u (only a stored value nobody took is dropped, once, when the state is freed)",
                 decision_name[dec], handle_name[order[0]], handle_name[order[1]], handle_name[order[2]], drops, want);
    expect_books_balanced(task);
}

static void all_orders(enum decision dec)
{
    for (int i = 0; i < 6; i++)
        drop_in_order(dec, orders[i]);
}

LAB_TEST(deadline_ownership, drop_orders_undecided, 5)
{
    all_orders(UNDECIDED);
}

LAB_TEST(deadline_ownership, drop_orders_untaken_value, 5)
{
    all_orders(COMPLETED_UNTAKEN);
}

LAB_TEST(deadline_ownership, drop_orders_taken_value, 5)
{
    all_orders(COMPLETED_TAKEN);
}

LAB_TEST(deadline_ownership, drop_orders_expired, 5)
{
    all_orders(EXPIRED);
}

/* A losing producer's value never becomes the signal's. */
LAB_TEST(deadline_ownership, losing_value_stays_with_producer, 5)
{
    unsigned drops_before = dropped_calls();
    int *v = malloc(sizeof *v);
    cr_assert_not_null(v, "out of memory in the test");
    struct ds d = new_ds(record_drop_and_free);
    expect_status(deadline_signal_expire(d.timer), DEADLINE_SIGNAL_WON, "deadline_signal_expire", "nothing was decided");
    expect_status(deadline_signal_complete(d.producer, v), DEADLINE_SIGNAL_LOST_TO_EXPIRY, "deadline_signal_complete after an expiry", "the timer won");
    deadline_signal_timer_drop(d.timer);
    deadline_signal_drop(d.producer);
    deadline_signal_future_drop(d.future);
    cr_assert_eq(dropped_calls() - drops_before, 0u, "drop_value was called on the losing producer's value; the producer kept it (contracts 4 and 10)");
    free(v);
}

/* Completing or expiring frees no handle: both may be called again. */
LAB_TEST(deadline_ownership, deciding_frees_no_handle, 5)
{
    static int token;
    struct counting_waker *task = counting_waker_new("task");
    struct deadline_signal_output out;
    alloc_count_start();
    struct ds d = new_ds(NULL);
    expect_status(deadline_signal_complete(d.producer, &token), DEADLINE_SIGNAL_WON, "deadline_signal_complete", "nothing was decided");
    expect_status(deadline_signal_expire(d.timer), DEADLINE_SIGNAL_LOST_TO_VALUE, "deadline_signal_expire after a completion", "the producer won");
    struct alloc_counts mid = alloc_count_peek();
    cr_assert_eq(mid.frees, 0u, "completing and expiring freed memory (%llu frees); a handle is released only by its own drop function (contract 10)",
                 (unsigned long long)mid.frees);
    expect_status(deadline_signal_complete(d.producer, &token), DEADLINE_SIGNAL_LOST_TO_VALUE, "a second deadline_signal_complete", "the producer handle is still valid: completing does not free it");
    expect_status(deadline_signal_expire(d.timer), DEADLINE_SIGNAL_LOST_TO_VALUE, "a second deadline_signal_expire", "the timer handle is still valid: expiring does not free it");
    expect_ready(poll_with(d.future, task, &out), &out, DEADLINE_SIGNAL_VALUE, &token, "the poll after the completion");
    deadline_signal_drop(d.producer);
    deadline_signal_timer_drop(d.timer);
    deadline_signal_future_drop(d.future);
    struct alloc_counts end = alloc_count_stop();
    cr_assert_eq(end.allocs, end.frees, "%llu allocations were not freed after all three drops (contract 10)",
                 (unsigned long long)(end.allocs - end.frees));
    expect_books_balanced(task);
}

LAB_TEST(deadline_ownership, new_is_small, 5)
{
    alloc_count_start();
    struct ds d = new_ds(NULL);
    struct alloc_counts c = alloc_count_stop();
    cr_assert_geq(c.allocs, 1u, "deadline_signal_new allocated nothing through malloc/calloc; the shared state must be allocated (the counter sees malloc, calloc, realloc, aligned_alloc and posix_memalign)");
    cr_assert_leq(c.allocs, 4u,
                  "deadline_signal_new made %llu allocations; one block for the shared state (the reference puts the three handles in it too) is enough, four at most",
                  (unsigned long long)c.allocs);
    alloc_count_start();
    deadline_signal_future_drop(d.future);
    deadline_signal_timer_drop(d.timer);
    deadline_signal_drop(d.producer);
    struct alloc_counts e = alloc_count_stop();
    cr_assert_eq(e.frees, c.allocs, "dropping the three handles of an unused signal freed %llu of its %llu allocations (contract 10)",
                 (unsigned long long)e.frees, (unsigned long long)c.allocs);
}

LAB_TEST(deadline_ownership, as_future_polls_and_drops, 5)
{
    static int token;
    struct counting_waker *task = counting_waker_new("task");
    struct deadline_signal_output out = { .outcome = DEADLINE_SIGNAL_CONSUMED, .value = NULL };

    alloc_count_start();
    struct ds d = new_ds(NULL);
    struct future fut = deadline_signal_future_as_future(d.future);
    cr_assert_not_null(fut.vtable, "deadline_signal_future_as_future returned a future without a vtable");
    cr_assert_eq(fut.vtable->output_size, sizeof(struct deadline_signal_output),
                 "the type-erased future says its output is %zu bytes; it writes a struct deadline_signal_output (%zu bytes)",
                 fut.vtable->output_size, sizeof(struct deadline_signal_output));
    cr_assert_not_null(fut.vtable->drop, "the type-erased future has no drop: future_drop() on it can release nothing (contract 10)");

    struct waker w = counting_waker_get(task);
    struct context cx = context_from_waker(&w);
    cr_assert_eq(future_poll(fut, &cx, &out), POLL_PENDING, "polling through the type-erased view returned Ready before any decision");
    expect_status(deadline_signal_complete(d.producer, &token), DEADLINE_SIGNAL_WON, "deadline_signal_complete", "nothing was decided");
    cr_assert_eq(counting_waker_woken(task), 1u, "completing did not wake the waker registered through the type-erased view");
    cr_assert_eq(future_poll(fut, &cx, &out), POLL_READY, "polling through the type-erased view after the wake returned Pending");
    cr_assert(out.outcome == DEADLINE_SIGNAL_VALUE && out.value == &token,
              "the type-erased poll wrote outcome %s, value %p; expected DEADLINE_SIGNAL_VALUE and %p",
              outcome_name(out.outcome), out.value, (void *)&token);
    future_drop(fut); /* must be deadline_signal_future_drop(d.future) */
    deadline_signal_drop(d.producer);
    deadline_signal_timer_drop(d.timer);
    struct alloc_counts c = alloc_count_stop();
    cr_assert_eq(c.allocs, c.frees, "after future_drop() on the type-erased view and the other two drops, %llu allocations were not freed: the type-erased drop did not release the future handle (contract 10: each handle is released by its own drop)",
                 (unsigned long long)(c.allocs - c.frees));
    expect_books_balanced(task);
}

/* ---- out of memory ----------------------------------------------------------- */

LAB_TEST(deadline_ownership, out_of_memory_is_reported, 5)
{
    /* Fail the first allocation, then the second, ... until
     * deadline_signal_new succeeds: each failure must return -1 and keep
     * nothing. */
    for (uint64_t n = 0; n < 8; n++) {
        struct deadline_signal *p = NULL;
        struct deadline_signal_timer *t = NULL;
        struct deadline_signal_future *f = NULL;
        alloc_count_start();
        alloc_fail_after(n);
        int rc = deadline_signal_new(NULL, &p, &t, &f);
        struct alloc_counts c = alloc_count_stop();
        if (rc == 0) {
            cr_assert_geq(n, 1u, "deadline_signal_new succeeded although its very first allocation failed: it went on with "
                          "memory it did not get (contract 10: out of memory is reported); the next hint: make "
                          "hint STAGE=4 ITEM=ownership");
            deadline_signal_drop(p);
            deadline_signal_timer_drop(t);
            deadline_signal_future_drop(f);
            return;
        }
        cr_assert_eq(rc, -1, "deadline_signal_new returned %d when allocation number %llu failed; out of "
                     "memory is -1 (contract 10)",
                     rc, (unsigned long long)n + 1);
        cr_assert_eq(c.frees, c.allocs,
                     "deadline_signal_new failed (allocation number %llu ran out of memory) but kept %llu of its "
                     "%llu allocations (contract 10); the next hint: make hint STAGE=4 ITEM=ownership",
                     (unsigned long long)n + 1, (unsigned long long)(c.allocs - c.frees), (unsigned long long)c.allocs);
    }
    cr_assert_fail("deadline_signal_new never succeeded even with 8 allocations allowed");
}
