/* injector.c - stage 07: the shared FIFO of tasks (injector.h). */
#include "injector.h"
#include "lab_todo.h"

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
    (void)q;
    (void)ts;
    (void)n;
    LAB_TODO("the injector: how much of a batch push needs the lock? (docs/07-work-stealing.md#the-injector)");
}

void injector_push(struct injector *q, struct task *t) { injector_push_batch(q, &t, 1); }

struct task *injector_pop(struct injector *q)
{
    /* relaxed: a quick look, so that an empty injector costs no lock */
    if (atomic_load_explicit(&q->len, memory_order_relaxed) == 0)
        return NULL;
    (void)q;
    LAB_TODO("unlink the head under the lock (docs/07-work-stealing.md#the-injector)");
}

size_t injector_len(struct injector *q) { return atomic_load_explicit(&q->len, memory_order_relaxed); }
