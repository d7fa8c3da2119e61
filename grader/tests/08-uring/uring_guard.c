/* uring_guard.c - the rings code under test gets are made before the test
 * begins, restricted to the operations a socket driver uses.
 *
 * An io_uring operation does not pass through the harness's seccomp filter
 * (harness.c, seal_code), so a ring could open /proc/self/mem for writing
 * (IORING_OP_OPENAT) and patch the test's code, or close, cut or rewrite
 * the record's descriptor: everything the filter refuses. So the filter
 * refuses io_uring_setup itself, and the rings come from a pool that
 * lab_before_seal (called by the harness just before the seal) fills:
 * each made with IORING_SETUP_R_DISABLED, given its restrictions
 * (IORING_REGISTER_RESTRICTIONS, Linux 5.10; registered once, never
 * lifted) and enabled. No open, close, write to a file, truncate, splice
 * or fixed-file install is among them; reads, receives, sends, accepts,
 * polls, timeouts, cancels and messages between rings are. The grader
 * links this stage with --wrap on io_uring_queue_init and
 * io_uring_queue_init_params (build.py's WRAP): the stage's own set-up
 * takes a ring of the pool (its size rounded up to a power of two, as the
 * kernel does; flags 0, as ring.c's given code asks). A wrapper alone was
 * not enough: the third red-team pass called the real set-up, which the
 * binary imports, through its table of addresses, got a ring without
 * restrictions and wrote over the harness's code through it (9 of 19
 * points on stage 08 for code that earns 0).
 * Operation numbers past Linux 5.15's (older liburing headers lack their
 * names) are written as numbers; the stage needs Linux 5.19, which has
 * them all. Versions from liburing 2.3's man pages: io_uring_register(2)
 * (RESTRICTIONS and ENABLE_RINGS 5.10, RING_FDS 5.18),
 * io_uring_register_buf_ring(3) (5.19), io_uring_enter(2) (MSG_RING 5.18,
 * SOCKET 5.19, IOSQE_CQE_SKIP_SUCCESS 5.17). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <liburing.h>

int __real_io_uring_queue_init_params(unsigned entries, struct io_uring *ring, struct io_uring_params *p);
int __wrap_io_uring_queue_init_params(unsigned entries, struct io_uring *ring, struct io_uring_params *p);
int __wrap_io_uring_queue_init(unsigned entries, struct io_uring *ring, unsigned flags);
void lab_before_seal(void);
unsigned uring_pool_left(unsigned entries);

static const unsigned char SQE_OPS[] = {
    IORING_OP_NOP, IORING_OP_READV, IORING_OP_POLL_ADD, IORING_OP_POLL_REMOVE, IORING_OP_SENDMSG,
    IORING_OP_RECVMSG, IORING_OP_TIMEOUT, IORING_OP_TIMEOUT_REMOVE, IORING_OP_ACCEPT, IORING_OP_ASYNC_CANCEL,
    IORING_OP_LINK_TIMEOUT, IORING_OP_CONNECT, IORING_OP_READ, IORING_OP_SEND, IORING_OP_RECV,
    IORING_OP_PROVIDE_BUFFERS, IORING_OP_REMOVE_BUFFERS, IORING_OP_SHUTDOWN,
    40, /* IORING_OP_MSG_RING, Linux 5.18 */
    45, /* IORING_OP_SOCKET, Linux 5.19 */
};
static const unsigned char REGISTER_OPS[] = {
    IORING_REGISTER_BUFFERS, IORING_UNREGISTER_BUFFERS, IORING_REGISTER_EVENTFD, IORING_UNREGISTER_EVENTFD,
    IORING_REGISTER_EVENTFD_ASYNC, IORING_REGISTER_PROBE, IORING_REGISTER_IOWQ_MAX_WORKERS,
    20, 21, /* IORING_(UN)REGISTER_RING_FDS, Linux 5.18 */
    22, 23, /* IORING_(UN)REGISTER_PBUF_RING, Linux 5.19 */
};

/* One restricted ring of `entries`, made now (before the seal). */
static int make_restricted(unsigned entries, struct io_uring *ring, struct io_uring_params *p)
{
    memset(p, 0, sizeof *p);
    p->flags = IORING_SETUP_R_DISABLED;
    int e = __real_io_uring_queue_init_params(entries, ring, p);
    if (e < 0)
        return e;
    enum { NSQE = sizeof SQE_OPS, NREG = sizeof REGISTER_OPS };
    struct io_uring_restriction res[NSQE + NREG + 1];
    memset(res, 0, sizeof res);
    for (unsigned i = 0; i < NSQE; i++) {
        res[i].opcode = IORING_RESTRICTION_SQE_OP;
        res[i].sqe_op = SQE_OPS[i];
    }
    for (unsigned i = 0; i < NREG; i++) {
        res[NSQE + i].opcode = IORING_RESTRICTION_REGISTER_OP;
        res[NSQE + i].register_op = REGISTER_OPS[i];
    }
    res[NSQE + NREG].opcode = IORING_RESTRICTION_SQE_FLAGS_ALLOWED;
    res[NSQE + NREG].sqe_flags = IOSQE_IO_DRAIN | IOSQE_IO_LINK | IOSQE_IO_HARDLINK | IOSQE_ASYNC |
                                 IOSQE_BUFFER_SELECT | (1U << 6) /* IOSQE_CQE_SKIP_SUCCESS, Linux 5.17 */;
    /* the system call itself: liburing's io_uring_register_restrictions and
     * io_uring_enable_rings are missing from some builds of its shared
     * library (Debian's 2.3) */
    if (syscall(SYS_io_uring_register, ring->ring_fd, IORING_REGISTER_RESTRICTIONS, res, NSQE + NREG + 1) < 0 ||
        syscall(SYS_io_uring_register, ring->ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0) < 0) {
        e = -errno;
        io_uring_queue_exit(ring);   /* no ring rather than one without its restrictions */
        return e;
    }
    p->flags &= ~IORING_SETUP_R_DISABLED;
    return 0;
}

