/* uring_probe.c - a ring set up as stage 08's code sets one up, linked with
 * the grader's wrap of liburing's set-up (grader/tests/08-uring/
 * uring_guard.c, whose pool the harness fills before the seal): an open
 * through the ring is refused, a no-op is not.
 * Prints "name result" per operation (a CQE's res: 0 or -errno), or
 * "setup -errno" when this machine has no io_uring. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>

#include <liburing.h>

static int one(struct io_uring *ring, const char *name, void (*prep)(struct io_uring_sqe *))
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    prep(sqe);
    io_uring_submit(ring);
    struct io_uring_cqe *cqe;
    int e = io_uring_wait_cqe(ring, &cqe);
    int res = e < 0 ? e : cqe->res;
    if (e == 0)
        io_uring_cqe_seen(ring, cqe);
    printf("%s %d\n", name, res > 0 ? 0 : res);
    return res;
}

static void nop(struct io_uring_sqe *sqe) { io_uring_prep_nop(sqe); }
static void open_mem(struct io_uring_sqe *sqe) { io_uring_prep_openat(sqe, AT_FDCWD, "/proc/self/mem", O_RDWR, 0); }
static void close_stdin(struct io_uring_sqe *sqe) { io_uring_prep_close(sqe, 0); }

void lab_before_seal(void);   /* uring_guard.c: the pool of rings, made before the seal */

int main(void)
{
    lab_before_seal();
    struct io_uring ring;
    int e = io_uring_queue_init(4, &ring, 0);
    if (e < 0) {
        printf("setup %d\n", e);
        return 0;
    }
    one(&ring, "nop", nop);
    one(&ring, "openat", open_mem);
    one(&ring, "close", close_stdin);
    io_uring_queue_exit(&ring);
    return 0;
}
