/* ring.c - stage 08: the operation slab, the orphans, and the ring driver.
 *
 * liburing does the ring's plumbing: io_uring_queue_init maps the two
 * queues, io_uring_get_sqe hands out a free submission entry, the prep
 * helpers fill it, io_uring_submit stores the SQ tail and calls
 * io_uring_enter (a plain store: the kernel reads the tail in this
 * thread's own syscall; a release store only under SQPOLL, where a kernel
 * thread reads it), io_uring_peek_batch_cqe reads the CQ tail (an acquire
 * load) and io_uring_cq_advance publishes the head (a release store).
 * Those are the ring's memory barriers (liburing/barrier.h; liburing 2.3's
 * src/queue.c and src/include/liburing.h, docs/08-uring.md#what-liburing-hides):
 * this file never writes one. What it owns is the question the barriers
 * cannot answer: whose is the buffer now?
 *
 * The driver's state word is stage 06's (Tokio's park.rs has the same three
 * states), with the eventfd read submitted on the ring instead of the
 * eventfd in an epoll set:
 *
 *     EMPTY ----park----> PARKED ----io_uring_enter returns----> EMPTY
 *       ^                   |
 *       |                 unpark: swap to NOTIFIED, and write the eventfd:
 *       |                   v      its read on the ring completes, a CQE
 *       +----park------ NOTIFIED <----unpark (not parked): no syscall
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
#include "lab_todo.h"

enum { EMPTY = 0, PARKED = 1, NOTIFIED = 2 };
enum { OP_FREE = 0, OP_LIVE, OP_ORPHAN };

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
    int todo_your_fields_here; /* TODO: ring.h contract 4: what must the ring hold so that another thread can end a park through the ring, and know whether the owner is in the kernel at all? And ring_test_stats' two counters (docs/08-uring.md#the-ring-driver) */
};

static struct op *lookup(struct ring *r, ring_op_id id)
{
    uint32_t i = (uint32_t)id, gen = (uint32_t)(id >> 32);
    if (i >= r->max_ops || r->ops[i].gen != gen || r->ops[i].state == OP_FREE)
        return NULL;
    return &r->ops[i];
}

static ring_op_id id_of(struct ring *r, struct op *o)
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
    (void)r;
    LAB_TODO("ring.h contract 3: io_uring_get_sqe says NULL when the queue is full; what makes room, and what if the kernel says -EBUSY? (docs/08-uring.md#a-full-submission-queue)");
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
    (void)r;
    (void)o;
    (void)off;
    (void)len;
    LAB_TODO("ring.h contract 2 and the slab: which prep for each kind (a multishot accept for RING_ACCEPT_MULTI), and which user_data brings its CQE back to this slot and no other (docs/08-uring.md#the-slab)");
}
/* end quote: prep-op */

/* The provided buffers, unregistered and freed (not a student's: the
 * registration's mirror, in ring_recv_multi_start). */
static void pbuf_free(struct ring *r, struct pbuf *pb)
{
    if (!pb)
        return;
    /* nothing of this group is submitted any more (the operation has had its
     * last CQE): the kernel lets go of the ring */
    io_uring_unregister_buf_ring(&r->ring, pb->bgid);
    r->bufs_held -= pb->nheld;
    free(pb->br);
    free(pb->mem);
    free(pb->held);
    free(pb);
}

/* quote: free-op */
static inline void free_op(struct ring *r, struct op *o)
{
    (void)r;
    (void)o;
    LAB_TODO("the slab: once the slot is free, what must a late CQE carrying its old id find? And what does the slot still own that nobody else will free or close? (docs/08-uring.md#the-slab)");
}
/* end quote: free-op */

/* quote: give-back */
/* Buffer bid back into the kernel's ring (contract 6): from here on the
 * kernel may fill it at any moment. */
static inline void give_back(struct pbuf *pb, uint16_t bid)
{
    (void)pb;
    (void)bid;
    LAB_TODO("ring.h contract 6: the kernel may fill the buffer from the moment it can see it in its ring; what must it find there, and what makes it see it only once it is all written? (docs/08-uring.md#giving-a-buffer-back)");
}
/* end quote: give-back */

/* quote: dispatch-recv */
/* One CQE of a multishot receive (contracts 2 and 6). */
static inline void dispatch_recv(struct ring *r, struct op *o, int32_t res, uint32_t flags)
{
    (void)r;
    (void)o;
    (void)res;
    (void)flags;
    LAB_TODO("ring.h contracts 2 and 6: is the receive still the kernel's? Whose is the buffer the CQE names, until when, and what if the kernel stopped the receive (-ENOBUFS) while the stream goes on? (docs/08-uring.md#provided-buffers)");
}
/* end quote: dispatch-recv */

/* quote: dispatch */
/* One CQE, copied out of the ring. */
static inline void dispatch(struct ring *r, uint64_t ud, int32_t res, uint32_t flags)
{
    (void)r;
    (void)ud;
    (void)res;
    (void)flags;
    LAB_TODO("ring.h contracts 1, 2 and 5: whose CQE is this (not every user_data is an operation's, and an id may be stale)? Is it its operation's last, and who must hear of it: a future, or nobody? (docs/08-uring.md#dispatching-a-completion)");
}
/* end quote: dispatch */

