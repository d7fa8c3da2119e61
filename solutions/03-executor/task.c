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

    /* BEGIN STUDENT: task.h: how many allocations may a task cost, where does the future go so that its alignment holds, and how many references does the task start with? (docs/03-executor.md#one-allocation) */
    struct task *t;
    if (falign <= alignof(max_align_t))
        t = task_cell_alloc(total); /* malloc, or a cell the cache kept (task.h) */
    else
        t = aligned_alloc(falign, align_up(total, falign));
    if (!t)
        return NULL;

    /* Three references: the scheduler's list, the first queue entry (so
     * NOTIFIED is set), the join handle (so JOIN_INTEREST is set). */
    task_state_init(&t->state);
    t->queue_next = NULL;
    t->owned_prev = t->owned_next = NULL;
    t->scheduler = s;
    t->vtable = vt;
    t->drop_output = drop_output;
    t->join_waker = WAKER_NONE;
    t->future_offset = (uint32_t)future_offset;
    t->output_offset = (uint32_t)output_offset;
    t->stage = TASK_STAGE_FUTURE;
    /* The future moves in by value: from now on it lives here and nowhere
     * else; it has never been polled, so moving it is allowed (future.h). */
    memcpy(task_future(t), fut.self, vt->size);

    *join = (struct join_handle *)t;
    return t;
    /* END STUDENT */
}

/* ---- references ------------------------------------------------------------------ */

static inline void ref_inc(struct task *t)
{
    /* BEGIN STUDENT: +1 reference; stop the program when the count would overflow (docs/03-executor.md#references) */
    if (!task_state_ref_inc(&t->state, 0)) /* +1 */
        die("reference count overflow (a waker is cloned in a loop and never dropped?)");
    /* END STUDENT */
}

/* Gives back `refs` references and `joining` joining marks at once. */
static inline void ref_dec(struct task *t, uint64_t refs, uint64_t joining)
{
    /* BEGIN STUDENT: give them back; the holder that takes the count to zero frees the task (docs/03-executor.md#references) */
    if (task_state_ref_dec(&t->state, refs, joining) == TASK_REF_FREE) /* -refs */
        task_free(t); /* that was the last reference */
    /* END STUDENT */
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
    /* BEGIN STUDENT: task.h contract 3 (rows 7 to 7'''): when does a wake by reference create a queue entry, and whose reference does that entry hold? (docs/03-executor.md#the-transition-table) */
    if (task_state_to_notified_by_ref(&t->state) == TASK_NOTIFY_SCHEDULE)
        schedule(t, SCHEDULE_WAKE);
    /* END STUDENT */
}

/* Wake by value: consumes the caller's reference, plus `joining` joining
 * marks (1 for a waker parked in a join handle). When this wake queues the
 * task, the caller's reference becomes the queue entry's: no count changes. */
static inline void wake_by_val(struct task *t, uint64_t joining)
{
    /* BEGIN STUDENT: task.h contract 3 (rows 8 to 8'): this waker's reference is consumed; when does it become the queue entry's, and when is it given back? (docs/03-executor.md#the-transition-table) */
    switch (task_state_to_notified_by_val(&t->state, joining)) {
    case TASK_NOTIFY_SCHEDULE:
        schedule(t, SCHEDULE_WAKE); /* the waker's reference is the queue entry's now */
        break;
    case TASK_NOTIFY_FREE:
        task_free(t); /* the waker's reference was the last */
        break;
    case TASK_NOTIFY_NOTHING:
        break;
    }
    /* END STUDENT */
}

/* ---- the waker vtable: a waker is a task reference ----------------------------------- */

static struct waker task_waker_clone(const void *data)
{
    /* BEGIN STUDENT: a new waker is a new reference (docs/03-executor.md#wakers-are-references) */
    struct task *t = (struct task *)data;
    ref_inc(t); /* +1: the clone's reference */
    return (struct waker){ .data = t, .vtable = &task_waker_vtable };
    /* END STUDENT */
}

static void task_waker_wake(const void *data)
{
    /* BEGIN STUDENT: wake and consume this waker's reference (docs/03-executor.md#wakers-are-references) */
    wake_by_val((struct task *)data, 0); /* consumes the waker's reference */
    /* END STUDENT */
}

static void task_waker_wake_by_ref(const void *data)
{
    /* BEGIN STUDENT: wake; the waker keeps its reference (docs/03-executor.md#wakers-are-references) */
    wake_by_ref((struct task *)data);
    /* END STUDENT */
}

