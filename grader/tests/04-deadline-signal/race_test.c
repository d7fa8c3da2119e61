/* race_test.c - the decisions under concurrency.
 *
 * 1. Forced: clause 3 (check and register in one lock hold). A hook inside
 *    the first poll's clone starts a thread that completes (or expires) the
 *    signal and, once that thread runs, gives it 50 ms, before the clone
 *    returns. A poll that holds its lock across check and registration makes
 *    the decider wait, and the decider then finds the waker. A poll that
 *    checked, unlocked and registers afterwards lets the decider through at
 *    exactly that moment: it finds no waker, and the stored waker is never
 *    woken. Every run, not by luck.
 * 2. Randomized: clause 4 (exactly one winner). The producer and the timer,
 *    on two threads, decide after a random few microseconds while the future
 *    is polled: every iteration, exactly one of the two calls wins, the other
 *    is told who won, the future resolves to the winner, and nothing is left
 *    allocated.
 * 3. Randomized: clause 8 racing clause 4: the future is dropped at a random
 *    moment while both decide. Every value ends in exactly one place.
 * 4. For ThreadSanitizer: polls that overlap both decisions with nothing
 *    (no wake) ordering them.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "side_thread.h"
#include "stage04.h"

static int the_value;

LAB_SUITE(deadline_race, 20);

/* ---- 1. forced: a decision inside the first poll's registration ------------ */

struct forced {
    struct ds *d;
    bool expire_instead;        /* the timer decides instead of the producer */
    struct side_hook decider;   /* decides inside the first clone, given 50 ms once it runs */
    enum deadline_signal_status status; /* written by the decider, read after the join */
};

static void decide(void *arg)
{
    struct forced *fc = arg;
    fc->status = fc->expire_instead ? deadline_signal_expire(fc->d->timer)
                                    : deadline_signal_complete(fc->d->producer, &the_value);
}

static void run_forced(bool expire_instead)
{
    const char *what = expire_instead ? "expired the signal" : "completed the signal";
    enum deadline_signal_outcome expected = expire_instead ? DEADLINE_SIGNAL_EXPIRED : DEADLINE_SIGNAL_VALUE;
    void *expected_value = expire_instead ? NULL : &the_value;

    struct counting_waker *task = counting_waker_new("task");
    struct deadline_signal_output out;
    struct ds d = new_ds(NULL);

    struct forced fc = { .d = &d, .expire_instead = expire_instead };
    fc.decider = (struct side_hook){ .at = SIDE_AT_FIRST_CLONE, .act = decide, .arg = &fc, .ms = 50, .what = "deciding" };
    counting_waker_set_hook(task, side_hook, &fc.decider);

    enum poll r = poll_with(d.future, task, &out);
    side_thread_join(&fc.decider.side);
    counting_waker_set_hook(task, NULL, NULL);

    cr_assert(fc.decider.started || r == POLL_READY,
              "the first poll returned Pending without cloning the task's waker: nobody can wake the task (contract 1)");
    cr_assert_eq(fc.status, DEADLINE_SIGNAL_WON, "a thread that %s while the first poll registered got %s; nothing else decided, so it must win",
                 what, status_name(fc.status));

    if (r == POLL_READY) {
        /* Only possible if the clone ran before the poll took its lock (clone
         * first, then lock and check): correct, not the chapter's design. */
        expect_ready(r, &out, expected, expected_value, "the first poll, which saw the decision arrive while cloning");
    } else {
        unsigned woken = counting_waker_woken(task);
        cr_assert(woken >= 1,
                  "lost wakeup: another thread %s while the first poll was registering its waker, and the "
                  "stored waker was never woken (%s). The poll returned Pending with a waker nobody will "
                  "use: the decision fell between the poll's look at the state and its registration (contract "
                  "3). The next hint: make hint STAGE=4 ITEM=check-register-window",
                  what,
                  fc.decider.got_through ? "the decider finished inside the clone: the lock was not held between the check and the registration"
                                       : "the decider had to wait for the lock, but then found no waker");
        cr_assert_eq(woken, 1u, "the waker was woken %u times by one decision; once is right", woken);
        expect_ready(poll_with(d.future, task, &out), &out, expected, expected_value, "the second poll, after the wake");
    }

    deadline_signal_drop(d.producer);
    deadline_signal_timer_drop(d.timer);
    deadline_signal_future_drop(d.future);
    expect_books_balanced(task);
}

