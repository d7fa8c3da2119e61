/* measure.c - poll counting, CPU clocks and the drop counter. */
#define _GNU_SOURCE
#include <stdlib.h>
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

/* ---- drop counter ---------------------------------------------------------- */

/* relaxed: read by the test thread only after the threads that drop values
 * have been joined or have signalled through an acquire/release pair. */
static atomic_uint drop_calls;
static _Atomic(void *) drop_last;

void record_drop(void *value)
{
    atomic_fetch_add_explicit(&drop_calls, 1, memory_order_relaxed);
    atomic_store_explicit(&drop_last, value, memory_order_relaxed);
}

void record_drop_and_free(void *value)
{
    record_drop(value);
    free(value);
}

unsigned dropped_calls(void) { return atomic_load_explicit(&drop_calls, memory_order_relaxed); }
void *dropped_last(void) { return atomic_load_explicit(&drop_last, memory_order_relaxed); }
