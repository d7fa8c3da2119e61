/* task.h - stage 03: a task is one allocation with one atomic state word.
 *
 * A task is a future that a scheduler owns and runs. Everything it needs
 * lives in one block of memory, allocated once by task_new() and freed once,
 * by whoever lets go of the last reference:
 *
 *   +--------------------------+  struct task (below): the header
 *   | state   (atomic, 64 bits)|  flags + joining count + reference count
 *   | queue_next, owned links  |  intrusive: queuing a task allocates nothing
 *   | scheduler, vtable, ...   |
 *   | join_waker, stage        |
 *   +--------------------------+  aligned to the future's alignment
 *   | the future, by value     |  fut.vtable->size bytes, copied in at spawn
 *   +--------------------------+  aligned to max_align_t
 *   | the output slot          |  fut.vtable->output_size bytes
 *   +--------------------------+
 *
 * The contract (docs/03-executor.md#the-contract):
 *   1. A task is never polled concurrently with itself: RUNNING is the lock
 *      on the future, taken and given back by compare-and-swap.
 *   2. A wake during a poll is not lost: it sets NOTIFIED, and the poller,
 *      when the poll returns Pending, hands the task back to its scheduler.
 *   3. Two wakes before the next poll make one queue entry: NOTIFIED set
 *      means "already queued (or will be)"; the second wake does nothing.
 *   4. A task lives while any reference can reach it: the scheduler's list,
 *      a queue entry, the join handle, every waker. The last one frees it.
 *   5. COMPLETE is final: once set, no poll, no schedule, ever; wakes are
 *      harmless no-ops (a waker may outlive its task's executor).
 *   6. Every transition of the state word is one compare-and-swap loop (or
 *      one fetch-and-op), so every transition sees and leaves a whole state.
 *      docs/03-executor.md#the-transition-table lists them; task_state.c
 *      holds them all.
 *
 * The task is generic over its scheduler (common/scheduler.h): when a wake
 * makes it runnable, it calls its scheduler's schedule hook; when it
 * completes, the release hook. Stage 03's single-thread executor is one
 * scheduler; stage 07's work-stealing scheduler reuses this module unchanged.
 *
 * References (each is one count in the state word, see TASK_REF_ONE in
 * task_state.h):
 *   list     the scheduler's list of every task it owns; given back by the
 *            task module right after the release hook, at completion;
 *   queue    a queue entry: exists exactly while NOTIFIED is set and the
 *            task is not RUNNING; the scheduler pops it and hands it to
 *            task_run(), which turns it into the poller's reference;
 *   join     the join handle's (join.h); JOIN_INTEREST is set while it exists;
 *   waker    one per struct waker value (clone +1, drop -1, wake consumes);
 *            a waker parked in a join handle of a task of the same scheduler
 *            also counts in the joining field (see below).
 */
#ifndef LAB_TASK_H
#define LAB_TASK_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "future.h"
#include "scheduler.h"
#include "task_state.h"
#include "trace.h"
#include "waker.h"

/* ---- the state word ----------------------------------------------------------
 *
 * task_state.h owns it: the bit layout (TASK_RUNNING, TASK_NOTIFIED, ...,
 * TASK_REF_ONE), task_state_refs() and task_state_joining(), and the only
 * functions that change it (task_state.c). task.c and join.c call those
 * transitions and do what their answers say. */

/* What a task's output slot holds; owned like the future (below). */
enum task_stage {
    TASK_STAGE_FUTURE,    /* the future is alive; no output yet */
    TASK_STAGE_OUTPUT,    /* finished: the output slot holds the output */
    TASK_STAGE_CANCELLED, /* cancelled: future dropped, no output */
    TASK_STAGE_CONSUMED,  /* the output was taken by the join handle or dropped */
};

/* Drops a task's output that nobody took (a detached task, or a join handle
 * dropped without taking it). NULL when the output owns nothing. */
typedef void (*task_output_drop_fn)(void *output);

struct join_handle; /* join.h */

