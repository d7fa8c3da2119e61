/* support.c - the probe future, boxed outputs, the watched run, gates. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stage03.h"

/* ---- the probe future ------------------------------------------------------------ */

/* The state copied into the task: only a pointer to the test's stats. */
struct probe {
    struct probe_stats *st;
};

static enum poll probe_poll(void *self, struct context *cx, void *out)
{
    struct probe_stats *st = ((struct probe *)self)->st;
    /* relaxed throughout: counters read after the test has joined or run
     * returned, which orders them; overlaps only needs atomicity */
    if (atomic_fetch_add_explicit(&st->in_poll, 1, memory_order_relaxed) > 0)
        atomic_fetch_add_explicit(&st->overlaps, 1, memory_order_relaxed);
    unsigned nth = atomic_fetch_add_explicit(&st->polls, 1, memory_order_relaxed) + 1;
    enum poll r = st->step(st, nth, cx, (uint64_t *)out);
    atomic_fetch_sub_explicit(&st->in_poll, 1, memory_order_relaxed);
    return r;
}

static void probe_drop(void *self)
{
    struct probe_stats *st = ((struct probe *)self)->st;
    atomic_fetch_add_explicit(&st->drops, 1, memory_order_relaxed);
}

static const struct future_vtable probe_vt =
    FUTURE_VTABLE_INIT(struct probe, sizeof(uint64_t), probe_poll, probe_drop);

void probe_init(struct probe_stats *st, probe_step step, void *arg)
{
    memset(st, 0, sizeof *st);
    st->step = step;
    st->arg = arg;
    atomic_init(&st->polls, 0);
    atomic_init(&st->drops, 0);
    atomic_init(&st->in_poll, 0);
    atomic_init(&st->overlaps, 0);
    pthread_mutex_init(&st->lock, NULL);
    st->stash = WAKER_NONE;
    st->jh = NULL;
    st->value = 42;
}

struct future probe_future(struct probe_stats **storage)
{
    return future_of(&probe_vt, storage); /* struct probe is one pointer: the same layout */
}

struct join_handle *spawn_probe(struct executor *ex, struct probe_stats *st,
                                task_output_drop_fn drop_output)
{
    struct probe p = { .st = st };
    struct join_handle *jh = executor_spawn(ex, future_of(&probe_vt, &p), drop_output);
    cr_assert_not_null(jh, "executor_spawn returned NULL with memory to spare");
    return jh;
}

void probe_stash(struct probe_stats *st, struct context *cx)
{
    pthread_mutex_lock(&st->lock);
    waker_clone_from(&st->stash, cx->waker);
    pthread_mutex_unlock(&st->lock);
}

struct waker probe_take_stash(struct probe_stats *st)
{
    pthread_mutex_lock(&st->lock);
    struct waker w = waker_take(&st->stash);
    pthread_mutex_unlock(&st->lock);
    return w;
}

bool probe_wait_stashed(struct probe_stats *st, unsigned ms)
{
    for (unsigned waited = 0;; waited++) {
        pthread_mutex_lock(&st->lock);
        bool stashed = !waker_is_none(&st->stash);
        pthread_mutex_unlock(&st->lock);
        if (stashed || waited >= ms)
            return stashed;
        lab_sleep_ms(1);
    }
}

void probe_destroy(struct probe_stats *st)
{
    struct waker w = probe_take_stash(st);
    waker_drop(&w);
    pthread_mutex_destroy(&st->lock);
}

unsigned probe_polls(struct probe_stats *st) { return atomic_load_explicit(&st->polls, memory_order_relaxed); }
unsigned probe_drops(struct probe_stats *st) { return atomic_load_explicit(&st->drops, memory_order_relaxed); }

enum poll step_ready(struct probe_stats *st, unsigned nth, struct context *cx, uint64_t *out)
{
    (void)nth;
    (void)cx;
    *out = st->value;
    return POLL_READY;
}

enum poll step_forget(struct probe_stats *st, unsigned nth, struct context *cx, uint64_t *out)
{
    (void)st;
    (void)nth;
    (void)cx;
    (void)out;
    return POLL_PENDING;
}

enum poll step_stash_forever(struct probe_stats *st, unsigned nth, struct context *cx, uint64_t *out)
{
    (void)nth;
    (void)out;
    probe_stash(st, cx);
    return POLL_PENDING;
}

enum poll step_stash_once(struct probe_stats *st, unsigned nth, struct context *cx, uint64_t *out)
{
    if (nth == 1) {
        probe_stash(st, cx);
        return POLL_PENDING;
    }
    *out = st->value;
    return POLL_READY;
}

/* ---- boxed outputs ------------------------------------------------------------------- */

static atomic_uint box_drop_count;

uint64_t box_new(uint64_t v)
{
    uint64_t *b = malloc(sizeof *b);
    if (!b)
        abort();
    *b = v;
    return (uint64_t)(uintptr_t)b;
}

