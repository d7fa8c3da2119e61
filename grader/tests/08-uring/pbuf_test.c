/* pbuf_test.c - stage 08: a multishot receive with provided buffers
 * (ring.h contracts 2, 6; uring_tcp.h contract 5).
 *
 * The tests make the kernel fill buffers when they choose: every send is
 * made on the test's own thread, and the kernel receives it in task work
 * as that send returns, into the next buffer of the receive's ring (or
 * finds none, and ends the receive with -ENOBUFS). A park(0) after it
 * dispatches the CQE. A ring of two 4-byte buffers runs out after eight
 * bytes, every run.
 */
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "stage08.h"

LAB_SUITE(pbuf, 10);

#define MSGS 6

/* Bytes waiting in the socket that the kernel has not received yet. */
static int inq(int fd)
{
    int n = -1;
    if (ioctl(fd, FIONREAD, &n) < 0)
        return -1;
    return n;
}

struct inq_arg {
    int fd;
};
static bool inq_empty(void *arg)
{
    return inq(((struct inq_arg *)arg)->fd) == 0;
}

/* send, wait until the kernel took the bytes, then dispatch its CQE */
static void send_taken(struct ring *r, int from, int to, const char *bytes, size_t n)
{
    cr_assert(raw_send_all(from, bytes, n), "the test's peer could not send");
    struct inq_arg a = { .fd = to };
    park_until(r, inq_empty, &a);
    driver_park(ring_driver(r), 0);
}

struct receiving {
    struct uring_recv *rv;
    struct context *cx;
    ssize_t n;
    bool ready;
};

static bool received(void *arg)
{
    struct receiving *rc = arg;
    if (!rc->ready)
        rc->ready = uring_recv_poll(rc->rv, rc->cx, &rc->n) == POLL_READY;
    return rc->ready;
}

/* A ring, and a stream over sv[0] of a socketpair. */
static struct uring_stream *pbuf_stream(struct ring **r, int sv[2])
{
    require_multishot_recv();
    *r = ring_or_skip(8, 16);
    nb_socketpair(sv);
    struct uring_stream *s = uring_stream_new(*r, sv[0]);
    cr_assert_not_null(s, "uring_stream_new failed");
    return s;
}

LAB_TEST(pbuf, one_sqe_many_receives, 10)
{
    int sv[2];
    struct ring *r = NULL;
    struct uring_stream *s = pbuf_stream(&r, sv);
    struct waker w = noop_waker();
    struct context cx = context_from_waker(&w);
    ring_op_id first = 0;
    for (int i = 0; i < MSGS; i++) {
        char msg[12], got[64];
        memset(msg, 'a' + i, sizeof msg);
        struct uring_recv rv = uring_recv(s, got, sizeof got);
        struct receiving rc = { .rv = &rv, .cx = &cx };
        if (i > 0)
            cr_assert_not(received(&rc), "a receive was Ready (%zd) before message %d was sent", rc.n, i + 1);
        cr_assert(raw_send_all(sv[1], msg, sizeof msg), "the test's peer could not send");
        park_until(r, received, &rc);
        cr_assert(rc.ready, "message %d was sent and no receive was Ready after 2 s of parks: the stream's "
                  "multishot receive must stay submitted while its CQEs carry IORING_CQE_F_MORE (ring.h contract "
                  "2; uring_tcp.h contract 5)", i + 1);
        cr_assert_eq(rc.n, (ssize_t)sizeof msg, "message %d: a receive gave %zd; expected its %zu bytes (uring_tcp.h "
                     "contract 5)", i + 1, rc.n, sizeof msg);
        cr_assert(memcmp(got, msg, sizeof msg) == 0, "message %d: the bytes received are not the bytes sent "
                  "(ring.h contract 6)", i + 1);
        uring_recv_drop(&rv);
        if (i == 0)
            first = uring_stream_test_recv_op(s);
        cr_assert_eq(uring_stream_test_recv_op(s), first, "the stream's receive operation changed after message "
                     "%d: one multishot receive serves the stream while IORING_CQE_F_MORE is set (ring.h contract "
                     "2; uring_tcp.h contract 5)", i + 1);
    }
    struct ring_stats st = ring_test_stats(r);
    cr_assert_eq(st.sqes, 1, "%d messages received with %llu SQEs; expected 1: a multishot receive is one "
                 "submission for any number of completions, and lives while its CQEs say IORING_CQE_F_MORE "
                 "(ring.h contract 2)", MSGS, (unsigned long long)st.sqes);
    close(sv[1]);
    for (int again = 0; again < 2; again++) {
        char got[8];
        struct uring_recv rv = uring_recv(s, got, sizeof got);
        struct receiving rc = { .rv = &rv, .cx = &cx };
        park_until(r, received, &rc);
        cr_assert(rc.ready && rc.n == 0, "the peer closed: receive %d after it should be Ready with 0 (end of "
                  "stream), it gave %s%zd (uring_tcp.h contract 5)", again + 1, rc.ready ? "" : "Pending, ",
                  rc.ready ? rc.n : 0);
        uring_recv_drop(&rv);
    }
    st = ring_test_stats(r);
    cr_assert_eq(st.ops, 0, "the stream's receive ended (end of stream) and %u operations are still in the slab: "
                 "its last CQE ends it (ring.h contract 2)", st.ops);
    uring_stream_close(s);
    ring_free_checked(r);
}

