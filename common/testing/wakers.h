/* wakers.h - wakers made for tests.
 *
 * counting waker  counts clone / wake / wake_by_ref / drop and the live
 *                 references, so a test can end with "the books balance":
 *                 every clone was dropped or consumed by a wake. A leaked
 *                 waker keeps a task alive; this is how a test sees it.
 *                 It can also run a hook inside any of the four operations
 *                 (the hook waker), which forces interleavings on purpose:
 *                 "inside the first clone, another thread completes the
 *                 signal" happens every run, not by luck.
 * notify waker    wakes a waiting test thread (a condition variable), with
 *                 no dependence on the student's parker.
 * noop waker      does nothing; only for tests where no wake can be needed.
 */
#ifndef LAB_TEST_WAKERS_H
#define LAB_TEST_WAKERS_H

#include <stdbool.h>
#include "../waker.h"

/* ---- counting waker (and hook waker) ------------------------------------ */

enum waker_event { WAKER_EV_CLONE, WAKER_EV_WAKE, WAKER_EV_WAKE_BY_REF, WAKER_EV_DROP };

struct counting_waker;

/* Runs inside the operation, on the thread that performed it, before the
 * operation returns. `nth` counts events of this kind, from 1. */
typedef void (*waker_hook_fn)(struct counting_waker *cw, enum waker_event ev, unsigned nth, void *arg);

struct waker_counts {
    unsigned clones, wakes, wake_by_refs, drops;
    long live; /* references alive, the test's own included */
};

/* A new counting waker with one live reference: the test's own. */
struct counting_waker *counting_waker_new(const char *label);
/* The test's own reference, to put in a context. Do not drop it: free does. */
struct waker counting_waker_get(struct counting_waker *cw);
void counting_waker_set_hook(struct counting_waker *cw, waker_hook_fn fn, void *arg);
struct waker_counts counting_waker_counts(struct counting_waker *cw);
/* wakes + wake_by_refs */
unsigned counting_waker_woken(struct counting_waker *cw);
/* Waits until woken at least `n` times, up to timeout_ms; true if it was. */
bool counting_waker_wait_woken(struct counting_waker *cw, unsigned n, unsigned timeout_ms);
/* Frees it. Every other reference must be gone (live == 1): the caller checks
 * that with counting_waker_counts() first, to fail with a clear message. */
void counting_waker_free(struct counting_waker *cw);
const char *counting_waker_label(struct counting_waker *cw);

/* ---- notify waker --------------------------------------------------------- */

struct notify_waker;
struct notify_waker *notify_waker_new(void);
struct waker notify_waker_get(struct notify_waker *nw); /* +1: a reference you own */
/* Waits for a wake not yet consumed, up to timeout_ms (0 = check only). */
bool notify_waker_wait(struct notify_waker *nw, unsigned timeout_ms);
void notify_waker_release(struct notify_waker *nw); /* -1: the creator's reference */

/* ---- noop waker ----------------------------------------------------------- */

struct waker noop_waker(void);

#endif
