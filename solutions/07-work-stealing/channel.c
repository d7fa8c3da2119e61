/* channel.c - stage 07: the async channel's send and receive, and the async
 * mutex's lock and unlock (channel.h).
 *
 * Your part is this file: the four functions below. The rest is given:
 * channel_given.c (the unbounded channel's lock-free block list, creating,
 * closing, dropping) and channel_given.h (struct chan and the helpers these
 * four call: the wait lists, make_room and chan_ring_push for the bounded ring,
 * chan_unbounded_send and chan_unbounded_recv_poll).
 *
 * One pthread mutex per channel protects the bounded ring, the flags and
 * both wait lists. Wakers are always woken after the mutex is released: a
 * wake may run scheduler code, and must never run it under our lock.
 */
#include "channel.h"
#include "channel_given.h"
#include "coop.h"

/* ---- the channel ------------------------------------------------------------------- */

enum poll chan_send_poll(struct chan_send *s, struct context *cx, enum chan_status *st)
{
    /* BEGIN STUDENT: channel.h contracts 2 to 4: when may a send do nothing this poll, when must it wait, and whom must it wake? (an unbounded channel: chan_unbounded_send, given) (docs/07b-channels.md#channels) */
    if (!coop_proceed(cx))
        return POLL_PENDING; /* nothing sent: poll me again later */
    struct chan *c = s->c;
    if (!c->bounded) {
        *st = chan_unbounded_send(c, s->value) ? CHAN_OK : CHAN_CLOSED; /* never waits */
        return POLL_READY;
    }
    pthread_mutex_lock(&c->lock);
    if (c->closed) {
        if (s->w.queued)
            waitlist_unlink(&c->senders, &s->w);
        s->w.notified = false;
        s->w.registered = false;
        pthread_mutex_unlock(&c->lock);
        *st = CHAN_CLOSED;
        return POLL_READY;
    }
    /* FIFO among senders: a newcomer does not pass a queued sender */
    if ((!c->senders.head || s->w.notified || c->senders.head == &s->w) && make_room(c)) {
        if (s->w.queued)
            waitlist_unlink(&c->senders, &s->w);
        s->w.notified = false;
        s->w.registered = false; /* off the list, not notified: drop needs no lock */
        struct waker rx = chan_ring_push(c, s->value);
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

enum poll chan_recv_poll(struct chan_recv *r, struct context *cx, uint64_t *out, enum chan_status *st)
{
    /* BEGIN STUDENT: channel.h contracts 1, 3 and 4: the budget may run out in this poll; what must not have happened yet when it does, and whom does taking a message free? (an unbounded channel: chan_unbounded_recv_poll, given) (docs/07b-channels.md#channels) */
    if (!coop_proceed(cx))
        return POLL_PENDING; /* no message taken: none lost */
    struct chan *c = r->c;
    if (!c->bounded)
        return chan_unbounded_recv_poll(r, cx, out, st); /* the block list (given) */
    pthread_mutex_lock(&c->lock);
    if (c->len > 0) {
        *out = c->buf[c->head];
        c->head = (c->head + 1) % c->cap;
        c->len--;
        if (r->w.queued)
            waitlist_unlink(&c->receivers, &r->w);
        r->w.notified = false;
        r->w.registered = false; /* off the list, not notified: drop needs no lock */
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
        r->w.notified = false;
        r->w.registered = false;
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

/* ---- the mutex ------------------------------------------------------------------------ */

enum poll async_mutex_lock_poll(struct async_mutex_lock *l, struct context *cx)
{
    /* BEGIN STUDENT: the async mutex: when the holder unlocks, who gets the mutex, and how does a woken waiter know it holds it already? What comes before everything else in a poll? (docs/07b-channels.md#the-mutex) */
    if (!coop_proceed(cx))
        return POLL_PENDING;
    struct async_mutex *m = l->m;
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

void async_mutex_unlock(struct async_mutex *m)
{
    /* BEGIN STUDENT: the async mutex: with a waiter queued, is the mutex ever free between this unlock and that waiter's poll? (docs/07b-channels.md#the-mutex) */
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
