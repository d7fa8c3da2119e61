/* tcp.c - stage 06: listener, connect, read, write, shutdown over the reactor.
 *
 * Every operation waits for readiness and tries one non-blocking syscall;
 * when it may clear readiness, and what it does after, is the question of
 * docs/06-reactor.md#drain-to-eagain. The differences between the operations
 * are what each syscall's errors mean. A stream and
 * a listener are one descriptor and one registration; the futures borrow
 * them.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "coop.h"
#include "tcp.h"
#include "lab_todo.h"

#define BACKOFF_MIN_NS UINT64_C(10000000)    /* 10 ms */
#define BACKOFF_MAX_NS UINT64_C(1000000000)  /* 1 s */

struct tcp_listener {
    struct reactor *r;
    struct time_driver *td;  /* borrowed; NULL: no back-off */
    int fd;
    struct io_reg *reg;
    uint16_t port;
    uint64_t backoff_ns;     /* the next back-off's length */
    uint64_t accept_calls;   /* owner's thread only (the test hook reads it there) */
};

struct tcp_stream {
    struct reactor *r;
    int fd;
    struct io_reg *reg;
    bool short_read;
};


/* ---- listener --------------------------------------------------------------- */

int tcp_listener_bind(struct reactor *r, struct time_driver *td, const char *ip, uint16_t port,
                      struct tcp_listener **out)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
    if (inet_pton(AF_INET, ip, &a.sin_addr) != 1)
        return -EINVAL;
    struct tcp_listener *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    socklen_t len = sizeof a;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, SOMAXCONN) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        free(l);
        return -e;
    }
    int e = reactor_register(r, fd, &l->reg);
    if (e < 0) {
        close(fd);
        free(l);
        return e;
    }
    l->r = r;
    l->td = td;
    l->fd = fd;
    l->port = ntohs(a.sin_port);
    l->backoff_ns = BACKOFF_MIN_NS;
    *out = l;
    return 0;
}

uint16_t tcp_listener_port(const struct tcp_listener *l) { return l->port; }

void tcp_listener_close(struct tcp_listener *l)
{
    reactor_deregister(l->r, l->reg); /* before close: see reactor.h, contract 5 */
    close(l->fd);
    free(l);
}

struct tcp_accept tcp_accept(struct tcp_listener *l)
{
    return (struct tcp_accept){ .l = l, .backing_off = false };
}

enum poll tcp_accept_poll(struct tcp_accept *a, struct context *cx, struct tcp_stream_result *out)
{
    (void)a;
    (void)cx;
    (void)out;
    LAB_TODO("tcp.h contracts 1 and 4: when may an accept clear readiness, and what does it do when the process is out of descriptors, so as neither to spin nor to wait for ever? (docs/06-reactor.md#accept-and-emfile)");
}

void tcp_accept_drop(struct tcp_accept *a)
{
    (void)a;
    LAB_TODO("tcp.h contract 2: a dropped accept may be backing off or waiting for a connection; what does each leave in the wheel or the reactor? (docs/06-reactor.md#dropping-a-future-deregisters-at-once)");
}

static enum poll accept_vpoll(void *self, struct context *cx, void *out) { return tcp_accept_poll(self, cx, out); }
static void accept_vdrop(void *self) { tcp_accept_drop(self); }
static const struct future_vtable accept_vt =
    FUTURE_VTABLE_INIT(struct tcp_accept, sizeof(struct tcp_stream_result), accept_vpoll, accept_vdrop);
struct future tcp_accept_future(struct tcp_accept *a) { return future_of(&accept_vt, a); }

/* ---- connect ------------------------------------------------------------------ */

struct tcp_connect tcp_connect(struct reactor *r, const char *ip, uint16_t port)
{
    struct tcp_connect c = { .r = r, .fd = -1, .reg = NULL, .err = 0 };
    c.addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(port) };
    if (inet_pton(AF_INET, ip, &c.addr.sin_addr) != 1)
        c.err = -EINVAL;
    return c;
}

enum poll tcp_connect_poll(struct tcp_connect *c, struct context *cx, struct tcp_stream_result *out)
{
    (void)c;
    (void)cx;
    (void)out;
    LAB_TODO("tcp.h: a non-blocking connect does not finish in the call; when is it done, and where is its result? (docs/06-reactor.md#connect)");
}

void tcp_connect_drop(struct tcp_connect *c)
{
    (void)c;
    LAB_TODO("tcp.h contract 2, reactor.h contract 5: a half-made connection is dropped; what does the reactor still hold of it, and in which order does it go? (docs/06-reactor.md#dropping-a-future-deregisters-at-once)");
}

static enum poll connect_vpoll(void *self, struct context *cx, void *out) { return tcp_connect_poll(self, cx, out); }
static void connect_vdrop(void *self) { tcp_connect_drop(self); }
static const struct future_vtable connect_vt =
    FUTURE_VTABLE_INIT(struct tcp_connect, sizeof(struct tcp_stream_result), connect_vpoll, connect_vdrop);
struct future tcp_connect_future(struct tcp_connect *c) { return future_of(&connect_vt, c); }

