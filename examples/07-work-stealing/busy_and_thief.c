/* busy_and_thief.c - stage 07's traced example: one worker busy, the other
 * stealing from it.
 *
 *   make trace STAGE=7 EXAMPLE=busy_and_thief                    your runtime (labs/)
 *   make trace STAGE=7 EXAMPLE=busy_and_thief TARGET=path/to/tree   another tree like labs/
 *
 * Your stage 07 must run; an earlier stage of yours that make grade would
 * replace (a skeleton, or one that fails its tests) is the reference's here
 * too, and one line says so (docs/tracing.md).
 *
 * Two workers. The main thread blocks on a root task; the root arrives
 * through the injector, so one worker (call it A) pulls it from there. Its
 * first poll spawns CHILDREN tasks, which go to A's own deque, and then
 * keeps A busy for ROOT_MS without returning (standing for a long
 * computation; longer, up to 5 s, until some child has started, which can
 * only be on the other worker). The other worker, B, is woken by the spawns and steals:
 * half of A's deque at a time, oldest first, until A's poll ends and A takes
 * what is left itself (newest first). Each child works for WORK_US, yields
 * once (a yield goes to the injector, so children come back through
 * injector pulls), works WORK_US again and returns its number; the root
 * joins them all (docs/07-work-stealing.md#a-trace-of-stealing).
 *
 *   busy_and_thief [children [work_us [root_ms]]]     (defaults 12, 300, 3)
 */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "join.h"
#include "runtime.h"
#include "yield_now.h"

#define MAX_CHILDREN 64

static long children = 12, work_us = 300, root_ms = 3;
static _Atomic bool child_started; /* a child ran while the root was busy: it was stolen */

static unsigned long long mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000u + (unsigned long long)ts.tv_nsec / 1000u;
}

/* Stands for the work a real task does between awaits. */
static void work(long us)
{
    unsigned long long until = mono_us() + (unsigned long long)us;
    while (mono_us() < until)
        ;
}

/* A child: work, yield once, work, return its number. */
struct child {
    struct yield_now y;
    uint64_t n;
    int polls;
};

static enum poll child_poll(void *self, struct context *cx, void *out)
{
    struct child *c = self;
    if (c->polls++ == 0) {
        atomic_store_explicit(&child_started, true, memory_order_relaxed); /* a flag only */
        work(work_us);
        if (yield_now_poll(&c->y, cx) == POLL_PENDING)
            return POLL_PENDING;
    }
    work(work_us);
    *(uint64_t *)out = c->n;
    return POLL_READY;
}

static const struct future_vtable child_vt = FUTURE_VTABLE_INIT(struct child, sizeof(uint64_t), child_poll, NULL);

/* The root: spawn the children, stay busy, then join them in order. */
struct root {
    struct join_handle *jh[MAX_CHILDREN];
    long spawned, joined;
    uint64_t sum;
};

static enum poll root_poll(void *self, struct context *cx, void *out)
{
    struct root *r = self;
    if (r->spawned == 0) {
        for (; r->spawned < children; r->spawned++) {
            struct child c = { .n = (uint64_t)r->spawned + 1 };
            yield_now_init(&c.y);
            r->jh[r->spawned] = ws_spawn(ws_current(), future_of(&child_vt, &c), NULL);
            if (!r->jh[r->spawned]) {
                fputs("busy_and_thief: spawn failed\n", stderr);
                exit(1);
            }
        }
        /* the busy worker: its deque is there for the taking. Busy for
         * root_ms, and longer until a child has started (on a loaded
         * machine the other worker may be slow to come): then at least one
         * steal happened (the children are on this worker's deque, and this
         * worker is here). At most 5 s. */
        unsigned long long until = mono_us() + (unsigned long long)root_ms * 1000u, cap = until + 5000000u;
        while (mono_us() < until || (!atomic_load_explicit(&child_started, memory_order_relaxed) &&
                                     mono_us() < cap))
            ;
    }
    for (; r->joined < r->spawned; r->joined++) {
        uint64_t v;
        enum join_status st;
        if (join_handle_poll(r->jh[r->joined], cx, &v, &st) == POLL_PENDING)
            return POLL_PENDING;
        join_handle_drop(r->jh[r->joined]);
        r->sum += v;
    }
    *(uint64_t *)out = r->sum;
    return POLL_READY;
}

static void root_drop(void *self)
{
    struct root *r = self;
    for (long i = r->joined; i < r->spawned; i++)
        join_handle_drop(r->jh[i]);
}

static const struct future_vtable root_vt = FUTURE_VTABLE_INIT(struct root, sizeof(uint64_t), root_poll, root_drop);

int main(int argc, char **argv)
{
    if (argc > 1)
        children = atol(argv[1]);
    if (argc > 2)
        work_us = atol(argv[2]);
    if (argc > 3)
        root_ms = atol(argv[3]);
    if (children < 1 || children > MAX_CHILDREN) {
        fprintf(stderr, "busy_and_thief: 1 to %d children\n", MAX_CHILDREN);
        return 2;
    }
    struct ws_runtime *rt = ws_runtime_new_default(2);
    if (!rt) {
        fputs("busy_and_thief: no runtime\n", stderr);
        return 1;
    }
    struct root r = { .spawned = 0 };
    uint64_t sum = 0;
    bool ok = ws_block_on(rt, future_of(&root_vt, &r), &sum);
    ws_runtime_free(rt);
    uint64_t want = (uint64_t)children * (uint64_t)(children + 1) / 2;
    printf("busy_and_thief: %ld children joined, sum %llu (expected %llu)\n", children,
           (unsigned long long)sum, (unsigned long long)want);
    return ok && sum == want ? 0 : 1;
}
