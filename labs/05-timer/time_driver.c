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
#include "lab_todo.h"


struct time_driver {
    struct driver inner;
    int todo_your_fields_here; /* TODO: time_driver.h contracts 1 to 3: what must the parking thread, a registration from another thread and the fired timers' wakes each find here, and under which lock? (docs/05-timer.md#the-time-driver) */
};


static bool td_park(void *self, int64_t timeout_ns)
{
    (void)self;
    (void)timeout_ns;
    LAB_TODO("time_driver.h contracts 1, 2 and 5: how long may this thread sleep, what fires when it wakes (after a zero timeout too), and what must never happen while the lock is held? (docs/05-timer.md#the-time-driver)");
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
    (void)inner;
    LAB_TODO("the wheel, starting at the inner driver's now; the mutex (docs/05-timer.md#the-time-driver)");
    return td;
}

void time_driver_free(struct time_driver *td)
{
    if (!td)
        return;
    (void)td;
    LAB_TODO("the wheel and the mutex (docs/05-timer.md#the-time-driver)");
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
    (void)td;
    (void)t;
    (void)deadline_ns;
    (void)waker;
    LAB_TODO("time_driver.h contract 3: this timer may be earlier than the parked thread means to wake; how does that thread find out, and what is read and written under the lock? (docs/05-timer.md#sleep)");
}

void time_timer_cancel(struct time_driver *td, struct time_timer *t)
{
    (void)td;
    (void)t;
    LAB_TODO("sleep.h contract 3, cancellation by drop: what must be gone from the wheel, which reference must be given back, and on which side of the unlock? (docs/05-timer.md#sleep)");
}

size_t time_driver_test_timers(struct time_driver *td)
{
    (void)td;
    LAB_TODO("timers in the wheel, read under the lock (docs/05-timer.md#test-hooks)");
}

uint64_t time_driver_test_next_expiration(struct time_driver *td)
{
    (void)td;
    LAB_TODO("the wheel's next expiration, read under the lock (docs/05-timer.md#test-hooks)");
}

uint64_t time_driver_test_fired(struct time_driver *td)
{
    (void)td;
    LAB_TODO("timers fired so far, read under the lock (docs/05-timer.md#test-hooks)");
}
