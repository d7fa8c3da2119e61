/* executor.h - stage 03: a single-thread executor that runs many tasks.
 *
 *   executor_spawn     a future becomes a task (one allocation); you get its
 *                      join handle (join.h). From the executor's thread only:
 *                      before run, or from inside a running task
 *                      (executor_current()).
 *   executor_run       polls ready tasks in FIFO order until every task is
 *                      complete. Every EXECUTOR_DRIVER_INTERVAL polls it gives
 *                      the driver (driver.h) a turn with a zero timeout; with
 *                      nothing ready it parks the thread on the driver until
 *                      a wake arrives: it never spins.
 *   executor_block_on  spawns a root future and runs until that one is done.
 *
 * The contract (docs/03-executor.md#the-contract), beside task.h's:
 *   1. Order: ready tasks run FIFO within each end of the ready queue
 *      (ready_queue.h). Spawns and wakes made on the executor's thread run
 *      in the order they were queued (a task woken during its own poll is
 *      queued when that poll returns: at the back, behind the others;
 *      yield_now does not wait for the driver). Wakes from other threads run
 *      in the order they were made among themselves, moved behind the local
 *      ones when the local end is empty and at least every
 *      READY_QUEUE_REMOTE_INTERVAL pops.
 *   2. Waiting costs nothing: with no task ready, the thread parks on the
 *      driver, and a wake from any thread unparks it.
 *   3. A wake never allocates and never blocks: the ready queue is intrusive
 *      and unbounded (a task is queued at most once at a time).
 *   4. Deadlock is an answer, not a hang: when no task is ready and no task
 *      can be woken by anything outside the executor, run (and block_on)
 *      returns EXECUTOR_DEADLOCK instead of sleeping forever. "Outside" means
 *      a waker the executor cannot account for: each task's references are
 *      counted in its state word, and the executor knows which of them are
 *      its own (its task list, queue entries, join handles, and wakers that
 *      its own tasks parked in each other's join handles). A join handle is
 *      not a waker: an abort from another thread does not count.
 *   5. Freeing the executor drops every task it still owns, pending ones
 *      included (their futures are dropped, their join handles see
 *      JOIN_CANCELLED), which breaks every cycle task -> future -> waker ->
 *      task. Wakers and join handles that outlive the executor stay safe to
 *      use: their tasks are complete. Free it from its own thread, not from
 *      inside a task, and not while another thread may be waking its tasks.
 *   6. The driver tick: while tasks stay ready, run (and block_on,
 *      run_until_idle) polls the driver with a zero timeout at least once
 *      every EXECUTOR_DRIVER_INTERVAL task polls. So a driver event that is
 *      ready (a due timer, a readable socket) waits at most
 *      EXECUTOR_DRIVER_INTERVAL polls plus the length of the poll that was
 *      running when it became ready before the driver wakes its task; that
 *      task is then queued behind the tasks already ready. A zero-timeout
 *      poll never sleeps.
 *
 * Ownership: executor_new* returns the only reference; executor_free frees.
 * The driver given to executor_new is borrowed: keep it alive until
 * executor_free returns.
 */
#ifndef LAB_EXECUTOR_H
#define LAB_EXECUTOR_H

#include <stddef.h>

#include "driver.h"
#include "future.h"
#include "join.h"
#include "task.h"

/* The driver tick of contract 6: task polls between two zero-timeout polls
 * of the driver, at most. Why 61: Tokio's event_interval is 61 (taken from
 * Go), and the same trade-off holds here. Smaller, and the tick costs more: a
 * zero-timeout poll is a CAS on stage 02's parker, two locks and a clock read
 * on stage 05's time driver, an epoll_wait system call (~0.15 us measured on
 * the lab's machine) on stage 06's, against ~25 ns for a task poll of the
 * yield benchmark: every 61 polls that is 2-3 ns a poll. Larger, and a
 * timer or a socket waits longer behind busy tasks: 61 polls of 1 us each
 * hold a timer back by 61 us, well under the wheel's 1 ms tick. A prime, so
 * the tick does not fall into step with a program's own period. */
#define EXECUTOR_DRIVER_INTERVAL 61u

struct executor;

enum executor_status {
    EXECUTOR_OK = 0,       /* every task (block_on: the root) completed */
    EXECUTOR_IDLE = 1,     /* run_until_idle: nothing ready, some tasks still pending */
    EXECUTOR_DEADLOCK = 2, /* nothing ready, and nothing outside can wake any task */
    EXECUTOR_NOMEM = 3,    /* block_on: no memory for the root task */
};

/* An executor that parks on `driver` (borrowed). NULL when out of memory. */
struct executor *executor_new(struct driver driver);
/* An executor with a parker of its own (stage 02) as its driver. */
struct executor *executor_new_default(void);
/* Drops every task still owned (contract 5), then frees the executor. */
void executor_free(struct executor *ex);

/* Moves `fut` into a new task, queued to run; returns its join handle. NULL
 * when out of memory (fut is then still the caller's) or while the executor
 * is being freed. drop_output may be NULL (the output owns nothing).
 * The executor's own thread only. */
struct join_handle *executor_spawn(struct executor *ex, struct future fut,
                                   task_output_drop_fn drop_output);

/* Runs until every task is complete (EXECUTOR_OK) or deadlocked
 * (EXECUTOR_DEADLOCK: the pending tasks stay, for executor_free or a later
 * run). Not from inside a task. */
enum executor_status executor_run(struct executor *ex);

/* Runs ready tasks until none is ready, without sleeping (it still gives
 * the driver its zero-timeout tick, contract 6): EXECUTOR_OK when every task
 * is complete, EXECUTOR_IDLE when some are pending. */
enum executor_status executor_run_until_idle(struct executor *ex);

/* Spawns `fut` (moved, as with spawn) and runs until it completes; its output
 * is moved to `out`. Other tasks run meanwhile and may remain pending after.
 * EXECUTOR_OK, EXECUTOR_DEADLOCK (the root never finished: it stays in the
 * executor, detached, until executor_free drops it; should a later run finish
 * it, its output is dropped without a drop function) or EXECUTOR_NOMEM.
 * Not from inside a task. */
enum executor_status executor_block_on(struct executor *ex, struct future fut, void *out);

/* The executor running a task on this thread, or NULL (outside run). */
struct executor *executor_current(void);

/* A sentence for a status: "deadlock: ...". */
const char *executor_status_str(enum executor_status st);

/* ---- tracing (common/tracing/trace.h, docs/tracing.md) ----
 * Built with -DLAB_TRACE, a spawn notes the file and line it was written at,
 * for the trace and the stall lamp; without it these lines do nothing. */
#if defined(LAB_TRACE) && !defined(LAB_EXECUTOR_C)
#define executor_spawn(ex, fut, drop_output) \
    (trace_spawn_site(__FILE__, __LINE__), executor_spawn(ex, fut, drop_output))
#define executor_block_on(ex, fut, out) \
    (trace_spawn_site(__FILE__, __LINE__), executor_block_on(ex, fut, out))
#endif

/* ---- test hooks ---- */

/* Queue entries now (ready tasks). The executor's thread only. */
size_t executor_test_queue_len(struct executor *ex);
/* Tasks the executor owns: spawned and not yet complete. */
size_t executor_test_live_tasks(struct executor *ex);

#endif
