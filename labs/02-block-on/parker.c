/* parker.c - stage 02: a thread parker with a token.
 *
 * The parker is one word of state and a place to sleep:
 *
 *   EMPTY     no token, nobody asleep
 *   PARKED    the owner thread is asleep (or about to be) on the condition
 *             variable, waiting for a token
 *   NOTIFIED  a token is stored: the next park consumes it and returns
 *
 *   unpark:  any state -> NOTIFIED (a second token is the same token); if
 *            the state was PARKED, also wake the sleeper.
 *   park:    NOTIFIED -> EMPTY and return at once (the token), or
 *            EMPTY -> PARKED, sleep until NOTIFIED, then NOTIFIED -> EMPTY.
 *
 * docs/02-block-on.md#the-token draws this, and shows why an unpark that
 * comes before park is not lost: it leaves NOTIFIED behind, and park looks
 * at the state before it ever sleeps.
 *
 * The state word is atomic so that the common cases (a token already there;
 * an unpark with nobody asleep) never take the lock. The mutex and condition
 * variable are only for actually sleeping. A version that keeps the same
 * three states in a plain int under the mutex is just as correct, and a fine
 * first version: the atomic word is an optimisation of it, not a different
 * idea.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "parker.h"
#include "wake_obj.h"
#include "lab_todo.h"

enum parker_state { PARKER_EMPTY = 0, PARKER_PARKED = 1, PARKER_NOTIFIED = 2 };

struct parker {
    struct wake_obj obj; /* the reference count and what a wake does; every parker waker points here */
    int todo_your_fields_here; /* TODO: the token state, and what the owner sleeps on (docs/02-block-on.md#the-parker) */
};

/* ---- the wake_obj side: what a parker waker does ------------------------ */

static void parker_obj_wake(struct wake_obj *obj)
{
    parker_unpark(WAKE_OBJ_CONTAINER(obj, struct parker, obj));
}

static void parker_obj_free(struct wake_obj *obj)
{
    struct parker *p = WAKE_OBJ_CONTAINER(obj, struct parker, obj);
    (void)obj;
    LAB_TODO("destroy what parker_new initialized (docs/02-block-on.md#the-parker)");
    free(p);
}

static const struct wake_obj_ops parker_obj_ops = {
    .wake = parker_obj_wake,
    .free = parker_obj_free,
};

/* ---- creating and releasing ------------------------------------------------ */

struct parker *parker_new(void)
{
    struct parker *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    wake_obj_init(&p->obj, &parker_obj_ops); /* refs = 1: the creator's reference */
    LAB_TODO("start EMPTY; a mutex; a condition variable timed on CLOCK_MONOTONIC (docs/02-block-on.md#the-parker)");
    return p;
}

void parker_retain(struct parker *p)
{
    wake_obj_retain(&p->obj); /* +1: the caller's new reference */
}

void parker_release(struct parker *p)
{
    wake_obj_release(&p->obj); /* -1: the caller's reference; the last one frees */
}

/* ---- park and unpark --------------------------------------------------------- */

/* The deadline `timeout_ns` from now, on CLOCK_MONOTONIC. */
static struct timespec deadline_after(uint64_t timeout_ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    /* time_t is 64 bits here: even UINT64_MAX ns (584 years) cannot overflow it */
    ts.tv_sec += (time_t)(timeout_ns / 1000000000u);
    ts.tv_nsec += (long)(timeout_ns % 1000000000u);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* The deadline of a zero timeout: already past, so park only takes a token
 * that is there (park_until compares the pointer). */
static const struct timespec park_poll = { 0, 0 };

/* Owner thread only. Consumes the token and returns true; or, when
 * `deadline` (CLOCK_MONOTONIC) is not NULL and passes first, returns false.
 * deadline == NULL: no timeout; deadline == &park_poll: a zero timeout, never
 * sleeps. Both park functions below are this one. */
static bool park_until(struct parker *p, const struct timespec *deadline)
{
    (void)p;
    (void)deadline;
    LAB_TODO("parker.h contracts 1, 2, 5 and 6: where is an unpark that came before this park kept, what does a return of the wait prove, and what does a zero timeout (deadline == &park_poll) do? (docs/02-block-on.md#the-token)");
}

void parker_park(struct parker *p)
{
    (void)park_until(p, NULL);
}

bool parker_park_timeout(struct parker *p, uint64_t timeout_ns)
{
    if (timeout_ns == 0)
        return park_until(p, &park_poll);
    struct timespec deadline = deadline_after(timeout_ns);
    return park_until(p, &deadline);
}

void parker_unpark(struct parker *p)
{
    (void)p;
    LAB_TODO("parker.h contracts 1 and 4: the owner may be between its look at the state and its sleep; how does this unpark avoid being lost there? (docs/02-block-on.md#the-token)");
}

/* ---- the waker: a wake is an unpark ---------------------------------------- */

struct waker parker_waker(struct parker *p)
{
    (void)p;
    LAB_TODO("a waker that holds its own reference to p (wake_obj.h) (docs/02-block-on.md#a-waker-that-unparks)");
}

/* ---- the parker as a driver (driver.h) -------------------------------------- */

static bool parker_driver_park(void *self, int64_t timeout_ns)
{
    if (timeout_ns < 0)
        return park_until(self, NULL);
    if (timeout_ns == 0)
        return park_until(self, &park_poll);
    struct timespec deadline = deadline_after((uint64_t)timeout_ns);
    return park_until(self, &deadline);
}

static void parker_driver_unpark(void *self) { parker_unpark(self); }

static uint64_t parker_driver_now(void *self)
{
    (void)self;
    return driver_monotonic_ns();
}

static const struct driver_vtable parker_driver_vtable = {
    .park = parker_driver_park,
    .unpark = parker_driver_unpark,
    .now = parker_driver_now,
};

struct driver parker_driver(struct parker *p)
{
    return (struct driver){ .vtable = &parker_driver_vtable, .self = p };
}