LAB_TEST(deadline_race, forced_complete_in_window, 5)
{
    run_forced(false);
}

LAB_TEST(deadline_race, forced_expire_in_window, 5)
{
    run_forced(true);
}

/* ---- 2 and 3. randomized: the producer against the timer -------------------
 *
 * Two threads race, one on each of the machine's two cores: a long-lived
 * helper thread and the test's own thread. Each iteration a coin decides
 * which of them is the producer and which the timer. The helper gets its
 * handle and a start signal; then both wait a random while (from nothing to a
 * few microseconds) and decide, so the two calls collide often, in either
 * order (the test's thread waits until the helper has picked up its job
 * before it starts its own wait: both are running then). The test's thread
 * also polls the future, at a random moment: before the start, between the
 * start and its own decision (racing the helper's decision), or after. A third busy thread would leave one racer waiting for
 * a core and turn most races into a walkover, which is why the test's thread
 * plays a part itself. */

enum role { PRODUCER_ROLE, TIMER_ROLE };

/* Each side waits a uniformly random number of loop iterations (up to a few
 * microseconds) after the start: either side may go first, and the two
 * calls often land within a few dozen nanoseconds of each other. */
#define RACE_SPIN 2048u


struct job {
    enum role role;
    struct deadline_signal *producer;     /* producer role */
    struct deadline_signal_timer *timer;  /* timer role */
    void *value;
    uint64_t rng;                         /* this job's own generator */
    enum deadline_signal_status status;   /* written before `done` */
};

struct helper {
    pthread_t thread;
    struct job job;      /* written by the test before posting `go`, by the helper before `done` */
    sem_t go;            /* test -> helper: one post per job (and one to quit); the helper
                          * sleeps here between jobs, so it holds no core while idle */
    atomic_uint ack;     /* helper -> test: running, at the start line of job number `ack` */
    atomic_uint start;   /* test -> helper: running too: job number `start` begins */
    atomic_uint done;    /* helper -> test: job number `done` is finished */
    atomic_bool quit;
};

/* Spins (yielding now and then) until *word == want. */
static void await_word(atomic_uint *word, unsigned want)
{
    /* acquire: pairs with the release that stored `want`: the job's results are visible */
    for (unsigned spins = 0; atomic_load_explicit(word, memory_order_acquire) != want; spins++)
        if (spins % 64 == 63)
            lab_spin_pause(spins);
}

/* Decides in `role`, then releases that handle: what a producer or a timer
 * does in its whole life. */
static enum deadline_signal_status decide_and_leave(enum role role, struct deadline_signal *p,
                                                    struct deadline_signal_timer *t, void *value)
{
    enum deadline_signal_status st;
    if (role == TIMER_ROLE) {
        st = deadline_signal_expire(t);
        deadline_signal_timer_drop(t);
    } else {
        st = deadline_signal_complete(p, value);
        deadline_signal_drop(p);
    }
    return st;
}

static void *helper_main(void *arg)
{
    struct helper *h = arg;
    for (unsigned n = 1;; n++) {
        while (sem_wait(&h->go) != 0) /* pairs with helper_go's sem_post: the job is visible */
            ;
        if (atomic_load_explicit(&h->quit, memory_order_relaxed))
            return NULL;
        /* The start line (relaxed: it orders nothing, the semaphore published the job). */
        atomic_store_explicit(&h->ack, n, memory_order_relaxed);
        for (unsigned spins = 0; atomic_load_explicit(&h->start, memory_order_relaxed) != n; spins++)
            if (spins % 4096 == 4095)
                lab_spin_pause(spins);
        struct job *j = &h->job;
        spin_uniform(&j->rng, RACE_SPIN);
        j->status = decide_and_leave(j->role, j->producer, j->timer, j->value);
        atomic_store_explicit(&h->done, n, memory_order_release); /* pairs with await_word's acquire */
    }
}

