/* orphan_test.c - stage 08: a submitted buffer is the kernel's until its
 * last completion (ring.h contract 1; uring_tcp.h contract 2).
 *
 * The tests make the kernel write after the drop, every run: the read is
 * submitted (a park), the future dropped (its cancel only queued: it goes
 * in at the next park), and then the test's own thread sends to the peer.
 * The kernel completes the receive in task work that runs as that send
 * returns, into the buffer it was given, before the cancel is ever
 * submitted. A ring that freed the buffer at the drop has handed glibc's
 * allocator a block the kernel then writes: the test's next allocations of
 * that size get it back (glibc's per-thread cache gives the last block
 * freed first), and their contents change under the test's eyes.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "stage08.h"

LAB_SUITE(orphan, 10);

#define BUF_LEN 1000u   /* an unusual size: its cache bin holds nothing else of the test's */
#define GRAB 8

static bool no_orphans(void *arg)
{
    struct ring_stats st = ring_test_stats(arg);
    return st.orphans == 0 && st.ops == 0;
}

LAB_TEST(orphan, drop_then_data_arrives, 10)
{
    struct ring *r = ring_or_skip(8, 16);
    int sv[2];
    nb_socketpair(sv);
    struct uring_stream *s = uring_stream_new(r, sv[0]);
    cr_assert_not_null(s, "uring_stream_new failed");
    struct counting_waker *cw = counting_waker_new("reader");
    struct waker w = counting_waker_get(cw);
    struct context cx = context_from_waker(&w);
    char dst[BUF_LEN];
    memset(dst, 0x5A, sizeof dst);
    struct uring_read rd = uring_read(s, dst, sizeof dst);
    ssize_t n = 0;
    cr_assert_eq(uring_read_poll(&rd, &cx, &n), POLL_PENDING, "a read on an empty socket was Ready (%zd): Pending until its CQE (ring.h contract 5)", n);
    driver_park(ring_driver(r), 0); /* submitted: the kernel holds the buffer now */
    uring_read_drop(&rd);
    /* what the drop left, judged after the kernel's late write: a ring that freed the buffer at the
     * drop is told both what it left and what the kernel then did */
    struct ring_stats st = ring_test_stats(r);
    /* blocks of the buffer's size: a buffer freed at the drop is one of them */
    unsigned char *grab[GRAB];
    for (int i = 0; i < GRAB; i++) {
        grab[i] = malloc(BUF_LEN);
        cr_assert_not_null(grab[i], "malloc failed in the test itself");
        memset(grab[i], 0xA5, BUF_LEN);
    }
    cr_assert(raw_send_all(sv[1], "hello", 5), "the test's peer could not send");
    unsigned parks = park_until(r, no_orphans, r);
    (void)parks;
    int written = -1;   /* the first block the kernel wrote into, or -1 */
    for (int i = 0; i < GRAB && written < 0; i++)
        for (unsigned j = 0; j < BUF_LEN; j++)
            if (grab[i][j] != 0xA5) {
                written = i;
                break;
            }
    cr_assert_eq(st.orphans, 1, "a read dropped while the kernel held its buffer left %u orphans; expected 1: "
                 "the operation must stay in the slab, its buffer kept, until its last completion (ring.h "
                 "contract 1). %s", st.orphans,
                 written >= 0 ? "And then the kernel wrote \"hello\" into memory the test had allocated after "
                 "the read was dropped: the buffer had been freed while the kernel still held it"
                 : "The kernel's late write landed in none of the blocks the test allocated after the drop");
    cr_assert_eq(st.cancels, 1, "a read dropped in flight queued %llu cancels; expected 1 IORING_OP_ASYNC_CANCEL "
                 "(ring.h contract 1)", (unsigned long long)st.cancels);
    cr_assert(written < 0, "the kernel wrote \"hello\" into memory the test had allocated after the read was "
              "dropped (block %d of %d): the ring freed the operation's buffer at the drop, while the kernel "
              "still held it. A dropped operation is an orphan, its buffer kept until its last completion "
              "(ring.h contract 1)", written + 1, GRAB);
    for (int i = 0; i < GRAB; i++)
        free(grab[i]);
    for (unsigned j = 0; j < sizeof dst; j++)
        cr_assert_eq((unsigned char)dst[j], 0x5A, "the caller's buffer was written after its read was dropped "
                     "(byte %u): only poll may copy into it (uring_tcp.h contract 2)", j);
    st = ring_test_stats(r);
    cr_assert_eq(st.orphans, 0, "the orphan's last completion came and it is still an orphan (%u left): its "
                 "buffer and slot are freed then (ring.h contract 1)", st.orphans);
    struct waker_counts c = counting_waker_counts(cw);
    cr_assert_eq(counting_waker_woken(cw), 0, "the dropped read's waker was woken by its completion: a dropped "
                 "operation holds no waker (ring.h contract 1)");
    cr_assert_eq(c.live, 1, "%ld references to the reader's waker are alive; expected 1 (the test's own)", c.live);
    counting_waker_free(cw);
    uring_stream_close(s);
    close(sv[1]);
    ring_free_checked(r);
}

