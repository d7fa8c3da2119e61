/* stage01.h - what the stage-01 tests share (support.c has the code).
 *
 * Every test here drives the public API of signal.h only, so any correct
 * implementation passes, whatever its private layout.
 */
#ifndef STAGE01_H
#define STAGE01_H

#include <stdint.h>

#include "lab_test.h"
#include "measure.h"
#include "wakers.h"
#include "signal.h"

/* Milliseconds, stretched like every timeout when the Valgrind lane builds
 * with a larger LAB_TIMEOUT_SCALE. */
#define SCALED_MS(ms) ((unsigned)((ms) * LAB_TIMEOUT_SCALE))

/* ---- drop_value recorder ------------------------------------------------
 * A drop_value for signal_new that counts its calls and remembers the last
 * value. record_drop only counts; record_drop_and_free also frees the value
 * (for tests whose values come from malloc, so Valgrind sees a value that
 * was dropped twice or never). */
void record_drop(void *value);
void record_drop_and_free(void *value);
unsigned dropped_calls(void);
void *dropped_last(void);

/* ---- counting-waker helpers --------------------------------------------- */

/* Polls `fut` once with `cw`'s own waker. */
enum poll poll_with(struct signal_future *fut, struct counting_waker *cw,
                    struct signal_output *out);

/* Ends a test that used `cw`: every reference the signal took must have been
 * given back (live == 1, the test's own), then frees it. */
void expect_books_balanced(struct counting_waker *cw);

/* A fresh signal or a failed test. */
void new_signal(void (*drop_value)(void *), struct signal **p, struct signal_future **f);

/* Asserts a Ready poll result with outcome and value. `what` names the
 * situation for the message ("the first poll after completion"). */
void expect_ready(enum poll r, const struct signal_output *out,
                  enum signal_outcome outcome, void *value, const char *what);

const char *outcome_name(enum signal_outcome o);
const char *status_name(enum signal_status s);

#endif
