/* tcp_test.c - stage 08: accept, read and write-all on the ring
 * (uring_tcp.h). The server runs on the executor; the client is the test's
 * own threads with blocking sockets. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "stage08.h"

LAB_SUITE(tcp, 15);

/* the echo server's one connection: accept, then read and write back until end of stream */
struct echo {
    struct uring_listener *l;
    struct uring_accept acc;
    struct uring_stream *st;
    struct uring_read rd;
    struct uring_write wr;
    unsigned char *buf;
    size_t chunk;
    int state;          /* 0 accept, 1 read, 2 write */
    ssize_t *err;
    size_t *echoed;
};

static enum poll echo_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct echo *e = self;
    for (;;) {
        if (e->state == 0) {
            struct uring_stream_result res;
            if (uring_accept_poll(&e->acc, cx, &res) == POLL_PENDING)
                return POLL_PENDING;
            if (res.err) {
                *e->err = res.err;
                return POLL_READY;
            }
            e->st = res.stream;
            e->state = 1;
            e->rd = uring_read(e->st, e->buf, e->chunk);
        } else if (e->state == 1) {
            ssize_t n;
            e->rd.dst = e->buf;
            if (uring_read_poll(&e->rd, cx, &n) == POLL_PENDING)
                return POLL_PENDING;
            if (n <= 0) {
                *e->err = n;
                uring_stream_close(e->st);
                e->st = NULL;
                return POLL_READY;
            }
            e->wr = uring_write_all(e->st, e->buf, (size_t)n);
            e->state = 2;
        } else {
            ssize_t n;
            if (uring_write_poll(&e->wr, cx, &n) == POLL_PENDING)
                return POLL_PENDING;
            if (n < 0) {
                *e->err = n;
                uring_stream_close(e->st);
                e->st = NULL;
                return POLL_READY;
            }
            *e->echoed += (size_t)n;
            e->rd = uring_read(e->st, e->buf, e->chunk);
            e->state = 1;
        }
    }
}
static void echo_drop(void *self)
{
    struct echo *e = self;
    if (e->state == 1)
        uring_read_drop(&e->rd);
    if (e->state == 2)
        uring_write_drop(&e->wr);
    if (e->st)
        uring_stream_close(e->st);
}
static const struct future_vtable echo_vt = FUTURE_VTABLE_INIT(struct echo, 0, echo_poll, echo_drop);

struct client {
    uint16_t port;
    size_t len;
    uint64_t seed;
    unsigned delay_ms;   /* before the client starts reading */
    int fd;
    size_t got;
    bool bad;            /* a byte was not the one sent */
};

static void *client_send(void *arg)
{
    struct client *c = arg;
    unsigned char *p = malloc(c->len);
    for (size_t i = 0; i < c->len; i++)
        p[i] = pattern_byte(c->seed, i);
    bool ok = raw_send_all(c->fd, p, c->len);
    shutdown(c->fd, SHUT_WR);
    free(p);
    return ok ? NULL : (void *)1;
}

static void *client_run(void *arg)
{
    struct client *c = arg;
    c->fd = raw_connect(c->port);
    pthread_t t;
    if (pthread_create(&t, NULL, client_send, c) != 0)
        return (void *)1;
    lab_sleep_ms(c->delay_ms);
    unsigned char buf[65536];
    for (;;) {
        size_t want = sizeof buf;
        ssize_t n = recv(c->fd, buf, want, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++)
            c->bad = c->bad || buf[i] != pattern_byte(c->seed, c->got + (size_t)i);
        c->got += (size_t)n;
        if (c->got >= c->len)
            break;
    }
    void *sent;
    pthread_join(t, &sent);
    close(c->fd);
    return sent;
}

static void echo_round(size_t len, size_t chunk, unsigned delay_ms)
{
    struct iostack s;
    iostack_new(&s);
    struct uring_listener *l = NULL;
    cr_assert_eq(uring_listener_bind(s.r, "127.0.0.1", 0, &l), 0, "uring_listener_bind failed");
    ssize_t err = 1;
    size_t echoed = 0;
    unsigned char *buf = malloc(chunk);
    struct echo e = { .l = l, .acc = uring_accept(l), .buf = buf, .chunk = chunk, .err = &err, .echoed = &echoed };
    iostack_spawn(&s, future_of(&echo_vt, &e));
    struct client c = { .port = uring_listener_port(l), .len = len, .seed = lab_seed(), .delay_ms = delay_ms };
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, client_run, &c), 0, "pthread_create failed");
    iostack_run(&s);
    void *failed;
    pthread_join(t, &failed);
    cr_assert_null(failed, "the test's client could not send everything");
    cr_assert_eq(err, 0, "the echo server's read ended with %zd (%s); expected 0, end of stream (uring_tcp.h contract 4)", err,
                 err < 0 ? strerror((int)-err) : "bytes");
    cr_assert_eq(c.got, len, "the client got %zu bytes back of %zu sent (the server wrote %zu): write_all must "
                 "send the rest after a partial send (uring_tcp.h contract 4)", c.got, len, echoed);
    cr_assert_not(c.bad, "the bytes echoed back are not the bytes sent (in order): a read hands out the "
                  "completion's bytes, res of them, and a write_all resumes where the partial send stopped "
                  "(uring_tcp.h contract 4)");
    uring_listener_close(l);
    free(buf);
    iostack_free(&s);
}

LAB_TEST(tcp, echo_round_trip, 15) { echo_round(1, 16, 0); }

LAB_TEST(tcp, echo_300k, 15) { echo_round(300 * 1000, 64 * 1024, 0); }

