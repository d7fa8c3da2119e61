#include "stage01.h"

LAB_SUITE(signal_hidden, 5);

LAB_TEST(signal_hidden, three_wakers, 5)
{
    struct counting_waker *a = counting_waker_new("a"), *b = counting_waker_new("b"), *c = counting_waker_new("c");
    struct signal *p;
    struct signal_future *f;
    struct signal_output out;
    new_signal(NULL, &p, &f);
    cr_assert_eq(poll_with(f, a, &out), POLL_PENDING);
    cr_assert_eq(poll_with(f, b, &out), POLL_PENDING);
    cr_assert_eq(poll_with(f, c, &out), POLL_PENDING);
    signal_complete(p, (void *)1);
    cr_assert_eq(counting_waker_woken(a) + counting_waker_woken(b), 0u, "an old waker was woken");
    cr_assert_eq(counting_waker_woken(c), 1u, "the latest waker was not woken exactly once");
    cr_assert_eq(poll_with(f, c, &out), POLL_READY);
    signal_drop(p);
    signal_future_drop(f);
    expect_books_balanced(a);
    expect_books_balanced(b);
    expect_books_balanced(c);
}
