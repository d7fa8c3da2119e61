/* io_driver.h - stage 06: the innermost driver, parked in epoll_wait.
 *
 * The I/O driver is a driver (driver.h) over a reactor:
 *
 *     executor --park--> time driver (stage 05) --park(t)--> I/O driver
 *                                                             epoll_wait(t), then
 *                                                             reactor_dispatch
 *
 * park(t) waits in epoll_wait for at most t (rounded up to whole ms, never
 * down: a 0.3 ms remainder is a 1 ms wait, not a 0 ms spin), then dispatches
 * what came: I/O readiness wakes tasks, and the time driver above fires its
 * timers when park returns. Timers and I/O share one park.
 *
 * unpark from another thread must interrupt a thread blocked in epoll_wait
 * with no timeout at once: it writes an eventfd that is registered in the
 * same epoll set under the token REACTOR_TOKEN_WAKE. A state word keeps that
 * write off the common path: only an unpark that finds the driver PARKED
 * (inside, or about to enter, epoll_wait) writes the eventfd; any other
 * leaves a token (NOTIFIED) that the next park consumes without a syscall
 * (a zero-timeout park, contract 4, takes it and still polls epoll).
 *
 * The contract (docs/06-reactor.md#the-io-driver):
 *  1. An unpark from any thread while park waits with no timeout makes it
 *     return within a few ms; an unpark before park is kept (the next park
 *     returns at once, true).
 *  2. park(t) is one epoll_wait for at most t rounded up to whole ms, never
 *     down (a 0.3 ms t waits 1 ms, not 0 ms: no spin for the caller); it
 *     returns by then (plus scheduling delay), having dispatched every event
 *     epoll_wait returned.
 *  3. now() is CLOCK_MONOTONIC.
 *  4. park(0) is a poll of the kernel: it always calls epoll_wait with a
 *     zero timeout and dispatches what it returns, a token there or not
 *     (the token is taken; one that comes during the poll stays for the next
 *     park). With stage 03's driver tick (executor.h contract 6) a socket
 *     that becomes ready beside tasks that stay ready wakes its task within
 *     EXECUTOR_DRIVER_INTERVAL task polls, plus the poll running then, even
 *     while other threads keep unparking the driver.
 * Threads: park from one thread (the owner); unpark from any.
 * Ownership: io_driver_new borrows the reactor (free the driver first).
 */
#ifndef LAB_IO_DRIVER_H
#define LAB_IO_DRIVER_H

#include <stdint.h>

#include "driver.h"
#include "reactor.h"

struct io_driver;

/* An I/O driver over r (borrowed), with an eventfd of its own registered in
 * r's epoll set. NULL on failure. */
struct io_driver *io_driver_new(struct reactor *r);
void io_driver_free(struct io_driver *d);
/* The I/O driver as a driver (borrows d). */
struct driver io_driver_driver(struct io_driver *d);

/* ---- test hooks ---- */

/* epoll_wait calls so far, and eventfd writes made by unpark so far. */
uint64_t io_driver_test_waits(struct io_driver *d);
uint64_t io_driver_test_eventfd_writes(struct io_driver *d);

#endif
