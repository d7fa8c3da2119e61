/* futures.h - futures made for tests.
 *
 * thread_sleep      finishes N ms after its first poll. A helper thread of
 *                   its own waits out the time, marks it done and wakes the
 *                   most recently registered waker, outside its lock: the
 *                   smallest honest source of wakes from another thread.
 *                   Waiting on it well costs no CPU (docs/02-block-on.md).
 * spin_future       the counter-example. It never registers a waker: on
 *                   every poll it checks a flag that another thread sets,
 *                   and if the flag is not set it wakes itself by reference
 *                   and returns Pending, so whoever polls it polls again at
 *                   once. Correct output, a core burnt while it waits.
 * forgetful_future  the hang. Pending on every poll, and nothing will ever
 *                   wake it: a correct block_on parks on it forever.
 * yield_future      Pending n times, waking itself by reference each time,
 *                   then Ready: exactly n + 1 polls under a correct poller.
 * early_wake_future Pending n times; each time, before it returns, a thread
 *                   of its own has already woken a clone of the waker and
 *                   been joined. The wake lands before the poller could
 *                   park or requeue: a poller that loses it hangs.
 *
 * Each is a plain struct: declare one, initialize it, and view it as a
 * struct future with its *_as_future() function. None has an output
 * (output_size 0). Like every future (future.h), the state may be copied
 * before its first poll and never after; future_drop() releases what it owns
 * (thread_sleep joins its helper thread there), and the storage itself stays
 * the caller's. A future that was never dropped leaks what it owns.
 */
#ifndef LAB_TEST_FUTURES_H
#define LAB_TEST_FUTURES_H

#include <stdatomic.h>
#include <stdbool.h>
#include "../future.h"

/* ---- thread_sleep --------------------------------------------------------- */

struct thread_sleep_shared; /* the state the helper thread shares with the future */

struct thread_sleep {
    unsigned ms;                        /* how long after the first poll it finishes */
    struct thread_sleep_shared *shared; /* NULL until the first poll */
};

void thread_sleep_init(struct thread_sleep *s, unsigned ms);
/* The future view. future_drop() on it cancels the helper if it is still
 * waiting, joins it, and drops the stored waker. */
struct future thread_sleep_as_future(struct thread_sleep *s);

/* ---- spin_future ---------------------------------------------------------- */

struct spin_future {
    const atomic_bool *flag; /* borrowed: set (release) by another thread */
};

void spin_future_init(struct spin_future *s, const atomic_bool *flag);
struct future spin_future_as_future(struct spin_future *s);

/* ---- forgetful_future ----------------------------------------------------- */

struct forgetful_future {
    atomic_ulong polls; /* read it with forgetful_future_polls(), from any thread */
};

void forgetful_future_init(struct forgetful_future *f);
struct future forgetful_future_as_future(struct forgetful_future *f);
unsigned long forgetful_future_polls(struct forgetful_future *f);

/* ---- yield_future --------------------------------------------------------- */

struct yield_future {
    unsigned left; /* Pending answers still to give */
};

void yield_future_init(struct yield_future *y, unsigned n);
struct future yield_future_as_future(struct yield_future *y);

/* ---- early_wake_future ---------------------------------------------------- */

struct early_wake_future {
    unsigned left; /* Pending answers still to give */
};

void early_wake_future_init(struct early_wake_future *e, unsigned n);
struct future early_wake_future_as_future(struct early_wake_future *e);

#endif