static void helper_start(struct helper *h)
{
    sem_init(&h->go, 0, 0);
    atomic_init(&h->ack, 0);
    atomic_init(&h->start, 0);
    atomic_init(&h->done, 0);
    atomic_init(&h->quit, false);
    if (pthread_create(&h->thread, NULL, helper_main, h) != 0)
        cr_assert_fail("could not start the helper thread");
    int a, b;
    if (lab_two_cpus(&a, &b)) {
        lab_pin_thread(pthread_self(), a);
        lab_pin_thread(h->thread, b);
    }
}

static void helper_stop(struct helper *h)
{
    atomic_store_explicit(&h->quit, true, memory_order_relaxed);
    sem_post(&h->go); /* orders the store above before the helper's check */
    pthread_join(h->thread, NULL);
    sem_destroy(&h->go);
}

/* Hands job number n to the helper and meets it at a start line: each waits
 * until it has seen the other running, so both leave the line together and
 * the random waits that follow decide the race, not the scheduler. */
static void helper_go(struct helper *h, unsigned n, struct job job)
{
    h->job = job;
    sem_post(&h->go); /* pairs with helper_main's sem_wait */
    for (unsigned spins = 0; atomic_load_explicit(&h->ack, memory_order_relaxed) != n; spins++)
        if (spins % 4096 == 4095)
            lab_spin_pause(spins);
    atomic_store_explicit(&h->start, n, memory_order_relaxed);
}

/* One poll with the notify waker; true when Ready. */
static bool poll_once(struct deadline_signal_future *f, struct notify_waker *nw, struct deadline_signal_output *out)
{
    struct waker w = notify_waker_get(nw); /* +1: this poll's reference */
    struct context cx = context_from_waker(&w);
    bool ready = deadline_signal_future_poll(f, &cx, out) == POLL_READY;
    waker_drop(&w); /* -1 */
    return ready;
}

/* Polls until Ready, sleeping on the notify waker between polls. */
static void wait_ready(struct deadline_signal_future *f, struct notify_waker *nw,
                       struct deadline_signal_output *out, unsigned iter, uint64_t seed, unsigned *waited)
{
    unsigned polls = 0;
    while (!poll_once(f, nw, out)) {
        if (++polls > 100)
            cr_assert_fail("iteration %u (seed %llu): the future was woken 100 times and is still Pending; "
                           "a wake follows a decision, so the poll after it must be Ready",
                           iter, (unsigned long long)seed);
        if (polls == 1)
            ++*waited;
        if (!notify_waker_wait(nw, SCALED_MS(2000)))
            cr_assert_fail("lost wakeup at iteration %u, seed %llu: the future returned Pending and was not "
                           "woken within 2 s although a producer completed and a timer expired it. Replay "
                           "with SEED=%llu. The decision fell between the poll's check and its registration "
                           "(contract 3), or the winner did not wake the stored waker (contract 5).",
                           iter, (unsigned long long)seed, (unsigned long long)seed);
    }
}

enum poll_moment { POLL_BEFORE_START, POLL_DURING_RACE, POLL_AFTER_DECIDING };