/* The header. Who may touch which field, and when:
 *   state                 atomic; anyone holding a reference.
 *   queue_next            the holder of the queue reference (the queue).
 *   owned_prev/next, owned_list
 *                         the scheduler's list, on the scheduler's own terms
 *                         (stage 03: the executor's thread only).
 *   scheduler, vtable, drop_output, future_offset, output_offset
 *                         written once by task_new, read-only afterwards.
 *   the future, stage, the output slot
 *                         while COMPLETE is clear: only the thread that set
 *                         RUNNING. After COMPLETE: the join handle if
 *                         JOIN_INTEREST was set at completion, else the
 *                         thread that completed the task.
 *   join_waker            JOIN_WAKER clear: the join handle alone. JOIN_WAKER
 *                         set and COMPLETE clear: nobody writes it (it is
 *                         published). JOIN_WAKER and COMPLETE both set: the
 *                         thread that set COMPLETE alone.
 */
struct task {
    _Atomic uint64_t state;
    struct task *queue_next;
    struct task *owned_prev, *owned_next;
    struct scheduler *scheduler;
    const struct future_vtable *vtable;
    task_output_drop_fn drop_output;
    struct waker join_waker;
    uint32_t future_offset, output_offset;
    unsigned char stage; /* enum task_stage */
    unsigned char owned_list; /* the scheduler's: which of its lists holds the task (stage 07:
                               * the spawning worker's); in the header's padding */
#ifdef LAB_TRACE
    struct trace_task trace; /* id, spawn site, pending wake arrow: only with -DLAB_TRACE,
                              * written by the traced wrappers (end of this header) */
#endif
};

/* ---- the cell cache (given) ------------------------------------------------------
 *
 * A program that spawns tasks in waves frees thousands of cells at once, and
 * glibc hands the top of its heap back to the kernel as soon as more than its
 * trim threshold (128 KiB) is free there; the next wave page-faults every page
 * in again. Measured on the lab's machine (docs/03-executor.md#the-cell-cache):
 * 10,000 tasks spawned and joined, ~250 page faults a wave, about as much time
 * as the executor's own work. So the last reference does not always call
 * free(): on a thread where a scheduler runs its tasks, the cell goes to that
 * scheduler's free list for its size, and the next spawn of that size takes
 * it back, with no system call and no fault. Bounded: at most
 * TASK_CELLS_MAX_BYTES kept, in lists for at most TASK_CELL_SIZES sizes;
 * cells aligned beyond max_align_t always go to free().
 *
 * A list holds cells of one exact size (the task's header, future and output
 * slot together), so a cell is only ever reused for a task that fits it
 * exactly, however task_new allocated it (malloc or task_cell_alloc).
 *
 * A scheduler embeds a zeroed struct task_cells, brackets the code that runs
 * its tasks on a thread with task_cells_enter and task_cells_leave, and gives
 * every kept cell back with task_cells_release when it is freed. Only the
 * thread that entered touches the lists: no lock, no atomics. Elsewhere (a
 * join handle dropped after run returned, a waker dropped by another thread)
 * the last reference frees the cell as before. */
#define TASK_CELL_SIZES 8                  /* lists, one size each */
#define TASK_CELLS_MAX_BYTES (2u << 20)    /* at most this much kept per cache */

struct task_cells {
    struct {
        size_t size;  /* of every cell in this list; any when the list is empty */
        void *head;   /* linked through each cell's first word */
    } list[TASK_CELL_SIZES];
    size_t bytes;     /* kept, in all */
};

/* From now on, on this thread, task_cell_alloc takes cells from c and the
 * last reference gives them to it. Returns the cache that was in use (NULL:
 * none), for task_cells_leave. */
struct task_cells *task_cells_enter(struct task_cells *c);
/* Back to `prev` (what task_cells_enter returned). */
void task_cells_leave(struct task_cells *prev);
/* Frees every cell c keeps. Not while a thread has c entered. */
void task_cells_release(struct task_cells *c);
/* `size` bytes at malloc's alignment, for a task: a kept cell of exactly that
 * size when the cache entered on this thread has one, else malloc(size). */
