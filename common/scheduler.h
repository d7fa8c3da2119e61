/* scheduler.h - the hook between a task and whoever runs it.
 *
 * Stage 03 writes the task (one allocation, an atomic state word, wakers that
 * are task references, a join handle). The task never decides where it runs:
 * when a wake makes it runnable it hands itself to its scheduler through this
 * hook. Stage 03's single-thread executor implements the hook with one ready
 * queue; stage 07's work-stealing scheduler implements it with per-worker
 * deques and an injector, and reuses stage 03's task unchanged.
 */
#ifndef LAB_SCHEDULER_H
#define LAB_SCHEDULER_H

struct task; /* defined by stage 03 */

enum schedule_reason {
    SCHEDULE_SPAWN, /* a new task */
    SCHEDULE_WAKE,  /* woken by a waker (possibly from another thread) */
    SCHEDULE_YIELD, /* the task yielded: run others first */
};

struct scheduler;

struct scheduler_vtable {
    /* Takes over one reference to `task` (the queue entry's reference) and
     * arranges for it to be polled. Callable from any thread. */
    void (*schedule)(struct scheduler *s, struct task *task, enum schedule_reason why);
    /* The task completed or was cancelled: forget it (owned-task list). */
    void (*release)(struct scheduler *s, struct task *task);
};

struct scheduler {
    const struct scheduler_vtable *vtable;
};

#endif
