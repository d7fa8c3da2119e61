/* support.c - the code behind stage06.h. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "executor_checks.h"
#include "stage06.h"

void iostack_new(struct iostack *s)
{
    s->r = reactor_new();
    cr_assert_not_null(s->r, "reactor_new returned NULL");
    s->io = io_driver_new(s->r);
    cr_assert_not_null(s->io, "io_driver_new returned NULL");
    s->td = time_driver_new(io_driver_driver(s->io));
    cr_assert_not_null(s->td, "time_driver_new returned NULL");
    s->ex = executor_new(time_driver_driver(s->td));
    cr_assert_not_null(s->ex, "executor_new returned NULL");
}

void iostack_free(struct iostack *s)
{
    executor_free(s->ex);
    struct reactor_stats st = reactor_test_stats(s->r);
    cr_assert_eq(st.registrations, 0, "%zu registrations left in the reactor after every stream, listener and "
                 "future was closed or dropped", st.registrations);
    time_driver_free(s->td);
    io_driver_free(s->io);
    reactor_free(s->r);
}

void iostack_run(struct iostack *s)
{
    expect_executor_run_ok(s->ex);
}

void iostack_spawn(struct iostack *s, struct future f)
{
    spawn_detached(s->ex, f);
}

struct tcp_listener *iostack_listen(struct iostack *s)
{
    struct tcp_listener *l = NULL;
    int e = tcp_listener_bind(s->r, s->td, "127.0.0.1", 0, &l);
    cr_assert_eq(e, 0, "tcp_listener_bind on 127.0.0.1:0 failed: %s", strerror(-e));
    cr_assert_neq(tcp_listener_port(l), 0, "the listener reports port 0");
    return l;
}

void conn_new(struct iostack *s, struct conn *c) { conn_new_rcvbuf(s, c, 0); }

void conn_new_rcvbuf(struct iostack *s, struct conn *c, int rcvbuf)
{
    c->l = iostack_listen(s);
    c->peer = raw_connect_rcvbuf(tcp_listener_port(c->l), rcvbuf);
    struct tcp_accept acc = tcp_accept(c->l);
    struct tcp_stream_result res = { .err = 1 };
    enum executor_status st = executor_block_on(s->ex, tcp_accept_future(&acc), &res);
    cr_assert_eq(st, EXECUTOR_OK, "block_on(accept) with a client waiting ended with %s", executor_status_str(st));
    cr_assert_eq(res.err, 0, "accept with a client waiting failed: %s", strerror(-res.err));
    cr_assert_not_null(res.stream, "accept gave no stream");
    c->st = res.stream;
}

void conn_free(struct conn *c)
{
    if (c->st)
        tcp_stream_close(c->st);
    if (c->peer >= 0)
        close(c->peer);
    tcp_listener_close(c->l);
}

void *delayed_peer(void *arg)
{
    struct delayed *d = arg;
    lab_sleep_ms(d->ms);
    if (d->msg && send(d->fd, d->msg, strlen(d->msg), MSG_NOSIGNAL) != (ssize_t)strlen(d->msg))
        return (void *)1;
    d->sent_ns = monotonic_ns(); /* read after pthread_join */
    if (d->end == PEER_SHUTDOWN)
        shutdown(d->fd, SHUT_WR);
    else if (d->end == PEER_RESET)
        raw_close_reset(d->fd);
    return NULL;
}

unsigned long raise_nofile(void)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
    return (unsigned long)rl.rlim_cur;
}

/* ---- the echo server and its connections --------------------------------------- */

struct echo_conn {
    struct tcp_stream *st;
    unsigned char *buf;
    size_t len;            /* bytes read and not yet written back */
    bool writing;
    struct tcp_write wr;
};

enum { ECHO_BUF = 16384 };

static enum poll echo_conn_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct echo_conn *c = self;
    for (;;) {
        if (c->writing) {
            ssize_t n;
            if (tcp_write_poll(&c->wr, cx, &n) == POLL_PENDING)
                return POLL_PENDING;
            c->writing = false;
            if (n < 0)
                return POLL_READY;
        }
        ssize_t n;
        if (tcp_stream_poll_read(c->st, cx, c->buf, ECHO_BUF, &n) == POLL_PENDING)
            return POLL_PENDING;
        if (n <= 0)
            return POLL_READY; /* end of stream, or an error: this connection is done */
        c->wr = tcp_write_all(c->st, c->buf, (size_t)n);
        c->writing = true;
    }
}

static void echo_conn_drop(void *self)
{
    struct echo_conn *c = self;
    if (c->writing)
        tcp_write_drop(&c->wr);
    tcp_stream_close(c->st); /* deregisters: the reader's waker goes with it */
    free(c->buf);
}

static const struct future_vtable echo_conn_vt = FUTURE_VTABLE_INIT(struct echo_conn, 0, echo_conn_poll, echo_conn_drop);

