/* executor.c - stage 03: the single-thread executor (executor.h).
 *
 * The executor is three things and a loop:
 *   - a scheduler (common/scheduler.h): the hooks its tasks call when a wake
 *     makes them runnable (schedule) and when they complete (release);
 *   - a ready queue (ready_queue.h) of task references;
 *   - a list of every task it owns, linked through the tasks themselves,
 *     holding one reference each (task.h's "list" reference);
 *   - the loop: pop, run, repeat, and every EXECUTOR_DRIVER_INTERVAL polls
 *     give the driver a turn with a zero timeout (timers and I/O are served
 *     while tasks stay ready); with nothing to pop, either everything is
 *     done, or it is deadlocked, or it parks on the driver until a wake.
 *
 *         spawn ----> [ ready queue ] ----> task_run(t) ----> Ready: complete, release
 *                          ^    ^                |
 *          wake (any thread)    +---- NOTIFIED --+  Pending with a wake during the poll
 *
 * Everything but the remote end of the queue and the driver's unpark is
 * touched by the executor's own thread only, so the executor has no lock.
 * docs/03-executor.md#the-executor walks through it.
 */
#include <stdio.h>
#include <stdlib.h>

#include "coop.h"
#define LAB_EXECUTOR_C /* the real executor_spawn and executor_block_on (executor.h, tracing) */
#include "executor.h"
#include "parker.h"
#include "ready_queue.h"
#include "lab_todo.h"

struct executor {
    struct scheduler sched;    /* first: a task's scheduler pointer is the executor */
    struct driver driver;      /* borrowed, or own_parker's */
    struct parker *own_parker; /* executor_new_default's parker, or NULL */
    struct task_cells cells;   /* freed task cells kept for the next spawns (task.h);
                                * entered by run on this thread, given back by free */
    int todo_your_fields_here; /* TODO: the ready queue, the list of owned tasks and its length, whatever run needs (docs/03-executor.md#the-executor) */
};

/* The executor whose run loop is on this thread's stack, or NULL. Owned by
 * this thread alone: no atomics needed. */
static _Thread_local struct executor *current;

static inline struct executor *executor_of(struct scheduler *s) { return (struct executor *)s; }

/* ---- the scheduler hooks ------------------------------------------------------------ */

static void executor_schedule(struct scheduler *s, struct task *t, enum schedule_reason why)
{
    (void)why; /* one queue, FIFO, whatever the reason */
    (void)s;
    (void)t;
    (void)why;
    LAB_TODO("executor.h contract 2: which thread is queuing this task, and what must happen for an executor parked on its driver to notice it? (docs/03-executor.md#the-ready-queue)");
}

static void executor_release(struct scheduler *s, struct task *t)
{
    (void)s;
    (void)t;
    LAB_TODO("unlink t from the owned list (the task module gives back the list's reference right after) (docs/03-executor.md#the-executor)");
}

#ifdef LAB_TRACE
/* Traced (given; docs/tracing.md): a task that leaves the list has completed. */
static void executor_release_traced(struct scheduler *s, struct task *t)
{
    trace_task_complete(&t->trace);
    executor_release(s, t);
}
#define EXECUTOR_RELEASE executor_release_traced
#else
#define EXECUTOR_RELEASE executor_release
#endif

static const struct scheduler_vtable executor_scheduler_vtable = {
    .schedule = executor_schedule,
    .release = EXECUTOR_RELEASE,
};

/* ---- creating and freeing ---------------------------------------------------------------- */

struct executor *executor_new(struct driver driver)
{
    struct executor *ex = calloc(1, sizeof *ex);
    if (!ex)
        return NULL;
    ex->sched.vtable = &executor_scheduler_vtable;
    ex->driver = driver;
    ex->own_parker = NULL;
    (void)driver;
    LAB_TODO("an empty queue and list (docs/03-executor.md#the-executor)");
    return ex;
}

struct executor *executor_new_default(void)
{
    struct parker *p = parker_new(); /* our reference, released by executor_free */
    if (!p)
        return NULL;
    struct executor *ex = executor_new(parker_driver(p));
    if (!ex) {
        parker_release(p);
        return NULL;
    }
    ex->own_parker = p;
    return ex;
}

