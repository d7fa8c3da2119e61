/* time_driver.c - stage 05: park until the next timer, then fire.
 *
 * time_driver.h numbers the contract. The questions to answer before you
 * write td_park (docs/05-timer.md#the-time-driver takes them one failure
 * at a time):
 *   - contract 1: how long may the thread that parks sleep, given its
 *     caller's timeout and the wheel?
 *   - contract 2: a waker may do anything, dropping another sleep of this
 *     driver included. What, then, may the parking thread hold while it
 *     wakes a fired timer?
 *   - contract 3: a timer registered on another thread may be earlier than
 *     the time the owner is parked until. How does that registration find
 *     out?
 *   - contract 5: an executor with tasks always ready parks with a zero
 *     timeout. Do timers still fire?
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>

#include "time_driver.h"

/* BEGIN STUDENT HIDDEN */
#define TD_BATCH 32 /* the fired wakers one turn of td_park holds before it unlocks and wakes them */
/* END STUDENT */

struct time_driver {
    struct driver inner;
    /* BEGIN STUDENT FIELDS: time_driver.h contracts 1 to 3: what must the parking thread, a registration from another thread and the fired timers' wakes each find here, and under which lock? (docs/05-timer.md#the-time-driver) */
    pthread_mutex_t lock;        /* protects wheel, park_until, batch, fired, and every registered time_timer */
    struct timer_wheel *wheel;
    uint64_t park_until;         /* when the owner is parked: until when (ns); 0 when not parked */
    struct waker batch[TD_BATCH];
    size_t batch_len;
    uint64_t fired;
    /* END STUDENT */
};

/* BEGIN STUDENT HIDDEN */
/* The fire callback of every registered timer; runs under the lock, inside
 * timer_wheel_advance: marks the timer fired and moves its waker into the
 * batch, which td_park wakes after unlocking. */
static void td_fire(struct timer_entry *e, void *arg)
{
    struct time_driver *td = arg;
    struct time_timer *t = (struct time_timer *)((char *)e - offsetof(struct time_timer, entry));
    t->fired = true;
    td->batch[td->batch_len++] = waker_take(&t->waker);
    td->fired++;
}
/* END STUDENT */

static bool td_park(void *self, int64_t timeout_ns)
{
    /* BEGIN STUDENT: time_driver.h contracts 1, 2 and 5: how long may this thread sleep, what fires when it wakes (after a zero timeout too), and what must never happen while the lock is held? (docs/05-timer.md#the-time-driver) */
    struct time_driver *td = self;
    uint64_t now = driver_now(td->inner);
    pthread_mutex_lock(&td->lock);
    uint64_t until = timer_wheel_next_expiration(td->wheel);
    if (timeout_ns >= 0 && now + (uint64_t)timeout_ns < until)
        until = now + (uint64_t)timeout_ns;
    td->park_until = until == 0 ? 1 : until;
    pthread_mutex_unlock(&td->lock);

    int64_t t = until == TIMER_WHEEL_NEVER ? DRIVER_PARK_FOREVER
              : until > now ? (int64_t)(until - now) : 0;
    bool token = driver_park(td->inner, t);

    pthread_mutex_lock(&td->lock);
    td->park_until = 0;
    for (;;) {
        td->batch_len = 0;
        size_t n = timer_wheel_advance(td->wheel, driver_now(td->inner), TD_BATCH);
        struct waker wake[TD_BATCH];
        size_t k = td->batch_len;
        for (size_t i = 0; i < k; i++)
            wake[i] = td->batch[i];
        td->batch_len = 0;
        pthread_mutex_unlock(&td->lock);
        for (size_t i = 0; i < k; i++)
            waker_wake(&wake[i]); /* consumes the reference the timer held */
        if (n < TD_BATCH)
            break;
        pthread_mutex_lock(&td->lock);
    }
    return token;
    /* END STUDENT */
}

static void td_unpark(void *self)
{
    struct time_driver *td = self;
    driver_unpark(td->inner);
}

static uint64_t td_now(void *self)
{
    struct time_driver *td = self;
    return driver_now(td->inner);
}

#ifdef LAB_TRACE
/* Traced (given; docs/tracing.md): a park of the time driver is one turn,
 * drawn as a slice; the wakes inside it come from timers. */
static bool td_park_traced(void *self, int64_t timeout_ns)
{
    trace_source_begin(TRACE_SRC_TIMER);
    bool token = td_park(self, timeout_ns);
    trace_source_end();
    return token;
}
#define TD_PARK td_park_traced
#else
#define TD_PARK td_park
#endif

