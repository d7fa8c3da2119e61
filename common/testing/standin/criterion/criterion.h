/* A stand-in for the part of Criterion the lab's tests use, for the TSan lane.
 *
 * ThreadSanitizer cannot run inside Criterion (its runner's allocator breaks
 * TSan's start-up), so the TSan lane compiles the very same test sources with
 * this header first on the include path and links standin/runner.c, which
 * forks one process per test with a timeout and writes a report in
 * Criterion's XML shape. Only the macros listed in lab_test.h exist here.
 */
#ifndef LAB_STANDIN_CRITERION_H
#define LAB_STANDIN_CRITERION_H

#include <stdbool.h>
#include <stddef.h>

#define LAB_STANDIN 1

struct criterion_test_extra_data {
    double timeout;
    void (*init)(void);
    void (*fini)(void);
    bool disabled;
    const char *description;
    int signal;
    int exit_code;
};

struct lab_standin_test {
    const char *suite;
    const char *name;
    void (*fn)(void);
    struct criterion_test_extra_data data;
    struct lab_standin_test *next;
};

void lab_standin_register(struct lab_standin_test *t);
void lab_standin_register_suite(const char *suite, struct criterion_test_extra_data data);
_Noreturn void lab_standin_fail(const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define Test(suite, name, ...)                                                   \
    static void lab_standin_fn_##suite##_##name(void);                           \
    static struct lab_standin_test lab_standin_t_##suite##_##name = {            \
        #suite, #name, lab_standin_fn_##suite##_##name, { __VA_ARGS__ }, NULL }; \
    __attribute__((constructor)) static void lab_standin_reg_##suite##_##name(void) \
    {                                                                            \
        lab_standin_register(&lab_standin_t_##suite##_##name);                   \
    }                                                                            \
    static void lab_standin_fn_##suite##_##name(void)

#define TestSuite(suite, ...)                                                    \
    __attribute__((constructor)) static void lab_standin_suite_##suite(void)     \
    {                                                                            \
        lab_standin_register_suite(#suite, (struct criterion_test_extra_data){ __VA_ARGS__ }); \
    }                                                                            \
    struct lab_standin_semicolon_##suite

/* lab_site (harness.h): where each check that held stands, for the
 * completion record; a failed one writes its FAIL record first
 * (lab_check_failed), then ends the test (lab_standin_fail does not return) */
#define LAB_STANDIN_CHECK(cond, expr, ...)                                  \
    do {                                                                    \
        if (!(cond)) {                                                      \
            lab_check_failed();                                             \
            lab_standin_fail(__FILE__, __LINE__, expr, " " __VA_ARGS__);    \
        }                                                                   \
        LAB_SITE();                                                         \
    } while (0)

#define cr_assert(cond, ...)       LAB_STANDIN_CHECK((cond), #cond, __VA_ARGS__)
#define cr_assert_not(cond, ...)   LAB_STANDIN_CHECK(!(cond), "!(" #cond ")", __VA_ARGS__)
#define cr_assert_eq(a, b, ...)    LAB_STANDIN_CHECK((a) == (b), #a " == " #b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...)   LAB_STANDIN_CHECK((a) != (b), #a " != " #b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...)    LAB_STANDIN_CHECK((a) < (b), #a " < " #b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...)   LAB_STANDIN_CHECK((a) <= (b), #a " <= " #b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...)    LAB_STANDIN_CHECK((a) > (b), #a " > " #b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...)   LAB_STANDIN_CHECK((a) >= (b), #a " >= " #b, __VA_ARGS__)
#define cr_assert_null(p, ...)     LAB_STANDIN_CHECK((p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) LAB_STANDIN_CHECK((p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_assert_fail(...) \
    do { lab_check_failed(); lab_standin_fail(__FILE__, __LINE__, "cr_assert_fail", " " __VA_ARGS__); } while (0)

#endif
