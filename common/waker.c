/* waker.c - the helpers over the waker vtable. See waker.h for ownership. */
#include "waker.h"

struct waker waker_clone(const struct waker *w)
{
    if (waker_is_none(w))
        return WAKER_NONE;
    return w->vtable->clone(w->data); /* +1: the caller's new reference */
}

void waker_wake(struct waker *w)
{
    struct waker mine = waker_take(w);
    if (!waker_is_none(&mine))
        mine.vtable->wake(mine.data); /* consumes our reference */
}

void waker_wake_by_ref(const struct waker *w)
{
    if (!waker_is_none(w))
        w->vtable->wake_by_ref(w->data);
}

void waker_drop(struct waker *w)
{
    struct waker mine = waker_take(w);
    if (!waker_is_none(&mine))
        mine.vtable->drop(mine.data); /* -1: our reference */
}

struct waker waker_take(struct waker *w)
{
    struct waker out = *w;
    *w = WAKER_NONE;
    return out;
}

bool waker_will_wake(const struct waker *a, const struct waker *b)
{
    return !waker_is_none(a) && a->data == b->data && a->vtable == b->vtable;
}

bool waker_clone_from(struct waker *stored, const struct waker *current)
{
    if (waker_will_wake(stored, current))
        return false;
    waker_drop(stored);                 /* -1: the stale task's reference */
    *stored = waker_clone(current);     /* +1: the current task's reference */
    return true;
}
