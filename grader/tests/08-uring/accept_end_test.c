/* accept_end_test.c - stage 08: when the kernel ends the listener's
 * multishot accept (a CQE without IORING_CQE_F_MORE), the last CQE is an
 * answer like the ones before it, and the listener's next accept starts a new
 * multishot once nothing more will come of the old one (uring_tcp.h
 * contract 3; ring.h contract 2).
 *
 * Two endings, each forced on every run:
 *  - an error of the accept itself. The kernel reads RLIMIT_NOFILE when it
 *    prepares the accept SQE, and allocates the new descriptor before it
 *    looks for a connection (Linux io_uring/net.c: io_accept_prep,
 *    io_accept): with the limit at 1 while the SQE is submitted, the accept
 *    ends at once with -EMFILE;
 *  - a full completion queue. A multishot accept whose next CQE with F_MORE
 *    finds no room in the CQ ends with a last CQE that carries the new
 *    descriptor (io_accept on 6.18; earlier versions returned -ECANCELED
 *    there, which the listener restarts without telling anyone). Each
 *    connect below returns after the kernel posted its CQE (task work on
 *    this thread), and nothing is reaped until every client is connected.
 *
 * Not in the Valgrind lane: Valgrind keeps RLIMIT_NOFILE to itself (its
 * setrlimit does not reach the kernel), so the first test cannot run there.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "stage08.h"

LAB_SUITE(accept_end, 10);

LAB_TEST(accept_end, error_is_answered_then_restarted, 10)
{
    struct ring *r = ring_or_skip(8, 16);
    struct uring_listener *l = NULL;
    cr_assert_eq(uring_listener_bind(r, "127.0.0.1", 0, &l), 0, "uring_listener_bind failed");
    struct waker w = noop_waker();
    struct context cx = context_from_waker(&w);
    int c0 = raw_connect(uring_listener_port(l)); /* waits in the listener's backlog */
    /* descriptor 0 taken, so that no descriptor below the limit of 1 is free */
    if (fcntl(0, F_GETFD) < 0)
        cr_assert_eq(open("/dev/null", O_RDONLY), 0, "the test could not open descriptor 0 (its own failure)");
    struct rlimit was;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &was), 0, "getrlimit failed in the test itself");
    struct rlimit low = { .rlim_cur = 1, .rlim_max = was.rlim_max };
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0, "setrlimit failed in the test itself: %s", strerror(errno));
    /* the accept is submitted under the limit: the kernel ends it at once, -EMFILE, no F_MORE */
    struct uring_accept a1 = uring_accept(l);
    struct accept_wait first = { .a = &a1, .cx = &cx };
    unsigned parks = park_until(r, accept_ready, &first);
    int set_back = setrlimit(RLIMIT_NOFILE, &was);
    cr_assert_eq(set_back, 0, "setrlimit failed in the test itself: %s", strerror(errno));
    cr_assert(first.ready, "the process had no descriptor left, so the kernel ended the listener's accept with a "
              "last CQE of -EMFILE (no IORING_CQE_F_MORE), and the accept future was still Pending after %u "
              "parks (2 s): an error that ends the accept is the accept future's answer (uring_tcp.h contract "
              "3). Starting a new accept in its place fails the same way at once, for as long as the process "
              "has no descriptor", parks);
    cr_assert_eq(first.res.err, -EMFILE, "with no descriptor left, the accept future answered err %d (%s), stream "
                 "%s; expected -EMFILE, the error of the accept's last CQE (uring_tcp.h contract 3)",
                 first.res.err, strerror(-first.res.err), first.res.stream ? "given" : "none");
    uring_accept_drop(&a1);
    /* descriptors again: the next accept must take c0 from the backlog */
    struct uring_accept a2 = uring_accept(l);
    struct accept_wait second = { .a = &a2, .cx = &cx };
    parks = park_until(r, accept_ready, &second);
    cr_assert(second.ready, "after the accept future answered -EMFILE and descriptors were free again, the next "
              "accept was still Pending after %u parks (2 s) with a client waiting in the backlog: the old "
              "multishot accept had had its last CQE, and no new one was started (uring_tcp.h contract 3; "
              "ring.h contract 2)", parks);
    cr_assert_eq(second.res.err, 0, "after -EMFILE, and with descriptors free again, the next accept answered %d "
                 "(%s) where a client was waiting: an error ends one multishot accept, not the listener; the "
                 "next accept starts a new one (uring_tcp.h contract 3)", second.res.err, strerror(-second.res.err));
    uring_accept_drop(&a2);
    uring_stream_close(second.res.stream);
    close(c0);
    uring_listener_close(l);
    park_until(r, ring_idle, r);
    ring_free_checked(r);
}

#define FLOOD 40   /* clients connected before anything is reaped: more than the CQ holds */

LAB_TEST(accept_end, full_cq_ends_the_accept, 10)
{
    struct ring *r = ring_or_skip(8, 16); /* 16 CQEs */
    struct uring_listener *l = NULL;
    cr_assert_eq(uring_listener_bind(r, "127.0.0.1", 0, &l), 0, "uring_listener_bind failed");
    struct waker w = noop_waker();
    struct context cx = context_from_waker(&w);
    int c0 = raw_connect(uring_listener_port(l));
    struct uring_accept a0 = uring_accept(l);
    struct accept_wait ac = { .a = &a0, .cx = &cx };
    park_until(r, accept_ready, &ac); /* the multishot accept is armed */
    cr_assert(ac.ready && ac.res.err == 0, "the first client was not accepted (err %d)", ac.res.err);
    uring_accept_drop(&a0);
    uring_stream_close(ac.res.stream);
    close(c0);
    /* FLOOD clients, no park in between: 16 CQEs with F_MORE fill the CQ, and the next connection
     * ends the accept (a last CQE with its descriptor, or -ECANCELED on older kernels); the rest wait
     * in the backlog for an accept that only the listener can start again */
    int c[FLOOD];
    for (int i = 0; i < FLOOD; i++)
        c[i] = raw_connect(uring_listener_port(l));
    int got = 0;
    unsigned parks = 0;
    for (; got < FLOOD; got++) {
        struct uring_accept an = uring_accept(l);
        struct accept_wait next = { .a = &an, .cx = &cx };
        parks = park_until(r, accept_ready, &next);
        if (!next.ready)
            break;
        cr_assert_eq(next.res.err, 0, "accept %d of %d clients connected while nothing was reaped answered %d "
                     "(%s): the kernel ended the multishot accept when the completion queue was full, which "
                     "is no error of the accept (uring_tcp.h contract 3)", got + 1, FLOOD, next.res.err,
                     strerror(-next.res.err));
        uring_accept_drop(&an);
        uring_stream_close(next.res.stream);
    }
    cr_assert_eq(got, FLOOD, "%d of %d clients connected while nothing was reaped were accepted, and the next "
                 "accept was still Pending after %u parks (2 s). The kernel ended the multishot accept when the "
                 "completion queue was full, with a last CQE without IORING_CQE_F_MORE (on this kernel it "
                 "carries a new descriptor); that CQE's answer must be handed out like the others, and the next "
                 "accept must start a new multishot for the clients still in the backlog (uring_tcp.h contract "
                 "3; ring.h contract 2)", got, FLOOD, parks);
    for (int i = 0; i < FLOOD; i++)
        close(c[i]);
    uring_listener_close(l);
    park_until(r, ring_idle, r);
    ring_free_checked(r);
}