static const struct driver_vtable td_vtable = { .park = TD_PARK, .unpark = td_unpark, .now = td_now };

struct time_driver *time_driver_new(struct driver inner)
{
    struct time_driver *td = malloc(sizeof *td);
    if (!td)
        return NULL;
    td->inner = inner;
    /* BEGIN STUDENT: the wheel, starting at the inner driver's now; the mutex (docs/05-timer.md#the-time-driver) */
    td->wheel = timer_wheel_new(driver_now(inner));
    if (!td->wheel) {
        free(td);
        return NULL;
    }
    if (pthread_mutex_init(&td->lock, NULL) != 0) {
        timer_wheel_free(td->wheel);
        free(td);
        return NULL;
    }
    td->park_until = 0;
    td->batch_len = 0;
    td->fired = 0;
    /* END STUDENT */
    return td;
}

void time_driver_free(struct time_driver *td)
{
    if (!td)
        return;
    /* BEGIN STUDENT: the wheel and the mutex (docs/05-timer.md#the-time-driver) */
    timer_wheel_free(td->wheel);
    pthread_mutex_destroy(&td->lock);
    /* END STUDENT */
    free(td);
}

struct driver time_driver_driver(struct time_driver *td)
{
    return (struct driver){ .vtable = &td_vtable, .self = td };
}

uint64_t time_driver_now(struct time_driver *td)
{
    return driver_now(td->inner);
}

void time_timer_init(struct time_timer *t)
{
    timer_entry_init(&t->entry, NULL, NULL);
    t->waker = WAKER_NONE;
    t->fired = false;
}

bool time_timer_poll(struct time_driver *td, struct time_timer *t, uint64_t deadline_ns,
                     const struct waker *waker)
{
    /* BEGIN STUDENT: time_driver.h contract 3: this timer may be earlier than the parked thread means to wake; how does that thread find out, and what is read and written under the lock? (docs/05-timer.md#sleep) */
    uint64_t now = driver_now(td->inner);
    bool unpark = false;
    pthread_mutex_lock(&td->lock);
    if (!t->fired && now >= deadline_ns) {
        timer_wheel_cancel(td->wheel, &t->entry);
        t->fired = true;
    }
    bool done = t->fired;
    struct waker old = WAKER_NONE;
    if (done) {
        old = waker_take(&t->waker);
    } else {
        waker_clone_from(&t->waker, waker);
        if (!timer_entry_armed(&t->entry)) {
            t->entry.fire = td_fire;
            t->entry.arg = td;
            timer_wheel_insert(td->wheel, &t->entry, deadline_ns);
            unpark = td->park_until != 0 && timer_wheel_next_expiration(td->wheel) < td->park_until;
        }
    }
    pthread_mutex_unlock(&td->lock);
    waker_drop(&old);
    if (unpark)
        driver_unpark(td->inner);
    return done;
    /* END STUDENT */
}

void time_timer_cancel(struct time_driver *td, struct time_timer *t)
{
    /* BEGIN STUDENT: sleep.h contract 3, cancellation by drop: what must be gone from the wheel, which reference must be given back, and on which side of the unlock? (docs/05-timer.md#sleep) */
    pthread_mutex_lock(&td->lock);
    timer_wheel_cancel(td->wheel, &t->entry);
    struct waker old = waker_take(&t->waker);
    pthread_mutex_unlock(&td->lock);
    waker_drop(&old);
    /* END STUDENT */
}

size_t time_driver_test_timers(struct time_driver *td)
{
    /* BEGIN STUDENT: timers in the wheel, read under the lock (docs/05-timer.md#test-hooks) */
    pthread_mutex_lock(&td->lock);
    size_t n = timer_wheel_len(td->wheel);
    pthread_mutex_unlock(&td->lock);
    return n;
    /* END STUDENT */
}

uint64_t time_driver_test_next_expiration(struct time_driver *td)
{
    /* BEGIN STUDENT: the wheel's next expiration, read under the lock (docs/05-timer.md#test-hooks) */
    pthread_mutex_lock(&td->lock);
    uint64_t n = timer_wheel_next_expiration(td->wheel);
    pthread_mutex_unlock(&td->lock);
    return n;
    /* END STUDENT */
}

uint64_t time_driver_test_fired(struct time_driver *td)
{
    /* BEGIN STUDENT: timers fired so far, read under the lock (docs/05-timer.md#test-hooks) */
    pthread_mutex_lock(&td->lock);
    uint64_t n = td->fired;
    pthread_mutex_unlock(&td->lock);
    return n;
    /* END STUDENT */
}
