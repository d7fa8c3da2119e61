/* reactor.c - stage 06: the slab of registrations, readiness, dispatch.
 *
 * One mutex, `lock`, protects the slab (the pages, the free list, every
 * slot's fd, generation and `live` flag) and every slot's two wakers. The
 * readiness word of a slot is an atomic: dispatch sets bits in it under the
 * lock; clear_ready, on whichever thread found EAGAIN, may change it too.
 *
 *     readiness word:  bits 0-7   IO_READABLE | IO_WRITABLE | IO_HUP | IO_ERROR
 *                      bits 32-63 the tick: the dispatch turn that last set bits
 *
 * Two questions this file must answer; the chapter has you write the simple
 * answer to each first and run the test that breaks it:
 *   - poll_ready decides "not ready" and stores a waker; dispatch, on another
 *     thread, sets bits and takes wakers. What keeps a dispatch from falling
 *     between that decision and that store? (reactor.h contract 4;
 *     docs/06-reactor.md#poll-ready)
 *   - clear_ready comes after a syscall that found EAGAIN, and a dispatch may
 *     have set bits since the snapshot was taken, or may set them while the
 *     clear runs. Which bits are the snapshot's to clear? (reactor.h
 *     contract 2; docs/06-reactor.md#clearing-readiness-the-tick)
 *
 * The slab is pages of REACTOR_PAGE slots, allocated on demand and never
 * moved or freed before reactor_free: a struct io_reg * stays valid for as
 * long as the slot is registered, and a stale token can always be looked up
 * (it finds a slot whose generation moved on).
 */
#define _GNU_SOURCE
#define LAB_REACTOR_C /* this file defines the real reactor_dispatch (reactor.h, tracing) */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "reactor.h"
#include "trace.h"
#include "lab_todo.h"

#define REACTOR_PAGE 256u
#define REACTOR_MAX_PAGES 256u                  /* 65,536 registrations */
#define NO_SLOT UINT32_MAX
#define READ_MASK (IO_READABLE | IO_HUP | IO_ERROR)
#define WRITE_MASK (IO_WRITABLE | IO_ERROR)
#define BITS(word) ((unsigned)((word) & 0xffu))
#define TICK(word) ((uint32_t)((word) >> 32))

struct io_reg {
    _Atomic uint64_t ready;    /* readiness bits | tick << 32 (see above) */
    int todo_your_fields_here; /* TODO: what a slot needs: where it is, whether it is live, its generation, its descriptor, one waker per direction, the free list link (docs/06-reactor.md#the-slab-and-the-token) */
};

struct reactor {
    int epfd;
    int todo_your_fields_here; /* TODO: the lock and what it protects: the pages of slots, the free list, the tick; the counters of the stats hook (docs/06-reactor.md#the-slab-and-the-token) */
};


struct reactor *reactor_new(void)
{
    struct reactor *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (r->epfd < 0) {
        int e = errno;
        free(r);
        errno = e;
        return NULL;
    }
    LAB_TODO("the lock; an empty slab, no free slot (docs/06-reactor.md#the-slab-and-the-token)");
    return r;
}

void reactor_free(struct reactor *r)
{
    if (!r)
        return;
    (void)r;
    LAB_TODO("every page of slots, the lock (docs/06-reactor.md#the-slab-and-the-token)");
    close(r->epfd);
    free(r);
}

int reactor_epoll_fd(struct reactor *r) { return r->epfd; }

int reactor_register(struct reactor *r, int fd, struct io_reg **out)
{
    (void)r;
    (void)fd;
    (void)out;
    LAB_TODO("reactor.h contracts 1 and 5: which token does the registration get, so that no event meant for an earlier owner of the slot reaches it, and what is undone if epoll refuses? (docs/06-reactor.md#the-slab-and-the-token)");
}

void reactor_deregister(struct reactor *r, struct io_reg *reg)
{
    (void)r;
    (void)reg;
    LAB_TODO("reactor.h contracts 1 and 5: once this returns, which events may still arrive for the slot, and what must they find there? (docs/06-reactor.md#deregister-before-close)");
}

enum poll reactor_poll_ready(struct io_reg *reg, enum io_direction dir, struct context *cx,
                             struct io_ready *ev)
{
    (void)reg;
    (void)dir;
    (void)cx;
    (void)ev;
    LAB_TODO("reactor.h contracts 3 and 4: dispatch may set readiness on another thread between your look and your registration; what closes that window? (docs/06-reactor.md#poll-ready)");
}

void reactor_clear_ready(struct io_reg *reg, struct io_ready ev)
{
    (void)reg;
    (void)ev;
    LAB_TODO("reactor.h contract 2: an edge may arrive between the syscall's EAGAIN and this clear; which readiness may you clear, and when must you leave it? (docs/06-reactor.md#clearing-readiness-the-tick)");
}

void reactor_drop_waker(struct io_reg *reg, enum io_direction dir)
{
    (void)reg;
    (void)dir;
    LAB_TODO("tcp.h contract 2: the future is gone; who must stop holding its waker, and on which side of the unlock is it dropped? (docs/06-reactor.md#dropping-a-future-deregisters-at-once)");
}

bool reactor_dispatch(struct reactor *r, const struct epoll_event *events, int n)
{
    (void)r;
    (void)events;
    (void)n;
    LAB_TODO("reactor.h contracts 1 to 3: which events belong to a registration that is gone, how does readiness record which turn set it, and whom does each direction wake, under which lock? (docs/06-reactor.md#dispatch)");
}

#ifdef LAB_TRACE
/* Traced (given; docs/tracing.md): one turn of the reactor, drawn as a
 * slice; a readiness instant per event (the wake token's excepted); the
 * wakes made inside come from I/O. */
bool reactor_dispatch_traced(struct reactor *r, const struct epoll_event *events, int n)
{
    trace_source_begin(TRACE_SRC_IO);
    for (int i = 0; i < n; i++)
        if (events[i].data.u64 != REACTOR_TOKEN_WAKE)
            trace_io_ready(events[i].data.u64, events[i].events);
    bool woken = reactor_dispatch(r, events, n);
    trace_source_end();
    return woken;
}
#endif

uint64_t reactor_test_token(struct io_reg *reg)
{
    (void)reg;
    LAB_TODO("the slot's token, read under the lock (docs/06-reactor.md#test-hooks)");
}

struct reactor_stats reactor_test_stats(struct reactor *r)
{
    (void)r;
    LAB_TODO("the counters and live registrations, read under the lock (docs/06-reactor.md#test-hooks)");
}
