/* waker.c - the one waker helper that is not inline. See waker.h for ownership. */
#include "waker.h"

bool waker_clone_from(struct waker *stored, const struct waker *current)
{
    if (waker_will_wake(stored, current))
        return false;
    waker_drop(stored);                 /* -1: the stale task's reference */
    *stored = waker_clone(current);     /* +1: the current task's reference */
    return true;
}
