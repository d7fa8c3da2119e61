/* injector.c - stage 07: the shared FIFO of tasks (injector.h). */
#include "injector.h"

int injector_init(struct injector *q)
{
    q->head = q->tail = NULL;
    atomic_init(&q->len, 0);
    return pthread_mutex_init(&q->lock, NULL);
}

void injector_destroy(struct injector *q) { pthread_mutex_destroy(&q->lock); }

void injector_push_batch(struct injector *q, struct task **ts, size_t n)
{
    if (n == 0)
        return;
    /* BEGIN STUDENT: the injector: how much of a batch push needs the lock? (docs/07-work-stealing.md#the-injector) */
    for (size_t i = 0; i + 1 < n; i++)
        ts[i]->queue_next = ts[i + 1];
    ts[n - 1]->queue_next = NULL;
    pthread_mutex_lock(&q->lock);
    if (q->tail)
        q->tail->queue_next = ts[0];
    else
        q->head = ts[0];
    q->tail = ts[n - 1];
    /* relaxed: under the lock; readers outside it are ordered by the idle
     * protocol's seq_cst RMW (scheduler.c), which the pusher does after this */
    atomic_store_explicit(&q->len, atomic_load_explicit(&q->len, memory_order_relaxed) + n,
                          memory_order_relaxed);
    pthread_mutex_unlock(&q->lock);
    /* END STUDENT */
}

void injector_push(struct injector *q, struct task *t) { injector_push_batch(q, &t, 1); }

struct task *injector_pop(struct injector *q)
{
    /* relaxed: a quick look, so that an empty injector costs no lock */
    if (atomic_load_explicit(&q->len, memory_order_relaxed) == 0)
        return NULL;
    /* BEGIN STUDENT: unlink the head under the lock (docs/07-work-stealing.md#the-injector) */
    pthread_mutex_lock(&q->lock);
    struct task *t = q->head;
    if (t) {
        q->head = t->queue_next;
        if (!q->head)
            q->tail = NULL;
        t->queue_next = NULL;
        atomic_store_explicit(&q->len, atomic_load_explicit(&q->len, memory_order_relaxed) - 1,
                              memory_order_relaxed);
    }
    pthread_mutex_unlock(&q->lock);
    return t;
    /* END STUDENT */
}

size_t injector_len(struct injector *q) { return atomic_load_explicit(&q->len, memory_order_relaxed); }
