/* support.c - the code behind stage08.h. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>

#include "executor_checks.h"
#include "stage08.h"

/* The kernel this stage needs: multishot accept (IORING_ACCEPT_MULTISHOT)
 * came in Linux 5.19, the last of the features the stage uses; before it
 * the reference itself cannot pass, so nothing can be judged. */
#define KERNEL_MAJOR 5
#define KERNEL_MINOR 19

void require_io_uring(void)
{
    /* the probe's ring comes from the test's pool (uring_guard.c), which a
     * ring freed does not go back to: once is enough. relaxed: set by the
     * thread that probed, and only ever from false to true */
    static atomic_bool available;
    if (atomic_load_explicit(&available, memory_order_relaxed))
        return;
    struct utsname u;
    int major = 0, minor = 0;
    if (uname(&u) == 0 && sscanf(u.release, "%d.%d", &major, &minor) == 2 &&
        (major < KERNEL_MAJOR || (major == KERNEL_MAJOR && minor < KERNEL_MINOR)))
        lab_cannot_judge("this kernel is Linux %d.%d; stage 08 needs %d.%d (multishot accept); "
                         "docs/instructors.md#io_uring-where-the-grader-runs says where it runs",
                         major, minor, KERNEL_MAJOR, KERNEL_MINOR);
    struct io_uring probe;
    int e = io_uring_queue_init(2, &probe, 0);
    if (e == 0) {
        io_uring_queue_exit(&probe);
        atomic_store_explicit(&available, true, memory_order_relaxed);
        return;
    }
    lab_cannot_judge("io_uring is not available here (io_uring_setup: %s); "
                     "docs/instructors.md#io_uring-where-the-grader-runs says where it is", strerror(-e));
}

/* A multishot receive (IORING_RECV_MULTISHOT) came in Linux 6.0
 * (io_uring_prep_recv(3), liburing 2.3: "Multishot variants are available
 * since kernel 6.0"); provided-buffer rings (IORING_REGISTER_PBUF_RING) in
 * 5.19 (io_uring_register_buf_ring(3)). Before 6.0 the reference's
 * receive fails with -EINVAL: nothing can be judged. */
void require_multishot_recv(void)
{
    struct utsname u;
    int major = 0, minor = 0;
    if (uname(&u) == 0 && sscanf(u.release, "%d.%d", &major, &minor) == 2 && major < 6)
        lab_cannot_judge("this kernel is Linux %d.%d; a multishot receive needs 6.0; "
                         "docs/instructors.md#io_uring-where-the-grader-runs says where it runs", major, minor);
    require_io_uring();
}

struct ring *ring_or_skip(unsigned sq_entries, unsigned max_ops)
{
    require_io_uring();
    struct ring *r = NULL;
    int e = ring_new(sq_entries, max_ops, &r);
    cr_assert_eq(e, 0, "ring_new(%u, %u) failed: %s", sq_entries, max_ops, strerror(-e));
    cr_assert_not_null(r, "ring_new returned 0 and no ring");
    return r;
}

void ring_free_checked(struct ring *r)
{
    struct ring_stats st = ring_test_stats(r);
    cr_assert_eq(st.ops - st.orphans, 0, "%u operations that are not orphans left in the ring's slab after every "
                 "future was dropped (ring.h contract 1)", st.ops - st.orphans);
    ring_free(r);
}

bool ring_idle(void *ring)
{
    return ring_test_stats(ring).ops == 0;
}

unsigned park_until(struct ring *r, bool (*cond)(void *), void *arg)
{
    struct driver d = ring_driver(r);
    uint64_t end = monotonic_ns() + (uint64_t)SCALED_MS(2000) * MS_NS;
    unsigned parks = 0;
    while (!cond(arg) && monotonic_ns() < end) {
        driver_park(d, parks < 4 ? 0 : (int64_t)MS_NS);
        parks++;
    }
    return parks;
}

bool accept_ready(void *arg)
{
    struct accept_wait *w = arg;
    if (!w->ready)
        w->ready = uring_accept_poll(w->a, w->cx, &w->res) == POLL_READY;
    return w->ready;
}

/* ---- a wait that may never end ------------------------------------------------- */

#define LET_OUT_SIGNAL SIGUSR1

static void on_let_out(int sig) { (void)sig; }

void let_out_ready(void)
{
    /* no SA_RESTART: the point is that the wait returns */
    struct sigaction sa = { .sa_handler = on_let_out };
    sigemptyset(&sa.sa_mask);
    cr_assert_eq(sigaction(LET_OUT_SIGNAL, &sa, NULL), 0, "sigaction failed in the test itself: %s", strerror(errno));
}

void let_out(pthread_t thread)
{
    pthread_kill(thread, LET_OUT_SIGNAL);
}

static void *guard_main(void *arg)
{
    struct park_guard *g = arg;
    struct timespec at;
    clock_gettime(CLOCK_MONOTONIC, &at);
    at.tv_sec += g->after_ms / 1000;
    at.tv_nsec += (long)(g->after_ms % 1000) * 1000000L;
    if (at.tv_nsec >= 1000000000L) {
        at.tv_sec++;
        at.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        if (pthread_cond_timedwait(&g->cv, &g->mu, &at) != ETIMEDOUT)
            continue;
        /* the deadline passed with the park still going: let it out, again every 10 ms */
        atomic_store_explicit(&g->fired, true, memory_order_relaxed); /* read after pthread_join, which orders it */
        let_out(g->target);
        at.tv_nsec += 10 * 1000000L;
        if (at.tv_nsec >= 1000000000L) {
            at.tv_sec++;
            at.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

void park_guard_start(struct park_guard *g, unsigned after_ms)
{
    g->target = pthread_self();
    g->after_ms = after_ms;
    g->stop = false;
    atomic_init(&g->fired, false);
    let_out_ready(); /* before the first signal can come */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&g->mu, NULL);
    cr_assert_eq(pthread_create(&g->thread, NULL, guard_main, g), 0, "pthread_create failed in the test itself");
}

bool park_guard_stop(struct park_guard *g)
{
    pthread_mutex_lock(&g->mu);
    g->stop = true;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    return atomic_load_explicit(&g->fired, memory_order_relaxed); /* after the join: the guard's store is seen */
}

void iostack_new(struct iostack *s)
{
    s->r = ring_or_skip(64, 4096);
    s->td = time_driver_new(ring_driver(s->r));
    cr_assert_not_null(s->td, "time_driver_new returned NULL");
    s->ex = executor_new(time_driver_driver(s->td));
    cr_assert_not_null(s->ex, "executor_new returned NULL");
}

void iostack_free(struct iostack *s)
{
    executor_free(s->ex);
    time_driver_free(s->td);
    ring_free_checked(s->r);
}

void iostack_run(struct iostack *s)
{
    expect_executor_run_ok(s->ex);
}

void iostack_spawn(struct iostack *s, struct future f)
{
    spawn_detached(s->ex, f);
}

unsigned open_sockets(void)
{
    DIR *d = opendir("/proc/self/fd");
    cr_assert_not_null(d, "could not open /proc/self/fd (the test's own failure)");
    unsigned n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[300], target[64];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len > 0 && (size_t)len >= strlen("socket:") && memcmp(target, "socket:", strlen("socket:")) == 0)
            n++;
    }
    closedir(d);
    return n;
}
