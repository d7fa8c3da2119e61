/* reactor.h - stage 06: the kernel as another waker.
 *
 * A reactor turns "this descriptor is ready" (epoll, edge-triggered) into
 * "wake the task that waits for it". It keeps one registration per
 * descriptor in a slab, and hands epoll a token, not the descriptor:
 *
 *     token = generation << 32 | (slab index + 1)        (0 is the I/O driver's eventfd)
 *
 * so an event that was queued for a descriptor closed since, whose number
 * and whose slab slot have been reused, names a generation that no longer
 * exists, and wakes nobody.
 *
 * Per registration: a readiness word (readable, writable, hang-up, error,
 * and the tick of the turn that last set them) and one waker per direction.
 * An operation (tcp.c) puts poll_ready and one non-blocking syscall together,
 * and hands the snapshot poll_ready gave it back to reactor_clear_ready when
 * the syscall says the readiness is used up; docs/06-reactor.md#drain-to-eagain
 * builds that loop from a first version that hangs.
 *
 * The contract (docs/06-reactor.md#the-contract):
 *  1. Tokens carry a generation: an event for a token whose registration was
 *     deregistered (or whose slot now belongs to another descriptor) changes
 *     no readiness and wakes no waker.
 *  2. Readiness is cleared only by reactor_clear_ready, and only the bits of
 *     the snapshot it is given, and only while the word still carries that
 *     snapshot's tick: an edge dispatched after the snapshot (during the
 *     syscall that found EAGAIN) is kept. Hang-up and error are never
 *     cleared: they are final.
 *  3. One waker per direction: a reader and a writer wait on one
 *     registration at once, and an event wakes the waker of each direction
 *     it makes ready (readable: the reader; writable: the writer; hang-up:
 *     the reader, and the writer too when both directions are gone; error:
 *     both), and no other.
 *  4. poll_ready checks and registers under the lock dispatch sets readiness
 *     under, so an event is either seen by the check or finds the waker.
 *     Wakers are woken, and dropped, after the lock is released (a drop
 *     runs the executor's code, as a wake does).
 *  5. reactor_deregister removes the descriptor from epoll (before the
 *     caller closes it: epoll watches the open file, not the number, and a
 *     dup() of it would keep the registration alive), bumps the slot's
 *     generation and drops both wakers at once.
 *
 * Threads: register, poll_ready, clear_ready, drop_waker and deregister from
 * any thread; dispatch from one thread at a time (the one that parks).
 * Ownership: reactor_new returns the only reference; free it when every
 * registration is gone. A registration belongs to whoever registered it,
 * until reactor_deregister.
 */
#ifndef LAB_REACTOR_H
#define LAB_REACTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "future.h"

/* Readiness bits. */
#define IO_READABLE 1u
#define IO_WRITABLE 2u
#define IO_HUP 4u   /* the peer closed (EPOLLRDHUP), or both directions are gone (EPOLLHUP) */
#define IO_ERROR 8u /* EPOLLERR: a pending error (SO_ERROR) */

/* The token of the I/O driver's eventfd (io_driver.h): never a registration. */
#define REACTOR_TOKEN_WAKE UINT64_C(0)

/* The events every registration asks epoll for (edge-triggered). */
#define REACTOR_EPOLL_EVENTS (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET)

enum io_direction { IO_READ = 0, IO_WRITE = 1 };

struct reactor;
struct io_reg; /* one registration: a slot of the slab */

/* What poll_ready saw: the bits that made it ready and the tick they carry.
 * Hand it back to reactor_clear_ready after a syscall that found EAGAIN. */
struct io_ready {
    unsigned bits;
    uint32_t tick;
};

/* An epoll instance and an empty slab. NULL on failure (errno says why). */
struct reactor *reactor_new(void);
/* Every registration must be gone. */
void reactor_free(struct reactor *r);
/* The epoll descriptor (the I/O driver waits on it). */
int reactor_epoll_fd(struct reactor *r);

/* Registers fd (non-blocking already) for both directions, edge-triggered.
 * 0 and *out, or -errno (ENOMEM when the slab is full). */
int reactor_register(struct reactor *r, int fd, struct io_reg **out);
/* Contract 5: out of epoll, generation bumped, wakers dropped, slot freed.
 * reg is gone afterwards. Call it before closing the descriptor. */
void reactor_deregister(struct reactor *r, struct io_reg *reg);

/* Ready when the direction's readiness (readable or hang-up or error for
 * IO_READ; writable or error for IO_WRITE) is set: *ev is the snapshot.
 * Otherwise stores cx's waker as the direction's (the latest waker wins; a
 * re-poll by the same task clones nothing) and returns Pending. */
enum poll reactor_poll_ready(struct io_reg *reg, enum io_direction dir, struct context *cx,
                             struct io_ready *ev);
/* Contract 2: clears ev's readable/writable bits if the word still carries
 * ev's tick. */
void reactor_clear_ready(struct io_reg *reg, struct io_ready ev);
/* The direction's stored waker, dropped (a future waiting on it was dropped). */
void reactor_drop_waker(struct io_reg *reg, enum io_direction dir);

/* Applies n events from epoll_wait as one turn (a new tick): readiness set
 * and wakers woken, stale tokens skipped (contract 1). Returns true when the
 * wake token (REACTOR_TOKEN_WAKE) was among them. */
bool reactor_dispatch(struct reactor *r, const struct epoll_event *events, int n);

/* ---- tracing (common/tracing/trace.h, docs/tracing.md) ----
 * Built with -DLAB_TRACE (make trace), every call of reactor_dispatch made
 * outside reactor.c (the I/O driver's) goes through a traced wrapper at the
 * end of reactor.c: the turn is drawn as a "reactor" slice, each event as a
 * "readiness" instant, and the wakes inside count as I/O wakes. Without
 * -DLAB_TRACE none of this exists. */
#if defined(LAB_TRACE) && !defined(LAB_REACTOR_C)
bool reactor_dispatch_traced(struct reactor *r, const struct epoll_event *events, int n);
#define reactor_dispatch(r, events, n) reactor_dispatch_traced(r, events, n)
#endif

/* ---- test hooks ---- */

/* The epoll token of a registration (to deliver it again, stale, later). */
uint64_t reactor_test_token(struct io_reg *reg);

struct reactor_stats {
    uint64_t turns;         /* dispatch calls */
    uint64_t events;        /* events applied to a live registration */
    uint64_t stale;         /* events whose token named no live registration */
    size_t registrations;   /* live registrations now */
};
struct reactor_stats reactor_test_stats(struct reactor *r);

#endif
