/* http_hello.c - a very small HTTP/1.1 server on the lab's runtime.
 *
 *   http_hello [port]       then: curl http://127.0.0.1:PORT/
 *
 * Every request (anything up to a blank line) gets "hello, world". Keep-alive
 * is the default of HTTP/1.1; pipelined requests are answered in order; a
 * request line with "Connection: close" ends the connection after its
 * answer. No body is read: GET only. Enough for `ab -k` or `wrk`.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

enum { BUF = 8192 };

static const char RESPONSE[] = "HTTP/1.1 200 OK\r\n"
                               "Content-Type: text/plain\r\n"
                               "Content-Length: 13\r\n"
                               "\r\n"
                               "hello, world\n";

struct http_conn {
    struct tcp_stream *st;
    char *buf;
    size_t have;          /* bytes of unanswered requests in buf */
    unsigned pending;     /* complete requests to answer */
    bool close_after;
    bool writing;
    struct tcp_write wr;
};

/* Counts complete requests at the front of buf, consuming them. */
static void parse(struct http_conn *c)
{
    for (;;) {
        char *end = memmem(c->buf, c->have, "\r\n\r\n", 4);
        if (!end)
            return;
        size_t len = (size_t)(end - c->buf) + 4;
        if (memmem(c->buf, len, "Connection: close", 17))
            c->close_after = true;
        memmove(c->buf, c->buf + len, c->have - len);
        c->have -= len;
        c->pending++;
    }
}

static enum poll http_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct http_conn *c = self;
    for (;;) {
        ssize_t n;
        if (c->writing) {
            if (tcp_write_poll(&c->wr, cx, &n) == POLL_PENDING)
                return POLL_PENDING;
            c->writing = false;
            if (n < 0 || (c->pending == 0 && c->close_after))
                return POLL_READY;
        }
        if (c->pending > 0) {
            c->pending--;
            c->wr = tcp_write_all(c->st, RESPONSE, sizeof RESPONSE - 1);
            c->writing = true;
            continue;
        }
        if (c->have == BUF)
            return POLL_READY; /* a request larger than the buffer: refuse it */
        if (tcp_stream_poll_read(c->st, cx, c->buf + c->have, BUF - c->have, &n) == POLL_PENDING)
            return POLL_PENDING;
        if (n <= 0)
            return POLL_READY;
        c->have += (size_t)n;
        parse(c);
    }
}

static void http_drop(void *self)
{
    struct http_conn *c = self;
    if (c->writing)
        tcp_write_drop(&c->wr);
    tcp_stream_close(c->st);
    free(c->buf);
}

static const struct future_vtable http_vt = FUTURE_VTABLE_INIT(struct http_conn, 0, http_poll, http_drop);

static void on_stream(struct runtime *rt, struct tcp_stream *st)
{
    struct http_conn c = { .st = st, .buf = malloc(BUF) };
    if (!c.buf) {
        tcp_stream_close(st);
        return;
    }
    runtime_spawn(rt, future_of(&http_vt, &c));
}

int main(int argc, char **argv)
{
    return runtime_serve(argc > 1 ? atoi(argv[1]) : 0, on_stream);
}