LAB_TEST(orphan, drop_pending_read_is_cancelled, 10)
{
    struct ring *r = ring_or_skip(8, 16);
    int sv[2];
    nb_socketpair(sv);
    struct uring_stream *s = uring_stream_new(r, sv[0]);
    char dst[64];
    struct uring_read rd = uring_read(s, dst, sizeof dst);
    struct waker w = noop_waker();
    struct context cx = context_from_waker(&w);
    ssize_t n;
    cr_assert_eq(uring_read_poll(&rd, &cx, &n), POLL_PENDING, "a read on an empty socket was Ready (%zd): Pending until its CQE (ring.h contract 5)", n);
    driver_park(ring_driver(r), 0);
    uring_read_drop(&rd);
    struct ring_stats st = ring_test_stats(r);
    cr_assert_eq(st.orphans, 1, "a read dropped in flight left %u orphans; expected 1 (ring.h contract 1)",
                 st.orphans);
    /* no byte ever comes: only the cancel can end the read */
    park_until(r, no_orphans, r);
    st = ring_test_stats(r);
    cr_assert_eq(st.orphans, 0, "a dropped read on a socket that never receives a byte was still an orphan after "
                 "2 s of parks: no byte will ever complete it, and nothing else had ended it in the kernel "
                 "(ring.h contract 1: what a drop in flight sets going)");
    cr_assert_eq(st.ops, 0, "the orphan's slot was not freed after its last completion (%u in use; ring.h contract 1)", st.ops);
    uring_stream_close(s);
    close(sv[1]);
    ring_free_checked(r);
}

LAB_TEST(orphan, drop_after_completion_frees_at_once, 10)
{
    struct ring *r = ring_or_skip(8, 16);
    int sv[2];
    nb_socketpair(sv);
    struct uring_stream *s = uring_stream_new(r, sv[0]);
    char dst[64];
    struct uring_read rd = uring_read(s, dst, sizeof dst);
    struct waker w = noop_waker();
    struct context cx = context_from_waker(&w);
    ssize_t n;
    cr_assert_eq(uring_read_poll(&rd, &cx, &n), POLL_PENDING, "a read on an empty socket was Ready (%zd): Pending until its CQE (ring.h contract 5)", n);
    driver_park(ring_driver(r), 0);
    cr_assert(raw_send_all(sv[1], "x", 1), "the test's peer could not send");
    driver_park(ring_driver(r), 0); /* the completion is dispatched; nobody polls it */
    uring_read_drop(&rd);
    struct ring_stats st = ring_test_stats(r);
    cr_assert_eq(st.orphans, 0, "a read dropped after its completion came became an orphan: nothing more will "
                 "come from the kernel, so it is freed at once (ring.h contract 1)");
    cr_assert_eq(st.cancels, 0, "a read dropped after its completion came queued a cancel (ring.h contract 1)");
    cr_assert_eq(st.ops, 0, "a read dropped after its completion kept its slot (%u in use; ring.h contract 1)", st.ops);
    uring_stream_close(s);
    close(sv[1]);
    ring_free_checked(r);
}

