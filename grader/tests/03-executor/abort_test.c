/* abort_test.c - stage 03: abort at every moment of a task's life. An abort
 * never drops the future during a poll; an aborted task is never polled
 * again; its joiner sees JOIN_CANCELLED. */
#include <stdlib.h>
#include <string.h>

#include "stage03.h"

LAB_SUITE(abort, 10);
LAB_SUITE(abort_race, 20);

static void expect_cancelled(struct join_handle *jh, const char *what)
{
    uint64_t out = 12345;
    enum join_status js = JOIN_OK;
    cr_assert_eq(join_handle_poll(jh, NULL, &out, &js), POLL_READY, "%s: the join handle of an "
                 "aborted task still says Pending after run: the task must end (cancelled)", what);
    cr_assert_eq(js, JOIN_CANCELLED, "%s: the join handle says JOIN_OK for an aborted task", what);
    cr_assert_eq(out, 12345, "%s: a cancelled join wrote to out", what);
}

LAB_TEST(abort, before_first_poll, 10)
{
    struct executor *ex = new_executor();
    struct probe_stats t;
    probe_init(&t, step_ready, NULL);
    struct join_handle *jh = spawn_probe(ex, &t, NULL);
    join_handle_abort(jh);
    join_handle_abort(jh); /* twice is once */
    cr_assert_eq(probe_drops(&t), 0, "abort dropped the future on the aborting thread: the task's "
                 "own scheduler drops it, when it next has the task");
    expect_run(ex, EXECUTOR_OK, "a task aborted before its first poll");
    cr_assert_eq(probe_polls(&t), 0, "a task aborted before its first poll was polled %u times: "
                 "CANCELLED means never polled again", probe_polls(&t));
    cr_assert_eq(probe_drops(&t), 1, "the aborted task's future was dropped %u times; expected once",
                 probe_drops(&t));
    expect_cancelled(jh, "aborted before the first poll");
    cr_assert_eq(executor_test_live_tasks(ex), 0, "an aborted task is still in the executor's list");
    join_handle_drop(jh);
    executor_free(ex);
    probe_destroy(&t);
}

LAB_TEST(abort, while_pending, 10)
{
    struct executor *ex = new_executor();
    struct probe_stats t;
    probe_init(&t, step_stash_forever, NULL);
    struct join_handle *jh = spawn_probe(ex, &t, NULL);
    cr_assert_eq(executor_run_until_idle(ex), EXECUTOR_IDLE, "run_until_idle");
    join_handle_abort(jh);
    cr_assert_eq(probe_drops(&t), 0, "abort dropped the future on the aborting thread, not on the "
                 "task's own scheduler (join.h, join_handle_abort); the next hint: make hint STAGE=3 "
                 "ITEM=abort");
    cr_assert_eq(executor_test_queue_len(ex), 1, "aborting an idle pending task queued it %zu times; "
                 "expected once (its scheduler must get it back to drop the future: join.h, join_handle_abort)",
                 executor_test_queue_len(ex));
    struct waker w = probe_take_stash(&t);
    waker_wake_by_ref(&w); /* a wake after the abort: no second entry, no poll */
    cr_assert_eq(executor_test_queue_len(ex), 1, "a wake after an abort queued the task again");
    expect_run(ex, EXECUTOR_OK, "a pending task aborted");
    cr_assert_eq(probe_polls(&t), 1, "an aborted task was polled again (%u polls in all)", probe_polls(&t));
    cr_assert_eq(probe_drops(&t), 1, "the aborted task's future was dropped %u times; expected once",
                 probe_drops(&t));
    expect_cancelled(jh, "aborted while pending");
    waker_wake(&w); /* harmless: complete */
    join_handle_drop(jh);
    executor_free(ex);
    probe_destroy(&t);
}

