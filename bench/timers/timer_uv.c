/* timer_uv.c - the timer benchmark on libuv's timers (libuv1-dev): a binary
 * min-heap of intrusive nodes ordered by (deadline ms, start id), one loop.
 *
 *   bulk  uv_timer_init on every handle once (untimed), then uv_timer_start
 *         on each with its deadline (ms after the loop's cached time), then
 *         uv_timer_stop in the random order. The loop never runs, so its
 *         time does not move and nothing fires.
 *   fire  uv_timer_start with timeout = ceil(deadline / 1 ms) - uv_now():
 *         uv_now() is CLOCK_MONOTONIC in whole ms (libuv 1.44 would take
 *         CLOCK_MONOTONIC_COARSE only if its resolution were 1 ms or finer;
 *         here it is 4 ms), so a timer is due when the loop's time reaches the
 *         deadline rounded up to the next ms: never early. Then uv_run until
 *         no timer is left; the callback stores the time it ran.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

#include "timer_bench.h"

static uv_loop_t loop;
static uv_timer_t *timers;
static char name[64];

const char *tb_name(void)
{
    snprintf(name, sizeof name, "libuv %s", uv_version_string());
    return name;
}

static void init_loop(void)
{
    if (uv_loop_init(&loop) != 0) {
        fprintf(stderr, "timer_uv: uv_loop_init failed\n");
        exit(1);
    }
}

static void never(uv_timer_t *t)
{
    (void)t;
    fprintf(stderr, "timer_uv: a bulk timer fired\n");
    abort();
}

void tb_bulk_setup(size_t n)
{
    init_loop();
    timers = calloc(n, sizeof *timers);
    if (!timers) {
        fprintf(stderr, "timer_uv: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        uv_timer_init(&loop, &timers[i]);
}

void tb_bulk_insert(const uint32_t *deadline_ms, const uint32_t *place, size_t n)
{
    if (place)
        for (size_t k = 0; k < n; k++)
            uv_timer_start(&timers[place[k]], never, deadline_ms[k], 0);
    else
        for (size_t i = 0; i < n; i++)
            uv_timer_start(&timers[i], never, deadline_ms[i], 0);
}

void tb_bulk_cancel(const uint32_t *order, size_t n)
{
    for (size_t k = 0; k < n; k++)
        uv_timer_stop(&timers[order[k]]);
}

static uint64_t *fired_at;

static void on_fire(uv_timer_t *t)
{
    fired_at[t - timers] = tb_now_ns();
}

void tb_fire(const uint64_t *deadline_ns, uint64_t *fired_ns, size_t n)
{
    init_loop();
    timers = calloc(n, sizeof *timers);
    if (!timers) {
        fprintf(stderr, "timer_uv: out of memory\n");
        exit(1);
    }
    fired_at = fired_ns;
    uv_update_time(&loop);
    uint64_t now_ms = uv_now(&loop);
    for (size_t i = 0; i < n; i++) {
        uint64_t due_ms = (deadline_ns[i] + 999999) / 1000000;
        uv_timer_init(&loop, &timers[i]);
        uv_timer_start(&timers[i], on_fire, due_ms > now_ms ? due_ms - now_ms : 0, 0);
    }
    tb_registered();
    uv_run(&loop, UV_RUN_DEFAULT);
}
