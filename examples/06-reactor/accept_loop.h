/* accept_loop.h - what a serving example does on any of the lab's runtimes:
 * bind a listener and accept forever (or N times), handing each stream to
 * on_stream. Included by runtime.h (stage 03's executor) and by
 * ../07-work-stealing/mt_runtime.h (stage 07's workers) after each has
 * defined its struct runtime, with the fields r (the reactor) and td (the
 * time driver). */
#ifndef EXAMPLE_ACCEPT_LOOP_H
#define EXAMPLE_ACCEPT_LOOP_H

#include <stdio.h>
#include <stdlib.h>

#include "tcp.h"

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

#endif
