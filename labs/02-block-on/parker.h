/* parker.h - stage 02: a thread parker with a token.
 *
 * A parker lets one thread sleep until another thread says "wake up", with
 * no wake ever lost. It holds at most one token: parker_unpark() stores it,
 * parker_park() and parker_park_timeout() consume it. docs/02-block-on.md
 * draws the states.
 *
 * The contract (docs/02-block-on.md#the-contract):
 *  1. The token: parker_unpark() stores a token and wakes the parked thread
 *     if there is one; the next park consumes it and returns at once. An
 *     unpark that happens before park is therefore not lost, and what the
 *     unparking thread wrote before its unpark is visible to the owner once
 *     a park has consumed that token (unpark releases, the taking acquires).
 *  2. One token, not a count: several unparks store one token; a park
 *     consumes it, and the next park sleeps.
 *  3. Sleeping is free: a parked thread sleeps until a token arrives, using
 *     no CPU while it waits.
 *  4. Any thread may unpark, any number of times; only the parker's owner
 *     parks on it.
 *  5. Park may return spuriously, without the token: callers re-check what
 *     they wait for. A good parker does not return for no reason.
 *  6. parker_park_timeout() returns true when it consumed the token, false
 *     when timeout_ns passed first on CLOCK_MONOTONIC, never early;
 *     timeout_ns == 0 only checks for the token.
 *  7. A parker is reference-counted (it is built on wake_obj): parker_new()
 *     gives the creator one reference, every waker from parker_waker() holds
 *     one more, and the last release frees it, whoever does it.
 *  8. A parker is the first driver (driver.h): parker_driver() views it as
 *     one, parking with a timeout in nanoseconds (negative: forever) on the
 *     same token, unparking from any thread, and now() on CLOCK_MONOTONIC.
 *     Stage 03's executor parks through it.
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
