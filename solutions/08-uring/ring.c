/* ring.c - stage 08: the operation slab, the orphans, and the ring driver.
 *
 * liburing does the ring's plumbing: mapping the two queues, handing out
 * submission entries, filling them, and the memory barriers on the queues'
 * heads and tails (docs/08-uring.md#what-liburing-hides says where they are,
 * and why a ring without SQPOLL needs no barrier of yours on the SQ tail).
 * This file never writes a barrier for the queues. What it owns is the
 * question no barrier answers: whose is the buffer now?
 *
 * Questions to carry through the file (each function's TODO asks its own):
 *  - An SQE hands the kernel a pointer. Until which CQE may that memory not
 *    move, and who is still there to know when it came, after the future
 *    that asked for it has been dropped?
 *  - A CQE brings back 64 bits that you chose. What must they name so that
 *    a late CQE can never reach the wrong operation?
 *  - The driver's state word has stage 06's three states (EMPTY, PARKED,
 *    NOTIFIED). Which moves are the owner's, which are unpark's, and which
 *    single move is the only one that needs a syscall? What does a park do
 *    when it finds a token, and is park(0) such a park?
 *    (docs/08-uring.md#the-ring-driver)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <liburing.h>

#include "ring.h"

enum { EMPTY = 0, PARKED = 1, NOTIFIED = 2 };
enum { OP_FREE = 0, OP_LIVE, OP_ORPHAN };

/* BEGIN STUDENT HIDDEN */
/* user_data of the SQEs that are no operation's (a slot's id is never
 * below 1 << 32: generations start at 1) */
#define UD_WAKE UINT64_C(1)    /* the eventfd read */
#define UD_CANCEL UINT64_C(2)  /* an async cancel: its own CQE says nothing we need */
#define REAP_BATCH 8u          /* CQEs copied out per peek */

/* END STUDENT */
/* quote: pbuf */
/* A multishot receive's provided buffers (ring.h contract 6). Buffer i is
 * mem + i * size. Each is in exactly one place: in the kernel's ring
 * (free for the kernel to fill), or held: named by a CQE, its bytes not
 * all taken yet. */
struct pbuf {
    struct io_uring_buf_ring *br;  /* the ring the kernel takes buffers from (page-aligned) */
    char *mem;
    unsigned count;        /* buffers, a power of two */
    unsigned size;         /* bytes each */
    uint16_t bgid;         /* the group id the SQE names (the slot's index) */
    uint16_t *held;        /* ids of the held buffers, in order of arrival (a FIFO of count) */
    unsigned nheld, held_head;
    size_t head_off;       /* bytes of the first held buffer already copied out */
    bool starved;          /* the kernel ended the receive (-ENOBUFS); the stream did not end */
};
/* end quote: pbuf */

/* quote: op */
struct op {
    uint32_t gen;          /* bumped when the slot is freed: old ids go stale */
    uint8_t state;         /* OP_FREE, OP_LIVE or OP_ORPHAN */
    uint8_t kind;          /* enum ring_op_kind */
    bool in_flight;        /* a CQE is still to come */
    int fd;
    void *buf;             /* owned; the kernel's while in_flight */
    size_t len;
    int32_t *res;          /* completions not handed out yet (a FIFO) */
    unsigned nres, res_head, res_cap;
    struct waker waker;    /* the latest poller's; none for an orphan */
    uint32_t next_free;
    struct pbuf *pb;       /* RING_RECV_MULTI's provided buffers, else NULL */
};
/* end quote: op */

