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
    int todo_your_fields_here; /* TODO: contracts 1 to 10: what must the three handles find in one place, under one lock, to decide once, tell the loser who won, wake the latest poller and know which of them is the last to go? (docs/04-deadline-signal.md#the-shared-state) */

    /* The handles live inside the block they point at: one allocation. */
    struct deadline_signal producer;
    struct deadline_signal_timer timer;
    struct deadline_signal_future future;
};


int deadline_signal_new(void (*drop_value)(void *value), struct deadline_signal **producer,
                        struct deadline_signal_timer **timer,
                        struct deadline_signal_future **future)
{
    (void)drop_value;
    (void)producer;
    (void)timer;
    (void)future;
    LAB_TODO("contracts 1 and 10: one allocation holds the block and its three handles; what must a poll, a decider and a drop find in it before anyone has acted, and what if memory runs out? (docs/04-deadline-signal.md#creating)");
}

enum deadline_signal_status deadline_signal_complete(struct deadline_signal *producer, void *value)
{
    (void)producer;
    (void)value;
    LAB_TODO("contracts 4 and 5: the timer may be deciding at this very moment; what must this call look at and change in one hold so that exactly one of you wins, what does the loser learn, and where is the waker woken? (docs/04-deadline-signal.md#deciding)");
}

enum deadline_signal_status deadline_signal_expire(struct deadline_signal_timer *timer)
{
    (void)timer;
    LAB_TODO("contracts 4 and 5, from the timer's side: what does an expiry that comes second answer, and what does one that wins change? (docs/04-deadline-signal.md#deciding)");
}

void deadline_signal_drop(struct deadline_signal *producer)
{
    (void)producer;
    LAB_TODO("contracts 9 and 10: a producer that leaves without a value decides something; what, who must learn it, and who frees the state? (docs/04-deadline-signal.md#dropping-the-producer-and-the-timer)");
}

void deadline_signal_timer_drop(struct deadline_signal_timer *timer)
{
    (void)timer;
    LAB_TODO("contracts 9 and 10: what does a timer that leaves decide, and what does it still owe the others? (docs/04-deadline-signal.md#dropping-the-producer-and-the-timer)");
}

enum poll deadline_signal_future_poll(struct deadline_signal_future *future, struct context *cx,
                                      struct deadline_signal_output *out)
{
    (void)future;
    (void)cx;
    (void)out;
    LAB_TODO("contracts 1 to 3 and 7: what must be true when this returns Pending, what may a poll after delivery touch, and what could fall between your look and your registration? (docs/04-deadline-signal.md#polling)");
}

void deadline_signal_future_drop(struct deadline_signal_future *future)
{
    (void)future;
    LAB_TODO("contract 8: once the future is gone, who still needs its waker, and what must a later decider answer? (docs/04-deadline-signal.md#dropping-the-future)");
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
