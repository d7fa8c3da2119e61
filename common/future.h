/* future.h - the poll half of the protocol, and the type-erased future.
 *
 * A future is a passive state machine. Someone (an executor, block_on, a
 * combinator) calls poll with a context. poll makes a bounded amount of
 * progress and answers:
 *   POLL_READY   - finished; the output has been written through `out`;
 *   POLL_PENDING - not yet; and a path exists that will wake the context's
 *                  waker when another poll may make progress.
 * POLL_PENDING without such a path is the one bug that hangs a runtime.
 *
 * A future's state is a plain struct whose first field can be anything. The
 * vtable says how big it is, how to poll it and how to drop it, so a runtime
 * can copy a future into storage of its own (stage 03 puts it inside the task
 * allocation) before the first poll. After the first poll a future is never
 * moved: code may keep pointers into it.
 */
#ifndef LAB_FUTURE_H
#define LAB_FUTURE_H

#include <stdalign.h>
#include <stddef.h>
#include "waker.h"

enum poll { POLL_PENDING = 0, POLL_READY = 1 };

/* quote: future-vtable */
struct future_vtable {
    /* Polls the state at `self`; on POLL_READY writes output_size bytes to
     * `out` (out may be NULL when output_size is 0). */
    enum poll (*poll)(void *self, struct context *cx, void *out);
    /* Releases everything the state owns (stored wakers, handles, buffers).
     * Does not free the storage of `self` itself: whoever owns the storage
     * does. Called once, whether or not the future ever completed. May be
     * NULL when the state owns nothing. */
    void (*drop)(void *self);
    size_t size;        /* sizeof the state */
    size_t align;       /* alignof the state */
    size_t output_size; /* bytes written to out on POLL_READY */
    const char *name;   /* for traces and error messages */
};
/* end quote: future-vtable */

/* A fat pointer: which state, and what it is. Does not own the state. */
struct future {
    const struct future_vtable *vtable;
    void *self;
};

/* Initializer for a vtable over state type T:
 *   static const struct future_vtable sleep_vt =
 *       FUTURE_VTABLE_INIT(struct sleep, 0, sleep_poll, sleep_drop); */
#define FUTURE_VTABLE_INIT(T, output_size_, poll_fn, drop_fn)             \
    { .poll = (poll_fn), .drop = (drop_fn), .size = sizeof(T),            \
      .align = alignof(T), .output_size = (output_size_), .name = #T }

static inline struct future future_of(const struct future_vtable *vt, void *self)
{
    return (struct future){ .vtable = vt, .self = self };
}

static inline enum poll future_poll(struct future f, struct context *cx, void *out)
{
    return f.vtable->poll(f.self, cx, out);
}

static inline void future_drop(struct future f)
{
    if (f.vtable->drop)
        f.vtable->drop(f.self);
}

#endif
