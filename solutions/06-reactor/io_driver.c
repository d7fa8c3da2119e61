/* io_driver.c - stage 06: park = epoll_wait, unpark = write an eventfd.
 *
 * The state word has Tokio's three states (park.rs): EMPTY; PARKED, the
 * owner is in epoll_wait or about to be; NOTIFIED, an unpark's token. Which
 * side makes which transition, with which atomic operation, is yours to
 * derive (docs/06-reactor.md#the-io-driver), from io_driver.h's contract:
 *   - an unpark that finds the owner awake: what does it leave, at what cost?
 *   - one that finds it PARKED: what reaches a thread inside epoll_wait?
 *   - two unparks in a row: how many eventfd writes, and whose?
 *   - a park that finds a token: with a timeout, and with none (park(0))?
 *
 * If an eventfd write lands before the owner enters epoll_wait, the eventfd
 * is readable by then and epoll_wait returns at once: the write is the
 * token, in the kernel.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "io_driver.h"

enum { EMPTY = 0, PARKED = 1, NOTIFIED = 2 };
#define IO_EVENTS 256

struct io_driver {
    struct reactor *r;
    /* BEGIN STUDENT FIELDS: the eventfd; the state word; the counters of the test hooks (docs/06-reactor.md#the-io-driver) */
    int efd;
    atomic_int state;             /* EMPTY, PARKED or NOTIFIED (above) */
    atomic_uint_fast64_t waits;   /* statistics only: relaxed */
    atomic_uint_fast64_t writes;  /* statistics only: relaxed */
    /* END STUDENT */
};

/* BEGIN STUDENT HIDDEN */
/* ns to epoll_wait's ms, rounded up: never a 0 ms wait for a positive time. */
static int timeout_ms(int64_t ns)
{
    if (ns < 0)
        return -1;
    int64_t ms = (ns + 999999) / 1000000;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}
/* END STUDENT */

static bool io_park(void *self, int64_t timeout_ns)
{
    /* BEGIN STUDENT: io_driver.h contracts 1, 2 and 4: when may park return without asking the kernel, and when must it ask anyway (park(0))? What may it never drop of what epoll_wait returned? (docs/06-reactor.md#the-io-driver, #ready-io-beside-busy-tasks) */
    struct io_driver *d = self;
    bool token;
    if (timeout_ns == 0) {
        /* A zero timeout is a poll of the kernel (the executor's driver
         * tick, executor.h contract 6): take a token if there is one, and
         * call epoll_wait all the same, so a stream of unparks cannot keep
         * ready I/O unread behind busy tasks. No PARKED: a wait of zero
         * needs no eventfd write to end it; an unpark meanwhile leaves its
         * token for the next park. The owner alone writes PARKED, so the
         * state is EMPTY or NOTIFIED here. acquire: pairs with unpark's
         * release swap. */
        token = atomic_exchange_explicit(&d->state, EMPTY, memory_order_acquire) == NOTIFIED;
    } else {
        int expect = NOTIFIED;
        /* acquire: pairs with unpark's release swap (what the waker did before unpark is visible) */
        if (atomic_compare_exchange_strong_explicit(&d->state, &expect, EMPTY, memory_order_acquire,
                                                    memory_order_relaxed))
            return true;
        expect = EMPTY;
        /* acq_rel: a failure means an unpark got in first (NOTIFIED): take it */
        if (!atomic_compare_exchange_strong_explicit(&d->state, &expect, PARKED, memory_order_acq_rel,
                                                     memory_order_acquire)) {
            atomic_store_explicit(&d->state, EMPTY, memory_order_relaxed); /* only NOTIFIED can be here */
            return true;
        }
    }
    struct epoll_event events[IO_EVENTS];
    atomic_fetch_add_explicit(&d->waits, 1, memory_order_relaxed);
    int n = epoll_wait(reactor_epoll_fd(d->r), events, IO_EVENTS, timeout_ms(timeout_ns));
    if (n < 0)
        n = 0; /* EINTR: a spurious return */
    /* acq_rel: acquire pairs with an unpark's release swap; back to EMPTY
     * before dispatch, so wakes made by dispatch on this thread cost no
     * eventfd write. (A zero-timeout poll never left EMPTY or NOTIFIED:
     * a token that came during it stays for the next park.) */
    if (timeout_ns != 0)
        token = atomic_exchange_explicit(&d->state, EMPTY, memory_order_acq_rel) == NOTIFIED;
    if (reactor_dispatch(d->r, events, n)) {
        uint64_t v;
        if (read(d->efd, &v, sizeof v) < 0 && errno != EAGAIN)
            abort(); /* an eventfd read fails only with EAGAIN */
    }
    return token;
    /* END STUDENT */
}

