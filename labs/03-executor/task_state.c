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
#include "lab_todo.h"

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
    (void)state;
    (void)joining;
    LAB_TODO("+1 reference (and the joining marks) in one fetch_add, relaxed; false when a count would overflow (docs/03-executor.md#references)");
}

enum task_ref_step task_state_ref_dec(_Atomic uint64_t *state, uint64_t refs, uint64_t joining)
{
    (void)state;
    (void)refs;
    (void)joining;
    LAB_TODO("one fetch_sub; the holder that takes the count to zero frees the task (docs/03-executor.md#references)");
}

/* ---- wakes and abort ------------------------------------------------------------------ */

enum task_notify_step task_state_to_notified_by_ref(_Atomic uint64_t *state)
{
    (void)state;
    LAB_TODO("idle -> NOTIFIED with +1 (schedule); RUNNING -> NOTIFIED only; already NOTIFIED: the same value, written; COMPLETE or CANCELLED -> nothing (docs/03-executor.md#the-transition-table)");
}

enum task_notify_step task_state_to_notified_by_val(_Atomic uint64_t *state, uint64_t joining)
{
    (void)state;
    (void)joining;
    LAB_TODO("like by_ref, but the caller's reference is consumed: it becomes the queue entry's, or is given back (docs/03-executor.md#the-transition-table)");
}

enum task_notify_step task_state_to_notified_and_cancelled(_Atomic uint64_t *state)
{
    (void)state;
    LAB_TODO("set CANCELLED; an idle task must also be queued (NOTIFIED, +1) so that its own scheduler drops the future; a running or queued one will see the flag (docs/03-executor.md#abort)");
}

/* ---- running -------------------------------------------------------------------------- */

enum task_run_step task_state_to_running(_Atomic uint64_t *state)
{
    (void)state;
    LAB_TODO("NOTIFIED -> RUNNING, clearing NOTIFIED (a wake from now on sets it again); a stale entry (COMPLETE or RUNNING) gives its reference back instead (docs/03-executor.md#running-a-task)");
}

enum task_idle_step task_state_to_idle(_Atomic uint64_t *state)
{
    (void)state;
    LAB_TODO("CANCELLED: write nothing, keep RUNNING; NOTIFIED: clear RUNNING, our reference becomes the queue entry's; else clear RUNNING and -1 (docs/03-executor.md#running-a-task)");
}

enum task_shutdown_step task_state_to_shutdown(_Atomic uint64_t *state)
{
    (void)state;
    LAB_TODO("set RUNNING and CANCELLED (leave NOTIFIED: its queue entry is still out there); refuse a task that is complete or being polled (docs/03-executor.md#freeing-the-executor)");
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
    (void)state;
    (void)refs;
    (void)output_done;
    LAB_TODO("RUNNING -> COMPLETE in one CAS, with the references when nothing is left to do (no join waker set, no output that could still be ours) (docs/03-executor.md#completing)");
}

enum task_join_waker_step task_state_unset_join_waker_after_complete(_Atomic uint64_t *state)
{
    (void)state;
    LAB_TODO("clear JOIN_WAKER; the waker is ours to drop when JOIN_INTEREST is gone (docs/03-executor.md#completing)");
}

/* ---- the join handle's transitions (join.h's rules) ------------------------------------------ */

enum task_join_step task_state_set_join_waker(_Atomic uint64_t *state)
{
    (void)state;
    LAB_TODO("rule 2: set JOIN_WAKER unless COMPLETE (docs/03-executor.md#the-join-handle-and-its-waker)");
}

enum task_join_step task_state_unset_join_waker(_Atomic uint64_t *state)
{
    (void)state;
    LAB_TODO("rule 3: clear JOIN_WAKER unless COMPLETE (docs/03-executor.md#the-join-handle-and-its-waker)");
}

enum task_join_drop_step task_state_to_join_handle_dropped(_Atomic uint64_t *state)
{
    (void)state;
    LAB_TODO("complete: clear JOIN_INTEREST only (the output is the handle's); else clear it and -1 in one CAS (docs/03-executor.md#the-join-handle-and-its-waker)");
}
