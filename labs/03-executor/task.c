/* task.c - stage 03: the task cell, its state word and its wakers.
 *
 * Everything that happens to a task is a transition of one atomic word,
 * and task_state.c makes every one of them (task_state.h draws the word and
 * names what each transition answers). This file does what the answers say:
 * it polls, schedules, completes, wakes the joiner and frees, after the
 * transition, never inside its CAS loop, where a retry would repeat it.
 * docs/03-executor.md#the-transition-table lists every transition: state
 * before, event, state after, who may do it.
 *
 * Memory orders are task_state.h's; the one this file adds: the trace
 * hooks' looks at the word order nothing (task_state_peek, relaxed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAB_TASK_C /* this file defines the real task_new and task_run (task.h, tracing) */
#include "task.h"
#include "lab_todo.h"

static const struct waker_vtable task_joining_waker_vtable;

/* ---- small helpers (given) ------------------------------------------------------ */
/* Helpers in this lab are `static inline`: besides inviting the compiler to
 * inline them, it keeps it quiet about the ones the skeleton does not call
 * yet. */

static inline void die(const char *what)
{
    fprintf(stderr, "task: %s\n", what);
    abort();
}

static inline void schedule(struct task *t, enum schedule_reason why)
{
    t->scheduler->vtable->schedule(t->scheduler, t, why);
}

static inline size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

/* The cache this thread's spawns and frees use (task.h, the cell cache), or
 * NULL. This thread's alone. */
static _Thread_local struct task_cells *cells_here;

void *task_cell_alloc(size_t size)
{
    struct task_cells *c = cells_here;
    for (unsigned i = 0; c && i < TASK_CELL_SIZES; i++) {
        if (c->list[i].size == size && c->list[i].head) {
            void *cell = c->list[i].head;
            c->list[i].head = *(void **)cell;
            c->bytes -= size;
            return cell;
        }
    }
    return malloc(size);
}

void task_free(struct task *t)
{
    /* The future was dropped and the output taken or dropped before the last
     * reference went: only the memory is left. Kept for the next spawn when
     * a cache is entered here and has room (task.h), else freed. */
    struct task_cells *c = cells_here;
    size_t size = t->output_offset + t->vtable->output_size; /* task_new's total */
    if (c && t->vtable->align <= alignof(max_align_t) && c->bytes + size <= TASK_CELLS_MAX_BYTES) {
        unsigned pick = TASK_CELL_SIZES;
        for (unsigned i = 0; i < TASK_CELL_SIZES; i++) {
            if (c->list[i].size == size) {
                pick = i; /* the list of this size */
                break;
            }
            if (!c->list[i].head && pick == TASK_CELL_SIZES)
                pick = i; /* an empty one, in case no list has this size yet */
        }
        if (pick < TASK_CELL_SIZES) {
            c->list[pick].size = size;
            *(void **)t = c->list[pick].head;
            c->list[pick].head = t;
            c->bytes += size;
            return;
        }
    }
    free(t);
}

struct task_cells *task_cells_enter(struct task_cells *c)
{
    struct task_cells *prev = cells_here;
    cells_here = c;
    return prev;
}

void task_cells_leave(struct task_cells *prev) { cells_here = prev; }

void task_cells_release(struct task_cells *c)
{
    for (unsigned i = 0; i < TASK_CELL_SIZES; i++) {
        while (c->list[i].head) {
            void *cell = c->list[i].head;
            c->list[i].head = *(void **)cell;
            free(cell);
        }
    }
    c->bytes = 0;
}

/* ---- creating ------------------------------------------------------------------- */

struct task *task_new(struct scheduler *s, struct future fut, task_output_drop_fn drop_output,
                      struct join_handle **join)
{
    const struct future_vtable *vt = fut.vtable;
    /* The layout of task.h: header, then the future at its own alignment,
     * then the output slot at the strictest alignment malloc guarantees (the
     * vtable does not say how the output is aligned). */
    size_t falign = vt->align > alignof(struct task) ? vt->align : alignof(struct task);
    size_t future_offset = align_up(sizeof(struct task), falign);
    size_t output_offset = align_up(future_offset + vt->size, alignof(max_align_t));
    size_t total = output_offset + vt->output_size;
    if (output_offset > UINT32_MAX || total < output_offset)
        return NULL; /* a future of gigabytes: refuse, like an allocation that fails */

