/* parker_test.c - stage 02: the parker's token, its timeouts, its waker,
 * and the parker seen as a driver. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "lab_test.h"
#include "measure.h"
#include "wakers.h"
#include "parker.h"
#include "stage02.h"

LAB_SUITE(parker, 10);
LAB_SUITE(parker_waker, 10);
LAB_SUITE(parker_driver, 10);
LAB_SUITE(parker_driver_forever, 10);
LAB_SUITE(parker_stress, 30);

static struct parker *new_parker(void)
{
    struct parker *p = parker_new();
    cr_assert_not_null(p, "parker_new() returned NULL: it should return a new parker");
    return p;
}

/* ---- the token --------------------------------------------------------------- */

/* No sleeps anywhere: the unpark has happened, completely, before park is
 * called. A parker without a token forgets it and sleeps. */
LAB_TEST(parker, unpark_before_park_timeout, 10)
{
    struct parker *p = new_parker();

    parker_unpark(p);
    cr_assert(parker_park_timeout(p, 0),
              "parker_unpark() then parker_park_timeout(p, 0) returned false: an unpark made "
              "before park must leave a token that the next park takes at once (parker.h contract 1)");

    parker_unpark(p);
    cr_assert(parker_park_timeout(p, 1000 * MS_NS),
              "parker_unpark() then parker_park_timeout(p, 1 s) returned false after sleeping: "
              "the unpark made before park was lost (no token)");

    parker_release(p);
}

LAB_TEST(parker, unpark_before_park, 10)
{
    struct parker *p = new_parker();
    parker_unpark(p); /* done before the parking thread even exists */

    struct bg_park b;
    bg_park_start(&b, p, -1);
    bool returned = bg_park_finish(&b, STAGE02_RESCUE_MS);
    cr_assert(returned,
              "parker_unpark() then parker_park(): park was still asleep after %u ms: the "
              "unpark made before park was lost; it must leave a token park takes at once",
              STAGE02_RESCUE_MS);
    parker_release(p);
}

/* True when parker_park() finds a token: a helper thread parks (without a
 * deadline: these items need no timed park) and is let go after 50 ms. */
static bool park_finds_a_token(struct parker *p)
{
    struct bg_park b;
    bg_park_start(&b, p, -1);
    bool returned_alone = gate_wait(&b.done, 50);
    if (!returned_alone)
        parker_unpark(p); /* now let it go */
    cr_assert(bg_park_finish(&b, STAGE02_RESCUE_MS),
              "parker_park() did not return after parker_unpark(): the token the next park takes was lost "
              "(parker.h contracts 1 and 2)");
    return returned_alone;
}

LAB_TEST(parker, several_unparks_store_one_token, 10)
{
    struct parker *p = new_parker();

    parker_unpark(p);
    parker_unpark(p);
    parker_unpark(p);
    cr_assert(parker_park_timeout(p, 0),
              "after three unparks parker_park_timeout(p, 0) returned false: the token is missing");
    cr_assert_not(park_finds_a_token(p),
                  "after three unparks, two parks both found a token: unparks must not add up; "
                  "a parker holds at most one token (parker.h contract 2)");

    /* the same through parker_park, which must take exactly the one token */
    parker_unpark(p);
    parker_unpark(p);
    struct bg_park b;
    bg_park_start(&b, p, -1);
    bool returned = bg_park_finish(&b, STAGE02_RESCUE_MS);
    cr_assert(returned, "after two unparks parker_park() did not return: the token was lost");
    cr_assert_not(park_finds_a_token(p),
                  "after two unparks and one parker_park(), another park still found a token: "
                  "a parker holds at most one token (parker.h contract 2)");
    parker_release(p);
}

struct unparker_arg {
    struct parker *p;
    unsigned times;
};

static void *unparker_main(void *arg)
{
    struct unparker_arg *u = arg;
    for (unsigned i = 0; i < u->times; i++)
        parker_unpark(u->p);
    return NULL;
}

LAB_TEST(parker, unparks_from_threads_store_one_token, 10)
{
    struct parker *p = new_parker();
    struct unparker_arg arg = { .p = p, .times = 100 };
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, unparker_main, &arg), 0, "could not start a thread");
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);

    cr_assert(parker_park_timeout(p, 0),
              "after 400 unparks from 4 threads parker_park_timeout(p, 0) found no token");
    cr_assert_not(park_finds_a_token(p),
                  "after 400 unparks from 4 threads, a second park also found a token: unparks "
                  "must not add up; a parker holds at most one token (parker.h contract 2)");
    parker_release(p);
}

