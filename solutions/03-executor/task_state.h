/* task_state.h - stage 03: the task's state word, and every change made to it.
 *
 * This module owns the word. Its bit layout is here, as named constants; its
 * transitions are in task_state.c, and no other file changes the word:
 * task.c and join.c call a transition and then do what it answers. Each
 * transition is one compare-and-swap loop (or one fetch-and-op) that decides
 * from one whole snapshot, and returns an enum whose values name the
 * caller's next step (schedule the task, poll it, free it, drop the output).
 * The step itself (a schedule, a free, a wake) comes after the loop, in the
 * caller, where a retried CAS cannot repeat it.
 *
 * The shape is Tokio's: one file, tokio/src/runtime/task/state.rs, owns the
 * word, and its transitions return an enum for the caller's next step
 * (transition_to_running -> TransitionToRunning::{Success, Cancelled, Failed,
 * Dealloc}; transition_to_idle -> TransitionToIdle::{Ok, OkNotified,
 * OkDealloc, Cancelled}). The rows, the joining count and the names here are
 * the lab's own: docs/03-executor.md#the-transition-table numbers the rows,
 * and each function below says which ones it is.
 *
 * Memory orders, for every function here:
 *   - every successful CAS (and every fetch-and-op that changes a flag or
 *     gives references back) is acq_rel: release, because the thread that
 *     makes a transition publishes what it wrote before it (a stored join
 *     waker, the output, a wake's data); acquire, because the next thread to
 *     act on the task must see all that. Failed CASes and loads are acquire
 *     for the same reason.
 *   - a reference increment from an existing reference is relaxed: it
 *     publishes nothing, and the reference it copies keeps the task alive.
 */
#ifndef LAB_TASK_STATE_H
#define LAB_TASK_STATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* ---- the bit layout -------------------------------------------------------------
 *
 *   63                         32 31                     8 7      0
 *  +-----------------------------+------------------------+--------+
 *  |        references           |        joining         | flags  |
 *  +-----------------------------+------------------------+--------+
 *
 * flags:
 *   RUNNING        someone is polling (or cancelling) the future: the lock.
 *   NOTIFIED       a queue entry exists; or, while RUNNING, a wake came during
 *                  the poll and the poller must queue the task again.
 *   COMPLETE       the future is gone (finished or cancelled); never cleared.
 *   CANCELLED      abort was asked: the future is dropped, not polled, the
 *                  next time the scheduler has the task (or when the running
 *                  poll returns Pending).
 *   JOIN_INTEREST  a join handle exists.
 *   JOIN_WAKER     the join handle has stored a waker in join_waker.
 * joining: how many of this task's wakers sit in join handles of other tasks
 *   of the same scheduler (this task is joining them). Such a waker can only
 *   be woken by one of the scheduler's own tasks completing: the deadlock
 *   check (executor.h) counts it as internal. Part of the reference count.
 * references: every reference, the joining ones included.
 *
 * Counts and flags share one word so that one atomic load is a consistent
 * snapshot of all of them: two words read one after the other are not.
 */
/* quote: state-bits */
#define TASK_RUNNING       UINT64_C(0x01)
#define TASK_NOTIFIED      UINT64_C(0x02)
#define TASK_COMPLETE      UINT64_C(0x04)
#define TASK_CANCELLED     UINT64_C(0x08)
#define TASK_JOIN_INTEREST UINT64_C(0x10)
#define TASK_JOIN_WAKER    UINT64_C(0x20)
#define TASK_FLAGS         UINT64_C(0xff)

#define TASK_JOINING_SHIFT 8
#define TASK_JOINING_ONE   (UINT64_C(1) << TASK_JOINING_SHIFT)
#define TASK_JOINING_MASK  (UINT64_C(0xffffff) << TASK_JOINING_SHIFT)
#define TASK_REF_SHIFT     32
#define TASK_REF_ONE       (UINT64_C(1) << TASK_REF_SHIFT)
/* end quote: state-bits */

/* A new task (row 1): three references (the scheduler's list, the first
 * queue entry, the join handle), so NOTIFIED and JOIN_INTEREST. */
#define TASK_STATE_INITIAL (3 * TASK_REF_ONE | TASK_NOTIFIED | TASK_JOIN_INTEREST)

/* The most references and joining marks a word can count. */
#define TASK_REFS_MAX    (UINT64_C(1) << 31)
#define TASK_JOINING_MAX (TASK_JOINING_MASK >> TASK_JOINING_SHIFT)

/* What a snapshot counts. */
static inline uint64_t task_state_refs(uint64_t s) { return s >> TASK_REF_SHIFT; }
static inline uint64_t task_state_joining(uint64_t s)
{
    return (s & TASK_JOINING_MASK) >> TASK_JOINING_SHIFT;
}

/* ---- reading and counting ------------------------------------------------------- */

void task_state_init(_Atomic uint64_t *state); /* TASK_STATE_INITIAL; before the task is shared */

/* A snapshot (acquire: pairs with the acq_rel write of whoever changed the
 * word last). */
uint64_t task_state_load(const _Atomic uint64_t *state);

/* A snapshot that orders nothing (relaxed): for tracing and test hooks, which
 * only look. */
uint64_t task_state_peek(const _Atomic uint64_t *state);

/* Rows 9 and 12's waker: +1 reference (and +joining marks) from a reference
 * the caller holds. False when a count would overflow (the caller stops the
 * program: a waker cloned in a loop and never dropped). */
bool task_state_ref_inc(_Atomic uint64_t *state, uint64_t joining);

