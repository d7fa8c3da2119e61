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

enum parker_state { PARKER_EMPTY = 0, PARKER_PARKED = 1, PARKER_NOTIFIED = 2 };

struct parker {
    struct wake_obj obj; /* the reference count and what a wake does; every parker waker points here */
    /* BEGIN STUDENT FIELDS: the token state, and what the owner sleeps on (docs/02-block-on.md#the-parker) */
    atomic_int state;     /* enum parker_state: the token, and whether the owner sleeps */
    pthread_mutex_t lock; /* protects no data (state is atomic): the owner holds it from
                           * its EMPTY -> PARKED transition until pthread_cond_wait
                           * releases it, so an unparker that takes it cannot notify
                           * into the gap between the two (see parker_unpark) */
    pthread_cond_t cond;  /* the owner sleeps here while PARKED; clock: CLOCK_MONOTONIC */
    /* END STUDENT */
};

/* ---- the wake_obj side: what a parker waker does ------------------------ */

static void parker_obj_wake(struct wake_obj *obj)
{
    parker_unpark(WAKE_OBJ_CONTAINER(obj, struct parker, obj));
}

static void parker_obj_free(struct wake_obj *obj)
{
    struct parker *p = WAKE_OBJ_CONTAINER(obj, struct parker, obj);
    /* BEGIN STUDENT: destroy what parker_new initialized (docs/02-block-on.md#the-parker) */
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    /* END STUDENT */
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
    /* BEGIN STUDENT: start EMPTY; a mutex; a condition variable timed on CLOCK_MONOTONIC (docs/02-block-on.md#the-parker) */
    atomic_init(&p->state, PARKER_EMPTY);
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p); /* nobody else has a reference yet */
        return NULL;
    }
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    /* pthread_cond_timedwait reads its deadline on the condvar's clock, which
     * is CLOCK_REALTIME unless we say otherwise; our deadlines are monotonic
     * so that a change of the wall clock cannot stretch or cut a timeout. */
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&p->cond, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0) {
        pthread_mutex_destroy(&p->lock);
        free(p);
        return NULL;
    }
    /* END STUDENT */
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
    /* BEGIN STUDENT: parker.h contracts 1, 2, 5 and 6: where is an unpark that came before this park kept, what does a return of the wait prove, and what does a zero timeout (deadline == &park_poll) do? (docs/02-block-on.md#the-token) */
    int expected = PARKER_NOTIFIED;
    /* The fast path: a token is already stored, take it without the lock.
     * acquire: pairs with the release exchange in parker_unpark, so whatever
     * the unparker wrote before unparking is visible once we return. */
    if (atomic_compare_exchange_strong_explicit(&p->state, &expected, PARKER_EMPTY,
                                                memory_order_acquire, memory_order_relaxed))
        return true;
    /* A zero timeout is a poll (stage 03's driver tick makes one every 61
     * task polls): no token, so it has timed out already. No lock, no system
     * call. An unpark that lands after the CAS leaves its token for the next
     * park. */
    if (deadline == &park_poll)
        return false;

    pthread_mutex_lock(&p->lock);
    expected = PARKER_EMPTY;
    /* Announce that we are about to sleep, holding the lock. relaxed: it
     * publishes nothing; an unparker that reads PARKED takes the lock next,
     * and the lock orders it after our wait has begun. */
    if (!atomic_compare_exchange_strong_explicit(&p->state, &expected, PARKER_PARKED,
                                                 memory_order_relaxed, memory_order_relaxed)) {
        /* Not EMPTY: only we ever write PARKED, so it is NOTIFIED. A token
         * arrived between the fast path and the lock. Take it with an
         * exchange, not a plain store: a read-modify-write reads the latest
         * unpark, and acquire pairs with that unpark's release. */
        atomic_exchange_explicit(&p->state, PARKER_EMPTY, memory_order_acquire);
        pthread_mutex_unlock(&p->lock);
        return true;
    }

    for (;;) {
        int rc = deadline ? pthread_cond_timedwait(&p->cond, &p->lock, deadline)
                          : pthread_cond_wait(&p->cond, &p->lock);
        /* Woken: by an unpark, by the deadline, or for no reason at all (a
         * condition variable may wake spuriously). Only the state says which. */
        expected = PARKER_NOTIFIED;
        if (atomic_compare_exchange_strong_explicit(&p->state, &expected, PARKER_EMPTY,
                                                    memory_order_acquire, /* pairs with unpark's release */
                                                    memory_order_relaxed)) {
            pthread_mutex_unlock(&p->lock);
            return true;
        }
        if (rc == ETIMEDOUT) {
            /* Still PARKED at the CAS, but an unpark may land right now: the
             * exchange both leaves PARKED (so no stale PARKED survives into
             * the next park) and tells us whether a token won the race.
             * acquire: pairs with that unpark's release. */
            int was = atomic_exchange_explicit(&p->state, PARKER_EMPTY, memory_order_acquire);
            pthread_mutex_unlock(&p->lock);
            return was == PARKER_NOTIFIED;
        }
        /* A spurious wakeup: still PARKED, no token. Sleep again rather than
         * hand the caller a gratuitous spurious return. */
    }
    /* END STUDENT */
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
    /* BEGIN STUDENT: parker.h contracts 1 and 4: the owner may be between its look at the state and its sleep; how does this unpark avoid being lost there? (docs/02-block-on.md#the-token) */
    /* Always write NOTIFIED, whatever was there: a second unpark is the same
     * token. release: pairs with the acquire by which park takes the token,
     * so everything this thread did before unparking (completing a signal,
     * pushing a task) is visible to the parked thread when it returns. */
    int was = atomic_exchange_explicit(&p->state, PARKER_NOTIFIED, memory_order_release);
    if (was != PARKER_PARKED)
        return; /* EMPTY: the token waits for the next park. NOTIFIED: already there. */

    /* The owner set PARKED while holding the lock and keeps it until
     * pthread_cond_wait atomically releases it. Taking the lock here
     * therefore waits until the owner is really waiting (or has already
     * seen NOTIFIED): a signal sent now cannot fall into the gap between its
     * CAS and its wait, where it would be lost. Releasing the lock before
     * signalling lets the woken owner run without bumping into us. */
    pthread_mutex_lock(&p->lock);
    pthread_mutex_unlock(&p->lock);
    pthread_cond_signal(&p->cond);
    /* END STUDENT */
}

/* ---- the waker: a wake is an unpark ---------------------------------------- */

struct waker parker_waker(struct parker *p)
{
    /* BEGIN STUDENT: a waker that holds its own reference to p (wake_obj.h) (docs/02-block-on.md#a-waker-that-unparks) */
    return wake_obj_waker(&p->obj); /* +1: the waker's reference */
    /* END STUDENT */
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
