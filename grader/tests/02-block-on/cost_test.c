/* cost_test.c - what a zero-timeout park costs, counted rather than timed.
 *
 * parker_park_timeout(p, 0) and the driver's park(0) only check for the
 * token (parker.h contract 6): stage 03's executor makes one every 61 task
 * polls, so it must be the fast path's one atomic operation, not the lock and
 * a timed condition wait that finds its deadline passed (the right answer,
 * about 57 us a call instead of a few ns; docs/02-block-on.md#timeouts).
 * Every wrapped lock and condition-variable call made inside those parks is
 * counted (common/testing/explore.h, lab_sync_on_point), with a token and
 * without: a count, the same on a quiet or a loaded machine.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "explore.h"
#include "stage02.h"

LAB_SUITE(parker_cost, 10);

struct tally {
    atomic_bool inside;       /* counting: the test thread is inside a zero-timeout park */
    atomic_uint locks, waits;
    char first[96];           /* the first operation counted, as "lock at function+0x1c" */
};

static void count_point(const char *op, const void *site, unsigned held, void *arg)
{
    (void)held;
    struct tally *t = arg;
    if (!atomic_load(&t->inside))
        return;
    bool wait = strcmp(op, "cond wait") == 0;
    bool lock = strcmp(op, "lock") == 0 || strcmp(op, "trylock") == 0;
    if (!wait && !lock)
        return;
    if (atomic_fetch_add(wait ? &t->waits : &t->locks, 1) == 0 && atomic_load(&t->locks) + atomic_load(&t->waits) == 1) {
        char where[64];
        lab_sync_site(site, where, sizeof where);
        snprintf(t->first, sizeof t->first, "a %s in %s", op, where);
    }
}

LAB_TEST(parker_cost, zero_timeout_park_is_one_check, 5)
{
    enum { N = 200 };
    struct parker *p = parker_new();
    cr_assert_not_null(p, "parker_new returned NULL");
    struct driver d = parker_driver(p);
    struct tally t = { .first = "" };
    atomic_init(&t.inside, false);
    atomic_init(&t.locks, 0);
    atomic_init(&t.waits, 0);
    lab_sync_on_point(count_point, &t);
    lab_sync_track(true);
    unsigned tokens = 0, empties = 0;
    for (int i = 0; i < N; i++) {
        bool with_token = i % 2;
        if (with_token)
            parker_unpark(p);
        atomic_store(&t.inside, true);
        bool got = i % 4 < 2 ? parker_park_timeout(p, 0) : driver_park(d, 0);
        atomic_store(&t.inside, false);
        tokens += got && with_token;
        empties += !got && !with_token;
    }
    lab_sync_track(false);
    lab_sync_on_point(NULL, NULL);
    parker_release(p);
    cr_assert_eq(tokens, N / 2, "a zero-timeout park after an unpark returned false %u times of %d: the token "
                 "must be taken (parker.h contract 1, 6)", N / 2 - tokens, N / 2);
    cr_assert_eq(empties, N / 2, "a zero-timeout park with no token returned true %u times of %d (parker.h "
                 "contract 6)", N / 2 - empties, N / 2);
    unsigned locks = atomic_load(&t.locks), waits = atomic_load(&t.waits);
    lab_note("%d zero-timeout parks: %u lock(s), %u condition wait(s)", N, locks, waits);
    cr_assert(locks == 0 && waits == 0, "%d zero-timeout parks (parker_park_timeout(p, 0) and the driver's "
              "park(0), half with a token) took a lock %u times and waited on a condition variable %u times, the "
              "first %s: parker.h contract 6 says a zero timeout only checks for the token, and a lock or a timed "
              "wait is more than a check (a timed wait whose deadline has passed costs about 57 us a call "
              "instead of a few ns; stage 03 makes one every 61 polls). The next "
              "hint: make hint STAGE=2 ITEM=zero-park-is-one-check", N, locks, waits, t.first);
}
