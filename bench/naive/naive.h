/* naive.h - the floor: a C port of the tiny executor of seed 004
 * ("Build a Tiny Async Executor in Rust to See How Wakers Work").
 *
 * Bench code, not a lab stage. It keeps that article's design on purpose,
 * costs included, so the lab's reference executor has something simple to be
 * measured against:
 *
 *   - a task is an Arc: a refcount, a mutex around the future slot
 *     (Mutex<Option<Pin<Box<dyn Future>>>>: the future lives in a second,
 *     separate allocation) and a sender to the ready queue;
 *   - the ready queue is a bounded channel (sync_channel(1024)) of task
 *     references, here a mutex + two condition variables over a linked list,
 *     one node allocated per send: every spawn and every wake allocates;
 *   - a waker is a task reference; waking sends a new reference into the
 *     queue. Two wakes make two queue entries; a wake of a finished task is
 *     a stale entry the run loop skips;
 *   - run() receives tasks until the queue is empty and every sender (the
 *     spawner's and each live task's) is gone.
 *
 * A send on a full queue blocks: with one thread, the run loop is the only
 * receiver, so spawning more than `capacity` tasks before run() (or from a
 * task) deadlocks, exactly as the article reports. The benchmark's spawn/join
 * row therefore makes its queue larger than the 10,000 tasks it spawns
 * (bench/README.md); the bound is a counter here, its size costs nothing.
 *
 * Join handles are the article's first "where to take it" step: a shared,
 * separately allocated slot with a mutex, the result and a waker.
 *
 * One thread runs run(); wakes may come from any thread (the mutexes and
 * atomics make that safe, as the Rust original's Send + Sync do).
 */
#ifndef BENCH_NAIVE_H
#define BENCH_NAIVE_H

#include <stdbool.h>
#include <stddef.h>
#include "future.h"

struct naive_executor; /* the receiver */
struct naive_spawner;  /* a sender */
struct naive_join;     /* a join handle: Arc<Mutex<slot>> */

/* A new executor and its spawner over a queue of `capacity` entries. */
void naive_new(size_t capacity, struct naive_executor **ex, struct naive_spawner **sp);
/* Another sender (SyncSender::clone), for tasks that spawn. */
struct naive_spawner *naive_spawner_clone(struct naive_spawner *sp);
void naive_spawner_drop(struct naive_spawner *sp);

/* Copies the future's state (vt->size bytes at `state`) into a new box and
 * queues a new task for it. The output, if any, is discarded. */
void naive_spawn(struct naive_spawner *sp, const struct future_vtable *vt, const void *state);
/* The same, plus a join handle that receives the output (vt->output_size
 * bytes, at most NAIVE_JOIN_MAX_OUTPUT). */
#define NAIVE_JOIN_MAX_OUTPUT 16
struct naive_join *naive_spawn_join(struct naive_spawner *sp, const struct future_vtable *vt,
                                    const void *state);

/* Polls queued tasks until the queue is empty and every sender is dropped,
 * then frees the executor. */
void naive_run(struct naive_executor *ex);

/* Polls the handle: POLL_READY (output copied to out) once the task has
 * finished, otherwise stores the context's waker and returns POLL_PENDING. */
enum poll naive_join_poll(struct naive_join *j, struct context *cx, void *out);
void naive_join_drop(struct naive_join *j);

#endif
