/* unpark_race_test.c - stage 02: an unpark that reads the state with a load
 * and then writes the token, against an owner that parks in between.
 *
 * The window between the two is a few instructions wide: a stress test
 * hits it once in a long while. Here it is forced on every run
 * (store_buffer.h, lab_sb_unpark_race): the unpark is single-stepped and
 * stopped at its first plain access to the parker (the parker alone on its
 * page), the owner parks meanwhile, and the unpark goes on. An unpark whose
 * first access is a read-modify-write (or the lock the owner sleeps under)
 * is never stopped. */
#define _GNU_SOURCE
#include <stdint.h>

#include "lab_test.h"
#include "measure.h"
#include "store_buffer.h"
#include "parker.h"
#include "stage02.h"

LAB_SUITE(parker_unpark_race, 15);

static void race_unpark(void *arg) { parker_unpark(arg); }

/* The owner's park: timed, so the owner comes back by itself even when the
 * unpark was lost. */
static void race_park(void *arg) { (void)parker_park_timeout(arg, 4000 * MS_NS * (uint64_t)LAB_TIMEOUT_SCALE); }

LAB_TEST(parker_unpark_race, owner_parks_while_unpark_reads_the_state, 15)
{
#if !defined(__x86_64__)
    lab_cannot_judge("the unpark is stopped by single-stepping with x86-64's trap flag; this machine is not "
                     "x86-64");
#else
    alloc_own_pages(true);
    struct parker *p = parker_new();
    alloc_own_pages(false);
    cr_assert_not_null(p, "parker_new() returned NULL: it should return a new parker");
    struct lab_sb_park sp = { .page = (void *)((uintptr_t)p & ~(uintptr_t)4095), .unpark = race_unpark,
                              .park = race_park, .arg = p, .wake_ms = STAGE02_RESCUE_MS / 2 };
    struct lab_sb_park_result r;
    cr_assert(lab_sb_unpark_race(&sp, &r), "could not start a thread (test machine out of resources)");
    char note[256];
    const char *unjudged = lab_sb_unpark_unjudged(&r, "the parker", note, sizeof note);
    lab_note("%s", note);
    if (unjudged)
        lab_cannot_judge("%s", unjudged);
    cr_assert(r.returned || !r.watched,
              "parker_unpark() read the parker's state with a plain access (no read-modify-write, no lock) and "
              "was stopped right after it; meanwhile the owner called park, found no token, and went to sleep. "
              "The unpark then went on and ended, and the owner was still asleep %u ms later: what the unpark "
              "read was stale by the time it wrote the token, so it did not wake the owner. The unpark was lost (parker.h contracts 1 and 3): what does a "
              "read of the state tell an unpark about a state the owner may change before the unpark writes? The next "
              "hint: make hint STAGE=2 ITEM=cross-thread-unpark",
              sp.wake_ms);
    cr_assert(r.returned,
              "parker_unpark() ended before the owner called park, and park then did not return within %u ms: "
              "an unpark made before park was lost (parker.h contract 1)",
              sp.wake_ms);
    parker_release(p);
#endif
}

/* The other half: a park that looks at the state and then announces its
 * sleep in two steps (a load, then a store of PARKED), against an unpark
 * made in between. Where the gap sits depends on how park is written, so
 * every place is tried (store_buffer.h, lab_sb_park_explore): park is
 * single-stepped on a fresh parker and stopped right after its first
 * access to the parker, then its second, and so on, until it reaches its
 * sleep; at each stop another thread unparks, then park goes on. A park
 * began before that unpark, so it returns within a second every time. */
LAB_SUITE(parker_park_race, 30);

static void park_race_fresh(void *ctx, struct lab_sb_park *sp)
{
    (void)ctx;
    alloc_own_pages(true);
    struct parker *p = parker_new();
    alloc_own_pages(false);
    cr_assert_not_null(p, "parker_new() returned NULL: it should return a new parker");
    sp->arg = p;
    sp->page = (void *)((uintptr_t)p & ~(uintptr_t)4095);
}

static void park_race_done(void *ctx, struct lab_sb_park *sp)
{
    (void)ctx;
    parker_release(sp->arg);
}

LAB_TEST(parker_park_race, unpark_after_every_access_of_park, 30)
{
#if !defined(__x86_64__)
    lab_cannot_judge("park is stopped by single-stepping with x86-64's trap flag; this machine is not x86-64");
#else
    struct lab_sb_park sp = { .unpark = race_unpark, .park = race_park, .wake_ms = STAGE02_RESCUE_MS / 2 };
    struct lab_sb_park_result r;
    long k;
    char note[256];
    const char *unjudged = lab_sb_park_explore(&sp, park_race_fresh, park_race_done, NULL, 200, &k, &r,
                                               "the parker", note, sizeof note);
    lab_note("%s", note);
    if (unjudged)
        lab_cannot_judge("%s", unjudged);
    cr_assert(r.returned,
              "parker_park_timeout(4 s) was single-stepped and stopped right after its access number %ld to the "
              "parker; there another thread called parker_unpark(), which ended; park then went on and was still "
              "asleep %u ms later. The park began before the unpark, so the unpark's token had to end it: it was "
              "written between what park read of the state and what park wrote, and park wrote over it "
              "(parker.h contracts 1 and 3). What does park's look at the state tell it about an unpark made "
              "before its announcement lands? The next hint: make hint STAGE=2 ITEM=cross-thread-unpark",
              k + 1, sp.wake_ms);
#endif
}