/* ---- timeouts ------------------------------------------------------------------ */

/* Lower bounds only (a deadline is never early); the upper bound is a
 * generous "it did come back at all", not a speed test. */
LAB_TEST(parker, park_timeout_times_out, 10)
{
    struct parker *p = new_parker();
    for (int round = 1; round <= 2; round++) {
        struct bg_park b;
        bg_park_start(&b, p, 50 * MS_NS);
        bool returned = bg_park_finish(&b, STAGE02_RESCUE_MS);
        cr_assert(returned,
                  "parker_park_timeout(p, 50 ms) with no unpark was still asleep after %u ms: "
                  "it must give up when its timeout has passed (parker.h contract 6)",
                  STAGE02_RESCUE_MS);
        cr_assert_not(b.result,
                      "parker_park_timeout(p, 50 ms) with no unpark returned true (round %d): "
                      "true means a token was taken, and nobody unparked (parker.h contract 6)%s",
                      round, round == 2 ? " (after a first timeout, the state must be back to "
                                          "no token, not left as parked)" : "");
        cr_assert_geq(b.elapsed_ns, 49 * MS_NS,
                      "parker_park_timeout(p, 50 ms) returned after %.1f ms of CLOCK_MONOTONIC "
                      "(round %d): early, where parker.h contract 6 says never early on that "
                      "clock (and which clock did the wait itself measure?)",
                      (double)b.elapsed_ns / 1e6, round);
    }
    parker_release(p);
}

LAB_TEST(parker, park_timeout_zero_only_checks, 10)
{
    struct parker *p = new_parker();
    struct bg_park b;
    bg_park_start(&b, p, 0);
    bool returned = bg_park_finish(&b, STAGE02_RESCUE_MS);
    cr_assert(returned, "parker_park_timeout(p, 0) with no token was still asleep after %u ms: a "
              "zero timeout only checks for the token", STAGE02_RESCUE_MS);
    cr_assert_not(b.result, "parker_park_timeout(p, 0) with no token returned true");

    /* and the check leaves things as they were: an unpark still counts */
    parker_unpark(p);
    cr_assert(parker_park_timeout(p, 0),
              "after a zero-timeout park, an unpark left no token for the next park");
    parker_release(p);
}

/* ---- parking across threads ----------------------------------------------------- */

LAB_TEST(parker, unpark_wakes_parked_thread, 10)
{
    struct parker *p = new_parker();
    struct bg_park b;
    bg_park_start(&b, p, -1);
    /* Give it time to fall asleep (not needed for correctness: an earlier
     * unpark would be a token; this makes the "already asleep" case the
     * likely one). */
    lab_sleep_ms(50);
    uint64_t cpu = thread_cpu_ns_of(b.thread);
    parker_unpark(p);
    bool returned = bg_park_finish(&b, STAGE02_RESCUE_MS);
    cr_assert(returned,
              "a thread asleep in parker_park() was not woken by parker_unpark() from another "
              "thread (still asleep after %u ms; parker.h contracts 3 and 4)", STAGE02_RESCUE_MS);
    cr_assert_lt(cpu, STAGE02_WAIT_CPU_NS,
                 "the thread in parker_park() used %.1f ms of CPU in 50 ms while it waited: "
                 "parking must sleep, not spin (parker.h contract 3)", (double)cpu / 1e6);

    /* the same with a timed park: the unpark wins, long before the timeout */
    bg_park_start(&b, p, 10000 * MS_NS);
    lab_sleep_ms(20);
    parker_unpark(p);
    returned = bg_park_finish(&b, STAGE02_RESCUE_MS);
    cr_assert(returned, "a thread in parker_park_timeout(p, 10 s) was not woken by parker_unpark() from "
              "another thread (parker.h contracts 3 and 4)");
    /* false before the unpark even came: the timed park itself is wrong, not the unpark */
    cr_assert(b.result || b.elapsed_ns >= 19 * MS_NS,
              "parker_park_timeout(p, 10 s) returned false after %.1f ms, before the unpark came (at 20 ms) "
              "and long before its timeout: a timed park that gives up early (is its deadline read on the "
              "condition variable's clock? parker.h contract 6)", (double)b.elapsed_ns / 1e6);
    cr_assert(b.result, "parker_park_timeout(p, 10 s), unparked from another thread after 20 ms, returned false: "
              "a park that took the token must report it (parker.h contracts 4 and 6)");
    parker_release(p);
}

