/* parker.h - stage 02: a thread parker with a token.
 *
 * A parker lets one thread sleep until another thread says "wake up", with
 * no wake ever lost. It holds at most one token:
 *   - parker_unpark() stores the token (several unparks still store one) and
 *     wakes the parked thread if there is one;
 *   - parker_park() consumes the token and returns at once if it is there,
 *     otherwise sleeps until it arrives (and may return spuriously: callers
 *     re-check what they wait for);
 *   - parker_park_timeout() does the same but gives up after timeout_ns.
 * An unpark that happens before park is therefore not lost: it is the token
 * the next park consumes. docs/02-block-on.md draws the states.
 *
 * A parker is reference-counted (it is built on wake_obj): parker_new() gives
 * the creator one reference; every waker from parker_waker() is one more; the
 * last release frees it. Only one thread parks on a parker (its owner); any
 * thread may unpark.
 *
 * A parker is the first driver (driver.h): parker_driver() views it as one,
 * with now() from CLOCK_MONOTONIC. Stage 03's executor parks through it.
 */
#ifndef LAB_PARKER_H
#define LAB_PARKER_H

#include <stdbool.h>
#include <stdint.h>
#include "driver.h"
#include "waker.h"

struct parker;

/* A new parker with no token and one reference (the caller's); NULL when out
 * of memory. */
struct parker *parker_new(void);
void parker_retain(struct parker *p);   /* +1 */
void parker_release(struct parker *p);  /* -1; the last one frees */

/* Owner thread only. Returns when the token was consumed, or spuriously. */
void parker_park(struct parker *p);
/* Owner thread only. True when the token was consumed, false when
 * timeout_ns elapsed (or a spurious return) without it. timeout_ns == 0
 * only checks for the token. */
bool parker_park_timeout(struct parker *p, uint64_t timeout_ns);
/* Any thread, any number of times. */
void parker_unpark(struct parker *p);

/* A waker whose wake unparks p (+1 reference to p, owned by the waker). */
struct waker parker_waker(struct parker *p);
/* p as a driver; borrows p (keep your reference while the driver is used). */
struct driver parker_driver(struct parker *p);

#endif
