/* driver.h - the spine every executor parks on.
 *
 * An executor with nothing to run asks its driver to park the thread, and any
 * thread that makes work for it asks the driver to unpark. Whatever sits
 * under that interface is invisible to the executor, which is how the lab
 * grows without editing earlier stages:
 *
 *   stage 02  parker            park = sleep on a token, unpark = give it
 *   stage 05  time driver       park until min(timeout, next timer), fire timers
 *   stage 06  I/O driver        park = epoll_wait, unpark = write an eventfd
 *   tests     virtual clock     park advances virtual time, now() reads it
 *
 * Contract of every driver:
 *   - park(timeout) returns after an unpark, after the timeout, or early for
 *     no reason at all (a spurious return); the caller re-checks its queue;
 *   - an unpark that happens before park is not lost: the next park returns
 *     at once (the token);
 *   - unpark may be called from any thread, any number of times;
 *   - now() is monotonic nanoseconds; a virtual-clock driver may jump it.
 */
#ifndef LAB_DRIVER_H
#define LAB_DRIVER_H

#include <stdbool.h>
#include <stdint.h>

#include "trace.h"

/* park forever (until unparked) */
#define DRIVER_PARK_FOREVER INT64_C(-1)

/* quote: driver */
struct driver_vtable {
    /* timeout_ns < 0: no timeout. Returns true when an unpark (a token) was
     * consumed, false on a timeout or a spurious return. */
    bool (*park)(void *self, int64_t timeout_ns);
    void (*unpark)(void *self);
    uint64_t (*now)(void *self);
};

struct driver {
    const struct driver_vtable *vtable;
    void *self;
};
/* end quote: driver */

/* The trace hooks (trace.h) are empty unless built with -DLAB_TRACE: a park
 * is then drawn as a slice on the parking thread, an unpark as an instant. */
static inline bool driver_park(struct driver d, int64_t timeout_ns)
{
    trace_park_begin(timeout_ns);
    bool woken = d.vtable->park(d.self, timeout_ns);
    trace_park_end(woken);
    return woken;
}
static inline void driver_unpark(struct driver d)
{
    trace_unpark();
    d.vtable->unpark(d.self);
}
static inline uint64_t driver_now(struct driver d) { return d.vtable->now(d.self); }

/* CLOCK_MONOTONIC in nanoseconds: the now() of every real-time driver. */
uint64_t driver_monotonic_ns(void);

#endif
