/* runtime.h - stage 07: a work-stealing multi-thread runtime.
 *
 * N worker threads run stage 03's tasks (task.h, reused unchanged through
 * common/scheduler.h's hooks). Each worker owns:
 *   - a Chase–Lev deque (deque.h): the tasks it spawned or woke, taken
 *     newest first by the worker (and its oldest every 61 ticks, contract
 *     3), stolen oldest first by the others;
 *   - a LIFO slot: the task the running task just woke runs next, on this
 *     worker, while the data they share is still in its cache; searchers
 *     may take it too, so a long poll does not strand it.
 * All workers share an injector (injector.h): wakes and spawns from threads
 * that are not workers, yields, and the overflow of full deques.
 *
 *   spawn/wake from outside --> [ injector ] <--+-- every 61 ticks, and when the deque is empty
 *                                    |          |
 *   worker i:  run --wake--> [lifo] --> run ... (at most 3 in a row)
 *               |  spawn/wake                ^
 *               v                            | take (newest)
 *            [ deque i: old ........ new ]---+
 *                 ^ steal half (oldest), from a random victim
 *   worker j (idle) --------+
 *
 * The contract (docs/07-work-stealing.md#the-contract):
 *   1. Stage 03's task invariants hold across threads: a task is never
 *      polled by two workers at once, a wake during a poll is not lost, the
 *      last reference frees it.
 *   2. Nothing is stranded: a task that is queued anywhere (a LIFO slot
 *      included) is run while any worker is idle. The last searching worker
 *      that finds work wakes another (Tokio's rule since 0.2.0; its PR
 *      #4383 describes the race it closes); a task pushed while a worker
 *      is on its way to sleep, whose notify saw that worker still
 *      searching, is found by that worker before it parks.
 *      Filling a LIFO slot wakes nobody; instead a worker that sleeps while
 *      another is awake parks with a timeout (1 ms, doubling to 16 ms) and
 *      searches again, the slots included.
 *   3. Fairness: every 61 ticks a worker takes from the injector before its
 *      own deque, and every 61 ticks (halfway between) it takes its deque's
 *      oldest task instead of the newest; at most 3 LIFO polls run in a row
 *      (then the slot's task goes to the injector, behind the deque's older
 *      work); a task that yields goes to the injector. A tick is one turn of
 *      the worker's loop: one task from a queue, then at most WS_LIFO_CAP
 *      LIFO polls. The bound: a task in a worker's deque with k older tasks
 *      beside it leaves that deque (run by its worker, or stolen) within
 *      61 * (k + 1) of that worker's ticks, whatever newer tasks arrive
 *      (k < DEQUE_CAPACITY; alone in the deque under a chain of newer ones:
 *      within 61 ticks). A task that an overflow moves to the injector waits
 *      there in FIFO order, and each worker takes from the injector at least
 *      every 61 ticks.
 *   4. Budget: before each poll of a task the worker gives the thread a
 *      budget of COOP_BUDGET_DEFAULT (128) units (common/coop.h); the leaf
 *      futures that can stay ready for ever (stage 06's TCP accept, read and
 *      write; the channel's send and receive; the mutex's lock) take one
 *      unit each and, at zero, wake their task and return Pending before
 *      doing anything. yield_now and sleep take none. The escape hatch is
 *      coop_unconstrained_begin/end.
 *   5. Waiting costs nothing: an idle worker parks. One idle worker at a
 *      time parks in the driver (stage 02's parker, stage 05's time driver,
 *      stage 06's reactor) and so drives the timers; the others sleep on a
 *      condition variable of their own.
 *   6. ws_runtime_free stops and joins every worker, then drops every task
 *      (pending, queued, parked), frees every queue entry: nothing leaks.
 *
 * Ownership: ws_runtime_new* returns the only reference; ws_runtime_free
 * frees. A driver given to ws_runtime_new is borrowed: keep it alive until
 * ws_runtime_free returns.
 */
#ifndef LAB_RUNTIME_H
#define LAB_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "driver.h"
#include "future.h"
#include "join.h"
#include "task.h"

