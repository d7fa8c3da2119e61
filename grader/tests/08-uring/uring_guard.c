/* uring_guard.c - every ring that code under test sets up through liburing
 * starts disabled, is restricted to the operations a socket driver uses, and
 * only then runs.
 *
 * An io_uring operation does not pass through the harness's seccomp filter
 * (harness.c, seal_code), so a ring could open /proc/self/mem for writing
 * (IORING_OP_OPENAT) and patch the test's code, or close, cut or rewrite
 * the record's descriptor (IORING_OP_CLOSE, IORING_OP_FTRUNCATE, a write
 * with RWF_NOAPPEND): everything the filter refuses. The grader links this
 * stage with --wrap on io_uring_queue_init and io_uring_queue_init_params
 * (build.py's WRAP), so the calls the stage's code makes land here: the
 * ring is made with IORING_SETUP_R_DISABLED, given its restrictions
 * (IORING_REGISTER_RESTRICTIONS, Linux 5.10; they can be registered once
 * and never lifted) and enabled. No open, close, write to a file,
 * truncate, splice or fixed-file install is among them; reads, receives,
 * sends, accepts, polls, timeouts, cancels and messages between rings
 * are. Code that found liburing's real functions by walking the loaded
 * libraries would get an unrestricted ring: a deterrent, like the rest of
 * what runs in the test's process (docs/instructors.md, the threat model).
 * Operation numbers past Linux 5.15's (older liburing headers lack their
 * names) are written as numbers; the stage needs Linux 5.19, which has
 * them all. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <liburing.h>

int __real_io_uring_queue_init_params(unsigned entries, struct io_uring *ring, struct io_uring_params *p);
int __wrap_io_uring_queue_init_params(unsigned entries, struct io_uring *ring, struct io_uring_params *p);
int __wrap_io_uring_queue_init(unsigned entries, struct io_uring *ring, unsigned flags);

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

int __wrap_io_uring_queue_init_params(unsigned entries, struct io_uring *ring, struct io_uring_params *p)
{
    p->flags |= IORING_SETUP_R_DISABLED;
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
    return 0;
}

int __wrap_io_uring_queue_init(unsigned entries, struct io_uring *ring, unsigned flags)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = flags;
    return __wrap_io_uring_queue_init_params(entries, ring, &p);
}
