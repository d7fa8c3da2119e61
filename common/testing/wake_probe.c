/* wake_probe.c - operations run from inside a wake, on helper threads
 * (wake_probe.h). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "wake_probe.h"

#define MS_NS 1000000ull

enum helper_state { H_IDLE, H_WATCHING, H_DONE, H_BLOCKED, H_STARVED };

struct helper {
    const char *what;
    void (*fn)(void *arg);
    void *arg;
    pthread_t thread;
    bool started;            /* pthread_create succeeded; probe's threads only */
    bool joined;             /* pthread_join done; the thread of finish only */
    atomic_int tid;          /* helper -> watcher: written before `entered`, release/acquire with it */
    atomic_bool entered;     /* release by the helper before fn, acquire by the watcher */
    atomic_bool done;        /* release by the helper after fn (publishes took_ns, done_at), acquire by the watcher */
    uint64_t took_ns;        /* fn's wall time, written by the helper before `done` */
    uint64_t done_at;        /* monotonic ns when fn returned, same */
    /* the watcher's own (the waking thread, then the thread of finish) */
    enum helper_state state;
    uint64_t seen_at;        /* when the watcher first saw `entered` */
    uint64_t ran0, wait0;    /* schedstat then */
    uint64_t ran, waited, opp; /* in the window, at the verdict */
    bool had_stat;           /* schedstat could be read */
};

struct lab_wake_probe {
    unsigned bound_ms;
    unsigned n;
    struct helper h[LAB_PROBE_MAX];
    atomic_bool ran;         /* the first wake claims the run: acq_rel exchange, pairs with finish's acquire */
    uint64_t wake_end;       /* monotonic ns when the probe's wait inside the wake ended; published by `watched` */
    atomic_bool watched;     /* release by the run when its wait ended (publishes the helpers' states and
                              * wake_end), acquire by finish: the wake may run on another thread */
    bool finished;
    char evidence[1536];
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void nap_ms(unsigned ms)
{
    struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)ms * 1000000L };
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* The helper's ns on a CPU and ns runnable but waiting for one
 * (Documentation/scheduler/sched-stats.rst); false when the kernel has no
 * such file. No stdio: no allocation a test might be counting. */
static bool schedstat(int tid, uint64_t *ran, uint64_t *waited)
{
    char path[64], buf[128];
    snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", tid);
    if (lab_read_small(path, buf, sizeof buf) < 0)
        return false;
    unsigned long long r, w;
    if (sscanf(buf, "%llu %llu", &r, &w) != 2)
        return false;
    *ran = r;
    *waited = w;
    return true;
}

static void *helper_main(void *arg)
{
    struct helper *h = arg;
    atomic_store_explicit(&h->tid, (int)syscall(SYS_gettid), memory_order_relaxed); /* published by `entered` */
    uint64_t t0 = now_ns();
    atomic_store_explicit(&h->entered, true, memory_order_release); /* pairs with the watcher's acquire */
    h->fn(h->arg);
    h->done_at = now_ns();
    h->took_ns = h->done_at - t0;
    atomic_store_explicit(&h->done, true, memory_order_release); /* pairs with the watcher's acquire */
    return NULL;
}

struct lab_wake_probe *lab_wake_probe_new(unsigned bound_ms)
{
    struct lab_wake_probe *p = calloc(1, sizeof *p);
    if (!p)
        abort();
    p->bound_ms = bound_ms ? bound_ms : 1;
    atomic_init(&p->ran, false);
    atomic_init(&p->watched, false);
    return p;
}

void lab_wake_probe_add(struct lab_wake_probe *p, const char *what, void (*fn)(void *arg), void *arg)
{
    if (p->n >= LAB_PROBE_MAX)
        abort();
    struct helper *h = &p->h[p->n++];
    h->what = what;
    h->fn = fn;
    h->arg = arg;
    atomic_init(&h->tid, 0);
    atomic_init(&h->entered, false);
    atomic_init(&h->done, false);
}

/* Watches the helpers that are not settled yet until each is done, has had
 * bound of time not spent waiting for a CPU (blocked), or the wall limit
 * went by first (starved). */