LAB_TEST(pbuf, close_while_buffers_held, 10)
{
    int sv[2];
    struct ring *r = NULL;
    struct uring_stream *s = pbuf_stream(&r, sv);
    struct waker w = noop_waker();
    struct context cx = context_from_waker(&w);
    char got[16];
    struct uring_recv rv = uring_recv(s, got, sizeof got);
    ssize_t n = 0;
    cr_assert_eq(uring_recv_poll(&rv, &cx, &n), POLL_PENDING, "a receive on an empty socket was Ready (%zd)", n);
    driver_park(ring_driver(r), 0);
    send_taken(r, sv[1], sv[0], "one", 3);
    send_taken(r, sv[1], sv[0], "two", 3);
    uring_recv_drop(&rv);
    struct ring_stats st = ring_test_stats(r);
    cr_assert_eq(st.bufs_held, 2, "two messages received and not taken: %u provided buffers held; expected 2: a "
                 "buffer a CQE names stays out of the kernel's ring until its bytes are copied out (ring.h "
                 "contract 6)", st.bufs_held);
    uring_stream_close(s); /* its receive, still submitted: an orphan */
    st = ring_test_stats(r);
    cr_assert_eq(st.orphans, 1, "a stream closed with its multishot receive submitted left %u orphans; expected 1 "
                 "(ring.h contracts 1, 2)", st.orphans);
    park_until(r, ring_idle, r);
    st = ring_test_stats(r);
    cr_assert_eq(st.ops, 0, "the closed stream's receive was still in the slab after 2 s of parks (%u operations, "
                 "%u orphans): its cancel ends it, and its last CQE frees it, buffers and all (ring.h contracts 1, "
                 "2, 6)", st.ops, st.orphans);
    cr_assert_eq(st.bufs_held, 0, "the closed stream's receive was freed with %u provided buffers still counted "
                 "held (ring.h contract 6)", st.bufs_held);
    close(sv[1]);
    ring_free_checked(r);
}

/* Polls with cap-byte copies, a park(0) after every poll, until want bytes
 * came or 2 s passed; fails on an end or an error. The bytes taken. */
static size_t take(struct ring *r, ring_op_id id, char *out, size_t want, size_t cap)
{
    struct waker w = noop_waker();
    struct context cx = context_from_waker(&w);
    uint64_t end = monotonic_ns() + (uint64_t)SCALED_MS(2000) * MS_NS;
    size_t got = 0;
    while (got < want && monotonic_ns() < end) {
        int32_t res = 0;
        if (ring_recv_poll(r, id, &cx, out + got, cap, &res) == POLL_READY) {
            cr_assert_neq(res, -ENOBUFS, "a receive handed out -ENOBUFS after %zu of %zu bytes: the kernel ran out "
                          "of provided buffers and ended the receive, but the stream goes on; the receive is "
                          "submitted again once a buffer is back in the ring, never handed out as an error (ring.h "
                          "contract 6)", got, want);
            cr_assert_gt(res, 0, "a receive was Ready with %d after %zu of %zu bytes, the peer still open and "
                         "sending (ring.h contract 6)", res, got, want);
            cr_assert_leq(res, (int32_t)cap, "a receive copied %d bytes into a destination of %zu", res, cap);
            got += (size_t)res;
        }
        driver_park(ring_driver(r), 0);
    }
    return got;
}

/* A multishot receive on sv[0] with two 4-byte buffers, polled once
 * (Pending) and submitted: both buffers the kernel's. */
