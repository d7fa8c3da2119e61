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
