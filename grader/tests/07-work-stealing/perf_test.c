/* perf_test.c - serial: two workers against one on a CPU-bound task tree,
 * measured in the same run (a ratio, so the machine's speed cancels out). */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "stage07.h"

LAB_SUITE(ws_perf, 120);

/* A node of a binary tree of tasks: a leaf burns CPU; an inner node spawns
 * its two children and joins them. */
struct node {
    unsigned depth;
    unsigned phase;
    struct join_handle *kid[2];
};

static _Atomic uint64_t sink; /* keeps the loop from being optimized away */

static void burn(unsigned iters)
{
    uint64_t x = 88172645463325252ull;
    for (unsigned i = 0; i < iters; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    atomic_fetch_add_explicit(&sink, x, memory_order_relaxed);
}

static unsigned leaf_iters;
static atomic_uint leaves_by[2]; /* leaves run by worker 0 and worker 1 */

static enum poll node_poll(void *self, struct context *cx, void *out);
static void node_drop(void *self)
{
    struct node *n = self;
    for (int i = 0; i < 2; i++)
        if (n->kid[i])
            join_handle_drop(n->kid[i]);
}
static const struct future_vtable node_vt = FUTURE_VTABLE_INIT(struct node, 0, node_poll, node_drop);

static struct join_handle *spawn_node(unsigned depth)
{
    struct node n = { .depth = depth };
    struct join_handle *jh = ws_spawn(ws_current(), future_of(&node_vt, &n), NULL);
    cr_assert_not_null(jh, "ws_spawn from inside a task returned NULL");
    return jh;
}

static enum poll node_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct node *n = self;
    if (n->depth == 0) {
        int w = ws_current_worker();
        if (w >= 0 && w < 2)
            atomic_fetch_add_explicit(&leaves_by[w], 1, memory_order_relaxed);
        burn(leaf_iters);
        return POLL_READY;
    }
    if (n->phase == 0) {
        n->kid[0] = spawn_node(n->depth - 1);
        n->kid[1] = spawn_node(n->depth - 1);
        n->phase = 1;
    }
    for (int i = 0; i < 2; i++) {
        if (!n->kid[i])
            continue;
        enum join_status st;
        if (join_handle_poll(n->kid[i], cx, NULL, &st) == POLL_PENDING)
            return POLL_PENDING;
        join_handle_drop(n->kid[i]);
        n->kid[i] = NULL;
    }
    return POLL_READY;
}

static uint64_t last_cpu; /* process CPU time of the last tree: the test's thread only */

static uint64_t tree(struct ws_runtime *rt, unsigned depth)
{
    struct node root = { .depth = depth };
    atomic_store(&leaves_by[0], 0);
    atomic_store(&leaves_by[1], 0);
    uint64_t c0 = process_cpu_ns(), t0 = monotonic_ns();
    cr_assert(ws_block_on(rt, future_of(&node_vt, &root), NULL), "the task tree did not complete");
    last_cpu = process_cpu_ns() - c0;
    return monotonic_ns() - t0;
}