static struct ring *tiny_receive(int sv[2], ring_op_id *id)
{
    require_multishot_recv();
    struct ring *r = ring_or_skip(8, 16);
    nb_socketpair(sv);
    int e = ring_recv_multi_start(r, sv[0], 2, 4, id);
    cr_assert_eq(e, 0, "ring_recv_multi_start(2 buffers of 4 bytes) failed: %s", strerror(-e));
    struct waker w = noop_waker();
    struct context cx = context_from_waker(&w);
    char out[4];
    int32_t res = 0;
    cr_assert_eq(ring_recv_poll(r, *id, &cx, out, sizeof out, &res), POLL_PENDING, "a receive on an empty socket "
                 "was Ready (%d)", res);
    driver_park(ring_driver(r), 0);
    return r;
}

static void tiny_free(struct ring *r, int sv[2], ring_op_id id)
{
    ring_op_drop(r, id);
    park_until(r, ring_idle, r);
    close(sv[1]);
    close(sv[0]);
    ring_free_checked(r);
}

LAB_TEST(pbuf, bytes_kept_until_taken, 10)
{
    int sv[2];
    ring_op_id id = 0;
    struct ring *r = tiny_receive(sv, &id);
    char out[16];
    /* no byte repeats: a byte out of its place shows where it came from */
    static const char sent[] = "ABCDEFGHIJKLMNOP";
    send_taken(r, sv[1], sv[0], sent, 4);     /* into a buffer; its CQE dispatched */
    send_taken(r, sv[1], sv[0], sent + 4, 4); /* into the other */
    /* no buffer is in the kernel's ring now, unless one went back before its
     * bytes were taken: then these land in it */
    cr_assert(raw_send_all(sv[1], sent + 8, 8), "the test's peer could not send");
    for (int i = 0; i < 4; i++)
        driver_park(ring_driver(r), 0);
    /* two bytes a poll, a park after each: a buffer given back before all
     * four of its bytes were taken is refilled before the next poll */
    size_t got = take(r, id, out, 16, 2);
    cr_assert_eq(got, 16, "%zu of 16 bytes received after 2 s (ring.h contract 6)", got);
    for (int i = 0; i < 4; i++) {
        if (memcmp(out + 4 * i, sent + 4 * i, 4) == 0)
            continue;
        bool own = true; /* every byte handed out is one of this buffer's own */
        for (int k = 0; k < 4; k++)
            own = own && memchr(sent + 4 * i, out[4 * i + k], 4) != NULL;
        cr_assert(!own, "the receive handed out \"%.4s\" where \"%.4s\" was sent (bytes %d to %d of 16): bytes of one "
                  "buffer, out of their order or twice. Taken two bytes a poll, a buffer is handed out in pieces; "
                  "each piece must start where the last one stopped, so every byte comes out once, in order "
                  "(ring.h contract 6)", out + 4 * i, sent + 4 * i, 4 * i, 4 * i + 3);
        cr_assert(false, "the receive handed out \"%.4s\" where \"%.4s\" was sent (bytes %d to %d of 16): the buffer "
                  "that held them went back to the kernel's ring before every byte of it was copied out, and the "
                  "kernel filled it with later bytes. A buffer a CQE names is the program's until poll has copied all "
                  "of it (ring.h contract 6)", out + 4 * i, sent + 4 * i, 4 * i, 4 * i + 3);
    }
    tiny_free(r, sv, id);
}

/* For park_until: at most max bytes wait in the socket. */
struct inq_max {
    int fd;
    int max;
};
static bool inq_at_most(void *arg)
{
    struct inq_max *a = arg;
    int n = inq(a->fd);
    return n >= 0 && n <= a->max;
}

/* The kernel's receive still submitted while a buffer is taken one byte a
 * poll: a buffer back in the kernel's ring before its last byte is taken
 * is one the next send fills, on every run. Round k: four bytes into one
 * buffer (the other still in the kernel's ring), k of them taken, then
 * eight more sent, as many as both buffers hold: the kernel fills every
 * buffer in its ring, and finds the first there only if it went back. */
