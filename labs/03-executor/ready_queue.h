/* ready_queue.h - stage 03: the executor's queue of tasks ready to run.
 *
 * Intrusive: a task is linked through its own queue_next field, so pushing
 * allocates nothing and the queue has no capacity to run out of (the bounded
 * channel of docs/03-executor.md#from-a-channel-to-a-state-word deadlocks at
 * 1,024 queued tasks; this one cannot). Each entry is one task reference,
 * the queue reference of task.h: the queue owns it from push to pop.
 *
 * Two ends, because wakes come from two kinds of thread:
 *   local   a FIFO list used by the executor's own thread only: spawns, and
 *           wakes made while a task runs. No atomics, no lock.
 *   remote  a lock-free stack any thread may push onto (one CAS); the
 *           executor takes the whole stack at once (one exchange) and
 *           reverses it onto the end of the local list, which restores
 *           FIFO order among the remote wakes.
 * pop takes from local first, and moves remote over when local is empty (and
 * every READY_QUEUE_REMOTE_INTERVAL pops, so a task that yields forever
 * cannot starve the wakes of other threads).
 */
#ifndef LAB_READY_QUEUE_H
#define LAB_READY_QUEUE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "task.h"

#define READY_QUEUE_REMOTE_INTERVAL 61u

struct ready_queue {
    int todo_your_fields_here; /* TODO: a local FIFO list (owner thread only) and a remote stack any thread may push onto (docs/03-executor.md#the-ready-queue) */
};

void ready_queue_init(struct ready_queue *q);
/* The owner thread: appends t (its queue reference moves into the queue). */
void ready_queue_push_local(struct ready_queue *q, struct task *t);
/* Any thread: pushes t onto the remote stack (its queue reference moves in). */
void ready_queue_push_remote(struct ready_queue *q, struct task *t);
/* The owner thread: the next ready task (its queue reference moves to the
 * caller), or NULL when both ends are empty. */
struct task *ready_queue_pop(struct ready_queue *q);
/* The owner thread: entries in both ends right now. */
size_t ready_queue_len(struct ready_queue *q);

#endif
