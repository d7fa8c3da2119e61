/* futures.c - thread_sleep, spin, forgetful, yield and early-wake futures. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "futures.h"
#include "harness.h"

static void fail(const char *what)
{
    fprintf(stderr, "futures.c: %s failed\n", what);
    abort();
}

/* ---- thread_sleep --------------------------------------------------------- */

struct thread_sleep_shared {
    pthread_mutex_t lock;     /* protects done, cancelled and waker */
    pthread_cond_t cancel;    /* signalled when cancelled becomes true (CLOCK_MONOTONIC) */
    bool done;                /* the time is up: the next poll is Ready */
    bool cancelled;           /* the future was dropped: the helper leaves at once */
    struct waker waker;       /* the most recently registered waker, or none */
    struct timespec deadline; /* CLOCK_MONOTONIC: first poll + ms */
    pthread_t helper;         /* joined by the drop */
};

static void *thread_sleep_helper(void *arg)
{
    struct thread_sleep_shared *sh = arg;
    struct waker to_wake = WAKER_NONE;

    pthread_mutex_lock(&sh->lock);
    int rc = 0;
    while (!sh->cancelled && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&sh->cancel, &sh->lock, &sh->deadline);
    if (!sh->cancelled) {
        sh->done = true;
        to_wake = waker_take(&sh->waker); /* our reference now: woken below */
    }
    pthread_mutex_unlock(&sh->lock);

    waker_wake(&to_wake); /* outside the lock; consumes the stored reference */
    return NULL;
}

static void thread_sleep_start(struct thread_sleep *s)
{
    struct thread_sleep_shared *sh = calloc(1, sizeof *sh);
    if (!sh)
        fail("calloc");
    pthread_mutex_init(&sh->lock, NULL);
    lab_monotonic_cond_init(&sh->cancel);
    sh->waker = WAKER_NONE;

    lab_deadline_after_ms(&sh->deadline, s->ms);
    if (pthread_create(&sh->helper, NULL, thread_sleep_helper, sh) != 0)
        fail("pthread_create");
    pthread_setname_np(sh->helper, "thread-sleep");
    s->shared = sh;
}

static enum poll thread_sleep_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct thread_sleep *s = self;
    if (!s->shared)
        thread_sleep_start(s); /* futures are lazy: the time runs from the first poll */
    struct thread_sleep_shared *sh = s->shared;

    pthread_mutex_lock(&sh->lock);
    if (sh->done) {
        pthread_mutex_unlock(&sh->lock);
        return POLL_READY;
    }
    /* Checked and registered under one lock: the helper cannot finish in
     * between. The latest waker replaces an older one (the latest-waker rule). */
    waker_clone_from(&sh->waker, cx->waker);
    pthread_mutex_unlock(&sh->lock);
    return POLL_PENDING;
}

static void thread_sleep_drop(void *self)
{
    struct thread_sleep *s = self;
    struct thread_sleep_shared *sh = s->shared;
    if (!sh)
        return; /* never polled: no thread, nothing stored */
    pthread_mutex_lock(&sh->lock);
    sh->cancelled = true;
    pthread_cond_signal(&sh->cancel);
    pthread_mutex_unlock(&sh->lock);
    pthread_join(sh->helper, NULL);

    waker_drop(&sh->waker); /* -1: a waker stored by a poll that never saw Ready */
    pthread_cond_destroy(&sh->cancel);
    pthread_mutex_destroy(&sh->lock);
    free(sh);
    s->shared = NULL;
}

static const struct future_vtable thread_sleep_vt =
    FUTURE_VTABLE_INIT(struct thread_sleep, 0, thread_sleep_poll, thread_sleep_drop);

void thread_sleep_init(struct thread_sleep *s, unsigned ms)
{
    s->ms = ms;
    s->shared = NULL;
}

struct future thread_sleep_as_future(struct thread_sleep *s)
{
    return future_of(&thread_sleep_vt, s);
}

/* ---- spin_future ---------------------------------------------------------- */

static enum poll spin_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct spin_future *s = self;
    /* acquire: pairs with the setter's release store of the flag */
    if (atomic_load_explicit(s->flag, memory_order_acquire))
        return POLL_READY;
    waker_wake_by_ref(cx->waker); /* "poll me again", with nothing registered: the spin */
    return POLL_PENDING;
}

static const struct future_vtable spin_vt =
    FUTURE_VTABLE_INIT(struct spin_future, 0, spin_poll, NULL);

void spin_future_init(struct spin_future *s, const atomic_bool *flag) { s->flag = flag; }

struct future spin_future_as_future(struct spin_future *s) { return future_of(&spin_vt, s); }

/* ---- forgetful_future ----------------------------------------------------- */

static enum poll forgetful_poll(void *self, struct context *cx, void *out)
{
    (void)cx;
    (void)out;
    struct forgetful_future *f = self;
    /* relaxed: a counter read by a watching thread; nothing else hangs off it */
    atomic_fetch_add_explicit(&f->polls, 1, memory_order_relaxed);
    return POLL_PENDING; /* and no wake path: the broken promise */
}

static const struct future_vtable forgetful_vt =
    FUTURE_VTABLE_INIT(struct forgetful_future, 0, forgetful_poll, NULL);

void forgetful_future_init(struct forgetful_future *f) { atomic_init(&f->polls, 0); }

struct future forgetful_future_as_future(struct forgetful_future *f)
{
    return future_of(&forgetful_vt, f);
}

unsigned long forgetful_future_polls(struct forgetful_future *f)
{
    return atomic_load_explicit(&f->polls, memory_order_relaxed); /* see forgetful_poll */
}

/* ---- yield_future --------------------------------------------------------- */

static enum poll yield_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct yield_future *y = self;
    if (y->left == 0)
        return POLL_READY;
    y->left--;
    waker_wake_by_ref(cx->waker); /* there is more to do: poll me again */
    return POLL_PENDING;
}

static const struct future_vtable yield_vt =
    FUTURE_VTABLE_INIT(struct yield_future, 0, yield_poll, NULL);

void yield_future_init(struct yield_future *y, unsigned n) { y->left = n; }

struct future yield_future_as_future(struct yield_future *y) { return future_of(&yield_vt, y); }

/* ---- early_wake_future ---------------------------------------------------- */

static void *early_waker_main(void *arg)
{
    waker_wake(arg); /* consumes the clone handed to this thread */
    return NULL;
}

static enum poll early_wake_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct early_wake_future *e = self;
    if (e->left == 0)
        return POLL_READY;
    e->left--;
    struct waker clone = waker_clone(cx->waker); /* +1: consumed by the thread's wake */
    pthread_t t;
    if (pthread_create(&t, NULL, early_waker_main, &clone) != 0)
        fail("pthread_create");
    pthread_join(t, NULL); /* the wake has happened, before we even say Pending */
    return POLL_PENDING;
}

static const struct future_vtable early_wake_vt =
    FUTURE_VTABLE_INIT(struct early_wake_future, 0, early_wake_poll, NULL);

void early_wake_future_init(struct early_wake_future *e, unsigned n) { e->left = n; }

struct future early_wake_future_as_future(struct early_wake_future *e)
{
    return future_of(&early_wake_vt, e);
}