    (void)s;
    (void)fut;
    (void)drop_output;
    (void)join;
    LAB_TODO("task.h: how many allocations may a task cost, where does the future go so that its alignment holds, and how many references does the task start with? (docs/03-executor.md#one-allocation)");
}

/* ---- references ------------------------------------------------------------------ */

static inline void ref_inc(struct task *t)
{
    (void)t;
    LAB_TODO("+1 reference; stop the program when the count would overflow (docs/03-executor.md#references)");
}

/* Gives back `refs` references and `joining` joining marks at once. */
static inline void ref_dec(struct task *t, uint64_t refs, uint64_t joining)
{
    (void)t;
    (void)refs;
    (void)joining;
    LAB_TODO("give them back; the holder that takes the count to zero frees the task (docs/03-executor.md#references)");
}

void task_drop_reference(struct task *t)
{
    ref_dec(t, 1, 0); /* -1: the caller's reference */
}

/* ---- wakes ------------------------------------------------------------------------- */

/* Wake by reference: the caller keeps its reference. A new reference is taken
 * only when this wake is the one that queues the task (it becomes the queue
 * entry's). */
static inline void wake_by_ref(struct task *t)
{
    (void)t;
    LAB_TODO("task.h contract 3 (rows 7 to 7'''): when does a wake by reference create a queue entry, and whose reference does that entry hold? (docs/03-executor.md#the-transition-table)");
}

/* Wake by value: consumes the caller's reference, plus `joining` joining
 * marks (1 for a waker parked in a join handle). When this wake queues the
 * task, the caller's reference becomes the queue entry's: no count changes. */
static inline void wake_by_val(struct task *t, uint64_t joining)
{
    (void)t;
    (void)joining;
    LAB_TODO("task.h contract 3 (rows 8 to 8'): this waker's reference is consumed; when does it become the queue entry's, and when is it given back? (docs/03-executor.md#the-transition-table)");
}

/* ---- the waker vtable: a waker is a task reference ----------------------------------- */

static struct waker task_waker_clone(const void *data)
{
    (void)data;
    LAB_TODO("a new waker is a new reference (docs/03-executor.md#wakers-are-references)");
}

static void task_waker_wake(const void *data)
{
    (void)data;
    LAB_TODO("wake and consume this waker's reference (docs/03-executor.md#wakers-are-references)");
}

static void task_waker_wake_by_ref(const void *data)
{
    (void)data;
    LAB_TODO("wake; the waker keeps its reference (docs/03-executor.md#wakers-are-references)");
}

static void task_waker_drop(const void *data)
{
    (void)data;
    LAB_TODO("give back this waker's reference (docs/03-executor.md#wakers-are-references)");
}

#ifdef LAB_TRACE
/* The traced wakes (given; docs/tracing.md): record the wake and who made it,
 * then wake. The waker's reference keeps t alive until the wake consumes it. */
static inline bool trace_arrow(struct task *t)
{
    /* relaxed: only decides whether to draw an arrow; no wake of a complete
     * task leads to a poll */
    return !(task_state_peek(&t->state) & TASK_COMPLETE);
}
static void task_waker_wake_traced(const void *data)
{
    struct task *t = (struct task *)data;
    if (!trace_enabled()) {
        task_waker_wake(data);
        return;
    }
    trace_wake_begin(&t->trace, trace_arrow(t));
    task_waker_wake(data); /* may free t */
    trace_wake_end();
}
static void task_waker_wake_by_ref_traced(const void *data)
{
    struct task *t = (struct task *)data;
    if (!trace_enabled()) {
        task_waker_wake_by_ref(data);
        return;
    }
    trace_wake_begin(&t->trace, trace_arrow(t));
    task_waker_wake_by_ref(data);
    trace_wake_end();
}
#define TASK_WAKE task_waker_wake_traced
#define TASK_WAKE_BY_REF task_waker_wake_by_ref_traced
#else
#define TASK_WAKE task_waker_wake
#define TASK_WAKE_BY_REF task_waker_wake_by_ref
#endif

const struct waker_vtable task_waker_vtable = {
    .clone = task_waker_clone,
    .wake = TASK_WAKE,
    .wake_by_ref = TASK_WAKE_BY_REF,
    .drop = task_waker_drop,
};

/* A waker parked in a join handle of the same scheduler's task: one
 * reference and one joining mark. Its clone is an ordinary waker (the clone
 * can go anywhere); waking or dropping it gives back both. (given) */
