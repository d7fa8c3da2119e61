/* harness.h - what every grader test does around its body.
 *
 * LAB_TEST (lab_test.h) calls lab_test_begin() before the body and
 * lab_test_end() after it. Between the two the harness:
 *   - writes a record of the run (BEGIN, END, SEED, NOTE, CRASH, HANG, TODO
 *     lines) to $LAB_RUN_DIR/<suite>.<test>.log when the grader set that
 *     variable; the grader reads these records, not what the test prints;
 *   - counts a test as finished only when END is written: a process that
 *     leaves early through exit(0) is reported as passed by Criterion but has
 *     no END record, and the grader fails it;
 *   - runs a watchdog thread that, shortly before the test's timeout, makes
 *     every thread of the process write its backtrace (a lost wakeup shows as
 *     a thread parked forever: the record shows where); and that ends the
 *     test at once, with the same backtraces, when it has stalled: every
 *     thread in a futex wait with no timeout and none run for 2 s; and that
 *     kills a test still running a second past its limit (the runner
 *     should have, and has been seen not to);
 *   - writes a backtrace when the process crashes on a signal.
 */
#ifndef LAB_HARNESS_H
#define LAB_HARNESS_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h> /* ssize_t */

/* Hidden: linked into the test binary but never in its dynamic symbol table
 * (the grader links with -rdynamic so backtraces name functions), and the
 * copy the plain lanes run has no .symtab either: code under test finds no
 * name to call that writes the completion record. A deterrent, not a wall
 * (docs/instructors.md, the threat model). */
#define LAB_HARNESS_HIDDEN __attribute__((visibility("hidden")))
LAB_HARNESS_HIDDEN void lab_test_begin(const char *suite, const char *name, double timeout_s);
LAB_HARNESS_HIDDEN void lab_test_end(void);

/* Called by every assertion that holds (lab_test.h, the stand-in's macros):
 * keeps the code address it was called from, once. lab_test_end
 * writes the set as SITES records before END, as offsets from the start of
 * the executable, and the grader turns them into file:line with the binary's
 * line table (which only the grader's copy has) and compares them with the
 * checks that held in the reference's runs of the same test. A forged
 * completion record, or a test whose failed checks were kept from ending
 * it, must therefore name, for the test at hand, the addresses of checks
 * that never held. */
LAB_HARNESS_HIDDEN void lab_site(void);
/* How the macros call it: never as a tail call (the last check of a helper
 * would jump to lab_site, which would then see the helper's caller's
 * address): the empty asm after the call must run after it returns. */
#define LAB_SITE() do { lab_site(); __asm__ volatile(""); } while (0)

/* Called first by every check that fails (lab_test.h, the stand-in's
 * macros), before anything of Criterion's or the C library's runs: writes a
 * FAIL record at once, with bare system calls, to the record's descriptor,
 * which the seal keeps from being closed, replaced or cut (harness.c). A
 * test with a FAIL record has failed, whatever follows in its record: code
 * under test that hooks the failure path and resumes the body at the
 * check's passing branch has already lost the test. */
LAB_HARNESS_HIDDEN void lab_check_failed(void);

/* SIGTRAP is the harness's for the whole test (the seal refuses code under
 * test a handler for it: a step handler could move a failed check past its
 * FAIL). A test that single-steps code with the trap flag gives its handler
 * here, and null when it is done; while none is given, a trap is a crash.
 * The store buffer (store_buffer.h) has its own way in. */
bool lab_set_step_handler(void (*fn)(int sig, siginfo_t *si, void *uc));   /* true: taken */

/* The seed of a randomized test: $LAB_SEED when set, else a fixed seed made
 * from the test's name. Recorded and printed so `make grade ... SEED=n`
 * replays the run. */
uint64_t lab_seed(void);
/* A small, fast, seedable generator (splitmix64) for randomized tests. */
uint64_t lab_rand(uint64_t *state);

/* Scales an iteration count by $LAB_SCALE (a factor, default 1; the Valgrind
 * lane uses a small one). Never returns less than `min`. */
unsigned lab_scale(unsigned n, unsigned min);

/* A line of measured figures in the record (and on stderr). */
void lab_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Records code addresses (with a count for each) for the report to name as
 * 'function at file:line': alloc_count.c's allocation sites of blocks still
 * live when counting stopped. */
void lab_record_sites(const char *why, void *const *sites, const unsigned *counts, int n);

/* Writes the UNJUDGED record of lab_cannot_judge (lab_test.h); call that. */
LAB_HARNESS_HIDDEN void lab_unjudged(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A small file (a /proc one) read whole into buf, NUL-terminated: its
 * length, or -1 (no such file, or empty). Async-signal-safe: open, read and
 * close only. */
ssize_t lab_read_small(const char *path, char *buf, size_t n);

/* Milliseconds of wall-clock sleep (for tests that give another thread time). */
void lab_sleep_ms(unsigned ms);

/* What a spin loop waiting for another thread (a start line, a hand-off)
 * calls every so often instead of sched_yield(), with the number of turns
 * so far. It yields; after 2^16 turns the partner is plainly not running (a
 * CPU quota such as Gradescope's half a CPU throttles the whole test, or the
 * machine is overloaded), and it sleeps 20 us instead, so the wait gives its
 * share of the CPU to the thread it waits for. On a healthy machine the
 * partner arrives long before that: the race's timing is that of the spin. */
void lab_spin_pause(unsigned turns);

/* The first two CPUs this process may run on, or false when it has only one.
 * A race between two threads wants one on each: left to itself, the
 * scheduler likes to wake a helper on its waker's own core, where the two
 * take turns instead of racing. */
bool lab_two_cpus(int *a, int *b);
/* Pins thread t to one CPU: a hint (a failure is ignored); a race is valid
 * either way. */
void lab_pin_thread(pthread_t t, int cpu);

/* For test support that waits on condition variables: a condition variable
 * timed on CLOCK_MONOTONIC, and the absolute CLOCK_MONOTONIC deadline
 * `ms` milliseconds from now. */
struct timespec;
void lab_monotonic_cond_init(pthread_cond_t *c);
void lab_deadline_after_ms(struct timespec *ts, unsigned ms);

#endif