void *task_cell_alloc(size_t size);
/* Gives back the memory of a task that no reference reaches any more (its
 * future and output already dropped): to the cache entered on this thread
 * when it has room, else to free(). What the last reference calls. */
void task_free(struct task *t);

/* ---- for schedulers ----------------------------------------------------------- */

/* Allocates a task for `fut` with one allocation: fut.vtable->size bytes are
 * copied from fut.self into the task (the future is moved: the caller must
 * neither poll nor drop its copy afterwards). drop_output may be NULL.
 * Returns the task with three references: the scheduler's list entry, the
 * first queue entry (NOTIFIED is set: the caller must hand the task to
 * s->vtable->schedule or task_run), and the join handle, stored in *join.
 * NULL when out of memory: then nothing was moved and fut is still the
 * caller's. */
struct task *task_new(struct scheduler *s, struct future fut, task_output_drop_fn drop_output,
                      struct join_handle **join);

/* Runs the task once with the queue reference the caller popped (consumed):
 * polls the future, or drops it if the task was cancelled, or does nothing
 * but give the reference back if the entry is stale (already complete).
 * After Pending with a wake during the poll, the task is handed back to the
 * scheduler (SCHEDULE_YIELD) before task_run returns. */
void task_run(struct task *t);

/* The scheduler is going away: cancel the task now, on this thread, without
 * polling it (drop the future, complete it as cancelled, wake the joiner,
 * call the release hook). For a task that is not RUNNING. Its queue
 * entries, if any, stay: the caller still gives them back, with
 * task_drop_reference. */
void task_shutdown(struct task *t);

/* -1: gives back one reference (for instance a queue entry the scheduler
 * will not run). Frees the task if it was the last. */
void task_drop_reference(struct task *t);

/* True when some reference to t is a waker the scheduler cannot see: one
 * that is not the list's, not the join handle's, not a queue entry and not
 * parked in a join handle of the same scheduler's tasks. A task that is
 * NOTIFIED or RUNNING counts as wakeable too. Deadlock detection asks this of
 * every task it owns; it is exact for a task in the scheduler's list. */
bool task_has_outside_waker(const struct task *t);

/* The task a waker wakes, when it is a task waker of `s`; else NULL. */
struct task *task_of_waker(const struct waker *w, const struct scheduler *s);

/* A waker for t to park in a join handle of another task of the same
 * scheduler: +1 reference and +1 joining, in one step. Waking or dropping it
 * takes both back. */
struct waker task_joining_waker(struct task *t);

/* The future and the output slot inside the allocation. */
static inline void *task_future(struct task *t) { return (char *)t + t->future_offset; }
static inline void *task_output(struct task *t) { return (char *)t + t->output_offset; }

/* The vtable of every task waker (clone, wake, wake_by_ref, drop). */
extern const struct waker_vtable task_waker_vtable;

/* ---- tracing (common/tracing/trace.h, docs/tracing.md) ---------------------------
 *
 * Built with -DLAB_TRACE (make trace), every call of task_new and task_run
 * outside task.c goes through a wrapper at the end of task.c, which records
 * the spawn (with the site the spawn macro noted) and each run's begin and
 * end, and calls the real function. task.c's waker vtables record each wake.
 * So a scheduler (stage 03's executor, stage 07's workers) is traced without
 * a line of its own, apart from trace_task_complete in its release hook.
 * Without -DLAB_TRACE none of this exists. */
#if defined(LAB_TRACE) && !defined(LAB_TASK_C)
struct task *task_new_traced(struct scheduler *s, struct future fut,
                             task_output_drop_fn drop_output, struct join_handle **join);
void task_run_traced(struct task *t);
#define task_new(s, fut, drop_output, join) task_new_traced(s, fut, drop_output, join)
#define task_run(t) task_run_traced(t)
#endif

/* ---- test hooks ---- */

/* The raw state word (a relaxed load): for tests that look at the flags and
 * counts. */
uint64_t task_test_state(const struct task *t);

#endif
