/* wakers_test.c - stage 08: the latest waker, woken once (ring.h contract 5). */
#include <string.h>
#include <unistd.h>

#include "stage08.h"

LAB_SUITE(ops, 10);

static bool woken(void *arg) { return counting_waker_woken(arg) > 0; }

LAB_TEST(ops, latest_waker_is_woken, 10)
{
    struct ring *r = ring_or_skip(8, 16);
    int sv[2];
    nb_socketpair(sv);
    struct uring_stream *s = uring_stream_new(r, sv[0]);
    struct counting_waker *a = counting_waker_new("first poller"), *b = counting_waker_new("second poller");
    struct waker wa = counting_waker_get(a), wb = counting_waker_get(b);
    struct context ca = context_from_waker(&wa), cb = context_from_waker(&wb);
    char dst[16];
    struct uring_read rd = uring_read(s, dst, sizeof dst);
    ssize_t n = 0;
    cr_assert_eq(uring_read_poll(&rd, &ca, &n), POLL_PENDING, "a read on an empty socket was Ready: Pending until its CQE (ring.h contract 5)");
    cr_assert_eq(uring_read_poll(&rd, &cb, &n), POLL_PENDING, "a read on an empty socket was Ready: Pending until its CQE (ring.h contract 5)");
    struct waker_counts c = counting_waker_counts(a);
    cr_assert_eq(c.live, 1, "the first poller's waker is still held (%ld references) after a second poll "
                 "registered another: the operation keeps the latest waker only (ring.h contract 5)", c.live);
    driver_park(ring_driver(r), 0);
    cr_assert(raw_send_all(sv[1], "abc", 3), "the test's peer could not send");
    park_until(r, woken, b);
    cr_assert_eq(counting_waker_woken(a), 0, "the completion woke the first poller's waker, not the latest "
                 "(ring.h contract 5)");
    cr_assert_eq(counting_waker_woken(b), 1, "the latest poller's waker was woken %u times by one completion; "
                 "expected once (ring.h contract 5)", counting_waker_woken(b));
    c = counting_waker_counts(b);
    cr_assert_eq(c.live, 1, "after the completion woke it, %ld references to the latest waker are alive; "
                 "expected 1 (the test's own): a CQE wakes the registered waker and gives it back "
                 "(ring.h contract 5)", c.live);
    cr_assert_eq(uring_read_poll(&rd, &cb, &n), POLL_READY, "the read was not Ready after its completion (ring.h contract 5)");
    cr_assert_eq(n, 3, "the read gave %zd; expected the 3 bytes sent (ring.h contract 5)", n);
    cr_assert(memcmp(dst, "abc", 3) == 0, "the read's bytes are not the ones sent (ring.h contract 5)");
    uring_read_drop(&rd);
    counting_waker_free(a);
    counting_waker_free(b);
    uring_stream_close(s);
    close(sv[1]);
    ring_free_checked(r);
}

LAB_TEST(ops, orphan_holds_no_waker, 10)
{
    struct ring *r = ring_or_skip(8, 16);
    int sv[2];
    nb_socketpair(sv);
    struct uring_stream *s = uring_stream_new(r, sv[0]);
    struct counting_waker *a = counting_waker_new("reader");
    struct waker wa = counting_waker_get(a);
    struct context ca = context_from_waker(&wa);
    char dst[16];
    struct uring_read rd = uring_read(s, dst, sizeof dst);
    ssize_t n;
    cr_assert_eq(uring_read_poll(&rd, &ca, &n), POLL_PENDING, "a read on an empty socket was Ready: Pending until its CQE (ring.h contract 5)");
    driver_park(ring_driver(r), 0);
    uring_read_drop(&rd);
    struct waker_counts c = counting_waker_counts(a);
    cr_assert_eq(c.live, 1, "right after the drop, the dropped read's operation still holds the task's waker "
                 "(%ld references alive, the test's own included): an orphan must let go of it at once, the "
                 "task it wakes may be freed next (ring.h contract 1)", c.live);
    cr_assert(raw_send_all(sv[1], "abc", 3), "the test's peer could not send");
    for (int i = 0; i < 5; i++)
        driver_park(ring_driver(r), 0);
    cr_assert_eq(counting_waker_woken(a), 0, "the orphan's completion woke the dropped future's waker (ring.h contract 1)");
    counting_waker_free(a);
    uring_stream_close(s);
    close(sv[1]);
    ring_free_checked(r);
}