LAB_TEST(deadline_race, stress_one_winner, 6) /* the reference: 0.28 s */
{
    uint64_t seed = lab_seed();
    uint64_t rng = seed;
    unsigned iters = lab_scale(4000, 40);
    unsigned values = 0, expiries = 0, helper_won = 0, waited = 0;
    struct helper h;
    helper_start(&h);

    for (unsigned i = 0; i < iters; i++) {
        unsigned drops_before = dropped_calls();
        alloc_count_start();
        struct notify_waker *nw = notify_waker_new();
        struct ds d = new_ds(record_drop);
        struct deadline_signal_output out;
        void *value = (void *)(uintptr_t)(0x1000 + 16 * (uintptr_t)i);
        enum role mine = lab_rand(&rng) % 2 ? TIMER_ROLE : PRODUCER_ROLE;
        enum role theirs = mine == TIMER_ROLE ? PRODUCER_ROLE : TIMER_ROLE;
        enum poll_moment when = (enum poll_moment)(lab_rand(&rng) % 3);
        bool polled = false, ready = false;

        if (when == POLL_BEFORE_START) {
            polled = true;
            ready = poll_once(d.future, nw, &out);
        }
        helper_go(&h, i + 1, (struct job){ .role = theirs, .producer = d.producer, .timer = d.timer, .value = value,
                                          .rng = lab_rand(&rng), .status = (enum deadline_signal_status)-1 });
        spin_uniform(&rng, RACE_SPIN);
        if (when == POLL_DURING_RACE) {
            polled = true;
            ready = poll_once(d.future, nw, &out);
        }
        enum deadline_signal_status my_status = decide_and_leave(mine, d.producer, d.timer, value);
        await_word(&h.done, i + 1);

        /* Both have decided and returned. A poll that said Pending left a
         * waker, and the winner woke it before returning. */
        if (polled && !ready) {
            waited++;
            if (!notify_waker_wait(nw, SCALED_MS(2000)))
                cr_assert_fail("lost wakeup at iteration %u, seed %llu: the future returned Pending, then the "
                               "producer and the timer both decided and returned, and the waiting task was never "
                               "woken (contract 3: no decision between the check and the registration; contract 5: the "
                               "winner wakes the stored waker). Replay with SEED=%llu; the next hint: make hint "
                               "STAGE=4 ITEM=one-winner-stress",
                               i, (unsigned long long)seed, (unsigned long long)seed);
        }
        if (!ready)
            cr_assert(poll_once(d.future, nw, &out),
                      "iteration %u (seed %llu): the producer and the timer have both returned, but the poll after them "
                      "returned Pending; one of them decided the signal", i, (unsigned long long)seed);

        enum deadline_signal_status ps = mine == PRODUCER_ROLE ? my_status : h.job.status;
        enum deadline_signal_status ts = mine == TIMER_ROLE ? my_status : h.job.status;
        unsigned winners = (ps == DEADLINE_SIGNAL_WON) + (ts == DEADLINE_SIGNAL_WON);
        cr_assert_eq(winners, 1u,
                     "iteration %u (seed %llu): complete returned %s and expire returned %s; exactly one of the "
                     "two wins (contract 4), so both found the signal undecided. The next hint: make hint STAGE=4 "
                     "ITEM=one-winner-stress",
                     i, (unsigned long long)seed, status_name(ps), status_name(ts));
        if (ps == DEADLINE_SIGNAL_WON) {
            cr_assert_eq(ts, DEADLINE_SIGNAL_LOST_TO_VALUE, "iteration %u (seed %llu): the producer won but the timer was told %s; the loser must be told a value won (contract 4)",
                         i, (unsigned long long)seed, status_name(ts));
            cr_assert(out.outcome == DEADLINE_SIGNAL_VALUE && out.value == value,
                      "iteration %u (seed %llu): the producer won with %p but the future resolved %s with %p; the future resolves to the winner (contract 4)",
                      i, (unsigned long long)seed, value, outcome_name(out.outcome), out.value);
            values++;
        } else {
            cr_assert_eq(ps, DEADLINE_SIGNAL_LOST_TO_EXPIRY, "iteration %u (seed %llu): the timer won but the producer was told %s; the loser must be told the signal expired (contract 4)",
                         i, (unsigned long long)seed, status_name(ps));
            cr_assert(out.outcome == DEADLINE_SIGNAL_EXPIRED && out.value == NULL,
                      "iteration %u (seed %llu): the timer won but the future resolved %s with %p; the future resolves to the winner (contract 4)",
                      i, (unsigned long long)seed, outcome_name(out.outcome), out.value);
            expiries++;
        }
        helper_won += h.job.status == DEADLINE_SIGNAL_WON;

        struct deadline_signal_output again;
        cr_assert(poll_once(d.future, nw, &again) && again.outcome == DEADLINE_SIGNAL_CONSUMED,
                  "iteration %u (seed %llu): the poll after Ready did not answer Ready with DEADLINE_SIGNAL_CONSUMED (contract 7)", i, (unsigned long long)seed);

        deadline_signal_future_drop(d.future);
        notify_waker_release(nw);
        struct alloc_counts c = alloc_count_stop();
        cr_assert_eq(c.allocs, c.frees,
                     "iteration %u (seed %llu): with all three handles dropped, %llu of %llu allocations were not freed "
                     "(the signal's state, or the waiting task's waker, which a leaked reference keeps alive)",
                     i, (unsigned long long)seed, (unsigned long long)(c.allocs - c.frees), (unsigned long long)c.allocs);
        cr_assert_eq(dropped_calls() - drops_before, 0u, "iteration %u (seed %llu): drop_value was called, but the winning value was delivered and a losing one stays with the producer",
                     i, (unsigned long long)seed);
    }
    helper_stop(&h);
    lab_note("%u iterations: the producer won %u, the timer won %u (the helper thread %u, the test's thread %u); "
             "a poll was Pending and then woken %u times", iters, values, expiries, helper_won, iters - helper_won, waited);
}

