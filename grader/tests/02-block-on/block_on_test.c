/* block_on_test.c - stage 02: block_on polls, parks on Pending, never spins,
 * loses no wake, and leaves the future to its caller. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>

#include "lab_test.h"
#include "measure.h"
#include "futures.h"
#include "wakers.h"
#include "signal.h"
#include "parker.h"
#include "block_on.h"
#include "stage02.h"

LAB_SUITE(block_on, 10);
LAB_SUITE(block_on_race, 30);
LAB_SUITE(block_on_perf, 10);

/* ---- test futures of this file -------------------------------------------- */

/* Ready at once, with an output: block_on must hand `out` to poll. */
struct answer {
    int value;
};

static enum poll answer_poll(void *self, struct context *cx, void *out)
{
    (void)cx;
    *(int *)out = ((struct answer *)self)->value;
    return POLL_READY;
}

static const struct future_vtable answer_vt = FUTURE_VTABLE_INIT(struct answer, sizeof(int), answer_poll, NULL);

/* Pending once (waking itself), then Ready; counts how often it is dropped. */
struct owned {
    unsigned left;
    unsigned drops;
};

static enum poll owned_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct owned *o = self;
    if (o->left == 0) {
        return POLL_READY;
    }
    o->left--;
    waker_wake_by_ref(cx->waker);
    return POLL_PENDING;
}

static void owned_drop(void *self) { ((struct owned *)self)->drops++; }

static const struct future_vtable owned_vt = FUTURE_VTABLE_INIT(struct owned, 0, owned_poll, owned_drop);

/* Polls a Signal future; after the first Pending it opens a gate, so the
 * producer completes the signal only once a waker is registered. */
struct gated_signal {
    struct signal_future *inner;
    sem_t *gate;
    bool opened;
};

static enum poll gated_poll(void *self, struct context *cx, void *out)
{
    struct gated_signal *g = self;
    enum poll r = signal_future_poll(g->inner, cx, out);
    if (r == POLL_PENDING && !g->opened) {
        g->opened = true;
        sem_post(g->gate);
    }
    return r;
}

static const struct future_vtable gated_vt =
    FUTURE_VTABLE_INIT(struct gated_signal, sizeof(struct signal_output), gated_poll, NULL);

/* Completes a Signal from its own thread, once the gate opens. */
struct producer {
    struct signal *signal;
    void *value;
    sem_t *gate;
    enum signal_status status;
};

static void *producer_main(void *arg)
{
    struct producer *pr = arg;
    sem_wait(pr->gate);
    pr->status = signal_complete(pr->signal, pr->value);
    return NULL;
}

static void new_signal_pair(struct signal **p, struct signal_future **f)
{
    cr_assert_eq(signal_new(NULL, p, f), 0, "signal_new failed (stage 01)");
}

/* ---- polls -------------------------------------------------------------------- */

LAB_TEST(block_on, ready_future_one_poll, 10)
{
    struct answer a = { .value = 42 };
    int out = 0;
    unsigned long polls = block_on(future_of(&answer_vt, &a), &out);
    cr_assert_eq(polls, 1, "block_on on a future that is Ready at once made %lu polls; expected "
                 "exactly 1", polls);
    cr_assert_eq(out, 42, "block_on did not pass `out` to poll: the output written on Ready is "
                 "%d, expected 42", out);

    struct yield_future y;
    yield_future_init(&y, 0);
    polls = block_on(yield_future_as_future(&y), NULL);
    cr_assert_eq(polls, 1, "block_on on yield_future(0) made %lu polls; expected exactly 1", polls);
}

