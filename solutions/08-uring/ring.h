/* ring.h - stage 08: an io_uring driver and the operations it owns.
 *
 * Stage 06 asked the kernel "may I?" (readiness) and did the syscall itself.
 * A ring asks the kernel "do it" (completion): the program writes a
 * submission (an SQE: "recv into this buffer"), the kernel does the work
 * whenever it can, and posts a completion (a CQE: "done, 5 bytes") carrying
 * the 64-bit user_data the SQE had. Between the two the kernel holds a
 * pointer into the program's memory. Everything in this stage follows from
 * that one fact.
 *
 *     executor --park--> time driver (stage 05) --park(t)--> ring driver
 *                                                  submit queued SQEs, wait
 *                                                  for a CQE for at most t,
 *                                                  then dispatch every CQE
 *
 * An operation is a slot of the ring's operation slab: its state, the
 * buffer it owns, the completions it has not handed out yet and the waker
 * of the future that waits on it. user_data is the slot's index and
 * generation (ring_op_id), so a CQE for a slot that was freed and reused
 * wakes nothing. The futures of uring_tcp.h start operations and poll them;
 * they never touch the ring themselves.
 *
 * The contract (docs/08-uring.md#the-contract):
 *  1. A submitted operation's buffer is the kernel's until the operation's
 *     last CQE has been dispatched. Dropping an operation that has no
 *     CQE left to come frees it at once; dropping one that has (a future
 *     dropped before completion) makes it an orphan: its waker is dropped
 *     at once, an IORING_OP_ASYNC_CANCEL for it is queued, and its buffer
 *     and slot are freed only when its last CQE arrives. A descriptor that
 *     an orphaned accept receives is closed.
 *  2. Multishot: an operation whose CQE carries IORING_CQE_F_MORE is still
 *     the kernel's; it lives, and stays submitted, until a CQE without
 *     F_MORE. One multishot accept is one SQE for any number of
 *     connections.
 *  3. No completion is lost and no submission dropped: when the submission
 *     queue is full, the queued SQEs are submitted to make room (and, if
 *     the kernel says -EBUSY, CQEs are dispatched first); a dispatch takes
 *     every CQE there is, the ones the kernel kept aside while the
 *     completion queue was full (overflow) included.
 *  4. The driver (driver.h): park(t) submits what is queued and waits in
 *     one io_uring_enter for a CQE for at most t (ns, not rounded), then
 *     dispatches every CQE. unpark from any thread ends a park with no
 *     timeout at once, through the ring: it writes an eventfd on which the
 *     ring always has a read submitted; an unpark before park is kept
 *     (the token), and two are one. park(0) always enters the kernel and
 *     dispatches, a token there or not; it takes a token it finds (and
 *     answers true), and one that an unpark leaves during it is the next
 *     park's (stage 02's and stage 06's park(0) do the same). With stage
 *     03's driver tick a completion waits at most EXECUTOR_DRIVER_INTERVAL
 *     task polls (plus the poll running) behind tasks that stay ready.
 *  5. The latest waker: polling an operation that has no completion to hand
 *     out makes the context's waker the one its next CQE wakes (replacing
 *     the one before); a CQE wakes it once.
 *  6. Provided buffers (a multishot receive, RING_RECV_MULTI): the
 *     operation owns a ring of provided buffers; the kernel picks one per
 *     completion. A buffer in that ring is the kernel's until a CQE names
 *     it (IORING_CQE_F_BUFFER, its id in the flags' upper 16 bits); its
 *     bytes then stay in it until ring_recv_poll has copied every one of
 *     them out, and only then does it go back to the ring. The receive
 *     lives while its CQEs carry IORING_CQE_F_MORE (contract 2); when the
 *     kernel ends it without reaching the end of the stream (-ENOBUFS: no
 *     buffer left in the ring) it is submitted again once a buffer is back
 *     in the ring: never handed out as an error, no byte lost.
 * Threads: everything but unpark on the thread that parks (the owner: a
 * stage 03 executor's thread); unpark from any thread. The ring holds no
 * lock: the slab and the ring's queues are the owner's alone.
 * Ownership: ring_free waits for every orphan's last CQE and frees it; free
 * it after every future on it was dropped.
 */
