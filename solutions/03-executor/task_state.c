/* task_state.c - stage 03: every transition of the task state word.
 *
 * task_state.h draws the word and says, for each transition, which rows of
 * docs/03-executor.md#the-transition-table it is and what each answer tells
 * the caller to do. Each transition below is one compare-and-swap loop:
 *
 *     uint64_t cur = task_state_load(state);
 *     for (;;) {
 *         uint64_t next = <what cur becomes>;          (decide from a whole state)
 *         if (state_cas(state, &cur, next))
 *             break;                                  (nobody changed it meanwhile)
 *     }                                               (else cur now holds the new value: decide again)
 *     return <the caller's next step>;
 *
 * The loop decides from one snapshot of the word and writes its decision only
 * if the word is still that snapshot, so two threads can never both believe
 * they won the same transition. Nothing in a loop may be undone by a retry:
 * no schedule, no free, no wake; the caller does those, after.
 *
 * Memory orders: task_state.h, once for the whole module.
 */
#include "task_state.h"

/* ---- the two atomics every loop uses (given) ------------------------------------ */
/* Helpers in this lab are `static inline`: besides inviting the compiler to
 * inline them, it keeps it quiet about the ones the skeleton does not call
 * yet. */

/* One attempt of a CAS loop: true when the word still held *cur and now holds
 * next; false when it had changed (then *cur is the new value). acq_rel on
 * success, acquire on failure: task_state.h. */
static inline bool state_cas(_Atomic uint64_t *state, uint64_t *cur, uint64_t next)
{
    return atomic_compare_exchange_weak_explicit(state, cur, next, memory_order_acq_rel,
                                                 memory_order_acquire);
}

void task_state_init(_Atomic uint64_t *state) { atomic_init(state, TASK_STATE_INITIAL); }

uint64_t task_state_load(const _Atomic uint64_t *state)
{
    /* acquire: pairs with the acq_rel CAS of whoever changed the word last */
    return atomic_load_explicit((_Atomic uint64_t *)state, memory_order_acquire);
}

uint64_t task_state_peek(const _Atomic uint64_t *state)
{
    /* relaxed: a look that decides nothing another thread relies on */
    return atomic_load_explicit((_Atomic uint64_t *)state, memory_order_relaxed);
}

/* ---- references ------------------------------------------------------------------ */

bool task_state_ref_inc(_Atomic uint64_t *state, uint64_t joining)
{
    /* BEGIN STUDENT: +1 reference (and the joining marks) in one fetch_add, relaxed; false when a count would overflow (docs/03-executor.md#references) */
    /* relaxed: made from a reference we hold, which keeps the task alive */
    uint64_t prev = atomic_fetch_add_explicit(state, TASK_REF_ONE + joining * TASK_JOINING_ONE,
                                              memory_order_relaxed); /* +1 */
    return task_state_refs(prev) < TASK_REFS_MAX && task_state_joining(prev) + joining <= TASK_JOINING_MAX;
    /* END STUDENT */
}

enum task_ref_step task_state_ref_dec(_Atomic uint64_t *state, uint64_t refs, uint64_t joining)
{
    /* BEGIN STUDENT: one fetch_sub; the holder that takes the count to zero frees the task (docs/03-executor.md#references) */
    uint64_t sub = refs * TASK_REF_ONE + joining * TASK_JOINING_ONE;
    /* acq_rel: the release half orders the holder's use of the task before the
     * decrement, the acquire half lets whoever reaches zero see every other
     * holder's writes before it frees */
    uint64_t prev = atomic_fetch_sub_explicit(state, sub, memory_order_acq_rel); /* -refs */
    return task_state_refs(prev) == refs ? TASK_REF_FREE : TASK_REF_KEEP;
    /* END STUDENT */
}

/* ---- wakes and abort ------------------------------------------------------------------ */

