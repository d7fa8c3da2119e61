/* channel.c - stage 07: the async channel and the async mutex (channel.h).
 *
 * One pthread mutex per channel protects its buffer, its flags and both
 * wait lists. Wakers are always woken after the mutex is released: a wake
 * may run scheduler code, and must never run it under our lock.
 */
#include <stdlib.h>
#include <string.h>

#include "channel.h"
#include "coop.h"

struct chan {
    pthread_mutex_t lock;    /* protects everything below */
    uint64_t *buf;           /* ring of cap slots */
    size_t cap;              /* slots allocated */
    size_t head, len;
    bool bounded;
    bool closed;
    struct waitlist receivers, senders;
};

/* ---- wait lists (given) ------------------------------------------------------- */

static inline void waiter_init(struct waiter *w)
{
    w->prev = w->next = NULL;
    w->waker = WAKER_NONE;
    w->queued = false;
    w->notified = false;
}

static inline void waitlist_push(struct waitlist *l, struct waiter *w)
{
    w->next = NULL;
    w->prev = l->tail;
    if (l->tail)
        l->tail->next = w;
    else
        l->head = w;
    l->tail = w;
    w->queued = true;
}

static inline void waitlist_unlink(struct waitlist *l, struct waiter *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        l->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        l->tail = w->prev;
    w->prev = w->next = NULL;
    w->queued = false;
}

/* Takes the first waiter off the list, marks it notified, and moves its
 * waker out for the caller to wake after unlocking. WAKER_NONE if none. */
static inline struct waker waitlist_pop_waker(struct waitlist *l)
{
    struct waiter *w = l->head;
    if (!w)
        return WAKER_NONE;
    waitlist_unlink(l, w);
    w->notified = true;
    return waker_take(&w->waker);
}

/* Registers w (first time: at the tail) with cx's waker. Under the lock. */
static inline void waiter_register(struct waitlist *l, struct waiter *w, struct context *cx)
{
    waker_clone_from(&w->waker, cx->waker);
    if (!w->queued)
        waitlist_push(l, w);
}

/* ---- the channel ------------------------------------------------------------------- */