#define WS_LIFO_CAP 3u            /* LIFO polls in a row */
#define WS_INJECTOR_INTERVAL 61u  /* ticks between forced injector checks */
/* The deque's old end (contract 3): taken on every tick whose remainder mod
 * WS_INJECTOR_INTERVAL is WS_OLDEST_PHASE, so also every 61 ticks, halfway
 * between two injector checks and never on the same tick as one. */
#define WS_OLDEST_PHASE 30u
#define WS_MAX_WORKERS 64u

struct ws_runtime;

/* `workers` threads (1..WS_MAX_WORKERS) parking on `driver` (borrowed).
 * The workers start at once. NULL when out of memory or threads. */
struct ws_runtime *ws_runtime_new(unsigned workers, struct driver driver);
/* The same over a parker of its own (stage 02). */
struct ws_runtime *ws_runtime_new_default(unsigned workers);
/* Contract 6. Not from a worker thread. */
void ws_runtime_free(struct ws_runtime *rt);

/* Moves fut into a new task and queues it; its join handle, or NULL (out of
 * memory: fut is still the caller's; or the runtime is being freed). Any
 * thread: from a worker of rt it goes to that worker's deque, from anywhere
 * else to the injector. */
struct join_handle *ws_spawn(struct ws_runtime *rt, struct future fut, task_output_drop_fn drop_output);

/* Spawns fut and blocks the calling thread (not a worker) until it
 * completes; its output is moved to out. False when out of memory or when
 * the task was cancelled. */
bool ws_block_on(struct ws_runtime *rt, struct future fut, void *out);

/* ---- tracing (common/tracing/trace.h, docs/tracing.md) ----
 * Built with -DLAB_TRACE, a spawn notes the file and line it was written at,
 * for the trace and the stall lamp; without it these lines do nothing. */
#if defined(LAB_TRACE) && !defined(LAB_RUNTIME_C)
#define ws_spawn(rt, fut, drop_output) \
    (trace_spawn_site(__FILE__, __LINE__), ws_spawn(rt, fut, drop_output))
#define ws_block_on(rt, fut, out) \
    (trace_spawn_site(__FILE__, __LINE__), ws_block_on(rt, fut, out))
#endif

/* The runtime whose worker is this thread, or NULL; and the worker's index
 * (or -1). */
struct ws_runtime *ws_current(void);
int ws_current_worker(void);
unsigned ws_workers(struct ws_runtime *rt);

/* ---- test hooks ---- */

enum ws_test_point {
    WS_TEST_UNPARKED,     /* a worker returned from parking (before it looks for work) */
    WS_TEST_BEFORE_PARK,  /* a worker found nothing and is about to announce it sleeps */
};
typedef void (*ws_test_hook_fn)(struct ws_runtime *rt, enum ws_test_point where, unsigned worker, void *arg);
/* Called on the worker's thread at each point; NULL turns it off. */
void ws_test_set_hook(struct ws_runtime *rt, ws_test_hook_fn fn, void *arg);
/* Workers announced as sleeping right now. */
unsigned ws_test_sleepers(struct ws_runtime *rt);
/* Tasks spawned and not yet complete. */
size_t ws_test_live_tasks(struct ws_runtime *rt);
/* The calling worker's deque (for its simulated store buffer, deque.h's
 * test hooks); NULL off a worker thread. */
struct deque;
struct deque *ws_test_own_deque(void);
/* The page that holds the idle word and nothing else (WS_TEST_IDLE_PAGE
 * bytes, aligned to them): a test watches every access to the word by
 * protecting the page. */
#define WS_TEST_IDLE_PAGE 4096
void *ws_test_idle_page(struct ws_runtime *rt);
/* The page that holds worker i's LIFO slot (an _Atomic(struct task *)) and
 * nothing else, aligned to WS_TEST_LIFO_PAGE: a test watches every access to
 * the slot, and may empty it as a searcher would (an exchange with NULL). */
#define WS_TEST_LIFO_PAGE 4096
void *ws_test_lifo_page(struct ws_runtime *rt, unsigned worker);

#endif
