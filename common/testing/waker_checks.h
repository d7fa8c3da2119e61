/* waker_checks.h - what a test checks of a counting waker (wakers.h) at
 * its end: every reference the code under test took has been given back. */
#ifndef LAB_TEST_WAKER_CHECKS_H
#define LAB_TEST_WAKER_CHECKS_H

#include "lab_test.h"
#include "wakers.h"

/* Ends a test that used `cw`: every reference the code under test took
 * must have been given back (live == 1, the test's own); then frees it. */
static inline void expect_books_balanced(struct counting_waker *cw)
{
    struct waker_counts c = counting_waker_counts(cw);
    cr_assert_eq(c.live, 1,
                 "waker \"%s\" does not balance: %ld reference(s) still held besides the test's own "
                 "(clones %u, wakes %u, drops %u). Every waker the signal stores must be given back, "
                 "by a wake or a drop, by the time the handles are gone.",
                 counting_waker_label(cw), c.live - 1, c.clones, c.wakes, c.drops);
    counting_waker_free(cw);
}

#endif
