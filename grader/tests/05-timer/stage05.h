/* stage05.h - what the stage 05 tests share (support.c has the code).
 *
 * Every test drives the public API only (timer_wheel.h, time_driver.h,
 * sleep.h, combinators.h, and stage 03's executor), in virtual time
 * (virtual_clock.h) wherever the test is about time rather than sleeping.
 */
#ifndef STAGE05_H
#define STAGE05_H

#include <stdbool.h>
#include <stdint.h>

#include "lab_test.h"
#include "measure.h"
#include "wakers.h"
#include "virtual_clock.h"
#include "timer_wheel.h"
#include "time_driver.h"
#include "sleep.h"
#include "combinators.h"
#include "executor.h"

#define SCALED_MS(ms) ((unsigned)((ms) * LAB_TIMEOUT_SCALE))
#define MS_NS UINT64_C(1000000)
#define SEC_NS (UINT64_C(1000) * MS_NS)
#define HOUR_NS (UINT64_C(3600) * SEC_NS)
#define DAY_NS (UINT64_C(24) * HOUR_NS)
/* The virtual origin of every wheel and clock in the tests: not zero, so an
 * implementation that forgets the origin is seen. */
#define ORIGIN_NS (UINT64_C(1000) * SEC_NS + 123)

/* The smallest tick boundary at or after t (on the ORIGIN_NS grid). */
static inline uint64_t tick_up(uint64_t t)
{
    if (t <= ORIGIN_NS)
        return ORIGIN_NS;
    uint64_t d = t - ORIGIN_NS;
    return ORIGIN_NS + (d + MS_NS - 1) / MS_NS * MS_NS;
}

/* ---- a recording timer ---------------------------------------------------- */
/* A timer entry that, when it fires, appends its id and the "current time"
 * the test set (wheel_now) to a shared log. */
struct rec_log {
    uint64_t now;          /* the test sets it before each advance */
    size_t n, cap;
    int *ids;
    uint64_t *at;
};
struct rec_timer {
    struct timer_entry entry;
    struct rec_log *log;
    int id;
    uint64_t deadline;
};
void rec_log_init(struct rec_log *log, size_t cap);
void rec_log_free(struct rec_log *log);
void rec_timer_init(struct rec_timer *t, struct rec_log *log, int id, uint64_t deadline);
/* Advances the wheel to time t, with log->now = t while it fires. */
size_t rec_advance(struct timer_wheel *w, struct rec_log *log, uint64_t t);
/* Runs the wheel to empty the way a driver does: jump to the next
 * expiration, advance, repeat. Returns the number of jumps. */
unsigned rec_run_to_empty(struct timer_wheel *w, struct rec_log *log, unsigned max_jumps);

/* ---- the virtual-time stack ------------------------------------------------- */
/* virtual clock <- time driver <- executor, all starting at ORIGIN_NS. */
struct vstack {
    struct virtual_clock *vc;
    struct time_driver *td;
    struct executor *ex;
};
void vstack_new(struct vstack *s);
void vstack_free(struct vstack *s);

/* A future that sleeps until a deadline, then logs (id, now) and is Ready. */
struct logged_sleep {
    struct sleep sleep;
    struct rec_log *log;
    int id;
};
struct logged_sleep logged_sleep_new(struct time_driver *td, struct rec_log *log, int id,
                                     uint64_t deadline);
struct future logged_sleep_future(struct logged_sleep *ls);

/* A future that counts its drops, Ready after n self-wakes (n < 0: never
 * Ready, and never wakes: Pending forever). Output: uint64_t 42. */
struct countdown {
    int left;
    unsigned *drops;
};
struct future countdown_future(struct countdown *c);

#endif
