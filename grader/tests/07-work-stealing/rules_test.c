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
 *
 * A wake reaches the sleeper (stage 02's rule, runtime.h contract 2): a task
 * pushed onto a worker's own deque while another worker is parked must wake
 * that worker, on a driver whose clock stands still so that no timeout can
 * do it instead (still_clock.h).
 *
 * A wake from outside is queued before it unparks (runtime.h contract 2):
 * the only worker, woken by the driver, must find the task at once; an
 * unpark that returns only after the worker slept again (slow_unpark.h)
 * strands a task pushed after it.
 *
 * The notify reads the idle word past a store buffer (the idle protocol,
 * runtime.h contract 2): a spawn inside a task while the other worker is on
 * its way to sleep, the push held in a simulated store buffer, the pusher
 * stopped right after its first access to the idle word (store_buffer.h):
 * a load lets the worker sleep next to the task, an RMW or a fence does not.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "stage07.h"
#include "channel.h"
#include "coop.h"
#include "explore.h"
#include "slow_unpark.h"
#include "still_clock.h"
#include "store_buffer.h"
#include "task.h"

LAB_SUITE(chan_rules, 10);
LAB_SUITE(mutex_rules, 10);
LAB_SUITE(budget_rules, 10);
LAB_SUITE(idle_rules, 10);
LAB_SUITE(lifo_rules, 10);

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

/* A send that frees a waiting receiver, a receive that frees a waiting
 * sender (a bounded channel of one): each wakes the other side while the
 * waking thread holds no lock at all, the channel's or any other. */
LAB_TEST(chan_rules, wakes_outside_every_lock, 5)
{
    for (int side = 0; side < 2; side++) { /* 0: a send wakes a receiver; 1: a receive wakes a sender */
        const char *what = side == 0 ? "a send into an empty bounded channel woke the waiting receive"
                                     : "a receive from a full bounded channel woke the waiting send";
        struct chan *c = chan_new(1);
        cr_assert_not_null(c, "chan_new(1) returned NULL");
        struct explore_waker *ew = explore_waker_new(side == 0 ? "receiver" : "sender");
        struct waker w = explore_waker_get(ew);
        struct context cx = context_from_waker(&w);
        struct waker nw = noop_waker();
        struct context ncx = context_from_waker(&nw);
        enum chan_status st;
        uint64_t v = 0;
        struct chan_recv r, taker;
        struct chan_send s, giver;
        if (side == 0) {
            chan_recv_init(&r, c);
            cr_assert_eq(chan_recv_poll(&r, &cx, &v, &st), POLL_PENDING, "a receive on an empty channel was Ready");
            chan_send_init(&giver, c, 5);
            lab_sync_reset();
            lab_sync_track(true);
            enum poll p = chan_send_poll(&giver, &ncx, &st);
            lab_sync_track(false);
            cr_assert_eq(p, POLL_READY, "a send into an empty channel of capacity 1 waited");
            chan_send_drop(&giver);
        } else {
            cr_assert(chan_try_send(c, 1), "chan_try_send on an empty channel of capacity 1 failed");
            chan_send_init(&s, c, 2);
            cr_assert_eq(chan_send_poll(&s, &cx, &st), POLL_PENDING, "a send on a full channel was Ready");
            chan_recv_init(&taker, c);
            lab_sync_reset();
            lab_sync_track(true);
            enum poll p = chan_recv_poll(&taker, &ncx, &v, &st);
            lab_sync_track(false);
            cr_assert_eq(p, POLL_READY, "a receive on a full channel waited");
            chan_recv_drop(&taker);
        }
        const char *bad = lab_sync_wake_under_lock();
        cr_assert_eq(explore_waker_woken(ew), 1u, "%s %u times, not once (channel.h contract 3)", what,
                     explore_waker_woken(ew));
        cr_assert_null(bad, "%s: %s (channel.h contract 3: the waiter is woken, after every lock is released)",
                       what, bad);
        if (side == 0) {
            cr_assert_eq(chan_recv_poll(&r, &cx, &v, &st), POLL_READY, "the woken receive was not Ready");
            chan_recv_drop(&r);
        } else {
            cr_assert_eq(chan_send_poll(&s, &cx, &st), POLL_READY, "the woken send was not Ready");
            chan_send_drop(&s);
        }
        chan_free(c);
        cr_assert_eq(explore_waker_live(ew), 1, "the channel kept a reference to the waker");
        explore_waker_free(ew);
    }
}

/* The budget from the other side: a send polled with the budget spent sends
 * nothing, a receive polled with it spent takes nothing, on a bounded and
 * an unbounded channel; both answer Pending and the message is where it
 * was. */
LAB_TEST(chan_rules, spent_budget_sends_and_takes_nothing, 5)
{
    for (int bounded = 0; bounded < 2; bounded++) {
        const char *kind = bounded ? "a bounded channel with room" : "an unbounded channel";
        struct chan *c = chan_new(bounded ? 4 : 0);
        cr_assert_not_null(c, "chan_new failed");
        struct waker nw = noop_waker();
        struct context cx = context_from_waker(&nw);
        enum chan_status st;
        uint64_t v = 0;
        struct chan_send s;
        chan_send_init(&s, c, 7);
        coop_reset(0);
        enum poll sent = chan_send_poll(&s, &cx, &st);
        coop_unlimit();
        chan_send_drop(&s);
        struct chan_recv r;
        chan_recv_init(&r, c);
        enum poll got = chan_recv_poll(&r, &cx, &v, &st);
        chan_recv_drop(&r);
        cr_assert(sent == POLL_PENDING && got == POLL_PENDING, "a send on %s polled with the budget spent answered "
                  "%s, and a receive then %s: a poll with the budget spent is Pending having sent nothing "
                  "(channel.h contract 4)", kind, sent == POLL_READY ? "Ready" : "Pending",
                  got == POLL_READY ? "found the message" : "found nothing");
        cr_assert(chan_try_send(c, 9), "chan_try_send on %s failed", kind);
        chan_recv_init(&r, c);
        coop_reset(0);
        got = chan_recv_poll(&r, &cx, &v, &st);
        coop_unlimit();
        chan_recv_drop(&r);
        cr_assert_eq(got, POLL_PENDING, "a receive on %s holding a message, polled with the budget spent, was "
                     "Ready: a poll with the budget spent is Pending (channel.h contract 4)", kind);
        chan_recv_init(&r, c);
        got = chan_recv_poll(&r, &cx, &v, &st);
        chan_recv_drop(&r);
        cr_assert(got == POLL_READY && st == CHAN_OK && v == 9, "after a receive polled with the budget spent, "
                  "the message was gone from %s: that poll took it and returned Pending, and nobody got it "
                  "(channel.h contract 4)", kind);
        chan_free(c);
    }
}

/* A full channel of capacity 1, two senders queued on it (of 2, then 3);
 * a receive frees the slot and wakes the first. A newcomer's send (of 4),
 * polled before or after the woken sender: the second sender is still
 * queued, so the newcomer's message comes after its 3 (channel.h contract
 * 3: waiters in FIFO order; a newcomer does not pass a queued sender). */
LAB_TEST(chan_rules, newcomer_send_does_not_pass_a_queued_sender, 5)
{
    for (int newcomer_first = 0; newcomer_first < 2; newcomer_first++) {
        struct chan *c = chan_new(1);
        cr_assert_not_null(c, "chan_new(1) returned NULL");
        struct waker nw = noop_waker();
        struct context cx = context_from_waker(&nw);
        enum chan_status st;
        uint64_t v = 0;
        cr_assert(chan_try_send(c, 1), "chan_try_send on an empty channel of capacity 1 failed");
        struct chan_send s[3]; /* the first queued, the second queued, the newcomer */
        bool sent[3] = { false, false, false };
        for (int i = 0; i < 2; i++) {
            chan_send_init(&s[i], c, 2 + (uint64_t)i);
            cr_assert_eq(chan_send_poll(&s[i], &cx, &st), POLL_PENDING, "a send on a full channel was Ready");
        }
        struct chan_recv r;
        chan_recv_init(&r, c);
        cr_assert_eq(chan_recv_poll(&r, &cx, &v, &st), POLL_READY, "a receive on a full channel waited");
        chan_recv_drop(&r);
        chan_send_init(&s[2], c, 4);
        static const int order[2][3] = { { 0, 1, 2 }, { 2, 0, 1 } };
        uint64_t got[3] = { 0, 0, 0 };
        unsigned n = 0;
        for (int round = 0; round < 8 && n < 3; round++) {
            for (int k = 0; k < 3; k++) {
                int i = order[round == 0 ? newcomer_first : 0][k];
                if (!sent[i])
                    sent[i] = chan_send_poll(&s[i], &cx, &st) == POLL_READY;
            }
            chan_recv_init(&r, c);
            if (chan_recv_poll(&r, &cx, &v, &st) == POLL_READY)
                got[n++] = v;
            chan_recv_drop(&r);
        }
        cr_assert(n == 3 && got[0] == 2 && got[1] == 3 && got[2] == 4, "capacity 1, full; sends of 2 and then 3 "
                  "queued; a receive freed the slot; a new send of 4 polled %s the first queued send; the messages "
                  "then received were %llu, %llu, %llu (%u of 3): the new send went before a sender that was "
                  "queued before it (channel.h contract 3: waiters in FIFO order)",
                  newcomer_first ? "before" : "after", (unsigned long long)got[0], (unsigned long long)got[1],
                  (unsigned long long)got[2], n);
        for (int i = 0; i < 3; i++)
            chan_send_drop(&s[i]);
        chan_free(c);
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

/* ---- the async mutex: one waiter ------------------------------------------------------ */

/* One holder, exactly one waiter. The holder unlocks: the mutex is the
 * waiter's from then on, so of a newcomer's lock and the waiter's, polled
 * after the unlock in either order, at most one is Ready before the next
 * unlock: two Ready are two holders at once. */
LAB_TEST(mutex_rules, unlock_with_one_waiter_leaves_one_holder, 5)
{
    for (int newcomer_first = 0; newcomer_first < 2; newcomer_first++) {
        struct async_mutex m;
        cr_assert_eq(async_mutex_init(&m), 0, "async_mutex_init failed");
        struct waker nw = noop_waker();
        struct context cx = context_from_waker(&nw);
        struct async_mutex_lock holder, waiter, newcomer;
        async_mutex_lock_init(&holder, &m);
        cr_assert_eq(async_mutex_lock_poll(&holder, &cx), POLL_READY, "a lock of a free mutex waited");
        async_mutex_lock_init(&waiter, &m);
        cr_assert_eq(async_mutex_lock_poll(&waiter, &cx), POLL_PENDING, "a second lock of a held mutex was Ready");
        async_mutex_unlock(&m);
        async_mutex_lock_init(&newcomer, &m);
        enum poll pn, pw;
        if (newcomer_first) {
            pn = async_mutex_lock_poll(&newcomer, &cx);
            pw = async_mutex_lock_poll(&waiter, &cx);
        } else {
            pw = async_mutex_lock_poll(&waiter, &cx);
            pn = async_mutex_lock_poll(&newcomer, &cx);
        }
        cr_assert(!(pn == POLL_READY && pw == POLL_READY), "a holder, one waiter queued behind it, the holder's "
                  "unlock, then a new lock and the waiter's lock polled (%s first): both were Ready, with no "
                  "unlock between them: two tasks held the mutex at once (channel.h, the async mutex: unlock "
                  "hands the mutex straight to the first waiter)", newcomer_first ? "the new lock" : "the waiter");
        struct async_mutex_lock *mine[] = { &waiter, &newcomer };
        enum poll got[] = { pw, pn };
        for (int i = 0; i < 2; i++)
            if (got[i] == POLL_PENDING)
                async_mutex_lock_drop(mine[i]);
        for (int i = 0; i < 2; i++)
            if (got[i] == POLL_READY) {
                async_mutex_unlock(&m);
                async_mutex_lock_drop(mine[i]);
            }
        async_mutex_lock_drop(&holder);
        async_mutex_destroy(&m);
    }
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
                         "spending %d units a poll, so a poll that does not begin with a budget of its own "
                         "shows it here (runtime.h contract 4: before each poll). The next hint: "
                         "make hint STAGE=7 ITEM=budget",
                         i + 1, who ? 'b' : 'a', p->starts[i] == UINT_MAX ? "unlimited, not " : "",
                         p->starts[i] == UINT_MAX ? COOP_BUDGET_DEFAULT : p->starts[i], COOP_BUDGET_DEFAULT,
                         SPEND);
    }
}

/* ---- a local push wakes an idle worker ------------------------------------------------ */

/* The driver of the runtime: a clock that stands still (still_clock.h): a
 * park with a timeout ends only by an unpark, since its timeout is counted
 * on a clock that never moves; a zero-timeout park (the worker's look at
 * the timers every 61 ticks) returns at once. So a worker parked there
 * cannot find work by its watch's timeout: only a notify brings it back.
 * It knows who parked by ws_current_worker(). */

enum local_push_how { PUSH_SPAWN, PUSH_WAKE };

struct local_push {
    struct ws_runtime *rt;
    struct still_clock *clock;
    enum local_push_how how;
    struct slot woken[2];  /* PUSH_WAKE: the wakers of two waiting tasks */
    atomic_uint polled;    /* PUSH_WAKE: first polls of those two */
    int pusher;            /* the worker that ran the pushing task */
    int idle;              /* the worker parked in the driver at the push, or -1 */
    atomic_int ran_on;     /* the worker that first ran a pushed task, -1 until one ran */
    bool ran_in_time;      /* one ran while the pushing task was still in its poll, within 2 s */
    bool ran_late;         /* one ran after the 2 s, before the pushing task's poll ended */
    unsigned parks_before, parks_at_push, unparks_before, unparks_at_push, parks_after, unparks_after;
};

static void pushed_runs(struct local_push *lp)
{
    int none = -1;
    atomic_compare_exchange_strong(&lp->ran_on, &none, ws_current_worker());
}

/* PUSH_SPAWN: the child the pushing task spawns. */
static enum poll step_pushed(void *arg, struct context *cx, unsigned nth)
{
    (void)cx;
    (void)nth;
    pushed_runs(arg);
    return POLL_READY;
}

/* PUSH_WAKE: a task that waits (its waker in woken[i]) until the pushing
 * task wakes it. */
struct woken_arg {
    struct local_push *lp;
    unsigned i;
};

static enum poll step_woken(void *arg, struct context *cx, unsigned nth)
{
    struct woken_arg *a = arg;
    if (nth == 1) {
        slot_store(&a->lp->woken[a->i], cx);
        atomic_fetch_add(&a->lp->polled, 1);
        return POLL_PENDING;
    }
    pushed_runs(a->lp);
    return POLL_READY;
}

static bool pushed_ran(void *arg) { return atomic_load(&((struct local_push *)arg)->ran_on) >= 0; }
static bool both_waiting(void *arg) { return atomic_load(&((struct local_push *)arg)->polled) == 2; }

/* On a worker: waits until the other worker sleeps in the driver, pushes
 * onto its own worker's queues (PUSH_SPAWN: spawns a child; PUSH_WAKE: wakes
 * two waiting tasks, so that at least one goes to the deque whatever the
 * LIFO slot keeps), then stays in its poll up to 2 s waiting for a pushed
 * task to run elsewhere. */
static enum poll step_local_pusher(void *arg, struct context *cx, unsigned nth)
{
    (void)cx;
    (void)nth;
    struct local_push *lp = arg;
    lp->pusher = ws_current_worker();
    lp->idle = still_clock_wait_parked(lp->clock, lp->pusher, RESCUE_MS);
    if (lp->idle < 0)
        return POLL_READY;
    struct still_counts before = still_clock_counts(lp->clock);
    lp->parks_before = before.parks;
    lp->unparks_before = before.unparks;
    if (lp->how == PUSH_SPAWN) {
        join_handle_drop(spawn_step(lp->rt, step_pushed, lp));
    } else {
        slot_wake(&lp->woken[0]);
        slot_wake(&lp->woken[1]);
    }
    /* A notify unparks the sleeper from this thread, inside the push, and
     * returns once the sleeper parked again (slow_unpark.h). */
    struct still_counts at_push = still_clock_counts(lp->clock);
    lp->ran_in_time = wait_until(pushed_ran, lp, SCALED_MS(2000));
    struct still_counts after = still_clock_counts(lp->clock);
    lp->parks_at_push = at_push.parks;
    lp->unparks_at_push = at_push.unparks;
    lp->parks_after = after.parks;
    lp->unparks_after = after.unparks;
    lp->ran_late = !lp->ran_in_time && pushed_ran(lp); /* just now: its park, if any, came after it */
    return POLL_READY;
}

/* Two workers on a driver whose clock stands still. Task 1 runs on one of
 * them and waits until the other is parked in the driver; then it pushes
 * onto its own worker's queues and stays in its poll. The push must wake the
 * parked worker, which steals the pushed task and runs it while task 1
 * still waits: a push that notifies nobody leaves it behind task 1's long
 * poll although a worker sat idle (runtime.h contract 2). */
static void local_push_wakes(enum local_push_how how)
{
    const char *what = how == PUSH_SPAWN ? "spawned a task (onto its own deque)"
                                         : "woke two waiting tasks (one to the LIFO slot, one to its own deque)";
    struct still_clock *clock = still_clock_new(UINT64_C(1000000000), 0, ws_current_worker);
    cr_assert_not_null(clock, "out of memory");
    struct slow_unpark d; /* an unpark returns once the woken worker parked again: a notify before the push is lost */
    struct ws_runtime *rt = ws_runtime_new(2, slow_unpark_driver(&d, still_clock_driver(clock), 200));
    cr_assert_not_null(rt, "ws_runtime_new(2, driver) returned NULL");
    struct local_push lp;
    memset(&lp, 0, sizeof lp);
    lp.rt = rt;
    lp.clock = clock;
    lp.how = how;
    atomic_init(&lp.ran_on, -1);
    atomic_init(&lp.polled, 0);
    slot_init(&lp.woken[0]);
    slot_init(&lp.woken[1]);
    struct woken_arg args[2] = { { &lp, 0 }, { &lp, 1 } };
    if (how == PUSH_WAKE) {
        join_handle_drop(spawn_step(rt, step_woken, &args[0]));
        join_handle_drop(spawn_step(rt, step_woken, &args[1]));
        cr_assert(wait_until(both_waiting, &lp, RESCUE_MS), "two tasks spawned from outside were not both "
                  "polled within 3 s");
    }
    bool done = join_within(spawn_step(rt, step_local_pusher, &lp), SCALED_MS(8000));
    cr_assert(done, "the pushing task never finished (it waits 2 s at the most for what it pushed)");
    unsigned parks = still_clock_counts(clock).parks;
    if (lp.idle < 0) {
        /* the other worker parks in the driver within milliseconds on a
         * free machine; one that parked there before and is not back
         * within 3 s was held off the CPU */
        cr_assert(parks > 0, "while task 1 ran on worker %d, the other worker never parked in the runtime's "
                  "driver (3 s): an idle worker parks, the first one in the driver (runtime.h contract 5)",
                  lp.pusher);
        lab_cannot_judge("while task 1 ran on worker %d, the other worker did not get back to its park in the "
                         "driver within 3 s (it had parked there %u time(s) before): the machine is too "
                         "loaded to set up the push", lp.pusher, parks);
    }
    lab_note("worker %d %s while worker %d was parked in the driver; the driver was unparked %u time(s) during "
             "the push, %u in all by the end of the wait; a pushed task first ran on worker %d", lp.pusher, what,
             lp.idle, lp.unparks_at_push - lp.unparks_before, lp.unparks_after - lp.unparks_before,
             atomic_load(&lp.ran_on));
    ws_runtime_free(rt);
    slot_destroy(&lp.woken[0]);
    slot_destroy(&lp.woken[1]);
    still_clock_free(clock);
    if (lp.ran_in_time)
        return;
    /* What the push did is read inside it, on the pushing thread: it woke
     * the driver or it did not, whatever the machine's load. */
    cr_assert(lp.unparks_at_push != lp.unparks_before,
              "task 1, on worker %d, %s while worker %d was parked in the driver (the only way back from there "
              "is an unpark: the driver's clock stands still), then ran a long poll; the push unparked nobody, "
              "and nothing it pushed ran in 2 s. Which queues do the other workers look at, and who tells a "
              "sleeping one that there is something in them (runtime.h contract 2: nothing queued is stranded "
              "while a worker is idle)? The next hint: make hint STAGE=7 ITEM=local-push-wakes",
              lp.pusher, what, lp.idle);
    if (lp.ran_late)
        lab_cannot_judge("task 1's push unparked the sleeping worker %d, which ran what was pushed only after "
                         "2 s: it was held off the CPU (the machine is loaded)", lp.idle);
    cr_assert(lp.parks_after == lp.parks_before,
              "task 1, on worker %d, %s while worker %d was parked in the driver; the push unparked it, but it "
              "parked again (%u time(s)) without running what was pushed (2 s): where does a woken worker look "
              "for work, was the task already in one of those places when the notify woke it, and is a task in "
              "another worker's deque or LIFO slot among them (runtime.h contract 2)?",
              lp.pusher, what, lp.idle, lp.parks_after - lp.parks_before);
    lab_cannot_judge("task 1's push unparked the sleeping worker %d, which neither ran what was pushed nor "
                     "parked again in 2 s: it was held off the CPU (the machine is loaded)", lp.idle);
}

LAB_TEST(idle_rules, local_push_wakes_an_idle_worker, 10)
{
    local_push_wakes(PUSH_SPAWN);
}

LAB_TEST(idle_rules, local_wake_wakes_an_idle_worker, 10)
{
    local_push_wakes(PUSH_WAKE);
}

/* ---- a wake from outside: queued before the sleeper is unparked ---------------------- */

/* Polled once: keeps its waker in the slot and waits; Ready the next time. */
static enum poll step_stash_then_ready(void *arg, struct context *cx, unsigned nth)
{
    if (nth > 1) /* nth counts from 1 */
        return POLL_READY;
    slot_store(arg, cx);
    return POLL_PENDING;
}

/* One worker, asleep in the driver; a task's waker woken from the test's own
 * thread. The driver's unpark, once it has left the token, returns only
 * after the worker has parked again (slow_unpark.h): the worker wakes, looks
 * at every queue and goes back to sleep before the waking thread goes on. A
 * wake that unparks before its task is on the injector leaves the task there
 * with the only worker asleep for good; the driver's clock stands still, so
 * no timeout looks again (runtime.h contract 2). */
LAB_TEST(idle_rules, outside_wake_queued_before_the_unpark, 10)
{
    struct still_clock *clock = still_clock_new(UINT64_C(1000000000), 0, ws_current_worker);
    cr_assert_not_null(clock, "out of memory");
    struct slow_unpark d;
    struct ws_runtime *rt = ws_runtime_new(1, slow_unpark_driver(&d, still_clock_driver(clock), 200));
    cr_assert_not_null(rt, "ws_runtime_new(1, driver) returned NULL");
    struct slot s;
    slot_init(&s);
    struct join_handle *jh = spawn_step(rt, step_stash_then_ready, &s);
    cr_assert(wait_until(slot_filled, &s, RESCUE_MS), "a task spawned from outside (a schedule from outside, like "
              "the wake this test makes next) was not polled within 3 s by the only worker, on a driver whose "
              "unpark returns only once the worker has parked again. If the spawn woke it, when the worker looked, "
              "what must it already have found, and in which order does a schedule from outside do its two steps "
              "(runtime.h contract 2)?");
    if (still_clock_wait_parked(clock, -1, RESCUE_MS) < 0)
        lab_cannot_judge("the only worker did not park in the driver within 3 s of its task's first poll: the "
                         "machine is too loaded to set up the wake");
    unsigned parks = still_clock_counts(clock).parks;
    slot_wake(&s); /* from outside; the driver's unpark returns once the worker parked again */
    bool done = join_within(jh, SCALED_MS(1000));
    struct still_counts after = still_clock_counts(clock);
    ws_runtime_free(rt);
    slot_destroy(&s);
    still_clock_free(clock);
    cr_assert(done, "a wake from outside while the only worker slept in the driver: the driver's unpark let the "
              "worker wake, look at every queue and park again (%u park(s) after the wake) before the waking "
              "thread went on, and the woken task then waited 1 s, never polled again. When the worker wakes, "
              "what must it already find, and in which order does a wake from outside do its two steps "
              "(runtime.h contract 2)?", after.parks - parks);
}

/* ---- a notify that reads the idle word while its push is in a store buffer ----------- */

/* The idle protocol is the store-buffer shape (docs/07-work-stealing.md#the-
 * idle-protocol): the pusher stores the task (its deque's bottom) and then
 * reads the idle word; the worker going to sleep writes the word (its
 * announcement) and then reads the queues. Each must see the other's write,
 * so both reads need a full barrier before them: the worker's announcement
 * is a read-modify-write, and so must be the notify's read (or a seq_cst
 * fence before it). A load, of any order, passes the push still waiting in
 * the pusher's store buffer: it reads "nobody sleeps" (true then), the
 * worker announces, looks, does not see the task (still buffered) and
 * parks. On real hardware that takes a window of a few nanoseconds; here it
 * is forced, every run:
 *
 *   - the pusher's deque keeps its bottom store in a simulated store buffer
 *     (deque_test_delay_stores, as the take-fence test does);
 *   - the spawn runs under store_buffer.h's lab_sb_run: single-stepped, the
 *     buffer drained right before any instruction that would drain a real
 *     one (a locked RMW, xchg, mfence), and the pusher stopped right after
 *     its first access to the idle word (alone on its page, which is
 *     protected) made while the push is still buffered;
 *   - the other worker, held at WS_TEST_BEFORE_PARK (it searched and found
 *     nothing) until then, announces, looks again and parks, on a driver
 *     whose clock stands still (only an unpark brings it back), while the
 *     pusher stays stopped.
 * A notify that read the word with an RMW drained the buffer first: the
 * worker's second look finds the task. One that read it with a load woke
 * nobody, and the worker sleeps next to the task until the pusher's long
 * poll ends. The verdict is what ran: the task must run on the other worker
 * while the pusher is still in its poll (2 s). */
struct sb_push {
    struct ws_runtime *rt;
    struct still_clock *clock;
    struct deque *d;          /* the pusher's deque */
    atomic_int pusher;        /* the worker running the pushing task, -1 until known */
    atomic_bool poke_ran;     /* the other worker ran the poke: it searches next, then comes to the hook */
    atomic_int armed;         /* 1: hold the next worker but the pusher at WS_TEST_BEFORE_PARK */
    int held;                 /* the worker held there */
    struct gate reached, go;  /* held; let go */
    bool setup;               /* the other worker was held before the push */
    bool ran_setup;           /* lab_sb_run could run here */
    struct lab_sb_result sb;
    unsigned parks_at_let_go;
    bool parked_in_hold;      /* the other worker parked while the pusher was stopped */
    atomic_int ran_on;        /* the worker that ran the pushed task, -1 until it ran */
    bool ran_in_time;
    bool buffered_after;      /* the push was still in the buffer when the spawn returned */
    struct join_handle *jh;   /* the pushed task's */
};

static void sb_hook(struct ws_runtime *rt, enum ws_test_point where, unsigned worker, void *arg)
{
    (void)rt;
    struct sb_push *st = arg;
    if (where != WS_TEST_BEFORE_PARK || !atomic_load(&st->poke_ran) || (int)worker == atomic_load(&st->pusher))
        return;
    int one = 1;
    if (!atomic_compare_exchange_strong(&st->armed, &one, 0))
        return;
    st->held = (int)worker;
    gate_open(&st->reached);
    gate_wait(&st->go, RESCUE_MS);
}

static enum poll step_poke(void *arg, struct context *cx, unsigned nth)
{
    (void)cx;
    (void)nth;
    atomic_store(&((struct sb_push *)arg)->poke_ran, true);
    return POLL_READY;
}

static enum poll step_sb_pushed(void *arg, struct context *cx, unsigned nth)
{
    (void)cx;
    (void)nth;
    int none = -1;
    atomic_compare_exchange_strong(&((struct sb_push *)arg)->ran_on, &none, ws_current_worker());
    return POLL_READY;
}

static bool sb_buffered(void *arg) { return deque_test_buffered(((struct sb_push *)arg)->d); }
static void sb_drain(void *arg) { deque_test_delay_stores(((struct sb_push *)arg)->d, false); }
static bool sb_pushed_ran(void *arg) { return atomic_load(&((struct sb_push *)arg)->ran_on) >= 0; }

static bool sb_other_parked_or_ran(void *arg)
{
    struct sb_push *st = arg;
    return sb_pushed_ran(st) || still_clock_counts(st->clock).parks > st->parks_at_let_go;
}

/* Right after the pusher's first access to the idle word with its push
 * still buffered (on the pusher's thread, inside the SIGTRAP handler): the
 * other worker announces, looks, and parks (or finds the task) now. */
static void sb_at(void *arg)
{
    struct sb_push *st = arg;
    st->parks_at_let_go = still_clock_counts(st->clock).parks;
    gate_open(&st->go);
    st->parked_in_hold = wait_until(sb_other_parked_or_ran, st, SCALED_MS(1000)) && !sb_pushed_ran(st);
}

/* The stretch run under lab_sb_run: a spawn inside a task (its push goes
 * to the pusher's deque, its notify reads the idle word). */
static void sb_spawn(void *arg)
{
    struct sb_push *st = arg;
    _Alignas(max_align_t) char storage[STEP_STORAGE_SIZE];
    st->jh = ws_spawn(st->rt, step_future(storage, step_sb_pushed, st), NULL);
    st->buffered_after = deque_test_buffered(st->d);
}

/* The pushing task, on worker P: has the other worker run a poke (so it is
 * awake and searching) and waits until it is held before its announcement;
 * then spawns with its push buffered, under lab_sb_run; lets the other
 * worker go (if the stretch did not) and stays in its poll up to 2 s
 * waiting for the pushed task to run there. */
static enum poll step_sb_pusher(void *arg, struct context *cx, unsigned nth)
{
    (void)cx;
    (void)nth;
    struct sb_push *st = arg;
    atomic_store(&st->pusher, ws_current_worker());
    atomic_store(&st->armed, 1);
    join_handle_drop(spawn_step(st->rt, step_poke, st));
    st->setup = gate_wait(&st->reached, RESCUE_MS);
    st->d = ws_test_own_deque();
    if (!st->setup || !st->d) {
        atomic_store(&st->armed, 0);
        gate_open(&st->go); /* a worker held after all goes on */
        return POLL_READY;
    }
    deque_test_delay_stores(st->d, true);
    struct lab_sb sb = { .page = ws_test_idle_page(st->rt), .buffered = sb_buffered, .drain = sb_drain,
                         .at = sb_at, .arg = st };
    st->ran_setup = lab_sb_run(&sb, sb_spawn, st, &st->sb);
    gate_open(&st->go); /* if the stretch never stopped after an access to the idle word */
    if (st->ran_setup)
        st->ran_in_time = wait_until(sb_pushed_ran, st, SCALED_MS(2000));
    deque_test_delay_stores(st->d, false); /* the buffer drains: the task is visible now */
    return POLL_READY;
}

LAB_TEST(idle_rules, notify_reads_the_idle_word_past_a_store_buffer, 15)
{
#if !defined(__x86_64__)
    lab_cannot_judge("the store buffer is simulated by single-stepping with x86-64's trap flag; this machine is "
                     "not x86-64");
#else
    struct sb_push st;
    memset(&st, 0, sizeof st);
    st.clock = still_clock_new(UINT64_C(1000000000), 0, ws_current_worker);
    cr_assert_not_null(st.clock, "out of memory");
    st.rt = ws_runtime_new(2, still_clock_driver(st.clock));
    cr_assert_not_null(st.rt, "ws_runtime_new(2, driver) returned NULL");
    atomic_init(&st.pusher, -1);
    atomic_init(&st.poke_ran, false);
    atomic_init(&st.armed, 0);
    atomic_init(&st.ran_on, -1);
    gate_init(&st.reached);
    gate_init(&st.go);
    ws_test_set_hook(st.rt, sb_hook, &st);
    bool done = join_within(spawn_step(st.rt, step_sb_pusher, &st), SCALED_MS(8000));
    ws_test_set_hook(st.rt, NULL, NULL);
    if (st.jh)
        join_handle_drop(st.jh);
    ws_runtime_free(st.rt);
    still_clock_free(st.clock);
    gate_destroy(&st.reached);
    gate_destroy(&st.go);
    cr_assert(done, "the pushing task never finished (it waits 2 s at the most for what it pushed)");
    cr_assert(st.setup || atomic_load(&st.poke_ran), "a task spawned inside a task (onto its worker's own deque) "
              "while the other worker slept never ran there in 3 s: the push woke nobody (runtime.h contract 2: "
              "nothing queued is stranded while a worker is idle)");
    if (!st.setup)
        lab_cannot_judge("the other worker ran the first task but did not come back to its way to sleep "
                         "(WS_TEST_BEFORE_PARK) within 3 s: the machine is too loaded to set up the push");
    if (!st.ran_setup || !st.d)
        lab_cannot_judge("the simulated store buffer needs single-stepping and a protected page, which this "
                         "machine refused");
    if (st.sb.foreign)
        lab_cannot_judge("another thread touched the idle word while the push was being made: the timing "
                         "could not be forced");
    lab_note("the spawn ran %ld instructions, %ld of them drained the store buffer with the push in it; the "
             "notify %s the idle word with the push still buffered%s; the other worker %s; the pushed task "
             "ran on worker %d", st.sb.steps, st.sb.drains, st.sb.watched ? "accessed" : "never accessed",
             st.sb.watched ? " (the pusher was stopped there)" : "",
             st.parked_in_hold ? "announced, looked again and parked meanwhile" : "did not park meanwhile",
             atomic_load(&st.ran_on));
    if (st.ran_in_time)
        return;
    cr_assert(!st.sb.watched, "worker %d spawned a task (onto its own deque) while worker %d was on its way to "
              "sleep, with the push held in a (simulated) store buffer, as a real core holds a store until a "
              "locked instruction or a fence drains it. The notify then read the idle word, and nothing it had "
              "run since the push had drained that buffer. It read \"not asleep\" (true "
              "then); worker %d then announced that it sleeps, looked at every queue (the push still buffered, so "
              "not there) and %s, and the task did not run in 2 s while worker %d stayed in its poll. Both sides "
              "of the idle protocol write one word and then read another (the store-buffer shape): which kind of "
              "access to the idle word makes the push visible first, and reads the announcement if it came "
              "first (runtime.h contract 2)? The next hint: make hint STAGE=7 ITEM=local-push-wakes",
              atomic_load(&st.pusher), st.held, st.held, st.parked_in_hold ? "parked" : "went on to park",
              atomic_load(&st.pusher));
    cr_assert(!st.buffered_after, "worker %d spawned a task (onto its own deque) while worker %d was on its way "
              "to sleep, with the push held in a (simulated) store buffer; after the push the spawn neither "
              "touched the idle word nor drained the buffer, and the task did not run on worker %d in 2 s while "
              "worker %d stayed in its poll: who tells the worker going to sleep about the push, and when "
              "(runtime.h contract 2)? The next hint: make hint STAGE=7 ITEM=local-push-wakes",
              atomic_load(&st.pusher), st.held, st.held, atomic_load(&st.pusher));
    lab_cannot_judge("the push was made visible (the buffer drained) before the notify read the idle word, and "
                     "yet the task did not run on worker %d in 2 s: the machine is too loaded, or the worker "
                     "going to sleep lost it (recheck-before-sleep judges that side)", st.held);
#endif
}

/* ---- the LIFO slot's queue entry is taken once ------------------------------------
 *
 * The slot holds one queue reference: filled by its worker, emptied by
 * anyone (a searcher, a sleeper's watch). A wake that fills a full slot
 * must learn which task it displaces and put its own there as one step. A
 * fill that reads the slot and then writes it has a window between the two:
 * a searcher that empties the slot there takes the task the fill read, and
 * the fill then queues that task again (the displaced one goes to the
 * deque): two queue entries, two runs. Where the window sits depends on how
 * the fill is written, so no one stop finds it: every stop does.
 *
 *   - one worker, so no searcher of the runtime's own touches the slot;
 *     tasks A and B wait, their wakers kept;
 *   - a task wakes A (into the empty slot), then wakes B under lab_sb_run:
 *     single-stepped, the slot alone on its page (ws_test_lifo_page),
 *     stopped right after its access number k to the slot, any kind;
 *   - there the test empties the slot as a searcher does (an exchange with
 *     NULL) and keeps the queue entry it took;
 *   - the wake goes on; the worker runs what is queued and goes to sleep.
 * Whatever stop, A and B each have exactly one queue entry: the one the
 * test holds is not run meanwhile, the other is run once. k = 0, 1, ...
 * until the wake ends before its access number k. */
#define LIFO_RULES_MAX_STOPS 32

struct lifo_fill {
    struct ws_runtime *rt;
    struct slot waker[2];    /* A's and B's */
    atomic_uint polls[2];
    atomic_bool finish;      /* A and B complete at their next poll */
    long k;                  /* stop after the wake's access number k to the slot */
    _Atomic(struct task *) *slot;
    bool stopped;            /* at() ran */
    struct task *taken;      /* what the test took from the slot there */
    bool ran;                /* lab_sb_run could run */
    struct lab_sb_result sb;
    int worker;
};

static enum poll lifo_waiter(struct lifo_fill *f, int me, struct context *cx)
{
    atomic_fetch_add(&f->polls[me], 1);
    if (atomic_load(&f->finish))
        return POLL_READY;
    slot_store(&f->waker[me], cx);
    return POLL_PENDING;
}
static enum poll step_lifo_a(void *arg, struct context *cx, unsigned nth)
{
    (void)nth;
    return lifo_waiter(arg, 0, cx);
}
static enum poll step_lifo_b(void *arg, struct context *cx, unsigned nth)
{
    (void)nth;
    return lifo_waiter(arg, 1, cx);
}

static bool lifo_buffered(void *arg) { return !((struct lifo_fill *)arg)->stopped; }
static void lifo_drain(void *arg) { (void)arg; }

/* On the stopped worker (in the SIGTRAP handler): a searcher's take. */
static void lifo_take(void *arg)
{
    struct lifo_fill *f = arg;
    f->stopped = true;
    /* acquire: pairs with the fill's release, as a searcher's exchange does */
    f->taken = atomic_exchange_explicit(f->slot, NULL, memory_order_acquire);
}

static void lifo_wake_b(void *arg) { slot_wake(&((struct lifo_fill *)arg)->waker[1]); }

static enum poll step_lifo_filler(void *arg, struct context *cx, unsigned nth)
{
    (void)cx;
    (void)nth;
    struct lifo_fill *f = arg;
    f->worker = ws_current_worker();
    f->slot = ws_test_lifo_page(f->rt, (unsigned)f->worker);
    if (!f->slot)
        return POLL_READY;
    slot_wake(&f->waker[0]); /* A: into the empty slot */
    struct lab_sb sb = { .page = (void *)f->slot, .buffered = lifo_buffered, .drain = lifo_drain,
                         .at = lifo_take, .arg = f, .skip = f->k };
    f->ran = lab_sb_run(&sb, lifo_wake_b, f, &f->sb);
    return POLL_READY;
}

static bool lifo_both_waiting(void *arg)
{
    struct lifo_fill *f = arg;
    return atomic_load(&f->polls[0]) >= 1 && atomic_load(&f->polls[1]) >= 1;
}

/* Which of A and B the task t is (its stored waker's task), or -1. */
static int lifo_which(struct lifo_fill *f, struct task *t)
{
    int who = -1;
    for (int i = 0; i < 2; i++) {
        pthread_mutex_lock(&f->waker[i].lock);
        if (f->waker[i].w.vtable && task_of_waker(&f->waker[i].w, t->scheduler) == t)
            who = i;
        pthread_mutex_unlock(&f->waker[i].lock);
    }
    return who;
}

struct lifo_expect {
    struct lifo_fill *f;
    unsigned want[2];
};

static bool lifo_polled_as_expected(void *arg)
{
    struct lifo_expect *e = arg;
    return atomic_load(&e->f->polls[0]) >= e->want[0] && atomic_load(&e->f->polls[1]) >= e->want[1];
}

/* One stop: fills *f; a failed assertion ends the test. Returns false when
 * the wake ended before its access number k (every stop was tried). */
static bool lifo_fill_once(long k, char *note, size_t len)
{
    struct lifo_fill f;
    memset(&f, 0, sizeof f);
    f.k = k;
    f.worker = -1;
    f.rt = new_runtime(1);
    slot_init(&f.waker[0]);
    slot_init(&f.waker[1]);
    struct join_handle *a = spawn_step(f.rt, step_lifo_a, &f);
    struct join_handle *b = spawn_step(f.rt, step_lifo_b, &f);
    cr_assert(wait_until(lifo_both_waiting, &f, RESCUE_MS), "two spawned tasks were not polled within 3 s");
    cr_assert(join_within(spawn_step(f.rt, step_lifo_filler, &f), RESCUE_MS),
              "a task that wakes two waiting tasks never finished");
    if (!f.slot)
        lab_cannot_judge("ws_test_lifo_page gave no slot for worker %d", f.worker);
    if (!f.ran)
        lab_cannot_judge("stopping the wake after an access to the slot needs single-stepping and a protected "
                         "page, which this machine refused");
    if (f.sb.foreign)
        lab_cannot_judge("another thread touched the LIFO slot while the wake was watched: the timing could not "
                         "be forced");
    if (!f.stopped) {
        snprintf(note, len, "the wake that displaced A made %ld access%s to the slot (%ld instructions run); "
                 "after each, the slot was emptied as a searcher empties it, and A and B each had one queue "
                 "entry", k, k == 1 ? "" : "es", f.sb.steps);
        atomic_store(&f.finish, true);
        slot_wake(&f.waker[0]);
        slot_wake(&f.waker[1]);
        cr_assert(join_within(a, RESCUE_MS) && join_within(b, RESCUE_MS), "the two woken tasks never finished");
        ws_runtime_free(f.rt);
        slot_destroy(&f.waker[0]);
        slot_destroy(&f.waker[1]);
        return false;
    }
    int x = f.taken ? lifo_which(&f, f.taken) : -1;
    cr_assert(!f.taken || x >= 0, "the LIFO slot held a task that is neither of the two woken ones");
    /* x's only entry is the test's now: the other runs once, x not at all */
    struct lifo_expect e = { &f, { 2, 2 } };
    if (x >= 0)
        e.want[x] = 1;
    bool ran = wait_until(lifo_polled_as_expected, &e, RESCUE_MS);
    wait_sleepers(f.rt, 1, RESCUE_MS); /* asleep 50 ms: nothing left queued */
    unsigned pa = atomic_load(&f.polls[0]) - 1, pb = atomic_load(&f.polls[1]) - 1;
    const char *names = "AB";
    if (x >= 0)
        cr_assert(atomic_load(&f.polls[x]) == 1, "worker %d woke B from inside a task while A sat in its LIFO "
                  "slot. The wake was stopped right after its access number %ld to the slot (%ld instructions "
                  "run), and there the slot was emptied as a searcher empties it (an exchange with NULL), which "
                  "took %c's queue entry. The wake then went on, and the worker polled %c again while that entry "
                  "was still the searcher's: %c had two queue entries (polls after the wakes: A %u, B %u). The slot is filled by its worker and emptied by anyone; between the fill's first look "
                  "at the slot and its last write to it, what can another thread do to what is there, and what "
                  "does the fill then believe it displaced (runtime.h contract 1)? "
                  "The next hint: make hint STAGE=7 ITEM=lifo-taken-once", f.worker, k + 1, f.sb.steps,
                  names[x], names[x], names[x], pa, pb);
    cr_assert(ran, "worker %d woke B from inside a task while A sat in its LIFO slot. The wake was stopped right "
              "after its access number %ld to the slot, and there the slot was emptied as a searcher empties it, "
              "which took %s. After the wake, the worker %s in 3 s (A polled %u times after the wakes, B %u): "
              "a queue entry was lost. Where does the task a fill displaces go, and what if the slot was emptied "
              "meanwhile (runtime.h contract 1)? The next hint: make hint STAGE=7 ITEM=lifo-taken-once",
              f.worker, k + 1, x >= 0 ? (x ? "B's entry" : "A's entry") : "nothing (it was empty)",
              x >= 0 ? "did not run the other task" : "did not run both tasks", pa, pb);
    cr_assert(pa <= 1 && pb <= 1, "worker %d woke A, then B, from inside a task, the wake of B stopped right "
              "after its access number %ld to the LIFO slot and the slot emptied there; polls after the wakes: "
              "A %u, B %u: one wake makes one queue entry (runtime.h contract 1). The next hint: make hint "
              "STAGE=7 ITEM=lifo-taken-once", f.worker, k + 1, pa, pb);
    /* give the test's entry back, as the searcher would have run it */
    atomic_store(&f.finish, true);
    if (f.taken)
        f.taken->scheduler->vtable->schedule(f.taken->scheduler, f.taken, SCHEDULE_WAKE);
    slot_wake(&f.waker[0]);
    slot_wake(&f.waker[1]);
    cr_assert(join_within(a, RESCUE_MS) && join_within(b, RESCUE_MS), "the two woken tasks never finished once "
              "the entry taken from the slot was given back");
    ws_runtime_free(f.rt);
    slot_destroy(&f.waker[0]);
    slot_destroy(&f.waker[1]);
    return true;
}

LAB_TEST(lifo_rules, fill_stopped_after_every_access_of_the_slot, 20)
{
#if !defined(__x86_64__)
    lab_cannot_judge("the wake is stopped by single-stepping with x86-64's trap flag; this machine is not x86-64");
#else
    char note[512] = "";
    long k = 0;
    while (k < LIFO_RULES_MAX_STOPS && lifo_fill_once(k, note, sizeof note))
        k++;
    if (k == LIFO_RULES_MAX_STOPS)
        snprintf(note, sizeof note, "the wake that displaced A was stopped after each of its first %d accesses "
                 "to the LIFO slot, and A and B each had one queue entry every time", LIFO_RULES_MAX_STOPS);
    lab_note("%s", note);
#endif
}
