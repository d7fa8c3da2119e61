/* support.c - the code behind stage05.h. */
#include <stdlib.h>
#include <string.h>

#include "stage05.h"

void rec_log_init(struct rec_log *log, size_t cap)
{
    log->now = 0;
    log->n = 0;
    log->cap = cap;
    log->ids = calloc(cap, sizeof *log->ids);
    log->at = calloc(cap, sizeof *log->at);
    cr_assert(log->ids && log->at, "out of memory in the test itself");
}

void rec_log_free(struct rec_log *log)
{
    free(log->ids);
    free(log->at);
}

static void rec_fire(struct timer_entry *e, void *arg)
{
    struct rec_timer *t = arg;
    (void)e;
    struct rec_log *log = t->log;
    if (log->n < log->cap) {
        log->ids[log->n] = t->id;
        log->at[log->n] = log->now;
    }
    log->n++;
}

void rec_timer_init(struct rec_timer *t, struct rec_log *log, int id, uint64_t deadline)
{
    timer_entry_init(&t->entry, rec_fire, t);
    t->log = log;
    t->id = id;
    t->deadline = deadline;
}

size_t rec_advance(struct timer_wheel *w, struct rec_log *log, uint64_t t)
{
    log->now = t;
    return timer_wheel_advance(w, t, 0);
}

unsigned rec_run_to_empty(struct timer_wheel *w, struct rec_log *log, unsigned max_jumps)
{
    unsigned jumps = 0;
    while (timer_wheel_len(w) > 0 && jumps < max_jumps) {
        uint64_t next = timer_wheel_next_expiration(w);
        cr_assert_neq(next, TIMER_WHEEL_NEVER,
                      "timer_wheel_next_expiration said NEVER while timer_wheel_len is %zu",
                      timer_wheel_len(w));
        if (next < log->now)
            next = log->now;
        rec_advance(w, log, next);
        jumps++;
    }
    return jumps;
}

void vstack_new(struct vstack *s)
{
    s->vc = virtual_clock_new(ORIGIN_NS);
    cr_assert_not_null(s->vc, "out of memory in the test itself");
    s->td = time_driver_new(virtual_clock_driver(s->vc));
    cr_assert_not_null(s->td, "time_driver_new returned NULL");
    s->ex = executor_new(time_driver_driver(s->td));
    cr_assert_not_null(s->ex, "executor_new returned NULL");
}

void vstack_free(struct vstack *s)
{
    executor_free(s->ex);
    time_driver_free(s->td);
    virtual_clock_free(s->vc);
}

static enum poll logged_sleep_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct logged_sleep *ls = self;
    if (sleep_poll(&ls->sleep, cx) == POLL_PENDING)
        return POLL_PENDING;
    struct rec_log *log = ls->log;
    if (log->n < log->cap) {
        log->ids[log->n] = ls->id;
        log->at[log->n] = time_driver_now(ls->sleep.td);
    }
    log->n++;
    return POLL_READY;
}

static void logged_sleep_drop(void *self)
{
    struct logged_sleep *ls = self;
    sleep_drop(&ls->sleep);
}

static const struct future_vtable logged_sleep_vt =
    FUTURE_VTABLE_INIT(struct logged_sleep, 0, logged_sleep_poll, logged_sleep_drop);

struct logged_sleep logged_sleep_new(struct time_driver *td, struct rec_log *log, int id,
                                     uint64_t deadline)
{
    return (struct logged_sleep){ .sleep = sleep_until(td, deadline), .log = log, .id = id };
}

struct future logged_sleep_future(struct logged_sleep *ls) { return future_of(&logged_sleep_vt, ls); }

static enum poll countdown_poll(void *self, struct context *cx, void *out)
{
    struct countdown *c = self;
    if (c->left < 0)
        return POLL_PENDING;
    if (c->left == 0) {
        if (out)
            *(uint64_t *)out = 42;
        return POLL_READY;
    }
    c->left--;
    waker_wake_by_ref(cx->waker);
    return POLL_PENDING;
}

static void countdown_drop(void *self)
{
    struct countdown *c = self;
    if (c->drops)
        (*c->drops)++;
}

static const struct future_vtable countdown_vt =
    FUTURE_VTABLE_INIT(struct countdown, sizeof(uint64_t), countdown_poll, countdown_drop);

struct future countdown_future(struct countdown *c) { return future_of(&countdown_vt, c); }
