/* ownership_test.c - contract clause 10: each handle is released by its own drop,
 * the shared state goes when both handles are gone, and a value nobody took
 * goes to drop_value exactly once.
 *
 * The values here come from malloc and drop_value frees them, so the
 * Valgrind lane sees a value dropped twice (invalid free) or never (a leak);
 * the allocation counter sees the signal's own memory. Every drop order is
 * here: future first, producer first, with a value taken, untaken, refused,
 * and with no value at all.
 */
#include <stdlib.h>

#include "stage01.h"

static void *new_value(void)
{
    int *v = malloc(sizeof *v);
    cr_assert_not_null(v, "out of memory in the test");
    *v = 42;
    return v;
}

LAB_SUITE(signal_ownership, 5);

/* ---- drop_value --------------------------------------------------------- */

LAB_TEST(signal_ownership, untaken_value_future_dropped_first, 5)
{
    struct signal *p;
    struct signal_future *f;
    void *v = new_value();
    new_signal(record_drop_and_free, &p, &f);

    cr_assert_eq(signal_complete(p, v), SIGNAL_OK, "signal_complete must return SIGNAL_OK");
    signal_future_drop(f);
    signal_drop(p);
    cr_assert_eq(dropped_calls(), 1u, "a value nobody took was passed to drop_value %u times; it must be passed exactly once, when the shared state is freed (contract 10)", dropped_calls());
    cr_assert_eq(dropped_last(), v, "drop_value received %p, not the stored value %p", dropped_last(), v);
}

LAB_TEST(signal_ownership, untaken_value_producer_dropped_first, 5)
{
    struct signal *p;
    struct signal_future *f;
    void *v = new_value();
    new_signal(record_drop_and_free, &p, &f);

    cr_assert_eq(signal_complete(p, v), SIGNAL_OK, "signal_complete must return SIGNAL_OK");
    signal_drop(p);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called when the producer was dropped, while the future could still take the value");
    signal_future_drop(f);
    cr_assert_eq(dropped_calls(), 1u, "a value nobody took was passed to drop_value %u times; it must be passed exactly once, when the shared state is freed (contract 10)", dropped_calls());
    cr_assert_eq(dropped_last(), v, "drop_value received %p, not the stored value %p", dropped_last(), v);
}

LAB_TEST(signal_ownership, taken_value_future_dropped_first, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    void *v = new_value();
    new_signal(record_drop_and_free, &p, &f);

    cr_assert_eq(poll_with(f, task, &out), POLL_PENDING, "the first poll returned Ready before any completion");
    cr_assert_eq(signal_complete(p, v), SIGNAL_OK, "signal_complete must return SIGNAL_OK");
    expect_ready(poll_with(f, task, &out), &out, SIGNAL_VALUE, v, "the poll after the wake");
    signal_future_drop(f);
    signal_drop(p);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called on a value the future had taken: the caller owns it now, and would free it twice (contract 10)");
    free(out.value);
    expect_books_balanced(task);
}

LAB_TEST(signal_ownership, taken_value_producer_dropped_first, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    void *v = new_value();
    new_signal(record_drop_and_free, &p, &f);

    cr_assert_eq(signal_complete(p, v), SIGNAL_OK, "signal_complete must return SIGNAL_OK");
    expect_ready(poll_with(f, task, &out), &out, SIGNAL_VALUE, v, "the first poll after completion");
    signal_drop(p);
    signal_future_drop(f);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called on a value the future had taken: the caller owns it now, and would free it twice (contract 10)");
    free(out.value);
    expect_books_balanced(task);
}

LAB_TEST(signal_ownership, refused_value_stays_with_caller, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    void *v = new_value();
    new_signal(record_drop_and_free, &p, &f);

    cr_assert_eq(poll_with(f, task, &out), POLL_PENDING, "the first poll returned Ready before any completion");
    signal_future_drop(f);
    enum signal_status st = signal_complete(p, v);
    cr_assert_eq(st, SIGNAL_NO_LISTENER, "signal_complete after the future was dropped returned %s; it must return SIGNAL_NO_LISTENER (contract 8)", status_name(st));
    signal_drop(p);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called on a value signal_complete refused: the caller kept it (contracts 8 and 10)");
    free(v);
    expect_books_balanced(task);
}

