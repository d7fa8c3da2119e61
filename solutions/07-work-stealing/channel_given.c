/* channel_given.c - stage 07: the given part of the channel and the mutex
 * (channel.h): the unbounded channel's lock-free block list, creating,
 * closing and dropping. Your part is channel.c; what the two files share is
 * in channel_given.h.
 *
 * One pthread mutex per channel protects the bounded ring, the flags and
 * both wait lists. The unbounded channel's messages live in a lock-free
 * list of blocks instead (channel_given.h draws it): senders and the
 * receiver take no lock unless a receiver waits. Wakers are always woken
 * after the mutex is released: a wake may run scheduler code, and must
 * never run it under our lock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "channel_given.h"
#include "coop.h" /* the budget: taken by your send and receive (channel.c), before these */

/* ---- the unbounded channel's block list (channel_given.h draws it) -------------- */

static void block_reset(struct block *b, uint64_t start, struct block *prev)
{
    b->start = start;
    b->prev = prev;
    atomic_store_explicit(&b->next, NULL, memory_order_relaxed);  /* published by the linking CAS */
    atomic_store_explicit(&b->released, false, memory_order_relaxed);
    b->observed = 0;
    b->retired_next = NULL;
    for (unsigned k = 0; k < BLOCK_SLOTS; k++)
        atomic_store_explicit(&b->slots[k].ready, false, memory_order_relaxed);
}

/* b's successor, linking a new block if nobody has. Aborts when out of
 * memory: a claimed slot that can never be written would stall the
 * receiver for ever. */
static struct block *block_next(struct chan *c, struct block *b)
{
    /* acquire: pairs with the CAS that linked it (its fields are seen) */
    struct block *n = atomic_load_explicit(&b->next, memory_order_acquire);
    if (n)
        return n;
    /* acquire: pairs with the receiver's release exchange that gave it back */
    struct block *fresh = atomic_exchange_explicit(&c->spare, NULL, memory_order_acquire);
    if (!fresh && !(fresh = malloc(sizeof *fresh))) {
        fputs("chan: out of memory for a block of an unbounded channel\n", stderr);
        abort();
    }
    block_reset(fresh, b->start + BLOCK_SLOTS, b);
    /* release: publishes fresh's fields; acquire on failure: the winner's */
    if (atomic_compare_exchange_strong_explicit(&b->next, &n, fresh, memory_order_acq_rel,
                                                memory_order_acquire))
        return fresh;
    free(fresh); /* lost the race: use the winner's */
    return n;
}

/* Moves tx_block from `from` forward to b (never back); the sender that
 * moves it marks the blocks it passed released, with the index it observed
 * after the move. */
static void tx_block_advance(struct chan *c, struct block *from, struct block *b)
{
    struct block *cur = from;
    while (cur->start < b->start) {
        /* seq_cst: before our load of tx below, against a claim and the
         * claimer's load of tx_block (see the top of this section) */
        if (atomic_compare_exchange_weak_explicit(&c->tx_block, &cur, b, memory_order_seq_cst,
                                                  memory_order_seq_cst)) {
            uint64_t seen = tx_index(atomic_load_explicit(&c->tx, memory_order_seq_cst));
            for (struct block *p = cur, *n; p != b; p = n) {
                /* acquire: pairs with the CAS that linked it; read first:
                 * once released, p may be freed */
                n = atomic_load_explicit(&p->next, memory_order_acquire);
                p->observed = seen;
                /* release: pairs with the receiver's acquire load (observed is seen) */
                atomic_store_explicit(&p->released, true, memory_order_release);
            }
            return;
        }
        /* cur is the newer tx_block: not freed (not released while current) */
    }
}

/* Appends v; false when the channel is closed. *claim is tx before our
 * claim (its waiting receivers are the ones we must wake). */
