/* join.h - stage 03: the join handle, a task's other end.
 *
 * executor_spawn() gives back a join handle: one reference to the task that
 * can wait for its output, cancel it, or let it go.
 *
 *   join_handle_poll    Ready once the task is complete: the output is moved
 *                       to `out` (JOIN_OK) or the task was cancelled
 *                       (JOIN_CANCELLED). Pending otherwise, with the
 *                       context's waker registered: it is woken once, when
 *                       the task completes or is cancelled.
 *   join_handle_abort   cancels the task: it is never polled again and its
 *                       future is dropped on the scheduler's thread; the
 *                       join handle then sees JOIN_CANCELLED. Any thread,
 *                       any number of times; an abort that arrives while
 *                       the task is being polled takes effect when that poll
 *                       returns Pending, never during it; an abort that
 *                       arrives after completion, or during the poll that
 *                       completes the task, changes nothing (the output
 *                       stands).
 *   join_handle_drop    lets go of the handle. The task runs on, detached;
 *                       its output, when nobody takes it, is dropped
 *                       (the drop_output given to spawn) exactly once, by
 *                       whoever holds the task's last say on it.
 *
 * The rules between the join handle's waker and the task's completion, which
 * may happen on different threads at the same moment
 * (docs/03-executor.md#the-join-handle-and-its-waker):
 *   1. JOIN_WAKER clear: the join waker slot belongs to the join handle.
 *   2. To store a waker, the handle writes the slot, then sets JOIN_WAKER
 *      with a CAS that fails if COMPLETE is set; on failure it takes its
 *      waker back out and reads the output instead.
 *   3. JOIN_WAKER set, COMPLETE clear: nobody writes the slot. To replace
 *      the waker, the handle first clears JOIN_WAKER (a CAS that fails if
 *      COMPLETE is set), and is back under rule 1.
 *   4. The CAS that sets COMPLETE reads JOIN_WAKER: if it was set, the
 *      completing thread owns the slot until it clears JOIN_WAKER; it wakes
 *      the waker by reference first and leaves it in the slot. After that
 *      the slot is the handle's again (rule 1), holding a woken waker that
 *      the handle must drop and never overwrite: a handle that finds
 *      COMPLETE set does not register a waker.
 *   5. The output belongs to the join handle if JOIN_INTEREST was set when
 *      COMPLETE was; otherwise the completing thread drops it.
 *   6. Dropping the handle clears JOIN_INTEREST with a CAS: if COMPLETE was
 *      already set, the handle drops the output itself (rule 5 gave it to it).
 *
 * A join handle is used by one thread at a time (it may move between
 * threads); abort and the state hooks may be called from anywhere.
 */
#ifndef LAB_JOIN_H
#define LAB_JOIN_H

#include <stdbool.h>
#include <stdint.h>

#include "future.h"
#include "task.h"

enum join_status {
    JOIN_OK = 0,        /* the task finished: its output was moved to out */
    JOIN_CANCELLED = 1, /* the task was aborted (or its executor freed) before it finished */
};

/* Polls for the task's end. On POLL_READY, *status says how it ended; with
 * JOIN_OK the output (output_size bytes) was moved to `out` (out may be NULL
 * when output_size is 0; with out NULL and a non-empty output, the output is
 * dropped). cx may be NULL: then nothing is registered (a non-blocking
 * check). After POLL_READY the handle is spent: drop it, do not poll again. */
enum poll join_handle_poll(struct join_handle *jh, struct context *cx, void *out,
                           enum join_status *status);

/* True once the task is complete (finished or cancelled). Any thread. */
bool join_handle_is_finished(const struct join_handle *jh);

/* Cancels the task (see above). Any thread. */
void join_handle_abort(struct join_handle *jh);

/* -1: the join handle's reference. The task is detached (see above). */
void join_handle_drop(struct join_handle *jh);

/* ---- a join handle as a future --------------------------------------------------
 * For block_on and for code that wants a struct future: the output is an
 * enum join_status; the task's output goes to `out`, given at init. Dropping
 * the future does not drop the join handle. */
struct join_future {
    struct join_handle *jh; /* borrowed */
    void *out;              /* where the task's output goes on JOIN_OK */
};

void join_future_init(struct join_future *join, struct join_handle *jh, void *out);
struct future join_future_as_future(struct join_future *join);

/* ---- test hooks ---- */

/* The task's raw state word (task.h explains the bits). */
uint64_t join_handle_test_state(const struct join_handle *jh);

#endif
