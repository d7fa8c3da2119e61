/* timer_ref.c - the timer benchmark on the lab's reference timer wheel
 * (solutions/05-timer/timer_wheel.h: 6 levels x 64 slots, 1 ms ticks,
 * intrusive entries on doubly linked slot lists, an occupied bitmap per level).
 *
 *   bulk  timer_entry_init on every entry once (untimed), then
 *         timer_wheel_insert of each at origin + deadline_ms (the wheel's time
 *         is its origin and is never advanced, so nothing fires), then
 *         timer_wheel_cancel in the random order.
 *   fire  timer_wheel_insert at each absolute deadline (the wheel rounds it up
 *         to the next 1 ms tick), then the loop a time driver runs: park on
 *         stage 02's parker (pthread_cond_timedwait on CLOCK_MONOTONIC) until
 *         timer_wheel_next_expiration(), then timer_wheel_advance(now); until
 *         the wheel is empty. The fire callback stores the time it ran.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include "parker.h"
#include "timer_bench.h"
#include "timer_wheel.h"

static struct timer_wheel *wheel;
static struct timer_entry *entries;
static uint64_t origin;

const char *tb_name(void) { return "reference timer wheel (stage 05)"; }

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (!p) {
        fprintf(stderr, "timer_ref: out of memory\n");
        exit(1);
    }
    return p;
}

static void never(struct timer_entry *e, void *arg)
{
    (void)e, (void)arg;
    fprintf(stderr, "timer_ref: a bulk timer fired\n");
    abort();
}

static void new_wheel(void)
{
    origin = tb_now_ns();
    wheel = timer_wheel_new(origin);
    if (!wheel) {
        fprintf(stderr, "timer_ref: timer_wheel_new failed\n");
        exit(1);
    }
}

void tb_bulk_setup(size_t n)
{
    new_wheel();
    entries = xcalloc(n, sizeof *entries);
    for (size_t i = 0; i < n; i++)
        timer_entry_init(&entries[i], never, NULL);
}

void tb_bulk_insert(const uint32_t *deadline_ms, const uint32_t *place, size_t n)
{
    if (place)
        for (size_t k = 0; k < n; k++)
            timer_wheel_insert(wheel, &entries[place[k]], origin + (uint64_t)deadline_ms[k] * 1000000u);
    else
        for (size_t i = 0; i < n; i++)
            timer_wheel_insert(wheel, &entries[i], origin + (uint64_t)deadline_ms[i] * 1000000u);
}

void tb_bulk_cancel(const uint32_t *order, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (!timer_wheel_cancel(wheel, &entries[order[k]])) {
            fprintf(stderr, "timer_ref: cancel of an armed timer returned false\n");
            abort();
        }
}

static uint64_t *fired_at;

static void on_fire(struct timer_entry *e, void *arg)
{
    (void)arg;
    fired_at[e - entries] = tb_now_ns();
}

void tb_fire(const uint64_t *deadline_ns, uint64_t *fired_ns, size_t n)
{
    struct parker *p = parker_new();
    if (!p) {
        fprintf(stderr, "timer_ref: parker_new failed\n");
        exit(1);
    }
    new_wheel();
    entries = xcalloc(n, sizeof *entries);
    fired_at = fired_ns;
    for (size_t i = 0; i < n; i++) {
        timer_entry_init(&entries[i], on_fire, NULL);
        timer_wheel_insert(wheel, &entries[i], deadline_ns[i]);
    }
    tb_registered();
    for (;;) {
        uint64_t next = timer_wheel_next_expiration(wheel);
        if (next == TIMER_WHEEL_NEVER)
            break;
        uint64_t now = tb_now_ns();
        if (next > now)
            parker_park_timeout(p, next - now);
        timer_wheel_advance(wheel, tb_now_ns(), 0);
    }
    parker_release(p);
}
