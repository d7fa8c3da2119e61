/* still_clock.c - see still_clock.h. One mutex guards everything. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "harness.h"
#include "still_clock.h"

struct still_clock {
    pthread_mutex_t lock; /* protects every field below */
    pthread_cond_t cond;  /* a token given, a thread parked or left (broadcast) */
    uint64_t now;
    unsigned limit_ms;
    int (*who)(void);
    bool token;
    int parked;           /* who() of the thread waiting in park, or -1 */
    struct still_counts counts;
};

static bool still_park(void *self, int64_t timeout_ns)
{
    struct still_clock *c = self;
    int me = c->who ? c->who() : 0;
    pthread_mutex_lock(&c->lock);
    if (timeout_ns != 0) {
        struct timespec until;
        lab_deadline_after_ms(&until, c->limit_ms);
        c->counts.parks++;
        c->counts.last_timeout = timeout_ns;
        c->parked = me;
        pthread_cond_broadcast(&c->cond);
        int rc = 0;
        while (!c->token && rc == 0)
            rc = c->limit_ms ? pthread_cond_timedwait(&c->cond, &c->lock, &until)
                             : pthread_cond_wait(&c->cond, &c->lock);
        c->parked = -1;
        pthread_cond_broadcast(&c->cond);
    }
    bool woken = c->token;
    c->token = false;
    pthread_mutex_unlock(&c->lock);
    return woken;
}

static void still_unpark(void *self)
{
    struct still_clock *c = self;
    pthread_mutex_lock(&c->lock);
    c->token = true;
    c->counts.unparks++;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

static uint64_t still_now(void *self)
{
    return ((struct still_clock *)self)->now; /* set once, before any thread sees c */
}

static const struct driver_vtable still_vtable = { .park = still_park, .unpark = still_unpark, .now = still_now };

struct still_clock *still_clock_new(uint64_t now_ns, unsigned limit_ms, int (*who)(void))
{
    struct still_clock *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    pthread_mutex_init(&c->lock, NULL);
    lab_monotonic_cond_init(&c->cond);
    c->now = now_ns;
    c->limit_ms = limit_ms;
    c->who = who;
    c->parked = -1;
    return c;
}

void still_clock_free(struct still_clock *c)
{
    if (!c)
        return;
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

struct driver still_clock_driver(struct still_clock *c)
{
    return (struct driver){ .vtable = &still_vtable, .self = c };
}

int still_clock_wait_parked(struct still_clock *c, int not_who, unsigned ms)
{
    struct timespec until;
    lab_deadline_after_ms(&until, ms);
    pthread_mutex_lock(&c->lock);
    while (c->parked < 0 || c->parked == not_who || c->token)
        if (pthread_cond_timedwait(&c->cond, &c->lock, &until) != 0)
            break;
    int who = c->parked >= 0 && c->parked != not_who && !c->token ? c->parked : -1;
    pthread_mutex_unlock(&c->lock);
    return who;
}

bool still_clock_wait_unparked(struct still_clock *c, unsigned ms)
{
    struct timespec until;
    lab_deadline_after_ms(&until, ms);
    pthread_mutex_lock(&c->lock);
    while (c->parked >= 0)
        if (pthread_cond_timedwait(&c->cond, &c->lock, &until) != 0)
            break;
    bool gone = c->parked < 0;
    pthread_mutex_unlock(&c->lock);
    return gone;
}

struct still_counts still_clock_counts(struct still_clock *c)
{
    pthread_mutex_lock(&c->lock);
    struct still_counts n = c->counts;
    pthread_mutex_unlock(&c->lock);
    return n;
}
