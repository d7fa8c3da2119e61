/* mt_runtime.h - the examples' runtime interface (examples/06-reactor/
 * runtime.h: runtime_spawn, runtime_listen, runtime_serve_n) on stage 07's
 * work-stealing runtime instead of stage 03's executor:
 *
 *   reactor <- I/O driver <- time driver (stage 05) <- WORKERS workers (stage 07)
 *
 * Whichever worker runs out of work first parks in the driver chain, so
 * epoll_wait runs on whichever thread is idle (contract 5 of runtime.h);
 * the others park on their own condition variables. A connection's task may
 * be polled on one worker and woken by readiness dispatched on the other.
 * Included first, it takes the place of examples/06-reactor/runtime.h (the
 * same include guard), so the stage 06 servers build on it unchanged. */
#ifndef EXAMPLE_RUNTIME_H
#define EXAMPLE_RUNTIME_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "io_driver.h"
#include "join.h"
#include "reactor.h"
#include "runtime.h" /* stage 07's */
#include "tcp.h"
#include "time_driver.h"

struct runtime {
    struct reactor *r;
    struct io_driver *io;
    struct time_driver *td;
    struct ws_runtime *ws;
    /* runtime_serve_n with a count: the connections' join handles, to wait
     * for them at the end (a mutex: connections are spawned on any worker) */
    pthread_mutex_t lock;
    struct join_handle **kept;
    size_t nkept, capkept;
    bool keep;
};

/* WORKERS in the environment (default 2). */
static inline void runtime_new(struct runtime *rt)
{
    const char *env = getenv("WORKERS");
    unsigned workers = env && *env ? (unsigned)atoi(env) : 2;
    if (workers < 1 || workers > WS_MAX_WORKERS) {
        fprintf(stderr, "WORKERS=%s: between 1 and %u\n", env, WS_MAX_WORKERS);
        exit(2);
    }
    rt->r = reactor_new();
    rt->io = rt->r ? io_driver_new(rt->r) : NULL;
    rt->td = rt->io ? time_driver_new(io_driver_driver(rt->io)) : NULL;
    rt->ws = rt->td ? ws_runtime_new(workers, time_driver_driver(rt->td)) : NULL;
    if (!rt->ws) {
        perror("runtime");
        exit(1);
    }
    pthread_mutex_init(&rt->lock, NULL);
    rt->kept = NULL;
    rt->nkept = rt->capkept = 0;
    rt->keep = false;
}

static inline void runtime_spawn(struct runtime *rt, struct future f)
{
    struct join_handle *h = ws_spawn(rt->ws, f, NULL);
    if (!h) {
        fprintf(stderr, "spawn: out of memory\n");
        exit(1);
    }
    pthread_mutex_lock(&rt->lock);
    if (rt->keep && rt->nkept == rt->capkept) {
        size_t cap = rt->capkept ? 2 * rt->capkept : 16;
        struct join_handle **k = realloc(rt->kept, cap * sizeof *k);
        if (!k) {
            fprintf(stderr, "spawn: out of memory\n");
            exit(1);
        }
        rt->kept = k;
        rt->capkept = cap;
    }
    if (rt->keep)
        rt->kept[rt->nkept++] = h;
    pthread_mutex_unlock(&rt->lock);
    if (!rt->keep)
        join_handle_drop(h); /* detached */
}

#include "../06-reactor/accept_loop.h"


/* Joins the kept connections, one after the other. */
struct join_all {
    struct runtime *rt;
    size_t next;
};

static enum poll join_all_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct join_all *j = self;
    while (j->next < j->rt->nkept) {
        enum join_status st;
        if (join_handle_poll(j->rt->kept[j->next], cx, NULL, &st) == POLL_PENDING)
            return POLL_PENDING;
        join_handle_drop(j->rt->kept[j->next++]);
    }
    return POLL_READY;
}

static void join_all_drop(void *self)
{
    struct join_all *j = self;
    while (j->next < j->rt->nkept)
        join_handle_drop(j->rt->kept[j->next++]);
}

static const struct future_vtable join_all_vt = FUTURE_VTABLE_INIT(struct join_all, 0, join_all_poll, join_all_drop);

/* Binds 127.0.0.1:port and accepts on the workers: forever when connections
 * is 0, else until that many were accepted and served to their end. */
static inline int runtime_serve_n(int port, runtime_on_stream on_stream, unsigned connections)
{
    struct runtime rt;
    runtime_new(&rt);
    rt.keep = connections > 0;
    struct tcp_listener *l = runtime_listen(&rt, port);
    struct acceptor a = { .rt = &rt, .acc = tcp_accept(l), .on_stream = on_stream, .left = connections };
    bool ok = ws_block_on(rt.ws, future_of(&acceptor_vt, &a), NULL); /* with connections 0, never returns */
    struct join_all j = { .rt = &rt, .next = 0 };
    ok = ok && ws_block_on(rt.ws, future_of(&join_all_vt, &j), NULL); /* every connection spawned by now */
    tcp_listener_close(l);
    ws_runtime_free(rt.ws);
    time_driver_free(rt.td);
    io_driver_free(rt.io);
    reactor_free(rt.r);
    free(rt.kept);
    pthread_mutex_destroy(&rt.lock);
    return ok ? 0 : 1;
}

static inline int runtime_serve(int port, runtime_on_stream on_stream)
{
    return runtime_serve_n(port, on_stream, 0);
}

#endif
