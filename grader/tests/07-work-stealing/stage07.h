/* stage07.h - what the stage 07 tests share (support.c has the code).
 *
 * The tests drive the public API (deque.h, injector.h, runtime.h and
 * stage 03's join.h) and the test hooks those headers declare.
 *
 * A step task is the tests' instrument: its future holds a step function and
 * an argument; every poll calls step(arg, cx, nth) with nth counting this
 * task's polls from 1. A step that keeps state keeps it in what arg points
 * to, which the test owns. Dropping a step future counts in step_drops().
 */
#ifndef STAGE07_H
#define STAGE07_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "lab_test.h"
#include "gate.h"      /* a one-shot gate between two threads */
#include "measure.h"
#include "wakers.h"
#include "deque.h"
#include "injector.h"
#include "join.h"
#include "runtime.h"
#include "task.h"

#define SCALED_MS(ms) ((unsigned)((ms) * LAB_TIMEOUT_SCALE))
#define RESCUE_MS SCALED_MS(3000)

typedef enum poll (*step_fn)(void *arg, struct context *cx, unsigned nth);

/* Spawns a step task on rt (from this thread); fails the test on NULL. */
struct join_handle *spawn_step(struct ws_runtime *rt, step_fn fn, void *arg);
/* The step future at *storage (for ws_block_on). */
struct future step_future(void *storage, step_fn fn, void *arg);
#define STEP_STORAGE_SIZE 32
unsigned step_drops(void);
void step_drops_reset(void);

/* Waits (on this thread, not a worker) for the task to complete, up to ms;
 * true when it did. Drops the handle either way. */
bool join_within(struct join_handle *jh, unsigned ms);
/* join_within, up to ms, that gives up early when progress(arg) (a count
 * that only grows while the runtime works: polls made) stays the same for
 * stall_ms: a runtime whose workers all sleep with work queued fails in
 * stall_ms, not in ms. *stalled says which ended it. progress NULL: never
 * early (join_within is that). */
bool join_while_progress(struct join_handle *jh, unsigned long (*progress)(void *), void *arg, unsigned stall_ms,
                         unsigned ms, bool *stalled);
/* join_within for n handles, all within one ms (not ms each: a runtime
 * that never runs them fails in ms, not n times ms); how many completed.
 * Drops every handle. */
unsigned join_all_within(struct join_handle **jh, unsigned n, unsigned ms);
/* Polls until cond(arg) or ms pass (1 ms naps). */
bool wait_until(bool (*cond)(void *), void *arg, unsigned ms);
/* A runtime with n workers over its own parker, or a failed test. */
struct ws_runtime *new_runtime(unsigned n);
/* Waits until n workers sleep. */
bool wait_sleepers(struct ws_runtime *rt, unsigned n, unsigned ms);

/* A waker slot a test fills from inside a poll and wakes from anywhere. */
struct slot {
    pthread_mutex_t lock; /* protects w */
    struct waker w;
};
void slot_init(struct slot *s);
void slot_store(struct slot *s, struct context *cx); /* clone_from */
bool slot_wake(struct slot *s);                      /* wake by ref; false when empty */
bool slot_filled(void *s);                           /* holds a waker (a wait_until condition) */
void slot_destroy(struct slot *s);                   /* drops what it holds */

#endif
