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

#include "accept_loop.h"


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