LAB_TEST(signal_ownership, closed_signal_drops_nothing, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    new_signal(record_drop_and_free, &p, &f);

    cr_assert_eq(poll_with(f, task, &out), POLL_PENDING, "the first poll returned Ready before the producer did anything");
    signal_drop(p);
    expect_ready(poll_with(f, task, &out), &out, SIGNAL_CLOSED, NULL, "the poll after the producer was dropped");
    signal_future_drop(f);
    cr_assert_eq(dropped_calls(), 0u, "drop_value was called on a signal that never held a value");
    expect_books_balanced(task);
}

LAB_TEST(signal_ownership, null_drop_value_is_allowed, 5)
{
    static int on_stack_of_nobody;
    struct signal *p;
    struct signal_future *f;
    new_signal(NULL, &p, &f);
    cr_assert_eq(signal_complete(p, &on_stack_of_nobody), SIGNAL_OK, "signal_complete must return SIGNAL_OK");
    signal_drop(p);
    signal_future_drop(f); /* an untaken value and no drop_value: just forgotten */
}

/* ---- the shared state's memory ------------------------------------------ */

static int token;

/* order 0: producer first; 1: future first. complete: whether a value is stored. */
static void freed_when_both_gone(int order, bool complete)
{
    struct counting_waker *task = counting_waker_new("task");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;

    alloc_count_start();
    new_signal(record_drop, &p, &f);
    cr_assert_eq(poll_with(f, task, &out), POLL_PENDING, "the first poll returned Ready before the producer did anything");
    if (complete)
        cr_assert_eq(signal_complete(p, &token), SIGNAL_OK, "signal_complete must return SIGNAL_OK");

    if (order == 0)
        signal_drop(p);
    else
        signal_future_drop(f);
    struct alloc_counts mid = alloc_count_stop();
    alloc_count_start();
    cr_assert_gt(mid.allocs, mid.frees,
                 "after only the %s was dropped, everything signal_new allocated was already freed "
                 "(%llu allocations, %llu frees); the shared state must live until both handles are gone (contract 10)",
                 order == 0 ? "producer" : "future", (unsigned long long)mid.allocs, (unsigned long long)mid.frees);

    if (order == 0) {
        /* The future must still work after the producer is gone. */
        expect_ready(poll_with(f, task, &out), &out, complete ? SIGNAL_VALUE : SIGNAL_CLOSED,
                     complete ? &token : NULL, "the poll after the producer was dropped");
        signal_future_drop(f);
    } else {
        enum signal_status st = signal_complete(p, &token);
        cr_assert_eq(st, complete ? SIGNAL_ALREADY_COMPLETE : SIGNAL_NO_LISTENER,
                     "signal_complete after the future was dropped returned %s; expected %s: %s", status_name(st),
                     complete ? "SIGNAL_ALREADY_COMPLETE" : "SIGNAL_NO_LISTENER",
                     complete ? "the signal was completed before the drop, and a completed signal refuses every "
                                "later completion that way, whether the future is still there or not (contract 5; "
                                "contract 8's NO_LISTENER is for a signal nobody completed)"
                              : "nobody completed it, and the future is gone (contract 8)");
        signal_drop(p);
    }
    struct alloc_counts end = alloc_count_stop();
    uint64_t allocs = mid.allocs + end.allocs, frees = mid.frees + end.frees;
    cr_assert_eq(allocs, frees,
                 "both handles are gone but %llu of the signal's %llu allocations were not freed; "
                 "the last handle's drop must free the shared state (contract 10)",
                 (unsigned long long)(allocs - frees), (unsigned long long)allocs);
    cr_assert_eq(dropped_calls(), (unsigned)(complete && order == 1),
                 "drop_value was called %u times; expected %u (the value is dropped only if nobody took it: contract 10)",
                 dropped_calls(), (unsigned)(complete && order == 1));
    expect_books_balanced(task);
}

LAB_TEST(signal_ownership, freed_when_both_gone_producer_first, 5)
{
    freed_when_both_gone(0, false);
}

LAB_TEST(signal_ownership, freed_when_both_gone_future_first, 5)
{
    freed_when_both_gone(1, false);
}

LAB_TEST(signal_ownership, freed_after_complete_producer_first, 5)
{
    freed_when_both_gone(0, true);
}

LAB_TEST(signal_ownership, freed_after_complete_future_first, 5)
{
    freed_when_both_gone(1, true);
}