LAB_TEST(parker, parked_without_unpark_stays_parked, 10)
{
    struct parker *p = new_parker();
    struct bg_park b;
    bg_park_start(&b, p, -1);
    bool returned_alone = gate_wait(&b.done, 100);
    parker_unpark(p); /* now let it go */
    bool returned = bg_park_finish(&b, STAGE02_RESCUE_MS);
    cr_assert_not(returned_alone,
                  "parker_park() returned within 100 ms although nobody unparked: park must "
                  "sleep until a token arrives (a rare spurious return is allowed, not this)");
    cr_assert(returned, "parker_park() did not return after parker_unpark() from another thread");
    parker_release(p);
}

/* ---- the waker ------------------------------------------------------------------- */

LAB_TEST(parker_waker, wake_unparks, 10)
{
    alloc_count_start();
    struct parker *p = new_parker();
    struct waker w = parker_waker(p);

    waker_wake_by_ref(&w);
    cr_assert(parker_park_timeout(p, 0),
              "waker_wake_by_ref() on a parker_waker() left no token: a wake must unpark");

    struct waker w2 = parker_waker(p);
    cr_assert(waker_will_wake(&w, &w2),
              "two wakers from parker_waker() of the same parker do not will_wake() each other: "
              "their data or their vtable differ (waker.h, waker_will_wake; parker.h contract 7)");
    waker_drop(&w2);

    waker_wake(&w); /* consumes w */
    cr_assert(waker_is_none(&w), "waker_wake() must leave the waker empty");
    cr_assert(parker_park_timeout(p, 0),
              "waker_wake() on a parker_waker() left no token: a wake must unpark");

    parker_release(p);
    struct alloc_counts c = alloc_count_stop();
    cr_assert_eq(c.allocs, c.frees,
                 "parker_new + two wakers, all released: %llu allocations but %llu frees; a "
                 "parker waker must give its reference back when dropped or woken",
                 (unsigned long long)c.allocs, (unsigned long long)c.frees);
}

/* The books balance: the parker lives exactly as long as its last reference,
 * whoever holds it, and is freed exactly once. */
LAB_TEST(parker_waker, waker_keeps_parker_alive, 10)
{
    alloc_count_start();
    struct parker *p = new_parker();
    struct waker w = parker_waker(p);
    parker_release(p); /* the creator lets go: only the waker holds it now */
    struct waker w2 = waker_clone(&w);
    waker_drop(&w);
    waker_wake_by_ref(&w2); /* must still work: the clone keeps the parker alive */
    struct alloc_counts alive = alloc_count_stop();
    cr_assert_geq(alive.allocs, 1, "parker_new() allocated nothing that the counter saw");
    cr_assert_eq(alive.frees, 0,
                 "the parker was freed while a waker still referred to it: each waker must "
                 "hold a reference of its own");

    alloc_count_start();
    waker_drop(&w2); /* the last reference */
    struct alloc_counts gone = alloc_count_stop();
    cr_assert_eq(gone.frees, alive.allocs,
                 "dropping the last waker freed %llu blocks; the parker had %llu: the last "
                 "reference must free the parker (is a reference leaked in parker_waker?)",
                 (unsigned long long)gone.frees, (unsigned long long)alive.allocs);
}

struct waking_arg {
    struct waker w;
    unsigned delay_ms;
};

static void *waking_main(void *arg)
{
    struct waking_arg *a = arg;
    lab_sleep_ms(a->delay_ms);
    waker_wake(&a->w); /* consumes the thread's reference */
    return NULL;
}

LAB_TEST(parker_waker, wake_from_other_thread, 10)
{
    alloc_count_start();
    struct parker *p = new_parker();
    struct waking_arg a = { .w = parker_waker(p), .delay_ms = 20 };
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, waking_main, &a), 0, "could not start a thread");
    uint64_t t0 = monotonic_ns();
    bool woken = parker_park_timeout(p, (uint64_t)STAGE02_RESCUE_MS * MS_NS);
    uint64_t waited = monotonic_ns() - t0;
    pthread_join(t, NULL);
    parker_release(p);
    struct alloc_counts c = alloc_count_stop();
    cr_assert(woken || waited >= 19 * MS_NS,
              "parker_park_timeout(p, %u ms) returned false after %.1f ms, before the waker was woken (at 20 ms) "
              "and long before its timeout: a timed park that gives up early (is its deadline read on the "
              "condition variable's clock? parker.h contract 6)", STAGE02_RESCUE_MS, (double)waited / 1e6);
    cr_assert(woken, "a waker_wake() from another thread did not unpark the parked thread (a parker waker's wake "
              "is parker_unpark: parker.h contract 1)");
    cr_assert_eq(c.allocs, c.frees,
                 "a parker woken through its waker from another thread: %llu allocations, %llu "
                 "frees; the woken waker's reference was not given back (parker.h contract 7)",
                 (unsigned long long)c.allocs, (unsigned long long)c.frees);
}