static bool ulist_push(struct chan *c, uint64_t v, uint64_t *claim)
{
    /* seq_cst: before our load of tx_block, against tx_block_advance. One
     * fetch_add, no CAS loop: two cores claiming at once do not retry. */
    uint64_t t = atomic_fetch_add_explicit(&c->tx, TX_INDEX_ONE, memory_order_seq_cst);
    *claim = t;
    if (t & TX_CLOSED)
        return false; /* i is past the close index: nobody reads it */
    uint64_t i = tx_index(t);
    /* seq_cst: see above; it was not released when we loaded it, and slot
     * i, ours, is unread: the blocks from i's to it stay */
    struct block *tb = atomic_load_explicit(&c->tx_block, memory_order_seq_cst);
    struct block *b = tb;
    while (i < b->start)
        b = b->prev; /* overtaken: a later sender moved tx_block past our block */
    while (i >= b->start + BLOCK_SLOTS)
        b = block_next(c, b);
    tx_block_advance(c, tb, b);
    struct block_slot *slot = &b->slots[i - b->start];
    slot->value = v;
    /* release: pairs with the receiver's acquire load of ready; our last
     * touch of any block (after it, the block may be freed) */
    atomic_store_explicit(&slot->ready, true, memory_order_release);
    return true;
}

/* The receiver (rx_busy held): frees or keeps as the spare each retired
 * block that no sender can reach any more. */
static void ulist_reclaim(struct chan *c)
{
    uint64_t head = atomic_load_explicit(&c->rx_index, memory_order_relaxed); /* ours */
    struct block **pp = &c->retired;
    while (*pp) {
        struct block *b = *pp;
        /* acquire: pairs with the mover's release store (observed is seen) */
        if (!atomic_load_explicit(&b->released, memory_order_acquire) || head < b->observed) {
            pp = &b->retired_next;
            continue;
        }
        *pp = b->retired_next;
        /* release: pairs with a sender's acquire exchange of the spare */
        free(atomic_exchange_explicit(&c->spare, b, memory_order_release));
    }
}

/* The slot of message rx_index, moving to the next block at the end of one
 * (rx_busy held); NULL when that block is not linked yet. */
static struct block_slot *rx_slot(struct chan *c)
{
    struct block *b = c->rx_block;
    uint64_t i = atomic_load_explicit(&c->rx_index, memory_order_relaxed); /* ours */
    if (i == b->start + BLOCK_SLOTS) {
        /* acquire: pairs with the CAS that linked it */
        struct block *n = atomic_load_explicit(&b->next, memory_order_acquire);
        if (!n)
            return NULL;
        c->rx_block = n;
        b->retired_next = c->retired;
        c->retired = b;
        ulist_reclaim(c);
        b = n;
    }
    return &b->slots[i - b->start];
}

/* Closed, and every message claimed before the close received (a sender
 * still writing one wakes us when it is done)? */
static inline bool ulist_drained(struct chan *c)
{
    /* acquire: pairs with chan_close's release store (close_index is seen) */
    return atomic_load_explicit(&c->uclosed, memory_order_acquire) &&
           atomic_load_explicit(&c->rx_index, memory_order_relaxed) == c->close_index;
}

