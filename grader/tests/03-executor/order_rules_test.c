/* order_rules_test.c - executor.h contracts 1 and 4 where a second way of
 * breaking them passed: the order of remote wakes, and a detached task's
 * outside waker.
 *
 * Contract 1, the remote end: wakes made on another thread run in the
 * order they were made among themselves.
 *
 * Eight tasks wait with their wakers stashed; another thread wakes them in
 * a shuffled order while the executor is not running; then one run polls
 * them. The order of their second polls must be the order of the wakes: a
 * remote stack taken without being reversed runs them newest first, every
 * run.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>

#include "stage03.h"

LAB_SUITE(order_rules, 10);

enum { TASKS = 8 };
static const int WAKE_ORDER[TASKS] = { 3, 6, 0, 5, 1, 7, 2, 4 };

struct order_log {
    pthread_mutex_t lock; /* protects n, ran */
    unsigned n;
    int ran[TASKS];
};
static struct order_log order_log = { .lock = PTHREAD_MUTEX_INITIALIZER };

static enum poll step_log_second(struct probe_stats *st, unsigned nth, struct context *cx, uint64_t *out)
{
    (void)out;
    if (nth == 1) {
        probe_stash(st, cx);
        return POLL_PENDING;
    }
    pthread_mutex_lock(&order_log.lock);
    if (order_log.n < TASKS)
        order_log.ran[order_log.n++] = st->id;
    pthread_mutex_unlock(&order_log.lock);
    return POLL_READY;
}

static void *remote_waker(void *arg)
{
    struct probe_stats *t = arg;
    for (int i = 0; i < TASKS; i++) {
        struct waker w = probe_take_stash(&t[WAKE_ORDER[i]]);
        waker_wake(&w);
    }
    return NULL;
}

LAB_TEST(order_rules, remote_wakes_run_in_the_order_made, 5)
{
    order_log.n = 0;
    struct executor *ex = new_executor();
    struct probe_stats t[TASKS];
    struct join_handle *jh[TASKS];
    for (int i = 0; i < TASKS; i++) {
        probe_init(&t[i], step_log_second, NULL);
        t[i].id = i;
        jh[i] = spawn_probe(ex, &t[i], NULL);
    }
    enum executor_status st = executor_run_until_idle(ex);
    cr_assert_eq(st, EXECUTOR_IDLE, "executor_run_until_idle returned %s with eight tasks waiting on wakers the test "
                 "holds", executor_status_str(st));
    for (int i = 0; i < TASKS; i++)
        cr_assert_eq(probe_polls(&t[i]), 1, "task %d was polled %u times before any wake, not once", i,
                     probe_polls(&t[i]));
    pthread_t th;
    pthread_create(&th, NULL, remote_waker, t);
    pthread_join(th, NULL);
    expect_run(ex, EXECUTOR_OK, "eight tasks woken from another thread");
    char made[64] = "", got[64] = "";
    for (int i = 0; i < TASKS; i++) {
        snprintf(made + 2 * i, sizeof made - 2 * (size_t)i, "%d ", WAKE_ORDER[i]);
        if (i < (int)order_log.n)
            snprintf(got + 2 * i, sizeof got - 2 * (size_t)i, "%d ", order_log.ran[i]);
    }
    cr_assert_eq(order_log.n, TASKS, "%u of %d woken tasks ran", order_log.n, TASKS);
    for (int i = 0; i < TASKS; i++)
        cr_assert_eq(order_log.ran[i], WAKE_ORDER[i], "another thread woke eight waiting tasks in the order "
                     "%s; they ran in the order %s: wakes from other threads run in the order they were made "
                     "among themselves (executor.h contract 1), and the order above is not that one. Which "
                     "order does a stack of remote wakes hand them out in? The next hint: make hint STAGE=3 ITEM=fifo",
                     made, got);
    for (int i = 0; i < TASKS; i++) {
        join_handle_drop(jh[i]);
    }
    executor_free(ex);
    for (int i = 0; i < TASKS; i++)
        probe_destroy(&t[i]);
}

/* executor.h contract 4 for a detached task: its join handle is dropped, so
 * the only references are the executor's list and a waker the test holds.
 * That waker is outside: run must park, not answer deadlock. */
LAB_SUITE(deadlock_rules, 10);

LAB_TEST(deadlock_rules, detached_task_with_outside_waker, 10)
{
    struct executor *ex = new_executor();
    struct probe_stats t;
    probe_init(&t, step_stash_once, NULL);
    join_handle_drop(spawn_probe(ex, &t, NULL)); /* detached */
    struct bg_run b;
    bg_run_start(&b, ex);
    cr_assert(probe_wait_stashed(&t, RESCUE_MS), "the detached task was never polled");
    bool returned = bg_run_finish(&b, SCALED_MS(200));
    struct waker w = probe_take_stash(&t);
    waker_wake(&w);
    if (!returned)
        returned = bg_run_finish(&b, RESCUE_MS);
    cr_assert(returned, "executor_run did not return after the outside wake of its only task");
    cr_assert_eq(b.st, EXECUTOR_OK, "executor_run returned %s while the only waker of its detached, pending task "
                 "was held outside (by the test): with no join handle, the task's references are the executor's "
                 "list and that waker, and the waker is outside, so it is no deadlock; the run counted one reference "
                 "too many as its own (executor.h contract 4). The next hint: make hint STAGE=3 ITEM=deadlock",
                 executor_status_str(b.st));
    cr_assert_eq(probe_polls(&t), 2, "the detached task was polled %u times, not twice", probe_polls(&t));
    executor_free(ex);
    probe_destroy(&t);
}