enum task_notify_step task_state_to_notified_by_ref(_Atomic uint64_t *state)
{
    /* BEGIN STUDENT: rows 7 to 7''': for each state the word can be in, what does a wake by reference write, and does it create a queue entry? (docs/03-executor.md#the-transition-table) */
    uint64_t cur = task_state_load(state);
    enum task_notify_step step;
    for (;;) {
        uint64_t next;
        step = TASK_NOTIFY_NOTHING;
        if (cur & (TASK_COMPLETE | TASK_CANCELLED))
            return TASK_NOTIFY_NOTHING; /* no poll follows: nothing to order, nothing to write */
        if (cur & TASK_NOTIFIED)
            next = cur; /* already queued, or requeued after this poll: the same
                         * value, still written (release), so the poll that
                         * follows sees what the waker wrote before this wake */
        else if (cur & TASK_RUNNING)
            next = cur | TASK_NOTIFIED; /* the poller requeues it when the poll returns */
        else {
            next = (cur | TASK_NOTIFIED) + TASK_REF_ONE; /* +1: the queue entry's reference */
            step = TASK_NOTIFY_SCHEDULE;
        }
        if (state_cas(state, &cur, next))
            return step;
    }
    /* END STUDENT */
}

enum task_notify_step task_state_to_notified_by_val(_Atomic uint64_t *state, uint64_t joining)
{
    /* BEGIN STUDENT: rows 8 to 8': the caller's reference is consumed; in which states does it become the queue entry's? (docs/03-executor.md#the-transition-table) */
    uint64_t cur = task_state_load(state);
    uint64_t mine = TASK_REF_ONE + joining * TASK_JOINING_ONE;
    enum task_notify_step step;
    for (;;) {
        uint64_t next;
        step = TASK_NOTIFY_NOTHING;
        if (cur & (TASK_COMPLETE | TASK_CANCELLED)) {
            next = cur - mine; /* -1: ours; no poll follows */
            if (task_state_refs(next) == 0)
                step = TASK_NOTIFY_FREE;
        } else if (cur & TASK_NOTIFIED) {
            next = cur - mine; /* -1: ours; the queue entry (or the poller) keeps it alive */
        } else if (cur & TASK_RUNNING) {
            next = (cur | TASK_NOTIFIED) - mine; /* -1: ours; the poller holds one */
        } else {
            next = (cur | TASK_NOTIFIED) - joining * TASK_JOINING_ONE; /* ours becomes the queue's */
            step = TASK_NOTIFY_SCHEDULE;
        }
        if (state_cas(state, &cur, next))
            return step;
    }
    /* END STUDENT */
}

enum task_notify_step task_state_to_notified_and_cancelled(_Atomic uint64_t *state)
{
    /* BEGIN STUDENT: rows 11 to 11'': who drops the future of an idle task that nobody will poll, and how does it learn that it must? (docs/03-executor.md#abort) */
    uint64_t cur = task_state_load(state);
    enum task_notify_step step;
    for (;;) {
        uint64_t next;
        step = TASK_NOTIFY_NOTHING;
        if (cur & (TASK_COMPLETE | TASK_CANCELLED))
            return TASK_NOTIFY_NOTHING; /* too late, or already asked */
        if (cur & (TASK_RUNNING | TASK_NOTIFIED)) {
            next = cur | TASK_CANCELLED; /* the poller, or the queue entry, will see it */
        } else {
            next = (cur | TASK_CANCELLED | TASK_NOTIFIED) + TASK_REF_ONE; /* +1: the queue entry's */
            step = TASK_NOTIFY_SCHEDULE;
        }
        if (state_cas(state, &cur, next))
            return step;
    }
    /* END STUDENT */
}

/* ---- running -------------------------------------------------------------------------- */

