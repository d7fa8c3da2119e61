/* virtual_clock.h - a driver whose time is a number the tests control.
 *
 * Timers are tested in virtual time: a test of a 3-day deadline must not take
 * 3 days, and a test of "never early" must not depend on how busy the machine
 * is. A virtual clock is a driver (driver.h) like any other:
 *
 *   now()          the virtual time, in ns (starts where virtual_clock_new says)
 *   park(t >= 0)   a token there: consume it, return true, time stands still;
 *                  otherwise time jumps forward by exactly t at once, and
 *                  park returns false (a timeout). Nothing sleeps.
 *   park(forever)  a token there: as above; otherwise the thread really
 *                  waits (on a condition variable) until an unpark: virtual
 *                  time cannot run "forever" ahead. After 2 s of real time
 *                  with no unpark the process aborts: in a virtual-time
 *                  test that is a hang (a lost timer, or a park that ignores
 *                  the next expiration), reported at once. The abort is
 *                  made inside
 *                  virtual_clock_parked_forever_with_nothing_to_unpark_it(),
 *                  the name the report's backtrace of the crash shows, and
 *                  the same words go to standard error.
 *   unpark()       leaves the token, waking a thread waiting in park(forever).
 *
 * Put a time driver (stage 05) on top and an executor on top of that: when
 * every task waits on a timer, the executor parks until the next expiration,
 * the clock jumps there, the timers fire. Hours of virtual time take
 * microseconds. Any thread may call every function.
 */
#ifndef LAB_TEST_VIRTUAL_CLOCK_H
#define LAB_TEST_VIRTUAL_CLOCK_H

#include <stdint.h>
#include "../driver.h"

struct virtual_clock;

/* A clock reading start_ns, with no token. NULL when out of memory. */
struct virtual_clock *virtual_clock_new(uint64_t start_ns);
void virtual_clock_free(struct virtual_clock *vc);
/* The clock as a driver; borrows vc. */
struct driver virtual_clock_driver(struct virtual_clock *vc);

uint64_t virtual_clock_now(struct virtual_clock *vc);
/* Moves time forward by ns (a test's own "time passes"). */
void virtual_clock_advance(struct virtual_clock *vc, uint64_t ns);
/* How many times park was called, and how many of those had a timeout. */
uint64_t virtual_clock_parks(struct virtual_clock *vc);
/* The timeout of the most recent park (ns; -1 for forever). */
int64_t virtual_clock_last_timeout(struct virtual_clock *vc);

#endif
