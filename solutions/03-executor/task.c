/* task.c - stage 03: the task cell, its state word and its wakers.
 *
 * Everything that happens to a task is a transition of one atomic word
 * (task.h draws it). Each transition below is one compare-and-swap loop:
 *
 *     uint64_t cur = atomic_load(&t->state);
 *     for (;;) {
 *         uint64_t next = <what cur becomes>;          (decide from a whole state)
 *         if (atomic_compare_exchange_weak(&t->state, &cur, next))
 *             break;                                  (nobody changed it meanwhile)
 *     }                                               (else cur now holds the new value: decide again)
 *     <act on what the transition decided>
 *
 * The loop decides from one snapshot of the word and writes its decision only
 * if the word is still that snapshot, so two threads can never both believe
 * they won the same transition. docs/03-executor.md#the-transition-table
 * lists every transition: state before, event, state after, who may do it.
 *
 * Memory orders, once for the whole file:
 *   - every successful CAS is acq_rel: release, because the thread that makes
 *     a transition publishes what it wrote before it (a stored join waker, the
 *     output, a wake's data); acquire, because the next thread to act on the
 *     task must see all that. Failed CASes are acquire for the same reason.
 *   - a reference increment from an existing reference is relaxed: it
 *     publishes nothing, and the reference it copies keeps the task alive.
 *   - a decrement is acq_rel: the release half orders the holder's use of
 *     the task before the decrement, the acquire half lets whoever reaches
 *     zero see every other holder's writes before it frees.
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

static inline uint64_t state_load(struct task *t)
{
    /* acquire: pairs with the acq_rel CAS of whoever changed the word last */
    return atomic_load_explicit(&t->state, memory_order_acquire);
}

/* One attempt of a CAS loop: true when the word still held *cur and now holds
 * next; false when it had changed (then *cur is the new value). */
static inline bool state_cas(struct task *t, uint64_t *cur, uint64_t next)
{
    return atomic_compare_exchange_weak_explicit(&t->state, cur, next, memory_order_acq_rel,
                                                 memory_order_acquire);
}

static inline void die(const char *what)
{
    fprintf(stderr, "task: %s\n", what);
    abort();
}

static inline void schedule(struct task *t, enum schedule_reason why)
{
    t->scheduler->vtable->schedule(t->scheduler, t, why);
}

static inline void task_free(struct task *t)
{
    /* The future was dropped and the output taken or dropped before the last
     * reference went: only the memory is left. */
    free(t);
}

static inline size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

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

    /* BEGIN STUDENT: ONE allocation (aligned when the future needs more than malloc gives), the header, the future copied in, three references (docs/03-executor.md#one-allocation) */
    struct task *t;
    if (falign <= alignof(max_align_t))
        t = malloc(total);
    else
        t = aligned_alloc(falign, align_up(total, falign));
    if (!t)
        return NULL;

    /* Three references: the scheduler's list, the first queue entry (so
     * NOTIFIED is set), the join handle (so JOIN_INTEREST is set). */
    atomic_init(&t->state, 3 * TASK_REF_ONE | TASK_NOTIFIED | TASK_JOIN_INTEREST);
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
    /* BEGIN STUDENT: +1 reference, relaxed; refuse to overflow the count (docs/03-executor.md#references) */
    /* relaxed: made from a reference we hold, which keeps the task alive */
    uint64_t prev = atomic_fetch_add_explicit(&t->state, TASK_REF_ONE, memory_order_relaxed); /* +1 */
    if (task_state_refs(prev) >= (UINT64_C(1) << 31))
        die("reference count overflow (a waker is cloned in a loop and never dropped?)");
    /* END STUDENT */
}

/* Gives back `refs` references and `joining` joining marks at once. */
static inline void ref_dec(struct task *t, uint64_t refs, uint64_t joining)
{
    /* BEGIN STUDENT: one fetch_sub; the holder that takes the count to zero frees the task (docs/03-executor.md#references) */
    uint64_t sub = refs * TASK_REF_ONE + joining * TASK_JOINING_ONE;
    /* acq_rel: see the top of the file */
    uint64_t prev = atomic_fetch_sub_explicit(&t->state, sub, memory_order_acq_rel); /* -refs */
    if (task_state_refs(prev) == refs)
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
    /* BEGIN STUDENT: idle -> NOTIFIED with +1 and schedule; RUNNING -> NOTIFIED only; already NOTIFIED, COMPLETE or CANCELLED -> nothing (docs/03-executor.md#the-transition-table) */
    uint64_t cur = state_load(t);
    bool submit;
    for (;;) {
        uint64_t next;
        submit = false;
        if (cur & (TASK_COMPLETE | TASK_CANCELLED))
            return; /* no poll follows: nothing to order, nothing to write */
        if (cur & TASK_NOTIFIED)
            next = cur; /* already queued, or requeued after this poll: the same
                         * value, still written (release), so the poll that
                         * follows sees what the waker wrote before this wake */
        else if (cur & TASK_RUNNING)
            next = cur | TASK_NOTIFIED; /* the poller requeues it when the poll returns */
        else {
            next = (cur | TASK_NOTIFIED) + TASK_REF_ONE; /* +1: the queue entry's reference */
            submit = true;
        }
        if (state_cas(t, &cur, next))
            break;
    }
    if (submit)
        schedule(t, SCHEDULE_WAKE);
    /* END STUDENT */
}

