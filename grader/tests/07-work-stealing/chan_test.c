/* chan_test.c - the channel and the mutex on the runtime. */
#include <stdlib.h>
#include <string.h>

#include "channel.h"
#include "coop.h"
#include "stage07.h"

LAB_SUITE(chan, 20);

/* A producer: sends from..from+count-1, then (if last) nothing more. */
struct producer {
    struct chan *c;
    uint64_t next, end;
    struct chan_send s;
    bool sending;
};

static enum poll producer_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct producer *p = self;
    while (p->next < p->end) {
        if (!p->sending) {
            chan_send_init(&p->s, p->c, p->next);
            p->sending = true;
        }
        enum chan_status st;
        if (chan_send_poll(&p->s, cx, &st) == POLL_PENDING)
            return POLL_PENDING;
        cr_assert_eq(st, CHAN_OK, "a send on an open channel said CHAN_CLOSED");
        chan_send_drop(&p->s);
        p->sending = false;
        p->next++;
    }
    return POLL_READY;
}
static void producer_drop(void *self)
{
    struct producer *p = self;
    if (p->sending)
        chan_send_drop(&p->s);
}
static const struct future_vtable producer_vt = FUTURE_VTABLE_INIT(struct producer, 0, producer_poll, producer_drop);

/* A consumer: receives until CHAN_CLOSED, counting and summing; checks the
 * order of each producer's values (value / stride identifies the producer). */
struct consumer {
    struct chan *c;
    struct chan_recv r;
    bool receiving;
    uint64_t *count, *sum;
    uint64_t stride;
    uint64_t last[16];
    bool *in_order;
    unsigned *max_len; /* the largest buffered length seen, or NULL */
    atomic_uint *received; /* messages received so far, for the test's thread, or NULL */
};

static enum poll consumer_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct consumer *k = self;
    for (;;) {
        if (!k->receiving) {
            chan_recv_init(&k->r, k->c);
            k->receiving = true;
        }
        uint64_t v;
        enum chan_status st;
        if (k->max_len) {
            unsigned len = (unsigned)chan_len(k->c);
            if (len > *k->max_len)
                *k->max_len = len;
        }
        if (chan_recv_poll(&k->r, cx, &v, &st) == POLL_PENDING)
            return POLL_PENDING;
        chan_recv_drop(&k->r);
        k->receiving = false;
        if (st == CHAN_CLOSED)
            return POLL_READY;
        unsigned who = (unsigned)(v / k->stride);
        if (who < 16) {
            if (v + 1 <= k->last[who] && k->last[who] != 0)
                *k->in_order = false;
            k->last[who] = v + 1;
        }
        (*k->count)++;
        *k->sum += v;
        if (k->received)
            atomic_fetch_add(k->received, 1);
    }
}
static void consumer_drop(void *self)
{
    struct consumer *k = self;
    if (k->receiving)
        chan_recv_drop(&k->r);
}
static const struct future_vtable consumer_vt = FUTURE_VTABLE_INIT(struct consumer, 0, consumer_poll, consumer_drop);

struct all_in {
    atomic_uint *received;
    unsigned want;
};
static bool all_received(void *arg)
{
    struct all_in *a = arg;
    return atomic_load(a->received) == a->want;
}

static unsigned long received_so_far(void *arg)
{
    return atomic_load((atomic_uint *)arg);
}

