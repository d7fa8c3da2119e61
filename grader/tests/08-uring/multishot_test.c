/* multishot_test.c - stage 08: one multishot accept, many completions; it
 * lives while IORING_CQE_F_MORE is set (ring.h contract 2; uring_tcp.h
 * contract 3). */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "stage08.h"

LAB_SUITE(multishot, 10);

#define CLIENTS 5

static struct uring_stream *accept_one(struct ring *r, struct uring_listener *l, struct context *cx, int client)
{
    struct uring_accept a = uring_accept(l);
    struct accept_wait ac = { .a = &a, .cx = cx };
    park_until(r, accept_ready, &ac);
    cr_assert(ac.ready, "client %d connected and was not accepted after 2 s of parks: a multishot accept must "
              "stay submitted while its completions carry IORING_CQE_F_MORE (ring.h contract 2)", client);
    cr_assert_eq(ac.res.err, 0, "accept of client %d failed: %s (ring.h contract 2)", client, strerror(-ac.res.err));
    uring_accept_drop(&a);
    return ac.res.stream;
}

LAB_TEST(multishot, one_sqe_many_accepts, 10)
{
    struct ring *r = ring_or_skip(8, 16);
    struct uring_listener *l = NULL;
    cr_assert_eq(uring_listener_bind(r, "127.0.0.1", 0, &l), 0, "uring_listener_bind failed");
    struct waker w = noop_waker();
    struct context cx = context_from_waker(&w);
    int clients[CLIENTS];
    struct uring_stream *st[CLIENTS];
    ring_op_id first = 0;
    for (int i = 0; i < CLIENTS; i++) {
        clients[i] = raw_connect(uring_listener_port(l));
        st[i] = accept_one(r, l, &cx, i);
        if (i == 0)
            first = uring_listener_test_op(l);
        cr_assert_eq(uring_listener_test_op(l), first, "the listener's accept operation changed after accept %d: "
                     "one multishot accept serves every connection while IORING_CQE_F_MORE is set (ring.h "
                     "contract 2)", i + 1);
    }
    struct ring_stats s = ring_test_stats(r);
    cr_assert_eq(s.sqes, 1, "%d connections accepted with %llu SQEs; expected 1: a multishot accept is one "
                 "submission for any number of connections, and lives while its CQEs say IORING_CQE_F_MORE "
                 "(ring.h contract 2)", CLIENTS, (unsigned long long)s.sqes);
    for (int i = 0; i < CLIENTS; i++) {
        cr_assert(raw_send_all(clients[i], "p", 1), "client %d could not send", i);
        char c = 0;
        cr_assert_eq(raw_recv_all(uring_stream_fd(st[i]), &c, 1, SCALED_MS(2000)), 1,
                     "accepted stream %d is not connected to client %d", i, i);
        uring_stream_close(st[i]);
        close(clients[i]);
    }
    uring_listener_close(l);
    park_until(r, ring_idle, r);
    ring_free_checked(r);
}

LAB_TEST(multishot, close_lives_until_last_cqe, 10)
{
    struct ring *r = ring_or_skip(8, 16);
    struct uring_listener *l = NULL;
    cr_assert_eq(uring_listener_bind(r, "127.0.0.1", 0, &l), 0, "uring_listener_bind failed");
    uint16_t port = uring_listener_port(l);
    struct waker w = noop_waker();
    struct context cx = context_from_waker(&w);
    int c0 = raw_connect(port);
    /* c0's stream only had to arm the multishot accept, which goes on
     * accepting: closed now, so that a failed assertion below leaves none of
     * the test's own memory behind (under Valgrind a failed test that exits
     * with a stream still allocated was reported as a 16-byte leak in
     * uring_stream_new, in place of what failed) */
    uring_stream_close(accept_one(r, l, &cx, 0));
    close(c0);
    unsigned socks = open_sockets();
    uring_listener_close(l); /* the multishot accept: an orphan, its cancel queued, not yet submitted */
    struct ring_stats st = ring_test_stats(r);
    cr_assert_eq(st.orphans, 1, "closing a listener whose multishot accept is submitted left %u orphans; "
                 "expected 1: the kernel may still complete it (ring.h contracts 1, 2)", st.orphans);
    /* the kernel still holds the listening socket through the operation: these clients are accepted (in
     * task work as each connect returns) before the cancel goes in, each in a CQE with IORING_CQE_F_MORE;
     * the orphan lives until the last of its CQEs, which closes none of them (ring.h contracts 1, 2) */
    enum { LATE = 3 };
    int c[LATE];
    for (int i = 0; i < LATE; i++)
        c[i] = raw_connect(port);
    park_until(r, ring_idle, r);
    st = ring_test_stats(r);
    cr_assert_eq(st.ops, 0, "the closed listener's multishot accept was still in the slab after 2 s of parks "
                 "(%u operations, %u orphans): its cancel must end it, and its last CQE (no "
                 "IORING_CQE_F_MORE) frees it (ring.h contracts 1, 2)", st.ops, st.orphans);
    for (int i = 0; i < LATE; i++) {
        char b;
        struct pollfd pf = { .fd = c[i], .events = POLLIN };
        int ready = poll(&pf, 1, (int)SCALED_MS(2000));
        ssize_t n = ready == 1 ? recv(c[i], &b, 1, MSG_DONTWAIT) : -1;
        cr_assert(n == 0 || (n < 0 && errno == ECONNRESET), "client %d of %d accepted by the closed listener's "
                  "orphaned multishot accept was never closed (its read gave %zd after 2 s): the descriptor "
                  "every CQE of an orphaned accept brings is nobody's, and the ring must close it, the first "
                  "CQE's and those after it (ring.h contracts 1, 2)", i + 1, LATE, n);
    }
    /* the listener's socket went, the test's clients came: no more than before, and them */
    unsigned after = open_sockets();
    cr_assert_leq(after, socks + LATE - 1, "sockets leaked: %u open before closing the listener, %u after the "
                  "orphan's last completion and %d clients more; the listener's descriptor and every one an "
                  "orphaned accept received must be closed (ring.h contract 1)", socks, after, LATE);
    for (int i = 0; i < LATE; i++)
        close(c[i]);
    ring_free_checked(r);
}
