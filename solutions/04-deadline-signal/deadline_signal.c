/* deadline_signal.c - stage 04: a one-shot signal raced by a deadline.
 *
 * Read docs/04-deadline-signal.md first; deadline_signal.h has the contract,
 * numbered. This is stage 01's Signal with a second party that may decide
 * the outcome: a producer completes, a timer expires, and the two race.
 * Exactly one of them wins (clause 4). What stage 01 taught you (the latest
 * waker, check and register in one lock hold, wake after unlocking, drop as
 * cancellation) still holds; the question at every step is what the second
 * decider changes.
 *
 * Layout: ONE allocation per deadline signal, the handles inside it.
 *
 *   +------------------------ struct deadline_signal_shared -----------------+
 *   | the lock, and the fields you derive from the contract                 |
 *   | (docs/04-deadline-signal.md#the-shared-state)                          |
 *   | struct deadline_signal        producer { shared -> this block }       |
 *   | struct deadline_signal_timer  timer    { shared -> this block }       |
 *   | struct deadline_signal_future future   { shared -> this block }       |
 *   +-------------------------------------------------------------------------+
 *
 * Clause 10: each handle is released only by its own drop function. Which
 * drop frees the block, and how does it know?
 *
 * Locking: one pthread mutex. Before you write a function, answer for it:
 *   - clause 3: can a decision fall between poll's look at the state and
 *     its registration of the waker?
 *   - clause 4: complete and expire may run at the same instant, on two
 *     threads. What makes exactly one of them find the outcome undecided?
 *   - clause 5: a wake may run the executor's code, which may poll this
 *     future on the spot. Which locks may the waking thread hold then?
 */
#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdlib.h>

#include "lab_todo.h"
#include "deadline_signal.h"

/* The exercise starts with the state enum. Declare it here, with
 * exactly four states: WAITING, COMPLETED, EXPIRED and CONSUMED
 * (docs/04-deadline-signal.md#the-state-machine draws who may move it where). */
/* BEGIN STUDENT HIDDEN */
/* Where the signal is in its life (docs/04-deadline-signal.md draws it):
 *
 *   WAITING --complete (producer)-------------> COMPLETED --poll--> CONSUMED
 *      |                                                               ^
 *      +--expire (timer), or producer dropped--> EXPIRED ----poll------+
 *
 * Only WAITING may be left by complete or expire, and only once: that one
 * test, made under the lock, is the whole race between the two. */
enum ds_state {
    DS_WAITING,   /* nothing decided; `waker` may hold the latest poller's waker */
    DS_COMPLETED, /* the producer won; its value is stored here, not delivered yet */
    DS_EXPIRED,   /* the timer won (or the producer left); not delivered yet */
    DS_CONSUMED,  /* a poll returned Ready: the outcome has been delivered */
};
/* END STUDENT */

struct deadline_signal_shared;

/* The three handles: nothing but the way to the shared state. Their rights
 * differ (only the producer completes, only the timer expires, only the
 * future polls); their shape does not. */
struct deadline_signal {
    struct deadline_signal_shared *shared;
};

struct deadline_signal_timer {
    struct deadline_signal_shared *shared;
};

struct deadline_signal_future {
    struct deadline_signal_shared *shared;
};

/* What the three handles point at. */
struct deadline_signal_shared {
    /* BEGIN STUDENT FIELDS: contracts 1 to 10: what must the three handles find in one place, under one lock, to decide once, tell the loser who won, wake the latest poller and know which of them is the last to go? (docs/04-deadline-signal.md#the-shared-state) */
    /* Set once by deadline_signal_new and never changed: read without the lock. */
    void (*drop_value)(void *value);

    /* `lock` protects every field after it. Every handle takes it for every
     * read and write. */
    pthread_mutex_t lock;
    enum ds_state state;
    enum ds_state winner; /* DS_WAITING until decided, then DS_COMPLETED or
                           * DS_EXPIRED for good: a loser that comes after
                           * CONSUMED is still told who won (clause 6) */
    void *value;          /* owned by this state while state == DS_COMPLETED */
    struct waker waker;   /* one reference to the latest poller, or WAKER_NONE;
                           * only ever non-empty while state == DS_WAITING */
    bool future_gone;     /* deadline_signal_future_drop() ran: nobody will poll */
    unsigned refs;        /* handles alive, 3 -> 0; each handle owns one */
    /* END STUDENT */

    /* The handles live inside the block they point at: one allocation. */
    struct deadline_signal producer;
    struct deadline_signal_timer timer;
    struct deadline_signal_future future;
};

/* BEGIN STUDENT HIDDEN */
/* Frees the state. Only the drop that brought refs to zero calls this, after
 * unlocking: nobody else can reach `s` any more. */
static void shared_free(struct deadline_signal_shared *s, bool untaken, void *value)
{
    if (untaken && s->drop_value)
        s->drop_value(value); /* the value nobody took: this state owned it */
    pthread_mutex_destroy(&s->lock);
    free(s); /* the handles go with it: they live inside */
}

