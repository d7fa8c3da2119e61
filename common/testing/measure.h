/* measure.h - counting what code costs: allocations, polls, CPU time.
 *
 * Allocation counter: the grader links tests with -Wl,--wrap=malloc (and
 * calloc, realloc, free, aligned_alloc, posix_memalign), so every allocation
 * made by the code under test passes through here. Counting is off until
 * alloc_count_start(). It can also make allocations fail on purpose.
 *
 * Poll counter: poll_counter wraps any future and counts its polls.
 *
 * CPU time: per thread (CLOCK_THREAD_CPUTIME_ID) and per process. Waiting
 * that costs no CPU is how a test tells parking from spinning.
 *
 * Drop counter: record_drop is a drop_value callback (stages 01 and 04's
 * signal_new and deadline_signal_new) that counts its calls and keeps the
 * last value.
 */
#ifndef LAB_TEST_MEASURE_H
#define LAB_TEST_MEASURE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "../future.h"

struct alloc_counts {
    uint64_t allocs; /* successful malloc/calloc/aligned_alloc/posix_memalign, realloc(NULL, n) */
    uint64_t frees;  /* free(p) with p != NULL, realloc(p, 0) */
};
void alloc_count_start(void);           /* zero the counts and count from now, all threads */
struct alloc_counts alloc_count_stop(void);  /* also ends any failure injection */
struct alloc_counts alloc_count_peek(void);  /* the counts so far; counting goes on */
/* Failure injection, for out-of-memory paths: while counting, the allocation
 * that would be number n+1 (n = 0: the very first) and every later one fail
 * (return NULL, or ENOMEM from posix_memalign). */
void alloc_fail_after(uint64_t n);
/* Own pages: while on for the calling thread, each allocation that thread
 * makes (malloc, calloc, and aligned_alloc or posix_memalign up to a page's
 * alignment) is the start of a mapping of its own, page-aligned, that holds
 * nothing else, so a test can watch that object's page alone
 * (store_buffer.h) with no neighbour sharing it. free and realloc take such
 * blocks back from any thread. At most 32 live at once; past that, an
 * allocation is an ordinary one. */
void alloc_own_pages(bool on);

struct poll_counter {
    struct future inner;
    atomic_ulong polls; /* read it with poll_counter_polls(), from any thread */
};
/* A future that polls `inner` and counts. Output: inner's. Dropping it does
 * not drop inner. */
struct future poll_counter_future(struct poll_counter *pc);
unsigned long poll_counter_polls(struct poll_counter *pc);

uint64_t thread_cpu_ns(void);
uint64_t process_cpu_ns(void);
uint64_t monotonic_ns(void);

/* ---- drop counter --------------------------------------------------------
 * record_drop only counts; record_drop_and_free also frees the value (for
 * tests whose values come from malloc, so Valgrind sees a value that was
 * dropped twice or never). The counts are process-wide and never reset:
 * each test runs in a process of its own. Read them on the test's thread
 * once the threads that may drop have been joined or have said so through
 * an acquire/release pair. */
void record_drop(void *value);
void record_drop_and_free(void *value);
unsigned dropped_calls(void);
void *dropped_last(void);

#endif
