/* wakers.c - counting, hook, notify and noop wakers for tests. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "harness.h"
#include "wakers.h"
#include "../wake_obj.h"

/* ---- counting waker ------------------------------------------------------- */

struct counting_waker {
    const char *label;
    pthread_mutex_t lock;   /* protects counts, hook and hook_arg */
    pthread_cond_t woken;   /* signalled on every wake and wake_by_ref */
    struct waker_counts counts;
    waker_hook_fn hook;
    void *hook_arg;
};

static const struct waker_vtable counting_vtable;

static void counting_event(struct counting_waker *cw, enum waker_event ev)
{
    pthread_mutex_lock(&cw->lock);
    unsigned nth = 0;
    switch (ev) {
    case WAKER_EV_CLONE: nth = ++cw->counts.clones; cw->counts.live++; break;
    case WAKER_EV_WAKE: nth = ++cw->counts.wakes; cw->counts.live--; break;
    case WAKER_EV_WAKE_BY_REF: nth = ++cw->counts.wake_by_refs; break;
    case WAKER_EV_DROP: nth = ++cw->counts.drops; cw->counts.live--; break;
    }
    waker_hook_fn hook = cw->hook;
    void *arg = cw->hook_arg;
    if (ev == WAKER_EV_WAKE || ev == WAKER_EV_WAKE_BY_REF)
        pthread_cond_broadcast(&cw->woken);
    pthread_mutex_unlock(&cw->lock);
    if (hook)
        hook(cw, ev, nth, arg); /* outside our lock: the hook may block or wake */
}

static struct waker counting_clone(const void *data)
{
    struct counting_waker *cw = (struct counting_waker *)data;
    counting_event(cw, WAKER_EV_CLONE); /* +1 */
    return (struct waker){ .data = cw, .vtable = &counting_vtable };
}

static void counting_wake(const void *data) { counting_event((struct counting_waker *)data, WAKER_EV_WAKE); }
static void counting_wake_by_ref(const void *data) { counting_event((struct counting_waker *)data, WAKER_EV_WAKE_BY_REF); }
static void counting_drop(const void *data) { counting_event((struct counting_waker *)data, WAKER_EV_DROP); }

static const struct waker_vtable counting_vtable = {
    .clone = counting_clone,
    .wake = counting_wake,
    .wake_by_ref = counting_wake_by_ref,
    .drop = counting_drop,
};

struct counting_waker *counting_waker_new(const char *label)
{
    struct counting_waker *cw = calloc(1, sizeof *cw);
    if (!cw)
        abort();
    cw->label = label;
    pthread_mutex_init(&cw->lock, NULL);
    lab_monotonic_cond_init(&cw->woken);
    cw->counts.live = 1; /* the test's own reference */
    return cw;
}

struct waker counting_waker_get(struct counting_waker *cw)
{
    return (struct waker){ .data = cw, .vtable = &counting_vtable };
}

void counting_waker_set_hook(struct counting_waker *cw, waker_hook_fn fn, void *arg)
{
    pthread_mutex_lock(&cw->lock);
    cw->hook = fn;
    cw->hook_arg = arg;
    pthread_mutex_unlock(&cw->lock);
}

struct waker_counts counting_waker_counts(struct counting_waker *cw)
{
    pthread_mutex_lock(&cw->lock);
    struct waker_counts c = cw->counts;
    pthread_mutex_unlock(&cw->lock);
    return c;
}

unsigned counting_waker_woken(struct counting_waker *cw)
{
    struct waker_counts c = counting_waker_counts(cw);
    return c.wakes + c.wake_by_refs;
}

bool counting_waker_wait_woken(struct counting_waker *cw, unsigned n, unsigned timeout_ms)
{
    struct timespec deadline;
    lab_deadline_after_ms(&deadline, timeout_ms);
    pthread_mutex_lock(&cw->lock);
    int rc = 0;
    while (cw->counts.wakes + cw->counts.wake_by_refs < n && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&cw->woken, &cw->lock, &deadline);
    bool ok = cw->counts.wakes + cw->counts.wake_by_refs >= n;
    pthread_mutex_unlock(&cw->lock);
    return ok;
}

void counting_waker_free(struct counting_waker *cw)
{
    pthread_cond_destroy(&cw->woken);
    pthread_mutex_destroy(&cw->lock);
    free(cw);
}

const char *counting_waker_label(struct counting_waker *cw) { return cw->label; }

/* ---- notify waker --------------------------------------------------------- */

struct notify_waker {
    struct wake_obj obj;
    pthread_mutex_t lock; /* protects pending */
    pthread_cond_t cond;  /* signalled when pending becomes true */
    bool pending;         /* a wake not yet consumed by notify_waker_wait */
};

static void notify_wake(struct wake_obj *obj)
{
    struct notify_waker *nw = WAKE_OBJ_CONTAINER(obj, struct notify_waker, obj);
    pthread_mutex_lock(&nw->lock);
    nw->pending = true;
    pthread_cond_signal(&nw->cond);
    pthread_mutex_unlock(&nw->lock);
}

static void notify_free(struct wake_obj *obj)
{
    struct notify_waker *nw = WAKE_OBJ_CONTAINER(obj, struct notify_waker, obj);
    pthread_cond_destroy(&nw->cond);
    pthread_mutex_destroy(&nw->lock);
    free(nw);
}

static const struct wake_obj_ops notify_ops = { .wake = notify_wake, .free = notify_free };

struct notify_waker *notify_waker_new(void)
{
    struct notify_waker *nw = calloc(1, sizeof *nw);
    if (!nw)
        abort();
    wake_obj_init(&nw->obj, &notify_ops); /* the creator's reference */
    pthread_mutex_init(&nw->lock, NULL);
    lab_monotonic_cond_init(&nw->cond);
    return nw;
}

struct waker notify_waker_get(struct notify_waker *nw) { return wake_obj_waker(&nw->obj); }

bool notify_waker_wait(struct notify_waker *nw, unsigned timeout_ms)
{
    struct timespec deadline;
    lab_deadline_after_ms(&deadline, timeout_ms);
    pthread_mutex_lock(&nw->lock);
    int rc = 0;
    while (!nw->pending && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&nw->cond, &nw->lock, &deadline);
    bool got = nw->pending;
    nw->pending = false;
    pthread_mutex_unlock(&nw->lock);
    return got;
}

void notify_waker_release(struct notify_waker *nw) { wake_obj_release(&nw->obj); /* -1 */ }

/* ---- noop waker ----------------------------------------------------------- */

static struct waker noop_clone(const void *data) { (void)data; return noop_waker(); }
static void noop_op(const void *data) { (void)data; }

static const struct waker_vtable noop_vtable = {
    .clone = noop_clone, .wake = noop_op, .wake_by_ref = noop_op, .drop = noop_op,
};

struct waker noop_waker(void) { return (struct waker){ .data = NULL, .vtable = &noop_vtable }; }
