/* deadline_signal.h - stage 04: a one-shot signal raced by a deadline.
 *
 * Stage 01's Signal had one side that could decide its outcome. A
 * DeadlineSignal has two, and they race: a producer that may complete it
 * with a value, and a timer that may declare it expired. Exactly one of them
 * wins; the other is told it lost, and to whom. Three handles share one state
 * behind one mutex:
 *
 *   producer (struct deadline_signal)        future (struct deadline_signal_future)
 *   deadline_signal_complete(value) --+  +-- deadline_signal_future_poll(cx)
 *   deadline_signal_drop()            |  |   deadline_signal_future_drop()
 *                                     v  v
 *              shared state: WAITING / COMPLETED / EXPIRED / CONSUMED,
 *                            value, stored waker, ...
 *                                     ^
 *   timer (struct deadline_signal_timer) |
 *   deadline_signal_expire() ------------+
 *   deadline_signal_timer_drop()
 *
 * The "timer" is whoever calls deadline_signal_expire(): in this stage the
 * tests call it from threads of their own; stage 05's timer wheel calls it
 * when a deadline passes.
 *
 * The contract (docs/04-deadline-signal.md explains each clause and how it
 * is graded):
 *  1. Pending only with a registered wake path: poll returns POLL_PENDING
 *     only after storing a waker for the polling task. When the outcome was
 *     decided before a poll, that poll is Ready and clones no waker.
 *  2. The most recent waker is the one woken, exactly once; a replaced waker
 *     is dropped at once, and a re-poll by the same task uses
 *     waker_clone_from() and does not clone again.
 *  3. Check and register under one lock hold: no decision can fall between
 *     poll's check of the state and its registration of the waker.
 *  4. Exactly one outcome wins. Of deadline_signal_complete() and
 *     deadline_signal_expire(), the first to take the lock while the state is
 *     WAITING returns DEADLINE_SIGNAL_WON and decides the outcome; every
 *     later call loses and is told who won (DEADLINE_SIGNAL_LOST_TO_VALUE or
 *     DEADLINE_SIGNAL_LOST_TO_EXPIRY), wakes nobody and changes nothing. A
 *     losing producer keeps its value.
 *  5. The winner takes the stored waker out under the lock and wakes it after
 *     unlocking.
 *  6. The decision is final, also after it has been delivered: a complete or
 *     expire after Ready is told who won, and the state stays CONSUMED.
 *  7. Poll after Ready returns Ready again with DEADLINE_SIGNAL_CONSUMED and
 *     no value, touching no waker.
 *  8. Dropping the future cancels: its stored waker is released at once, and
 *     a later complete or expire (that nothing decided before) returns
 *     DEADLINE_SIGNAL_NO_LISTENER; the producer keeps its value.
 *  9. Dropping the producer without completing expires the signal at once (no
 *     value can come any more) and wakes the stored waker, after unlocking.
 *     Dropping the timer without expiring decides nothing: the deadline is
 *     cancelled and the producer may still complete.
 * 10. Each handle is released only by its own drop function (completing or
 *     expiring frees no handle); the shared state is freed exactly when all
 *     three handles are gone, and a value nobody took is passed to
 *     drop_value then.
 *
 * Threads: the producer, the timer and the future may each be used from a
 * different thread; each handle is used by one thread at a time.
 */
#ifndef LAB_DEADLINE_SIGNAL_H
#define LAB_DEADLINE_SIGNAL_H

#include <stddef.h>
#include "future.h"

struct deadline_signal;        /* the producer handle: may complete */
struct deadline_signal_timer;  /* the timer handle: may expire */
struct deadline_signal_future; /* the future handle: may poll */

/* What deadline_signal_complete() and deadline_signal_expire() answer. */
enum deadline_signal_status {
    DEADLINE_SIGNAL_WON = 0,         /* this call decided the outcome; the waiting task (if any) was woken */
    DEADLINE_SIGNAL_LOST_TO_VALUE,   /* refused: a completion decided it first */
    DEADLINE_SIGNAL_LOST_TO_EXPIRY,  /* refused: an expiry (or the producer's drop) decided it first */
    DEADLINE_SIGNAL_NO_LISTENER,     /* refused: the future is gone and nothing was decided */
};

/* What a Ready poll delivers. */
enum deadline_signal_outcome {
    DEADLINE_SIGNAL_VALUE,    /* the producer won: value is the producer's, now the caller's */
    DEADLINE_SIGNAL_EXPIRED,  /* the timer won (or the producer left without a value) */
    DEADLINE_SIGNAL_CONSUMED, /* polled after Ready: the outcome was already delivered */
};

/* What deadline_signal_future_poll writes on POLL_READY. */
struct deadline_signal_output {
    enum deadline_signal_outcome outcome;
    void *value; /* set only with DEADLINE_SIGNAL_VALUE; NULL otherwise */
};

/* Makes a deadline signal and its three handles. drop_value (may be NULL) is
 * called on a stored value that nobody took, when the shared state is freed.
 * Returns 0, or -1 when out of memory (nothing is allocated then). */
int deadline_signal_new(void (*drop_value)(void *value), struct deadline_signal **producer,
                        struct deadline_signal_timer **timer,
                        struct deadline_signal_future **future);

/* The producer's move: completes with `value` if nothing was decided yet
 * (ownership of value moves to the signal on DEADLINE_SIGNAL_WON only).
 * Does not free the producer handle. */
enum deadline_signal_status deadline_signal_complete(struct deadline_signal *producer, void *value);

/* The timer's move: expires the signal if nothing was decided yet. Does not
 * free the timer handle. */
enum deadline_signal_status deadline_signal_expire(struct deadline_signal_timer *timer);

/* Releases the producer handle. Without a decision, the signal expires and
 * the stored waker (if any) is woken (contract 9). */
void deadline_signal_drop(struct deadline_signal *producer);

/* Releases the timer handle. Decides nothing (contract 9). */
void deadline_signal_timer_drop(struct deadline_signal_timer *timer);

/* Polls the future; on POLL_READY fills *out. See the contract above. */
enum poll deadline_signal_future_poll(struct deadline_signal_future *future, struct context *cx,
                                      struct deadline_signal_output *out);

/* Releases the future handle, and its stored waker at once (contract 8). */
void deadline_signal_future_drop(struct deadline_signal_future *future);

/* The future as a type-erased struct future (output: struct
 * deadline_signal_output). The returned value borrows the handle;
 * future_drop() on it calls deadline_signal_future_drop(). As in stage 01,
 * a runtime may copy the handle before the first poll (future.h): keep the
 * handles inside the shared allocation, or make them plain pointers to it. */
struct future deadline_signal_future_as_future(struct deadline_signal_future *future);

/* ---- test hooks ---- */

/* Sizes and alignments of the hand-written state machine, for the layout
 * observation of docs/04-deadline-signal.md#what-a-state-machine-weighs.
 * They describe this compiler and this ABI, not a promise: nothing is graded
 * on the numbers. */
struct deadline_signal_test_layout {
    size_t shared_size, shared_align;   /* the shared state (all of it) */
    size_t future_size, future_align;   /* the future handle */
    size_t producer_size, timer_size;   /* the other two handles */
};
struct deadline_signal_test_layout deadline_signal_test_layout(void);

#endif