LAB_TEST(orphan, ring_free_waits_for_orphans, 10)
{
    struct ring *r = ring_or_skip(8, 16);
    int sv[4][2];
    struct uring_stream *s[4];
    struct uring_read rd[4];
    char dst[4][100];
    struct waker w = noop_waker();
    struct context cx = context_from_waker(&w);
    for (int i = 0; i < 4; i++) {
        nb_socketpair(sv[i]);
        s[i] = uring_stream_new(r, sv[i][0]);
        rd[i] = uring_read(s[i], dst[i], sizeof dst[i]);
        ssize_t n;
        cr_assert_eq(uring_read_poll(&rd[i], &cx, &n), POLL_PENDING, "a read on an empty socket was Ready: Pending until its CQE (ring.h contract 5)");
    }
    driver_park(ring_driver(r), 0);
    for (int i = 0; i < 4; i++)
        uring_read_drop(&rd[i]);
    cr_assert_eq(ring_test_stats(r).orphans, 4, "four reads dropped in flight; expected four orphans (ring.h contract 1)");
    ring_free(r); /* must wait for the four last completions, then free the buffers (Valgrind: no leak) */
    for (int i = 0; i < 4; i++) {
        uring_stream_close(s[i]);
        close(sv[i][1]);
    }
}

/* A send that waits in the kernel for room (the peer reads nothing) is
 * dropped. The kernel still holds the operation's buffer, to read it when
 * room comes: the rule of a submitted buffer is not about receives alone. */
LAB_TEST(orphan, drop_pending_send_is_an_orphan, 10)
{
    struct ring *r = ring_or_skip(8, 16);
    int sv[2];
    nb_socketpair(sv);
    int small = 4096;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    static char fill[4096];
    size_t queued = 0;
    for (;;) {
        ssize_t k = send(sv[0], fill, sizeof fill, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k <= 0)
            break;
        queued += (size_t)k;
    }
    static char src[BUF_LEN];
    memset(src, 'q', sizeof src);
    ring_op_id id = 0;
    int e = ring_op_start(r, RING_SEND, sv[0], src, sizeof src, &id);
    cr_assert_eq(e, 0, "ring_op_start of a send failed: %s", strerror(-e));
    struct waker w = noop_waker();
    struct context cx = context_from_waker(&w);
    int32_t res = 0;
    cr_assert_eq(ring_op_poll(r, id, &cx, &res), POLL_PENDING, "a send on a socket with %zu bytes queued and "
                 "nobody reading was Ready (%d) before any park: Pending until its CQE (ring.h contract 5)", queued,
                 (int)res);
    driver_park(ring_driver(r), 0); /* submitted: the kernel holds the buffer, waiting for room */
    if (ring_op_poll(r, id, &cx, &res) == POLL_READY)
        lab_cannot_judge("the send completed (%d) although the peer read nothing: this kernel found room for it, "
                         "so no send waited in flight here", (int)res);
    ring_op_drop(r, id);
    struct ring_stats st = ring_test_stats(r);
    cr_assert_eq(st.orphans, 1, "a send dropped while it waited in the kernel for room left %u orphans; expected 1. "
                 "Whose is the operation's buffer until its last CQE, and does the kernel only write into buffers, "
                 "or read from them too (ring.h contract 1)?", st.orphans);
    park_until(r, no_orphans, r);
    st = ring_test_stats(r);
    cr_assert(st.orphans == 0 && st.ops == 0, "a dropped send was still an orphan (%u orphans, %u operations) after "
              "2 s of parks: the peer reads nothing, so only what the drop set going can end it (ring.h contract 1)",
              st.orphans, st.ops);
    close(sv[0]);
    close(sv[1]);
    ring_free_checked(r);
}
