/* ready_queue.c - stage 03: the intrusive ready queue (ready_queue.h).
 *
 *   local:  head -> A -> B -> C <- tail          (FIFO; the owner thread only)
 *   remote: remote -> F -> E -> D                (a stack: newest first)
 *
 * Taking the remote stack reverses it (D, E, F: oldest first) and appends it
 * to the local list. docs/03-executor.md#the-ready-queue draws both.
 */
#include "ready_queue.h"

void ready_queue_init(struct ready_queue *q)
{
    /* BEGIN STUDENT: both ends empty (docs/03-executor.md#the-ready-queue) */
    q->head = q->tail = NULL;
    q->len = 0;
    q->ticks = 0;
    atomic_init(&q->remote, NULL);
    /* END STUDENT */
}

void ready_queue_push_local(struct ready_queue *q, struct task *t)
{
    /* BEGIN STUDENT: append to the local list through t->queue_next (docs/03-executor.md#the-ready-queue) */
    t->queue_next = NULL;
    if (q->tail)
        q->tail->queue_next = t;
    else
        q->head = t;
    q->tail = t;
    q->len++;
    /* END STUDENT */
}

void ready_queue_push_remote(struct ready_queue *q, struct task *t)
{
    /* BEGIN STUDENT: ready_queue.h: the owner reads t->queue_next after it takes the stack; what orders this thread's write of it before that read? (docs/03-executor.md#the-ready-queue) */
    /* relaxed: only a guess at the top; the CAS below checks it */
    struct task *top = atomic_load_explicit(&q->remote, memory_order_relaxed);
    do {
        t->queue_next = top; /* written before the CAS publishes t */
    } while (!atomic_compare_exchange_weak_explicit(&q->remote, &top, t,
                                                    memory_order_release, /* pairs with the owner's acquire exchange */
                                                    memory_order_relaxed));
    /* END STUDENT */
}

/* Moves the whole remote stack, oldest first, to the end of the local list. */
static inline void take_remote(struct ready_queue *q)
{
    /* BEGIN STUDENT: the remote stack is newest first; how do you take all of it at once and keep the order in which the wakes happened? (docs/03-executor.md#the-ready-queue) */
    /* relaxed: a cheap look first; an empty stack needs no read-modify-write */
    if (atomic_load_explicit(&q->remote, memory_order_relaxed) == NULL)
        return;
    /* acquire: pairs with every pusher's release CAS, so each task's
     * queue_next (and everything its waker wrote before the wake) is seen */
    struct task *s = atomic_exchange_explicit(&q->remote, NULL, memory_order_acquire);
    struct task *first = s, *rev = NULL;
    size_t n = 0;
    while (s) {
        struct task *next = s->queue_next;
        s->queue_next = rev;
        rev = s;
        s = next;
        n++;
    }
    if (!rev)
        return;
    /* rev is the oldest, `first` (the newest) is now the last */
    if (q->tail)
        q->tail->queue_next = rev;
    else
        q->head = rev;
    q->tail = first;
    q->len += n;
    /* END STUDENT */
}

struct task *ready_queue_pop(struct ready_queue *q)
{
    /* BEGIN STUDENT: executor.h contract 1: while a task that is always ready keeps the local end busy, when does a wake from another thread get its turn? (docs/03-executor.md#the-ready-queue) */
    if (!q->head || ++q->ticks >= READY_QUEUE_REMOTE_INTERVAL) {
        q->ticks = 0;
        take_remote(q);
    }
    struct task *t = q->head;
    if (!t)
        return NULL;
    q->head = t->queue_next;
    if (!q->head)
        q->tail = NULL;
    q->len--;
    t->queue_next = NULL;
    return t; /* the queue entry's reference is the caller's now */
    /* END STUDENT */
}

size_t ready_queue_len(struct ready_queue *q)
{
    /* BEGIN STUDENT: the local count plus the remote stack's length (docs/03-executor.md#the-ready-queue) */
    size_t n = q->len;
    /* acquire: pairs with the pushers' release, so each queue_next read is
     * the one written before its task was published (a pushed task's link
     * never changes while it sits in the stack) */
    for (struct task *s = atomic_load_explicit(&q->remote, memory_order_acquire); s; s = s->queue_next)
        n++;
    return n;
    /* END STUDENT */
}
