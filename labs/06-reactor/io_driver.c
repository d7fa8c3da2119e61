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
#include "lab_todo.h"

enum { EMPTY = 0, PARKED = 1, NOTIFIED = 2 };
#define IO_EVENTS 256

struct io_driver {
    struct reactor *r;
    int todo_your_fields_here; /* TODO: the eventfd; the state word; the counters of the test hooks (docs/06-reactor.md#the-io-driver) */
};


static bool io_park(void *self, int64_t timeout_ns)
{
    (void)self;
    (void)timeout_ns;
    LAB_TODO("io_driver.h contracts 1, 2 and 4: when may park return without asking the kernel, and when must it ask anyway (park(0))? What may it never drop of what epoll_wait returned? (docs/06-reactor.md#the-io-driver, #ready-io-beside-busy-tasks)");
}

static void io_unpark(void *self)
{
    (void)self;
    LAB_TODO("io_driver.h contract 1: the owner may be in epoll_wait with no timeout, or about to be; how does this unpark reach it, and when can it skip the syscall? (docs/06-reactor.md#the-io-driver)");
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
    (void)r;
    LAB_TODO("io_driver.h contract 1: what can another thread write to end an epoll_wait, and how does dispatch tell it from a socket (reactor.h: REACTOR_TOKEN_WAKE)? (docs/06-reactor.md#the-io-driver)");
    return d;
}

void io_driver_free(struct io_driver *d)
{
    if (!d)
        return;
    (void)d;
    LAB_TODO("reactor.h contract 5, for the driver's own descriptor: in which order do its registration and the descriptor go? (docs/06-reactor.md#the-io-driver)");
    free(d);
}

struct driver io_driver_driver(struct io_driver *d)
{
    return (struct driver){ .vtable = &io_vtable, .self = d };
}

uint64_t io_driver_test_waits(struct io_driver *d)
{
    (void)d;
    LAB_TODO("the epoll_wait count (docs/06-reactor.md#test-hooks)");
}

uint64_t io_driver_test_eventfd_writes(struct io_driver *d)
{
    (void)d;
    LAB_TODO("the eventfd write count (docs/06-reactor.md#test-hooks)");
}