/* quote: reap */
/* Every CQE there is (contract 3). */
static inline void reap(struct ring *r)
{
    (void)r;
    LAB_TODO("ring.h contract 3: every CQE there is, those the kernel kept aside included. Why may dispatch not run on a CQE still in the ring, and how far may the head move? (docs/08-uring.md#cq-overflow)");
}
/* end quote: reap */

/* The eventfd's read, queued: an unpark's write completes it (contract 4). */
static inline void prep_wake_read(struct ring *r)
{
    (void)r;
    LAB_TODO("ring.h contract 4: the read an unpark's eventfd write completes. Into whose memory does the kernel read, for how long, and how will dispatch know its CQE? (docs/08-uring.md#the-ring-driver)");
}

int ring_op_start(struct ring *r, enum ring_op_kind kind, int fd, const void *data, size_t len, ring_op_id *id)
{
    if (r->free_head == r->max_ops)
        return -ENOMEM;
    void *buf = NULL;
    if (kind != RING_ACCEPT_MULTI) {
        /* calloc, not malloc: Valgrind does not see the kernel write
         * through the ring, and would call a malloc'ed buffer's received
         * bytes uninitialised (docs/08-uring.md#freeing-the-ring) */
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
}

enum poll ring_op_poll(struct ring *r, ring_op_id id, struct context *cx, int32_t *res)
{
    struct op *o = lookup(r, id);
    if (!o || o->state != OP_LIVE)
        abort(); /* polled after drop: the caller's bug */
    (void)r;
    (void)id;
    (void)cx;
    (void)res;
    LAB_TODO("ring.h contract 5: a completion to hand out, or Pending; which waker must the next CQE wake, and what becomes of the one held before? (docs/08-uring.md#polling-an-operation)");
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
    struct op *o = &r->ops[r->free_head];
    pb->bgid = (uint16_t)(o - r->ops); /* one group per slot: max_ops is below 65536 */
    io_uring_buf_ring_init(pb->br);
    for (unsigned i = 0; i < nbufs; i++)
        give_back(pb, (uint16_t)i); /* every buffer the kernel's: your give_back, used before any CQE */
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
}

/* quote: recv-poll */
enum poll ring_recv_poll(struct ring *r, ring_op_id id, struct context *cx, void *dst, size_t cap, int32_t *res)
{
    struct op *o = lookup(r, id);
    if (!o || o->state != OP_LIVE || o->kind != RING_RECV_MULTI || cap == 0)
        abort(); /* polled after drop, not a multishot receive, or nowhere to copy to: the caller's bug */
    (void)r;
    (void)id;
    (void)cx;
    (void)dst;
    (void)cap;
    (void)res;
    LAB_TODO("ring.h contracts 5 and 6: a completion to hand out, or the latest waker; the bytes copied out of the buffer the CQE named, and when may that buffer go back to the kernel's ring (and the receive be submitted again)? (docs/08-uring.md#provided-buffers)");
}
/* end quote: recv-poll */

/* quote: op-drop */
void ring_op_drop(struct ring *r, ring_op_id id)
{
    struct op *o = lookup(r, id);
    if (!o || o->state != OP_LIVE)
        return;
    (void)r;
    (void)id;
    LAB_TODO("ring.h contract 1: may the buffer go now? If not, what does the operation become, what does it let go of at once, and what does it ask the kernel? (docs/08-uring.md#dropping-a-future-the-orphan)");
}
/* end quote: op-drop */

/* quote: park */
static bool ring_park(void *self, int64_t timeout_ns)
{
    (void)self;
    (void)timeout_ns;
    LAB_TODO("ring.h contract 4: when may park return without entering the kernel, and when must it enter anyway (park(0))? One io_uring_enter that submits and waits; then every CQE (docs/08-uring.md#the-ring-driver)");
}
/* end quote: park */

static void ring_unpark(void *self)
{
    (void)self;
    LAB_TODO("ring.h contract 4: the owner may be waiting in io_uring_enter with no timeout; how does this reach it through the ring, and when can it skip the syscall? (docs/08-uring.md#the-ring-driver)");
}

static uint64_t ring_now(void *self)
{
    (void)self;
    return driver_monotonic_ns();
}

static const struct driver_vtable ring_vtable = { .park = ring_park, .unpark = ring_unpark, .now = ring_now };

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
    (void)sq_entries;
    (void)max_ops;
    (void)out;
    LAB_TODO("ring.h contract 4: an eventfd whose read the ring always has queued, and the state EMPTY; what would O_NONBLOCK do to a read the kernel waits on for you? (docs/08-uring.md#the-ring-driver)");
    *out = r;
    return 0;
}

void ring_free(struct ring *r)
{
    if (!r)
        return;
    (void)r;
    LAB_TODO("ring.h, Ownership: every orphan's buffer is the kernel's until its last CQE; wait for them (docs/08-uring.md#freeing-the-ring)");
    free(r->ops);
    free(r);
}

struct driver ring_driver(struct ring *r)
{
    return (struct driver){ .vtable = &ring_vtable, .self = r };
}

struct ring_stats ring_test_stats(struct ring *r)
{
    (void)r;
    LAB_TODO("the counters (docs/08-uring.md#test-hooks)");
}
