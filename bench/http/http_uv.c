/* http_uv.c - the libuv side of the HTTP benchmark (libuv1-dev,
 * libhttp-parser-dev): examples/06-reactor/http_hello's answers, on libuv.
 *
 *   http_uv [port]          prints "listening on 127.0.0.1:PORT"
 *
 * Written the way a libuv program that cares would, like echo/echo_uv.c:
 * reading never stops, one read buffer per connection, the same
 * http_parser, the same precomputed answers, and the answers to the
 * requests of one read written with one uv_try_write (no request, no
 * allocation); only a socket that is full goes through uv_write, from a
 * copy, with reading paused until it is done. Keep-alive follows the same
 * rules as http_hello (HTTP/1.0 closes unless asked, 1.1 keeps unless told,
 * the Connection header is echoed). Bad input gets 400 and a close. No
 * timeouts and no body limit: it is a benchmark partner, not a server to
 * expose (which favours it slightly: http_hello also keeps a deadline).
 */
#define _GNU_SOURCE
#include <http_parser.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "../uv_listen.h"

enum { IN_BUF = 16384, OUT_BUF = 16384, RESPONSE_MAX = 256 };

#define OK_HEAD "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n"
#define OK_BODY "hello, world\n"
#define KEEP "Connection: keep-alive\r\n"
#define CLOSE "Connection: close\r\n"
#define BAD "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n" CLOSE "\r\nBad Request\n"

struct text {
    const char *s;
    size_t n;
};
#define TEXT(lit) { lit, sizeof lit - 1 }
static const struct text OK[3][2] = {
    { TEXT(OK_HEAD "\r\n" OK_BODY), TEXT(OK_HEAD "\r\n") },
    { TEXT(OK_HEAD KEEP "\r\n" OK_BODY), TEXT(OK_HEAD KEEP "\r\n") },
    { TEXT(OK_HEAD CLOSE "\r\n" OK_BODY), TEXT(OK_HEAD CLOSE "\r\n") },
};

struct conn {
    uv_tcp_t tcp;         /* first: a uv handle pointer is a conn pointer */
    http_parser p;
    bool close_after, closing;
    size_t out_len;
    char in[IN_BUF];
    char out[OUT_BUF];
};

struct pending_write {
    uv_write_t req;
    struct conn *c;
    char data[];
};

static uv_loop_t *loop;

static int on_message_complete(http_parser *p)
{
    struct conn *c = p->data;
    bool keep = http_should_keep_alive(p) && !p->upgrade;
    int h = !keep ? 2 : (p->flags & F_CONNECTION_KEEP_ALIVE) ? 1 : 0;
    const struct text *t = &OK[h][p->method == HTTP_HEAD];
    memcpy(c->out + c->out_len, t->s, t->n);
    c->out_len += t->n;
    if (!keep)
        c->close_after = true;
    if (!keep || c->out_len + RESPONSE_MAX > OUT_BUF)
        http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings settings = { .on_message_complete = on_message_complete };

static void on_close(uv_handle_t *h) { free(h); }

static void close_conn(struct conn *c)
{
    if (!c->closing) {
        c->closing = true;
        uv_close((uv_handle_t *)&c->tcp, on_close);
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    struct conn *c = (struct conn *)h;
    *buf = uv_buf_init(c->in, IN_BUF);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void on_shutdown(uv_shutdown_t *req, int status)
{
    (void)status;
    close_conn((struct conn *)req->handle);
    free(req);
}

/* Everything queued is written (or handed to uv_write): closes if asked. */
static void after_flush(struct conn *c)
{
    if (!c->close_after)
        return;
    uv_shutdown_t *req = malloc(sizeof *req);
    if (!req || uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown) < 0) {
        free(req);
        close_conn(c);
    }
}

static void on_write(uv_write_t *req, int status)
{
    struct pending_write *w = (struct pending_write *)req;
    struct conn *c = w->c;
    free(w);
    if (status < 0) {
        close_conn(c);
        return;
    }
    if (c->close_after)
        after_flush(c);
    else
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

/* Writes out[0, out_len): at once if the socket takes it, else by uv_write.
 * false: the rest went to uv_write (reading is paused until it is done). */
static bool flush(struct conn *c)
{
    uv_buf_t b = uv_buf_init(c->out, (unsigned)c->out_len);
    int k = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    if (k == (int)c->out_len) {
        c->out_len = 0;
        return true;
    }
    if (k < 0 && k != UV_EAGAIN) {
        close_conn(c);
        return false;
    }
    size_t done = k > 0 ? (size_t)k : 0, rest = c->out_len - done;
    struct pending_write *w = malloc(sizeof *w + rest);
    if (!w) {
        close_conn(c);
        return false;
    }
    w->c = c;
    memcpy(w->data, c->out + done, rest);
    c->out_len = 0;
    uv_read_stop((uv_stream_t *)&c->tcp);
    uv_buf_t rb = uv_buf_init(w->data, (unsigned)rest);
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &rb, 1, on_write) < 0) {
        free(w);
        close_conn(c);
    }
    return false;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct conn *c = (struct conn *)s;
    if (n < 0) {
        close_conn(c);
        return;
    }
    size_t pos = 0;
    while (pos < (size_t)n && !c->close_after) {
        pos += http_parser_execute(&c->p, &settings, buf->base + pos, (size_t)n - pos);
        enum http_errno e = HTTP_PARSER_ERRNO(&c->p);
        if (e == HPE_PAUSED) {
            http_parser_pause(&c->p, 0);
        } else if (e != HPE_OK) {
            memcpy(c->out + c->out_len, BAD, sizeof BAD - 1);
            c->out_len += sizeof BAD - 1;
            c->close_after = true;
        }
        if (c->out_len + RESPONSE_MAX > OUT_BUF || c->close_after || pos == (size_t)n) {
            if (c->out_len && !flush(c))
                return; /* the rest of this read is dropped only for a close or an error */
        }
    }
    if (c->close_after) {
        uv_read_stop(s);
        after_flush(c);
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
    c->close_after = c->closing = false;
    c->out_len = 0;
    http_parser_init(&c->p, HTTP_REQUEST);
    c->p.data = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        close_conn(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

int main(int argc, char **argv)
{
    http_parser_set_max_header_size(8192);
    loop = uv_default_loop();
    return uv_listen_loopback_and_run(loop, argc, argv, on_connection);
}
