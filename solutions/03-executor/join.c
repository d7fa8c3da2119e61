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
    /* BEGIN STUDENT: join.h rules 5 and 6: the output leaves the task exactly once; what does the joiner get, and what does a cancelled task give it instead? (docs/03-executor.md#the-join-handle-and-its-waker) */
    switch (t->stage) {
    case TASK_STAGE_OUTPUT:
        if (out)
            memcpy(out, task_output(t), t->vtable->output_size);
        else if (t->drop_output)
            t->drop_output(task_output(t));
        t->stage = TASK_STAGE_CONSUMED;
        *status = JOIN_OK;
        return POLL_READY;
    case TASK_STAGE_CANCELLED:
        *status = JOIN_CANCELLED;
        return POLL_READY;
    default:
        fputs("join_handle_poll: polled again after it returned Ready (the output was already "
              "taken)\n", stderr);
        abort();
    }
    /* END STUDENT */
}

/* Makes sure the slot holds a waker for w, published with JOIN_WAKER (rules
 * 1-3). Returns true when the task turned out to be complete instead. */
static inline bool register_join_waker(struct task *t, const struct waker *w)
{
    /* BEGIN STUDENT: join.h rules 1 to 4: the completer may be reading the slot right now; which bit says whose the slot is, and what must every write to the slot look at first? (docs/03-executor.md#the-join-handle-and-its-waker) */
    uint64_t cur = task_state_load(&t->state);
    /* Complete since the caller looked: the completing thread may already
     * have woken our old waker and cleared JOIN_WAKER, leaving that waker in
     * the slot for us to drop (rule 1). Writing the slot now would lose it. */
    if (cur & TASK_COMPLETE)
        return true;
    if (cur & TASK_JOIN_WAKER) {
        /* Rule 3: published. Reading it is safe: the only other reader, the
         * completing thread, never writes it while we exist (rule 4). */
        if (join_waker_is(t, w))
            return false;
        if (task_state_unset_join_waker(&t->state) == TASK_JOIN_COMPLETE)
            return true;
        waker_drop(&t->join_waker); /* -1: the old waker's reference; rule 1: the slot is ours */
    }
    t->join_waker = join_waker_for(t, w); /* +1 (see join_waker_for) */
    /* Rule 2: publish it (the transition's release makes the completing
     * thread see the waker we just wrote). */
    if (task_state_set_join_waker(&t->state) == TASK_JOIN_COMPLETE) {
        waker_drop(&t->join_waker); /* -1: too late, the slot is still ours: empty it */
        return true;
    }
    return false;
    /* END STUDENT */
}

enum poll join_handle_poll(struct join_handle *jh, struct context *cx, void *out,
                           enum join_status *status)
{
    /* BEGIN STUDENT: join.h rules 2 and 4: what if the task completes between your look at COMPLETE and your registration? (docs/03-executor.md#the-join-handle-and-its-waker) */
    struct task *t = task_of(jh);
    /* acquire: pairs with the completing CAS (release), which published the output */
    if (task_state_load(&t->state) & TASK_COMPLETE)
        return take_output(t, out, status);
    if (!cx)
        return POLL_PENDING;
    if (register_join_waker(t, cx->waker))
        return take_output(t, out, status);
    return POLL_PENDING;
    /* END STUDENT */
}

bool join_handle_is_finished(const struct join_handle *jh)
{
    return task_state_load(&task_of(jh)->state) & TASK_COMPLETE;
}

/* ---- abort ---------------------------------------------------------------------------- */

void join_handle_abort(struct join_handle *jh)
{
    /* BEGIN STUDENT: abort (rows 11 to 11''): only the task's own scheduler may drop its future; what must abort do about a task that nobody is going to poll? (docs/03-executor.md#abort) */
    struct task *t = task_of(jh);
    if (task_state_to_notified_and_cancelled(&t->state) == TASK_NOTIFY_SCHEDULE)
        t->scheduler->vtable->schedule(t->scheduler, t, SCHEDULE_WAKE);
    /* END STUDENT */
}

/* ---- drop ------------------------------------------------------------------------------- */

void join_handle_drop(struct join_handle *jh)
{
    /* BEGIN STUDENT: join.h rules 3, 5 and 6: when the handle goes, complete or not, who drops the output and the join waker, and which references go with them? (docs/03-executor.md#the-join-handle-and-its-waker) */
    struct task *t = task_of(jh);
    uint64_t cur = task_state_load(&t->state);

    /* The common case first: complete, and ours is the only reference left.
     * Then nobody else can touch the word again, and we need no CAS at all
     * (the acquire load saw every other holder's last decrement). */
    if ((cur & TASK_COMPLETE) && task_state_refs(cur) == 1) {
        if (t->stage == TASK_STAGE_OUTPUT && t->drop_output)
            t->drop_output(task_output(t)); /* rule 6 */
        if (!waker_is_none(&t->join_waker))
            waker_drop(&t->join_waker); /* -1: the completing thread is done with it (rule 4) */
        task_free(t); /* -1: ours, the last (to the cell cache or malloc, task.h) */
        return;
    }

    /* First our waker, while the task is not complete (rule 3, then rule 1);
     * completed meanwhile: the completing thread has the slot (rule 4). */
    if ((cur & TASK_JOIN_WAKER) && !(cur & TASK_COMPLETE) &&
        task_state_unset_join_waker(&t->state) == TASK_JOIN_DONE)
        waker_drop(&t->join_waker); /* -1: the slot's waker */

    bool slot_ours;
    switch (task_state_to_join_handle_dropped(&t->state)) {
    case TASK_JOIN_DROP_FREE:
        task_free(t); /* cannot happen while the list holds one; kept for schedulers without a list */
        return;
    case TASK_JOIN_DROP_DONE:
        return; /* nothing of ours was left in the task */
    case TASK_JOIN_DROP_OUTPUT_WAKER:
        slot_ours = true;
        break;
    case TASK_JOIN_DROP_OUTPUT:
    default:
        slot_ours = false;
        break;
    }
    /* Complete, and JOIN_INTEREST was set when it completed: the output is ours
     * (rules 5 and 6). */
    if (t->stage == TASK_STAGE_OUTPUT && t->drop_output)
        t->drop_output(task_output(t));
    t->stage = TASK_STAGE_CONSUMED;
    /* JOIN_WAKER clear: the slot is ours (rule 1), maybe with a waker the
     * completing thread already woke. Set: the completing thread still has
     * it and will drop it, since it will find JOIN_INTEREST clear (rule 4). */
    if (slot_ours)
        waker_drop(&t->join_waker); /* -1, or nothing when the slot is empty */
    task_drop_reference(t); /* -1: the join handle's */
    /* END STUDENT */
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