/* 1: *out is the next message; 0: none yet; -1: closed and drained. */
static int ulist_pop(struct chan *c, uint64_t *out)
{
    struct block_slot *slot = rx_slot(c);
    /* acquire: pairs with the writer's release store of ready */
    if (slot && atomic_load_explicit(&slot->ready, memory_order_acquire)) {
        *out = slot->value;
        atomic_store_explicit(&c->rx_index, atomic_load_explicit(&c->rx_index, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        return 1;
    }
    return ulist_drained(c) ? -1 : 0;
}

/* Is message rx_index there, or the channel closed? (rx_busy held) */
static bool ulist_ready(struct chan *c)
{
    struct block_slot *slot = rx_slot(c);
    if (slot && atomic_load_explicit(&slot->ready, memory_order_acquire))
        return true;
    return ulist_drained(c);
}

static inline void rx_enter(struct chan *c)
{
    /* acquire: pairs with the release in rx_leave (the last receiver's
     * reads and writes of the rx_ fields come first) */
    while (atomic_exchange_explicit(&c->rx_busy, true, memory_order_acquire))
        ; /* another receiver is in ulist_pop: a few loads, never a wait */
}

static inline void rx_leave(struct chan *c) { atomic_store_explicit(&c->rx_busy, false, memory_order_release); }

/* ---- the unbounded channel's send and receive --------------------------------- */

/* Under the lock: n receivers left the unbounded channel's wait list. */
static inline void rx_left(struct chan *c, unsigned n)
{
    /* relaxed: a sender that still sees them wakes nobody, or one too many */
    atomic_fetch_sub_explicit(&c->tx, n * TX_WAIT_ONE, memory_order_relaxed);
    atomic_fetch_sub_explicit(&c->rx_waiting, n, memory_order_relaxed);
}

/* Under the lock: the first waiting receiver's waker. */
static inline struct waker rxlist_pop_waker(struct chan *c)
{
    struct waker w = waitlist_pop_waker(&c->receivers);
    if (!waker_is_none(&w))
        rx_left(c, 1);
    return w;
}

/* Wakes the first waiting receiver, if any. */
static void rxlist_wake_one(struct chan *c)
{
    pthread_mutex_lock(&c->lock);
    struct waker rx = rxlist_pop_waker(c);
    pthread_mutex_unlock(&c->lock);
    waker_wake(&rx);
}

bool chan_unbounded_send(struct chan *c, uint64_t v)
{
    uint64_t claim;
    if (!ulist_push(c, v, &claim))
        return false;
    /* Our claim and a receiver's registration are RMWs on the same word:
     * one is first. A receiver that registered first is in claim's count;
     * one that came after sees our claim (chan_unbounded_recv_poll). No fence. */
    if (tx_waiters(claim) != 0)
        rxlist_wake_one(c);
    return true;
}

enum poll chan_unbounded_recv_poll(struct chan_recv *r, struct context *cx, uint64_t *out, enum chan_status *st)
{
    struct chan *c = r->c;
    for (;;) {
        rx_enter(c);
        int got = ulist_pop(c, out);
        rx_leave(c);
        if (got != 0) {
            if (r->w.registered) {
                pthread_mutex_lock(&c->lock);
                if (r->w.queued) {
                    waitlist_unlink(&c->receivers, &r->w);
                    rx_left(c, 1);
                }
                r->w.notified = false;
                pthread_mutex_unlock(&c->lock);
                r->w.registered = false;
            }
            /* more messages and more receivers: pass the wake on (relaxed:
             * only a hint; a sender wakes a receiver it sees waiting) */
            if (got > 0 && atomic_load_explicit(&c->rx_waiting, memory_order_relaxed) != 0)
                rxlist_wake_one(c);
            *st = got > 0 ? CHAN_OK : CHAN_CLOSED;
            return POLL_READY;
        }
        pthread_mutex_lock(&c->lock);
        r->w.notified = false;
        uint64_t t;
        if (!r->w.queued) {
            atomic_fetch_add_explicit(&c->rx_waiting, 1, memory_order_relaxed); /* under the lock */
            /* seq_cst (acquire: the writes of the senders we count as
             * done): every claim after this one sees us waiting */
            t = atomic_fetch_add_explicit(&c->tx, TX_WAIT_ONE, memory_order_seq_cst);
        } else {
            /* counted already; claims since are counted here too, which
             * only makes the test below more careful */
            t = atomic_load_explicit(&c->tx, memory_order_seq_cst);
        }
        waiter_register(&c->receivers, &r->w, cx);
        pthread_mutex_unlock(&c->lock);
        /* The re-check: the message a claim before ours wrote, or close. */
        rx_enter(c);
        bool ready = ulist_ready(c);
        uint64_t head = atomic_load_explicit(&c->rx_index, memory_order_relaxed);
        rx_leave(c);
        if (ready)
            continue;
        if (tx_index(t) > head) {
            /* A sender claimed before us and has not written yet: it did
             * not see us and will not wake us. Poll again soon (it is a few
             * instructions from its ready store). After a close, the
             * refused claims look the same until uclosed is seen. */
            waker_wake_by_ref(cx->waker);
        }
        return POLL_PENDING; /* every later claim sees us waiting */
    }
}

/* ---- the channel ------------------------------------------------------------------- */

struct chan *chan_new(size_t capacity)
{
    /* aligned: the cache lines of struct chan (sizeof is a multiple of 64) */
    struct chan *c = aligned_alloc(64, sizeof *c);
    if (!c)
        return NULL;
    memset(c, 0, sizeof *c);
    c->bounded = capacity > 0;
    if (c->bounded) {
        c->cap = capacity;
        c->buf = malloc(c->cap * sizeof *c->buf);
        if (!c->buf) {
            free(c);
            return NULL;
        }
    } else {
        struct block *b = malloc(sizeof *b);
        if (!b) {
            free(c);
            return NULL;
        }
        block_reset(b, 0, NULL);
        atomic_init(&c->tx_block, b);
        c->rx_block = b;
    }
    atomic_init(&c->tx, 0);
    atomic_init(&c->uclosed, false);
    atomic_init(&c->spare, NULL);
    atomic_init(&c->rx_waiting, 0);
    atomic_init(&c->rx_busy, false);
    atomic_init(&c->rx_index, 0);
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c->buf);
        if (!c->bounded)
            free(c->rx_block);
        free(c);
        return NULL;
    }
    return c;
}