/* The pool: POOL_EACH rings of each power of two up to 2^(POOL_SIZES-1)
 * entries (the tests ask for 2 to 64), each taken at most once; of 8
 * entries, POOL_EIGHTS: ring_driver_race/unpark_after_every_access_of_park
 * takes a fresh ring of 8 for every place of park it stops at, as many
 * places as uring_pool_left(8) says. A ring costs a descriptor and well
 * under 0.1 ms to make (Linux 6.18: 576 rings in under 40 ms). */
#define POOL_SIZES 9
#define POOL_EACH 4
#define POOL_EIGHTS 64
static struct io_uring pool[POOL_SIZES][POOL_EIGHTS];
static struct io_uring_params pool_params[POOL_SIZES][POOL_EIGHTS];
static atomic_bool pool_full[POOL_SIZES][POOL_EIGHTS]; /* set by lab_before_seal; taken by exchange (relaxed:
                                                          the pool was filled before any thread of the body ran) */
static int pool_error; /* -errno of a set-up that failed (no io_uring here); written before the body runs */

static unsigned pool_each(unsigned k) { return k == 3 ? POOL_EIGHTS : POOL_EACH; }

void lab_before_seal(void)
{
    for (unsigned k = 0; k < POOL_SIZES; k++)
        for (unsigned j = 0; j < pool_each(k); j++) {
            if (atomic_load_explicit(&pool_full[k][j], memory_order_relaxed))
                continue;
            int e = make_restricted(1u << k, &pool[k][j], &pool_params[k][j]);
            if (e < 0) {
                pool_error = e;
                return;
            }
            atomic_store_explicit(&pool_full[k][j], true, memory_order_relaxed);
        }
}

int __wrap_io_uring_queue_init_params(unsigned entries, struct io_uring *ring, struct io_uring_params *p)
{
    struct io_uring_params none;
    memset(&none, 0, sizeof none);
    if (entries == 0 || memcmp(p, &none, sizeof none) != 0)
        return -EINVAL;   /* the pool's rings have no flags and no other parameters */
    unsigned k = 0;
    while (k < POOL_SIZES && (1u << k) < entries)
        k++;
    if (k == POOL_SIZES)
        return -ENOMEM;
    for (unsigned j = 0; j < pool_each(k); j++)
        if (atomic_exchange_explicit(&pool_full[k][j], false, memory_order_relaxed)) {
            *ring = pool[k][j];
            *p = pool_params[k][j];
            return 0;
        }
    return pool_error ? pool_error : -EMFILE;   /* no io_uring here, or the pool ran out */
}

unsigned uring_pool_left(unsigned entries)
{
    unsigned k = 0, left = 0;
    while (k < POOL_SIZES && (1u << k) < entries)
        k++;
    for (unsigned j = 0; k < POOL_SIZES && j < pool_each(k); j++)
        left += atomic_load_explicit(&pool_full[k][j], memory_order_relaxed);
    return left;
}

int __wrap_io_uring_queue_init(unsigned entries, struct io_uring *ring, unsigned flags)
{
    if (flags != 0)
        return -EINVAL;
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    return __wrap_io_uring_queue_init_params(entries, ring, &p);
}

/* ---- -EBUSY on demand ----------------------------------------------------------
 *
 * The kernel answers a submit with -EBUSY when completions are waiting that
 * it cannot post (its overflow list cannot be flushed into a full CQ): the
 * submitter must take CQEs first (ring.h contract 3). That state is hard to
 * reach on purpose, so a test arms this wrapper (build.py's WRAP sends the
 * stage's io_uring_submit here): while armed, a submit with CQEs ready in
 * the ring answers -EBUSY, as long as the ring's CQ head has not moved since
 * the last such answer, which is what the kernel would go on saying. A
 * submitter that never takes a CQE would spin for ever; after BUSY_SPIN
 * answers in a row with no CQE taken the wrapper notes it and lets the
 * submit through, so the test ends and can say so. */
#define BUSY_SPIN 10000

int __real_io_uring_submit(struct io_uring *ring);
int __wrap_io_uring_submit(struct io_uring *ring);
void uring_busy_arm(bool on);
unsigned uring_busy_answers(void);
bool uring_busy_spun(void);

static atomic_bool busy_armed;
static atomic_uint busy_answers;   /* -EBUSY answers given while armed */
static atomic_bool busy_spun;      /* BUSY_SPIN answers in a row with no CQE taken */
static unsigned busy_row;          /* the submitter's thread only, while armed */

/* Arming starts the counts afresh; disarming keeps them for the test to read. */
void uring_busy_arm(bool on)
{
    if (on) {
        busy_row = 0;
        atomic_store(&busy_answers, 0);
        atomic_store(&busy_spun, false);
    }
    atomic_store(&busy_armed, on);
}

unsigned uring_busy_answers(void) { return atomic_load(&busy_answers); }
bool uring_busy_spun(void) { return atomic_load(&busy_spun); }

int __wrap_io_uring_submit(struct io_uring *ring)
{
    if (atomic_load(&busy_armed) && io_uring_cq_ready(ring) > 0) {
        if (++busy_row <= BUSY_SPIN) {
            atomic_fetch_add(&busy_answers, 1);
            return -EBUSY;
        }
        atomic_store(&busy_spun, true);
    }
    busy_row = 0;
    return __real_io_uring_submit(ring);
}