/* ---- the driver view ----------------------------------------------------------- */

LAB_TEST(parker_driver, park_unpark_now, 10)
{
    struct parker *p = new_parker();
    struct driver d = parker_driver(p);

    driver_unpark(d);
    cr_assert(driver_park(d, 0), "driver_unpark then driver_park(d, 0) found no token");
    cr_assert_not(driver_park(d, 0), "driver_park(d, 0) found a token nobody stored");

    uint64_t t0 = monotonic_ns();
    cr_assert_not(driver_park(d, (int64_t)(20 * MS_NS)), "driver_park(d, 20 ms) returned true "
                  "with no unpark");
    uint64_t waited = monotonic_ns() - t0;
    cr_assert_geq(waited, 19 * MS_NS, "driver_park(d, 20 ms) came back after %.1f ms: early (a timed park never returns "
                  "before its timeout without the token: parker.h contracts 6 and 8)",
                  (double)waited / 1e6);

    uint64_t before = driver_monotonic_ns();
    uint64_t n1 = driver_now(d);
    uint64_t n2 = driver_now(d);
    uint64_t after = driver_monotonic_ns();
    cr_assert(before <= n1 && n1 <= n2 && n2 <= after,
              "driver_now() of a parker is not CLOCK_MONOTONIC in nanoseconds "
              "(driver_monotonic_ns())");

    driver_unpark(d);
    driver_unpark(d);
    cr_assert(driver_park(d, DRIVER_PARK_FOREVER),
              "driver_park(d, forever) after two driver_unparks must take the token and "
              "return true");
    parker_release(p);
}

struct driver_park_arg {
    struct driver d;
    bool result;
    struct gate done;
};

static void *driver_park_main(void *arg)
{
    struct driver_park_arg *a = arg;
    a->result = driver_park(a->d, DRIVER_PARK_FOREVER);
    gate_open(&a->done);
    return NULL;
}

LAB_TEST(parker_driver, unpark_from_other_thread, 10)
{
    struct parker *p = new_parker();
    struct driver_park_arg a = { .d = parker_driver(p), .result = false };
    gate_init(&a.done);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, driver_park_main, &a), 0, "could not start a thread");
    lab_sleep_ms(20);
    driver_unpark(a.d);
    bool in_time = gate_wait(&a.done, STAGE02_RESCUE_MS);
    cr_assert(in_time, "a thread in driver_park(d, forever) was not woken by driver_unpark() "
              "from another thread (still asleep after %u ms)", STAGE02_RESCUE_MS);
    pthread_join(t, NULL);
    gate_destroy(&a.done);
    parker_release(p);
    cr_assert(a.result, "driver_park(d, forever) woken by an unpark returned false: true means "
              "the token was taken (parker.h contract 8: the same token)");
}

/* A negative timeout is "forever", not "do not wait": with no unpark the
 * driver's park sleeps on; the unpark that comes 100 ms later ends it. */
LAB_TEST(parker_driver_forever, sleeps_until_unparked, 10)
{
    struct parker *p = new_parker();
    struct driver_park_arg a = { .d = parker_driver(p), .result = false };
    gate_init(&a.done);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, driver_park_main, &a), 0, "could not start a thread");
    bool alone = gate_wait(&a.done, 100);
    driver_unpark(a.d);
    bool in_time = gate_wait(&a.done, STAGE02_RESCUE_MS);
    if (in_time)
        pthread_join(t, NULL);
    cr_assert_not(alone, "driver_park(d, DRIVER_PARK_FOREVER) returned (%s) within 100 ms although nobody "
                  "unparked: a negative timeout means wait for the token, for ever (parker.h contract 8)",
                  a.result ? "true" : "false");
    cr_assert(in_time, "a thread in driver_park(d, forever) was not woken by driver_unpark() from another thread "
              "(still asleep after %u ms; parker.h contract 8)", STAGE02_RESCUE_MS);
    gate_destroy(&a.done);
    parker_release(p);
    cr_assert(a.result, "driver_park(d, forever) woken by an unpark returned false (parker.h contract 8: the same "
              "token)");
}

/* ---- stress: two threads bat a ball back and forth through two parkers ---- */

