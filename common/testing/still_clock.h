/* still_clock.h - a driver whose clock stands still: a park, however long
 * its timeout, ends only by an unpark.
 *
 * A test that must know a sleeper came back because somebody woke it, and
 * not because its timeout ran out, parks it on this driver:
 *
 *   now()          the reading given at creation, for ever
 *   park(0)        a look, not a sleep: takes a token if one is there and
 *                  returns at once
 *   park(t != 0)   waits for the token, whatever t (time never reaches the
 *                  timeout); true. With a limit (limit_ms > 0), gives up
 *                  after that much real time and returns false: a test
 *                  whose sleeper nobody wakes ends instead of hanging.
 *   unpark()       leaves the token, waking the parked thread
 *
 * It counts the parks that wait and the unparks, keeps the last such park's
 * timeout, and who is parked: the number who() gives on the parking thread
 * (a worker's index; who NULL: 0). A test waits until someone parks, or
 * until nobody is. One thread parks at a time (a runtime's driver has one
 * parker). Any thread may call every function.
 */
#ifndef LAB_TEST_STILL_CLOCK_H
#define LAB_TEST_STILL_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include "../driver.h"

struct still_clock;

/* A clock reading now_ns, with no token; NULL when out of memory. */
struct still_clock *still_clock_new(uint64_t now_ns, unsigned limit_ms, int (*who)(void));
void still_clock_free(struct still_clock *c);
/* The clock as a driver; borrows c. */
struct driver still_clock_driver(struct still_clock *c);

/* Waits up to ms until a thread is parked, with no token left for it,
 * whose number is not not_who (-1: anyone); its number, or -1. A thread
 * unparked that has not left park yet does not count. */
int still_clock_wait_parked(struct still_clock *c, int not_who, unsigned ms);
/* Waits up to ms until nobody is parked; false when someone still is. */
bool still_clock_wait_unparked(struct still_clock *c, unsigned ms);

struct still_counts {
    unsigned parks, unparks; /* parks that waited (timeout != 0); unparks */
    int64_t last_timeout;    /* of the last park that waited */
};
/* The counts, read together. */
struct still_counts still_clock_counts(struct still_clock *c);

#endif
