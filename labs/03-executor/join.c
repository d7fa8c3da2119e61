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
    LAB_TODO("join.h rules 5 and 6: the output leaves the task exactly once; what does the joiner get, and what does a cancelled task give it instead? (docs/03-executor.md#the-join-handle-and-its-waker)");
}

/* Makes sure the slot holds a waker for w, published with JOIN_WAKER (rules
 * 1-3). Returns true when the task turned out to be complete instead. */
static inline bool register_join_waker(struct task *t, const struct waker *w)
{
    (void)t;
    (void)w;
    LAB_TODO("join.h rules 1 to 4: the completer may be reading the slot right now; which bit says whose the slot is, and what must every write to the slot look at first? (docs/03-executor.md#the-join-handle-and-its-waker)");
}

enum poll join_handle_poll(struct join_handle *jh, struct context *cx, void *out,
                           enum join_status *status)
{
    (void)jh;
    (void)cx;
    (void)out;
    (void)status;
    LAB_TODO("join.h rules 2 and 4: what if the task completes between your look at COMPLETE and your registration? (docs/03-executor.md#the-join-handle-and-its-waker)");
}

bool join_handle_is_finished(const struct join_handle *jh)
{
    return task_state_load(&task_of(jh)->state) & TASK_COMPLETE;
}

/* ---- abort ---------------------------------------------------------------------------- */

void join_handle_abort(struct join_handle *jh)
{
    (void)jh;
    LAB_TODO("abort (rows 11 to 11''): only the task's own scheduler may drop its future; what must abort do about a task that nobody is going to poll? (docs/03-executor.md#abort)");
}

/* ---- drop ------------------------------------------------------------------------------- */

void join_handle_drop(struct join_handle *jh)
{
    (void)jh;
    LAB_TODO("join.h rules 3, 5 and 6: when the handle goes, complete or not, who drops the output and the join waker, and which references go with them? (docs/03-executor.md#the-join-handle-and-its-waker)");
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
