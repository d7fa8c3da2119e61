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

#define REACTOR_PAGE 256u
#define REACTOR_MAX_PAGES 256u                  /* 65,536 registrations */
#define NO_SLOT UINT32_MAX
#define READ_MASK (IO_READABLE | IO_HUP | IO_ERROR)
#define WRITE_MASK (IO_WRITABLE | IO_ERROR)
#define BITS(word) ((unsigned)((word) & 0xffu))
#define TICK(word) ((uint32_t)((word) >> 32))

struct io_reg {
    _Atomic uint64_t ready;    /* readiness bits | tick << 32 (see above) */
    /* BEGIN STUDENT FIELDS: what a slot needs: where it is, whether it is live, its generation, its descriptor, one waker per direction, the free list link (docs/06-reactor.md#the-slab-and-the-token) */
    struct reactor *r;
    uint32_t index;            /* fixed: the slot's place in the slab */
    uint32_t generation;       /* under lock: bumped at every deregister */
    uint32_t next_free;        /* under lock: the free list, while not live */
    bool live;                 /* under lock */
    int fd;                    /* under lock */
    struct waker reader;       /* under lock: woken when reading may progress */
    struct waker writer;       /* under lock: woken when writing may progress */
    /* END STUDENT */
};

struct reactor {
    int epfd;
    /* BEGIN STUDENT FIELDS: the lock and what it protects: the pages of slots, the free list, the tick; the counters of the stats hook (docs/06-reactor.md#the-slab-and-the-token) */
    pthread_mutex_t lock;      /* protects everything below and every slot but its readiness word */
    struct io_reg *pages[REACTOR_MAX_PAGES];
    uint32_t used;             /* slots ever handed out: [0, used) exist */
    uint32_t free_head;        /* first free slot below `used`, or NO_SLOT */
    uint32_t tick;             /* the current dispatch turn */
    size_t live;
    uint64_t turns, events, stale;
    /* END STUDENT */
};

/* BEGIN STUDENT HIDDEN */
static struct io_reg *slot_at(struct reactor *r, uint32_t index)
{
    return &r->pages[index / REACTOR_PAGE][index % REACTOR_PAGE];
}

static uint64_t token_of(const struct io_reg *reg)
{
    return (uint64_t)reg->generation << 32 | (uint64_t)(reg->index + 1);
}

/* The waker of a direction. */
static struct waker *waker_slot(struct io_reg *reg, enum io_direction dir)
{
    return dir == IO_READ ? &reg->reader : &reg->writer;
}

/* epoll's event bits in the reactor's words. */
static unsigned bits_of(uint32_t ev)
{
    unsigned bits = 0;
    if (ev & EPOLLIN)
        bits |= IO_READABLE;
    if (ev & EPOLLOUT)
        bits |= IO_WRITABLE;
    if (ev & EPOLLRDHUP)
        bits |= IO_HUP;
    if (ev & EPOLLHUP)
        bits |= IO_HUP | IO_WRITABLE; /* both ways gone: a writer finds EPIPE, not a wait */
    if (ev & EPOLLERR)
        bits |= IO_ERROR;
    return bits;
}
/* END STUDENT */

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
    /* BEGIN STUDENT: the lock; an empty slab, no free slot (docs/06-reactor.md#the-slab-and-the-token) */
    int rc = pthread_mutex_init(&r->lock, NULL);
    if (rc != 0) {
        close(r->epfd);
        free(r);
        errno = rc;
        return NULL;
    }
    r->free_head = NO_SLOT;
    /* END STUDENT */
    return r;
}

void reactor_free(struct reactor *r)
{
    if (!r)
        return;
    /* BEGIN STUDENT: every page of slots, the lock (docs/06-reactor.md#the-slab-and-the-token) */
    for (uint32_t p = 0; p < REACTOR_MAX_PAGES && r->pages[p]; p++)
        free(r->pages[p]);
    pthread_mutex_destroy(&r->lock);
    /* END STUDENT */
    close(r->epfd);
    free(r);
}

int reactor_epoll_fd(struct reactor *r) { return r->epfd; }

