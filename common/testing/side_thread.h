/* side_thread.h - a thread a waker hook starts to learn whether the code
 * under test lets another thread through at that moment (stages 01 and 04:
 * a poll made from inside the wake, a completion made from inside the first
 * poll's clone).
 *
 * side_thread_start runs act(arg) on a thread of its own, waits until that
 * thread runs (up to 5 s, so a slow scheduler on a loaded machine is not
 * mistaken for a held lock), then up to `ms` more for act to return (both
 * stretched by LAB_TIMEOUT_SCALE, as every timeout in the Valgrind lane).
 * It returns whether act returned within that time: false says the thread
 * waits for something the hook's caller holds. side_thread_join waits for
 * the thread; call it once the hook's caller has returned, before freeing
 * what act uses.
 *
 * side_hook is such a hook for a counting waker (wakers.h): set with
 * counting_waker_set_hook(cw, side_hook, &h), it starts h.act on a side
 * thread at the waker's first clone or first wake, and records whether it
 * got through within h.ms.
 */
#ifndef LAB_TEST_SIDE_THREAD_H
#define LAB_TEST_SIDE_THREAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "lab_test.h"
#include "wakers.h"

struct side_thread {
    pthread_t thread;
    void (*act)(void *);
    void *arg;
    bool started;          /* the starting thread's only */
    atomic_bool entered;   /* side thread -> starter: running, about to act */
    atomic_bool finished;  /* side thread -> starter: act returned */
};

static inline void *side_thread_main(void *p)
{
    struct side_thread *t = p;
    atomic_store_explicit(&t->entered, true, memory_order_release); /* pairs with side_thread_start's acquire */
    t->act(t->arg);
    atomic_store_explicit(&t->finished, true, memory_order_release); /* pairs with side_thread_start's acquire */
    return NULL;
}

/* Starts act(arg) on a side thread (`what` names it if it cannot start) and
 * returns whether it finished within ms of running. */
static inline bool side_thread_start(struct side_thread *t, void (*act)(void *), void *arg, unsigned ms,
                                     const char *what)
{
    t->act = act;
    t->arg = arg;
    atomic_init(&t->entered, false);
    atomic_init(&t->finished, false);
    if (pthread_create(&t->thread, NULL, side_thread_main, t) != 0)
        cr_assert_fail("could not start the %s thread", what);
    t->started = true;
    for (unsigned waited = 0; !atomic_load_explicit(&t->entered, memory_order_acquire) &&
                              waited < (unsigned)(5000 * LAB_TIMEOUT_SCALE); waited++)
        lab_sleep_ms(1);
    for (unsigned waited = 0; !atomic_load_explicit(&t->finished, memory_order_acquire) &&
                              waited < (unsigned)(ms * LAB_TIMEOUT_SCALE); waited++)
        lab_sleep_ms(1);
    return atomic_load_explicit(&t->finished, memory_order_acquire);
}

/* Waits for the side thread, if one was started. */
static inline void side_thread_join(struct side_thread *t)
{
    if (t->started)
        pthread_join(t->thread, NULL);
}

enum side_hook_at { SIDE_AT_FIRST_CLONE, SIDE_AT_FIRST_WAKE };

struct side_hook {
    enum side_hook_at at;  /* the waker event that starts the side thread */
    void (*act)(void *);
    void *arg;
    unsigned ms;           /* how long act may take once it runs */
    const char *what;      /* names the side thread in a failure */
    struct side_thread side;
    bool started;          /* the hook's thread only; read after the call that ran the hook */
    bool got_through;      /* act returned within ms; same */
};

static inline void side_hook(struct counting_waker *cw, enum waker_event ev, unsigned nth, void *arg)
{
    (void)cw;
    struct side_hook *h = arg;
    bool first = h->at == SIDE_AT_FIRST_CLONE ? ev == WAKER_EV_CLONE && nth == 1
                                               : (ev == WAKER_EV_WAKE || ev == WAKER_EV_WAKE_BY_REF) && !h->started;
    if (!first)
        return;
    h->started = true;
    h->got_through = side_thread_start(&h->side, h->act, h->arg, h->ms, h->what);
}

#endif
