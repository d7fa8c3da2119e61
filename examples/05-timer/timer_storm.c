/* timer_storm.c - stage 05's traced example: many tasks, many timers.
 *
 *   make trace STAGE=5 EXAMPLE=timer_storm                    your timer wheel (labs/)
 *   make trace STAGE=5 EXAMPLE=timer_storm TARGET=path/to/tree   another tree like labs/
 *
 * Your stage 05 must run; an earlier stage of yours that make grade would
 * replace (a skeleton, or one that fails its tests) is the reference's here
 * too, and one line says so (docs/tracing.md).
 *
 * Twenty-four tasks each sleep four times, for 2 to 12 ms each time (a fixed
 * pseudo-random sequence, so every run is the same storm), on one executor
 * whose driver is the time driver. The executor thread parks in the time
 * driver until the next expiration; each time it wakes, the timers that are
 * due fire and wake their tasks, and the wake arrows in the trace start in
 * the time driver's turn (docs/tracing.md#a-timer-storm).
 *
 *   timer_storm [tasks [sleeps]]
 */
#include <stdio.h>
#include <stdlib.h>

#include "executor.h"
#include "parker.h"
#include "sleep.h"
#include "time_driver.h"

static struct time_driver *td;

struct sleeper {
    struct sleep s;
    bool armed;   /* s holds a sleep that was created and not yet dropped */
    int left;     /* sleeps still to make */
    uint32_t rng; /* this task's own sequence of durations */
};

static uint64_t next_ms(uint32_t *rng)
{
    *rng = *rng * 1103515245u + 12345u;
    return 2 + (*rng >> 16) % 11; /* 2..12 ms */
}

static enum poll sleeper_poll(void *self, struct context *cx, void *out)
{
    struct sleeper *t = self;
    (void)out;
    while (t->left > 0) {
        if (!t->armed) {
            t->s = sleep_for(td, next_ms(&t->rng) * 1000000u);
            t->armed = true;
        }
        if (sleep_poll(&t->s, cx) == POLL_PENDING)
            return POLL_PENDING;
        sleep_drop(&t->s);
        t->armed = false;
        t->left--;
    }
    return POLL_READY;
}

static void sleeper_drop(void *self)
{
    struct sleeper *t = self;
    if (t->armed)
        sleep_drop(&t->s);
}

static const struct future_vtable sleeper_vt =
    FUTURE_VTABLE_INIT(struct sleeper, 0, sleeper_poll, sleeper_drop);

int main(int argc, char **argv)
{
    int tasks = argc > 1 ? atoi(argv[1]) : 24;
    int sleeps = argc > 2 ? atoi(argv[2]) : 4;
    struct parker *p = parker_new();
    if (!p)
        return 1;
    td = time_driver_new(parker_driver(p));
    struct executor *ex = td ? executor_new(time_driver_driver(td)) : NULL;
    if (!ex)
        return 1;
    for (int i = 0; i < tasks; i++) {
        struct sleeper s = { .armed = false, .left = sleeps, .rng = 7919u * (uint32_t)(i + 1) };
        struct join_handle *jh = executor_spawn(ex, future_of(&sleeper_vt, &s), NULL);
        if (!jh)
            return 1;
        join_handle_drop(jh);
    }
    enum executor_status st = executor_run(ex);
    printf("timer_storm: %s\n", executor_status_str(st));
    executor_free(ex);
    time_driver_free(td);
    parker_release(p);
    return st == EXECUTOR_OK ? 0 : 1;
}