/* ---- stream ------------------------------------------------------------------- */

enum poll tcp_stream_poll_read(struct tcp_stream *s, struct context *cx, void *buf, size_t len, ssize_t *n)
{
    (void)s;
    (void)cx;
    (void)buf;
    (void)len;
    (void)n;
    LAB_TODO("tcp.h contracts 1, 3 and 5, reactor.h contract 2: when is readable readiness cleared, and what do a read of 0 and a short read mean? (docs/06-reactor.md#drain-to-eagain)");
}

enum poll tcp_stream_poll_write(struct tcp_stream *s, struct context *cx, const void *buf, size_t len,
                                ssize_t *n)
{
    (void)s;
    (void)cx;
    (void)buf;
    (void)len;
    (void)n;
    LAB_TODO("tcp.h contracts 1 and 3: when is writable readiness cleared, where does a partial write resume, and why must a write to a reset peer not kill the process? (docs/06-reactor.md#sigpipe)");
}

int tcp_stream_shutdown(struct tcp_stream *s)
{
    return shutdown(s->fd, SHUT_WR) < 0 ? -errno : 0;
}

void tcp_stream_close(struct tcp_stream *s)
{
    (void)s;
    LAB_TODO("reactor.h contract 5: epoll watches the open file, not the number; in which order must deregistering, closing and freeing come? (docs/06-reactor.md#deregister-before-close)");
}

int tcp_stream_fd(const struct tcp_stream *s) { return s->fd; }
void tcp_stream_set_short_read(struct tcp_stream *s, bool on) { s->short_read = on; }

struct tcp_read tcp_read(struct tcp_stream *s, void *buf, size_t len)
{
    return (struct tcp_read){ .s = s, .buf = buf, .len = len };
}

enum poll tcp_read_poll(struct tcp_read *rd, struct context *cx, ssize_t *out)
{
    return tcp_stream_poll_read(rd->s, cx, rd->buf, rd->len, out);
}

void tcp_read_drop(struct tcp_read *rd)
{
    (void)rd;
    LAB_TODO("the reader's waker, out of the reactor at once (docs/06-reactor.md#dropping-a-future-deregisters-at-once)");
}

static enum poll read_vpoll(void *self, struct context *cx, void *out) { return tcp_read_poll(self, cx, out); }
static void read_vdrop(void *self) { tcp_read_drop(self); }
static const struct future_vtable read_vt = FUTURE_VTABLE_INIT(struct tcp_read, sizeof(ssize_t), read_vpoll, read_vdrop);
struct future tcp_read_future(struct tcp_read *rd) { return future_of(&read_vt, rd); }

struct tcp_write tcp_write_all(struct tcp_stream *s, const void *buf, size_t len)
{
    return (struct tcp_write){ .s = s, .buf = buf, .len = len, .done = 0 };
}

enum poll tcp_write_poll(struct tcp_write *wr, struct context *cx, ssize_t *out)
{
    while (wr->done < wr->len) {
        ssize_t n;
        if (tcp_stream_poll_write(wr->s, cx, (const char *)wr->buf + wr->done, wr->len - wr->done, &n) ==
            POLL_PENDING)
            return POLL_PENDING;
        if (n < 0) {
            *out = n;
            return POLL_READY;
        }
        wr->done += (size_t)n;
    }
    *out = (ssize_t)wr->len;
    return POLL_READY;
}

void tcp_write_drop(struct tcp_write *wr)
{
    (void)wr;
    LAB_TODO("the writer's waker, out of the reactor at once (docs/06-reactor.md#dropping-a-future-deregisters-at-once)");
}

static enum poll write_vpoll(void *self, struct context *cx, void *out) { return tcp_write_poll(self, cx, out); }
static void write_vdrop(void *self) { tcp_write_drop(self); }
static const struct future_vtable write_vt =
    FUTURE_VTABLE_INIT(struct tcp_write, sizeof(ssize_t), write_vpoll, write_vdrop);
struct future tcp_write_future(struct tcp_write *wr) { return future_of(&write_vt, wr); }

struct tcp_shutdown tcp_shutdown(struct tcp_stream *s) { return (struct tcp_shutdown){ .s = s }; }

static enum poll shutdown_vpoll(void *self, struct context *cx, void *out)
{
    (void)cx;
    struct tcp_shutdown *sh = self;
    int r = tcp_stream_shutdown(sh->s);
    if (out)
        *(int *)out = r;
    return POLL_READY;
}
static const struct future_vtable shutdown_vt = FUTURE_VTABLE_INIT(struct tcp_shutdown, sizeof(int), shutdown_vpoll, NULL);
struct future tcp_shutdown_future(struct tcp_shutdown *sh) { return future_of(&shutdown_vt, sh); }

struct io_reg *tcp_stream_test_reg(struct tcp_stream *s) { return s->reg; }
struct io_reg *tcp_listener_test_reg(struct tcp_listener *l) { return l->reg; }
uint64_t tcp_listener_test_accept_calls(struct tcp_listener *l) { return l->accept_calls; }