/* Row 10: gives back `refs` references and `joining` joining marks at once. */
enum task_ref_step {
    TASK_REF_KEEP, /* others still hold the task */
    TASK_REF_FREE, /* that was the last reference: free the task */
};
enum task_ref_step task_state_ref_dec(_Atomic uint64_t *state, uint64_t refs, uint64_t joining);

/* ---- the transitions ------------------------------------------------------------ */

/* Rows 7-7''' (wake by reference: the caller keeps its reference), 8-8' (wake
 * by value: the caller's reference, with `joining` marks, is consumed) and
 * 11-11'' (abort). */
enum task_notify_step {
    TASK_NOTIFY_NOTHING,  /* already queued, being polled, complete or cancelled */
    TASK_NOTIFY_SCHEDULE, /* the task was idle: a queue entry now exists, with its
                           * reference; hand the task to its scheduler */
    TASK_NOTIFY_FREE,     /* wake by value only: the caller's reference was the last */
};
enum task_notify_step task_state_to_notified_by_ref(_Atomic uint64_t *state);
enum task_notify_step task_state_to_notified_by_val(_Atomic uint64_t *state, uint64_t joining);
enum task_notify_step task_state_to_notified_and_cancelled(_Atomic uint64_t *state);

/* Rows 2 and 2': the caller popped a queue entry and holds its reference. */
enum task_run_step {
    TASK_RUN_POLL,   /* RUNNING set, NOTIFIED cleared: the entry's reference is the
                      * poller's now; poll the future */
    TASK_RUN_CANCEL, /* the same, but CANCELLED is set: drop the future, not poll it */
    TASK_RUN_STALE,  /* COMPLETE or RUNNING: a stale entry; its reference was given back */
    TASK_RUN_FREE,   /* the same, and that reference was the last: free the task */
};
enum task_run_step task_state_to_running(_Atomic uint64_t *state);

/* Rows 3, 4 and 5: the poll returned Pending; the caller holds RUNNING and
 * the poller's reference. */
enum task_idle_step {
    TASK_IDLE_DONE,    /* RUNNING cleared, the poller's reference given back (the
                        * scheduler's list keeps the task alive) */
    TASK_IDLE_REQUEUE, /* woken during the poll: RUNNING cleared, the poller's
                        * reference is the queue entry's; hand the task back */
    TASK_IDLE_CANCEL,  /* aborted during the poll: nothing written, RUNNING kept;
                        * drop the future, then complete */
};
enum task_idle_step task_state_to_idle(_Atomic uint64_t *state);

/* Row 17: the scheduler is going away; RUNNING and CANCELLED are set, NOTIFIED
 * is kept (its queue entry is still out there). */
enum task_shutdown_step {
    TASK_SHUTDOWN_CANCEL,  /* the future is the caller's: drop it, then complete */
    TASK_SHUTDOWN_REFUSED, /* complete or being polled: nothing written; a caller's bug */
};
enum task_shutdown_step task_state_to_shutdown(_Atomic uint64_t *state);

/* Row 6: RUNNING -> COMPLETE. The caller holds RUNNING and gives back `refs`
 * references; output_done: the caller found JOIN_INTEREST clear before and
 * already dropped the output. When nothing is left to do with the task after
 * COMPLETE, the references go in the same CAS. */
enum task_complete_step {
    TASK_COMPLETE_DONE,        /* the references were given back with COMPLETE:
                                * do not touch the task again */
    TASK_COMPLETE_FREE,        /* the same, and they were the last: free the task */
    TASK_COMPLETE_DROP_OUTPUT, /* the join handle went away since the caller looked:
                                * the output is the caller's to drop (join.h rule 5),
                                * then the references are its to give back */
    TASK_COMPLETE_WAKE_JOINER, /* JOIN_WAKER was set: the slot is the caller's (rule 4);
                                * wake the waker by reference, then
                                * task_state_unset_join_waker_after_complete, then
                                * give back the references */
};
enum task_complete_step task_state_to_complete(_Atomic uint64_t *state, uint64_t refs, bool output_done);

/* Row 14: the completing thread is done with the join waker. */
enum task_join_waker_step {
    TASK_JOIN_WAKER_LEAVE, /* the join handle still exists: the slot, woken waker
                            * and all, is the handle's again (rule 1) */
    TASK_JOIN_WAKER_DROP,  /* the join handle is gone: drop the waker */
};
enum task_join_waker_step task_state_unset_join_waker_after_complete(_Atomic uint64_t *state);

/* Rows 12 and 13, for the join handle (join.h rules 2 and 3). */
enum task_join_step {
    TASK_JOIN_DONE,     /* JOIN_WAKER set (row 12) or cleared (row 13) */
    TASK_JOIN_COMPLETE, /* COMPLETE came first: nothing written; take the output */
};
enum task_join_step task_state_set_join_waker(_Atomic uint64_t *state);
enum task_join_step task_state_unset_join_waker(_Atomic uint64_t *state);

/* Rows 15 and 16: the join handle clears JOIN_INTEREST. */
enum task_join_drop_step {
    TASK_JOIN_DROP_DONE,          /* not complete: the handle's reference went in
                                   * the same CAS; nothing of it is left in the task */
    TASK_JOIN_DROP_FREE,          /* the same, and it was the last reference */
    TASK_JOIN_DROP_OUTPUT_WAKER,  /* complete, JOIN_WAKER clear: the output and the
                                   * slot are the handle's to drop (rules 1, 6),
                                   * then its reference */
    TASK_JOIN_DROP_OUTPUT,        /* complete, JOIN_WAKER set: the output is the
                                   * handle's to drop; the completing thread still
                                   * has the slot and will drop it (rule 4) */
};
enum task_join_drop_step task_state_to_join_handle_dropped(_Atomic uint64_t *state);

#endif
