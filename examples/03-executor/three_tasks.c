/* three_tasks.c - stage 03's traced example: three tasks that yield.
 *
 *   make trace STAGE=3 EXAMPLE=three_tasks                    your executor (labs/)
 *   make trace STAGE=3 EXAMPLE=three_tasks TARGET=path/to/tree   another tree like labs/
 *
 * Your stage 03 must run; an earlier stage of yours that make grade would
 * replace (a skeleton, or one that fails its tests) is the reference's here
 * too, and one line says so (docs/tracing.md).
 *
 * Three tasks are spawned, then the executor runs. Each task yields three
 * times (yield_now: wake yourself, answer Pending) and then finishes, so
 * each is polled four times. A FIFO executor interleaves them
 * 1 2 3 1 2 3 1 2 3 1 2 3, and every wake comes from the task itself
 * (docs/tracing.md#three-yielding-tasks).
 *
 *   three_tasks [work_us [stall_ms]]
 * work_us: how long each poll busies itself (default 200 µs, so the polls
 * are wide enough to see in a picture); stall_ms: task 2's first poll sleeps
 * that long instead (default 0), to light the stall lamp.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "executor.h"
#include "yield_now.h"

#define TASKS 3
#define YIELDS 3

static long work_us = 200;
static long stall_ms = 0;

static unsigned long long mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000u + (unsigned long long)ts.tv_nsec / 1000u;
}

/* A task's state: a locals-across-await struct, like every future here. */
struct yielder {
    struct yield_now y;
    int id;
    int left;  /* yields still to make */
    int polls; /* polls so far */
};

static enum poll yielder_poll(void *self, struct context *cx, void *out)
{
    struct yielder *s = self;
    (void)out;
    if (s->polls++ == 0 && s->id == 2 && stall_ms > 0) {
        /* a poll that blocks the thread: what the stall lamp is for */
        struct timespec d = { .tv_sec = stall_ms / 1000, .tv_nsec = (stall_ms % 1000) * 1000000L };
        nanosleep(&d, NULL);
    } else {
        unsigned long long until = mono_us() + (unsigned long long)work_us;
        while (mono_us() < until)
            ; /* stands for the work a real task does between awaits */
    }
    while (s->left > 0) {
        if (yield_now_poll(&s->y, cx) == POLL_PENDING)
            return POLL_PENDING;
        s->left--;
        yield_now_init(&s->y);
    }
    return POLL_READY;
}

static const struct future_vtable yielder_vt =
    FUTURE_VTABLE_INIT(struct yielder, 0, yielder_poll, NULL);

int main(int argc, char **argv)
{
    if (argc > 1)
        work_us = atol(argv[1]);
    if (argc > 2)
        stall_ms = atol(argv[2]);
    struct executor *ex = executor_new_default();
    if (!ex)
        return 1;
    for (int i = 1; i <= TASKS; i++) {
        struct yielder s = { .id = i, .left = YIELDS };
        yield_now_init(&s.y);
        struct join_handle *jh = executor_spawn(ex, future_of(&yielder_vt, &s), NULL);
        if (!jh)
            return 1;
        join_handle_drop(jh); /* detached: run() waits for every task anyway */
    }
    enum executor_status st = executor_run(ex);
    printf("three_tasks: %s\n", executor_status_str(st));
    executor_free(ex);
    return st == EXECUTOR_OK ? 0 : 1;
}
