/* channel.h - stage 07: an async channel of 64-bit messages, bounded or
 * unbounded, with intrusive waiters, and an async mutex.
 *
 * Waiting costs no allocation: a send or receive future that must wait links
 * a node that lives inside the future itself onto the channel's list of
 * waiters (the future is pinned after its first poll, future.h, so the node
 * cannot move). Dropping the future unlinks it.
 *
 * The contract (docs/07b-channels.md#the-contract):
 *   1. Messages arrive in the order they were sent, each exactly once.
 *   2. A bounded channel holds at most `capacity` messages: a send waits
 *      while it is full. An unbounded channel (capacity 0) never makes a
 *      sender wait (its buffer grows): it is a lock-free list of blocks,
 *      and a send or a receive that does not wait takes no lock.
 *   3. Waiters are woken in FIFO order, one per message or freed slot; a
 *      woken receiver that is dropped before it receives passes the wake on.
 *   4. Budget: every poll of a send or a receive first calls coop_proceed
 *      (common/coop.h); when the budget is spent it returns Pending having
 *      done nothing (no message taken, none sent).
 *   5. chan_close: every waiter is woken; receives drain what is left, then
 *      say CHAN_CLOSED; sends say CHAN_CLOSED at once.
 * Any thread may use a channel. chan_free when no future uses it any more.
 */
#ifndef LAB_CHANNEL_H
#define LAB_CHANNEL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "future.h"
#include "waker.h"

/* A node on a wait list: inside a send/receive/lock future. */
struct waiter {
    struct waiter *prev, *next;
    struct waker waker;   /* the latest poll's waker; the list's owner wakes it */
    bool queued;          /* on the list */
    bool notified;        /* taken off the list by a wake (a message, a slot, the lock) */
    bool registered;      /* linked since its last Ready: only the future's own polls
                             and drop touch it, so a drop without it takes no lock */
};

struct waitlist {
    struct waiter *head, *tail;
};

enum chan_status { CHAN_OK = 0, CHAN_CLOSED = 1 };

struct chan;

/* capacity 0: unbounded. NULL when out of memory. */
struct chan *chan_new(size_t capacity);
void chan_close(struct chan *c);
void chan_free(struct chan *c);
/* Messages buffered right now. */
size_t chan_len(struct chan *c);
/* Without waiting: true when sent (false: full or closed). */
bool chan_try_send(struct chan *c, uint64_t v);

struct chan_send {
    struct chan *c;
    uint64_t value;
    struct waiter w;
};
struct chan_recv {
    struct chan *c;
    struct waiter w;
};

void chan_send_init(struct chan_send *s, struct chan *c, uint64_t value);
/* Ready once sent (CHAN_OK) or the channel is closed (CHAN_CLOSED). */
enum poll chan_send_poll(struct chan_send *s, struct context *cx, enum chan_status *st);
void chan_send_drop(struct chan_send *s);

void chan_recv_init(struct chan_recv *r, struct chan *c);
/* Ready with a message in *out (CHAN_OK), or CHAN_CLOSED when the channel is
 * closed and empty. */
enum poll chan_recv_poll(struct chan_recv *r, struct context *cx, uint64_t *out, enum chan_status *st);
void chan_recv_drop(struct chan_recv *r);

/* ---- the async mutex ----------------------------------------------------------
 * lock is a future: Ready when this task holds the mutex. unlock hands the
 * mutex straight to the first waiter (FIFO among waiters; a newcomer may take
 * a free mutex on the fast path), or frees it.
 * Budget: each poll of a lock future calls coop_proceed first. */
struct async_mutex {
    /* 0 free, 1 locked with no waiter, 2 locked and maybe waiters. The fast
     * paths are one CAS each (0->1 to lock, 1->0 to unlock); anything else
     * goes through the lock. */
    _Atomic int state;
    pthread_mutex_t lock;  /* protects waiters, and state's moves away from 2 */
    struct waitlist waiters;
};
struct async_mutex_lock {
    struct async_mutex *m;
    struct waiter w;
    bool held;             /* Ready was returned: the caller holds the mutex */
};

/* 0, or pthread_mutex_init's error (then the mutex is not usable). */
int async_mutex_init(struct async_mutex *m);
void async_mutex_destroy(struct async_mutex *m);
void async_mutex_lock_init(struct async_mutex_lock *l, struct async_mutex *m);
enum poll async_mutex_lock_poll(struct async_mutex_lock *l, struct context *cx);
/* Drops a lock future that never got the mutex (or was granted it by a
 * handoff it never saw: then the mutex is passed on). */
void async_mutex_lock_drop(struct async_mutex_lock *l);
void async_mutex_unlock(struct async_mutex *m);

#endif