struct rally {
    struct parker *pa, *pb;
    atomic_uint ball;   /* even: A's turn; odd: B's turn */
    atomic_bool stop;   /* set by the watcher when the ball stopped moving */
    atomic_uint exited; /* threads that have left their loop */
    unsigned rounds;
    uint64_t seed;
};

/* Busy work for none, a few, or a few tens of microseconds (the last about
 * as long as it takes to wake a sleeping thread). */
static void jitter(uint64_t *rng)
{
    uint64_t r = lab_rand(rng);
    unsigned n = (unsigned)(r >> 32);
    switch (r % 4) {
    case 0: n = 0; break;
    case 1:
    case 2: n %= 4096; break;
    case 3: n %= 65536; break;
    }
    for (volatile unsigned i = 0; i < n; i++)
        ;
}

/* One side of the rally: wait for the ball (its parity), hit it, wake the
 * other side. The jitter sits between "the ball is not here yet" and park:
 * exactly the window where the other side's unpark must become a token.
 * Correct code always re-checks after park returns (spurious returns are
 * allowed), so extra tokens cost it one loop, and lost ones hang it. */
static void rally_side(struct rally *r, unsigned first, struct parker *me, struct parker *other)
{
    uint64_t rng = r->seed + first;
    for (unsigned v = first; v < 2 * r->rounds; v += 2) {
        /* acquire: pairs with the other side's release store of the ball */
        while (atomic_load_explicit(&r->ball, memory_order_acquire) != v) {
            if (atomic_load_explicit(&r->stop, memory_order_relaxed))
                goto out;
            jitter(&rng);
            parker_park(me);
        }
        atomic_store_explicit(&r->ball, v + 1, memory_order_release); /* pairs with the acquire above */
        parker_unpark(other);
        jitter(&rng);
    }
out:
    atomic_fetch_add_explicit(&r->exited, 1, memory_order_relaxed); /* read by the watcher only */
}

static void *rally_a(void *arg)
{
    struct rally *r = arg;
    rally_side(r, 0, r->pa, r->pb);
    return NULL;
}

static void *rally_b(void *arg)
{
    struct rally *r = arg;
    rally_side(r, 1, r->pb, r->pa);
    return NULL;
}

LAB_TEST(parker_stress, ping_pong, 30)
{
    struct rally r = { .pa = new_parker(), .pb = new_parker(), .rounds = lab_scale(5000, 100),
                       .seed = lab_seed() };
    atomic_init(&r.ball, 0);
    atomic_init(&r.stop, false);
    atomic_init(&r.exited, 0);
    pthread_t a, b;
    cr_assert_eq(pthread_create(&b, NULL, rally_b, &r), 0, "could not start a thread");
    cr_assert_eq(pthread_create(&a, NULL, rally_a, &r), 0, "could not start a thread");

    /* Watch the ball: it must keep moving. A lost unpark leaves both threads
     * asleep with the ball still. Past the rescue delay, stop the rally and
     * wake both sides by hand until they have left, then report it. */
    unsigned last = 0, stuck_at = UINT32_MAX;
    uint64_t last_move = monotonic_ns(), limit = (uint64_t)STAGE02_RESCUE_MS * MS_NS;
    while (atomic_load_explicit(&r.exited, memory_order_relaxed) < 2) {
        unsigned now_ball = atomic_load_explicit(&r.ball, memory_order_relaxed);
        if (now_ball != last) {
            last = now_ball;
            last_move = monotonic_ns();
        } else if (stuck_at == UINT32_MAX && monotonic_ns() - last_move > limit) {
            stuck_at = now_ball;
            atomic_store_explicit(&r.stop, true, memory_order_relaxed);
        }
        if (stuck_at != UINT32_MAX) {
            if (monotonic_ns() - last_move > 2 * limit)
                break; /* unparks wake nobody: leave them asleep, the test fails below */
            parker_unpark(r.pa);
            parker_unpark(r.pb);
        }
        lab_sleep_ms(2);
    }
    if (atomic_load_explicit(&r.exited, memory_order_relaxed) == 2) {
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        parker_release(r.pa);
        parker_release(r.pb);
    }
    cr_assert_eq(stuck_at, UINT32_MAX,
                 "lost wakeup at round %u of %u, seed %llu: two threads taking turns through "
                 "park/unpark both slept (ball at %u): an unpark that came between a thread's "
                 "last check and its park was lost (parker.h contract 1)", stuck_at / 2, r.rounds,
                 (unsigned long long)r.seed, stuck_at);
}
