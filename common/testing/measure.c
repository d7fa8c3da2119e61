/* measure.c - poll counting and CPU clocks. */
#define _GNU_SOURCE
#include <time.h>
#include "measure.h"

static enum poll counted_poll(void *self, struct context *cx, void *out)
{
    struct poll_counter *pc = self;
    /* relaxed: a statistic; readers order themselves (join, or a wake) */
    atomic_fetch_add_explicit(&pc->polls, 1, memory_order_relaxed);
    return future_poll(pc->inner, cx, out);
}

static const struct future_vtable poll_counter_vt = {
    .poll = counted_poll, .drop = NULL, .size = sizeof(struct poll_counter),
    .align = _Alignof(struct poll_counter), .output_size = 0, .name = "poll_counter",
};

struct future poll_counter_future(struct poll_counter *pc)
{
    atomic_init(&pc->polls, 0);
    return future_of(&poll_counter_vt, pc);
}

unsigned long poll_counter_polls(struct poll_counter *pc)
{
    return atomic_load_explicit(&pc->polls, memory_order_relaxed);
}

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t thread_cpu_ns(void) { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }
uint64_t process_cpu_ns(void) { return clock_ns(CLOCK_PROCESS_CPUTIME_ID); }
uint64_t monotonic_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