struct ring {
    struct io_uring ring;
    struct op *ops;        /* the slab: max_ops slots, never moved */
    unsigned max_ops;
    uint32_t free_head;    /* a free list through next_free; max_ops: none */
    unsigned ops_live, orphans;  /* slots in use (orphans included), orphans */
    uint64_t sqes, cancels;      /* SQEs queued for operations, cancels queued */
    unsigned bufs_held;          /* provided buffers held, every operation's */
    /* BEGIN STUDENT FIELDS: ring.h contract 4: what must the ring hold so that another thread can end a park through the ring, and know whether the owner is in the kernel at all? And ring_test_stats' two counters (docs/08-uring.md#the-ring-driver) */
    int efd;
    uint64_t efd_val;      /* the kernel's while the wake read is submitted */
    atomic_int state;      /* EMPTY, PARKED or NOTIFIED (above) */
    uint64_t enters;       /* the owner's: plain */
    atomic_uint_fast64_t wake_writes;  /* any thread: a statistic, relaxed */
    /* END STUDENT */
};

static struct op *lookup(struct ring *r, ring_op_id id)
{
    uint32_t i = (uint32_t)id, gen = (uint32_t)(id >> 32);
    if (i >= r->max_ops || r->ops[i].gen != gen || r->ops[i].state == OP_FREE)
        return NULL;
    return &r->ops[i];
}

static inline ring_op_id id_of(struct ring *r, struct op *o)
{
    return ((uint64_t)o->gen << 32) | (uint64_t)(o - r->ops);
}

/* Everything but the driver is the owner's alone (ring.h, Threads): the
 * slab and the counters above are plain fields, and no lock is needed. */
static inline void dispatch(struct ring *r, uint64_t ud, int32_t res, uint32_t flags);
static inline void prep_wake_read(struct ring *r);
static inline void prep_op(struct ring *r, struct op *o, size_t off, size_t len);

/* quote: get-sqe */
/* A free SQE: the queue is never too full to take one (contract 3). */
static inline struct io_uring_sqe *get_sqe(struct ring *r)
{
    /* BEGIN STUDENT: ring.h contract 3: io_uring_get_sqe says NULL when the queue is full; what makes room, and what if the kernel says -EBUSY? (docs/08-uring.md#a-full-submission-queue) */
    for (;;) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
        if (sqe)
            return sqe;
        int n = io_uring_submit(&r->ring);
        if (n == -EBUSY) {
            /* the kernel has completions it cannot post: take them first */
            struct io_uring_cqe *cqe;
            while (io_uring_peek_cqe(&r->ring, &cqe) == 0) {
                uint64_t ud = cqe->user_data;
                int32_t res = cqe->res;
                uint32_t flags = cqe->flags;
                io_uring_cqe_seen(&r->ring, cqe);
                dispatch(r, ud, res, flags);
            }
        } else if (n < 0 && n != -EINTR && n != -EAGAIN) {
            abort(); /* -EBADF, -EFAULT, -EINVAL: the ring itself is broken */
        }
    }
    /* END STUDENT */
}
/* end quote: get-sqe */

/* A completion onto the operation's FIFO (it grows; out of memory while
 * holding the kernel's answer, there is nowhere to put it). */
static inline void push_res(struct op *o, int32_t res)
{
    if (o->nres == o->res_cap) {
        unsigned cap = o->res_cap ? o->res_cap * 2 : 4;
        int32_t *n = malloc(cap * sizeof *n);
        if (!n)
            abort(); /* out of memory while holding the kernel's answer: nowhere to put it */
        for (unsigned i = 0; i < o->nres; i++)
            n[i] = o->res[(o->res_head + i) % o->res_cap];
        free(o->res);
        o->res = n;
        o->res_cap = cap;
        o->res_head = 0;
    }
    o->res[(o->res_head + o->nres) % o->res_cap] = res;
    o->nres++;
}