static void run_channel(size_t capacity, unsigned producers, uint64_t per, const char *what)
{
    struct ws_runtime *rt = new_runtime(2);
    struct chan *c = chan_new(capacity);
    cr_assert_not_null(c, "chan_new failed");
    uint64_t count = 0, sum = 0;
    bool in_order = true;
    unsigned max_len = 0;
    atomic_uint received;
    atomic_init(&received, 0);
    uint64_t stride = UINT64_C(1) << 32;
    struct consumer k = { .c = c, .count = &count, .sum = &sum, .stride = stride, .in_order = &in_order,
                          .max_len = &max_len, .received = &received };
    struct join_handle *kj = ws_spawn(rt, future_of(&consumer_vt, &k), NULL);
    struct join_handle *pj[16];
    for (unsigned i = 0; i < producers; i++) {
        struct producer p = { .c = c, .next = i * stride, .end = i * stride + per };
        pj[i] = ws_spawn(rt, future_of(&producer_vt, &p), NULL);
        cr_assert_not_null(pj[i], "ws_spawn failed");
    }
    /* Messages flow all the time in a channel that wakes its waiters: 2 s
     * with none received is a lost wake, not slowness (the runtime has two
     * workers and nothing else to do). */
    bool ok = true, stalled = false;
    for (unsigned i = 0; i < producers; i++) {
        bool now_stalled = false;
        ok = join_while_progress(pj[i], received_so_far, &received, stalled ? 0 : SCALED_MS(2000),
                                 SCALED_MS(10000), &now_stalled) && ok;
        stalled = stalled || now_stalled;
    }
    cr_assert(ok, "%s: a producer never finished%s, %u of %u messages received: a waiter was never woken (a "
              "send waiting for room when a message was received, or a receive waiting for a message when "
              "one was sent; channel.h contract 3: one waiter woken per message or freed slot)", what,
              stalled ? ": no message was received for 2 s" : "", atomic_load(&received),
              (unsigned)(producers * per));
    struct all_in all = { .received = &received, .want = (unsigned)(producers * per) };
    bool drained = wait_until(all_received, &all, SCALED_MS(5000));
    cr_assert(drained, "%s: %u of %u messages received, and the consumer waited while the rest sat in the "
              "channel (before any close): a send must wake a waiting receiver (channel.h contract 3)", what,
              atomic_load(&received), all.want);
    chan_close(c);
    cr_assert(join_within(kj, SCALED_MS(10000)), "%s: the consumer never finished: a receive waiting for a "
              "message was not woken by a send (channel.h contract 3), or by close (contract 5)", what);
    uint64_t want_sum = 0;
    for (unsigned i = 0; i < producers; i++)
        want_sum += per * (i * stride) + per * (per - 1) / 2;
    lab_note("%s: %llu messages, most buffered at once %u", what, (unsigned long long)count, max_len);
    cr_assert_eq(count, producers * per, "%s: %llu messages received, %llu sent", what,
                 (unsigned long long)count, (unsigned long long)(producers * per));
    cr_assert_eq(sum, want_sum, "%s: the messages received are not the ones sent", what);
    cr_assert(in_order, "%s: one producer's messages arrived out of order (channel.h contract 1)", what);
    if (capacity)
        cr_assert_leq(max_len, capacity, "%s: %u messages were buffered in a channel of capacity %zu: a "
                      "send must wait while the channel is full (channel.h contract 2)", what, max_len, capacity);
    ws_runtime_free(rt);
    chan_free(c);
}

LAB_TEST(chan, bounded_backpressure, 20)
{
    run_channel(4, 3, lab_scale(20000, 200), "bounded (4), 3 producers");
}

LAB_TEST(chan, unbounded_many_producers, 20)
{
    run_channel(0, 4, lab_scale(20000, 200), "unbounded, 4 producers");
}

/* Budget: a receive loop over a channel that is never empty yields after
 * 128 messages, and loses none. */
struct drain_stats {
    uint64_t got, sum, got_before_neighbour; /* the drain's thread only, read after the join */
    atomic_bool neighbour_ran;
};
struct drain {
    struct chan *c;
    struct drain_stats *st;
};

static enum poll drain_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct drain *d = self;
    for (;;) {
        struct chan_recv r;
        chan_recv_init(&r, d->c);
        uint64_t v;
        enum chan_status st;
        enum poll p = chan_recv_poll(&r, cx, &v, &st);
        chan_recv_drop(&r);
        if (p == POLL_PENDING)
            return POLL_PENDING;
        if (st == CHAN_CLOSED)
            return POLL_READY;
        d->st->got++;
        d->st->sum += v;
        if (!atomic_load(&d->st->neighbour_ran))
            d->st->got_before_neighbour = d->st->got;
    }
}
static const struct future_vtable drain_vt = FUTURE_VTABLE_INIT(struct drain, 0, drain_poll, NULL);

static enum poll step_flag(void *arg, struct context *cx, unsigned nth)
{
    (void)cx;
    (void)nth;
    atomic_store((atomic_bool *)arg, true);
    return POLL_READY;
}

struct spawn_two {
    struct drain *d;
    struct drain_stats *st;
    struct join_handle **kids;
};

static enum poll step_spawn_two(void *arg, struct context *cx, unsigned nth)
{
    (void)cx;
    (void)nth;
    struct spawn_two *t = arg;
    t->kids[0] = spawn_step(ws_current(), step_flag, &t->st->neighbour_ran);
    t->kids[1] = ws_spawn(ws_current(), future_of(&drain_vt, t->d), NULL);
    cr_assert_not_null(t->kids[1], "ws_spawn failed");
    return POLL_READY;
}