enum task_run_step task_state_to_running(_Atomic uint64_t *state)
{
    /* BEGIN STUDENT: row 2: what may a queue entry find in the word when it is run, and what if the task completed, or is being polled already? (docs/03-executor.md#running-a-task) */
    uint64_t cur = task_state_load(state);
    for (;;) {
        if (cur & (TASK_COMPLETE | TASK_RUNNING)) {
            /* A stale entry (the task was cancelled at shutdown while queued):
             * nothing to run. */
            uint64_t next = cur - TASK_REF_ONE; /* -1: the queue entry's */
            if (state_cas(state, &cur, next))
                return task_state_refs(next) == 0 ? TASK_RUN_FREE : TASK_RUN_STALE;
            continue;
        }
        /* Take the lock and consume the notification: a wake from now on
         * sets NOTIFIED again, and the poller sees it when the poll returns. */
        if (state_cas(state, &cur, (cur | TASK_RUNNING) & ~TASK_NOTIFIED))
            return (cur & TASK_CANCELLED) ? TASK_RUN_CANCEL : TASK_RUN_POLL;
    }
    /* END STUDENT */
}

enum task_idle_step task_state_to_idle(_Atomic uint64_t *state)
{
    /* BEGIN STUDENT: rows 3 to 5: a wake or an abort may have come during the poll; for each case, what becomes of the poller's reference? (docs/03-executor.md#running-a-task) */
    uint64_t cur = task_state_load(state);
    for (;;) {
        uint64_t next;
        enum task_idle_step step;
        if (cur & TASK_CANCELLED)
            return TASK_IDLE_CANCEL; /* aborted during the poll: keep RUNNING, drop the future */
        if (cur & TASK_NOTIFIED) {
            next = cur & ~TASK_RUNNING; /* our reference becomes the queue entry's */
            step = TASK_IDLE_REQUEUE;
        } else {
            next = (cur & ~TASK_RUNNING) - TASK_REF_ONE; /* -1: ours; the list keeps it alive */
            step = TASK_IDLE_DONE;
        }
        if (state_cas(state, &cur, next))
            return step;
    }
    /* END STUDENT */
}

enum task_shutdown_step task_state_to_shutdown(_Atomic uint64_t *state)
{
    /* BEGIN STUDENT: row 17: which states may executor_free shut down, and what must it leave of a task that is still queued? (docs/03-executor.md#freeing-the-executor) */
    uint64_t cur = task_state_load(state);
    for (;;) {
        if (cur & (TASK_COMPLETE | TASK_RUNNING))
            return TASK_SHUTDOWN_REFUSED;
        if (state_cas(state, &cur, cur | TASK_RUNNING | TASK_CANCELLED))
            return TASK_SHUTDOWN_CANCEL;
    }
    /* END STUDENT */
}

/* ---- completing ------------------------------------------------------------------------ */

/* The common case costs one atomic read-modify-write: when nothing is left to
 * do with the task after COMPLETE (no join waker to wake, no output that
 * could still become the caller's), the references are given back in the
 * same CAS that sets COMPLETE. Tokio's task does the same: its
 * transition_to_terminal gives back the references once the completion's
 * work is done (tokio/src/runtime/task/state.rs). */
enum task_complete_step task_state_to_complete(_Atomic uint64_t *state, uint64_t refs, bool output_done)
{
    /* BEGIN STUDENT: row 6: when can the COMPLETE transition also give back the poller's and the list's references, and when must it leave them for later? (docs/03-executor.md#completing) */
    uint64_t cur = task_state_load(state);
    for (;;) {
        uint64_t next = (cur & ~TASK_RUNNING) | TASK_COMPLETE;
        /* Will the caller touch the task after this CAS? Only to wake a join
         * waker (JOIN_WAKER set), or to drop an output whose join handle went
         * away since it looked (JOIN_INTEREST clear now, output not yet dropped). */
        bool last_touch = (cur & TASK_JOIN_INTEREST) ? !(cur & TASK_JOIN_WAKER) : output_done;
        if (last_touch)
            next -= refs * TASK_REF_ONE; /* -refs: the poller's and the list's */
        /* release: publishes the stage and the output to the join handle;
         * acquire: pairs with the join handle's CAS that set JOIN_WAKER, so
         * the waker it stored is visible to the caller */
        if (!state_cas(state, &cur, next))
            continue;
        if (last_touch)
            return task_state_refs(next) == 0 ? TASK_COMPLETE_FREE : TASK_COMPLETE_DONE;
        return (cur & TASK_JOIN_INTEREST) ? TASK_COMPLETE_WAKE_JOINER : TASK_COMPLETE_DROP_OUTPUT;
    }
    /* END STUDENT */
}

