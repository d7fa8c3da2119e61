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
    LAB_TODO("rows 7 to 7''': for each state the word can be in, what does a wake by reference write, and does it create a queue entry? (docs/03-executor.md#the-transition-table)");
}

enum task_notify_step task_state_to_notified_by_val(_Atomic uint64_t *state, uint64_t joining)
{
    (void)state;
    (void)joining;
    LAB_TODO("rows 8 to 8': the caller's reference is consumed; in which states does it become the queue entry's? (docs/03-executor.md#the-transition-table)");
}

enum task_notify_step task_state_to_notified_and_cancelled(_Atomic uint64_t *state)
{
    (void)state;
    LAB_TODO("rows 11 to 11'': who drops the future of an idle task that nobody will poll, and how does it learn that it must? (docs/03-executor.md#abort)");
}

/* ---- running -------------------------------------------------------------------------- */

enum task_run_step task_state_to_running(_Atomic uint64_t *state)
{
    (void)state;
    LAB_TODO("row 2: what may a queue entry find in the word when it is run, and what if the task completed, or is being polled already? (docs/03-executor.md#running-a-task)");
}

enum task_idle_step task_state_to_idle(_Atomic uint64_t *state)
{
    (void)state;
    LAB_TODO("rows 3 to 5: a wake or an abort may have come during the poll; for each case, what becomes of the poller's reference? (docs/03-executor.md#running-a-task)");
}

enum task_shutdown_step task_state_to_shutdown(_Atomic uint64_t *state)
{
    (void)state;
    LAB_TODO("row 17: which states may executor_free shut down, and what must it leave of a task that is still queued? (docs/03-executor.md#freeing-the-executor)");
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
    LAB_TODO("row 6: when can the COMPLETE transition also give back the poller's and the list's references, and when must it leave them for later? (docs/03-executor.md#completing)");
}

enum task_join_waker_step task_state_unset_join_waker_after_complete(_Atomic uint64_t *state)
{
    (void)state;
    LAB_TODO("row 14: the completer is done with the join waker; is it still the completer's to drop? (docs/03-executor.md#completing)");
}

/* ---- the join handle's transitions (join.h's rules) ------------------------------------------ */

enum task_join_step task_state_set_join_waker(_Atomic uint64_t *state)
{
    (void)state;
    LAB_TODO("join.h rule 2: may the handle publish its waker once the task is COMPLETE? (docs/03-executor.md#the-join-handle-and-its-waker)");
}

enum task_join_step task_state_unset_join_waker(_Atomic uint64_t *state)
{
    (void)state;
    LAB_TODO("join.h rule 3: may the handle take its waker back once the task is COMPLETE? (docs/03-executor.md#the-join-handle-and-its-waker)");
}

enum task_join_drop_step task_state_to_join_handle_dropped(_Atomic uint64_t *state)
{
    (void)state;
    LAB_TODO("join.h rules 5 and 6: when the handle goes, is the output its to drop, and which references go with it? (docs/03-executor.md#the-join-handle-and-its-waker)");
}