void executor_free(struct executor *ex)
{
    if (current) {
        fputs("executor_free: called from inside a task (free the executor after run returns)\n", stderr);
        abort();
    }
    (void)ex;
    LAB_TODO("executor.h contract 5: where can a task still be when the executor goes (queued at either end, pending, holding its own waker), and who gives back each of its references? (docs/03-executor.md#freeing-the-executor)");
    task_cells_release(&ex->cells); /* the kept cells: every task is gone */
    if (ex->own_parker)
        parker_release(ex->own_parker); /* -1: ours */
    free(ex);
}

/* ---- spawning ------------------------------------------------------------------------------ */

struct join_handle *executor_spawn(struct executor *ex, struct future fut,
                                   task_output_drop_fn drop_output)
{
    (void)ex;
    (void)fut;
    (void)drop_output;
    LAB_TODO("which references does a new task start with, and where must each of them be held? (docs/03-executor.md#spawning)");
}

/* ---- deadlock ---------------------------------------------------------------------------------- */

/* True when some task can still be woken from outside (task.h,
 * task_has_outside_waker). Checks the task that answered yes last time
 * first: while tasks wait on timers or other threads, that answers at once. */
static inline bool any_outside_waker(struct executor *ex)
{
    (void)ex;
    LAB_TODO("executor.h contract 4: which task proves that the executor can still make progress, and how do you find it without looking at every task every time? (docs/03-executor.md#deadlock)");
}

/* ---- the loop -------------------------------------------------------------------------------------- */

enum run_mode { RUN_ALL, RUN_UNTIL_IDLE, RUN_ROOT };

static enum executor_status run_loop(struct executor *ex, enum run_mode mode, struct task *root,
                                     const struct join_handle *root_jh)
{
    if (current) {
        fputs("executor: run or block_on called from inside a task\n", stderr);
        abort();
    }
    current = ex;
    struct task_cells *outer_cells = task_cells_enter(&ex->cells);
    trace_thread_name("executor"); /* empty unless built with -DLAB_TRACE (trace.h) */
    enum executor_status st;
    (void)ex;
    (void)mode;
    (void)root;
    (void)root_jh;
    LAB_TODO("executor.h contracts 1, 2, 4 and 6: what does the loop do when a task is ready, when none is, and how do timers and I/O get a turn beside a task that is always ready? (docs/03-executor.md#the-run-loop, #the-driver-tick)");
    coop_unlimit();
    task_cells_leave(outer_cells);
    current = NULL;
    return st;
}

enum executor_status executor_run(struct executor *ex)
{
    return run_loop(ex, RUN_ALL, NULL, NULL);
}

enum executor_status executor_run_until_idle(struct executor *ex)
{
    return run_loop(ex, RUN_UNTIL_IDLE, NULL, NULL);
}

enum executor_status executor_block_on(struct executor *ex, struct future fut, void *out)
{
    struct join_handle *jh = executor_spawn(ex, fut, NULL);
    if (!jh)
        return EXECUTOR_NOMEM;
    enum executor_status st = run_loop(ex, RUN_ROOT, (struct task *)jh, jh);
    if (st == EXECUTOR_OK) {
        enum join_status js;
        join_handle_poll(jh, NULL, out, &js); /* complete: Ready at once */
    }
    join_handle_drop(jh); /* on deadlock the root stays, detached, until executor_free */
    return st;
}

struct executor *executor_current(void) { return current; }

const char *executor_status_str(enum executor_status st)
{
    switch (st) {
    case EXECUTOR_OK: return "ok: every task completed";
    case EXECUTOR_IDLE: return "idle: nothing is ready, some tasks are still pending";
    case EXECUTOR_DEADLOCK:
        return "deadlock: every task is waiting and no waker outside the executor can wake any of them";
    case EXECUTOR_NOMEM: return "out of memory";
    }
    return "unknown status";
}

/* ---- test hooks ---- */

size_t executor_test_queue_len(struct executor *ex)
{
    (void)ex;
    LAB_TODO("entries in the ready queue (docs/03-executor.md#the-ready-queue)");
}

size_t executor_test_live_tasks(struct executor *ex)
{
    (void)ex;
    LAB_TODO("tasks in the owned list (docs/03-executor.md#the-executor)");
}
