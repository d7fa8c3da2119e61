/* join.c - stage 03: the join handle.
 *
 * A join handle is a task reference with rights of its own: the output slot
 * once the task completes (if it still exists then), and the join waker slot
 * while JOIN_WAKER is clear. join.h numbers the six rules that keep the
 * handle and the completing thread out of each other's way; every function
 * below says which rule it follows. The state word's transitions are
 * task_state.c's (its memory orders too: task_state.h); this file does what
 * they answer.
 *
 * The join handle is the struct task itself, seen through another type: a
 * join handle costs no allocation of its own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "join.h"
#include "lab_todo.h"

static inline struct task *task_of(const struct join_handle *jh) { return (struct task *)jh; }

/* ---- the join waker slot (given) ----------------------------------------------------
 * A waker goes into the slot as a clone of the joiner's. When the joiner is a
 * task of the same scheduler, the clone is a joining waker (task.h): the
 * deadlock check then knows that only one of its own tasks can fire it. */

static inline struct waker join_waker_for(struct task *t, const struct waker *w)
{
    struct task *joiner = task_of_waker(w, t->scheduler);
    if (joiner)
        return task_joining_waker(joiner); /* +1 ref, +1 joining: the slot's */
    return waker_clone(w);                  /* +1: the slot's */
}

/* Would the waker in the slot wake the same task as w? (A joining waker and
 * an ordinary waker of the same task have different vtables.) */
static inline bool join_waker_is(struct task *t, const struct waker *w)
{
    struct task *a = task_of_waker(&t->join_waker, t->scheduler);
    if (a)
        return a == task_of_waker(w, t->scheduler);
    return waker_will_wake(&t->join_waker, w);
}

/* ---- polling ------------------------------------------------------------------------ */

/* COMPLETE is set and we saw it: the output is ours (rule 5). */
static inline enum poll take_output(struct task *t, void *out, enum join_status *status)
{
    (void)t;
    (void)out;
    (void)status;
    LAB_TODO("OUTPUT: move it to out (or drop it when out is NULL), mark it consumed; CANCELLED: say so (docs/03-executor.md#the-join-handle-and-its-waker)");
}

/* Makes sure the slot holds a waker for w, published with JOIN_WAKER (rules
 * 1-3). Returns true when the task turned out to be complete instead. */
static inline bool register_join_waker(struct task *t, const struct waker *w)
{
    (void)t;
    (void)w;
    LAB_TODO("COMPLETE: return true, the slot may hold a waker already woken (rule 4); rule 3 (same waker: done; else clear JOIN_WAKER unless COMPLETE, drop the old), rule 1 (write the slot), rule 2 (set JOIN_WAKER unless COMPLETE) (docs/03-executor.md#the-join-handle-and-its-waker)");
}

enum poll join_handle_poll(struct join_handle *jh, struct context *cx, void *out,
                           enum join_status *status)
{
    (void)jh;
    (void)cx;
    (void)out;
    (void)status;
    LAB_TODO("COMPLETE: take the output; else register cx's waker (unless cx is NULL) and say Pending, unless the task completed meanwhile (docs/03-executor.md#the-join-handle-and-its-waker)");
}

bool join_handle_is_finished(const struct join_handle *jh)
{
    return task_state_load(&task_of(jh)->state) & TASK_COMPLETE;
}

/* ---- abort ---------------------------------------------------------------------------- */

void join_handle_abort(struct join_handle *jh)
{
    (void)jh;
    LAB_TODO("the abort transition (rows 11-11''): an idle task is queued, so that its own scheduler drops the future; a running or queued one will see the flag (docs/03-executor.md#abort)");
}

/* ---- drop ------------------------------------------------------------------------------- */

void join_handle_drop(struct join_handle *jh)
{
    (void)jh;
    LAB_TODO("not complete: take the waker back (rule 3), then clear JOIN_INTEREST and -1 in one CAS; complete: clear JOIN_INTEREST, drop the output (rule 6) and the waker if the slot is ours, then -1 (docs/03-executor.md#the-join-handle-and-its-waker)");
}

/* ---- a join handle as a future (given) ---------------------------------------------------- */

static enum poll join_future_poll(void *self, struct context *cx, void *out)
{
    struct join_future *join = self;
    enum join_status st;
    if (join_handle_poll(join->jh, cx, join->out, &st) == POLL_PENDING)
        return POLL_PENDING;
    *(enum join_status *)out = st;
    return POLL_READY;
}

static const struct future_vtable join_future_vt =
    FUTURE_VTABLE_INIT(struct join_future, sizeof(enum join_status), join_future_poll, NULL);

void join_future_init(struct join_future *join, struct join_handle *jh, void *out)
{
    join->jh = jh;
    join->out = out;
}

struct future join_future_as_future(struct join_future *join)
{
    return future_of(&join_future_vt, join);
}

/* ---- test hooks ---- */

uint64_t join_handle_test_state(const struct join_handle *jh)
{
    return task_test_state(task_of(jh));
}