void chan_free(struct chan *c)
{
    pthread_mutex_destroy(&c->lock);
    free(c->buf);
    if (!c->bounded) {
        struct block *b = c->rx_block;
        while (b) {
            struct block *n = atomic_load_explicit(&b->next, memory_order_relaxed);
            free(b);
            b = n;
        }
        for (b = c->retired; b;) {
            struct block *n = b->retired_next;
            free(b);
            b = n;
        }
        free(atomic_load_explicit(&c->spare, memory_order_relaxed));
    }
    free(c);
}

size_t chan_len(struct chan *c)
{
    if (!c->bounded) {
        /* a snapshot; claimed messages count as buffered */
        uint64_t tail = tx_index(atomic_load_explicit(&c->tx, memory_order_relaxed));
        if (atomic_load_explicit(&c->uclosed, memory_order_acquire)) /* refused claims do not */
            tail = c->close_index;
        uint64_t head = atomic_load_explicit(&c->rx_index, memory_order_relaxed);
        return tail > head ? (size_t)(tail - head) : 0;
    }
    pthread_mutex_lock(&c->lock);
    size_t n = c->len;
    pthread_mutex_unlock(&c->lock);
    return n;
}

void chan_close(struct chan *c)
{
    if (!c->bounded) {
        /* seq_cst: every claim after this one finds closed set and is
         * refused; the ones before it are delivered */
        uint64_t t = atomic_fetch_or_explicit(&c->tx, TX_CLOSED, memory_order_seq_cst);
        if (!(t & TX_CLOSED)) {
            c->close_index = tx_index(t);
            /* release: pairs with ulist_drained's acquire; before the wakes
             * below, so every receiver woken or registering later sees it */
            atomic_store_explicit(&c->uclosed, true, memory_order_release);
        }
    }
    pthread_mutex_lock(&c->lock);
    c->closed = true;
    /* move both lists out; wake them after unlocking */
    struct waitlist *lists[2] = { &c->receivers, &c->senders };
    struct waker wakers[64];
    size_t n = 0;
    unsigned nrx = 0;
    for (int i = 0; i < 2; i++) {
        while (lists[i]->head && n < 64) {
            wakers[n++] = waitlist_pop_waker(lists[i]);
            nrx += i == 0;
        }
    }
    if (!c->bounded && nrx)
        rx_left(c, nrx);
    bool more = c->receivers.head || c->senders.head;
    pthread_mutex_unlock(&c->lock);
    for (size_t i = 0; i < n; i++)
        waker_wake(&wakers[i]);
    if (more)
        chan_close(c); /* more than 64 waiters: again */
}

