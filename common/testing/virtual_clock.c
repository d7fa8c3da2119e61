/* virtual_clock.c - see virtual_clock.h. One mutex guards everything. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "harness.h"
#include "virtual_clock.h"

#define VC_STALL_S 2

struct virtual_clock {
    pthread_mutex_t lock; /* protects every field below */
    pthread_cond_t cond;  /* park(forever) waits here for the token */
    uint64_t now;         /* virtual ns */
    bool token;
    uint64_t parks;
    int64_t last_timeout;
};

#define VC_FOREVER_WHAT "the virtual clock was parked for ever (a park with no timeout) at %llu ns of virtual time, " \
                        "and nothing unparked it within %d s of real time: no timer was left to end that park. "  \
                        "Was a timer that should be pending missing from the wheel, or did the park's timeout "   \
                        "leave out the next expiration?"

/* Named for what happened: the report of the crash (SIGABRT) shows no
 * message of the test's, only where it crashed, and this is the name its
 * backtrace shows, above vc_park and the park that called it. The message
 * goes to standard error too (make debug, or a test run by hand, shows it).
 * Not a failed check: the test support is built once for every lane, the
 * Criterion-free ones included. */
__attribute__((noinline, noreturn)) static void virtual_clock_parked_forever_with_nothing_to_unpark_it(uint64_t now)
{
    fprintf(stderr, VC_FOREVER_WHAT "\n", (unsigned long long)now, VC_STALL_S);
    abort();
}

static bool vc_park(void *self, int64_t timeout_ns)
{
    struct virtual_clock *vc = self;
    pthread_mutex_lock(&vc->lock);
    vc->parks++;
    vc->last_timeout = timeout_ns < 0 ? -1 : timeout_ns;
    bool got = false;
    if (vc->token) {
        got = true;
    } else if (timeout_ns >= 0) {
        vc->now += (uint64_t)timeout_ns; /* time passes, instantly */
    } else {
        /* Forever, in virtual time, means "until another thread unparks".
         * A test in virtual time has no such thread for long: after
         * VC_STALL_S seconds of real time with no unpark, nothing will ever
         * come, and the test ends here with a message instead of a hang. */
        struct timespec limit;
        clock_gettime(CLOCK_MONOTONIC, &limit);
        limit.tv_sec += VC_STALL_S;
        while (!vc->token) {
            if (pthread_cond_timedwait(&vc->cond, &vc->lock, &limit) == ETIMEDOUT && !vc->token) {
                uint64_t at = vc->now;
                pthread_mutex_unlock(&vc->lock);
                virtual_clock_parked_forever_with_nothing_to_unpark_it(at);
            }
        }
        got = true;
    }
    vc->token = false;
    pthread_mutex_unlock(&vc->lock);
    return got;
}

static void vc_unpark(void *self)
{
    struct virtual_clock *vc = self;
    pthread_mutex_lock(&vc->lock);
    vc->token = true;
    pthread_cond_signal(&vc->cond);
    pthread_mutex_unlock(&vc->lock);
}

static uint64_t vc_now(void *self) { return virtual_clock_now(self); }

static const struct driver_vtable vc_vtable = { .park = vc_park, .unpark = vc_unpark, .now = vc_now };

struct virtual_clock *virtual_clock_new(uint64_t start_ns)
{
    struct virtual_clock *vc = malloc(sizeof *vc);
    if (!vc)
        return NULL;
    pthread_mutex_init(&vc->lock, NULL);
    lab_monotonic_cond_init(&vc->cond);
    vc->now = start_ns;
    vc->token = false;
    vc->parks = 0;
    vc->last_timeout = 0;
    return vc;
}

void virtual_clock_free(struct virtual_clock *vc)
{
    if (!vc)
        return;
    pthread_cond_destroy(&vc->cond);
    pthread_mutex_destroy(&vc->lock);
    free(vc);
}

struct driver virtual_clock_driver(struct virtual_clock *vc)
{
    return (struct driver){ .vtable = &vc_vtable, .self = vc };
}

uint64_t virtual_clock_now(struct virtual_clock *vc)
{
    pthread_mutex_lock(&vc->lock);
    uint64_t now = vc->now;
    pthread_mutex_unlock(&vc->lock);
    return now;
}

void virtual_clock_advance(struct virtual_clock *vc, uint64_t ns)
{
    pthread_mutex_lock(&vc->lock);
    vc->now += ns;
    pthread_mutex_unlock(&vc->lock);
}

uint64_t virtual_clock_parks(struct virtual_clock *vc)
{
    pthread_mutex_lock(&vc->lock);
    uint64_t n = vc->parks;
    pthread_mutex_unlock(&vc->lock);
    return n;
}

int64_t virtual_clock_last_timeout(struct virtual_clock *vc)
{
    pthread_mutex_lock(&vc->lock);
    int64_t t = vc->last_timeout;
    pthread_mutex_unlock(&vc->lock);
    return t;
}