LAB_TEST(block_on, yield_n_plus_one_polls, 10)
{
    const unsigned ns[] = { 1, 2, 5, 100 };
    for (unsigned k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        struct yield_future y;
        yield_future_init(&y, ns[k]);
        struct bg_block_on b;
        bg_block_on_start(&b, yield_future_as_future(&y), NULL);
        cr_assert(bg_block_on_finish(&b, STAGE02_RESCUE_MS),
                  "block_on(yield_future(%u)) never returned: a future that wakes itself during "
                  "poll must be polled again (the wake is a token; park must return at once)", ns[k]);
        cr_assert_eq(b.polls, ns[k] + 1,
                     "block_on(yield_future(%u)) made %lu polls; expected exactly %u (%u Pending, "
                     "each with a wake, then Ready). Fewer: block_on stopped before Ready; more: "
                     "it polled without a wake (block_on.h contract 1)",
                     ns[k], b.polls, ns[k] + 1, ns[k]);
        cr_assert_eq(y.left, 0, "block_on returned before the future was Ready");
    }
}

LAB_TEST(block_on, signal_from_other_thread, 10)
{
    static int value;
    struct signal *sp;
    struct signal_future *sf;
    new_signal_pair(&sp, &sf);
    sem_t gate;
    sem_init(&gate, 0, 0);
    struct gated_signal g = { .inner = sf, .gate = &gate, .opened = false };
    struct producer pr = { .signal = sp, .value = &value, .gate = &gate };
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, producer_main, &pr), 0, "could not start a thread");

    struct signal_output out = { .outcome = SIGNAL_CONSUMED, .value = NULL };
    struct bg_block_on b;
    bg_block_on_start(&b, future_of(&gated_vt, &g), &out);
    bool returned = bg_block_on_finish(&b, STAGE02_RESCUE_MS);
    cr_assert(returned, "block_on on a Signal completed by another thread never returned: the "
              "wake from signal_complete was lost (still blocked after %u ms)", STAGE02_RESCUE_MS);
    pthread_join(t, NULL);

    cr_assert_eq(pr.status, SIGNAL_OK, "signal_complete did not return SIGNAL_OK");
    cr_assert_eq(out.outcome, SIGNAL_VALUE, "block_on returned without the Signal's value in out");
    cr_assert_eq(out.value, (void *)&value, "block_on wrote a different value to out");
    cr_assert_eq(b.polls, 2, "block_on on a Signal completed once from another thread made %lu "
                 "polls; expected exactly 2 (Pending, one wake, Ready): %s", b.polls,
                 b.polls > 2 ? "it polled again without being woken" : "?");
    signal_future_drop(sf);
    signal_drop(sp);
    sem_destroy(&gate);
}

/* ---- waiting costs nothing ------------------------------------------------------ */

LAB_TEST(block_on, sleep_two_polls_no_cpu, 10)
{
    struct thread_sleep s;
    thread_sleep_init(&s, 200);
    struct bg_block_on b;
    bg_block_on_start(&b, thread_sleep_as_future(&s), NULL);
    cr_assert(bg_block_on_finish(&b, 200 + STAGE02_RESCUE_MS),
              "block_on(thread_sleep(200 ms)) never returned: the helper thread's wake was lost "
              "(the wake must unpark the blocked thread: block_on.h contract 1, parker.h contract 1)");
    future_drop(thread_sleep_as_future(&s));

    lab_note("block_on(thread_sleep(200 ms)): %lu polls, %.3f ms CPU of the blocking thread, "
             "%.1f ms wall", b.polls, (double)b.cpu_ns / 1e6, (double)b.elapsed_ns / 1e6);
    if (b.polls == 1) /* the sleep's time runs from the first poll: Ready there means that poll took 200 ms */
        lab_cannot_judge("the first poll of a 200 ms sleep found it over already: the machine held the test "
                         "thread for 200 ms inside one poll (Valgrind on a CPU quota?)");
    cr_assert_eq(b.polls, 2, "block_on(thread_sleep(200 ms)) made %lu polls; expected exactly 2 "
                 "(one to start the timer and get Pending, one after its single wake). More "
                 "polls mean block_on polls without being woken (block_on.h contract 1)", b.polls);
#if !defined(__SANITIZE_THREAD__) /* the TSan lane runs this test for its races; its instrumentation, on a
                                   * busy machine, cost 26.6 ms of the thread's CPU here once */
    cr_assert_lt(b.cpu_ns, STAGE02_WAIT_CPU_NS,
                 "block_on used %.1f ms of CPU while waiting 200 ms for one wake: waiting must "
                 "park the thread, not spin", (double)b.cpu_ns / 1e6);
#endif
}