LAB_TEST(pbuf, rest_kept_while_receive_runs, 10)
{
    int sv[2];
    ring_op_id id = 0;
    struct ring *r = tiny_receive(sv, &id);
    /* 36 bytes, none twice: a byte out of its place says which send it came from */
    static const char sent[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    enum { ROUND = 12 };
    for (int k = 1; k <= 3; k++) {
        const char *want = sent + (k - 1) * ROUND;
        char out[ROUND];
        send_taken(r, sv[1], sv[0], want, 4); /* into a buffer; its CQE dispatched */
        /* k bytes, one a poll and a park after each: the other buffer still the kernel's */
        size_t got = take(r, id, out, (size_t)k, 1);
        cr_assert_eq(got, (size_t)k, "round %d: a 4-byte message received, and %zu of its first %d bytes came "
                     "after 2 s of polls taking one byte each (ring.h contract 6)", k, got, k);
        cr_assert(raw_send_all(sv[1], want + 4, 8), "the test's peer could not send");
        struct inq_max a = { .fd = sv[0], .max = 4 };
        park_until(r, inq_at_most, &a); /* the kernel took at least one buffer's worth */
        for (int i = 0; i < 4; i++)
            driver_park(ring_driver(r), 0);
        got += take(r, id, out + got, ROUND - got, 1);
        for (size_t i = 0; i < got; i++) {
            if (out[i] == want[i])
                continue;
            const char *from = memchr(sent, out[i], sizeof sent - 1);
            long at = from ? (long)(from - want) : -1; /* its place in this round */
            cr_assert(i >= 4 || at < 4, "round %d: the receive handed out \"%.*s\" where \"%.*s\" was sent: byte %zu "
                      "of the first message is '%c', byte %ld of the 8 bytes sent after %d of its 4 bytes had been "
                      "taken. The kernel wrote the later bytes into the buffer that held the first message while "
                      "the rest of it was still to be taken: was that buffer back in the kernel's ring before "
                      "every byte of it had been copied out? (ring.h contract 6) The next hint: make hint STAGE=8 "
                      "ITEM=buffer-lent", k, (int)got, out, ROUND, want, i + 1, out[i], at - 3, k);
            cr_assert_fail("round %d: the receive handed out \"%.*s\" where \"%.*s\" was sent (byte %zu is '%c', "
                           "expected '%c'): bytes out of their order, twice, or not the peer's, taken one byte a poll "
                           "(ring.h contract 6). The next hint: make hint STAGE=8 ITEM=buffer-lent", k, (int)got, out,
                           ROUND, want, i, out[i], want[i]);
        }
        cr_assert_eq(got, (size_t)ROUND, "round %d: %zu of %d bytes received after 2 s, one byte a poll: the "
                     "kernel ran out of buffers and the receive was not submitted again? (ring.h contract 6)", k,
                     got, (int)ROUND);
    }
    tiny_free(r, sv, id);
}

LAB_TEST(pbuf, enobufs_rearms, 10)
{
    int sv[2];
    ring_op_id id = 0;
    struct ring *r = tiny_receive(sv, &id);
    char sent[32], out[32];
    for (size_t i = 0; i < sizeof sent; i++)
        sent[i] = (char)('a' + i % 26);
    /* 32 bytes at once: the kernel fills both buffers and ends the receive
     * with -ENOBUFS (no IORING_CQE_F_MORE); 24 bytes wait in the socket */
    uint64_t sqes = ring_test_stats(r).sqes;
    cr_assert(raw_send_all(sv[1], sent, sizeof sent), "the test's peer could not send");
    for (int i = 0; i < 8; i++)
        driver_park(ring_driver(r), 0);
    /* ring.h contract 6: submitted again "once a buffer is back", and not
     * before: with both buffers held, a receive submitted again ends with
     * -ENOBUFS at once, every park */
    uint64_t again = ring_test_stats(r).sqes - sqes;
    cr_assert_leq(again, 1, "both provided buffers held and not taken, the receive ended by -ENOBUFS was submitted "
                  "%llu times in 8 parks: each ended at once with -ENOBUFS again, no buffer being back (ring.h "
                  "contract 6)", (unsigned long long)again);
    size_t got = take(r, id, out, sizeof sent, 4);
    cr_assert_eq(got, sizeof sent, "%zu of %zu bytes received after 2 s: the kernel ran out of provided buffers "
                 "and ended the receive (-ENOBUFS, no IORING_CQE_F_MORE); it must be submitted again once a buffer "
                 "goes back to the ring, or the rest of the stream is never received (ring.h contract 6)", got,
                 sizeof sent);
    cr_assert(memcmp(out, sent, sizeof sent) == 0, "all 32 bytes came, not in the order sent (ring.h contract 6)");
    struct ring_stats st = ring_test_stats(r);
    cr_assert_geq(st.sqes, 2, "32 bytes through 8 bytes of buffers with %llu SQEs: the receive was never ended "
                  "by -ENOBUFS? (ring.h contract 6)", (unsigned long long)st.sqes);
    tiny_free(r, sv, id);
}
