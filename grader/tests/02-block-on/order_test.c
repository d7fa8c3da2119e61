/* order_test.c - stage 02: what an unpark publishes.
 *
 * parker.h promises more than "park returns": everything the unparking
 * thread wrote before parker_unpark() is visible to the parked thread once
 * park has taken that token. In C11 that is a release by unpark paired with
 * an acquire by park, on the token. This test leaves that pair as the ONLY
 * happens-before edge between a writer and a reader, so ThreadSanitizer (the
 * `races` item runs it) reports a data race on the plain data as soon as
 * either side is relaxed:
 *
 *   publisher thread                         test thread (the parker's owner)
 *   data[] = ...            (plain writes)
 *   parker_unpark(p)        (release)
 *   unparked = 1            (relaxed) ---->  spin until unparked == 1 (relaxed)
 *                                            parker_park_timeout(p, ...) (acquire)
 *                                            read data[]    (plain reads)
 *
 * No lock, no condition variable, no thread start or join stands between
 * the writes and the reads: the publisher is started before it writes, and
 * joined after the reads; the handshake flag is relaxed on purpose (it
 * orders nothing, it only says "the unpark is over"). Because the unpark is
 * over before park is called, park finds the token already there and takes
 * it on its fast path, with no lock that could order the two threads by
 * itself; a parker that sleeps under a mutex even then would be ordered by
 * that mutex instead, which is just as correct. In the plain lane the test
 * only checks the values.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "explore.h"
#include "lab_test.h"
#include "measure.h"
#include "parker.h"
#include "stage02.h"

LAB_SUITE(parker_order, 10);

#define ORDER_WORDS 8

struct publish {
    struct parker *p;
    unsigned long data[ORDER_WORDS]; /* plain: written before the unpark, read after the park */
    atomic_int unparked;             /* the handshake: relaxed, pairs with nothing on purpose */
};

static void *publisher_main(void *arg)
{
    struct publish *pb = arg;
    for (unsigned i = 0; i < ORDER_WORDS; i++)
        pb->data[i] = 0x5eed0000ul + i;
    parker_unpark(pb->p);
    /* relaxed: says "the unpark is over" and orders nothing; only the
     * token's release/acquire may carry data[] to the other thread */
    atomic_store_explicit(&pb->unparked, 1, memory_order_relaxed);
    return NULL;
}

LAB_TEST(parker_order, unpark_publishes_to_token_taker, 10)
{
    struct publish pb = { .p = parker_new() };
    cr_assert_not_null(pb.p, "parker_new() returned NULL: it should return a new parker");
    atomic_init(&pb.unparked, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, publisher_main, &pb), 0, "could not start a thread");

    /* relaxed: pairs with nothing (see the top of the file) */
    uint64_t limit = monotonic_ns() + (uint64_t)STAGE02_RESCUE_MS * MS_NS;
    while (!atomic_load_explicit(&pb.unparked, memory_order_relaxed) && monotonic_ns() < limit)
        sched_yield();
    bool seen = atomic_load_explicit(&pb.unparked, memory_order_relaxed);

    /* The unpark is over: the token is there, and park takes it at once. */
    bool took = parker_park_timeout(pb.p, (uint64_t)STAGE02_RESCUE_MS * MS_NS);
    unsigned bad = ORDER_WORDS;
    for (unsigned i = 0; i < ORDER_WORDS; i++)
        if (pb.data[i] != 0x5eed0000ul + i) {
            bad = i;
            break;
        }
    pthread_join(t, NULL);
    parker_release(pb.p);

    cr_assert(seen, "parker_unpark() on a parker nobody was parked on did not return within %u ms",
              STAGE02_RESCUE_MS);
    cr_assert(took, "parker_unpark() had returned, then parker_park_timeout() found no token: an "
              "unpark made before park must leave a token");
    cr_assert_eq(bad, ORDER_WORDS,
                 "the thread that took the token read word %u of the data written before "
                 "parker_unpark() as stale: nothing ordered those writes before the park that took the "
                 "token (parker.h contract 1); the next hint: make hint STAGE=2 ITEM=races", bad);
}