/* The forgetful future never arranges a wake: a correct block_on parks on it
 * for ever, quietly. The thread is left parked when the test ends (that is
 * the hang the chapter describes); the test only checks that it is quiet. */
static struct forgetful_future forgetful; /* outlives the test body: the thread never returns */

static void *forgetful_main(void *arg)
{
    (void)arg;
    block_on(forgetful_future_as_future(&forgetful), NULL);
    return NULL; /* not reached by a correct block_on */
}

LAB_TEST(block_on, forgetful_future_parks_quietly, 10)
{
    forgetful_future_init(&forgetful);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    cr_assert_eq(pthread_create(&t, &attr, forgetful_main, NULL), 0, "could not start a thread");
    pthread_attr_destroy(&attr);

    uint64_t waited = 0;
    while (forgetful_future_polls(&forgetful) == 0 && waited < STAGE02_RESCUE_MS) {
        lab_sleep_ms(1);
        waited++;
    }
    cr_assert_geq(forgetful_future_polls(&forgetful), 1, "block_on never polled the future");
    uint64_t cpu0 = thread_cpu_ns_of(t);
    lab_sleep_ms(100);
    uint64_t cpu = thread_cpu_ns_of(t) - cpu0;
    unsigned long polls = forgetful_future_polls(&forgetful);
    lab_note("block_on(forgetful): %lu polls, %.3f ms CPU in 100 ms", polls, (double)cpu / 1e6);
    cr_assert_eq(polls, 1, "block_on polled a future %lu times in 100 ms although nothing woke "
                 "it: after Pending, block_on must park until a wake", polls);
    cr_assert_lt(cpu, STAGE02_WAIT_CPU_NS, "block_on used %.1f ms of CPU in 100 ms waiting for a wake "
                 "that never comes: it must park, not spin", (double)cpu / 1e6);
}

/* ---- ownership ------------------------------------------------------------------- */

LAB_TEST(block_on, does_not_drop_future, 10)
{
    /* A Signal future: after block_on its owner may still poll it (Ready
     * again, SIGNAL_CONSUMED: stage 01's contract 7), and then drops it. */
    static int value;
    struct signal *sp;
    struct signal_future *sf;
    new_signal_pair(&sp, &sf);
    cr_assert_eq(signal_complete(sp, &value), SIGNAL_OK, "signal_complete failed");
    struct signal_output out = { .outcome = SIGNAL_CONSUMED, .value = NULL };
    unsigned long polls = block_on(signal_future_as_future(sf), &out);
    struct waker none = noop_waker();
    struct context cx = context_from_waker(&none);
    struct signal_output again = { .outcome = SIGNAL_VALUE, .value = NULL };
    enum poll r = signal_future_poll(sf, &cx, &again);
    signal_future_drop(sf); /* the caller's drop: block_on must not have made one */
    signal_drop(sp);
    cr_assert(polls == 1 && out.outcome == SIGNAL_VALUE && out.value == &value,
              "block_on on a completed Signal: %lu polls, outcome %d; expected 1 poll and the "
              "value", polls, (int)out.outcome);
    cr_assert(r == POLL_READY && again.outcome == SIGNAL_CONSUMED,
              "the Signal future, polled again by its owner after block_on, did not answer Ready "
              "with SIGNAL_CONSUMED: did block_on drop it?");

    /* A future that counts its drops. */
    struct owned o = { .left = 1 };
    struct future f = future_of(&owned_vt, &o);
    polls = block_on(f, NULL);
    cr_assert_eq(polls, 2, "block_on on a future Pending once (self-woken) made %lu polls; "
                 "expected 2", polls);
    cr_assert_eq(o.drops, 0, "block_on dropped the future: the caller still owns it and drops "
                 "it itself (block_on.h contract 2)");
    future_drop(f); /* the caller's drop, exactly once */
    cr_assert_eq(o.drops, 1, "the future was dropped %u times", o.drops);
}