LAB_TEST(chan, receive_loop_respects_the_budget, 20)
{
    unsigned n = 10000;
    struct chan *c = chan_new(0);
    cr_assert_not_null(c, "chan_new failed");
    for (unsigned i = 0; i < n; i++)
        cr_assert(chan_try_send(c, i), "chan_try_send on an unbounded channel failed");
    chan_close(c);
    struct drain_stats st = { 0 };
    atomic_init(&st.neighbour_ran, false);
    struct ws_runtime *rt = new_runtime(1);
    /* a root spawns the neighbour, then the drain, onto the one worker's
     * deque: the drain (newest) runs first, the neighbour waits behind it */
    struct drain d = { .c = c, .st = &st };
    struct join_handle *kids[2] = { NULL, NULL };
    struct spawn_two two = { .d = &d, .st = &st, .kids = kids };
    struct join_handle *root = spawn_step(rt, step_spawn_two, &two);
    cr_assert(join_within(root, SCALED_MS(5000)), "the root task never ran");
    cr_assert(join_within(kids[0], SCALED_MS(5000)), "the neighbour never ran");
    cr_assert(join_within(kids[1], SCALED_MS(5000)), "the receive loop never finished");
    ws_runtime_free(rt); /* joins the worker: its writes to st are visible */
    cr_assert_eq(st.got, n, "the receive loop got %llu of %u messages: the missing ones were taken by receives that then "
                 "returned Pending because the budget ran out, so nobody got them (channel.h contract 4); the "
                 "next hint: make hint STAGE=7 ITEM=leaf-budget",
                 (unsigned long long)st.got, n);
    cr_assert_eq(st.sum, (uint64_t)n * (n - 1) / 2, "the messages received are not the ones sent");
    cr_assert_leq(st.got_before_neighbour, COOP_BUDGET_DEFAULT, "the receive loop took %llu messages before its "
                  "neighbour ran: a receive must spend one unit of budget and return Pending at zero "
                  "(channel.h contract 4)",
                  (unsigned long long)st.got_before_neighbour);
    chan_free(c);
}

/* ---- the mutex ----------------------------------------------------------------------------- */

struct counter {
    struct async_mutex m;
    uint64_t value;          /* protected by m (the async mutex) */
    atomic_int inside;       /* holders right now: must never exceed 1 */
    atomic_uint overlaps;
};

struct locker {
    struct counter *c;
    unsigned left;
    struct async_mutex_lock l;
    bool locking;
    unsigned phase;
};

static enum poll locker_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct locker *k = self;
    while (k->left > 0) {
        if (!k->locking) {
            async_mutex_lock_init(&k->l, &k->c->m);
            k->locking = true;
        }
        if (k->phase == 0) {
            if (async_mutex_lock_poll(&k->l, cx) == POLL_PENDING)
                return POLL_PENDING;
            if (atomic_fetch_add(&k->c->inside, 1) != 0)
                atomic_fetch_add(&k->c->overlaps, 1);
            k->c->value++;
            if (k->left % 4 == 0) {
                /* hold the mutex across a yield: the others queue for it */
                k->phase = 1;
                waker_wake_by_ref(cx->waker);
                return POLL_PENDING;
            }
        }
        k->phase = 0;
        atomic_fetch_sub(&k->c->inside, 1);
        async_mutex_lock_drop(&k->l); /* held: drop only releases its waker */
        k->locking = false;
        async_mutex_unlock(&k->c->m);
        k->left--;
    }
    return POLL_READY;
}
static void locker_drop(void *self)
{
    struct locker *k = self;
    if (k->locking)
        async_mutex_lock_drop(&k->l);
}
static const struct future_vtable locker_vt = FUTURE_VTABLE_INIT(struct locker, 0, locker_poll, locker_drop);

LAB_TEST(mutex, sixteen_tasks_contend, 5) /* the reference: 0.08 s */
{
    struct counter c;
    memset(&c, 0, sizeof c);
    async_mutex_init(&c.m);
    struct ws_runtime *rt = new_runtime(2);
    unsigned per = lab_scale(2000, 50);
    struct join_handle *jh[16];
    for (int i = 0; i < 16; i++) {
        struct locker k = { .c = &c, .left = per };
        jh[i] = ws_spawn(rt, future_of(&locker_vt, &k), NULL);
        cr_assert_not_null(jh[i], "ws_spawn failed");
    }
    bool ok = join_all_within(jh, 16, SCALED_MS(4000)) == 16;
    cr_assert(ok, "a task waiting for the mutex was never handed it: 16 tasks contended, and at least one "
              "was still waiting after 4 s although every holder unlocked (channel.h, the async mutex); the next "
              "hint: make hint STAGE=7 ITEM=mutex");
    ws_runtime_free(rt);
    cr_assert_eq(atomic_load(&c.overlaps), 0, "two tasks held the mutex at once %u times (channel.h, the async "
                 "mutex)", atomic_load(&c.overlaps));
    cr_assert_eq(c.value, 16u * per, "the counter is %llu, not %u: increments were lost",
                 (unsigned long long)c.value, 16u * per);
    async_mutex_destroy(&c.m);
}