/* quote: prep-op */
/* The operation's SQE, for len bytes of its buffer from off. */
static inline void prep_op(struct ring *r, struct op *o, size_t off, size_t len)
{
    /* BEGIN STUDENT: ring.h contract 2 and the slab: which prep for each kind (a multishot accept for RING_ACCEPT_MULTI), and which user_data brings its CQE back to this slot and no other (docs/08-uring.md#the-slab) */
    struct io_uring_sqe *sqe = get_sqe(r);
    switch (o->kind) {
    case RING_RECV:
        io_uring_prep_recv(sqe, o->fd, (char *)o->buf + off, len, 0);
        break;
    case RING_SEND:
        io_uring_prep_send(sqe, o->fd, (char *)o->buf + off, len, MSG_NOSIGNAL);
        break;
    case RING_RECV_MULTI:
        /* no buffer and no length: the kernel picks a buffer of the group per completion */
        io_uring_prep_recv_multishot(sqe, o->fd, NULL, 0, 0);
        sqe->flags |= IOSQE_BUFFER_SELECT;
        sqe->buf_group = o->pb->bgid;
        break;
    default:
        io_uring_prep_multishot_accept(sqe, o->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        break;
    }
    io_uring_sqe_set_data64(sqe, id_of(r, o));
    o->in_flight = true;
    r->sqes++;
    /* END STUDENT */
}
/* end quote: prep-op */

/* A multishot receive's provided buffers, when its slot is freed (its last
 * CQE has come: nothing of the group is submitted any more). */
static inline void pbuf_free(struct ring *r, struct pbuf *pb)
{
    if (!pb)
        return;
    /* BEGIN STUDENT: ring.h contract 6 and test hooks: the kernel was told of this group's ring at ring_recv_multi_start; what must it be told before that memory goes, and which of the ring's counters still count buffers of this group? (docs/08-uring.md#freeing-the-ring) */
    io_uring_unregister_buf_ring(&r->ring, pb->bgid);
    r->bufs_held -= pb->nheld;
    free(pb->br);
    free(pb->mem);
    free(pb->held);
    free(pb);
    /* END STUDENT */
}

/* quote: free-op */
static inline void free_op(struct ring *r, struct op *o)
{
    /* BEGIN STUDENT: the slab: once the slot is free, what must a late CQE carrying its old id find? And what does the slot still own that nobody else will free or close? (docs/08-uring.md#the-slab) */
    if (o->kind == RING_ACCEPT_MULTI)
        for (unsigned i = 0; i < o->nres; i++) {
            int32_t fd = o->res[(o->res_head + i) % o->res_cap];
            if (fd >= 0)
                close(fd); /* accepted, never handed out */
        }
    free(o->res);
    free(o->buf);
    pbuf_free(r, o->pb);
    waker_drop(&o->waker);
    if (o->state == OP_ORPHAN)
        r->orphans--;
    r->ops_live--;
    uint32_t gen = o->gen + 1;
    memset(o, 0, sizeof *o);
    o->gen = gen ? gen : 1;
    o->state = OP_FREE;
    o->next_free = r->free_head;
    r->free_head = (uint32_t)(o - r->ops);
    /* END STUDENT */
}
/* end quote: free-op */

/* quote: give-back */
/* Buffer bid back into the kernel's ring (contract 6): from here on the
 * kernel may fill it at any moment. */
static inline void give_back(struct pbuf *pb, uint16_t bid)
{
    /* BEGIN STUDENT: ring.h contract 6: the kernel may fill the buffer from the moment it can see it in its ring; what must it find there, and what makes it see it only once it is all written? (docs/08-uring.md#giving-a-buffer-back) */
    io_uring_buf_ring_add(pb->br, pb->mem + (size_t)bid * pb->size, pb->size, bid,
                          io_uring_buf_ring_mask(pb->count), 0);
    /* a release store of the tail (liburing.h): the entry is written before the kernel can see it */
    io_uring_buf_ring_advance(pb->br, 1);
    /* END STUDENT */
}
/* end quote: give-back */

/* quote: dispatch-recv */
/* One CQE of a multishot receive (contracts 2 and 6). */
static inline void dispatch_recv(struct ring *r, struct op *o, int32_t res, uint32_t flags)
{
    /* BEGIN STUDENT: ring.h contracts 2 and 6: is the receive still the kernel's? Whose is the buffer the CQE names, until when, and what if the kernel stopped the receive (-ENOBUFS) while the stream goes on? (docs/08-uring.md#provided-buffers) */
    struct pbuf *pb = o->pb;
    bool more = flags & IORING_CQE_F_MORE;
    if (!more)
        o->in_flight = false;
    if (o->state == OP_ORPHAN) {
        if (!o->in_flight)
            free_op(r, o); /* the last CQE: the buffers go with the slot */
        return;
    }
    if (flags & IORING_CQE_F_BUFFER) {
        uint16_t bid = (uint16_t)(flags >> IORING_CQE_BUFFER_SHIFT);
        if (res > 0) {
            /* ours now, and kept out of the kernel's ring until poll has
             * copied every byte out */
            pb->held[(pb->held_head + pb->nheld) % pb->count] = bid;
            pb->nheld++;
            r->bufs_held++;
            push_res(o, res);
            waker_wake(&o->waker);
        } else {
            give_back(pb, bid); /* nothing in it */
        }
    }
    if (more)
        return;
    if (res > 0 || res == -ENOBUFS) {
        /* the kernel stopped the receive, the stream did not end: again,
         * as soon as the kernel has a buffer to fill */
        if (pb->nheld < pb->count)
            prep_op(r, o, 0, 0);
        else
            pb->starved = true; /* ring_recv_poll submits it when it gives one back */
        return;
    }
    push_res(o, res); /* the end: 0 (end of stream) or an error */
    waker_wake(&o->waker);
    /* END STUDENT */
}
/* end quote: dispatch-recv */

/* quote: dispatch */
/* One CQE, copied out of the ring. */
static inline void dispatch(struct ring *r, uint64_t ud, int32_t res, uint32_t flags)
{
    /* BEGIN STUDENT: ring.h contracts 1, 2 and 5: whose CQE is this (not every user_data is an operation's, and an id may be stale)? Is it its operation's last, and who must hear of it: a future, or nobody? (docs/08-uring.md#dispatching-a-completion) */
    if (ud == UD_WAKE) {
        prep_wake_read(r); /* always one read on the eventfd (contract 4) */
        return;
    }
    if (ud == UD_CANCEL)
        return;
    struct op *o = lookup(r, ud);
    if (!o)
        return; /* a CQE for a slot freed since: its id is stale */
    if (o->kind == RING_RECV_MULTI) {
        dispatch_recv(r, o, res, flags);
        return;
    }
    if (!(flags & IORING_CQE_F_MORE))
        o->in_flight = false;
    if (o->state == OP_ORPHAN) {
        if (o->kind == RING_ACCEPT_MULTI && res >= 0)
            close(res); /* nobody will take this connection */
        if (!o->in_flight)
            free_op(r, o); /* the last CQE: the buffer is ours again */
        return;
    }
    push_res(o, res);
    waker_wake(&o->waker);
    /* END STUDENT */
}
/* end quote: dispatch */

/* quote: reap */
/* Every CQE there is (contract 3). */
static inline void reap(struct ring *r)
{
    /* BEGIN STUDENT: ring.h contract 3: every CQE there is, those the kernel kept aside included. Why may dispatch not run on a CQE still in the ring, and how far may the head move? (docs/08-uring.md#cq-overflow) */
    for (;;) {
        struct io_uring_cqe *cqes[REAP_BATCH];
        /* peek_batch flushes the kernel's overflow list (an io_uring_enter
         * with GETEVENTS) when the CQ is empty and the ring says it
         * overflowed */
        unsigned n = io_uring_peek_batch_cqe(&r->ring, cqes, REAP_BATCH);
        if (n == 0)
            return;
        uint64_t ud[REAP_BATCH];
        int32_t res[REAP_BATCH];
        uint32_t flags[REAP_BATCH];
        for (unsigned i = 0; i < n; i++) {
            ud[i] = cqes[i]->user_data;
            res[i] = cqes[i]->res;
            flags[i] = cqes[i]->flags;
        }
        /* the slots back to the kernel before dispatch, which may submit
         * (a re-armed wake read, a cancel) and so reap again */
        io_uring_cq_advance(&r->ring, n);
        for (unsigned i = 0; i < n; i++)
            dispatch(r, ud[i], res[i], flags[i]);
    }
    /* END STUDENT */
}
/* end quote: reap */

/* The eventfd's read, queued: an unpark's write completes it (contract 4). */
static inline void prep_wake_read(struct ring *r)
{
    /* BEGIN STUDENT: ring.h contract 4: the read an unpark's eventfd write completes. Into whose memory does the kernel read, for how long, and how will dispatch know its CQE? (docs/08-uring.md#the-ring-driver) */
    struct io_uring_sqe *sqe = get_sqe(r);
    io_uring_prep_read(sqe, r->efd, &r->efd_val, sizeof r->efd_val, 0);
    io_uring_sqe_set_data64(sqe, UD_WAKE);
    /* END STUDENT */
}

int ring_op_start(struct ring *r, enum ring_op_kind kind, int fd, const void *data, size_t len, ring_op_id *id)
{
    if (r->free_head == r->max_ops)
        return -ENOMEM;
    /* Allocate an operation's buffer with calloc, not malloc: Valgrind does
     * not see the kernel write through the ring, and would call a malloc'ed
     * buffer's received bytes uninitialised (docs/08-uring.md#freeing-the-ring). */
    /* BEGIN STUDENT: ring.h contract 1 and the slab (docs/08-uring.md#the-slab): which operations own a buffer, and of what? Which slot does the operation take, what must the slot say before its SQE goes out, and what does the caller get back? */
    void *buf = NULL;
    if (kind != RING_ACCEPT_MULTI) {
        buf = calloc(1, len ? len : 1);
        if (!buf)
            return -ENOMEM;
        if (kind == RING_SEND && len)
            memcpy(buf, data, len);
    }
    struct op *o = &r->ops[r->free_head];
    r->free_head = o->next_free;
    o->state = OP_LIVE;
    o->kind = (uint8_t)kind;
    o->fd = fd;
    o->buf = buf;
    o->len = len;
    r->ops_live++;
    prep_op(r, o, 0, len);
    *id = id_of(r, o);
    return 0;
    /* END STUDENT */
}

enum poll ring_op_poll(struct ring *r, ring_op_id id, struct context *cx, int32_t *res)
{
    struct op *o = lookup(r, id);
    if (!o || o->state != OP_LIVE)
        abort(); /* polled after drop: the caller's bug */
    /* BEGIN STUDENT: ring.h contract 5: a completion to hand out, or Pending; which waker must the next CQE wake, and what becomes of the one held before? (docs/08-uring.md#polling-an-operation) */
    if (o->nres > 0) {
        *res = o->res[o->res_head];
        o->res_head = (o->res_head + 1) % o->res_cap;
        o->nres--;
        return POLL_READY;
    }
    waker_clone_from(&o->waker, cx->waker);
    return POLL_PENDING;
    /* END STUDENT */
}

void *ring_op_buffer(struct ring *r, ring_op_id id)
{
    struct op *o = lookup(r, id);
    return o ? o->buf : NULL;
}

bool ring_op_done(struct ring *r, ring_op_id id)
{
    struct op *o = lookup(r, id);
    return !o || (!o->in_flight && o->nres == 0 && !(o->pb && o->pb->starved));
}

void ring_op_resubmit(struct ring *r, ring_op_id id, size_t off, size_t len)
{
    struct op *o = lookup(r, id);
    if (!o || o->in_flight || o->nres || o->kind == RING_ACCEPT_MULTI || o->kind == RING_RECV_MULTI ||
        off + len > o->len)
        abort(); /* the caller's bug */
    prep_op(r, o, off, len);
}

int ring_recv_multi_start(struct ring *r, int fd, unsigned nbufs, size_t buf_size, ring_op_id *id)
{
    if (nbufs == 0 || nbufs > 32768 || (nbufs & (nbufs - 1)) || buf_size == 0 || buf_size > UINT32_MAX)
        return -EINVAL;
    if (r->free_head == r->max_ops)
        return -ENOMEM;
    struct pbuf *pb = calloc(1, sizeof *pb);
    if (!pb)
        return -ENOMEM;
    long page = sysconf(_SC_PAGESIZE);
    size_t ring_bytes = nbufs * sizeof(struct io_uring_buf);
    void *br = NULL;
    /* the buffer ring must be page-aligned (io_uring_register_buf_ring(3)) */
    if (posix_memalign(&br, page > 0 ? (size_t)page : 4096, ring_bytes) != 0)
        br = NULL;
    pb->br = br;
    /* calloc: Valgrind does not see the kernel fill a buffer (#freeing-the-ring) */
    pb->mem = calloc(nbufs, buf_size);
    pb->held = calloc(nbufs, sizeof *pb->held);
    if (!pb->br || !pb->mem || !pb->held) {
        free(pb->br);
        free(pb->mem);
        free(pb->held);
        free(pb);
        return -ENOMEM;
    }
    pb->count = nbufs;
    pb->size = (unsigned)buf_size;
    /* BEGIN STUDENT: ring.h contract 6 (docs/08-uring.md#provided-buffers): the SQE will name a buffer group, not a buffer. Which group id is this operation's alone? Where must every buffer be before the kernel may pick one, and what must the kernel be told (and what if it refuses)? Then the slot, as ring_op_start takes one */
    struct op *o = &r->ops[r->free_head];
    pb->bgid = (uint16_t)(o - r->ops); /* one group per slot: max_ops is below 65536 */
    io_uring_buf_ring_init(pb->br);
    for (unsigned i = 0; i < nbufs; i++)
        give_back(pb, (uint16_t)i);
    struct io_uring_buf_reg reg = { .ring_addr = (uint64_t)(uintptr_t)pb->br, .ring_entries = nbufs, .bgid = pb->bgid };
    int e = io_uring_register_buf_ring(&r->ring, &reg, 0); /* Linux 5.19 */
    if (e < 0) {
        free(pb->br);
        free(pb->mem);
        free(pb->held);
        free(pb);
        return e;
    }
    r->free_head = o->next_free;
    o->state = OP_LIVE;
    o->kind = RING_RECV_MULTI;
    o->fd = fd;
    o->pb = pb;
    r->ops_live++;
    prep_op(r, o, 0, 0);
    *id = id_of(r, o);
    return 0;
    /* END STUDENT */
}

/* quote: recv-poll */
enum poll ring_recv_poll(struct ring *r, ring_op_id id, struct context *cx, void *dst, size_t cap, int32_t *res)
{
    struct op *o = lookup(r, id);
    if (!o || o->state != OP_LIVE || o->kind != RING_RECV_MULTI || cap == 0)
        abort(); /* polled after drop, not a multishot receive, or nowhere to copy to: the caller's bug */
    /* BEGIN STUDENT: ring.h contracts 5 and 6: a completion to hand out, or the latest waker; the bytes copied out of the buffer the CQE named, and when may that buffer go back to the kernel's ring (and the receive be submitted again)? (docs/08-uring.md#provided-buffers) */
    if (o->nres == 0) {
        waker_clone_from(&o->waker, cx->waker);
        return POLL_PENDING;
    }
    int32_t head = o->res[o->res_head];
    if (head > 0) {
        struct pbuf *pb = o->pb;
        uint16_t bid = pb->held[pb->held_head];
        size_t left = (size_t)head - pb->head_off;
        size_t n = cap < left ? cap : left;
        memcpy(dst, pb->mem + (size_t)bid * pb->size + pb->head_off, n);
        *res = (int32_t)n;
        pb->head_off += n;
        if (pb->head_off < (size_t)head)
            return POLL_READY; /* the rest of this buffer is for the next poll: it stays ours */
        pb->head_off = 0;
        pb->held_head = (pb->held_head + 1) % pb->count;
        pb->nheld--;
        r->bufs_held--;
        give_back(pb, bid); /* every byte is out: the kernel's again */
        if (pb->starved) {
            pb->starved = false;
            prep_op(r, o, 0, 0);
        }
    } else {
        *res = head;
    }
    o->res_head = (o->res_head + 1) % o->res_cap;
    o->nres--;
    return POLL_READY;
    /* END STUDENT */
}
/* end quote: recv-poll */

/* quote: op-drop */
void ring_op_drop(struct ring *r, ring_op_id id)
{
    struct op *o = lookup(r, id);
    if (!o || o->state != OP_LIVE)
        return;
    /* BEGIN STUDENT: ring.h contract 1: may the buffer go now? If not, what does the operation become, what does it let go of at once, and what does it ask the kernel? (docs/08-uring.md#dropping-a-future-the-orphan) */
    if (!o->in_flight) {
        free_op(r, o);
        return;
    }
    waker_drop(&o->waker); /* the task that waited may be gone */
    o->state = OP_ORPHAN;
    r->orphans++;
    struct io_uring_sqe *sqe = get_sqe(r);
    io_uring_prep_cancel64(sqe, id, 0);
    io_uring_sqe_set_data64(sqe, UD_CANCEL);
    r->cancels++;
    /* END STUDENT */
}
/* end quote: op-drop */

/* quote: park */
static bool ring_park(void *self, int64_t timeout_ns)
{
    /* BEGIN STUDENT: ring.h contract 4: when may a park return without entering the kernel, and is park(0) such a park? What must its one io_uring_enter do, what must the caller hear of a token, and what is left to do once the enter returns? (docs/08-uring.md#the-ring-driver) */
    struct ring *r = self;
    bool token;
    struct io_uring_cqe *cqe;
    if (timeout_ns == 0) {
        /* a poll of the kernel (the executor's driver tick): take a token
         * if there is one and enter all the same. acquire: pairs with
         * unpark's release swap. */
        token = atomic_exchange_explicit(&r->state, EMPTY, memory_order_acquire) == NOTIFIED;
        r->enters++;
        io_uring_submit_and_get_events(&r->ring);
        reap(r);
        return token;
    }
    int expect = NOTIFIED;
    /* acquire: pairs with unpark's release swap (what the waker did before unpark is visible) */
    if (atomic_compare_exchange_strong_explicit(&r->state, &expect, EMPTY, memory_order_acquire,
                                                memory_order_relaxed))
        return true;
    expect = EMPTY;
    /* acq_rel: a failure means an unpark got in first (NOTIFIED): take it */
    if (!atomic_compare_exchange_strong_explicit(&r->state, &expect, PARKED, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        atomic_store_explicit(&r->state, EMPTY, memory_order_relaxed); /* only NOTIFIED can be here */
        return true;
    }
    r->enters++;
    if (timeout_ns < 0) {
        io_uring_submit_and_wait(&r->ring, 1);
    } else {
        struct __kernel_timespec ts = { .tv_sec = timeout_ns / 1000000000, .tv_nsec = timeout_ns % 1000000000 };
        io_uring_submit_and_wait_timeout(&r->ring, &cqe, 1, &ts, NULL); /* -ETIME: the timeout */
    }
    /* acq_rel: acquire pairs with an unpark's release swap; back to EMPTY
     * before dispatch, so wakes dispatch makes on this thread cost no
     * eventfd write */
    token = atomic_exchange_explicit(&r->state, EMPTY, memory_order_acq_rel) == NOTIFIED;
    reap(r);
    return token;
    /* END STUDENT */
}
/* end quote: park */

static void ring_unpark(void *self)
{
    /* BEGIN STUDENT: ring.h contract 4: the owner may be waiting in io_uring_enter with no timeout; how does this reach it through the ring, and when can it skip the syscall? (docs/08-uring.md#the-ring-driver) */
    struct ring *r = self;
    /* acq_rel: release pairs with park's acquire; acquire orders the write after the swap */
    if (atomic_exchange_explicit(&r->state, NOTIFIED, memory_order_acq_rel) == PARKED) {
        uint64_t one = 1;
        atomic_fetch_add_explicit(&r->wake_writes, 1, memory_order_relaxed);
        if (write(r->efd, &one, sizeof one) < 0 && errno != EAGAIN)
            abort(); /* EAGAIN: the counter is full, so its read completes anyway */
    }
    /* END STUDENT */
}

static uint64_t ring_now(void *self)
{
    (void)self;
    return driver_monotonic_ns();
}

#ifdef LAB_TRACE
/* Traced (given; docs/tracing.md): a park of the ring driver is one turn of
 * I/O, drawn as a slice (named "reactor", as stage 06's); the wakes that the
 * CQEs dispatched inside it make come from I/O. */
static bool ring_park_traced(void *self, int64_t timeout_ns)
{
    trace_source_begin(TRACE_SRC_IO);
    bool token = ring_park(self, timeout_ns);
    trace_source_end();
    return token;
}
#define RING_PARK ring_park_traced
#else
#define RING_PARK ring_park
#endif

static const struct driver_vtable ring_vtable = { .park = RING_PARK, .unpark = ring_unpark, .now = ring_now };

int ring_new(unsigned sq_entries, unsigned max_ops, struct ring **out)
{
    struct ring *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->ops = calloc(max_ops ? max_ops : 1, sizeof *r->ops);
    if (!r->ops) {
        free(r);
        return -ENOMEM;
    }
    r->max_ops = max_ops;
    for (unsigned i = 0; i < max_ops; i++) {
        r->ops[i].gen = 1;
        r->ops[i].next_free = i + 1;
    }
    r->free_head = 0;
    int e = io_uring_queue_init(sq_entries, &r->ring, 0);
    if (e < 0) {
        free(r->ops);
        free(r);
        return e;
    }
    /* BEGIN STUDENT: ring.h contract 4: what must be in place before the first park, so that an unpark from another thread can reach it through the ring? Would O_NONBLOCK help or harm a read that the kernel waits on for you? (docs/08-uring.md#the-ring-driver) */
    r->efd = eventfd(0, EFD_CLOEXEC); /* blocking: the ring's read waits for data (no -EAGAIN CQE) */
    if (r->efd < 0) {
        e = -errno;
        io_uring_queue_exit(&r->ring);
        free(r->ops);
        free(r);
        return e;
    }
    atomic_init(&r->state, EMPTY);
    atomic_init(&r->wake_writes, 0);
    prep_wake_read(r);
    /* END STUDENT */
    *out = r;
    return 0;
}

void ring_free(struct ring *r)
{
    if (!r)
        return;
    /* BEGIN STUDENT: ring.h, Ownership: whose is an orphan's buffer while its last CQE has not come, and what makes that CQE come? What of the ring's own memory does the kernel still hold, and until when? (docs/08-uring.md#freeing-the-ring) */
    while (r->orphans > 0) {
        r->enters++;
        io_uring_submit_and_wait(&r->ring, 1);
        reap(r);
    }
    for (unsigned i = 0; i < r->max_ops; i++)
        if (r->ops[i].state == OP_LIVE && !r->ops[i].in_flight)
            free_op(r, &r->ops[i]);
    /* the wake read is still submitted: the ring's exit cancels it, and
     * efd_val dies with r only after that */
    io_uring_queue_exit(&r->ring);
    close(r->efd);
    /* END STUDENT */
    free(r->ops);
    free(r);
}

struct driver ring_driver(struct ring *r)
{
    return (struct driver){ .vtable = &ring_vtable, .self = r };
}

struct ring_stats ring_test_stats(struct ring *r)
{
    /* BEGIN STUDENT: the counters (docs/08-uring.md#test-hooks) */
    return (struct ring_stats){
        .ops = r->ops_live,
        .orphans = r->orphans,
        .sqes = r->sqes,
        .cancels = r->cancels,
        .enters = r->enters,
        .wake_writes = atomic_load_explicit(&r->wake_writes, memory_order_relaxed), /* a statistic */
        .bufs_held = r->bufs_held,
    };
    /* END STUDENT */
}