/* The same pair, with the token arriving while park is under way, on the
 * paths after the fast one: the point hook (common/testing/explore.h) stops
 * the owner inside park, at its first lock (its fast path found no token)
 * or where its first condition wait returns (a wait of 5 ms that timed
 * out), and the publisher writes and unparks there. An unpark that finds
 * the parker EMPTY takes no lock, and one that finds it PARKED waits on the
 * lock the owner holds until the owner has returned: either way, the
 * token's release and the acquire that takes it are still the only edge
 * between the writes and the reads (parker.h contract 1: the taking
 * acquires, whichever path takes it). A parker that never stops there
 * (no lock, no condition wait) has nothing to check here. */
struct late {
    struct publish pb;
    const char *at;     /* the owner's point to stop at: "lock" or "cond waited" */
    pthread_t owner;
    atomic_int go;      /* owner -> publisher: write and unpark now; relaxed, orders nothing */
    bool stopped;       /* the owner's only */
};

static _Thread_local bool is_publisher;

static void relaxed_wait(atomic_int *flag)
{
    uint64_t limit = monotonic_ns() + (uint64_t)STAGE02_RESCUE_MS * MS_NS;
    while (!atomic_load_explicit(flag, memory_order_relaxed) && monotonic_ns() < limit)
        sched_yield();
}

static void stop_in_park(const char *op, const void *site, unsigned held, void *arg)
{
    (void)site;
    (void)held;
    struct late *l = arg;
    if (is_publisher) {
        /* its unpark found the owner PARKED and goes for the lock the owner
         * holds: the token is there, and the owner may go on */
        if (strcmp(op, "lock") == 0)
            atomic_store_explicit(&l->pb.unparked, 1, memory_order_relaxed);
        return;
    }
    if (l->stopped || !pthread_equal(pthread_self(), l->owner) || strcmp(op, l->at) != 0)
        return;
    l->stopped = true;
    atomic_store_explicit(&l->go, 1, memory_order_relaxed);
    relaxed_wait(&l->pb.unparked);
}

static void *late_publisher(void *arg)
{
    struct late *l = arg;
    is_publisher = true;
    relaxed_wait(&l->go); /* a park that never stops there: the unpark comes after 2 s all the same */
    return publisher_main(&l->pb);
}

static void token_taken_late(const char *at, uint64_t timeout_ns)
{
    struct late l = { .pb = { .p = parker_new() }, .at = at, .owner = pthread_self() };
    cr_assert_not_null(l.pb.p, "parker_new() returned NULL: it should return a new parker");
    atomic_init(&l.pb.unparked, 0);
    atomic_init(&l.go, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, late_publisher, &l), 0, "could not start a thread");
    lab_sync_on_point(stop_in_park, &l);
    lab_sync_track(true);
    bool took = parker_park_timeout(l.pb.p, timeout_ns);
    unsigned bad = ORDER_WORDS;
    for (unsigned i = 0; took && i < ORDER_WORDS; i++)
        if (l.pb.data[i] != 0x5eed0000ul + i) {
            bad = i;
            break;
        }
    pthread_join(t, NULL);
    lab_sync_track(false);
    lab_sync_on_point(NULL, NULL);
    parker_release(l.pb.p);
    lab_note("park stopped at its first %s: %s", at, l.stopped ? "yes" : "no: nothing to check");
    if (!l.stopped)
        return;
    cr_assert(took, "an unpark made while park was under way (at its first %s) left no token for it", at);
    cr_assert_eq(bad, ORDER_WORDS,
                 "the thread that took the token read word %u of the data written before "
                 "parker_unpark() as stale: the unpark landed while park was under way (at its first %s), "
                 "and nothing ordered those writes before the park that took the token (parker.h contract 1); "
                 "the next hint: make hint STAGE=2 ITEM=races", bad, at);
}

/* The token lands after the fast path found none, before the owner takes
 * its lock. */
LAB_TEST(parker_order, token_after_the_fast_path_publishes, 10)
{
    token_taken_late("lock", 2 * (uint64_t)STAGE02_RESCUE_MS * MS_NS);
}

/* The token lands as the owner's wait returns (its 5 ms timed out), before
 * it looks at the state. */
LAB_TEST(parker_order, token_at_a_wait_return_publishes, 10)
{
    token_taken_late("cond waited", 5 * MS_NS);
}