LAB_TEST(abort, after_completion_changes_nothing, 10)
{
    struct executor *ex = new_executor();
    struct probe_stats t;
    probe_init(&t, step_ready, NULL);
    t.value = 31;
    struct join_handle *jh = spawn_probe(ex, &t, NULL);
    expect_run(ex, EXECUTOR_OK, "one ready task");
    join_handle_abort(jh);
    cr_assert_eq(executor_test_queue_len(ex), 0, "abort after completion queued the task");
    expect_run(ex, EXECUTOR_OK, "nothing to do");
    uint64_t out = 0;
    enum join_status js;
    cr_assert_eq(join_handle_poll(jh, NULL, &out, &js), POLL_READY, "Pending after completion");
    cr_assert_eq(js, JOIN_OK, "abort after completion turned a finished task into a cancelled one: "
                 "COMPLETE is final, the output stands");
    cr_assert_eq(out, 31, "wrong output after a late abort");
    cr_assert_eq(probe_drops(&t), 1, "the future was dropped %u times", probe_drops(&t));
    join_handle_drop(jh);
    executor_free(ex);
    probe_destroy(&t);
}

/* ---- from inside its own poll ------------------------------------------------------------ */

struct self_abort {
    bool then_ready;
    unsigned drops_in_poll; /* future drops seen right after abort, still inside the poll */
};

static enum poll step_abort_self(struct probe_stats *st, unsigned nth, struct context *cx, uint64_t *out)
{
    (void)nth;
    (void)cx;
    struct self_abort *sa = st->arg;
    join_handle_abort(st->jh);
    sa->drops_in_poll = probe_drops(st);
    if (sa->then_ready) {
        *out = st->value;
        return POLL_READY;
    }
    return POLL_PENDING;
}

LAB_TEST(abort, from_inside_own_poll, 10)
{
    struct executor *ex = new_executor();
    struct self_abort sa = { .then_ready = false };
    struct probe_stats t;
    probe_init(&t, step_abort_self, &sa);
    t.jh = spawn_probe(ex, &t, NULL);
    expect_run(ex, EXECUTOR_OK, "a task that aborts itself during its poll");
    cr_assert_eq(sa.drops_in_poll, 0, "a task that aborted itself had its future dropped during its "
                 "own poll (use after free waiting to happen): abort takes effect when the poll "
                 "returns, never during it (join.h, join_handle_abort; task.h contract 1)");
    cr_assert_eq(probe_polls(&t), 1, "a task that aborted itself and returned Pending was polled %u "
                 "times; expected once", probe_polls(&t));
    cr_assert_eq(probe_drops(&t), 1, "its future was dropped %u times; expected once (when the poll "
                 "returned Pending)", probe_drops(&t));
    expect_cancelled(t.jh, "aborted from inside its own poll");
    join_handle_drop(t.jh);
    executor_free(ex);
    probe_destroy(&t);
}

LAB_TEST(abort, inside_poll_that_finishes, 10)
{
    struct executor *ex = new_executor();
    struct self_abort sa = { .then_ready = true };
    struct probe_stats t;
    probe_init(&t, step_abort_self, &sa);
    t.value = 64;
    t.jh = spawn_probe(ex, &t, NULL);
    expect_run(ex, EXECUTOR_OK, "a task that aborts itself and returns Ready");
    cr_assert_eq(sa.drops_in_poll, 0, "the future was dropped during its own poll");
    uint64_t out = 0;
    enum join_status js;
    cr_assert_eq(join_handle_poll(t.jh, NULL, &out, &js), POLL_READY, "Pending after completion");
    cr_assert_eq(js, JOIN_OK, "a task aborted during the poll that finished it reports cancelled; "
                 "the poll returned Ready, so the output stands (the abort came too late)");
    cr_assert_eq(out, 64, "wrong output");
    cr_assert_eq(probe_drops(&t), 1, "the future was dropped %u times", probe_drops(&t));
    join_handle_drop(t.jh);
    executor_free(ex);
    probe_destroy(&t);
}

/* ---- from another thread during a poll ---------------------------------------------------- */

