/* waker.h - the wake half of the poll/wake protocol.
 *
 * A waker is a handle that says "poll this task again". It is two words: an
 * opaque data pointer and a table of four functions that decide what the data
 * means (a task, a parked thread, a test probe). This is the C shape of Rust's
 * RawWaker; docs/01-signal.md walks through it.
 *
 * Ownership, the one rule everything else follows from:
 *   - every `struct waker` value you hold is one reference;
 *   - waker_clone() makes a second reference (+1);
 *   - waker_drop() gives yours back (-1);
 *   - waker_wake() wakes and gives yours back (consumes it: +0 afterwards);
 *   - waker_wake_by_ref() wakes and keeps yours.
 * A `const struct waker *` (what a context carries) is a borrow: you may wake
 * through it or clone it, never drop it.
 */
#ifndef LAB_WAKER_H
#define LAB_WAKER_H

#include <stdbool.h>
#include <stddef.h>

struct waker;

/* quote: waker */
struct waker_vtable {
    struct waker (*clone)(const void *data);  /* +1: a new reference to the same task */
    void (*wake)(const void *data);           /* wake, then release this reference (-1) */
    void (*wake_by_ref)(const void *data);    /* wake; the caller keeps its reference */
    void (*drop)(const void *data);           /* -1: release this reference */
};

struct waker {
    const void *data;
    const struct waker_vtable *vtable;
};
/* end quote: waker */

/* What poll receives: the waker of the task doing the polling, borrowed. */
struct context {
    const struct waker *waker;
};

/* The empty waker: holds nothing, is never woken. Use it to mean "no waker
 * stored" in a struct field; waker_is_none() tells it apart. */
#define WAKER_NONE ((struct waker){ .data = NULL, .vtable = NULL })

static inline bool waker_is_none(const struct waker *w) { return w->vtable == NULL; }

static inline struct context context_from_waker(const struct waker *w)
{
    return (struct context){ .waker = w };
}

/* The helpers below are inline: they sit on every runtime's hottest path
 * (each wake and each registration), and a call into another file per wake
 * is measurable there (bench/README.md). */

/* Moves the reference out of *w, leaving WAKER_NONE behind (Option::take). */
static inline struct waker waker_take(struct waker *w)
{
    struct waker out = *w;
    *w = WAKER_NONE;
    return out;
}

/* +1: returns a new reference the caller owns. */
static inline struct waker waker_clone(const struct waker *w)
{
    if (waker_is_none(w))
        return WAKER_NONE;
    return w->vtable->clone(w->data); /* +1: the caller's new reference */
}

/* Wakes and consumes *w; *w becomes WAKER_NONE. A none waker is ignored. */
static inline void waker_wake(struct waker *w)
{
    struct waker mine = waker_take(w);
    if (!waker_is_none(&mine))
        mine.vtable->wake(mine.data); /* consumes our reference */
}

/* Wakes; *w stays owned by the caller. A none waker is ignored. */
static inline void waker_wake_by_ref(const struct waker *w)
{
    if (!waker_is_none(w))
        w->vtable->wake_by_ref(w->data);
}

/* -1: releases *w; *w becomes WAKER_NONE. A none waker is ignored. */
static inline void waker_drop(struct waker *w)
{
    struct waker mine = waker_take(w);
    if (!waker_is_none(&mine))
        mine.vtable->drop(mine.data); /* -1: our reference */
}

/* True when a and b are certain to wake the same task (same data and same
 * vtable). A hint for skipping work, never a correctness test: false does not
 * prove two different tasks. */
static inline bool waker_will_wake(const struct waker *a, const struct waker *b)
{
    return !waker_is_none(a) && a->data == b->data && a->vtable == b->vtable;
}

/* Makes *stored wake the task `current` wakes. When *stored already
 * will_wake() the same task nothing happens (no clone, no drop); otherwise the
 * old reference is dropped and a clone of `current` is stored. *stored may be
 * WAKER_NONE. Returns true when it had to clone. */
bool waker_clone_from(struct waker *stored, const struct waker *current);

#endif