#ifndef LAB_RING_H
#define LAB_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "driver.h"
#include "future.h"

struct ring;

/* An operation: (generation << 32) | slot index. 0 is no operation. */
typedef uint64_t ring_op_id;

/* A ring of sq_entries submission entries (the completion queue has twice
 * as many) and an operation slab of max_ops slots. 0 and *out, or -errno:
 * -ENOSYS or -EPERM when the kernel or a seccomp filter refuses io_uring. */
int ring_new(unsigned sq_entries, unsigned max_ops, struct ring **out);
void ring_free(struct ring *r);
/* The ring as a driver (borrows r): give it to time_driver_new. */
struct driver ring_driver(struct ring *r);

/* ---- operations (uring_tcp.c uses these) ---- */

enum ring_op_kind { RING_RECV, RING_SEND, RING_ACCEPT_MULTI, RING_RECV_MULTI };

/* Starts an operation on fd: a free slot, a buffer of len bytes the
 * operation owns (for RING_SEND, a copy of data; RING_ACCEPT_MULTI has
 * none), and its SQE queued (submitted at the next park). 0 and *id, or
 * -ENOMEM (no slot, no memory). */
int ring_op_start(struct ring *r, enum ring_op_kind kind, int fd, const void *data, size_t len, ring_op_id *id);
/* Pending, with cx's waker registered (contract 5), until the operation
 * has a completion to hand out; then Ready with its result (the CQE's res:
 * bytes, a descriptor, or -errno) in *res. A RING_RECV's bytes are in
 * ring_op_buffer. A multishot operation hands out its completions in
 * order, one per Ready. */
enum poll ring_op_poll(struct ring *r, ring_op_id id, struct context *cx, int32_t *res);
/* The operation's buffer: the kernel's while the operation is submitted. */
void *ring_op_buffer(struct ring *r, ring_op_id id);
/* True once the operation's last CQE came (none with F_MORE) and every
 * completion was handed out: nothing more will come of it. */
bool ring_op_done(struct ring *r, ring_op_id id);
/* Resubmits a finished single-shot operation of the same kind on the same
 * buffer, len bytes from offset off (a send's rest after a partial send). */
void ring_op_resubmit(struct ring *r, ring_op_id id, size_t off, size_t len);
/* Contract 1: freed at once, or an orphan until its last CQE. */
void ring_op_drop(struct ring *r, ring_op_id id);

/* ---- multishot receive with provided buffers (contract 6; Linux 6.0) ---- */

/* Starts a multishot receive on fd with a ring of nbufs provided buffers
 * (a power of two, at most 32768) of buf_size bytes each, registered with
 * the ring (IORING_REGISTER_PBUF_RING) under a group id of the operation's
 * own. 0 and *id, -EINVAL (nbufs not a power of two, or 0 buf_size),
 * -ENOMEM, or the registration's -errno. */
int ring_recv_multi_start(struct ring *r, int fd, unsigned nbufs, size_t buf_size, ring_op_id *id);
/* Pending, with cx's waker registered (contract 5), until a completion is
 * there to hand out; then Ready with *res: bytes (> 0) copied into dst
 * (at most cap, cap > 0: the rest of that buffer waits for the next
 * poll), 0 at end of stream, or -errno. In order of arrival. A buffer
 * whose bytes were all copied out goes back to the ring here. */
enum poll ring_recv_poll(struct ring *r, ring_op_id id, struct context *cx, void *dst, size_t cap, int32_t *res);

/* ---- test hooks ---- */

struct ring_stats {
    unsigned ops;          /* slots in use, orphans included */
    unsigned orphans;      /* dropped operations waiting for their last CQE */
    uint64_t sqes;         /* SQEs queued for operations (cancels and the wake read not counted) */
    uint64_t cancels;      /* IORING_OP_ASYNC_CANCEL SQEs queued */
    uint64_t enters;       /* parks that entered the kernel */
    uint64_t wake_writes;  /* eventfd writes made by unpark */
    unsigned bufs_held;    /* provided buffers a CQE named and not given back yet, all operations */
};
struct ring_stats ring_test_stats(struct ring *r);

#endif