static void watch(struct lab_wake_probe *p)
{
    uint64_t bound = (uint64_t)p->bound_ms * MS_NS, cap = 3 * bound, start = now_ns();
    for (;;) {
        bool settled = true;
        uint64_t t = now_ns();
        for (unsigned i = 0; i < p->n; i++) {
            struct helper *h = &p->h[i];
            if (h->state != H_IDLE && h->state != H_WATCHING)
                continue;
            if (!h->started) {
                h->state = H_STARVED;
                continue;
            }
            if (atomic_load_explicit(&h->done, memory_order_acquire)) { /* pairs with helper_main's release */
                h->state = H_DONE;
                continue;
            }
            if (!atomic_load_explicit(&h->entered, memory_order_acquire)) { /* pairs with helper_main's release */
                if (t - start >= cap)
                    h->state = H_STARVED; /* never got a CPU to begin */
                else
                    settled = false;
                continue;
            }
            int tid = atomic_load_explicit(&h->tid, memory_order_relaxed); /* ordered by `entered` */
            uint64_t ran = 0, waited = 0;
            bool ok = schedstat(tid, &ran, &waited);
            if (h->state == H_IDLE) {
                h->state = H_WATCHING;
                h->seen_at = t;
                h->had_stat = ok;
                h->ran0 = ran;
                h->wait0 = waited;
                settled = false;
                continue;
            }
            uint64_t wall = t - h->seen_at;
            h->had_stat = h->had_stat && ok;
            h->ran = h->had_stat && ran >= h->ran0 ? ran - h->ran0 : 0;
            h->waited = h->had_stat && waited >= h->wait0 ? waited - h->wait0 : 0;
            h->opp = wall > h->waited ? wall - h->waited : 0;
            if (h->opp >= bound)
                h->state = H_BLOCKED;
            else if (t - start >= cap)
                h->state = H_STARVED;
            else
                settled = false;
        }
        if (settled)
            return;
        nap_ms(1);
    }
}

void lab_wake_probe_run(struct lab_wake_probe *p)
{
    if (atomic_exchange_explicit(&p->ran, true, memory_order_acq_rel)) /* only the first wake runs it */
        return;
    for (unsigned i = 0; i < p->n; i++)
        p->h[i].started = pthread_create(&p->h[i].thread, NULL, helper_main, &p->h[i]) == 0;
    watch(p);
    p->wake_end = now_ns();
    atomic_store_explicit(&p->watched, true, memory_order_release); /* pairs with finish's acquire */
}

void lab_wake_probe_hook(struct counting_waker *cw, enum waker_event ev, unsigned nth, void *arg)
{
    (void)cw;
    (void)nth;
    if (ev == WAKER_EV_WAKE || ev == WAKER_EV_WAKE_BY_REF)
        lab_wake_probe_run(arg);
}

void lab_wake_probe_drop_hook(struct counting_waker *cw, enum waker_event ev, unsigned nth, void *arg)
{
    (void)cw;
    (void)nth;
    if (ev == WAKER_EV_DROP)
        lab_wake_probe_run(arg);
}

static void say(struct lab_wake_probe *p, size_t *at, const char *fmt, double a, double b, double c)
{
    if (*at >= sizeof p->evidence)
        return;
    int n = snprintf(p->evidence + *at, sizeof p->evidence - *at, fmt, a, b, c);
    if (n > 0)
        *at += (size_t)n;
}

static void describe(struct lab_wake_probe *p, const bool *was_blocked, const bool *was_starved)
{
    size_t at = 0;
    p->evidence[0] = 0;
    for (unsigned i = 0; i < p->n; i++) {
        struct helper *h = &p->h[i];
        if (i > 0)
            say(p, &at, "; ", 0, 0, 0);
        if (at < sizeof p->evidence)
            at += (size_t)snprintf(p->evidence + at, sizeof p->evidence - at, "%s", h->what);
        if (at >= sizeof p->evidence)
            break;
        double ms = 1e-6;
        if (!h->started) {
            say(p, &at, " could not be started (no thread)", 0, 0, 0);
        } else if (was_blocked[i]) {
            say(p, &at, ", from another thread inside the wake, had not returned after %.0f ms in which it was not "
                "waiting for a CPU (it ran %.1f ms and slept %.1f ms",
                (double)h->opp * ms, (double)h->ran * ms,
                (double)(h->opp > h->ran ? h->opp - h->ran : 0) * ms);
            say(p, &at, h->ran * 4 > h->opp ? ": it spun, waiting)" : ": it slept, waiting)", 0, 0, 0);
            if (atomic_load_explicit(&h->done, memory_order_acquire)) /* pairs with helper_main's release */
                say(p, &at, " and returned %.1f ms after the wake did", (double)(h->done_at > p->wake_end ?
                    h->done_at - p->wake_end : 0) * ms, 0, 0);
            else
                say(p, &at, " and had still not returned %.0f ms after the wake did", (double)p->bound_ms, 0, 0);
        } else if (was_starved[i] && !atomic_load_explicit(&h->done, memory_order_acquire)) {
            say(p, &at, " waited for a CPU most of the time and had only %.0f ms to run or sleep in %.0f ms "
                "(the machine is too busy to tell)", (double)h->opp * ms, 3.0 * p->bound_ms, 0);
        } else {
            say(p, &at, " returned in %.2f ms", (double)h->took_ns * ms, 0, 0);
        }
    }
}

