/* block_on_test.c - the DeadlineSignal driven by stage 02's block_on, with no
 * sleeps anywhere; and a hand-written "async fn" that awaits it, whose
 * sizes are printed (docs/04-deadline-signal.md#what-a-state-machine-weighs).
 *
 * Wake before park, forced: a small wrapper future polls the DeadlineSignal
 * future and, the first time that poll answers Pending, runs a thread that
 * completes (or expires) the signal and joins it before returning Pending.
 * By the time block_on sees Pending and goes to park, the wake has already
 * happened. A correct DeadlineSignal has handed it to block_on's waker, and
 * the parker's token turns it into one more poll: two polls in all. Nothing
 * here waits for time to pass, so nothing depends on the machine's speed.
 *
 * block_on runs on a watched thread: if it never returns (a wake lost), the
 * test fails with a sentence instead of a timeout.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "block_on.h"
#include "futures.h"
#include "stage04.h"

LAB_SUITE(deadline_block_on, 10);

#define RESCUE_MS SCALED_MS(2000)

/* ---- decide_on_pending: the wrapper that lands the wake before the park --- */

struct decide_on_pending {
    struct deadline_signal_future *future; /* owned: dropped by the wrapper's drop */
    struct deadline_signal *producer;      /* borrowed: the decider uses one of these two */
    struct deadline_signal_timer *timer;
    bool expire_instead;
    void *value;
    bool fired;                            /* the decider has run */
    enum deadline_signal_status status;    /* the decider's answer */
};

static void *decide_main(void *arg)
{
    struct decide_on_pending *w = arg;
    w->status = w->expire_instead ? deadline_signal_expire(w->timer)
                                  : deadline_signal_complete(w->producer, w->value);
    return NULL;
}

static enum poll decide_on_pending_poll(void *self, struct context *cx, void *out)
{
    struct decide_on_pending *w = self;
    enum poll r = deadline_signal_future_poll(w->future, cx, out);
    if (r == POLL_PENDING && !w->fired) {
        w->fired = true;
        pthread_t t;
        if (pthread_create(&t, NULL, decide_main, w) != 0)
            cr_assert_fail("could not start the deciding thread");
        pthread_join(t, NULL); /* the wake has happened; block_on has not parked yet */
    }
    return r;
}

static void decide_on_pending_drop(void *self)
{
    struct decide_on_pending *w = self;
    deadline_signal_future_drop(w->future);
}

static const struct future_vtable decide_on_pending_vt =
    FUTURE_VTABLE_INIT(struct decide_on_pending, sizeof(struct deadline_signal_output),
                       decide_on_pending_poll, decide_on_pending_drop);

/* ---- block_on on a watched thread ------------------------------------------- */

struct watched {
    struct future fut;
    void *out;
    unsigned long polls;
    pthread_mutex_t lock; /* protects done */
    pthread_cond_t cond;  /* signalled when done becomes true */
    bool done;
    pthread_t thread;
};

static void *watched_main(void *arg)
{
    struct watched *b = arg;
    unsigned long polls = block_on(b->fut, b->out);
    pthread_mutex_lock(&b->lock);
    b->polls = polls;
    b->done = true;
    pthread_cond_signal(&b->cond);
    pthread_mutex_unlock(&b->lock);
    return NULL;
}

/* Runs block_on(fut, out) on a thread of its own; true (and joined) when it
 * returned within `ms`, false when it is still blocked (left behind: a hung
 * block_on cannot be rescued from outside, and the test fails). */
static bool block_on_within(struct future fut, void *out, unsigned ms, unsigned long *polls)
{
    static struct watched b; /* static: a thread left behind must never see a dead stack frame */
    b = (struct watched){ .fut = fut, .out = out };
    pthread_mutex_init(&b.lock, NULL);
    lab_monotonic_cond_init(&b.cond);
    if (pthread_create(&b.thread, NULL, watched_main, &b) != 0)
        cr_assert_fail("could not start a thread for block_on");

    struct timespec deadline;
    lab_deadline_after_ms(&deadline, ms);
    pthread_mutex_lock(&b.lock);
    int rc = 0;
    while (!b.done && rc == 0)
        rc = pthread_cond_timedwait(&b.cond, &b.lock, &deadline);
    bool done = b.done;
    *polls = b.polls;
    pthread_mutex_unlock(&b.lock);
    if (done) {
        pthread_join(b.thread, NULL);
        pthread_cond_destroy(&b.cond);
        pthread_mutex_destroy(&b.lock);
    }
    return done;
}