/* The same leaves on plain threads: what two cores give right now. */
struct raw_arg {
    unsigned leaves;
};
static void *raw_thread(void *arg)
{
    struct raw_arg *r = arg;
    for (unsigned i = 0; i < r->leaves; i++)
        burn(leaf_iters);
    return NULL;
}
static uint64_t raw(unsigned threads, unsigned leaves)
{
    pthread_t th[2];
    struct raw_arg a = { .leaves = leaves / threads };
    uint64_t t0 = monotonic_ns();
    for (unsigned i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, raw_thread, &a);
    for (unsigned i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    return monotonic_ns() - t0;
}

LAB_TEST(ws_perf, two_workers_speed_up_a_tree, 120)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        lab_note("cannot judge: one CPU");
        return;
    }
    leaf_iters = 20000; /* about 20-40 us a leaf */
    unsigned depth = 11; /* 2048 leaves */
    struct ws_runtime *one = new_runtime(1), *two = new_runtime(2);
    tree(one, 4); /* warm up */
    tree(two, 4);
    uint64_t best1 = UINT64_MAX, best2 = UINT64_MAX, raw1 = UINT64_MAX, raw2 = UINT64_MAX;
    double ratio = 0, machine = 0;
    uint64_t cpu2 = 0;
    double share = 0;       /* the smaller worker's share of the leaves, in the best 2-worker run */
    unsigned quiet = 0;     /* rounds in which two plain threads got at least QUIET */
    double best_quiet = 0;  /* the runtime's best speed-up within such a round */
    const double QUIET = 1.75;
    for (int k = 0; k < 9; k++) {
        /* One round: the four timings back to back, so that a round's
         * runtime ratio and machine ratio see the same machine. */
        uint64_t a = tree(one, depth), b = tree(two, depth);
        unsigned l0 = atomic_load(&leaves_by[0]), l1 = atomic_load(&leaves_by[1]);
        double sh = (double)(l0 < l1 ? l0 : l1) / (double)(l0 + l1 ? l0 + l1 : 1);
        if (b < best2) {
            cpu2 = last_cpu;
            share = sh;
        }
        if (a < best1)
            best1 = a;
        if (b < best2)
            best2 = b;
        uint64_t r1 = raw(1, 1u << depth), r2 = raw(2, 1u << depth);
        if (r1 < raw1)
            raw1 = r1;
        if (r2 < raw2)
            raw2 = r2;
        ratio = (double)best1 / (double)best2;
        machine = (double)raw1 / (double)raw2;
        if ((double)r1 / (double)r2 >= QUIET) {
            quiet++;
            if ((double)a / (double)b > best_quiet)
                best_quiet = (double)a / (double)b;
        }
        if (k >= 2 && ratio >= 1.75)
            break;
        if (quiet >= 4 && ratio < 1.6)
            break; /* enough quiet rounds to judge a failure */
    }
    lab_note("task tree of %u leaves: 1 worker %.2f ms, 2 workers %.2f ms (best of k, %.2f ms of CPU, the smaller "
             "worker ran %.0f%% of the leaves): speed-up %.2f; two plain threads on the same work: %.2f; "
             "%u quiet round(s), best speed-up in one %.2f",
             1u << depth, best1 / 1e6, best2 / 1e6, cpu2 / 1e6, 100 * share, ratio, machine, quiet, best_quiet);
    ws_runtime_free(one);
    ws_runtime_free(two);
    if (ratio >= 1.6)
        return;
    /* A second worker that never gets work is a failure on any machine: on
     * a loaded one the second worker still finds some of the leaves. */
    if (share < 0.05)
        cr_assert_fail("two workers ran a CPU-bound task tree of %u leaves, and one of them ran only %.1f%% "
                       "of the leaves (speed-up %.2f): it stayed idle while the other's deque held work "
                       "(runtime.h contract 2: nothing queued is stranded while a worker is idle)", 1u << depth, 100 * share, ratio);
    if (quiet >= 3)
        cr_assert_fail("two workers ran a CPU-bound task tree only %.2f times as fast as one (1: %.2f ms, 2: %.2f "
                       "ms), even in the %u rounds where two plain threads doing the same leaves got %.2f or more "
                       "(best %.2f in such a round); at least 1.6 was expected: the second worker spent the run "
                       "idle beside queued work (runtime.h contract 2)",
                       ratio, best1 / 1e6, best2 / 1e6, quiet, QUIET, best_quiet);
    lab_cannot_judge("the machine is loaded: two plain threads doing the same leaves got %.2f or more in only %u "
                     "of the rounds (best %.2f overall); the runtime's two workers got %.2f, the smaller one "
                     "running %.0f%% of the leaves. A wall-clock speed-up needs two free cores",
                     QUIET, quiet, machine, ratio, 100 * share);
}