enum lab_probe_verdict lab_wake_probe_finish(struct lab_wake_probe *p)
{
    if (!atomic_load_explicit(&p->ran, memory_order_acquire)) /* pairs with the run's exchange */
        return LAB_PROBE_NOT_RUN;
    /* a wake on another thread may still be waiting for its helpers: at most
     * its wall limit (3 bound_ms), and a margin */
    for (unsigned waited = 0; !atomic_load_explicit(&p->watched, memory_order_acquire) && /* pairs with the run */
                              waited < 4 * p->bound_ms; waited++)
        nap_ms(1);
    if (!atomic_load_explicit(&p->watched, memory_order_acquire)) { /* pairs with the run's release */
        snprintf(p->evidence, sizeof p->evidence, "the wake that ran the probe did not end its wait for the "
                 "helpers within %u ms", 4 * p->bound_ms);
        return LAB_PROBE_STUCK; /* the helpers are the waking thread's still: touch nothing */
    }
    bool blocked[LAB_PROBE_MAX] = { false }, starved[LAB_PROBE_MAX] = { false };
    bool any_blocked = false, any_starved = false;
    for (unsigned i = 0; i < p->n; i++) {
        blocked[i] = p->h[i].state == H_BLOCKED;
        starved[i] = p->h[i].state == H_STARVED;
        any_blocked |= blocked[i];
        /* the verdict inside the wake is the one that counts; now each
         * helper is watched again, to see it end once the wake returned */
        if (p->h[i].state != H_DONE && p->h[i].started) {
            p->h[i].state = H_IDLE;
            p->h[i].seen_at = 0;
        }
    }
    uint64_t keep[LAB_PROBE_MAX][3]; /* the window of the wake, for the evidence */
    for (unsigned i = 0; i < p->n; i++) {
        keep[i][0] = p->h[i].ran;
        keep[i][1] = p->h[i].waited;
        keep[i][2] = p->h[i].opp;
    }
    watch(p);
    bool stuck = false;
    for (unsigned i = 0; i < p->n; i++) {
        struct helper *h = &p->h[i];
        if (blocked[i] || starved[i]) {
            h->ran = keep[i][0];
            h->waited = keep[i][1];
            h->opp = keep[i][2];
        }
        if (!h->started)
            continue;
        if (h->state == H_DONE) {
            pthread_join(h->thread, NULL);
            h->joined = true;
            /* a helper that had no CPU inside the wake but ended after it
             * says nothing either way */
            any_starved |= starved[i] && !blocked[i];
        } else {
            stuck |= blocked[i] || h->state == H_BLOCKED;
            any_starved |= h->state == H_STARVED || starved[i];
        }
    }
    p->finished = true;
    describe(p, blocked, starved);
    if (stuck)
        return LAB_PROBE_STUCK;
    if (any_blocked)
        return LAB_PROBE_BLOCKED;
    if (any_starved)
        return LAB_PROBE_STARVED;
    return LAB_PROBE_USABLE;
}

const char *lab_wake_probe_evidence(struct lab_wake_probe *p)
{
    return p->evidence;
}

void lab_wake_probe_free(struct lab_wake_probe *p)
{
    for (unsigned i = 0; i < p->n; i++)
        if (p->h[i].started && !atomic_load_explicit(&p->h[i].done, memory_order_acquire)) /* pairs with helper_main */
            return; /* a helper still inside its operation uses p: leave it (the test fails) */
    for (unsigned i = 0; i < p->n; i++)
        if (p->h[i].started && !p->h[i].joined)
            pthread_join(p->h[i].thread, NULL);
    free(p);
}
