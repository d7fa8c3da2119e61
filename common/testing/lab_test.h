/* lab_test.h - the one include of every grader test.
 *
 * Tests are written with Criterion's Test/TestSuite/cr_assert* macros and
 * LAB_TEST below. The same source builds two ways:
 *   - against Criterion (plain, race and Valgrind lanes);
 *   - against the stand-in in standin/criterion/criterion.h (the TSan lane:
 *     ThreadSanitizer cannot run inside Criterion), selected by putting
 *     standin/ first on the include path.
 * Use only the macros the stand-in implements: Test, TestSuite, cr_assert,
 * cr_assert_not, cr_assert_eq/neq/lt/leq/gt/geq, cr_assert_null/not_null,
 * cr_assert_fail (Criterion's cr_fail takes a different first argument: do
 * not use it).
 */
#ifndef LAB_TEST_H
#define LAB_TEST_H

#include <criterion/criterion.h>
#include "harness.h"

/* Every assertion that holds records where it stands (lab_site, harness.h):
 * the completion record then lists the checks the body passed, and the
 * grader compares that list with the reference's, so a record written by
 * code that skipped the body, or that kept a failed check from ending the
 * test, must also name, by code address, checks that never held. Each
 * macro evaluates its condition once, then hands Criterion the result with
 * the original expression's text for the failure message. A check that
 * fails (cr_assert_fail always does) first writes its FAIL record
 * (lab_check_failed, harness.h), so no hook on what follows can take the
 * failure back. The stand-in's macros do the same
 * (standin/criterion/criterion.h). */
#ifndef LAB_STANDIN
#define LAB_CHECK_(cond, msg, text, ...)                                                   \
    do {                                                                                   \
        bool lab_ok_ = !!(cond);                                                           \
        if (lab_ok_)                                                                       \
            LAB_SITE();                                                                    \
        else {                                                                             \
            lab_check_failed();                                                            \
            CR_EXPAND(cr_assert_impl(CR_FAIL_ABORT_, lab_ok_, dummy, msg, text, __VA_ARGS__)); \
        }                                                                                  \
    } while (0)
#define LAB_BOOL_(cond, ...) LAB_CHECK_(cond, CRITERION_ASSERT_MSG_EXPR_FALSE, (CR_STR(cond)), __VA_ARGS__)
#define LAB_OP_(op, ...) \
    LAB_OP2_(op, CR_VA_HEAD(__VA_ARGS__), CR_VA_HEAD(CR_VA_TAIL(__VA_ARGS__)), CR_VA_TAIL(CR_VA_TAIL(__VA_ARGS__)))
#define LAB_OP2_(op, a, b, ...) \
    LAB_CHECK_((a) op (b), CRITERION_ASSERT_MSG_EXPR_FALSE, (CR_STR((a) op (b))), __VA_ARGS__)
#define LAB_NULL_(op, msg, ...) LAB_NULL2_(op, msg, CR_VA_HEAD(__VA_ARGS__), CR_VA_TAIL(__VA_ARGS__))
#define LAB_NULL2_(op, msg, v, ...) LAB_CHECK_((v) op NULL, msg, (CR_STR(v)), __VA_ARGS__)
#undef cr_assert
#define cr_assert(...) LAB_BOOL_(CR_VA_HEAD(__VA_ARGS__), CR_VA_TAIL(__VA_ARGS__))
#undef cr_assert_not
#define cr_assert_not(...) LAB_BOOL_(!(CR_VA_HEAD(__VA_ARGS__)), CR_VA_TAIL(__VA_ARGS__))
#undef cr_assert_eq
#define cr_assert_eq(...) LAB_OP_(==, __VA_ARGS__)
#undef cr_assert_neq
#define cr_assert_neq(...) LAB_OP_(!=, __VA_ARGS__)
#undef cr_assert_lt
#define cr_assert_lt(...) LAB_OP_(<, __VA_ARGS__)
#undef cr_assert_leq
#define cr_assert_leq(...) LAB_OP_(<=, __VA_ARGS__)
#undef cr_assert_gt
#define cr_assert_gt(...) LAB_OP_(>, __VA_ARGS__)
#undef cr_assert_geq
#define cr_assert_geq(...) LAB_OP_(>=, __VA_ARGS__)
#undef cr_assert_null
#define cr_assert_null(...) LAB_NULL_(==, CRITERION_ASSERT_MSG_IS_NOT_NULL, __VA_ARGS__)
#undef cr_assert_not_null
#define cr_assert_not_null(...) LAB_NULL_(!=, CRITERION_ASSERT_MSG_IS_NULL, __VA_ARGS__)
#undef cr_assert_fail
#define cr_assert_fail(...)                                  \
    do {                                                     \
        lab_check_failed();                                  \
        CR_EXPAND(cr_fail(CR_FAIL_ABORT_, __VA_ARGS__));     \
    } while (0)
#endif

/* The Valgrind lane builds with a larger scale: every timeout stretches. */
#ifndef LAB_TIMEOUT_SCALE
#define LAB_TIMEOUT_SCALE 1
#endif

/* A graded test. Its timeout (seconds, before scaling) is required: a test
 * without one could hang forever. The body is an ordinary function; the test
 * counts as finished only if the body returns (see harness.h). */
#define LAB_TEST(suite, name, timeout_s)                                      \
    static void lab_body_##suite##_##name(void);                              \
    Test(suite, name, .timeout = (double)(timeout_s) * LAB_TIMEOUT_SCALE)     \
    {                                                                         \
        lab_test_begin(#suite, #name, (double)(timeout_s) * LAB_TIMEOUT_SCALE); \
        lab_body_##suite##_##name();                                          \
        lab_test_end();                                                       \
    }                                                                         \
    static void lab_body_##suite##_##name(void)

/* Ends the test without a verdict on the code under test: the machine could
 * not measure what the test measures (a speed-up on a loaded machine, say).
 * The record carries the grader's nonce, so code under test cannot write it
 * (see take_nonce in harness.c); the grader then reports the item "not
 * judged, rerun". Without the grader (or with a forged record) it is an
 * ordinary failure with the same message. */
#define lab_cannot_judge(...)          \
    do {                               \
        lab_unjudged(__VA_ARGS__);     \
        cr_assert_fail(__VA_ARGS__);   \
    } while (0)

/* A suite whose tests have no timeout of their own get this one. */
#define LAB_SUITE(suite, timeout_s) \
    TestSuite(suite, .timeout = (double)(timeout_s) * LAB_TIMEOUT_SCALE)

#endif