int reactor_register(struct reactor *r, int fd, struct io_reg **out)
{
    /* BEGIN STUDENT: reactor.h contracts 1 and 5: which token does the registration get, so that no event meant for an earlier owner of the slot reaches it, and what is undone if epoll refuses? (docs/06-reactor.md#the-slab-and-the-token) */
    pthread_mutex_lock(&r->lock);
    uint32_t index;
    if (r->free_head != NO_SLOT) {
        index = r->free_head;
        r->free_head = slot_at(r, index)->next_free;
    } else {
        if (r->used == REACTOR_PAGE * REACTOR_MAX_PAGES) {
            pthread_mutex_unlock(&r->lock);
            return -ENOMEM;
        }
        index = r->used;
        struct io_reg **page = &r->pages[index / REACTOR_PAGE];
        if (!*page) {
            *page = calloc(REACTOR_PAGE, sizeof **page);
            if (!*page) {
                pthread_mutex_unlock(&r->lock);
                return -ENOMEM;
            }
            for (uint32_t i = 0; i < REACTOR_PAGE; i++) {
                (*page)[i].r = r;
                (*page)[i].index = index + i;
                (*page)[i].reader = WAKER_NONE;
                (*page)[i].writer = WAKER_NONE;
            }
        }
        r->used++;
    }
    struct io_reg *reg = slot_at(r, index);
    reg->live = true;
    reg->fd = fd;
    /* no event can name this slot's new generation yet: relaxed is enough */
    atomic_store_explicit(&reg->ready, 0, memory_order_relaxed);
    struct epoll_event ev = { .events = REACTOR_EPOLL_EVENTS, .data.u64 = token_of(reg) };
    r->live++;
    pthread_mutex_unlock(&r->lock);

    if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        int e = errno;
        pthread_mutex_lock(&r->lock);
        reg->live = false;
        reg->generation++;
        reg->next_free = r->free_head;
        r->free_head = reg->index;
        r->live--;
        pthread_mutex_unlock(&r->lock);
        return -e;
    }
    *out = reg;
    return 0;
    /* END STUDENT */
}

void reactor_deregister(struct reactor *r, struct io_reg *reg)
{
    /* BEGIN STUDENT: reactor.h contracts 1 and 5: once this returns, which events may still arrive for the slot, and what must they find there? (docs/06-reactor.md#deregister-before-close) */
    epoll_ctl(r->epfd, EPOLL_CTL_DEL, reg->fd, NULL);
    pthread_mutex_lock(&r->lock);
    reg->live = false;
    reg->generation++; /* every token handed out for this slot is stale from now on */
    reg->fd = -1;
    /* relaxed: under the lock, and nobody polls a slot after deregistering
     * it; the next register starts from 0 again */
    atomic_store_explicit(&reg->ready, 0, memory_order_relaxed);
    struct waker rd = waker_take(&reg->reader);
    struct waker wr = waker_take(&reg->writer);
    reg->next_free = r->free_head;
    r->free_head = reg->index;
    r->live--;
    pthread_mutex_unlock(&r->lock);
    waker_drop(&rd); /* -1: the registration's reference */
    waker_drop(&wr); /* -1: the registration's reference */
    /* END STUDENT */
}

enum poll reactor_poll_ready(struct io_reg *reg, enum io_direction dir, struct context *cx,
                             struct io_ready *ev)
{
    /* BEGIN STUDENT: reactor.h contracts 3 and 4: dispatch may set readiness on another thread between your look and your registration; what closes that window? (docs/06-reactor.md#poll-ready) */
    unsigned mask = dir == IO_READ ? READ_MASK : WRITE_MASK;
    /* acquire: pairs with dispatch's release CAS. Bits and tick come in one
     * load, so they always belong together; the pairing makes whatever the
     * dispatching thread wrote before it set the bits visible to the task
     * that acts on them (a second thread's poll sees a settled slot). */
    uint64_t word = atomic_load_explicit(&reg->ready, memory_order_acquire);
    if (BITS(word) & mask) {
        *ev = (struct io_ready){ .bits = BITS(word) & mask, .tick = TICK(word) };
        return POLL_READY;
    }
    struct reactor *r = reg->r;
    pthread_mutex_lock(&r->lock);
    /* under the lock, dispatch cannot set bits between this load and the store below */
    word = atomic_load_explicit(&reg->ready, memory_order_acquire);
    if (BITS(word) & mask) {
        pthread_mutex_unlock(&r->lock);
        *ev = (struct io_ready){ .bits = BITS(word) & mask, .tick = TICK(word) };
        return POLL_READY;
    }
    waker_clone_from(waker_slot(reg, dir), cx->waker); /* +1 when it clones: the registration's */
    pthread_mutex_unlock(&r->lock);
    return POLL_PENDING;
    /* END STUDENT */
}