uint64_t box_value(uint64_t box) { return *(uint64_t *)(uintptr_t)box; }
void box_free(uint64_t box) { free((void *)(uintptr_t)box); }

void box_drop_output(void *output)
{
    box_free(*(uint64_t *)output);
    atomic_fetch_add_explicit(&box_drop_count, 1, memory_order_relaxed);
}

unsigned box_drops(void) { return atomic_load_explicit(&box_drop_count, memory_order_relaxed); }

/* ---- the watched run ------------------------------------------------------------------- */

static void *bg_run_main(void *arg)
{
    struct bg_run *b = arg;
    uint64_t t0 = monotonic_ns(), c0 = thread_cpu_ns();
    if (b->root.vtable)
        b->st = executor_block_on(b->ex, b->root, b->out);
    else if (b->until_idle)
        b->st = executor_run_until_idle(b->ex);
    else
        b->st = executor_run(b->ex);
    b->cpu_ns = thread_cpu_ns() - c0;
    b->wall_ns = monotonic_ns() - t0;
    pthread_mutex_lock(&b->lock);
    atomic_store_explicit(&b->done, true, memory_order_relaxed); /* the lock orders it */
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
    return NULL;
}

static void bg_start(struct bg_run *b)
{
    atomic_init(&b->done, false);
    pthread_mutex_init(&b->lock, NULL);
    lab_monotonic_cond_init(&b->cond);
    b->st = -1;
    if (pthread_create(&b->thread, NULL, bg_run_main, b) != 0)
        cr_assert_fail("could not start a thread (test machine out of resources)");
}

void bg_run_start(struct bg_run *b, struct executor *ex)
{
    memset(b, 0, sizeof *b);
    b->ex = ex;
    bg_start(b);
}

void bg_run_idle_start(struct bg_run *b, struct executor *ex)
{
    memset(b, 0, sizeof *b);
    b->ex = ex;
    b->until_idle = true;
    bg_start(b);
}

void bg_block_on_start(struct bg_run *b, struct executor *ex, struct future root, void *out)
{
    memset(b, 0, sizeof *b);
    b->ex = ex;
    b->root = root;
    b->out = out;
    bg_start(b);
}

bool bg_run_finish(struct bg_run *b, unsigned ms)
{
    struct timespec deadline;
    lab_deadline_after_ms(&deadline, ms);
    pthread_mutex_lock(&b->lock);
    int rc = 0;
    while (!atomic_load_explicit(&b->done, memory_order_relaxed) && rc == 0)
        rc = pthread_cond_timedwait(&b->cond, &b->lock, &deadline);
    bool done = atomic_load_explicit(&b->done, memory_order_relaxed);
    pthread_mutex_unlock(&b->lock);
    if (!done)
        return false;
    pthread_join(b->thread, NULL);
    pthread_cond_destroy(&b->cond);
    pthread_mutex_destroy(&b->lock);
    return true;
}

static const char *status_name(enum executor_status st)
{
    switch (st) {
    case EXECUTOR_OK: return "EXECUTOR_OK";
    case EXECUTOR_IDLE: return "EXECUTOR_IDLE";
    case EXECUTOR_DEADLOCK: return "EXECUTOR_DEADLOCK";
    case EXECUTOR_NOMEM: return "EXECUTOR_NOMEM";
    }
    return "an unknown status";
}

void expect_run(struct executor *ex, enum executor_status want, const char *what)
{
    enum executor_status st = executor_run(ex);
    if (st != want && st == EXECUTOR_DEADLOCK)
        cr_assert_fail("%s: executor_run said EXECUTOR_DEADLOCK, expected %s: a task was left "
                       "pending with no wake on its way (a wake was lost, or a task was never "
                       "queued: a wake during a poll sets NOTIFIED and the poller queues the task, "
                       "task.h contract 2)", what, status_name(want));
    cr_assert_eq(st, want, "%s: executor_run returned %s, expected %s", what, status_name(st),
                 status_name(want));
}

struct executor *new_executor(void)
{
    struct executor *ex = executor_new_default();
    cr_assert_not_null(ex, "executor_new_default returned NULL");
    return ex;
}

uint64_t state_of(struct join_handle *jh) { return join_handle_test_state(jh); }

const char *state_str(uint64_t s)
{
    static _Thread_local char buf[160];
    snprintf(buf, sizeof buf, "%s%s%s%s%s%s refs=%llu joining=%llu",
             (s & TASK_RUNNING) ? "RUNNING " : "", (s & TASK_NOTIFIED) ? "NOTIFIED " : "",
             (s & TASK_COMPLETE) ? "COMPLETE " : "", (s & TASK_CANCELLED) ? "CANCELLED " : "",
             (s & TASK_JOIN_INTEREST) ? "JOIN_INTEREST " : "", (s & TASK_JOIN_WAKER) ? "JOIN_WAKER " : "",
             (unsigned long long)task_state_refs(s), (unsigned long long)task_state_joining(s));
    return buf;
}
