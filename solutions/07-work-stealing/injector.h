/* injector.h - stage 07: the shared queue every worker can take from.
 *
 * Wakes and spawns from threads that are not workers of the runtime, tasks
 * that yield, a LIFO task past its cap, and the older half of a full local
 * deque all go here. It is intrusive (linked through task->queue_next, the
 * queue reference of task.h moves in with the task), FIFO and unbounded, so a
 * push never allocates and never fails. One mutex protects the list; len is
 * also readable without it, for the idle workers' "is there work?" check.
 */
#ifndef LAB_INJECTOR_H
#define LAB_INJECTOR_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "task.h"

struct injector {
    pthread_mutex_t lock;  /* protects head, tail */
    struct task *head, *tail;
    _Atomic size_t len;    /* written under lock; read anywhere (see injector_len) */
};

/* 0, or pthread_mutex_init's error (then the injector is not usable). */
int injector_init(struct injector *q);
void injector_destroy(struct injector *q); /* must be empty */
/* Any thread: appends t (its queue reference moves in). */
void injector_push(struct injector *q, struct task *t);
/* Any thread: appends n tasks at once (one lock), in the order given. */
void injector_push_batch(struct injector *q, struct task **ts, size_t n);
/* Any thread: the oldest task (its queue reference moves to the caller), or NULL. */
struct task *injector_pop(struct injector *q);
/* Any thread: entries right now; relaxed, so a hint unless the caller is
 * ordered after the pushes it must see (the idle protocol is). */
size_t injector_len(struct injector *q);

#endif