struct remote_abort {
    struct join_handle *jh;
    struct gate go, done;
    unsigned drops_after_abort; /* seen by the poll once the abort returned */
    bool gate_ok;
};

static void *aborter_main(void *arg)
{
    struct remote_abort *ra = arg;
    if (gate_wait(&ra->go, RESCUE_MS))
        join_handle_abort(ra->jh);
    gate_open(&ra->done);
    return NULL;
}

static enum poll step_wait_for_abort(struct probe_stats *st, unsigned nth, struct context *cx, uint64_t *out)
{
    (void)nth;
    (void)cx;
    (void)out;
    struct remote_abort *ra = st->arg;
    gate_open(&ra->go);
    ra->gate_ok = gate_wait(&ra->done, RESCUE_MS);
    ra->drops_after_abort = probe_drops(st);
    return POLL_PENDING; /* no waker kept: only the abort can end this task */
}

LAB_TEST(abort_race, from_other_thread_during_poll, 10)
{
    const unsigned rounds = lab_scale(20, 3);
    for (unsigned r = 0; r < rounds; r++) {
        struct executor *ex = new_executor();
        struct remote_abort ra;
        memset(&ra, 0, sizeof ra);
        gate_init(&ra.go);
        gate_init(&ra.done);
        struct probe_stats t;
        probe_init(&t, step_wait_for_abort, &ra);
        ra.jh = spawn_probe(ex, &t, NULL);
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, aborter_main, &ra), 0, "could not start a thread");
        struct bg_run b;
        bg_run_start(&b, ex);
        bool returned = bg_run_finish(&b, 2 * RESCUE_MS);
        pthread_join(th, NULL);
        cr_assert(ra.gate_ok, "join_handle_abort from another thread did not return while the task "
                  "was being polled: abort must not wait for the poll");
        cr_assert(returned, "executor_run never returned: an abort from another thread during a poll "
                  "was lost (the task must be cancelled when its poll returns Pending)");
        cr_assert_eq(b.st, EXECUTOR_OK, "executor_run returned %s", executor_status_str(b.st));
        cr_assert_eq(ra.drops_after_abort, 0, "an abort from another thread dropped the future while "
                     "the task was being polled: abort takes effect when the poll returns (RUNNING is the lock "
                     "on the future: task.h contract 1)");
        cr_assert_eq(probe_polls(&t), 1, "the aborted task was polled %u times; expected once",
                     probe_polls(&t));
        cr_assert_eq(probe_drops(&t), 1, "the aborted task's future was dropped %u times; expected once",
                     probe_drops(&t));
        expect_cancelled(ra.jh, "aborted from another thread during its poll");
        join_handle_drop(ra.jh);
        executor_free(ex);
        gate_destroy(&ra.go);
        gate_destroy(&ra.done);
        probe_destroy(&t);
    }
}

LAB_TEST(abort_race, from_other_thread_while_parked, 10)
{
    struct executor *ex = new_executor();
    struct probe_stats t;
    probe_init(&t, step_stash_forever, NULL); /* the stash is an outside waker: run parks */
    struct join_handle *jh = spawn_probe(ex, &t, NULL);
    struct bg_run b;
    bg_run_start(&b, ex);
    for (unsigned waited = 0; probe_polls(&t) == 0 && waited < RESCUE_MS; waited++)
        lab_sleep_ms(1);
    lab_sleep_ms(20);
    join_handle_abort(jh); /* from this thread, while the executor sleeps */
    cr_assert(bg_run_finish(&b, RESCUE_MS), "executor_run stayed parked after an abort from another "
              "thread: abort of an idle task queues it, and that must unpark the executor (executor.h contract 2)");
    cr_assert_eq(b.st, EXECUTOR_OK, "executor_run returned %s", executor_status_str(b.st));
    cr_assert_eq(probe_drops(&t), 1, "the future was dropped %u times", probe_drops(&t));
    expect_cancelled(jh, "aborted while the executor was parked");
    join_handle_drop(jh);
    executor_free(ex);
    probe_destroy(&t);
}