static enum poll echo_server_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct echo_server *es = self;
    while (es->tally->accepted < es->conns) {
        if (!es->accepting) {
            es->acc = tcp_accept(es->l);
            es->accepting = true;
        }
        struct tcp_stream_result res;
        if (tcp_accept_poll(&es->acc, cx, &res) == POLL_PENDING)
            return POLL_PENDING;
        tcp_accept_drop(&es->acc);
        es->accepting = false;
        if (res.err) {
            es->tally->err = res.err;
            return POLL_READY;
        }
        es->tally->accepted++;
        struct echo_conn c = { .st = res.stream, .buf = malloc(ECHO_BUF) };
        cr_assert_not_null(c.buf, "out of memory in the test itself");
        struct join_handle *h = executor_spawn(es->s->ex, future_of(&echo_conn_vt, &c), NULL);
        cr_assert_not_null(h, "executor_spawn failed");
        join_handle_drop(h);
    }
    return POLL_READY;
}

static void echo_server_drop(void *self)
{
    struct echo_server *es = self;
    if (es->accepting)
        tcp_accept_drop(&es->acc);
    es->accepting = false;
}

static const struct future_vtable echo_server_vt =
    FUTURE_VTABLE_INIT(struct echo_server, 0, echo_server_poll, echo_server_drop);

struct future echo_server_future(struct echo_server *es) { return future_of(&echo_server_vt, es); }

/* ---- the echo client ------------------------------------------------------------- */

enum { EC_CONNECT, EC_WRITE, EC_READ, EC_DONE };

void echo_client_init(struct echo_client *c, struct reactor *r, uint16_t port, unsigned rounds, unsigned size,
                      uint64_t seed, unsigned *done, int *failed)
{
    memset(c, 0, sizeof *c);
    c->r = r;
    c->port = port;
    c->rounds = rounds;
    c->size = size;
    c->seed = seed;
    c->done = done;
    c->failed = failed;
    c->state = EC_CONNECT;
    c->conn = tcp_connect(r, "127.0.0.1", port);
    c->out = malloc(size);
    c->in = malloc(size);
    cr_assert(c->out && c->in, "out of memory in the test itself");
}

#define EC_FAIL(c)                        \
    do {                                  \
        if (*(c)->failed == 0)            \
            *(c)->failed = __LINE__;      \
        (c)->state = EC_DONE;             \
        return POLL_READY;                \
    } while (0)

static enum poll echo_client_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct echo_client *c = self;
    for (;;) {
        switch (c->state) {
        case EC_CONNECT: {
            struct tcp_stream_result res;
            if (tcp_connect_poll(&c->conn, cx, &res) == POLL_PENDING)
                return POLL_PENDING;
            tcp_connect_drop(&c->conn);
            if (res.err)
                EC_FAIL(c);
            c->st = res.stream;
            c->state = EC_WRITE;
            c->round = 0;
            for (size_t i = 0; i < c->size; i++)
                c->out[i] = pattern_byte(c->seed, i);
            c->wr = tcp_write_all(c->st, c->out, c->size);
            break;
        }
        case EC_WRITE: {
            ssize_t n;
            if (tcp_write_poll(&c->wr, cx, &n) == POLL_PENDING)
                return POLL_PENDING;
            if (n != (ssize_t)c->size)
                EC_FAIL(c);
            c->got = 0;
            c->state = EC_READ;
            break;
        }
        case EC_READ: {
            ssize_t n;
            if (tcp_stream_poll_read(c->st, cx, c->in + c->got, c->size - c->got, &n) == POLL_PENDING)
                return POLL_PENDING;
            if (n <= 0)
                EC_FAIL(c);
            c->got += (size_t)n;
            if (c->got < c->size)
                break;
            if (memcmp(c->in, c->out, c->size) != 0)
                EC_FAIL(c);
            if (++c->round == c->rounds) {
                (*c->done)++;
                c->state = EC_DONE;
                return POLL_READY;
            }
            for (size_t i = 0; i < c->size; i++)
                c->out[i] = pattern_byte(c->seed + c->round, i);
            c->wr = tcp_write_all(c->st, c->out, c->size);
            c->state = EC_WRITE;
            break;
        }
        default:
            return POLL_READY;
        }
    }
}

static void echo_client_drop(void *self)
{
    struct echo_client *c = self;
    if (c->state == EC_CONNECT)
        tcp_connect_drop(&c->conn);
    if (c->st) {
        if (c->state == EC_WRITE)
            tcp_write_drop(&c->wr);
        tcp_stream_close(c->st);
        c->st = NULL;
    }
    free(c->out);
    free(c->in);
}

static const struct future_vtable echo_client_vt =
    FUTURE_VTABLE_INIT(struct echo_client, 0, echo_client_poll, echo_client_drop);

struct future echo_client_future(struct echo_client *c) { return future_of(&echo_client_vt, c); }
