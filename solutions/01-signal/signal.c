/* signal.c - stage 01: a one-shot Signal future, written by hand.
 *
 * Read docs/01-signal.md first; signal.h has the contract, numbered. This
 * file is the C form of the smallest useful future: nothing in it runs by
 * itself. A task polls the future; a producer, on some other thread, completes
 * it; the only thing that travels back to the task is a wake.
 *
 * Layout: ONE allocation per signal.
 *
 *     +------------------------- struct signal_shared --------------------+
 *     | lock | phase | value | stored waker | who is listening | refs ... |
 *     | struct signal producer        { shared ---> back to this block }  |
 *     | struct signal_future future   { shared ---> back to this block }  |
 *     +--------------------------------------------------------------------+
 *
 * signal_new() hands out pointers to the two embedded handles. Each handle
 * owns one reference to the block (the C spelling of two Arc clones), gives
 * it back in its own drop function, and the drop that gives back the last one
 * frees the block. A handle is nothing but its `shared` pointer, so it never
 * needs to know where it lives: a runtime may copy the future's handle into a
 * task before the first poll (future.h) and drop the copy; that is why no
 * drop function here ever frees "its own" handle, only the shared block.
 *
 * Locking: one pthread mutex per signal, and the rules that make a mutex
 * enough (each is one clause of the contract):
 *   - poll checks the outcome and registers its waker in ONE hold of the
 *     lock, so a completion cannot fall between the two (clause 3);
 *   - a completion (or the producer's drop) takes the stored waker out under
 *     the lock and wakes it after unlocking (clause 4): a wake runs the
 *     executor's code, which must never run under our lock;
 *   - drop_value() and waker drops on the drop paths also run after
 *     unlocking. The one foreign call made under the lock is the clone (and
 *     at most one stale drop) inside waker_clone_from() while poll registers:
 *     that is the price of clause 3, and a clone only takes a reference.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "lab_todo.h"
#include "signal.h"

/* BEGIN STUDENT HIDDEN */
/* Where the one-shot is in its life. Wakers, values and handles hang off it:
 *
 *   WAITING --complete--> COMPLETED --poll--> CONSUMED
 *      |                                           ^
 *      +--producer dropped--> CLOSED ---poll-------+
 */
enum signal_phase {
    PHASE_WAITING,   /* no outcome yet; `waker` may hold the latest poller's waker */
    PHASE_COMPLETED, /* the producer's value is stored here, not delivered yet */
    PHASE_CLOSED,    /* the producer left without completing; not delivered yet */
    PHASE_CONSUMED,  /* a poll returned Ready: the outcome has been delivered */
};
/* END STUDENT */

struct signal_shared;

/* The producer handle. Nothing but the way to the shared state: everything
 * that changes lives in the shared state, behind its lock. */
struct signal {
    struct signal_shared *shared;
};

/* The future handle. Same shape, different rights: only it may poll. */
struct signal_future {
    struct signal_shared *shared;
};

/* What both handles point at. */
struct signal_shared {
    /* BEGIN STUDENT FIELDS: a mutex, the outcome so far, the value, the latest waker, whether the future still listens, and how many handles are alive (docs/01-signal.md#the-shared-state) */
    /* Set once by signal_new and never changed: read without the lock. */
    void (*drop_value)(void *value);

    /* `lock` protects every field after it: phase, value, waker,
     * future_gone and refs. Both handles take it for every read and write. */
    pthread_mutex_t lock;
    enum signal_phase phase;
    void *value;          /* owned by this state while phase == PHASE_COMPLETED */
    struct waker waker;   /* one reference to the latest poller, or WAKER_NONE;
                           * only ever non-empty while phase == PHASE_WAITING */
    bool future_gone;     /* signal_future_drop() ran: nobody will ever poll */
    unsigned refs;        /* handles alive, 2 -> 0; each handle owns one */
    /* END STUDENT */

    /* The two handles live inside the block they point at: one allocation. */
    struct signal producer;
    struct signal_future future;
};

/* BEGIN STUDENT HIDDEN */
/* Frees the state. Only the handle whose drop brought refs to zero calls
 * this, after unlocking: no other thread can reach `s` any more, so nothing
 * here needs the lock, and drop_value (the user's code) runs unlocked. */
static void shared_free(struct signal_shared *s, bool untaken, void *value)
{
    if (untaken && s->drop_value)
        s->drop_value(value); /* the value nobody took: its owner was this state */
    pthread_mutex_destroy(&s->lock);
    free(s); /* the handles go with it: they live inside */
}
/* END STUDENT */

int signal_new(void (*drop_value)(void *value), struct signal **producer,
               struct signal_future **future)
{
    /* BEGIN STUDENT: allocate one shared state, initialize its lock and fields, point both handles at it (docs/01-signal.md#creating-a-signal) */
    struct signal_shared *s = malloc(sizeof *s);
    if (!s)
        return -1;
    if (pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s);
        return -1;
    }
    s->drop_value = drop_value;
    s->phase = PHASE_WAITING;
    s->value = NULL;
    s->waker = WAKER_NONE;
    s->future_gone = false;
    s->refs = 2; /* +2: one reference for the producer handle, one for the future handle */
    s->producer.shared = s;
    s->future.shared = s;
    *producer = &s->producer;
    *future = &s->future;
    return 0;
    /* END STUDENT */
}

enum signal_status signal_complete(struct signal *producer, void *value)
{
    /* BEGIN STUDENT: contracts 4 and 5: in which phases is this value refused, and where must the waker be woken so that a task polled inside the wake can take the lock? (docs/01-signal.md#completing) */
    struct signal_shared *s = producer->shared;