/* ---- wake before park ---------------------------------------------------------- */

static void wake_before_park(bool expire_instead)
{
    static int the_value;
    const char *what = expire_instead ? "expired" : "completed";
    unsigned rounds = lab_scale(20, 3);
    for (unsigned i = 0; i < rounds; i++) {
        struct ds d = new_ds(NULL);
        struct decide_on_pending w = { .future = d.future, .producer = d.producer, .timer = d.timer,
                                       .expire_instead = expire_instead, .value = &the_value };
        struct deadline_signal_output out = { .outcome = DEADLINE_SIGNAL_CONSUMED, .value = NULL };
        unsigned long polls = 0;
        bool returned = block_on_within(future_of(&decide_on_pending_vt, &w), &out, RESCUE_MS, &polls);
        cr_assert(returned,
                  "block_on hung (round %u): after the first poll returned Pending, another thread %s the "
                  "signal and finished before block_on parked; that wake never reached block_on's waker. "
                  "The winner must wake the stored waker (contract 5), whatever the waker does with it.",
                  i, what);
        cr_assert(w.fired, "the first poll was Ready although nothing had decided the signal");
        expect_status(w.status, DEADLINE_SIGNAL_WON, expire_instead ? "deadline_signal_expire" : "deadline_signal_complete",
                      "nothing else decided the signal");
        if (expire_instead)
            expect_ready(POLL_READY, &out, DEADLINE_SIGNAL_EXPIRED, NULL, "block_on's result after an early expiry");
        else
            expect_ready(POLL_READY, &out, DEADLINE_SIGNAL_VALUE, &the_value, "block_on's result after an early completion");
        cr_assert_eq(polls, 2ul, "block_on made %lu polls; one Pending, one wake, one Ready: exactly 2 "
                     "(a DeadlineSignal that wakes more than once, or not at all, shows here)", polls);
        decide_on_pending_drop(&w);
        deadline_signal_drop(d.producer);
        deadline_signal_timer_drop(d.timer);
    }
}

LAB_TEST(deadline_block_on, wake_before_park_complete, 10)
{
    wake_before_park(false);
}

LAB_TEST(deadline_block_on, wake_before_park_expire, 10)
{
    wake_before_park(true);
}

/* ---- a hand-written async fn that awaits the DeadlineSignal ------------------
 *
 * The async fn it spells out, in Rust, for comparison:
 *
 *     async fn fetch(key: u32, reply: DeadlineSignalFuture) -> Fetched {
 *         let answer = reply.await;                  // suspension point 1
 *         let mut scratch = [0u8; 256];              // never lives across an await
 *         let record = decode(key, answer, &mut scratch);
 *         yield_now().await;                         // suspension point 2
 *         Fetched { key, record }                    // key and record crossed it
 *     }
 *
 * A compiler turns it into a struct like fetch_fn below: the state number,
 * the locals that live across an await, and, per suspension point, the child
 * future being awaited. Two suspension points never hold their locals at the
 * same time, so they can share storage (the union). scratch never crosses an
 * await, so it lives on the stack of one poll and not in the struct at all.
 * fetch_fn_flat is the same function with every local given its own field,
 * scratch included: what a future weighs when nothing is overlapped and a
 * big buffer is kept across an await. */

struct record {
    unsigned key;
    bool expired;
    uintptr_t payload;
};

struct fetched {
    unsigned key;
    struct record record;
};

struct fetch_fn {
    enum { FETCH_START, FETCH_AWAIT_REPLY, FETCH_AWAIT_YIELD, FETCH_DONE } state;
    unsigned key; /* an argument: lives across both awaits */
    union {
        struct {
            struct decide_on_pending reply; /* the child future of await 1 */
        } at_reply;
        struct {
            struct record record;      /* made after await 1, used after await 2 */
            struct yield_future yield; /* the child future of await 2 */
        } at_yield;
    } u;
};

struct fetch_fn_flat {
    int state;
    unsigned key;
    struct decide_on_pending reply;
    unsigned char scratch[256];
    struct record record;
    struct yield_future yield;
};

static struct record decode(unsigned key, const struct deadline_signal_output *answer)
{
    unsigned char scratch[256]; /* lives on this call's stack only */
    for (unsigned k = 0; k < sizeof scratch; k++)
        scratch[k] = (unsigned char)(key + k);
    return (struct record){ .key = scratch[0] + 0u, .expired = answer->outcome == DEADLINE_SIGNAL_EXPIRED,
                            .payload = (uintptr_t)answer->value };
}

