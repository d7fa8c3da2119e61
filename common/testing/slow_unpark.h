/* slow_unpark.h - a driver whose unpark returns only once the parked thread
 * has gone back to sleep (stages 03 and 07): the thread it woke wakes, looks
 * at its queues, finds nothing and parks again before the unparking thread
 * goes on. A wake from another thread that unparks before its task is
 * queued is then lost on every run, not only when the woken thread happens
 * to be that quick.
 *
 * It wraps another driver (inner) and counts the parks that wait (timeout
 * not 0: a park(0) is a look at the driver, not a return to sleep). unpark
 * gives inner its token, then waits until such a park has begun, at most
 * limit_ms (stretched by LAB_TIMEOUT_SCALE): a thread that does not go back
 * to sleep (it found its task) lets the unparker go on after that long.
 */
#ifndef LAB_TEST_SLOW_UNPARK_H
#define LAB_TEST_SLOW_UNPARK_H

#include <stdatomic.h>
#include <stdint.h>

#include "../driver.h"
#include "lab_test.h"

struct slow_unpark {
    struct driver inner;
    unsigned limit_ms;
    atomic_uint parks; /* parks that wait, begun */
};

static inline bool slow_unpark_park(void *self, int64_t timeout_ns)
{
    struct slow_unpark *d = self;
    if (timeout_ns != 0)
        atomic_fetch_add_explicit(&d->parks, 1, memory_order_release); /* pairs with slow_unpark_unpark's acquire */
    return d->inner.vtable->park(d->inner.self, timeout_ns);
}

static inline void slow_unpark_unpark(void *self)
{
    struct slow_unpark *d = self;
    unsigned before = atomic_load_explicit(&d->parks, memory_order_acquire);
    d->inner.vtable->unpark(d->inner.self);
    unsigned limit = (unsigned)(d->limit_ms * LAB_TIMEOUT_SCALE);
    for (unsigned ms = 0; ms < limit && atomic_load_explicit(&d->parks, memory_order_acquire) == before; ms++)
        lab_sleep_ms(1);
}

static inline uint64_t slow_unpark_now(void *self)
{
    struct slow_unpark *d = self;
    return d->inner.vtable->now(d->inner.self);
}

static const struct driver_vtable slow_unpark_vtable = {slow_unpark_park, slow_unpark_unpark, slow_unpark_now};

/* d wraps inner (borrowed: keep it alive as long as d is used). */
static inline struct driver slow_unpark_driver(struct slow_unpark *d, struct driver inner, unsigned limit_ms)
{
    d->inner = inner;
    d->limit_ms = limit_ms;
    atomic_init(&d->parks, 0);
    return (struct driver){&slow_unpark_vtable, d};
}

#endif
