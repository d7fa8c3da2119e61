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

struct executor {
    struct scheduler sched;    /* first: a task's scheduler pointer is the executor */
    struct driver driver;      /* borrowed, or own_parker's */
    struct parker *own_parker; /* executor_new_default's parker, or NULL */
    struct task_cells cells;   /* freed task cells kept for the next spawns (task.h);
                                * entered by run on this thread, given back by free */
    /* BEGIN STUDENT FIELDS: the ready queue, the list of owned tasks and its length, whatever run needs (docs/03-executor.md#the-executor) */
    struct ready_queue queue;  /* ready tasks: one queue reference each */
    struct task *owned;        /* every task not yet complete: one list reference each */
    size_t live;               /* length of `owned` */
    struct task *witness;      /* the task the last deadlock check found wakeable, or NULL */
    bool closing;              /* executor_free has begun: no more spawns */
    unsigned since_driver;     /* task polls since the driver was last polled or parked on */
    /* END STUDENT */
};

/* The executor whose run loop is on this thread's stack, or NULL. Owned by
 * this thread alone: no atomics needed. */
static _Thread_local struct executor *current;

static inline struct executor *executor_of(struct scheduler *s) { return (struct executor *)s; }

/* ---- the scheduler hooks ------------------------------------------------------------ */

static void executor_schedule(struct scheduler *s, struct task *t, enum schedule_reason why)
{
    (void)why; /* one queue, FIFO, whatever the reason */
    /* BEGIN STUDENT: executor.h contract 2: which thread is queuing this task, and what must happen for an executor parked on its driver to notice it? (docs/03-executor.md#the-ready-queue) */
    struct executor *ex = executor_of(s);
    if (current == ex) {
        ready_queue_push_local(&ex->queue, t); /* the queue reference moves in */
    } else {
        ready_queue_push_remote(&ex->queue, t); /* the queue reference moves in */
        /* The executor may be parked, or about to park: the driver's token
         * makes an unpark that comes first count (driver.h). */
        driver_unpark(ex->driver);
    }
    /* END STUDENT */
}

static void executor_release(struct scheduler *s, struct task *t)
{
    /* BEGIN STUDENT: unlink t from the owned list (the task module gives back the list's reference right after) (docs/03-executor.md#the-executor) */
    struct executor *ex = executor_of(s);
    if (t->owned_prev)
        t->owned_prev->owned_next = t->owned_next;
    else
        ex->owned = t->owned_next;
    if (t->owned_next)
        t->owned_next->owned_prev = t->owned_prev;
    t->owned_prev = t->owned_next = NULL;
    ex->live--;
    if (ex->witness == t)
        ex->witness = NULL;
    /* END STUDENT */
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
    /* BEGIN STUDENT: an empty queue and list (docs/03-executor.md#the-executor) */
    ready_queue_init(&ex->queue);
    ex->owned = NULL;
    ex->live = 0;
    ex->witness = NULL;
    ex->closing = false;
    ex->since_driver = 0;
    /* END STUDENT */
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
    /* BEGIN STUDENT: executor.h contract 5: where can a task still be when the executor goes (queued at either end, pending, holding its own waker), and who gives back each of its references? (docs/03-executor.md#freeing-the-executor) */
    ex->closing = true;
    /* Dropping a future may wake other tasks (onto the queue, drained below)
     * or drop their join handles; it cannot add tasks (closing). */
    while (ex->owned)
        task_shutdown(ex->owned); /* its release hook unlinks it */
    struct task *t;
    while ((t = ready_queue_pop(&ex->queue)))
        task_drop_reference(t); /* -1: a queue entry of a task now complete */
    /* END STUDENT */
    task_cells_release(&ex->cells); /* the kept cells: every task is gone */
    if (ex->own_parker)
        parker_release(ex->own_parker); /* -1: ours */
    free(ex);
}

/* ---- spawning ------------------------------------------------------------------------------ */

