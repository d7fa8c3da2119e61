/* gate.h - a one-shot gate between two threads: one opens it, once; the
 * other waits for it with a time limit (stages 02, 03 and 07). */
#ifndef LAB_TEST_GATE_H
#define LAB_TEST_GATE_H

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "harness.h"   /* lab_monotonic_cond_init, lab_deadline_after_ms */

struct gate {
    pthread_mutex_t lock; /* protects open */
    pthread_cond_t cond;  /* signalled when open becomes true (CLOCK_MONOTONIC) */
    bool open;
};

static inline void gate_init(struct gate *g)
{
    pthread_mutex_init(&g->lock, NULL);
    lab_monotonic_cond_init(&g->cond);
    g->open = false;
}

static inline void gate_open(struct gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->open = true;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

/* True when the gate is (or becomes) open within ms; ms == 0 only looks. */
static inline bool gate_wait(struct gate *g, unsigned ms)
{
    struct timespec deadline;
    lab_deadline_after_ms(&deadline, ms);
    pthread_mutex_lock(&g->lock);
    int rc = 0;
    while (!g->open && rc == 0)
        rc = pthread_cond_timedwait(&g->cond, &g->lock, &deadline);
    bool open = g->open;
    pthread_mutex_unlock(&g->lock);
    return open;
}

static inline void gate_destroy(struct gate *g)
{
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->lock);
}

#endif
