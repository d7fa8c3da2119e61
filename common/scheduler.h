/* scheduler.h - the hook between a task and whoever runs it.
 *
 * Stage 03 writes the task (one allocation, an atomic state word, wakers that
 * are task references, a join handle: solutions/03-executor/task.h). The task
 * never decides where it runs: when a wake makes it runnable it hands itself
 * to its scheduler through this hook; when it completes it says so through
 * release. Stage 03's single-thread executor implements the hook with one
 * ready queue; stage 07's work-stealing scheduler implements it with
 * per-worker deques and an injector, and reuses stage 03's task unchanged.
 *
 * References (task.h counts them in the task's state word):
 *   - schedule() is handed one reference, the queue entry's (NOTIFIED is set
 *     in the task's state while it exists). The scheduler keeps it until it
 *     passes the task to task_run(), which consumes it; a scheduler that will
 *     never run the task (it is being freed) gives it back with
 *     task_drop_reference().
 *   - the scheduler's list of owned tasks holds one reference per task, from
 *     spawn until release(); the task module gives that reference back right
 *     after release() returns. release() must not drop it itself.
 *
 * Threads:
 *   - schedule() may be called from any thread (a wake from a timer thread,
 *     an abort from a joining thread), also while the scheduler is parked in
 *     its driver: it must then unpark it. It must not block and must not
 *     allocate (a wake never fails).
 *   - release() is called by the thread that completes the task: the one that
 *     ran its last poll or dropped its future (task_run, task_shutdown). In
 *     stage 03 that is always the executor's own thread.
 *   - Neither hook is ever called for a task that is COMPLETE, except release()
 *     once, as part of completing it.
 */
#ifndef LAB_SCHEDULER_H
#define LAB_SCHEDULER_H

struct task; /* defined by stage 03 */

enum schedule_reason {
    SCHEDULE_SPAWN, /* a new task */
    SCHEDULE_WAKE,  /* woken by a waker or an abort (possibly from another thread) */
    SCHEDULE_YIELD, /* woken while its poll ran (a yield, a spent budget, or any
                     * other wake that came meanwhile): run others first */
};

struct scheduler;

/* quote: scheduler */
struct scheduler_vtable {
    /* Takes over one reference to `task` (the queue entry's reference) and
     * arranges for task_run(task) to be called with it. Callable from any
     * thread; never blocks, never allocates. */
    void (*schedule)(struct scheduler *s, struct task *task, enum schedule_reason why);
    /* The task completed or was cancelled: forget it (owned-task list). The
     * list's reference is given back by the caller right after. */
    void (*release)(struct scheduler *s, struct task *task);
};

/* Embed it first in the scheduler's own struct: a task keeps a pointer to it. */
struct scheduler {
    const struct scheduler_vtable *vtable;
};
/* end quote: scheduler */

#endif