struct chan *chan_new(size_t capacity)
{
    struct chan *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->bounded = capacity > 0;
    c->cap = capacity > 0 ? capacity : 16;
    c->buf = malloc(c->cap * sizeof *c->buf);
    if (!c->buf) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

void chan_free(struct chan *c)
{
    pthread_mutex_destroy(&c->lock);
    free(c->buf);
    free(c);
}

size_t chan_len(struct chan *c)
{
    pthread_mutex_lock(&c->lock);
    size_t n = c->len;
    pthread_mutex_unlock(&c->lock);
    return n;
}

void chan_close(struct chan *c)
{
    pthread_mutex_lock(&c->lock);
    c->closed = true;
    /* move both lists out; wake them after unlocking */
    struct waitlist *lists[2] = { &c->receivers, &c->senders };
    struct waker wakers[64];
    size_t n = 0;
    for (int i = 0; i < 2; i++) {
        while (lists[i]->head && n < 64)
            wakers[n++] = waitlist_pop_waker(lists[i]);
    }
    bool more = c->receivers.head || c->senders.head;
    pthread_mutex_unlock(&c->lock);
    for (size_t i = 0; i < n; i++)
        waker_wake(&wakers[i]);
    if (more)
        chan_close(c); /* more than 64 waiters: again */
}

/* Under the lock: room for one more? Grows an unbounded ring. */
static inline bool make_room(struct chan *c)
{
    if (c->len < c->cap)
        return true;
    if (c->bounded)
        return false;
    size_t ncap = c->cap * 2;
    uint64_t *nb = malloc(ncap * sizeof *nb);
    if (!nb)
        return false;
    for (size_t i = 0; i < c->len; i++)
        nb[i] = c->buf[(c->head + i) % c->cap];
    free(c->buf);
    c->buf = nb;
    c->cap = ncap;
    c->head = 0;
    return true;
}

/* Under the lock: appends v and takes a receiver to wake. */
static inline struct waker push_value(struct chan *c, uint64_t v)
{
    c->buf[(c->head + c->len) % c->cap] = v;
    c->len++;
    return waitlist_pop_waker(&c->receivers);
}

bool chan_try_send(struct chan *c, uint64_t v)
{
    pthread_mutex_lock(&c->lock);
    if (c->closed || !make_room(c)) {
        pthread_mutex_unlock(&c->lock);
        return false;
    }
    struct waker rx = push_value(c, v);
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

enum poll chan_send_poll(struct chan_send *s, struct context *cx, enum chan_status *st)
{
    /* BEGIN STUDENT: the budget first; then closed, room (send and wake a receiver), or wait on the senders' list (docs/07-work-stealing.md#channels) */
    if (!coop_proceed(cx))
        return POLL_PENDING; /* nothing sent: poll me again later */
    struct chan *c = s->c;
    pthread_mutex_lock(&c->lock);
    if (c->closed) {
        if (s->w.queued)
            waitlist_unlink(&c->senders, &s->w);
        pthread_mutex_unlock(&c->lock);
        *st = CHAN_CLOSED;
        return POLL_READY;
    }
    /* FIFO among senders: a newcomer does not pass a queued sender */
    if ((!c->senders.head || s->w.notified || c->senders.head == &s->w) && make_room(c)) {
        if (s->w.queued)
            waitlist_unlink(&c->senders, &s->w);
        s->w.notified = false;
        struct waker rx = push_value(c, s->value);
        /* room left and another sender waiting: pass the turn on */
        struct waker tx = c->len < c->cap ? waitlist_pop_waker(&c->senders) : WAKER_NONE;
        pthread_mutex_unlock(&c->lock);
        waker_wake(&rx);
        waker_wake(&tx);
        *st = CHAN_OK;
        return POLL_READY;
    }
    s->w.notified = false;
    waiter_register(&c->senders, &s->w, cx);
    pthread_mutex_unlock(&c->lock);
    return POLL_PENDING;
    /* END STUDENT */
}

void chan_send_drop(struct chan_send *s)
{
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

enum poll chan_recv_poll(struct chan_recv *r, struct context *cx, uint64_t *out, enum chan_status *st)
{
    /* BEGIN STUDENT: the budget BEFORE taking a message; then a message (and wake a sender: a slot is free), closed, or wait on the receivers' list (docs/07-work-stealing.md#channels) */
    if (!coop_proceed(cx))
        return POLL_PENDING; /* no message taken: none lost */
    struct chan *c = r->c;
    pthread_mutex_lock(&c->lock);
    if (c->len > 0) {
        *out = c->buf[c->head];
        c->head = (c->head + 1) % c->cap;
        c->len--;
        if (r->w.queued)
            waitlist_unlink(&c->receivers, &r->w);
        r->w.notified = false;
        struct waker tx = waitlist_pop_waker(&c->senders);
        /* more messages and more receivers: pass the wake on */
        struct waker rx = c->len > 0 ? waitlist_pop_waker(&c->receivers) : WAKER_NONE;
        pthread_mutex_unlock(&c->lock);
        waker_wake(&tx);
        waker_wake(&rx);
        *st = CHAN_OK;
        return POLL_READY;
    }
    if (c->closed) {
        if (r->w.queued)
            waitlist_unlink(&c->receivers, &r->w);
        pthread_mutex_unlock(&c->lock);
        *st = CHAN_CLOSED;
        return POLL_READY;
    }
    r->w.notified = false;
    waiter_register(&c->receivers, &r->w, cx);
    pthread_mutex_unlock(&c->lock);
    return POLL_PENDING;
    /* END STUDENT */
}

void chan_recv_drop(struct chan_recv *r)
{
    struct chan *c = r->c;
    pthread_mutex_lock(&c->lock);
    struct waker pass = WAKER_NONE;
    if (r->w.queued)
        waitlist_unlink(&c->receivers, &r->w);
    else if (r->w.notified && c->len > 0)
        pass = waitlist_pop_waker(&c->receivers); /* the message we were woken for */
    pthread_mutex_unlock(&c->lock);
    waker_drop(&r->w.waker);
    waker_wake(&pass);
}

/* ---- the mutex ------------------------------------------------------------------------ */

void amutex_init(struct amutex *m)
{
    atomic_init(&m->state, 0);
    pthread_mutex_init(&m->lock, NULL);
    m->waiters.head = m->waiters.tail = NULL;
}

void amutex_destroy(struct amutex *m) { pthread_mutex_destroy(&m->lock); }

void amutex_lock_init(struct amutex_lock *l, struct amutex *m)
{
    l->m = m;
    l->held = false;
    waiter_init(&l->w);
}

enum poll amutex_lock_poll(struct amutex_lock *l, struct context *cx)
{
    /* BEGIN STUDENT: the budget first; the fast path (a CAS from free); else under the lock: handed over, or take it by exchanging in "contended", or wait (docs/07-work-stealing.md#the-mutex) */
    if (!coop_proceed(cx))
        return POLL_PENDING;
    struct amutex *m = l->m;
    int expect = 0;
    /* acquire: pairs with the release of the unlock that freed it */
    if (!l->w.queued && !l->w.notified &&
        atomic_compare_exchange_strong_explicit(&m->state, &expect, 1, memory_order_acquire,
                                                memory_order_relaxed)) {
        l->held = true;
        return POLL_READY;
    }
    pthread_mutex_lock(&m->lock);
    if (l->w.notified) {
        /* handed over by unlock: it stayed locked for us (the wake that
         * brought us here ordered the holder's writes before ours) */
        l->w.notified = false;
        l->held = true;
        pthread_mutex_unlock(&m->lock);
        return POLL_READY;
    }
    /* acq_rel: acquire if it was free (the last holder's release), release
     * so that the holder's unlock, which must now take the slow path, is
     * ordered after our registration (the lock orders it anyway) */
    if (!l->w.queued && atomic_exchange_explicit(&m->state, 2, memory_order_acq_rel) == 0) {
        l->held = true; /* it was free: ours, marked contended (harmless) */
        pthread_mutex_unlock(&m->lock);
        return POLL_READY;
    }
    waiter_register(&m->waiters, &l->w, cx);
    pthread_mutex_unlock(&m->lock);
    return POLL_PENDING;
    /* END STUDENT */
}

void amutex_unlock(struct amutex *m)
{
    /* BEGIN STUDENT: the fast path (a CAS from "locked, no waiter" to free); else under the lock hand it to the first waiter (it stays locked), or free it (docs/07-work-stealing.md#the-mutex) */
    int expect = 1;
    /* release: our critical section before the next holder's */
    if (atomic_compare_exchange_strong_explicit(&m->state, &expect, 0, memory_order_release,
                                                memory_order_relaxed))
        return;
    pthread_mutex_lock(&m->lock);
    struct waker next = waitlist_pop_waker(&m->waiters);
    if (waker_is_none(&next))
        atomic_store_explicit(&m->state, 0, memory_order_release); /* nobody waits: free */
    else
        atomic_store_explicit(&m->state, m->waiters.head ? 2 : 1, memory_order_relaxed); /* handed over */
    pthread_mutex_unlock(&m->lock);
    waker_wake(&next);
    /* END STUDENT */
}

void amutex_lock_drop(struct amutex_lock *l)
{
    struct amutex *m = l->m;
    bool pass = false;
    pthread_mutex_lock(&m->lock);
    if (l->w.queued)
        waitlist_unlink(&m->waiters, &l->w);
    else if (l->w.notified)
        pass = true; /* handed the mutex, never took it: pass it on */
    pthread_mutex_unlock(&m->lock);
    waker_drop(&l->w.waker);
    if (pass)
        amutex_unlock(m);
}
