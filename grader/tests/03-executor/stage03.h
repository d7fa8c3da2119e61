/* stage03.h - what the stage 03 tests share (support.c has the code).
 *
 * Every test drives the public API only (executor.h, join.h, yield_now.h,
 * and the state word's bits from task.h), so any correct implementation
 * passes, whatever its private layout.
 *
 * The probe future is the tests' instrument. A task's future is copied into
 * the task at spawn, so the test cannot look at it there: a probe keeps its
 * counters in a probe_stats the test owns, and runs a test-supplied step
 * function on every poll. It counts polls and drops, notices a poll that
 * begins while another is still in progress (a concurrent poll), and can
 * keep a clone of its waker (the stash) for the test to wake from outside.
 */
#ifndef STAGE03_H
#define STAGE03_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "lab_test.h"
#include "gate.h"      /* a one-shot gate between two threads */
#include "measure.h"
#include "wakers.h"
#include "executor.h"
#include "join.h"
#include "task.h"
#include "yield_now.h"

/* Milliseconds, stretched like every timeout in the Valgrind lane. */
#define SCALED_MS(ms) ((unsigned)((ms) * LAB_TIMEOUT_SCALE))
/* How long a test waits for something that should happen at once. */
#define RESCUE_MS SCALED_MS(3000)
#define MS_NS UINT64_C(1000000)

/* ---- the probe future ---------------------------------------------------------- */

struct probe_stats;

/* Runs inside the probe's poll: nth counts this probe's polls from 1. On
 * POLL_READY it may write the output (a uint64_t) to *out. */
typedef enum poll (*probe_step)(struct probe_stats *st, unsigned nth, struct context *cx, uint64_t *out);

struct probe_stats {
    probe_step step;
    atomic_uint polls;     /* polls begun */
    atomic_uint drops;     /* future drops (must end at exactly 1) */
    atomic_int in_poll;    /* polls in progress right now */
    atomic_uint overlaps;  /* polls that began while another was in progress */
    pthread_mutex_t lock;  /* protects stash */
    struct waker stash;    /* a waker the future kept for the test; WAKER_NONE when none */
    struct join_handle *jh; /* the task's own join handle, for steps that need it (set by the test) */
    uint64_t value;        /* the output on Ready (steps that finish use it) */
    void *arg;             /* for the step */
    int id;
};

void probe_init(struct probe_stats *st, probe_step step, void *arg);
/* Spawns a probe task on ex (drop_output may be NULL); fails the test on NULL. */
struct join_handle *spawn_probe(struct executor *ex, struct probe_stats *st,
                                task_output_drop_fn drop_output);
/* The probe as a future whose state is at *storage (for spawn by hand). */
struct future probe_future(struct probe_stats **storage);
/* Keeps a clone of cx's waker in st->stash (dropping the one before). */
void probe_stash(struct probe_stats *st, struct context *cx);
/* Takes the stash out (WAKER_NONE when empty): the caller owns it. */
struct waker probe_take_stash(struct probe_stats *st);
/* Waits up to ms (1 ms naps) until a poll has stashed a waker; true when
 * one has. (polls counts a poll as it begins, before its step stashes.) */
bool probe_wait_stashed(struct probe_stats *st, unsigned ms);
/* Drops the stash if any; then frees the lock. */
void probe_destroy(struct probe_stats *st);

unsigned probe_polls(struct probe_stats *st);
unsigned probe_drops(struct probe_stats *st);

/* Steps used by several tests. */
enum poll step_ready(struct probe_stats *st, unsigned nth, struct context *cx, uint64_t *out);
/* Pending for ever, with no waker kept anywhere: the forgetful task. */
enum poll step_forget(struct probe_stats *st, unsigned nth, struct context *cx, uint64_t *out);
/* Pending for ever, keeping its latest waker in the stash. */
enum poll step_stash_forever(struct probe_stats *st, unsigned nth, struct context *cx, uint64_t *out);
/* Pending on the first poll (waker stashed), Ready on every later one. */
enum poll step_stash_once(struct probe_stats *st, unsigned nth, struct context *cx, uint64_t *out);

/* ---- outputs that own memory ------------------------------------------------------
 * A boxed output is a pointer to a malloc'd box: a leak shows in Valgrind and
 * in the allocation counter, a second drop as a double free. */
uint64_t box_new(uint64_t v);
uint64_t box_value(uint64_t box);
void box_free(uint64_t box);
/* A drop_output for boxed outputs: frees the box and counts. */
void box_drop_output(void *output);
unsigned box_drops(void);

/* ---- the executor on a watched thread ------------------------------------------------
 * A hang (a lost wake, a deadlock that is not detected) must fail the test
 * with a sentence, not time it out: run or block_on goes on a helper thread,
 * and the test waits for it with a deadline. */
struct bg_run {
    struct executor *ex;
    struct future root;        /* block_on's root, when root.vtable != NULL */
    void *out;
    bool until_idle;           /* run_until_idle instead of run */
    enum executor_status st;   /* its answer */
    uint64_t cpu_ns;           /* CPU time of the running thread inside the call */
    uint64_t wall_ns;
    atomic_bool done;
    pthread_mutex_t lock;      /* protects nothing but the wait below */
    pthread_cond_t cond;       /* signalled when done becomes true */
    pthread_t thread;
};

void bg_run_start(struct bg_run *b, struct executor *ex);
void bg_run_idle_start(struct bg_run *b, struct executor *ex); /* run_until_idle */
void bg_block_on_start(struct bg_run *b, struct executor *ex, struct future root, void *out);
/* True (and joined) when the call returned within ms. False: still inside
 * (the thread is left behind; the caller fails the test). */
bool bg_run_finish(struct bg_run *b, unsigned ms);

/* Runs ex on this thread, failing the test unless it returns `want`. */
void expect_run(struct executor *ex, enum executor_status want, const char *what);

/* A fresh executor (its own parker) or a failed test. */
struct executor *new_executor(void);

/* The state word of a task, through its join handle. */
uint64_t state_of(struct join_handle *jh);
/* "RUNNING|NOTIFIED|... refs=3 joining=0", for messages (a static buffer). */
const char *state_str(uint64_t s);

#endif