struct waker chan_ring_push(struct chan *c, uint64_t v)
{
    c->buf[(c->head + c->len) % c->cap] = v;
    c->len++;
    return waitlist_pop_waker(&c->receivers);
}

bool chan_try_send(struct chan *c, uint64_t v)
{
    if (!c->bounded)
        return chan_unbounded_send(c, v);
    pthread_mutex_lock(&c->lock);
    if (c->closed || !make_room(c)) {
        pthread_mutex_unlock(&c->lock);
        return false;
    }
    struct waker rx = chan_ring_push(c, v);
    pthread_mutex_unlock(&c->lock);
    waker_wake(&rx);
    return true;
}

void chan_send_init(struct chan_send *s, struct chan *c, uint64_t value)
{
    s->c = c;
    s->value = value;
    waiter_init(&s->w);
}

void chan_send_drop(struct chan_send *s)
{
    if (!s->w.registered)
        return; /* never on the list (or taken off by its own Ready): nothing to undo */
    struct chan *c = s->c;
    pthread_mutex_lock(&c->lock);
    struct waker pass = WAKER_NONE;
    if (s->w.queued)
        waitlist_unlink(&c->senders, &s->w);
    else if (s->w.notified && c->len < c->cap)
        pass = waitlist_pop_waker(&c->senders); /* our turn goes to the next sender */
    pthread_mutex_unlock(&c->lock);
    waker_drop(&s->w.waker);
    waker_wake(&pass);
}

void chan_recv_init(struct chan_recv *r, struct chan *c)
{
    r->c = c;
    waiter_init(&r->w);
}

void chan_recv_drop(struct chan_recv *r)
{
    if (!r->w.registered)
        return; /* never on the list (or taken off by its own Ready): nothing to undo */
    struct chan *c = r->c;
    pthread_mutex_lock(&c->lock);
    struct waker pass = WAKER_NONE;
    if (r->w.queued) {
        waitlist_unlink(&c->receivers, &r->w);
        if (!c->bounded)
            rx_left(c, 1);
    } else if (r->w.notified && (c->bounded ? c->len > 0 : chan_len(c) > 0)) {
        /* the message we were woken for */
        pass = c->bounded ? waitlist_pop_waker(&c->receivers) : rxlist_pop_waker(c);
    }
    pthread_mutex_unlock(&c->lock);
    waker_drop(&r->w.waker);
    waker_wake(&pass);
}

/* ---- the mutex ------------------------------------------------------------------------ */

int async_mutex_init(struct async_mutex *m)
{
    atomic_init(&m->state, 0);
    m->waiters.head = m->waiters.tail = NULL;
    return pthread_mutex_init(&m->lock, NULL);
}

void async_mutex_destroy(struct async_mutex *m) { pthread_mutex_destroy(&m->lock); }

void async_mutex_lock_init(struct async_mutex_lock *l, struct async_mutex *m)
{
    l->m = m;
    l->held = false;
    waiter_init(&l->w);
}

void async_mutex_lock_drop(struct async_mutex_lock *l)
{
    if (!l->w.registered)
        return; /* never waited (the fast path, or taken when free): nothing to undo */
    struct async_mutex *m = l->m;
    bool pass = false;
    pthread_mutex_lock(&m->lock);
    if (l->w.queued)
        waitlist_unlink(&m->waiters, &l->w);
    else if (l->w.notified)
        pass = true; /* handed the mutex, never took it: pass it on */
    pthread_mutex_unlock(&m->lock);
    waker_drop(&l->w.waker);
    if (pass)
        async_mutex_unlock(m);
}
