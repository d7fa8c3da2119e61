/* echo_server.c - stage 08's echo server: the same server as
 * examples/06-reactor/echo_server.c, on the ring (uring_tcp.h) instead of
 * the reactor. For bench/README.md's first io_uring measurement.
 *
 *   echo_server PORT CONNECTIONS     serves that many connections, then exits
 *
 * One task accepts (the listener's one multishot accept); one task per
 * connection reads up to 16 KB and writes it all back until end of stream.
 */
#include <stdio.h>
#include <stdlib.h>

#include "executor.h"
#include "ring.h"
#include "time_driver.h"
#include "uring_tcp.h"

enum { BUF = 16384 };

static struct executor *ex;
static struct ring *ring;
static unsigned left;

struct conn {
    struct uring_stream *st;
    struct uring_read rd;
    struct uring_write wr;
    bool writing, reading;
    unsigned char *buf;
};

static enum poll conn_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct conn *c = self;
    for (;;) {
        ssize_t n;
        if (c->writing) {
            if (uring_write_poll(&c->wr, cx, &n) == POLL_PENDING)
                return POLL_PENDING;
            c->writing = false;
            if (n < 0)
                return POLL_READY;
        }
        if (!c->reading) {
            c->rd = uring_read(c->st, c->buf, BUF);
            c->reading = true;
        }
        if (uring_read_poll(&c->rd, cx, &n) == POLL_PENDING)
            return POLL_PENDING;
        c->reading = false;
        if (n <= 0)
            return POLL_READY;
        c->wr = uring_write_all(c->st, c->buf, (size_t)n);
        c->writing = true;
    }
}

static void conn_drop(void *self)
{
    struct conn *c = self;
    if (c->writing)
        uring_write_drop(&c->wr);
    if (c->reading)
        uring_read_drop(&c->rd);
    uring_stream_close(c->st);
    free(c->buf);
}

static const struct future_vtable conn_vt = FUTURE_VTABLE_INIT(struct conn, 0, conn_poll, conn_drop);

struct acceptor {
    struct uring_listener *l;
    struct uring_accept a;
};

static enum poll acceptor_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct acceptor *ac = self;
    while (left > 0) {
        struct uring_stream_result res;
        if (uring_accept_poll(&ac->a, cx, &res) == POLL_PENDING)
            return POLL_PENDING;
        if (res.err)
            continue;
        left--;
        struct conn c = { .st = res.stream, .buf = malloc(BUF) };
        join_handle_drop(executor_spawn(ex, future_of(&conn_vt, &c), NULL));
    }
    return POLL_READY;
}

static const struct future_vtable acceptor_vt = FUTURE_VTABLE_INIT(struct acceptor, 0, acceptor_poll, NULL);

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: echo_server PORT CONNECTIONS\n");
        return 2;
    }
    left = (unsigned)atoi(argv[2]);
    if (ring_new(256, 1 << 14, &ring) < 0) {
        fprintf(stderr, "io_uring is not available here\n");
        return 1;
    }
    struct time_driver *td = time_driver_new(ring_driver(ring));
    ex = executor_new(time_driver_driver(td));
    struct acceptor ac;
    if (uring_listener_bind(ring, "127.0.0.1", (uint16_t)atoi(argv[1]), &ac.l) < 0) {
        perror("bind");
        return 1;
    }
    ac.a = uring_accept(ac.l);
    printf("port %u\n", (unsigned)uring_listener_port(ac.l));
    fflush(stdout);
    join_handle_drop(executor_spawn(ex, future_of(&acceptor_vt, &ac), NULL));
    executor_run(ex);
    executor_free(ex);
    uring_listener_close(ac.l);
    time_driver_free(td);
    ring_free(ring);
    return 0;
}
