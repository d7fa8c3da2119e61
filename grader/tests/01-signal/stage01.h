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
#include "waker_checks.h"   /* expect_books_balanced */
#include "wakers.h"
#include "signal.h"

/* Milliseconds, stretched like every timeout when the Valgrind lane builds
 * with a larger LAB_TIMEOUT_SCALE. */
#define SCALED_MS(ms) ((unsigned)((ms) * LAB_TIMEOUT_SCALE))

/* The drop_value recorder (record_drop, dropped_calls) is measure.h's. */

/* ---- counting-waker helpers --------------------------------------------- */

/* Polls `fut` once with `cw`'s own waker. */
enum poll poll_with(struct signal_future *fut, struct counting_waker *cw,
                    struct signal_output *out);

/* A fresh signal or a failed test. */
void new_signal(void (*drop_value)(void *), struct signal **p, struct signal_future **f);

/* Asserts a Ready poll result with outcome and value. `what` names the
 * situation for the message ("the first poll after completion"). */
void expect_ready(enum poll r, const struct signal_output *out,
                  enum signal_outcome outcome, void *value, const char *what);

const char *outcome_name(enum signal_outcome o);
const char *status_name(enum signal_status s);

#endif