static void task_waker_drop(const void *data)
{
    /* BEGIN STUDENT: give back this waker's reference (docs/03-executor.md#wakers-are-references) */
    ref_dec((struct task *)data, 1, 0); /* -1: the dropped waker's reference */
    /* END STUDENT */
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
    /* BEGIN STUDENT: task.h contract 4, join.h rules 4 and 5: at completion, who may still want the output and the join waker, and who frees the task when this transition gives back the last references? (docs/03-executor.md#completing) */
    /* Out of the scheduler's list first: its reference is then ours to give
     * back, with the poller's. */
    t->scheduler->vtable->release(t->scheduler, t);
    refs += 1; /* the list's */

    bool output_done = false;
    if (!(task_state_load(&t->state) & TASK_JOIN_INTEREST)) {
        /* No join handle, and none can appear: nobody will ever read the
         * output. It is ours to drop (rule 5), before we let go. */
        if (t->stage == TASK_STAGE_OUTPUT && t->drop_output)
            t->drop_output(task_output(t));
        t->stage = TASK_STAGE_CONSUMED;
        output_done = true;
    }
    switch (task_state_to_complete(&t->state, refs, output_done)) {
    case TASK_COMPLETE_FREE:
        task_free(t); /* no join handle and no waker left */
        return;
    case TASK_COMPLETE_DONE:
        return; /* the references went with COMPLETE: the task is not ours to touch */
    case TASK_COMPLETE_DROP_OUTPUT:
        /* The join handle was dropped after we looked: the output is ours. */
        if (t->stage == TASK_STAGE_OUTPUT && t->drop_output)
            t->drop_output(task_output(t));
        t->stage = TASK_STAGE_CONSUMED;
        break;
    case TASK_COMPLETE_WAKE_JOINER:
        /* JOIN_WAKER was set: rule 4, the slot is ours to read. Wake by
         * reference (the join handle may be reading the slot at this moment:
         * we must not write it), then clear JOIN_WAKER; if the join handle
         * went away meanwhile, the waker is ours to drop. */
        waker_wake_by_ref(&t->join_waker);
        if (task_state_unset_join_waker_after_complete(&t->state) == TASK_JOIN_WAKER_DROP)
            waker_drop(&t->join_waker);
        break;
    }
    ref_dec(t, refs, 0); /* -refs: the poller's and the list's */
    /* END STUDENT */
}

/* We hold RUNNING on a task whose future must go without being polled. */
static inline void cancel(struct task *t, uint64_t refs)
{
    /* BEGIN STUDENT: drop the future, mark the stage, complete (docs/03-executor.md#abort) */
    future_drop(future_of(t->vtable, task_future(t)));
    t->stage = TASK_STAGE_CANCELLED;
    complete(t, refs);
    /* END STUDENT */
}

/* ---- running ---------------------------------------------------------------------------- */

void task_run(struct task *t)
{
    /* BEGIN STUDENT: task.h contracts 1 and 2 (rows 2 to 5): what may a wake or an abort do while the poll runs, and what must the poller do about it when the poll returns? (docs/03-executor.md#running-a-task) */
    switch (task_state_to_running(&t->state)) {
    case TASK_RUN_FREE:
        task_free(t); /* a stale entry held the last reference */
        return;
    case TASK_RUN_STALE:
        return; /* cancelled at shutdown while queued: nothing to run */
    case TASK_RUN_CANCEL:
        cancel(t, 1); /* the queue entry's reference is the poller's now */
        return;
    case TASK_RUN_POLL:
        break;
    }

    /* The waker in the context borrows our reference: polling costs no
     * reference count traffic; a future that keeps the waker clones it. */
    struct waker w = { .data = t, .vtable = &task_waker_vtable };
    struct context cx = context_from_waker(&w);
    void *out = t->vtable->output_size ? task_output(t) : NULL;
    if (t->vtable->poll(task_future(t), &cx, out) == POLL_READY) {
        t->stage = TASK_STAGE_OUTPUT;
        future_drop(future_of(t->vtable, task_future(t)));
        complete(t, 1);
        return;
    }

    /* Pending: give the lock back, unless something happened meanwhile. */
    switch (task_state_to_idle(&t->state)) {
    case TASK_IDLE_CANCEL:
        cancel(t, 1); /* aborted during the poll: we still hold RUNNING */
        break;
    case TASK_IDLE_REQUEUE:
        schedule(t, SCHEDULE_YIELD); /* woken during the poll: our reference is the queue entry's */
        break;
    case TASK_IDLE_DONE:
        break;
    }
    /* END STUDENT */
}

void task_shutdown(struct task *t)
{
    /* BEGIN STUDENT: row 17: nobody will poll this task again; how does shutdown keep a poll from starting and drop the future exactly once? (docs/03-executor.md#freeing-the-executor) */
    if (task_state_to_shutdown(&t->state) == TASK_SHUTDOWN_REFUSED)
        die("task_shutdown on a task that is complete or being polled");
    cancel(t, 0);
    /* END STUDENT */
}

/* ---- what the scheduler asks ------------------------------------------------------------- */

bool task_has_outside_waker(const struct task *t)
{
    /* BEGIN STUDENT: executor.h contract 4: which of the task's references can the scheduler account for, and why decide from one snapshot of the word? (docs/03-executor.md#deadlock) */
    /* acquire: a wake that queued the task is seen with what it wrote */
    uint64_t s = task_state_load(&t->state);
    if (s & (TASK_NOTIFIED | TASK_RUNNING))
        return true; /* queued, or being polled: it will run again */
    if (s & TASK_COMPLETE)
        return false;
    uint64_t own = 1                                     /* the list's */
                   + ((s & TASK_JOIN_INTEREST) ? 1 : 0)  /* the join handle's */
                   + task_state_joining(s);              /* parked in our own join handles */
    return task_state_refs(s) > own;
    /* END STUDENT */
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
