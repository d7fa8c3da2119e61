/* rules_test.c - rules taught earlier, where they come back in stage 07,
 * each forced on one thread or counted, not left to a race.
 *
 * The latest waker (future.h; stage 01): a bounded channel's receive or
 * send polled again with another waker while it waits must leave the new
 * waker to be woken, not the first (a task moved to another worker polls
 * with that worker's waker).
 *
 * The async mutex: an unlock that finds the contended mark but no waiter
 * (the waiter was dropped) frees the mutex; a next lock is Ready at once.
 *
 * A budget for every poll (runtime.h contract 4): two tasks that wake each
 * other, so that each runs from the LIFO slot right after the other on the
 * one worker, read coop_remaining() at the start of every poll and spend
 * most of it: each poll must start with the full 128.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <string.h>

#include "stage07.h"
#include "channel.h"
#include "coop.h"

LAB_SUITE(chan_rules, 10);
LAB_SUITE(mutex_rules, 10);
LAB_SUITE(budget_rules, 10);

/* ---- the latest waker, in the bounded channel ------------------------------------- */

LAB_TEST(chan_rules, bounded_waiters_keep_the_latest_waker, 5)
{
    for (int side = 0; side < 2; side++) { /* 0: a receive on an empty channel; 1: a send on a full one */
        struct chan *c = chan_new(1);
        cr_assert_not_null(c, "chan_new(1) returned NULL");
        struct counting_waker *first = counting_waker_new("first"), *latest = counting_waker_new("latest");
        struct waker w1 = counting_waker_get(first), w2 = counting_waker_get(latest);
        struct context cx1 = context_from_waker(&w1), cx2 = context_from_waker(&w2);
        struct chan_recv r;
        struct chan_send s;
        enum chan_status st;
        uint64_t v = 0;
        const char *what = side == 0 ? "a receive on an empty bounded channel" : "a send on a full bounded channel";
        if (side == 0) {
            chan_recv_init(&r, c);
            cr_assert_eq(chan_recv_poll(&r, &cx1, &v, &st), POLL_PENDING, "%s was Ready", what);
            cr_assert_eq(chan_recv_poll(&r, &cx2, &v, &st), POLL_PENDING, "%s was Ready on its second poll", what);
            cr_assert(chan_try_send(c, 7), "chan_try_send on an empty channel of capacity 1 failed");
        } else {
            cr_assert(chan_try_send(c, 1), "chan_try_send on an empty channel of capacity 1 failed");
            chan_send_init(&s, c, 2);
            cr_assert_eq(chan_send_poll(&s, &cx1, &st), POLL_PENDING, "%s was Ready", what);
            cr_assert_eq(chan_send_poll(&s, &cx2, &st), POLL_PENDING, "%s was Ready on its second poll", what);
            struct chan_recv taker;
            chan_recv_init(&taker, c);
            struct waker nw = noop_waker();
            struct context ncx = context_from_waker(&nw);
            cr_assert_eq(chan_recv_poll(&taker, &ncx, &v, &st), POLL_READY, "a receive on a full channel waited");
            chan_recv_drop(&taker);
        }
        unsigned by_first = counting_waker_woken(first), by_latest = counting_waker_woken(latest);
        cr_assert(by_first == 0 && by_latest == 1, "%s was polled with waker \"first\", then again with waker "
                  "\"latest\"; then %s: \"first\" was woken %u times and \"latest\" %u times. Only the waker of "
                  "the most recent poll may be woken, once (future.h, the latest waker; channel.h contract 3): "
                  "a task moved to another worker polls with a new waker", what,
                  side == 0 ? "a message arrived" : "a slot was freed", by_first, by_latest);
        if (side == 0) {
            cr_assert_eq(chan_recv_poll(&r, &cx2, &v, &st), POLL_READY, "the woken receive was not Ready");
            cr_assert_eq(v, 7, "the woken receive got %llu, not the message sent (7)", (unsigned long long)v);
            chan_recv_drop(&r);
        } else {
            cr_assert_eq(chan_send_poll(&s, &cx2, &st), POLL_READY, "the woken send was not Ready");
            chan_send_drop(&s);
        }
        chan_free(c);
        cr_assert_eq(counting_waker_counts(first).live, 1, "the channel kept a reference to the replaced waker: "
                     "%ld live (a replaced waker is dropped)", counting_waker_counts(first).live);
        cr_assert_eq(counting_waker_counts(latest).live, 1, "the channel kept a reference to the waker: %ld live",
                     counting_waker_counts(latest).live);
        counting_waker_free(first);
        counting_waker_free(latest);
    }
}