LAB_TEST(signal_ownership, new_is_small, 5)
{
    struct signal *p;
    struct signal_future *f;
    alloc_count_start();
    new_signal(NULL, &p, &f);
    struct alloc_counts c = alloc_count_stop();
    cr_assert_geq(c.allocs, 1u, "signal_new allocated nothing through malloc/calloc; the shared state must be allocated (the allocation counter sees malloc, calloc, realloc, aligned_alloc and posix_memalign)");
    cr_assert_leq(c.allocs, 3u,
                  "signal_new made %llu allocations; one block for the shared state (the reference also puts both handles in it) is enough, three at most",
                  (unsigned long long)c.allocs);
    alloc_count_start();
    signal_drop(p);
    signal_future_drop(f);
    struct alloc_counts d = alloc_count_stop();
    cr_assert_eq(d.frees, c.allocs, "dropping both handles of an unused signal freed %llu of its %llu allocations (contract 10)",
                 (unsigned long long)d.frees, (unsigned long long)c.allocs);
}

/* ---- the type-erased view ------------------------------------------------ */

LAB_TEST(signal_ownership, as_future_polls_and_drops, 5)
{
    struct counting_waker *task = counting_waker_new("task");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out = { .outcome = SIGNAL_CONSUMED, .value = NULL };

    alloc_count_start();
    new_signal(record_drop, &p, &f);
    struct future fut = signal_future_as_future(f);
    cr_assert_not_null(fut.vtable, "signal_future_as_future returned a future without a vtable");
    cr_assert_eq(fut.vtable->output_size, sizeof(struct signal_output),
                 "the type-erased signal future says its output is %zu bytes; it writes a struct signal_output (%zu bytes)",
                 fut.vtable->output_size, sizeof(struct signal_output));
    cr_assert_not_null(fut.vtable->drop, "the type-erased signal future has no drop; dropping it must release the future handle");

    struct waker w = counting_waker_get(task);
    struct context cx = context_from_waker(&w);
    cr_assert_eq(future_poll(fut, &cx, &out), POLL_PENDING, "polling through the type-erased view returned Ready before any completion");
    cr_assert_eq(signal_complete(p, &token), SIGNAL_OK, "signal_complete must return SIGNAL_OK");
    cr_assert_eq(counting_waker_woken(task), 1u, "completing did not wake the waker registered through the type-erased view");
    cr_assert_eq(future_poll(fut, &cx, &out), POLL_READY, "polling through the type-erased view after the wake returned Pending");
    cr_assert(out.outcome == SIGNAL_VALUE && out.value == &token, "the type-erased poll wrote outcome %s, value %p; expected SIGNAL_VALUE and %p",
              outcome_name(out.outcome), out.value, (void *)&token);
    future_drop(fut); /* must be signal_future_drop(f) */
    signal_drop(p);
    struct alloc_counts c = alloc_count_stop();
    cr_assert_eq(c.allocs, c.frees, "after future_drop() on the type-erased view and signal_drop(), %llu allocations were not freed: the view's drop released less than signal_future_drop() does (signal.h, signal_future_as_future; contract 10)",
                 (unsigned long long)(c.allocs - c.frees));
    expect_books_balanced(task);
}

LAB_SUITE(signal_oom, 5);

/* ---- out of memory --------------------------------------------------------- */

LAB_TEST(signal_oom, out_of_memory_is_reported, 5)
{
    /* Fail the first allocation, then the second, ... until signal_new
     * succeeds: every failure must be reported as -1 with nothing leaked. */
    for (uint64_t n = 0; n < 8; n++) {
        struct signal *p = NULL;
        struct signal_future *f = NULL;
        alloc_count_start();
        alloc_fail_after(n);
        int rc = signal_new(NULL, &p, &f);
        struct alloc_counts c = alloc_count_stop();
        if (rc == 0) {
            cr_assert_geq(n, 1u, "signal_new returned 0 although its very first allocation failed (malloc gave NULL): it went on without the memory (signal.h, signal_new: -1 when out of memory)");
            signal_drop(p);
            signal_future_drop(f);
            return;
        }
        cr_assert_eq(rc, -1, "signal_new returned %d when allocation number %llu failed; it must return -1",
                     rc, (unsigned long long)n + 1);
        cr_assert_eq(c.frees, c.allocs,
                     "signal_new failed (allocation number %llu ran out of memory) but kept %llu of its %llu allocations (signal.h, signal_new: nothing is allocated when it returns -1)",
                     (unsigned long long)n + 1, (unsigned long long)(c.allocs - c.frees), (unsigned long long)c.allocs);
    }
    cr_assert_fail("signal_new never succeeded even with 8 allocations allowed");
}