enum task_join_waker_step task_state_unset_join_waker_after_complete(_Atomic uint64_t *state)
{
    /* BEGIN STUDENT: row 14: the completer is done with the join waker; is it still the completer's to drop? (docs/03-executor.md#completing) */
    uint64_t cur = task_state_load(state);
    for (;;) {
        if (state_cas(state, &cur, cur & ~TASK_JOIN_WAKER))
            return (cur & TASK_JOIN_INTEREST) ? TASK_JOIN_WAKER_LEAVE : TASK_JOIN_WAKER_DROP;
    }
    /* END STUDENT */
}

/* ---- the join handle's transitions (join.h's rules) ------------------------------------------ */

enum task_join_step task_state_set_join_waker(_Atomic uint64_t *state)
{
    /* BEGIN STUDENT: join.h rule 2: may the handle publish its waker once the task is COMPLETE? (docs/03-executor.md#the-join-handle-and-its-waker) */
    /* release (in the acq_rel): the completing thread's acquire CAS then sees
     * the waker the join handle wrote before */
    uint64_t cur = task_state_load(state);
    for (;;) {
        if (cur & TASK_COMPLETE)
            return TASK_JOIN_COMPLETE;
        if (state_cas(state, &cur, cur | TASK_JOIN_WAKER))
            return TASK_JOIN_DONE;
    }
    /* END STUDENT */
}

enum task_join_step task_state_unset_join_waker(_Atomic uint64_t *state)
{
    /* BEGIN STUDENT: join.h rule 3: may the handle take its waker back once the task is COMPLETE? (docs/03-executor.md#the-join-handle-and-its-waker) */
    uint64_t cur = task_state_load(state);
    for (;;) {
        if (cur & TASK_COMPLETE)
            return TASK_JOIN_COMPLETE; /* the completing thread has the slot (rule 4) */
        if (state_cas(state, &cur, cur & ~TASK_JOIN_WAKER))
            return TASK_JOIN_DONE;
    }
    /* END STUDENT */
}

enum task_join_drop_step task_state_to_join_handle_dropped(_Atomic uint64_t *state)
{
    /* BEGIN STUDENT: join.h rules 5 and 6: when the handle goes, is the output its to drop, and which references go with it? (docs/03-executor.md#the-join-handle-and-its-waker) */
    uint64_t cur = task_state_load(state);
    for (;;) {
        if (cur & TASK_COMPLETE) {
            /* The handle keeps its reference for now: it still touches the output. */
            if (state_cas(state, &cur, cur & ~TASK_JOIN_INTEREST))
                return (cur & TASK_JOIN_WAKER) ? TASK_JOIN_DROP_OUTPUT : TASK_JOIN_DROP_OUTPUT_WAKER;
        } else {
            /* Nothing of the handle's is left in the task: clear the interest
             * and give the reference back in one step, so that no snapshot
             * ever shows one without the other (the deadlock check reads
             * them together). */
            uint64_t next = (cur & ~TASK_JOIN_INTEREST) - TASK_REF_ONE; /* -1: the join handle's */
            if (state_cas(state, &cur, next))
                return task_state_refs(next) == 0 ? TASK_JOIN_DROP_FREE : TASK_JOIN_DROP_DONE;
        }
    }
    /* END STUDENT */
}