static void joining_wake(const void *data)
{
#ifdef LAB_TRACE
    struct task *t = (struct task *)data;
    if (trace_enabled())
        trace_wake_begin(&t->trace, trace_arrow(t));
    wake_by_val(t, 1);
    trace_wake_end();
#else
    wake_by_val((struct task *)data, 1);
#endif
}
static void joining_drop(const void *data) { ref_dec((struct task *)data, 1, 1); } /* -1 ref, -1 joining */

static const struct waker_vtable task_joining_waker_vtable = {
    .clone = task_waker_clone,
    .wake = joining_wake,
    .wake_by_ref = TASK_WAKE_BY_REF,
    .drop = joining_drop,
};

struct waker task_joining_waker(struct task *t)
{
    /* from a reference we hold (the context's) */
    if (!task_state_ref_inc(&t->state, 1)) /* +1 ref, +1 joining */
        die("reference or joining count overflow");
    return (struct waker){ .data = t, .vtable = &task_joining_waker_vtable };
}

struct task *task_of_waker(const struct waker *w, const struct scheduler *s)
{
    if (w->vtable != &task_waker_vtable && w->vtable != &task_joining_waker_vtable)
        return NULL;
    struct task *t = (struct task *)w->data;
    return t->scheduler == s ? t : NULL; /* scheduler: immutable, and w keeps t alive */
}

/* ---- completing ---------------------------------------------------------------------- */

/* The task's future is gone (finished: stage OUTPUT; or cancelled: stage
 * CANCELLED) and we hold RUNNING. Leaves the scheduler, publishes COMPLETE,
 * hands the output to the join handle or drops it, wakes the joiner, and
 * gives back `refs` references (the poller's, if any) plus the list's.
 * task_state_to_complete says which of those are left after COMPLETE. */
static inline void complete(struct task *t, uint64_t refs)
{
    (void)t;
    (void)refs;
    LAB_TODO("task.h contract 4, join.h rules 4 and 5: at completion, who may still want the output and the join waker, and who frees the task when this transition gives back the last references? (docs/03-executor.md#completing)");
}

/* We hold RUNNING on a task whose future must go without being polled. */
static inline void cancel(struct task *t, uint64_t refs)
{
    (void)t;
    (void)refs;
    LAB_TODO("drop the future, mark the stage, complete (docs/03-executor.md#abort)");
}

/* ---- running ---------------------------------------------------------------------------- */

void task_run(struct task *t)
{
    (void)t;
    LAB_TODO("task.h contracts 1 and 2 (rows 2 to 5): what may a wake or an abort do while the poll runs, and what must the poller do about it when the poll returns? (docs/03-executor.md#running-a-task)");
}

void task_shutdown(struct task *t)
{
    (void)t;
    LAB_TODO("row 17: nobody will poll this task again; how does shutdown keep a poll from starting and drop the future exactly once? (docs/03-executor.md#freeing-the-executor)");
}

/* ---- what the scheduler asks ------------------------------------------------------------- */

bool task_has_outside_waker(const struct task *t)
{
    (void)t;
    LAB_TODO("executor.h contract 4: which of the task's references can the scheduler account for, and why decide from one snapshot of the word? (docs/03-executor.md#deadlock)");
}

/* ---- test hooks ---- */

uint64_t task_test_state(const struct task *t)
{
    /* relaxed: a look for tests, which order themselves (join, or run returned) */
    return task_state_peek(&t->state);
}

/* ---- tracing (given; task.h, docs/tracing.md) ---- */

#ifdef LAB_TRACE
struct task *task_new_traced(struct scheduler *s, struct future fut,
                             task_output_drop_fn drop_output, struct join_handle **join)
{
    const char *name = fut.vtable->name; /* fut belongs to the task once task_new succeeds */
    struct task *t = task_new(s, fut, drop_output, join);
    if (t)
        trace_task_spawn(&t->trace, name); /* before the caller queues t anywhere */
    return t;
}

void task_run_traced(struct task *t)
{
    if (!trace_enabled()) {
        task_run(t);
        return;
    }
    /* relaxed: only labels the run; the queue reference we hold keeps t alive */
    uint64_t s = task_state_peek(&t->state);
    if (s & (TASK_COMPLETE | TASK_RUNNING)) {
        task_run(t); /* a stale entry: nothing is polled, nothing to draw */
        return;
    }
    struct trace_poll p = trace_poll_begin(&t->trace, (s & TASK_CANCELLED) != 0);
    task_run(t); /* may free t: the end is recorded from p alone */
    trace_poll_end(p);
}
#endif