LAB_TEST(block_on, frees_its_parker, 10)
{
    /* yield: woken by reference during poll; signal: a clone stored and
     * woken by value from another thread */
    alloc_count_start();
    struct yield_future y;
    yield_future_init(&y, 3);
    block_on(yield_future_as_future(&y), NULL);
    struct alloc_counts c = alloc_count_stop();
    cr_assert_eq(c.allocs, c.frees,
                 "block_on(yield_future(3)) made %llu allocations and %llu frees: block_on "
                 "must drop its waker and release its parker before it returns (parker.h contract 7)",
                 (unsigned long long)c.allocs, (unsigned long long)c.frees);

    static int value;
    struct signal *sp;
    struct signal_future *sf;
    new_signal_pair(&sp, &sf);
    sem_t gate;
    sem_init(&gate, 0, 0);
    struct gated_signal g = { .inner = sf, .gate = &gate, .opened = false };
    struct producer pr = { .signal = sp, .value = &value, .gate = &gate };
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, producer_main, &pr), 0, "could not start a thread");
    struct signal_output out;
    alloc_count_start();
    block_on(future_of(&gated_vt, &g), &out);
    pthread_join(t, NULL);
    c = alloc_count_stop();
    signal_future_drop(sf);
    signal_drop(sp);
    sem_destroy(&gate);
    cr_assert_eq(c.allocs, c.frees,
                 "block_on on a Signal woken from another thread: %llu allocations, %llu frees "
                 "during the call; the parker and its wakers must all be released",
                 (unsigned long long)c.allocs, (unsigned long long)c.frees);
}

/* ---- wake before park --------------------------------------------------------------- */

/* No sleeps: the early-wake future has its waker woken on another thread,
 * and that thread joined, before poll even returns Pending. The wake is
 * over before block_on can park; only a token remembers it. */
LAB_TEST(block_on_race, wake_before_park, 10)
{
    const unsigned ns[] = { 1, 3, 50 };
    for (unsigned k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        struct early_wake_future e;
        early_wake_future_init(&e, ns[k]);
        struct bg_block_on b;
        bg_block_on_start(&b, early_wake_future_as_future(&e), NULL);
        cr_assert(bg_block_on_finish(&b, STAGE02_RESCUE_MS),
                  "block_on hung: the future's waker was woken (from another thread, already "
                  "finished) before block_on parked, and the wake was lost. An unpark before "
                  "park must leave a token (parker.h contract 1; early_wake_future(%u))", ns[k]);
        cr_assert_eq(b.polls, ns[k] + 1, "block_on(early_wake_future(%u)) made %lu polls; "
                     "expected exactly %u: each early wake leaves a token, so block_on polls again "
                     "once per wake until Ready (block_on.h contract 1, parker.h contract 1)",
                     ns[k], b.polls, ns[k] + 1);
    }
}

/* A producer completes a Signal at a random moment against block_on: before
 * the first poll, between poll and park, or while parked. The two threads
 * meet at a start line (the producer waits there; the consumer, once it
 * sees the producer waiting, opens it), then each waits a random few
 * microseconds, so the completion lands all around the first poll. Every
 * iteration must finish. */
struct start_line {
    atomic_bool waiting; /* the producer is at the line */
    atomic_bool go;      /* the consumer opened it */
};

