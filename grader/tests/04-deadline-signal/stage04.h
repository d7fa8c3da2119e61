/* stage04.h - what the stage-04 tests share (support.c has the code).
 *
 * Every test drives the public API of deadline_signal.h only, so any correct
 * implementation passes, whatever its private layout.
 */
#ifndef STAGE04_H
#define STAGE04_H

#include <stdbool.h>
#include <stdint.h>

#include "lab_test.h"
#include "measure.h"
#include "waker_checks.h"   /* expect_books_balanced */
#include "wakers.h"
#include "deadline_signal.h"

/* Milliseconds, stretched like every timeout when the Valgrind lane builds
 * with a larger LAB_TIMEOUT_SCALE. */
#define SCALED_MS(ms) ((unsigned)((ms) * LAB_TIMEOUT_SCALE))

/* The three handles of one deadline signal. */
struct ds {
    struct deadline_signal *producer;
    struct deadline_signal_timer *timer;
    struct deadline_signal_future *future;
};

/* A fresh deadline signal or a failed test. */
struct ds new_ds(void (*drop_value)(void *));

/* The drop_value recorder (record_drop, dropped_calls) is measure.h's. */

/* ---- polling with a counting waker --------------------------------------- */

/* Polls once with `cw`'s own waker; *out is filled with junk first, so a
 * Ready that forgets to fill it shows. */
enum poll poll_with(struct deadline_signal_future *f, struct counting_waker *cw,
                    struct deadline_signal_output *out);

/* Asserts a Ready poll with this outcome and value; `what` names the poll
 * for the message ("the poll after the wake"). */
void expect_ready(enum poll r, const struct deadline_signal_output *out,
                  enum deadline_signal_outcome outcome, void *value, const char *what);

/* Asserts a status; `what` names the call ("expire after complete"). */
void expect_status(enum deadline_signal_status got, enum deadline_signal_status want, const char *what,
                   const char *why);

const char *outcome_name(enum deadline_signal_outcome o);
const char *status_name(enum deadline_signal_status s);

/* The status a loser must get when `winner_completed` says who won. */
static inline enum deadline_signal_status lost_to(bool winner_completed)
{
    return winner_completed ? DEADLINE_SIGNAL_LOST_TO_VALUE : DEADLINE_SIGNAL_LOST_TO_EXPIRY;
}

/* ---- randomness for the stress tests ------------------------------------- */

/* Busy work of a random length (log-uniform up to ~2^max_bits iterations). */
void spin_random(uint64_t *rng, unsigned max_bits);
/* Busy work of a random length, uniform in [0, n) iterations. */
void spin_uniform(uint64_t *rng, unsigned n);

#endif
