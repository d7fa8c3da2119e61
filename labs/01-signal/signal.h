/* signal.h - stage 01: a one-shot Signal, written by hand.
 *
 * One value travels once from a producer to a future. The two handles share
 * one state protected by one mutex:
 *
 *      producer (struct signal)          future (struct signal_future)
 *      signal_complete(value) ---+   +--- signal_future_poll(cx) -> Ready / Pending
 *      signal_drop()             |   |    signal_future_drop()
 *                                v   v
 *                  shared state: value, completed, stored waker, ...
 *
 * The contract (docs/01-signal.md explains each clause and how it is graded):
 *  1. Pending only with a registered wake path: poll returns POLL_PENDING only
 *     after storing a waker for the polling task.
 *  2. The most recent waker is the one woken; a re-poll by the same task uses
 *     waker_clone_from() and does not clone again.
 *  3. Check and register under the same lock: a completion can never slip
 *     between poll's check and poll's registration.
 *  4. The waker is taken out under the lock and woken after unlocking.
 *  5. Completion is terminal: a second signal_complete() is refused
 *     (SIGNAL_ALREADY_COMPLETE) and the caller keeps its value.
 *  6. Completion before the first poll: that poll is Ready and clones no waker.
 *  7. Poll after Ready returns Ready again with SIGNAL_CONSUMED and no value,
 *     touching no waker: never the value twice, never freed memory.
 *  8. Dropping the future while pending releases its stored waker at once; a
 *     later signal_complete() of a signal nobody completed reports
 *     SIGNAL_NO_LISTENER and the caller keeps its value (a completed one
 *     still reports SIGNAL_ALREADY_COMPLETE: clause 5 comes first).
 *  9. Dropping the producer without completing wakes the future, which then
 *     resolves with SIGNAL_CLOSED: no task hangs on a producer that is gone.
 * 10. Each handle is released only by its own drop function (completing does
 *     not free the producer); the shared state is freed exactly when both
 *     handles are gone, and a value nobody took is passed to drop_value.
 *
 * Threads: the producer and the future may be used from different threads;
 * each handle is used by one thread at a time.
 */
#ifndef LAB_SIGNAL_H
#define LAB_SIGNAL_H

#include "future.h"

struct signal;        /* the producer handle */
struct signal_future; /* the future handle */

enum signal_status {
    SIGNAL_OK = 0,           /* stored; the waiting task (if any) was woken */
    SIGNAL_ALREADY_COMPLETE, /* refused: completed before; the caller keeps value */
    SIGNAL_NO_LISTENER,      /* refused: the future is gone; the caller keeps value */
};

enum signal_outcome {
    SIGNAL_VALUE,    /* the producer's value, now owned by the caller */
    SIGNAL_CLOSED,   /* the producer was dropped without completing */
    SIGNAL_CONSUMED, /* polled after Ready: the outcome was already delivered */
};

/* What signal_future_poll writes on POLL_READY. */
struct signal_output {
    enum signal_outcome outcome;
    void *value; /* set only with SIGNAL_VALUE; NULL otherwise */
};

/* Makes a signal. drop_value (may be NULL) is called on a stored value that
 * nobody took, when the shared state is freed. Returns 0, or -1 when out of
 * memory (nothing is allocated then). Both handles start alive. */
int signal_new(void (*drop_value)(void *value), struct signal **producer,
               struct signal_future **future);

/* Completes the signal with `value` (ownership moves to the signal on
 * SIGNAL_OK only). Wakes the most recently registered waker, outside the
 * lock. Does not free the producer handle. */
enum signal_status signal_complete(struct signal *producer, void *value);

/* Releases the producer handle. Without a completion, the future resolves
 * as SIGNAL_CLOSED, and its stored waker (if any) is woken. */
void signal_drop(struct signal *producer);

/* Polls the future; on POLL_READY fills *out. See the contract above. */
enum poll signal_future_poll(struct signal_future *future, struct context *cx,
                             struct signal_output *out);

/* Releases the future handle, and its stored waker at once. An untaken value
 * is dropped when the state is freed. */
void signal_future_drop(struct signal_future *future);

/* The future as a type-erased struct future (output: struct signal_output).
 * The returned value borrows the handle; future_drop() on it calls
 * signal_future_drop(). The state a runtime may copy before the first poll
 * (future.h) is the handle itself, so signal_future_drop() must release the
 * shared state without ever freeing the handle's own storage as a separate
 * block: keep the handles inside the shared allocation, or make them plain
 * pointers to it. */
struct future signal_future_as_future(struct signal_future *future);

#endif