/* The future is dropped at a random moment while the producer and the timer
 * decide: before polling, after one Pending, after Ready. Every value must end
 * in exactly one place: delivered, refused back to the producer, or passed to
 * drop_value. */
LAB_TEST(deadline_race, stress_cancel_vs_deciders, 6) /* the reference: 0.27 s */
{
    uint64_t seed = lab_seed();
    uint64_t rng = seed;
    unsigned iters = lab_scale(3000, 40);
    unsigned delivered = 0, dropped_by_signal = 0, refused = 0;
    struct helper h;
    helper_start(&h);

    for (unsigned i = 0; i < iters; i++) {
        unsigned drops_before = dropped_calls();
        struct notify_waker *nw = notify_waker_new();
        struct ds d = new_ds(record_drop);
        struct deadline_signal_output out = { .outcome = DEADLINE_SIGNAL_CONSUMED, .value = NULL };
        void *value = (void *)(uintptr_t)(0x1000 + 16 * (uintptr_t)i);
        enum role mine = lab_rand(&rng) % 2 ? TIMER_ROLE : PRODUCER_ROLE;
        enum role theirs = mine == TIMER_ROLE ? PRODUCER_ROLE : TIMER_ROLE;
        /* 0: drop the future before deciding; 1: poll once, then drop before
         * deciding; 2: decide, poll once, drop; 3: decide, poll to the end, drop */
        unsigned how = (unsigned)(lab_rand(&rng) % 4);
        bool got = false, dropped = false;

        helper_go(&h, i + 1, (struct job){ .role = theirs, .producer = d.producer, .timer = d.timer, .value = value,
                                          .rng = lab_rand(&rng), .status = (enum deadline_signal_status)-1 });
        spin_uniform(&rng, RACE_SPIN);
        if (how == 1)
            got = poll_once(d.future, nw, &out);
        if (how <= 1) {
            deadline_signal_future_drop(d.future);
            dropped = true;
        }
        enum deadline_signal_status my_status = decide_and_leave(mine, d.producer, d.timer, value);
        if (how == 2)
            got = poll_once(d.future, nw, &out);
        if (how == 3) {
            unsigned ignored = 0;
            wait_ready(d.future, nw, &out, i, seed, &ignored);
            got = true;
        }
        if (!dropped)
            deadline_signal_future_drop(d.future);
        await_word(&h.done, i + 1);
        notify_waker_release(nw);

        enum deadline_signal_status ps = mine == PRODUCER_ROLE ? my_status : h.job.status;
        enum deadline_signal_status ts = mine == TIMER_ROLE ? my_status : h.job.status;
        unsigned drops = dropped_calls() - drops_before;
        cr_assert_leq((ps == DEADLINE_SIGNAL_WON) + (ts == DEADLINE_SIGNAL_WON), 1,
                      "iteration %u (seed %llu): both complete and expire returned DEADLINE_SIGNAL_WON; at most one may win (contract 4)",
                      i, (unsigned long long)seed);
        bool took = got && out.outcome == DEADLINE_SIGNAL_VALUE;
        if (took)
            cr_assert_eq(out.value, value, "iteration %u (seed %llu): the future delivered %p, not the producer's value %p",
                         i, (unsigned long long)seed, out.value, value);
        if (got)
            cr_assert((out.outcome == DEADLINE_SIGNAL_VALUE) == (ps == DEADLINE_SIGNAL_WON),
                      "iteration %u (seed %llu): the future resolved %s but complete returned %s; the future resolves to the winner (contract 4)",
                      i, (unsigned long long)seed, outcome_name(out.outcome), status_name(ps));
        if (ps == DEADLINE_SIGNAL_WON) {
            cr_assert_eq((unsigned)took + drops, 1u,
                         "iteration %u (seed %llu): a value the signal accepted was %s and passed to drop_value %u times; it must end in exactly one place (contract 10)",
                         i, (unsigned long long)seed, took ? "delivered" : "not delivered", drops);
            took ? delivered++ : dropped_by_signal++;
        } else {
            cr_assert(!took && drops == 0,
                      "iteration %u (seed %llu): complete returned %s, yet the value was %s (drop_value calls: %u); a refused value stays with the producer (contracts 4 and 8)",
                      i, (unsigned long long)seed, status_name(ps), took ? "delivered" : "not delivered", drops);
            refused++;
        }
    }
    helper_stop(&h);
    lab_note("%u iterations: %u values delivered, %u dropped by the signal, %u refused (lost or no listener)",
             iters, delivered, dropped_by_signal, refused);
}

