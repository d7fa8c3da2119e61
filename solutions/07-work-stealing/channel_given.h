/* channel_given.h - stage 07: what channel.c and channel_given.c share
 * (given; not an API: the tests never include it).
 *
 * struct chan, the unbounded channel's block list, and the helpers your
 * send, receive, lock and unlock (channel.c) call: the wait lists, the
 * bounded ring's make_room and chan_ring_push, and the unbounded channel's
 * send and receive.
 * channel_given.c has the rest: the block list's code, creating, closing
 * and dropping.
 */
#ifndef LAB_CHANNEL_GIVEN_H
#define LAB_CHANNEL_GIVEN_H

#include <pthread.h>

#include "channel.h"

/* ---- the unbounded channel's block list -------------------------------------
 * (docs/07b-channels.md#the-unbounded-channel; Tokio's mpsc block list,
 * tokio/src/sync/mpsc/list.rs, is the same design)
 *
 * Message i lives in slot i % BLOCK_SLOTS of the block whose start is
 * i - i % BLOCK_SLOTS. The blocks form a list, oldest first.
 *
 *   tx (one word): index of the next message << 17 | waiting receivers << 1
 *                  | closed
 *   a sender: claim i with a fetch_add on tx (a claim that finds closed
 *             set is refused: i is at or past the close index, which the
 *             receiver never reads); find i's block
 *             from tx_block, forward through next (linking a new block at
 *             the end) or back through prev; move tx_block forward to it;
 *             write the value; set the slot's ready flag, its last touch of
 *             any block; then, if its claim saw a waiting receiver, wake one.
 *   the receiver (receivers take turns: rx_busy): read slot rx_index once
 *             its ready flag is set; at the end of a block, move to the next
 *             and retire the old one.
 *
 * Freeing a block. A sender that loads tx_block may walk through older
 * blocks, so a block is freed only when no sender can still reach it. The
 * sender that moves tx_block past a block reads tx after its CAS and stores
 * that index in the block (observed) before marking it released. A sender
 * that claimed at or after observed sees the moved tx_block (its claim and
 * its load of tx_block against the mover's CAS and its load of tx: all
 * seq_cst, so one of the two pairs sees the other), so it never walks
 * through the block; one that claimed before has a slot below observed,
 * and once the receiver has read every slot below observed, each such
 * sender has set its ready flag: done with the blocks. So the receiver
 * frees a retired block once it is released and rx_index >= observed. */
#define BLOCK_SLOTS 64u
#define TX_CLOSED UINT64_C(1)
#define TX_WAIT_ONE UINT64_C(2)           /* receivers on the wait list: 16 bits */
#define TX_WAIT_MASK UINT64_C(0x1fffe)
#define TX_INDEX_SHIFT 17
#define TX_INDEX_ONE (UINT64_C(1) << TX_INDEX_SHIFT)

struct block_slot {
    _Atomic bool ready;           /* release by the writer, acquire by the reader */
    uint64_t value;               /* written before ready, read after it */
};

struct block {
    uint64_t start;               /* index of slots[0]; set before the block is linked */
    struct block *prev;           /* the block before; set before the block is linked */
    _Atomic(struct block *) next; /* NULL until a sender links the next block (CAS) */
    _Atomic bool released;        /* tx_block has moved past it; observed is set */
    uint64_t observed;            /* tx's index read after that move */
    struct block *retired_next;   /* the receiver's list of retired blocks */
    struct block_slot slots[BLOCK_SLOTS];
};

struct chan {
    pthread_mutex_t lock;    /* protects the ring, closed, and both wait lists */
    uint64_t *buf;           /* ring of cap slots (bounded) */
    size_t cap;              /* slots allocated */
    size_t head, len;
    bool bounded;
    bool closed;
    struct waitlist receivers, senders;
    /* unbounded: the block list (above), one cache line per writer, so
     * that the senders' CAS on tx and the receiver's stores do not take
     * the line of what the other side only reads */
    _Alignas(64) _Atomic uint64_t tx;     /* index << 1 | closed: seq_cst; the senders' line */
    _Atomic(struct block *) tx_block;     /* a block at or before the newest claim's; moves forward */
    _Atomic(struct block *) spare;        /* one free block for the next link, or NULL */
    _Alignas(64) _Atomic size_t rx_waiting; /* receivers on the list (changed under lock): the pass-on hint */
    _Atomic bool uclosed;                 /* closed: close_index is set (release) */
    uint64_t close_index;                 /* the index frozen by chan_close: written before uclosed */
    _Alignas(64) _Atomic bool rx_busy;    /* a receiver is reading: the fields below are its */
    struct block *rx_block;               /* the block of rx_index */
    _Atomic uint64_t rx_index;            /* the next message to receive (chan_len reads it) */
    struct block *retired;                /* blocks the receiver left, not yet freed */
};

static inline uint64_t tx_index(uint64_t t) { return t >> TX_INDEX_SHIFT; }
static inline uint64_t tx_waiters(uint64_t t) { return (t & TX_WAIT_MASK) >> 1; }

/* ---- wait lists ---------------------------------------------------------------- */

static inline void waiter_init(struct waiter *w)
{
    w->prev = w->next = NULL;
    w->waker = WAKER_NONE;
    w->queued = false;
    w->notified = false;
    w->registered = false;
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
    w->registered = true;
    if (!w->queued)
        waitlist_push(l, w);
}

/* ---- the bounded ring ------------------------------------------------------------ */

/* Under the lock: room for one more in the bounded ring? */
static inline bool make_room(struct chan *c) { return c->len < c->cap; }

/* Under the lock: appends v and takes a receiver to wake (channel_given.c). */
struct waker chan_ring_push(struct chan *c, uint64_t v);

/* ---- the unbounded channel's send and receive (channel_given.c) ---------------- */

/* An unbounded send: never waits. False when closed. */
bool chan_unbounded_send(struct chan *c, uint64_t v);

/* An unbounded receive, after the budget check: a message, closed, or wait
 * on the receivers' list. */
enum poll chan_unbounded_recv_poll(struct chan_recv *r, struct context *cx, uint64_t *out, enum chan_status *st);

#endif
