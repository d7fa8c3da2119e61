/* echo_server.c - an echo server on the lab's runtime.
 *
 *   echo_server [port [connections]]
 *
 * port 0 (the default): any free port; it prints which. With connections,
 * it serves that many connections to their end and exits (so that a traced
 * run writes its trace: make trace STAGE=6 starts it so, with the load
 * client); without, it serves forever.
 *
 * ECHO_SHORT_READ=0 in the environment turns the short-read refinement off
 * (tcp.h, contract 5): every read is then followed by one that says EAGAIN.
 *
 * One task accepts, forever; one task per connection reads and writes back
 * what it read until end of stream. Every task is a hand-written state
 * machine over tcp.h's poll functions: the C shape of
 *
 *   loop { let n = stream.read(&mut buf).await?; if n == 0 { break }
 *          stream.write_all(&buf[..n]).await? }
 */
#include <stdbool.h>
#include <stdlib.h>

#include "runtime.h"

enum { BUF = 16384 };

struct conn {
    struct tcp_stream *st;
    bool writing;
    struct tcp_write wr;
    unsigned char *buf;
};

static enum poll conn_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct conn *c = self;
    for (;;) {
        ssize_t n;
        if (c->writing) {
            if (tcp_write_poll(&c->wr, cx, &n) == POLL_PENDING)
                return POLL_PENDING;
            c->writing = false;
            if (n < 0)
                return POLL_READY;
        }
        if (tcp_stream_poll_read(c->st, cx, c->buf, BUF, &n) == POLL_PENDING)
            return POLL_PENDING;
        if (n <= 0)
            return POLL_READY; /* end of stream or an error: done */
        c->wr = tcp_write_all(c->st, c->buf, (size_t)n);
        c->writing = true;
    }
}

static void conn_drop(void *self)
{
    struct conn *c = self;
    if (c->writing)
        tcp_write_drop(&c->wr);
    tcp_stream_close(c->st);
    free(c->buf);
}

static const struct future_vtable conn_vt = FUTURE_VTABLE_INIT(struct conn, 0, conn_poll, conn_drop);

static bool short_reads = true;

static void on_stream(struct runtime *rt, struct tcp_stream *st)
{
    tcp_stream_set_short_read(st, short_reads);
    struct conn c = { .st = st, .buf = malloc(BUF) };
    if (!c.buf) {
        tcp_stream_close(st);
        return;
    }
    runtime_spawn(rt, future_of(&conn_vt, &c));
}

int main(int argc, char **argv)
{
    const char *sr = getenv("ECHO_SHORT_READ");
    short_reads = !(sr && sr[0] == '0');
    return runtime_serve_n(argc > 1 ? atoi(argv[1]) : 0, on_stream, argc > 2 ? (unsigned)atoi(argv[2]) : 0);
}