static enum poll fetch_poll(void *self, struct context *cx, void *out)
{
    struct fetch_fn *f = self;
    switch (f->state) {
    case FETCH_START:
        f->state = FETCH_AWAIT_REPLY; /* the child was placed in u.at_reply by the caller */
        /* fall through */
    case FETCH_AWAIT_REPLY: {
        struct deadline_signal_output answer;
        if (future_poll(future_of(&decide_on_pending_vt, &f->u.at_reply.reply), cx, &answer) == POLL_PENDING)
            return POLL_PENDING;
        /* The child is done: drop it now, its storage is reused below. */
        decide_on_pending_drop(&f->u.at_reply.reply);
        struct record record = decode(f->key, &answer);
        f->u.at_yield.record = record;
        yield_future_init(&f->u.at_yield.yield, 1);
        f->state = FETCH_AWAIT_YIELD;
    }
        /* fall through */
    case FETCH_AWAIT_YIELD:
        if (future_poll(yield_future_as_future(&f->u.at_yield.yield), cx, NULL) == POLL_PENDING)
            return POLL_PENDING;
        *(struct fetched *)out = (struct fetched){ .key = f->key, .record = f->u.at_yield.record };
        f->state = FETCH_DONE;
        return POLL_READY;
    case FETCH_DONE:
        break;
    }
    cr_assert_fail("fetch_fn was polled after it returned Ready");
    return POLL_READY;
}

static const struct future_vtable fetch_vt =
    FUTURE_VTABLE_INIT(struct fetch_fn, sizeof(struct fetched), fetch_poll, NULL);

static void run_fetch(bool expire_instead)
{
    static int the_value;
    struct ds d = new_ds(NULL);
    struct fetch_fn f = { .state = FETCH_START, .key = 42 };
    f.u.at_reply.reply = (struct decide_on_pending){ .future = d.future, .producer = d.producer, .timer = d.timer,
                                                      .expire_instead = expire_instead, .value = &the_value };
    struct fetched out = { 0 };
    unsigned long polls = 0;
    bool returned = block_on_within(future_of(&fetch_vt, &f), &out, RESCUE_MS, &polls);
    cr_assert(returned, "block_on on a state machine awaiting the DeadlineSignal hung: the %s never woke the task (contract 5)",
              expire_instead ? "expiry" : "completion");
    cr_assert_eq(out.key, 42u, "the state machine lost a local that lives across an await (key %u, expected 42)", out.key);
    cr_assert_eq(out.record.expired, expire_instead, "the awaited DeadlineSignal resolved %s; expected %s",
                 out.record.expired ? "EXPIRED" : "with a value", expire_instead ? "EXPIRED" : "the value");
    if (!expire_instead)
        cr_assert_eq(out.record.payload, (uintptr_t)&the_value, "the awaited DeadlineSignal delivered %p, not the producer's value",
                     (void *)out.record.payload);
    cr_assert_eq(polls, 3ul, "block_on made %lu polls of the state machine; expected 3 (Pending on the signal, Pending on the yield, Ready)", polls);
    deadline_signal_drop(d.producer);
    deadline_signal_timer_drop(d.timer);
}

LAB_TEST(deadline_block_on, async_fn_awaits_deadline_signal, 10)
{
    run_fetch(false);
    run_fetch(true);

    /* What a state machine weighs (the chapter's section of that name): the
     * sizes of this build's hand-written state machines. They
     * belong to this compiler, these flags and this ABI: printed, never
     * graded. */
    struct deadline_signal_test_layout l = deadline_signal_test_layout();
    lab_note("layout on this compiler and ABI (an observation, not a promise):");
    lab_note("  DeadlineSignal shared state   %3zu bytes, align %zu", l.shared_size, l.shared_align);
    lab_note("  DeadlineSignal future handle  %3zu bytes, align %zu (producer %zu, timer %zu)",
             l.future_size, l.future_align, l.producer_size, l.timer_size);
    lab_note("  deadline_signal_output        %3zu bytes, align %zu", sizeof(struct deadline_signal_output),
             alignof(struct deadline_signal_output));
    lab_note("  fetch_fn (overlapped states)  %3zu bytes, align %zu", sizeof(struct fetch_fn), alignof(struct fetch_fn));
    lab_note("  fetch_fn_flat (every local)   %3zu bytes, align %zu", sizeof(struct fetch_fn_flat), alignof(struct fetch_fn_flat));
    lab_note("  pthread_mutex_t               %3zu bytes (most of the shared state)", sizeof(pthread_mutex_t));
}
