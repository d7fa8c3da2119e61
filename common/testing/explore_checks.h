/* explore_checks.h - the test's side of the schedule explorer (explore.h):
 * run a case in every order and fail with the one that broke, and free a
 * scene's explore waker only when nothing else still holds it. */
#ifndef LAB_TEST_EXPLORE_CHECKS_H
#define LAB_TEST_EXPLORE_CHECKS_H

#include "lab_test.h"
#include "explore.h"

/* Every schedule of `c` with at most `bound` preemptions (lab_explore_check);
 * a failed test, with the schedule, its timeline and the replay command for
 * stage `stage` and test `test` ("suite/name"), when one fails. */
static inline void lab_explore_expect(const struct explore_case *c, unsigned bound, unsigned stage,
                                      const char *test)
{
    const char *failed = lab_explore_check(c, bound, stage, test);
    cr_assert_null(failed, "%s", failed);
}

/* A scene's teardown: frees `ew` when the test's is its last reference;
 * else it leaks, and other items judge the leak (never free what the code
 * under test still holds). */
static inline void explore_waker_free_if_balanced(struct explore_waker *ew)
{
    if (explore_waker_live(ew) == 1)
        explore_waker_free(ew);
}

#endif
