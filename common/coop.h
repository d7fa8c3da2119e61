/* coop.h - the cooperative budget: a thread-local count of how much work the
 * task being polled may still do before it must give the thread back.
 *
 * A scheduler calls coop_reset() before each poll of a task. The runtime's own
 * leaf futures that can stay ready for ever (stage 06's TCP accept, read and
 * write; stage 07's channel send and receive and mutex lock; not sleep, not
 * yield_now) call coop_proceed() first: while budget remains it takes one
 * unit and says go on;
 * at zero it wakes the task (so it will be polled again) and says stop, and
 * the leaf returns POLL_PENDING before doing anything. Checking before the side
 * effect matters: a leaf that consumed a message and then returned Pending
 * would lose it. Outside a scheduler the budget is unlimited; stage 03's
 * executor resets it to COOP_BUDGET_DEFAULT before each poll, so from stage 06
 * on a task that reads a socket 128 times in one poll is told to yield.
 */
#ifndef LAB_COOP_H
#define LAB_COOP_H

#include <stdbool.h>
#include "trace.h"
#include "waker.h"

#include <limits.h>

#define COOP_BUDGET_DEFAULT 128u

/* This thread's budget; UINT_MAX means unlimited. Owned by this thread
 * alone: no atomics. Use the functions below, not the variable. Inline,
 * since a scheduler resets it before every poll. */
extern _Thread_local unsigned coop_budget_;

/* Sets this thread's budget (a scheduler does this before polling a task). */
static inline void coop_reset(unsigned units) { coop_budget_ = units; }
/* Unlimited budget on this thread (the state outside any scheduler). */
static inline void coop_unlimit(void) { coop_budget_ = UINT_MAX; }
/* Units left; UINT_MAX means unlimited. */
static inline unsigned coop_remaining(void) { return coop_budget_; }

/* Takes one unit. At zero: wakes cx's waker by reference, returns false. */
static inline bool coop_proceed(struct context *cx)
{
    if (coop_budget_ == UINT_MAX)
        return true;
    if (coop_budget_ == 0) {
        trace_budget_exhausted(); /* empty unless built with -DLAB_TRACE (trace.h) */
        waker_wake_by_ref(cx->waker); /* poll me again, after the others */
        return false;
    }
    coop_budget_--;
    return true;
}

/* The escape hatch: run a block with an unlimited budget, restoring the old
 * budget afterwards. Documented as an escape hatch, not a tool for speed. */
unsigned coop_unconstrained_begin(void);
void coop_unconstrained_end(unsigned saved);

#endif
