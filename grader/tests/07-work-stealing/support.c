/* support.c - step tasks, slots, gates, waiting with a deadline. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "block_on.h"
#include "stage07.h"

struct step {
    step_fn fn;
    void *arg;
    unsigned polls;
};

static atomic_uint drops;

static enum poll step_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct step *s = self;
    return s->fn(s->arg, cx, ++s->polls);
}

static void step_drop(void *self)
{
    (void)self;
    atomic_fetch_add(&drops, 1);
}

static const struct future_vtable step_vt = FUTURE_VTABLE_INIT(struct step, 0, step_poll, step_drop);

_Static_assert(sizeof(struct step) <= STEP_STORAGE_SIZE, "step storage");

struct future step_future(void *storage, step_fn fn, void *arg)
{
    struct step *s = storage;
    s->fn = fn;
    s->arg = arg;
    s->polls = 0;
    return future_of(&step_vt, s);
}

struct join_handle *spawn_step(struct ws_runtime *rt, step_fn fn, void *arg)
{
    struct step s;
    struct join_handle *jh = ws_spawn(rt, step_future(&s, fn, arg), NULL);
    cr_assert_not_null(jh, "ws_spawn returned NULL (out of memory, or the runtime is closing?)");
    return jh;
}

unsigned step_drops(void) { return atomic_load(&drops); }
void step_drops_reset(void) { atomic_store(&drops, 0); }

bool join_within(struct join_handle *jh, unsigned ms)
{
    bool stalled;
    return join_while_progress(jh, NULL, NULL, 0, ms, &stalled);
}

unsigned join_all_within(struct join_handle **jh, unsigned n, unsigned ms)
{
    uint64_t end = monotonic_ns() + (uint64_t)ms * 1000000u;
    unsigned done = 0;
    for (unsigned i = 0; i < n; i++) {
        uint64_t now = monotonic_ns();
        done += join_within(jh[i], now < end ? (unsigned)((end - now) / 1000000u) : 0);
    }
    return done;
}

bool join_while_progress(struct join_handle *jh, unsigned long (*progress)(void *), void *arg, unsigned stall_ms,
                         unsigned ms, bool *stalled)
{
    uint64_t now = monotonic_ns(), end = now + (uint64_t)ms * 1000000u, last = now;
    unsigned long seen = progress ? progress(arg) : 0;
    bool done;
    *stalled = false;
    while (!(done = join_handle_is_finished(jh)) && (now = monotonic_ns()) < end) {
        unsigned long p = progress ? progress(arg) : 0;
        if (!progress || p != seen) {
            seen = p;
            last = now;
        } else if (now - last >= (uint64_t)stall_ms * 1000000u) {
            *stalled = true;
            break;
        }
        lab_sleep_ms(1);
    }
    join_handle_drop(jh);
    return done;
}

bool wait_until(bool (*cond)(void *), void *arg, unsigned ms)
{
    uint64_t end = monotonic_ns() + (uint64_t)ms * 1000000u;
    for (;;) {
        if (cond(arg))
            return true;
        if (monotonic_ns() >= end)
            return false;
        lab_sleep_ms(1);
    }
}

struct ws_runtime *new_runtime(unsigned n)
{
    struct ws_runtime *rt = ws_runtime_new_default(n);
    cr_assert_not_null(rt, "ws_runtime_new_default(%u) returned NULL", n);
    return rt;
}

/* n workers asleep for 50 ms in a row. A worker that went to sleep while
 * another was awake parks with the watch's timeout (at most WS_WATCH_MAX_NS,
 * 16 ms) and wakes to look again; by the end of the window each such watch
 * has expired, and a worker that finds the others asleep parks for ever. A
 * test that forces the idle protocol needs that settled state: a worker
 * still on its watch would find a stranded task by itself. */
bool wait_sleepers(struct ws_runtime *rt, unsigned n, unsigned ms)
{
    uint64_t end = monotonic_ns() + (uint64_t)ms * 1000000u, since = 0;
    for (;;) {
        uint64_t now = monotonic_ns();
        if (ws_test_sleepers(rt) < n)
            since = 0;
        else if (!since)
            since = now;
        else if (now - since >= 50000000u)
            return true;
        if (now >= end)
            return false;
        lab_sleep_ms(1);
    }
}

void slot_init(struct slot *s)
{
    pthread_mutex_init(&s->lock, NULL);
    s->w = WAKER_NONE;
}

void slot_store(struct slot *s, struct context *cx)
{
    pthread_mutex_lock(&s->lock);
    waker_clone_from(&s->w, cx->waker);
    pthread_mutex_unlock(&s->lock);
}

bool slot_filled(void *arg)
{
    struct slot *s = arg;
    pthread_mutex_lock(&s->lock);
    bool full = !waker_is_none(&s->w);
    pthread_mutex_unlock(&s->lock);
    return full;
}

bool slot_wake(struct slot *s)
{
    pthread_mutex_lock(&s->lock);
    struct waker w = waker_clone(&s->w);
    pthread_mutex_unlock(&s->lock);
    if (waker_is_none(&w))
        return false;
    waker_wake(&w); /* outside the lock: the wake may run code */
    return true;
}

void slot_destroy(struct slot *s)
{
    waker_drop(&s->w);
    pthread_mutex_destroy(&s->lock);
}