LAB_TEST(tcp, write_all_partial_sends, 15)
{
    /* 4 MB in one write_all to a client that starts reading only after 100 ms: the socket's buffers fill
     * and the kernel completes the send with part of it */
    echo_round(4u << 20, 4u << 20, 100);
}

/* write_all_partial_sends counts on the echo server reading 4 MB in one
 * piece; on a busy machine it reads smaller pieces, each of which fits the
 * socket, and no send is partial. Here the partial sends do not depend on
 * the machine: 4 MB of a seeded pattern in one write_all, the server's
 * send buffer and the peer's receive buffer 4 KB (the receive buffer set
 * before connect, or the window stays wide), the peer draining 1,000 bytes
 * at a time on a thread of its own and checking every byte. */
#define DRAIN_TOTAL (4 << 20)
#define DRAIN_SEED UINT64_C(0x5eed0d1a)

/* the reading end: drain_peer (raw_sockets.h) */

struct written {
    ssize_t n;
    bool done;
};

/* the future (spawn moves it into the task): the write, and where its result goes */
struct writer {
    struct uring_write wr;
    struct written *out;
};

static enum poll writer_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct writer *w = self;
    if (uring_write_poll(&w->wr, cx, &w->out->n) == POLL_PENDING)
        return POLL_PENDING;
    w->out->done = true;
    return POLL_READY;
}

static void writer_drop(void *self)
{
    struct writer *w = self;
    if (!w->out->done)
        uring_write_drop(&w->wr);
}

static const struct future_vtable writer_vt = FUTURE_VTABLE_INIT(struct writer, 0, writer_poll, writer_drop);

LAB_TEST(tcp, write_all_to_a_draining_peer_sends_each_byte_once, 15)
{
    struct iostack s;
    iostack_new(&s);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t alen = sizeof a;
    cr_assert(lfd >= 0 && bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 1) == 0 &&
              getsockname(lfd, (struct sockaddr *)&a, &alen) == 0, "the test's listening socket failed");
    int small = 4096;
    int peer = raw_connect_rcvbuf(ntohs(a.sin_port), small);
    int fd = accept(lfd, NULL, NULL);
    close(lfd);
    cr_assert(peer >= 0 && fd >= 0, "the test's connection failed");
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    struct uring_stream *st = uring_stream_new(s.r, fd);
    cr_assert_not_null(st, "uring_stream_new failed");
    unsigned char *out = malloc(DRAIN_TOTAL);
    cr_assert_not_null(out, "out of memory in the test itself");
    for (size_t i = 0; i < DRAIN_TOTAL; i++)
        out[i] = pattern_byte(DRAIN_SEED, i);
    struct drain_peer d = { .fd = peer, .total = DRAIN_TOTAL, .seed = DRAIN_SEED };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, drain_peer_run, &d), 0, "pthread_create failed");
    struct written w = { 0 };
    struct writer wf = { .wr = uring_write_all(st, out, DRAIN_TOTAL), .out = &w };
    iostack_spawn(&s, future_of(&writer_vt, &wf));
    iostack_run(&s);
    shutdown(fd, SHUT_WR); /* the peer's reader ends, whatever came */
    pthread_join(th, NULL);
    free(out);
    close(peer);
    uring_stream_close(st);
    iostack_free(&s);
    lab_note("4 MB written: %zd; the peer read %zu bytes", w.n, d.got);
    cr_assert(w.done && w.n == (ssize_t)DRAIN_TOTAL, "write_all of %d bytes gave %zd", DRAIN_TOTAL, w.n);
    cr_assert(d.bad_at == DRAIN_TOTAL,
              "4 MB written with write_all to a peer draining them on another thread (small socket buffers: "
              "thousands of partial sends): byte %zu arrived as %#x where byte %zu of the buffer is %#x. The "
              "write sent some bytes twice, or out of order. After a partial send, where in the buffer does the "
              "next send start, and what does a send's res say went out (uring_tcp.h contract 4)?",
              d.bad_at, d.bad, d.bad_at, d.want);
    cr_assert_eq(d.got, (size_t)DRAIN_TOTAL, "the peer read %zu of %d bytes (uring_tcp.h contract 4)", d.got,
                 DRAIN_TOTAL);
}

LAB_TEST(tcp, end_of_stream, 10)
{
    struct ring *r = ring_or_skip(8, 16);
    int sv[2];
    nb_socketpair(sv);
    struct uring_stream *s = uring_stream_new(r, sv[0]);
    cr_assert(raw_send_all(sv[1], "ab", 2), "the test's peer could not send");
    shutdown(sv[1], SHUT_WR);
    struct waker w = noop_waker();
    struct context cx = context_from_waker(&w);
    char dst[8];
    ssize_t want[3] = { 2, 0, 0 };
    for (int i = 0; i < 3; i++) {
        struct uring_read rd = uring_read(s, dst, sizeof dst);
        ssize_t n = -1;
        unsigned k = 0;
        while (uring_read_poll(&rd, &cx, &n) == POLL_PENDING && k++ < 1000)
            driver_park(ring_driver(r), k < 10 ? 0 : (int64_t)MS_NS);
        cr_assert_eq(n, want[i], "read %d after the peer sent 2 bytes and shut down gave %zd; expected %zd "
                     "(end of stream is a read of 0, again and again: uring_tcp.h contract 4)", i + 1, n, want[i]);
        uring_read_drop(&rd);
    }
    uring_stream_close(s);
    close(sv[1]);
    ring_free_checked(r);
}