static void io_unpark(void *self)
{
    /* BEGIN STUDENT: io_driver.h contract 1: the owner may be in epoll_wait with no timeout, or about to be; how does this unpark reach it, and when can it skip the syscall? (docs/06-reactor.md#the-io-driver) */
    struct io_driver *d = self;
    /* acq_rel: release pairs with park's acquire; acquire orders the write after the swap */
    if (atomic_exchange_explicit(&d->state, NOTIFIED, memory_order_acq_rel) == PARKED) {
        uint64_t one = 1;
        atomic_fetch_add_explicit(&d->writes, 1, memory_order_relaxed);
        if (write(d->efd, &one, sizeof one) < 0 && errno != EAGAIN)
            abort(); /* EAGAIN: the counter is full, so it is readable anyway */
    }
    /* END STUDENT */
}

static uint64_t io_now(void *self)
{
    (void)self;
    return driver_monotonic_ns();
}

static const struct driver_vtable io_vtable = { .park = io_park, .unpark = io_unpark, .now = io_now };

struct io_driver *io_driver_new(struct reactor *r)
{
    struct io_driver *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->r = r;
    /* BEGIN STUDENT: io_driver.h contract 1: what can another thread write to end an epoll_wait, and how does dispatch tell it from a socket (reactor.h: REACTOR_TOKEN_WAKE)? (docs/06-reactor.md#the-io-driver) */
    d->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (d->efd < 0) {
        free(d);
        return NULL;
    }
    struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.u64 = REACTOR_TOKEN_WAKE };
    if (epoll_ctl(reactor_epoll_fd(r), EPOLL_CTL_ADD, d->efd, &ev) < 0) {
        close(d->efd);
        free(d);
        return NULL;
    }
    atomic_init(&d->state, EMPTY);
    atomic_init(&d->waits, 0);
    atomic_init(&d->writes, 0);
    /* END STUDENT */
    return d;
}

void io_driver_free(struct io_driver *d)
{
    if (!d)
        return;
    /* BEGIN STUDENT: reactor.h contract 5, for the driver's own descriptor: in which order do its registration and the descriptor go? (docs/06-reactor.md#the-io-driver) */
    epoll_ctl(reactor_epoll_fd(d->r), EPOLL_CTL_DEL, d->efd, NULL);
    close(d->efd);
    /* END STUDENT */
    free(d);
}

struct driver io_driver_driver(struct io_driver *d)
{
    return (struct driver){ .vtable = &io_vtable, .self = d };
}

uint64_t io_driver_test_waits(struct io_driver *d)
{
    /* BEGIN STUDENT: the epoll_wait count (docs/06-reactor.md#test-hooks) */
    return atomic_load_explicit(&d->waits, memory_order_relaxed); /* a statistic: relaxed */
    /* END STUDENT */
}

uint64_t io_driver_test_eventfd_writes(struct io_driver *d)
{
    /* BEGIN STUDENT: the eventfd write count (docs/06-reactor.md#test-hooks) */
    return atomic_load_explicit(&d->writes, memory_order_relaxed); /* a statistic: relaxed */
    /* END STUDENT */
}