struct racer {
    struct start_line *line;
    unsigned spin;                /* random delay after the start */
    struct signal *signal;        /* producer: completes it */
    struct signal_future *future; /* consumer: block_on on it */
    int *value;
    enum signal_status status;
    struct signal_output out;
    unsigned long polls;
    struct gate done;
};

static void spin_for(unsigned n)
{
    for (volatile unsigned i = 0; i < n; i++)
        ;
}

/* Spins until *flag; yields now and then so a loaded machine still moves. */
static void spin_until(atomic_bool *flag)
{
    /* acquire: pairs with the release store that sets the flag */
    for (unsigned n = 1; !atomic_load_explicit(flag, memory_order_acquire); n++)
        if (n % 4096 == 0)
            sched_yield();
}

static void *race_producer(void *arg)
{
    struct racer *r = arg;
    atomic_store_explicit(&r->line->waiting, true, memory_order_release); /* pairs with spin_until */
    spin_until(&r->line->go);
    spin_for(r->spin);
    r->status = signal_complete(r->signal, r->value);
    return NULL;
}

/* The Signal future, plus a random pause after it registered its waker and
 * before it returns Pending: a future may do bounded work there, and it
 * widens the window in which a completion's wake reaches block_on before it
 * parks. */
struct slow_pending {
    struct signal_future *inner;
    unsigned pause;
};

static enum poll slow_pending_poll(void *self, struct context *cx, void *out)
{
    struct slow_pending *s = self;
    enum poll r = signal_future_poll(s->inner, cx, out);
    if (r == POLL_PENDING)
        spin_for(s->pause);
    return r;
}

static const struct future_vtable slow_pending_vt =
    FUTURE_VTABLE_INIT(struct slow_pending, sizeof(struct signal_output), slow_pending_poll, NULL);

static void *race_consumer(void *arg)
{
    struct racer *r = arg;
    spin_until(&r->line->waiting);
    atomic_store_explicit(&r->line->go, true, memory_order_release); /* pairs with spin_until */
    spin_for(r->spin % 1000);
    struct slow_pending f = { .inner = r->future, .pause = r->spin / 1000 };
    r->polls = block_on(future_of(&slow_pending_vt, &f), &r->out);
    gate_open(&r->done);
    return NULL;
}

LAB_TEST(block_on_race, signal_at_random_moment, 30)
{
    uint64_t seed = lab_seed(), rng = seed;
    unsigned iterations = lab_scale(2000, 40);
    static int values[2];
    unsigned long by_polls[4] = { 0 };
    for (unsigned i = 0; i < iterations; i++) {
        struct start_line line;
        atomic_init(&line.waiting, false);
        atomic_init(&line.go, false);
        struct racer prod = { .line = &line, .spin = (unsigned)(lab_rand(&rng) % 3000) };
        /* consumer: a delay before block_on (spin % 1000) and a pause before
         * Pending (spin / 1000, often none) */
        uint64_t r = lab_rand(&rng);
        unsigned pause = r % 2 ? 0 : (unsigned)((r >> 32) % 3000);
        struct racer cons = { .line = &line, .spin = pause * 1000 + (unsigned)(r >> 8) % 1000 };
        new_signal_pair(&prod.signal, &cons.future);
        prod.value = &values[i % 2];
        cons.out = (struct signal_output){ .outcome = SIGNAL_CONSUMED, .value = NULL };
        gate_init(&cons.done);

        pthread_t tp, tc;
        cr_assert_eq(pthread_create(&tp, NULL, race_producer, &prod), 0, "could not start a thread");
        cr_assert_eq(pthread_create(&tc, NULL, race_consumer, &cons), 0, "could not start a thread");

        pthread_join(tp, NULL); /* the producer always finishes */
        if (!gate_wait(&cons.done, STAGE02_RESCUE_MS))
            cr_assert_fail("lost wakeup at iteration %u, seed %llu: the Signal was completed "
                      "(status %d) but block_on stayed parked for %u ms: the completion's wake (an unpark) "
                      "was lost (parker.h contract 1). Replay with SEED=%llu",
                      i, (unsigned long long)seed, (int)prod.status, STAGE02_RESCUE_MS,
                      (unsigned long long)seed);
        pthread_join(tc, NULL);
        gate_destroy(&cons.done);
        cr_assert(cons.out.outcome == SIGNAL_VALUE && cons.out.value == &values[i % 2],
                  "iteration %u, seed %llu: block_on returned without the Signal's value", i,
                  (unsigned long long)seed);
        cr_assert(cons.polls >= 1 && cons.polls <= 3,
                  "iteration %u, seed %llu: block_on made %lu polls for one completion; at most "
                  "2 are needed (and 3 allowed for a spurious return): it polls without a wake",
                  i, (unsigned long long)seed, cons.polls);
        by_polls[cons.polls]++;
        signal_future_drop(cons.future);
        signal_drop(prod.signal);
    }
    lab_note("%u iterations: %lu completed before the first poll (1 poll), %lu after it "
             "(2 polls), %lu with a third poll", iterations, by_polls[1], by_polls[2], by_polls[3]);
}