/* Wake by value: consumes the caller's reference, plus `joining` joining
 * marks (1 for a waker parked in a join handle). When this wake queues the
 * task, the caller's reference becomes the queue entry's: no count changes. */
static inline void wake_by_val(struct task *t, uint64_t joining)
{
    /* BEGIN STUDENT: like wake_by_ref, but the waker's reference is consumed: it becomes the queue entry's, or is given back (docs/03-executor.md#the-transition-table) */
    uint64_t cur = state_load(t);
    uint64_t mine = TASK_REF_ONE + joining * TASK_JOINING_ONE;
    enum { NOTHING, SUBMIT, FREE } action;
    for (;;) {
        uint64_t next;
        action = NOTHING;
        if (cur & (TASK_COMPLETE | TASK_CANCELLED)) {
            next = cur - mine; /* -1: ours; no poll follows */
            if (task_state_refs(next) == 0)
                action = FREE;
        } else if (cur & TASK_NOTIFIED) {
            next = cur - mine; /* -1: ours; the queue entry (or the poller) keeps it alive */
        } else if (cur & TASK_RUNNING) {
            next = (cur | TASK_NOTIFIED) - mine; /* -1: ours; the poller holds one */
        } else {
            next = (cur | TASK_NOTIFIED) - joining * TASK_JOINING_ONE; /* ours becomes the queue's */
            action = SUBMIT;
        }
        if (state_cas(t, &cur, next))
            break;
    }
    if (action == SUBMIT)
        schedule(t, SCHEDULE_WAKE);
    else if (action == FREE)
        task_free(t);
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
    return !(atomic_load_explicit(&t->state, memory_order_relaxed) & TASK_COMPLETE);
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
        trace_wake_begin(&t->trace, !(atomic_load_explicit(&t->state, memory_order_relaxed) &
                                      TASK_COMPLETE)); /* relaxed: as in trace_arrow */
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
    /* relaxed, like every increment from a reference we hold (the context's) */
    uint64_t prev = atomic_fetch_add_explicit(&t->state, TASK_REF_ONE + TASK_JOINING_ONE,
                                              memory_order_relaxed); /* +1 ref, +1 joining */
    if (task_state_refs(prev) >= (UINT64_C(1) << 31) ||
        task_state_joining(prev) >= (TASK_JOINING_MASK >> TASK_JOINING_SHIFT))
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
 *
 * The common case costs one atomic read-modify-write: when nothing is left
 * to do with the task after COMPLETE (no join waker to wake, no output that
 * could still become ours), the references are given back in the same CAS
 * that sets COMPLETE. Tokio's task does the same (transition_to_terminal). */
static inline void complete(struct task *t, uint64_t refs)
{
    /* BEGIN STUDENT: release; RUNNING -> COMPLETE in one CAS (with the references when nothing is left to do); then the output (rule 5 of join.h), the join waker (rule 4), the references (docs/03-executor.md#completing) */
    /* Out of the scheduler's list first: its reference is then ours to give
     * back, with the poller's. */
    t->scheduler->vtable->release(t->scheduler, t);
    refs += 1; /* the list's */

    uint64_t cur = state_load(t);
    bool output_done = false;
    if (!(cur & TASK_JOIN_INTEREST)) {
        /* No join handle, and none can appear: nobody will ever read the
         * output. It is ours to drop (rule 5), before we let go. */
        if (t->stage == TASK_STAGE_OUTPUT && t->drop_output)
            t->drop_output(task_output(t));
        t->stage = TASK_STAGE_CONSUMED;
        output_done = true;
    }
    bool last_touch;
    for (;;) {
        uint64_t next = (cur & ~TASK_RUNNING) | TASK_COMPLETE;
        /* Will we touch the task after this CAS? Only to wake a join waker
         * (JOIN_WAKER set), or to drop an output whose join handle went away
         * since we looked (JOIN_INTEREST clear now, output not yet dropped). */
        last_touch = (cur & TASK_JOIN_INTEREST) ? !(cur & TASK_JOIN_WAKER) : output_done;
        if (last_touch)
            next -= refs * TASK_REF_ONE; /* -refs: the poller's and the list's */
        /* release: publishes the stage and the output to the join handle;
         * acquire: pairs with the join handle's CAS that set JOIN_WAKER, so
         * the waker it stored is visible here */
        if (state_cas(t, &cur, next)) {
            if (last_touch && task_state_refs(next) == 0)
                task_free(t); /* no join handle and no waker left */
            if (last_touch)
                return;
            break;
        }
    }

    if (!(cur & TASK_JOIN_INTEREST)) {
        /* The join handle was dropped after we looked: the output is ours. */
        if (t->stage == TASK_STAGE_OUTPUT && t->drop_output)
            t->drop_output(task_output(t));
        t->stage = TASK_STAGE_CONSUMED;
    } else {
        /* JOIN_WAKER was set: rule 4, the slot is ours to read. Wake by
         * reference (the join handle may be reading the slot at this moment:
         * we must not write it), then clear JOIN_WAKER; if the join handle
         * went away meanwhile, the waker is ours to drop. */
        waker_wake_by_ref(&t->join_waker);
        cur = state_load(t);
        for (;;) {
            if (state_cas(t, &cur, cur & ~TASK_JOIN_WAKER))
                break;
        }
        if (!(cur & TASK_JOIN_INTEREST))
            waker_drop(&t->join_waker);
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
    /* BEGIN STUDENT: NOTIFIED -> RUNNING (stale entries just give their reference back); poll with a waker that borrows our reference; Ready: complete; Pending: RUNNING -> idle, requeue if NOTIFIED, cancel if CANCELLED (docs/03-executor.md#running-a-task) */
    uint64_t cur = state_load(t);
    for (;;) {
        if (cur & (TASK_COMPLETE | TASK_RUNNING)) {
            /* A stale entry (the task was cancelled at shutdown while queued):
             * nothing to run. */
            ref_dec(t, 1, 0); /* -1: the queue entry's */
            return;
        }
        /* Take the lock and consume the notification: a wake from now on
         * sets NOTIFIED again, and we will see it when the poll returns. */
        if (state_cas(t, &cur, (cur | TASK_RUNNING) & ~TASK_NOTIFIED))
            break;
    }
    /* The queue entry's reference is now ours, the poller's. */
    if (cur & TASK_CANCELLED) {
        cancel(t, 1);
        return;
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
    cur = state_load(t);
    enum { IDLE, REQUEUE, CANCEL } action;
    for (;;) {
        uint64_t next;
        if (cur & TASK_CANCELLED) {
            action = CANCEL; /* aborted during the poll: keep RUNNING, drop the future */
            break;
        }
        if (cur & TASK_NOTIFIED) {
            next = cur & ~TASK_RUNNING; /* our reference becomes the queue entry's */
            action = REQUEUE;
        } else {
            next = (cur & ~TASK_RUNNING) - TASK_REF_ONE; /* -1: ours; the list keeps it alive */
            action = IDLE;
        }
        if (state_cas(t, &cur, next))
            break;
    }
    if (action == CANCEL)
        cancel(t, 1);
    else if (action == REQUEUE)
        schedule(t, SCHEDULE_YIELD);
    /* END STUDENT */
}

void task_shutdown(struct task *t)
{
    /* BEGIN STUDENT: take RUNNING and CANCELLED (leave NOTIFIED: its queue entry is still out there), then cancel (docs/03-executor.md#freeing-the-executor) */
    uint64_t cur = state_load(t);
    for (;;) {
        if (cur & (TASK_COMPLETE | TASK_RUNNING))
            die("task_shutdown on a task that is complete or being polled");
        if (state_cas(t, &cur, cur | TASK_RUNNING | TASK_CANCELLED))
            break;
    }
    cancel(t, 0);
    /* END STUDENT */
}

/* ---- what the scheduler asks ------------------------------------------------------------- */

bool task_has_outside_waker(const struct task *t)
{
    /* BEGIN STUDENT: one snapshot; subtract the references the scheduler can account for (docs/03-executor.md#deadlock) */
    /* acquire: a wake that queued the task is seen with what it wrote */
    uint64_t s = atomic_load_explicit(&((struct task *)t)->state, memory_order_acquire);
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
    return atomic_load_explicit(&((struct task *)t)->state, memory_order_relaxed);
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
    uint64_t s = atomic_load_explicit(&t->state, memory_order_relaxed);
    if (s & (TASK_COMPLETE | TASK_RUNNING)) {
        task_run(t); /* a stale entry: nothing is polled, nothing to draw */
        return;
    }
    struct trace_poll p = trace_poll_begin(&t->trace, (s & TASK_CANCELLED) != 0);
    task_run(t); /* may free t: the end is recorded from p alone */
    trace_poll_end(p);
}
#endif