void reactor_clear_ready(struct io_reg *reg, struct io_ready ev)
{
    /* BEGIN STUDENT: reactor.h contract 2: an edge may arrive between the syscall's EAGAIN and this clear; which readiness may you clear, and when must you leave it? (docs/06-reactor.md#clearing-readiness-the-tick) */
    uint64_t clear = ev.bits & (IO_READABLE | IO_WRITABLE);
    /* relaxed: the CAS below re-reads whatever a dispatch wrote */
    uint64_t word = atomic_load_explicit(&reg->ready, memory_order_relaxed);
    while (TICK(word) == ev.tick && (word & clear)) {
        /* relaxed: clearing publishes nothing; a failed CAS reloads and re-checks the tick */
        if (atomic_compare_exchange_weak_explicit(&reg->ready, &word, word & ~clear, memory_order_relaxed,
                                                  memory_order_relaxed))
            break;
    }
    /* END STUDENT */
}

void reactor_drop_waker(struct io_reg *reg, enum io_direction dir)
{
    /* BEGIN STUDENT: tcp.h contract 2: the future is gone; who must stop holding its waker, and on which side of the unlock is it dropped? (docs/06-reactor.md#dropping-a-future-deregisters-at-once) */
    struct reactor *r = reg->r;
    pthread_mutex_lock(&r->lock);
    struct waker w = waker_take(waker_slot(reg, dir));
    pthread_mutex_unlock(&r->lock);
    waker_drop(&w); /* -1: the registration's reference */
    /* END STUDENT */
}

bool reactor_dispatch(struct reactor *r, const struct epoll_event *events, int n)
{
    /* BEGIN STUDENT: reactor.h contracts 1 to 3: which events belong to a registration that is gone, how does readiness record which turn set it, and whom does each direction wake, under which lock? (docs/06-reactor.md#dispatch) */
    enum { BATCH = 64 };
    struct waker batch[2 * BATCH];
    bool woken = false;
    int i = 0;
    pthread_mutex_lock(&r->lock);
    uint32_t tick = ++r->tick;
    r->turns++;
    for (;;) {
        size_t k = 0;
        for (; i < n && k + 2 <= 2 * BATCH; i++) {
            uint64_t token = events[i].data.u64;
            if (token == REACTOR_TOKEN_WAKE) {
                woken = true;
                continue;
            }
            uint32_t index = (uint32_t)(token & 0xffffffffu) - 1;
            struct io_reg *reg = index < r->used ? slot_at(r, index) : NULL;
            if (!reg || !reg->live || reg->generation != (uint32_t)(token >> 32)) {
                r->stale++; /* a closed descriptor's event, or a slot reused since: nobody's */
                continue;
            }
            r->events++;
            unsigned bits = bits_of(events[i].events);
            /* relaxed load: the CAS below publishes */
            uint64_t word = atomic_load_explicit(&reg->ready, memory_order_relaxed);
            uint64_t next;
            do {
                next = (uint64_t)tick << 32 | BITS(word) | bits;
                /* release: pairs with poll_ready's acquire load (the tick goes with its bits) */
            } while (!atomic_compare_exchange_weak_explicit(&reg->ready, &word, next, memory_order_release,
                                                            memory_order_relaxed));
            if (bits & READ_MASK)
                batch[k++] = waker_take(&reg->reader); /* the registration's reference moves to the batch */
            if (bits & WRITE_MASK)
                batch[k++] = waker_take(&reg->writer);
        }
        pthread_mutex_unlock(&r->lock);
        for (size_t j = 0; j < k; j++)
            waker_wake(&batch[j]); /* consumes the reference; a none waker is ignored */
        if (i >= n)
            break;
        pthread_mutex_lock(&r->lock);
    }
    return woken;
    /* END STUDENT */
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
    /* BEGIN STUDENT: the slot's token, read under the lock (docs/06-reactor.md#test-hooks) */
    pthread_mutex_lock(&reg->r->lock);
    uint64_t t = token_of(reg);
    pthread_mutex_unlock(&reg->r->lock);
    return t;
    /* END STUDENT */
}

struct reactor_stats reactor_test_stats(struct reactor *r)
{
    /* BEGIN STUDENT: the counters and live registrations, read under the lock (docs/06-reactor.md#test-hooks) */
    pthread_mutex_lock(&r->lock);
    struct reactor_stats s = { .turns = r->turns, .events = r->events, .stale = r->stale, .registrations = r->live };
    pthread_mutex_unlock(&r->lock);
    return s;
    /* END STUDENT */
}
