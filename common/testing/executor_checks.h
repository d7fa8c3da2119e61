/* executor_checks.h - running stage 03's executor from a test (stages 03
 * on: it needs executor.h): a run that must finish every task, and a task
 * spawned to run detached. */
#ifndef LAB_TEST_EXECUTOR_CHECKS_H
#define LAB_TEST_EXECUTOR_CHECKS_H

#include "lab_test.h"
#include "executor.h"
#include "join.h"

/* Runs `ex` until every task is done; a failed test when the run ends any
 * other way (a deadlock: tasks left that nothing will wake). */
static inline void expect_executor_run_ok(struct executor *ex)
{
    enum executor_status st = executor_run(ex);
    cr_assert_eq(st, EXECUTOR_OK, "the executor's run ended with %s", executor_status_str(st));
}

/* Spawns `f` on `ex` and drops its join handle: the task runs detached. */
static inline void spawn_detached(struct executor *ex, struct future f)
{
    struct join_handle *h = executor_spawn(ex, f, NULL);
    cr_assert_not_null(h, "executor_spawn failed");
    join_handle_drop(h);
}

#endif