    pthread_mutex_lock(&s->lock);
    if (s->phase != PHASE_WAITING) {
        /* Completed before (and maybe already taken): terminal. The value
         * stays with the caller. */
        pthread_mutex_unlock(&s->lock);
        return SIGNAL_ALREADY_COMPLETE;
    }
    if (s->future_gone) {
        /* Nobody can ever poll; keeping the value would only delay its
         * drop. The caller keeps it. */
        pthread_mutex_unlock(&s->lock);
        return SIGNAL_NO_LISTENER;
    }
    s->value = value; /* the state owns the value from here on */
    s->phase = PHASE_COMPLETED;
    /* Move the stored reference out (ownership moves to this local): after
     * unlocking, a poll may run at once and must find no waker to touch. */
    struct waker to_wake = waker_take(&s->waker);
    pthread_mutex_unlock(&s->lock);

    /* Outside the lock. A none waker (nobody polled yet) is ignored. */
    waker_wake(&to_wake); /* -1: wake consumes the reference the poll stored */
    return SIGNAL_OK;
    /* END STUDENT */
}

void signal_drop(struct signal *producer)
{
    /* BEGIN STUDENT: contracts 9 and 10: a producer that leaves without completing is an outcome; who must learn it, how, and who frees the state? (docs/01-signal.md#dropping-the-producer) */
    struct signal_shared *s = producer->shared;
    struct waker to_wake = WAKER_NONE;

    pthread_mutex_lock(&s->lock);
    if (s->phase == PHASE_WAITING) {
        /* Never completed: tell the future there will be no value, or its
         * task would wait forever. */
        s->phase = PHASE_CLOSED;
        to_wake = waker_take(&s->waker);
    }
    s->refs--; /* -1: the producer handle's reference */
    bool last = s->refs == 0;
    bool untaken = s->phase == PHASE_COMPLETED;
    void *value = s->value;
    pthread_mutex_unlock(&s->lock);
    /* From here on `s` may be freed by the future's drop unless we were last. */

    waker_wake(&to_wake); /* -1: consumes the stored reference (none when the future is gone) */
    if (last)
        shared_free(s, untaken, value);
    /* END STUDENT */
}

enum poll signal_future_poll(struct signal_future *future, struct context *cx,
                             struct signal_output *out)
{
    /* BEGIN STUDENT: contracts 1 to 3, 6 and 7: what must be true when this returns Pending, and what could fall between your look at the outcome and your registration? (docs/01-signal.md#polling) */
    struct signal_shared *s = future->shared;

    pthread_mutex_lock(&s->lock);
    switch (s->phase) {
    case PHASE_WAITING:
        /* Still holding the lock that complete() needs: the check above and
         * this registration are one step, as far as the producer can see.
         * Same task as last time: nothing happens. Another task (or none
         * yet): the stale reference is dropped, a clone stored. */
        waker_clone_from(&s->waker, cx->waker); /* +1 for the stored waker when it had to clone */
        pthread_mutex_unlock(&s->lock);
        return POLL_PENDING;
    case PHASE_COMPLETED:
        /* Move the value out: from now on the caller owns it. */
        *out = (struct signal_output){ .outcome = SIGNAL_VALUE, .value = s->value };
        s->value = NULL;
        s->phase = PHASE_CONSUMED;
        break;
    case PHASE_CLOSED:
        *out = (struct signal_output){ .outcome = SIGNAL_CLOSED, .value = NULL };
        s->phase = PHASE_CONSUMED;
        break;
    case PHASE_CONSUMED:
        /* Fused: a poll after Ready answers Ready again, with nothing. */
        *out = (struct signal_output){ .outcome = SIGNAL_CONSUMED, .value = NULL };
        break;
    }
    pthread_mutex_unlock(&s->lock);
    return POLL_READY;
    /* END STUDENT */
}

void signal_future_drop(struct signal_future *future)
{
    /* BEGIN STUDENT: contract 8: once the future is gone, who still needs its waker, and what must a later signal_complete answer? (docs/01-signal.md#dropping-the-future) */
    struct signal_shared *s = future->shared;

    pthread_mutex_lock(&s->lock);
    struct waker stale = waker_take(&s->waker); /* the stored reference, now ours */
    s->future_gone = true;
    s->refs--; /* -1: the future handle's reference */
    bool last = s->refs == 0;
    bool untaken = s->phase == PHASE_COMPLETED;
    void *value = s->value;
    pthread_mutex_unlock(&s->lock);
    /* From here on `s` may be freed by the producer's drop unless we were last. */

    waker_drop(&stale); /* -1: the task's reference goes back now, not when the producer leaves */
    if (last)
        shared_free(s, untaken, value);
    /* END STUDENT */
}

/* ---- the type-erased view -------------------------------------------------
 *
 * An executor does not know what a signal is; it knows struct future (a
 * vtable and a state pointer). These two adapters are the whole translation.
 * The state is the handle itself, and the handle is one pointer, so a runtime
 * may copy it into storage of its own before the first poll (future.h) and
 * poll or drop the copy instead. */

static enum poll signal_future_vt_poll(void *self, struct context *cx, void *out)
{
    return signal_future_poll(self, cx, out);
}

static void signal_future_vt_drop(void *self)
{
    signal_future_drop(self);
}

static const struct future_vtable signal_future_vtable =
    FUTURE_VTABLE_INIT(struct signal_future, sizeof(struct signal_output),
                       signal_future_vt_poll, signal_future_vt_drop);

struct future signal_future_as_future(struct signal_future *future)
{
    return future_of(&signal_future_vtable, future);
}