/* ---- the async mutex: nobody waiting ------------------------------------------------ */

LAB_TEST(mutex_rules, unlock_frees_when_the_waiter_was_dropped, 5)
{
    struct async_mutex m;
    cr_assert_eq(async_mutex_init(&m), 0, "async_mutex_init failed");
    struct waker nw = noop_waker();
    struct context cx = context_from_waker(&nw);
    struct async_mutex_lock holder, waiter, next;
    async_mutex_lock_init(&holder, &m);
    cr_assert_eq(async_mutex_lock_poll(&holder, &cx), POLL_READY, "a lock of a free mutex waited");
    async_mutex_lock_init(&waiter, &m);
    cr_assert_eq(async_mutex_lock_poll(&waiter, &cx), POLL_PENDING, "a second lock of a held mutex was Ready");
    async_mutex_lock_drop(&waiter); /* it gave up: nobody waits now */
    async_mutex_unlock(&m);
    async_mutex_lock_init(&next, &m);
    enum poll p = async_mutex_lock_poll(&next, &cx);
    cr_assert_eq(p, POLL_READY, "a lock polled after the only waiter was dropped and the holder unlocked was "
                 "Pending: the unlock found nobody to hand the mutex to and left it locked, for ever (channel.h, "
                 "the async mutex: unlock hands the mutex to the first waiter, or frees it)");
    async_mutex_unlock(&m);
    async_mutex_lock_drop(&next);
    async_mutex_lock_drop(&holder);
    async_mutex_destroy(&m);
}

/* ---- a budget for every poll ------------------------------------------------------- */

enum { PINGS = 10, SPEND = 100 };

struct pinger {
    struct slot mine, *other;
    unsigned polls;
    unsigned starts[PINGS + 2];  /* coop_remaining() at the start of each poll */
};

static enum poll ping(void *arg, struct context *cx, unsigned nth)
{
    (void)nth;
    struct pinger *p = arg;
    if (p->polls < PINGS + 2)
        p->starts[p->polls] = coop_remaining();
    p->polls++;
    for (int i = 0; i < SPEND; i++)
        if (!coop_proceed(cx))
            break; /* spent: it woke us; go on anyway */
    slot_store(&p->mine, cx);
    slot_wake(p->other); /* in a task: the other runs next, from the LIFO slot */
    return p->polls >= PINGS ? POLL_READY : POLL_PENDING;
}

LAB_TEST(budget_rules, every_poll_starts_with_a_full_budget, 10)
{
    struct ws_runtime *rt = new_runtime(1);
    struct pinger a = { .polls = 0 }, b = { .polls = 0 };
    slot_init(&a.mine);
    slot_init(&b.mine);
    a.other = &b.mine;
    b.other = &a.mine;
    struct join_handle *hb = spawn_step(rt, ping, &b);
    struct join_handle *ha = spawn_step(rt, ping, &a);
    bool done = join_within(ha, RESCUE_MS) && join_within(hb, RESCUE_MS);
    ws_runtime_free(rt);
    slot_destroy(&a.mine);
    slot_destroy(&b.mine);
    cr_assert(done, "two tasks that wake each other never finished (a %u polls, b %u)", a.polls, b.polls);
    for (int who = 0; who < 2; who++) {
        struct pinger *p = who ? &b : &a;
        unsigned n = p->polls < PINGS + 2 ? p->polls : PINGS + 2;
        for (unsigned i = 0; i < n; i++)
            cr_assert_eq(p->starts[i], COOP_BUDGET_DEFAULT, "poll %u of task %c started with a budget of %s%u units, "
                         "not %u: two tasks that wake each other run back to back from the LIFO slot, each "
                         "spending %d units a poll, and the budget must be given again before each poll of a "
                         "task, not once per turn of the worker's loop (runtime.h contract 4). The next hint: "
                         "make hint STAGE=7 ITEM=budget",
                         i + 1, who ? 'b' : 'a', p->starts[i] == UINT_MAX ? "unlimited, not " : "",
                         p->starts[i] == UINT_MAX ? COOP_BUDGET_DEFAULT : p->starts[i], COOP_BUDGET_DEFAULT,
                         SPEND);
    }
}
