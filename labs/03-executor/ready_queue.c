/* ready_queue.c - stage 03: the intrusive ready queue (ready_queue.h).
 *
 *   local:  head -> A -> B -> C <- tail          (FIFO; the owner thread only)
 *   remote: remote -> F -> E -> D                (a stack: newest first)
 *
 * Taking the remote stack reverses it (D, E, F: oldest first) and appends it
 * to the local list. docs/03-executor.md#the-ready-queue draws both.
 */
#include "ready_queue.h"
#include "lab_todo.h"

void ready_queue_init(struct ready_queue *q)
{
    (void)q;
    LAB_TODO("both ends empty (docs/03-executor.md#the-ready-queue)");
}

void ready_queue_push_local(struct ready_queue *q, struct task *t)
{
    (void)q;
    (void)t;
    LAB_TODO("append to the local list through t->queue_next (docs/03-executor.md#the-ready-queue)");
}

void ready_queue_push_remote(struct ready_queue *q, struct task *t)
{
    (void)q;
    (void)t;
    LAB_TODO("ready_queue.h: the owner reads t->queue_next after it takes the stack; what orders this thread's write of it before that read? (docs/03-executor.md#the-ready-queue)");
}

/* Moves the whole remote stack, oldest first, to the end of the local list. */
static inline void take_remote(struct ready_queue *q)
{
    (void)q;
    LAB_TODO("the remote stack is newest first; how do you take all of it at once and keep the order in which the wakes happened? (docs/03-executor.md#the-ready-queue)");
}

struct task *ready_queue_pop(struct ready_queue *q)
{
    (void)q;
    LAB_TODO("executor.h contract 1: while a task that is always ready keeps the local end busy, when does a wake from another thread get its turn? (docs/03-executor.md#the-ready-queue)");
}

size_t ready_queue_len(struct ready_queue *q)
{
    (void)q;
    LAB_TODO("the local count plus the remote stack's length (docs/03-executor.md#the-ready-queue)");
}
