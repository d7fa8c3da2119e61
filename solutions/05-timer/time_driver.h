/* time_driver.h - stage 05: a driver that fires timers when it parks.
 *
 * The time driver sits between an executor and the driver it used to park
 * on (stage 02's parker, a virtual clock, later stage 06's I/O driver):
 *
 *     executor --park(timeout)--> time driver --park(t')--> inner driver
 *                                    | wheel (timer_wheel.h), one mutex
 *
 * park(timeout) parks the inner driver for t' = min(timeout, time until the
 * wheel's next expiration); when the inner park returns (a wake, the timeout,
 * or nothing at all), it advances the wheel to the inner driver's now() and
 * wakes the tasks of the timers that fired. There is no timer thread: the
 * thread that parks is the one that fires. The executor is not edited: it
 * parks on a struct driver, and this is one (time_driver_driver).
 *
 * The contract (docs/05-timer.md#the-time-driver):
 *  1. The park timeout is the next expiration: a parked thread sleeps no
 *     longer than until the earliest timer's slot is due (or the caller's own
 *     timeout, if earlier), and the remainder is passed on in ns, so a
 *     deadline 0.3 ms away is a 0.3 ms park, never a 0 ms park and a spin.
 *  2. Timers fire on the parking thread, after the inner park returns, in
 *     deadline order; their wakers are woken after the wheel's mutex is
 *     released.
 *  3. A timer registered from any thread whose deadline comes before the
 *     deadline the parked thread sleeps until unparks the inner driver, so
 *     the parked thread recomputes its park timeout.
 *  4. unpark and now are the inner driver's.
 *  5. Every park fires what is due, a zero-timeout park included (it parks
 *     the inner driver with a zero timeout, then advances the wheel). The
 *     lateness bound a task sees, with d a deadline and its tick the next
 *     1 ms boundary at or after d:
 *       - executor idle (parked on this driver): woken less than one tick
 *         after d, plus the OS's wake-up delay;
 *       - tasks always ready: the executor's driver tick (stage 03,
 *         executor.h contract 6) fires it at most EXECUTOR_DRIVER_INTERVAL
 *         task polls, plus the poll running at the tick, after its tick;
 *         the woken task then runs behind the tasks already ready;
 *       - a poll that blocks the thread delays every timer by as long as
 *         it blocks: no bound holds then.
 *
 * Threads: park from one thread (the owner); everything else from any
 * thread. Ownership: time_driver_new borrows `inner` (keep it alive until
 * time_driver_free); free the time driver only when no timer is registered
 * (every sleep dropped).
 */
#ifndef LAB_TIME_DRIVER_H
#define LAB_TIME_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "driver.h"
#include "future.h"
#include "timer_wheel.h"

struct time_driver;

/* One timer as a wake source: an entry in the wheel and the waker its
 * firing wakes. Embedded in a future (struct sleep does); its fields belong
 * to the time driver, and are read and written under its mutex only. */
struct time_timer {
    struct timer_entry entry;
    struct waker waker; /* woken (and consumed) when the timer fires */
    bool fired;         /* the deadline passed: the timer is done */
};

/* A time driver over `inner` (borrowed), its wheel starting at inner's now.
 * NULL when out of memory. */
struct time_driver *time_driver_new(struct driver inner);
void time_driver_free(struct time_driver *td);
/* The time driver as a driver (borrows td): give it to executor_new. */
struct driver time_driver_driver(struct time_driver *td);
/* The inner driver's now(). */
uint64_t time_driver_now(struct time_driver *td);

/* A timer not yet registered and not fired. */
void time_timer_init(struct time_timer *t);
/* The poll half of a timer, for a future's poll, in one hold of the
 * driver's mutex. True (Ready) when the timer fired or deadline_ns is
 * reached: the timer is then done. False (Pending) only when the timer's
 * firing will wake `waker`, the latest poll's (a re-poll by the same task
 * clones nothing), with the timer in the wheel once and contract 3 kept for
 * a parked owner. */
bool time_timer_poll(struct time_driver *td, struct time_timer *t, uint64_t deadline_ns,
                     const struct waker *waker);
/* Cancels: removes the timer from the wheel at once and drops its waker. */
void time_timer_cancel(struct time_driver *td, struct time_timer *t);

/* ---- test hooks ---- */

/* Timers registered in the wheel. */
size_t time_driver_test_timers(struct time_driver *td);
/* The wheel's next expiration (ns), TIMER_WHEEL_NEVER when none. */
uint64_t time_driver_test_next_expiration(struct time_driver *td);
/* How many timers have fired since time_driver_new. */
uint64_t time_driver_test_fired(struct time_driver *td);

#endif
