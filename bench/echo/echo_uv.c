/* echo_uv.c - the libuv side of the echo benchmark (libuv1-dev).
 *
 *   echo_uv [port]          prints "listening on 127.0.0.1:PORT"
 *
 * A libuv echo server written for speed, the way a libuv program that cares
 * would: uv_listen, uv_accept, uv_read_start once (reading is never stopped,
 * so interest in the epoll set never changes), one read buffer per
 * connection, and each read answered with uv_try_write, which writes at once
 * with no request and no allocation. Only if the socket is full does the
 * rest go through uv_write, from a copy, with reading paused until it is
 * done (the rare path). TCP_NODELAY like the other servers.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "../uv_listen.h"

enum { BUF = 16384 };

struct conn {
    uv_tcp_t tcp;        /* first: a uv handle pointer is a conn pointer */
    char buf[BUF];
};

struct pending_write {
    uv_write_t req;
    struct conn *c;
    char data[];
};

static uv_loop_t *loop;

static void on_close(uv_handle_t *h) { free(h); }

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    struct conn *c = (struct conn *)h;
    *buf = uv_buf_init(c->buf, BUF);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void on_write(uv_write_t *req, int status)
{
    struct pending_write *w = (struct pending_write *)req;
    struct conn *c = w->c;
    free(w);
    if (status < 0) {
        uv_close((uv_handle_t *)&c->tcp, on_close);
        return;
    }
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct conn *c = (struct conn *)s;
    if (n < 0) {
        uv_close((uv_handle_t *)s, on_close);
        return;
    }
    if (n == 0)
        return;
    uv_buf_t out = uv_buf_init(buf->base, (unsigned)n);
    int k = uv_try_write(s, &out, 1);
    if (k == n)
        return; /* the common case: all written, nothing allocated */
    if (k < 0 && k != UV_EAGAIN) {
        uv_close((uv_handle_t *)s, on_close);
        return;
    }
    size_t done = k > 0 ? (size_t)k : 0, rest = (size_t)n - done;
    struct pending_write *w = malloc(sizeof *w + rest);
    if (!w) {
        uv_close((uv_handle_t *)s, on_close);
        return;
    }
    w->c = c;
    memcpy(w->data, buf->base + done, rest);
    uv_read_stop(s); /* the one buffer stays ours until the rest is out */
    uv_buf_t rb = uv_buf_init(w->data, (unsigned)rest);
    if (uv_write(&w->req, s, &rb, 1, on_write) < 0) {
        free(w);
        uv_close((uv_handle_t *)s, on_close);
    }
}

static void on_connection(uv_stream_t *server, int status)
{
    if (status < 0)
        return;
    struct conn *c = malloc(sizeof *c);
    if (!c)
        return;
    uv_tcp_init(loop, &c->tcp);
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        uv_close((uv_handle_t *)&c->tcp, on_close);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

int main(int argc, char **argv)
{
    loop = uv_default_loop();
    return uv_listen_loopback_and_run(loop, argc, argv, on_connection);
}
