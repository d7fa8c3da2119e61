/* sleep.h - stage 05: a future that is Ready once a deadline has passed.
 *
 *   struct sleep s = sleep_for(td, 200 * 1000000ull);   // 200 ms from now
 *   block_on / executor_spawn(ex, sleep_future(&s), NULL);
 *
 * A sleep is a plain struct: the state of the future. Making one registers
 * nothing; the first poll that finds the deadline not yet reached registers
 * a timer in the time driver's wheel (time_driver.h) with the polling task's
 * waker, and returns Pending. The timer firing wakes the task; the next poll
 * is Ready. A runtime may copy the struct before its first poll (future.h),
 * never after: the wheel holds a pointer into it from then on.
 *
 * The contract (docs/05-timer.md#sleep):
 *  1. Ready only at or after the deadline (the time driver's now()), never
 *     before; Pending only with the timer registered and the latest waker
 *     stored (a re-poll by the same task clones nothing).
 *  2. A poll that finds the deadline passed is Ready without registering.
 *  3. Dropping a sleep (sleep_drop, or future_drop on sleep_future) cancels
 *     its timer at once: the wheel forgets it and its waker is released,
 *     after every lock is (a drop runs the executor's code, as a wake does).
 *  4. Poll after Ready is Ready again.
 * Output: none (output_size 0).
 */
#ifndef LAB_SLEEP_H
#define LAB_SLEEP_H

#include <stdint.h>

#include "future.h"
#include "time_driver.h"

struct sleep {
    struct time_timer timer;  /* the wheel's entry and the stored waker */
    struct time_driver *td;   /* borrowed */
    uint64_t deadline_ns;     /* absolute, on td's clock */
};

/* A sleep until deadline_ns (absolute, on time_driver_now's clock). */
struct sleep sleep_until(struct time_driver *td, uint64_t deadline_ns);
/* A sleep until time_driver_now(td) + duration_ns (read now). */
struct sleep sleep_for(struct time_driver *td, uint64_t duration_ns);

enum poll sleep_poll(struct sleep *s, struct context *cx);
/* Cancels the timer at once (contract 3). The storage stays the caller's. */
void sleep_drop(struct sleep *s);

extern const struct future_vtable sleep_vtable;
/* The sleep as a future (borrows s; future_drop calls sleep_drop). */
struct future sleep_future(struct sleep *s);

#endif