struct join_handle *executor_spawn(struct executor *ex, struct future fut,
                                   task_output_drop_fn drop_output)
{
    /* BEGIN STUDENT: which references does a new task start with, and where must each of them be held? (docs/03-executor.md#spawning) */
    if (ex->closing)
        return NULL;
    struct join_handle *jh;
    struct task *t = task_new(&ex->sched, fut, drop_output, &jh);
    if (!t)
        return NULL;
    /* the list reference: at the head, O(1) */
    t->owned_prev = NULL;
    t->owned_next = ex->owned;
    if (ex->owned)
        ex->owned->owned_prev = t;
    ex->owned = t;
    ex->live++;
    /* the queue reference: spawning happens on the executor's thread */
    ready_queue_push_local(&ex->queue, t);
    return jh;
    /* END STUDENT */
}

/* ---- deadlock ---------------------------------------------------------------------------------- */

/* True when some task can still be woken from outside (task.h,
 * task_has_outside_waker). Checks the task that answered yes last time
 * first: while tasks wait on timers or other threads, that answers at once. */
static inline bool any_outside_waker(struct executor *ex)
{
    /* BEGIN STUDENT: executor.h contract 4: which task proves that the executor can still make progress, and how do you find it without looking at every task every time? (docs/03-executor.md#deadlock) */
    if (ex->witness && task_has_outside_waker(ex->witness))
        return true;
    for (struct task *t = ex->owned; t; t = t->owned_next) {
        if (task_has_outside_waker(t)) {
            ex->witness = t;
            return true;
        }
    }
    return false;
    /* END STUDENT */
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
    /* BEGIN STUDENT: executor.h contracts 1, 2, 4 and 6: what does the loop do when a task is ready, when none is, and how do timers and I/O get a turn beside a task that is always ready? (docs/03-executor.md#the-run-loop, #the-driver-tick) */
    for (;;) {
        struct task *t = ready_queue_pop(&ex->queue);
        if (t) {
            coop_reset(COOP_BUDGET_DEFAULT);
            task_run(t); /* consumes the queue reference */
            if (t == root && join_handle_is_finished(root_jh)) {
                st = EXECUTOR_OK; /* root_jh keeps the root alive: t is still valid */
                break;
            }
            if (++ex->since_driver >= EXECUTOR_DRIVER_INTERVAL) {
                /* The driver tick: tasks may stay ready for ever, so the
                 * driver gets a turn anyway. A zero timeout never sleeps: it
                 * fires due timers and reads ready I/O (their wakes queue
                 * tasks on the local end), or takes a token and returns. */
                ex->since_driver = 0;
                driver_park(ex->driver, 0);
            }
            continue;
        }
        if (mode != RUN_ROOT && ex->live == 0) {
            st = EXECUTOR_OK;
            break;
        }
        if (mode == RUN_UNTIL_IDLE) {
            st = EXECUTOR_IDLE;
            break;
        }
        if (!any_outside_waker(ex)) {
            /* Nothing outside can wake anyone. A wake that raced with the
             * check has queued its task: look once more before saying so. */
            if (ready_queue_len(&ex->queue) == 0) {
                st = EXECUTOR_DEADLOCK;
                break;
            }
            continue;
        }
        /* Somebody outside holds a waker: sleep until it wakes a task. A
         * spurious return only costs one more turn of the loop. */
        ex->since_driver = 0; /* a park is a driver turn too */
        driver_park(ex->driver, DRIVER_PARK_FOREVER);
    }
    /* END STUDENT */
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
    /* BEGIN STUDENT: entries in the ready queue (docs/03-executor.md#the-ready-queue) */
    return ready_queue_len(&ex->queue);
    /* END STUDENT */
}

size_t executor_test_live_tasks(struct executor *ex)
{
    /* BEGIN STUDENT: tasks in the owned list (docs/03-executor.md#the-executor) */
    return ex->live;
    /* END STUDENT */
}
