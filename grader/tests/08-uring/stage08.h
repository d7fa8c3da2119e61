/* stage08.h - what the stage 08 tests share (support.c has the code).
 *
 * The tests drive the public API only: ring.h and uring_tcp.h, and below
 * them stage 05's time driver and sleep and stage 03's executor. Every
 * socket is a socketpair or bound to 127.0.0.1, port 0.
 *
 * Every test starts with ring_or_skip (or iostack_new, which calls it):
 * where the kernel or a seccomp filter refuses io_uring_setup (a kernel
 * without io_uring, io_uring_disabled, Docker's default profile), the test
 * ends with lab_cannot_judge in one line, and the item is "not judged",
 * never failed.
 */
#ifndef STAGE08_H
#define STAGE08_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lab_test.h"
#include "measure.h"
#include "raw_sockets.h"
#include "wakers.h"
#include "ring.h"
#include "uring_tcp.h"
#include "time_driver.h"
#include "sleep.h"
#include "executor.h"

#define MS_NS UINT64_C(1000000)
#define SCALED_MS(ms) ((unsigned)((ms) * LAB_TIMEOUT_SCALE))

/* Ends the test with lab_cannot_judge when io_uring_setup is refused here
 * (probed with liburing directly, before any of the stage's code runs). */
void require_io_uring(void);
/* require_io_uring, and cannot judge below Linux 6.0 (multishot receive). */
void require_multishot_recv(void);
/* require_io_uring, then ring_new(sq_entries, max_ops), asserted. */
struct ring *ring_or_skip(unsigned sq_entries, unsigned max_ops);
/* Asserts that no operation is left (orphans included), then frees. */
void ring_free_checked(struct ring *r);
/* Rings of `entries` the stage's code can still set up in this test: each
 * comes from a pool made before the test began (uring_guard.c), and a
 * ring freed does not go back to it. */
unsigned uring_pool_left(unsigned entries);
/* uring_guard.c: while armed, a submit with CQEs ready answers -EBUSY until
 * one is taken (as the kernel does when its overflow cannot be flushed);
 * how many times it did; whether the submitter kept submitting without
 * taking one (10,000 times in a row: then it let the submit through). */
void uring_busy_arm(bool on);
unsigned uring_busy_answers(void);
bool uring_busy_spun(void);
/* True when no operation is in the slab (cond for park_until). */
bool ring_idle(void *ring);
/* park(0) until cond(arg) or about 2 s (scaled) of parks; the parks made. */
unsigned park_until(struct ring *r, bool (*cond)(void *), void *arg);

/* An accept polled until Ready, for park_until: accept_ready(&w) polls w.a
 * with w.cx until it answers, then keeps the answer in w.res. */
struct accept_wait {
    struct uring_accept *a;
    struct context *cx;
    struct uring_stream_result res;
    bool ready;
};
bool accept_ready(void *accept_wait);

/* ---- a wait that may never end ---------------------------------------------
 * A thread parked in io_uring_enter is not in a futex wait: the harness's
 * stall detector cannot tell a park that no unpark or timeout will ever end
 * from a slow one, and the test would wait for its limit (10 s, three times
 * over in a race item). A test that knows how long its park may take at the
 * most ends it itself: let_out(thread) sends the thread a signal whose
 * handler does nothing and does not ask for a restart, so its
 * io_uring_enter returns -EINTR (liburing hands that back, and the park
 * returns). The test then fails, saying what it waited for. A park that
 * enters again on -EINTR is only caught at the test's limit, as before.
 * Not for the Valgrind lane's tests (a thread in io_uring_enter keeps the
 * others from running under Valgrind: docs/08-uring.md#freeing-the-ring).
 * let_out_ready installs the handler: call it before the thread can be
 * let out. */
void let_out_ready(void);
void let_out(pthread_t thread);

/* A deadline on the calling thread's parks: when park_guard_stop has not
 * been called after_ms from park_guard_start, the guard's thread lets the
 * caller out (let_out) every 10 ms until it is; park_guard_stop says
 * whether it had to. */
struct park_guard {
    pthread_t target, thread;
    unsigned after_ms;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;             /* under mu */
    atomic_bool fired;     /* the guard's store, read after the join */
};
void park_guard_start(struct park_guard *g, unsigned after_ms);
bool park_guard_stop(struct park_guard *g);

/* ---- the stack: ring <- time driver <- executor ------------------------- */
struct iostack {
    struct ring *r;
    struct time_driver *td;
    struct executor *ex;
};
void iostack_new(struct iostack *s);
void iostack_free(struct iostack *s);
void iostack_run(struct iostack *s);
void iostack_spawn(struct iostack *s, struct future f);

/* ---- raw sockets (the test's side) ------------------------------------------ */
/* nb_socketpair, raw_connect, raw_send_all, raw_recv_all, pattern_byte, drain_peer: raw_sockets.h */
/* Sockets open in the process now (/proc/self/fd). Sockets only: the
 * harness's watchdog thread opens descriptors of its own while the test
 * runs (its opendir("/proc/self/task"), every 0.1 s), and one caught open
 * between two counts is no leak of the code under test. Under Valgrind,
 * which runs a thread's syscall without its lock, beside two CPU hogs, a
 * count of every descriptor saw it in 1 run of 10 and 1 of 80. */
unsigned open_sockets(void);


#endif