/* What a loser is told: who won. Call with the lock held, after the state
 * has left WAITING. */
static enum deadline_signal_status lost_to(const struct deadline_signal_shared *s)
{
    return s->winner == DS_COMPLETED ? DEADLINE_SIGNAL_LOST_TO_VALUE : DEADLINE_SIGNAL_LOST_TO_EXPIRY;
}

/* Gives back one handle's reference; the last one frees the state. `taken`
 * is a waker the caller moved out of the state under the lock (or
 * WAKER_NONE): after unlocking it is woken when wake_it, dropped otherwise.
 * Called with the lock held; returns with it released. */
static void release_locked(struct deadline_signal_shared *s, struct waker taken, bool wake_it)
{
    s->refs--; /* -1: the calling handle's reference */
    bool last = s->refs == 0;
    bool untaken = s->state == DS_COMPLETED;
    void *value = s->value;
    pthread_mutex_unlock(&s->lock);
    /* From here on `s` may be freed by another handle's drop, unless we were last. */

    if (wake_it)
        waker_wake(&taken); /* -1: consumes the stored reference (none: ignored) */
    else
        waker_drop(&taken); /* -1: same, without waking */
    if (last)
        shared_free(s, untaken, value);
}
/* END STUDENT */

int deadline_signal_new(void (*drop_value)(void *value), struct deadline_signal **producer,
                        struct deadline_signal_timer **timer,
                        struct deadline_signal_future **future)
{
    /* BEGIN STUDENT: contracts 1 and 10: one allocation holds the block and its three handles; what must a poll, a decider and a drop find in it before anyone has acted, and what if memory runs out? (docs/04-deadline-signal.md#creating) */
    struct deadline_signal_shared *s = malloc(sizeof *s);
    if (!s)
        return -1;
    if (pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s);
        return -1;
    }
    s->drop_value = drop_value;
    s->state = DS_WAITING;
    s->winner = DS_WAITING;
    s->value = NULL;
    s->waker = WAKER_NONE;
    s->future_gone = false;
    s->refs = 3; /* +3: one reference each for the producer, the timer and the future */
    s->producer.shared = s;
    s->timer.shared = s;
    s->future.shared = s;
    *producer = &s->producer;
    *timer = &s->timer;
    *future = &s->future;
    return 0;
    /* END STUDENT */
}

enum deadline_signal_status deadline_signal_complete(struct deadline_signal *producer, void *value)
{
    /* BEGIN STUDENT: contracts 4 and 5: the timer may be deciding at this very moment; what must this call look at and change in one hold so that exactly one of you wins, what does the loser learn, and where is the waker woken? (docs/04-deadline-signal.md#deciding) */
    struct deadline_signal_shared *s = producer->shared;

    pthread_mutex_lock(&s->lock);
    if (s->state != DS_WAITING) {
        /* Decided before, maybe delivered already: we lost, and the value
         * stays with the caller. */
        enum deadline_signal_status lost = lost_to(s);
        pthread_mutex_unlock(&s->lock);
        return lost;
    }
    if (s->future_gone) {
        pthread_mutex_unlock(&s->lock);
        return DEADLINE_SIGNAL_NO_LISTENER; /* nobody can take it: the caller keeps it */
    }
    s->value = value; /* the state owns the value from here on */
    s->state = DS_COMPLETED;
    s->winner = DS_COMPLETED;
    struct waker to_wake = waker_take(&s->waker); /* the stored reference, now ours */
    pthread_mutex_unlock(&s->lock);

    waker_wake(&to_wake); /* -1: consumes it; none (nobody polled yet) is ignored */
    return DEADLINE_SIGNAL_WON;
    /* END STUDENT */
}

enum deadline_signal_status deadline_signal_expire(struct deadline_signal_timer *timer)
{
    /* BEGIN STUDENT: contracts 4 and 5, from the timer's side: what does an expiry that comes second answer, and what does one that wins change? (docs/04-deadline-signal.md#deciding) */
    struct deadline_signal_shared *s = timer->shared;

    pthread_mutex_lock(&s->lock);
    if (s->state != DS_WAITING) {
        enum deadline_signal_status lost = lost_to(s);
        pthread_mutex_unlock(&s->lock);
        return lost;
    }
    if (s->future_gone) {
        pthread_mutex_unlock(&s->lock);
        return DEADLINE_SIGNAL_NO_LISTENER;
    }
    s->state = DS_EXPIRED;
    s->winner = DS_EXPIRED;
    struct waker to_wake = waker_take(&s->waker); /* the stored reference, now ours */
    pthread_mutex_unlock(&s->lock);

    waker_wake(&to_wake); /* -1 */
    return DEADLINE_SIGNAL_WON;
    /* END STUDENT */
}

