/* coop.c - the thread-local cooperative budget. */
#include <limits.h>
#include "coop.h"

/* Owned by this thread alone: no atomics needed. */
static _Thread_local unsigned budget = UINT_MAX;

void coop_reset(unsigned units) { budget = units; }
void coop_unlimit(void) { budget = UINT_MAX; }
unsigned coop_remaining(void) { return budget; }

bool coop_proceed(struct context *cx)
{
    if (budget == UINT_MAX)
        return true;
    if (budget == 0) {
        waker_wake_by_ref(cx->waker); /* poll me again, after the others */
        return false;
    }
    budget--;
    return true;
}

unsigned coop_unconstrained_begin(void)
{
    unsigned saved = budget;
    budget = UINT_MAX;
    return saved;
}

void coop_unconstrained_end(unsigned saved) { budget = saved; }
