/* runtime.h - the lab's whole stack in one place, for the examples:
 * reactor <- I/O driver <- time driver (stage 05) <- executor (stage 03). */
#ifndef EXAMPLE_RUNTIME_H
#define EXAMPLE_RUNTIME_H

#include <stdio.h>
#include <stdlib.h>

#include "executor.h"
#include "io_driver.h"
#include "reactor.h"
#include "tcp.h"
#include "time_driver.h"

struct runtime {
    struct reactor *r;
    struct io_driver *io;
    struct time_driver *td;
    struct executor *ex;
};

static inline void runtime_new(struct runtime *rt)
{
    rt->r = reactor_new();
    rt->io = rt->r ? io_driver_new(rt->r) : NULL;
    rt->td = rt->io ? time_driver_new(io_driver_driver(rt->io)) : NULL;
    rt->ex = rt->td ? executor_new(time_driver_driver(rt->td)) : NULL;
    if (!rt->ex) {
        perror("runtime");
        exit(1);
    }
}

static inline void runtime_spawn(struct runtime *rt, struct future f)
{
    struct join_handle *h = executor_spawn(rt->ex, f, NULL);
    if (!h) {
        fprintf(stderr, "spawn: out of memory\n");
        exit(1);
    }
    join_handle_drop(h); /* detached */
}

/* Binds 127.0.0.1:port (0: any) and prints "listening on 127.0.0.1:PORT". */
static inline struct tcp_listener *runtime_listen(struct runtime *rt, int port)
{
    struct tcp_listener *l;
    int e = tcp_listener_bind(rt->r, rt->td, "127.0.0.1", (uint16_t)port, &l);
    if (e < 0) {
        fprintf(stderr, "bind 127.0.0.1:%d: error %d\n", port, -e);
        exit(1);
    }
    printf("listening on 127.0.0.1:%u\n", (unsigned)tcp_listener_port(l));
    fflush(stdout);
    return l;
}

/* The accept loop of a server: forever, each new stream goes to on_stream,
 * which spawns the connection's task. A connection that failed before it
 * was taken is skipped; running out of descriptors backs off (tcp.h). */
typedef void (*runtime_on_stream)(struct runtime *rt, struct tcp_stream *st);

struct acceptor {
    struct runtime *rt;
    struct tcp_accept acc;
    runtime_on_stream on_stream;
    unsigned left; /* connections still to accept; 0: forever */
};

static enum poll acceptor_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct acceptor *a = self;
    for (;;) {
        struct tcp_stream_result res;
        if (tcp_accept_poll(&a->acc, cx, &res) == POLL_PENDING)
            return POLL_PENDING;
        if (res.err == 0) {
            a->on_stream(a->rt, res.stream);
            if (a->left && --a->left == 0)
                return POLL_READY; /* the last one: stop accepting */
        }
    }
}

static void acceptor_drop(void *self) { tcp_accept_drop(&((struct acceptor *)self)->acc); }

static const struct future_vtable acceptor_vt = FUTURE_VTABLE_INIT(struct acceptor, 0, acceptor_poll, acceptor_drop);

/* Binds 127.0.0.1:port, spawns the accept loop, runs: forever when
 * connections is 0, else until that many connections have been accepted
 * and served to their end (make trace runs the echo server so). */
static inline int runtime_serve_n(int port, runtime_on_stream on_stream, unsigned connections)
{
    struct runtime rt;
    runtime_new(&rt);
    struct tcp_listener *l = runtime_listen(&rt, port);
    struct acceptor a = { .rt = &rt, .acc = tcp_accept(l), .on_stream = on_stream, .left = connections };
    runtime_spawn(&rt, future_of(&acceptor_vt, &a));
    enum executor_status st = executor_run(rt.ex); /* with connections 0, never returns */
    tcp_listener_close(l);
    executor_free(rt.ex);
    time_driver_free(rt.td);
    io_driver_free(rt.io);
    reactor_free(rt.r);
    return st == EXECUTOR_OK ? 0 : 1;
}

/* Binds 127.0.0.1:port, spawns the accept loop, runs forever. */
static inline int runtime_serve(int port, runtime_on_stream on_stream)
{
    return runtime_serve_n(port, on_stream, 0);
}

#endif