void deadline_signal_drop(struct deadline_signal *producer)
{
    /* BEGIN STUDENT: contracts 9 and 10: a producer that leaves without a value decides something; what, who must learn it, and who frees the state? (docs/04-deadline-signal.md#dropping-the-producer-and-the-timer) */
    struct deadline_signal_shared *s = producer->shared;
    struct waker to_wake = WAKER_NONE;

    pthread_mutex_lock(&s->lock);
    if (s->state == DS_WAITING) {
        /* The producer leaves without a value: the only outcome still
         * possible is expiry, so it happens now rather than at the deadline. */
        s->state = DS_EXPIRED;
        s->winner = DS_EXPIRED;
        to_wake = waker_take(&s->waker);
    }
    release_locked(s, to_wake, true); /* unlocks; wakes; maybe frees */
    /* END STUDENT */
}

void deadline_signal_timer_drop(struct deadline_signal_timer *timer)
{
    /* BEGIN STUDENT: contracts 9 and 10: what does a timer that leaves decide, and what does it still owe the others? (docs/04-deadline-signal.md#dropping-the-producer-and-the-timer) */
    struct deadline_signal_shared *s = timer->shared;

    pthread_mutex_lock(&s->lock);
    /* A cancelled deadline: the producer may still complete. */
    release_locked(s, WAKER_NONE, false); /* unlocks; maybe frees */
    /* END STUDENT */
}

enum poll deadline_signal_future_poll(struct deadline_signal_future *future, struct context *cx,
                                      struct deadline_signal_output *out)
{
    /* BEGIN STUDENT: contracts 1 to 3 and 7: what must be true when this returns Pending, what may a poll after delivery touch, and what could fall between your look and your registration? (docs/04-deadline-signal.md#polling) */
    struct deadline_signal_shared *s = future->shared;

    pthread_mutex_lock(&s->lock);
    switch (s->state) {
    case DS_WAITING:
        /* Still holding the lock both deciders need: the check above and this
         * registration are one step as far as they can see. */
        waker_clone_from(&s->waker, cx->waker); /* +1 for the stored waker when it had to clone */
        pthread_mutex_unlock(&s->lock);
        return POLL_PENDING;
    case DS_COMPLETED:
        /* Move the value out: from now on the caller owns it. */
        *out = (struct deadline_signal_output){ .outcome = DEADLINE_SIGNAL_VALUE, .value = s->value };
        s->value = NULL;
        s->state = DS_CONSUMED;
        break;
    case DS_EXPIRED:
        *out = (struct deadline_signal_output){ .outcome = DEADLINE_SIGNAL_EXPIRED, .value = NULL };
        s->state = DS_CONSUMED;
        break;
    case DS_CONSUMED:
        /* Fused: after Ready, Ready again with nothing; no waker touched. */
        *out = (struct deadline_signal_output){ .outcome = DEADLINE_SIGNAL_CONSUMED, .value = NULL };
        break;
    }
    pthread_mutex_unlock(&s->lock);
    return POLL_READY;
    /* END STUDENT */
}

void deadline_signal_future_drop(struct deadline_signal_future *future)
{
    /* BEGIN STUDENT: contract 8: once the future is gone, who still needs its waker, and what must a later decider answer? (docs/04-deadline-signal.md#dropping-the-future) */
    struct deadline_signal_shared *s = future->shared;

    pthread_mutex_lock(&s->lock);
    struct waker stale = waker_take(&s->waker); /* the stored reference, now ours */
    s->future_gone = true;
    release_locked(s, stale, false); /* unlocks; drops the stale waker at once; maybe frees */
    /* END STUDENT */
}

/* ---- the type-erased view -------------------------------------------------
 * The same two adapters as stage 01: the state is the handle itself (one
 * pointer), so a runtime may copy it before the first poll. */

static enum poll deadline_signal_future_vt_poll(void *self, struct context *cx, void *out)
{
    return deadline_signal_future_poll(self, cx, out);
}

static void deadline_signal_future_vt_drop(void *self)
{
    deadline_signal_future_drop(self);
}

static const struct future_vtable deadline_signal_future_vtable =
    FUTURE_VTABLE_INIT(struct deadline_signal_future, sizeof(struct deadline_signal_output),
                       deadline_signal_future_vt_poll, deadline_signal_future_vt_drop);

struct future deadline_signal_future_as_future(struct deadline_signal_future *future)
{
    return future_of(&deadline_signal_future_vtable, future);
}

/* ---- test hooks ---- */

struct deadline_signal_test_layout deadline_signal_test_layout(void)
{
    return (struct deadline_signal_test_layout){
        .shared_size = sizeof(struct deadline_signal_shared),
        .shared_align = alignof(struct deadline_signal_shared),
        .future_size = sizeof(struct deadline_signal_future),
        .future_align = alignof(struct deadline_signal_future),
        .producer_size = sizeof(struct deadline_signal),
        .timer_size = sizeof(struct deadline_signal_timer),
    };
}
