/* uring_tcp.c - stage 08: listener, accept, read and write on the ring.
 *
 * Each future is a thin shell over one operation of the ring: start it at
 * the first poll, poll it, and drop it when the future is dropped. Whether
 * the operation's buffer may be freed then is the ring's business
 * (ring.h contract 1), not the future's: the future only ever lets go.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "uring_tcp.h"
#include "lab_todo.h"

struct uring_listener {
    struct ring *r;
    int fd;
    uint16_t port;
    ring_op_id accept_op;   /* the multishot accept; 0 until the first poll */
};

struct uring_stream {
    struct ring *r;
    int fd;
    ring_op_id recv_op;     /* the multishot receive; 0 until the first uring_recv poll */
    bool recv_ended;        /* its end came: recv_end is the answer from now on */
    int32_t recv_end;       /* 0 (end of stream) or -errno */
};

int uring_listener_bind(struct ring *r, const char *ip, uint16_t port, struct uring_listener **out)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
    if (inet_pton(AF_INET, ip, &a.sin_addr) != 1)
        return -EINVAL;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    socklen_t alen = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 4096) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &alen) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    struct uring_listener *l = calloc(1, sizeof *l);
    if (!l) {
        close(fd);
        return -ENOMEM;
    }
    l->r = r;
    l->fd = fd;
    l->port = ntohs(a.sin_port);
    *out = l;
    return 0;
}

uint16_t uring_listener_port(const struct uring_listener *l) { return l->port; }

void uring_listener_close(struct uring_listener *l)
{
    if (!l)
        return;
    (void)l;
    LAB_TODO("uring_tcp.h contract 3: the multishot accept is the kernel's until its last CQE; whose job are the connections it still completes? (docs/08-uring.md#closing-a-listener)");
    close(l->fd); /* the operation holds its own reference to the file */
    free(l);
}

struct uring_accept uring_accept(struct uring_listener *l) { return (struct uring_accept){ .l = l }; }

enum poll uring_accept_poll(struct uring_accept *a, struct context *cx, struct uring_stream_result *out)
{
    (void)a;
    (void)cx;
    (void)out;
    LAB_TODO("uring_tcp.h contract 3, ring.h contract 2: one multishot accept for the listener's life; what ends it, and when, and only when, may a new one start? (docs/08-uring.md#when-a-multishot-accept-ends)");
}

void uring_accept_drop(struct uring_accept *a)
{
    (void)a; /* the multishot accept is the listener's: it keeps accepting */
}

static enum poll accept_poll_erased(void *self, struct context *cx, void *out)
{
    return uring_accept_poll(self, cx, out);
}
static void accept_drop_erased(void *self) { uring_accept_drop(self); }
static const struct future_vtable accept_vt = FUTURE_VTABLE_INIT(struct uring_accept, sizeof(struct uring_stream_result),
                                                                 accept_poll_erased, accept_drop_erased);
struct future uring_accept_future(struct uring_accept *a) { return future_of(&accept_vt, a); }

struct uring_stream *uring_stream_new(struct ring *r, int fd)
{
    struct uring_stream *s = malloc(sizeof *s);
    if (!s) {
        close(fd);
        return NULL;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* echo: no Nagle delay; fails harmlessly on AF_UNIX */
    s->r = r;
    s->fd = fd;
    s->recv_op = 0;
    s->recv_ended = false;
    s->recv_end = 0;
    return s;
}

void uring_stream_close(struct uring_stream *s)
{
    if (!s)
        return;
    if (s->recv_op)
        ring_op_drop(s->r, s->recv_op); /* an orphan until its last CQE: its buffers are the kernel's till then */
    close(s->fd);
    free(s);
}

int uring_stream_fd(const struct uring_stream *s) { return s->fd; }

struct uring_read uring_read(struct uring_stream *s, void *dst, size_t len)
{
    return (struct uring_read){ .s = s, .dst = dst, .len = len };
}

enum poll uring_read_poll(struct uring_read *rd, struct context *cx, ssize_t *out)
{
    (void)rd;
    (void)cx;
    (void)out;
    LAB_TODO("uring_tcp.h contracts 1, 2 and 4: the kernel receives into whose buffer, and when do the bytes reach the caller's? (docs/08-uring.md#async-tcp-on-the-ring)");
}

void uring_read_drop(struct uring_read *rd)
{
    (void)rd;
    LAB_TODO("uring_tcp.h contract 2: the future goes; what of its operation, which the kernel may still be using? (docs/08-uring.md#dropping-a-future-the-orphan)");
}

static enum poll read_poll_erased(void *self, struct context *cx, void *out) { return uring_read_poll(self, cx, out); }
static void read_drop_erased(void *self) { uring_read_drop(self); }
static const struct future_vtable read_vt =
    FUTURE_VTABLE_INIT(struct uring_read, sizeof(ssize_t), read_poll_erased, read_drop_erased);
struct future uring_read_future(struct uring_read *rd) { return future_of(&read_vt, rd); }

struct uring_write uring_write_all(struct uring_stream *s, const void *src, size_t len)
{
    return (struct uring_write){ .s = s, .src = src, .len = len };
}

enum poll uring_write_poll(struct uring_write *wr, struct context *cx, ssize_t *out)
{
    (void)wr;
    (void)cx;
    (void)out;
    LAB_TODO("uring_tcp.h contracts 1, 2 and 4: the kernel sends from whose buffer, and what after a partial send? (docs/08-uring.md#async-tcp-on-the-ring)");
}

void uring_write_drop(struct uring_write *wr)
{
    (void)wr;
    LAB_TODO("uring_tcp.h contract 2: the future goes; what of its operation, which the kernel may still be using? (docs/08-uring.md#dropping-a-future-the-orphan)");
}

static enum poll write_poll_erased(void *self, struct context *cx, void *out) { return uring_write_poll(self, cx, out); }
static void write_drop_erased(void *self) { uring_write_drop(self); }
static const struct future_vtable write_vt =
    FUTURE_VTABLE_INIT(struct uring_write, sizeof(ssize_t), write_poll_erased, write_drop_erased);
struct future uring_write_future(struct uring_write *wr) { return future_of(&write_vt, wr); }

struct uring_recv uring_recv(struct uring_stream *s, void *dst, size_t len)
{
    return (struct uring_recv){ .s = s, .dst = dst, .len = len };
}

/* quote: uring-recv-poll */
enum poll uring_recv_poll(struct uring_recv *rv, struct context *cx, ssize_t *out)
{
    (void)rv;
    (void)cx;
    (void)out;
    LAB_TODO("uring_tcp.h contract 5, ring.h contracts 2 and 6: one multishot receive for the stream; when does it end, and what does every poll after the end say? (docs/08-uring.md#provided-buffers)");
}
/* end quote: uring-recv-poll */

void uring_recv_drop(struct uring_recv *rv)
{
    (void)rv; /* the multishot receive is the stream's: it keeps receiving */
}

static enum poll recv_poll_erased(void *self, struct context *cx, void *out) { return uring_recv_poll(self, cx, out); }
static void recv_drop_erased(void *self) { uring_recv_drop(self); }
static const struct future_vtable recv_vt =
    FUTURE_VTABLE_INIT(struct uring_recv, sizeof(ssize_t), recv_poll_erased, recv_drop_erased);
struct future uring_recv_future(struct uring_recv *rv) { return future_of(&recv_vt, rv); }

ring_op_id uring_listener_test_op(struct uring_listener *l)
{
    return l->accept_op;
}

ring_op_id uring_stream_test_recv_op(struct uring_stream *s)
{
    return s->recv_op;
}