/* ---- 4. for ThreadSanitizer: polls that overlap both decisions ------------
 * In the stress tests the poller sleeps until it is woken, and that wake
 * (a mutex and a condition variable in the notify waker) orders the
 * deciders' writes before the next poll, so ThreadSanitizer sees no race
 * even in code that reads the state without the lock. Here the poller keeps
 * polling without waiting while two threads decide, so an unlocked access on
 * any side meets the others with nothing ordering them. */

struct overlap {
    struct ds *d;
    atomic_int started; /* how many deciders run; a hint only, the poller spins on it */
    enum deadline_signal_status ps, ts; /* read after the joins */
};

static void *complete_soon(void *arg)
{
    struct overlap *o = arg;
    atomic_fetch_add_explicit(&o->started, 1, memory_order_relaxed);
    lab_sleep_ms(2);
    o->ps = deadline_signal_complete(o->d->producer, (void *)(uintptr_t)0x5157);
    deadline_signal_drop(o->d->producer);
    return NULL;
}

static void *expire_soon(void *arg)
{
    struct overlap *o = arg;
    atomic_fetch_add_explicit(&o->started, 1, memory_order_relaxed);
    lab_sleep_ms(2);
    o->ts = deadline_signal_expire(o->d->timer);
    deadline_signal_timer_drop(o->d->timer);
    return NULL;
}

LAB_TEST(deadline_race, polls_overlap_decisions, 10)
{
    unsigned rounds = lab_scale(20, 3);
    for (unsigned i = 0; i < rounds; i++) {
        struct counting_waker *task = counting_waker_new("task");
        struct ds d = new_ds(NULL);
        struct overlap o = { .d = &d };
        atomic_init(&o.started, 0);
        pthread_t tp, tt;
        cr_assert_eq(pthread_create(&tp, NULL, complete_soon, &o), 0, "could not start the completing thread");
        cr_assert_eq(pthread_create(&tt, NULL, expire_soon, &o), 0, "could not start the expiring thread");
        for (unsigned spins = 0; atomic_load_explicit(&o.started, memory_order_relaxed) < 2; spins++)
            lab_spin_pause(spins);
        struct deadline_signal_output out;
        unsigned long polls = 0;
        while (poll_with(d.future, task, &out) == POLL_PENDING) {
            if (++polls % 256 == 0)
                lab_spin_pause((unsigned)polls);
        }
        pthread_join(tp, NULL);
        pthread_join(tt, NULL);
        cr_assert_eq((o.ps == DEADLINE_SIGNAL_WON) + (o.ts == DEADLINE_SIGNAL_WON), 1,
                     "round %u: complete returned %s and expire returned %s; exactly one must win (contract 4)",
                     i, status_name(o.ps), status_name(o.ts));
        if (o.ps == DEADLINE_SIGNAL_WON)
            expect_ready(POLL_READY, &out, DEADLINE_SIGNAL_VALUE, (void *)(uintptr_t)0x5157, "polling in a loop while the producer won");
        else
            expect_ready(POLL_READY, &out, DEADLINE_SIGNAL_EXPIRED, NULL, "polling in a loop while the timer won");
        cr_assert_eq(poll_with(d.future, task, &out), POLL_READY, "a poll after Ready must be Ready (contract 7)");
        deadline_signal_future_drop(d.future);
        expect_books_balanced(task);
    }
}