/* ---- the counter-example, measured -------------------------------------------------- */

struct flag_setter {
    atomic_bool *flag;
    unsigned ms;
};

static void *flag_setter_main(void *arg)
{
    struct flag_setter *fs = arg;
    lab_sleep_ms(fs->ms);
    atomic_store_explicit(fs->flag, true, memory_order_release); /* pairs with spin_poll's acquire */
    return NULL;
}

/* The spinner is the yardstick, not the thing graded: what is asserted is
 * that block_on waiting on a real wake costs a small fraction of what the
 * self-waking spinner burns over the same 200 ms, and that block_on honours
 * every self-wake of the spinner (it does finish). */
LAB_TEST(block_on_perf, sleep_vs_spinner, 10)
{
    struct thread_sleep s;
    thread_sleep_init(&s, 200);
    uint64_t t0 = monotonic_ns(), c0 = thread_cpu_ns();
    unsigned long sleep_polls = block_on(thread_sleep_as_future(&s), NULL);
    uint64_t sleep_cpu = thread_cpu_ns() - c0, sleep_wall = monotonic_ns() - t0;
    future_drop(thread_sleep_as_future(&s));

    atomic_bool flag;
    atomic_init(&flag, false);
    struct flag_setter fs = { .flag = &flag, .ms = 200 };
    struct spin_future sp;
    spin_future_init(&sp, &flag);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, flag_setter_main, &fs), 0, "could not start a thread");
    t0 = monotonic_ns();
    c0 = thread_cpu_ns();
    unsigned long spin_polls = block_on(spin_future_as_future(&sp), NULL);
    uint64_t spin_cpu = thread_cpu_ns() - c0, spin_wall = monotonic_ns() - t0;
    pthread_join(t, NULL);

    lab_note("thread_sleep(200 ms): %lu polls, %.3f ms CPU, %.1f ms wall", sleep_polls,
             (double)sleep_cpu / 1e6, (double)sleep_wall / 1e6);
    lab_note("spinner over 200 ms: %lu polls, %.1f ms CPU, %.1f ms wall", spin_polls,
             (double)spin_cpu / 1e6, (double)spin_wall / 1e6);

    cr_assert_gt(spin_polls, 2, "block_on polled the self-waking spinner only %lu times in "
                 "200 ms", spin_polls);
    cr_assert_lt(sleep_cpu * 10, spin_cpu,
                 "block_on waiting 200 ms for one wake used %.3f ms of CPU, not even ten times "
                 "less than a spinner burning the same 200 ms (%.1f ms): waiting must park (block_on.h contract 1)",
                 (double)sleep_cpu / 1e6, (double)spin_cpu / 1e6);
}
