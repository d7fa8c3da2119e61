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

/* A multishot receive's provided buffers, when its slot is freed (its last
 * CQE has come: nothing of the group is submitted any more). */
static inline void pbuf_free(struct ring *r, struct pbuf *pb)
{
    if (!pb)
        return;
    (void)r;
    (void)pb;
    LAB_TODO("ring.h contract 6 and test hooks: the kernel was told of this group's ring at ring_recv_multi_start; what must it be told before that memory goes, and which of the ring's counters still count buffers of this group? (docs/08-uring.md#freeing-the-ring)");
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
    /* Allocate an operation's buffer with calloc, not malloc: Valgrind does
     * not see the kernel write through the ring, and would call a malloc'ed
     * buffer's received bytes uninitialised (docs/08-uring.md#freeing-the-ring). */
    (void)r;
    (void)kind;
    (void)fd;
    (void)data;
    (void)len;
    (void)id;
    LAB_TODO("ring.h contract 1 and the slab (docs/08-uring.md#the-slab): which operations own a buffer, and of what? Which slot does the operation take, what must the slot say before its SQE goes out, and what does the caller get back?");
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
    (void)r;
    (void)fd;
    (void)nbufs;
    (void)buf_size;
    (void)id;
    LAB_TODO("ring.h contract 6 (docs/08-uring.md#provided-buffers): the SQE will name a buffer group, not a buffer. Which group id is this operation's alone? Where must every buffer be before the kernel may pick one, and what must the kernel be told (and what if it refuses)? Then the slot, as ring_op_start takes one");
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
    LAB_TODO("ring.h contract 4: when may a park return without entering the kernel, and is park(0) such a park? What must its one io_uring_enter do, what must the caller hear of a token, and what is left to do once the enter returns? (docs/08-uring.md#the-ring-driver)");
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
    (void)sq_entries;
    (void)max_ops;
    (void)out;
    LAB_TODO("ring.h contract 4: what must be in place before the first park, so that an unpark from another thread can reach it through the ring? Would O_NONBLOCK help or harm a read that the kernel waits on for you? (docs/08-uring.md#the-ring-driver)");
    *out = r;
    return 0;
}

void ring_free(struct ring *r)
{
    if (!r)
        return;
    (void)r;
    LAB_TODO("ring.h, Ownership: whose is an orphan's buffer while its last CQE has not come, and what makes that CQE come? What of the ring's own memory does the kernel still hold, and until when? (docs/08-uring.md#freeing-the-ring)");
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
