/* deadlock_test.c - stage 03: when nothing is ready and nothing outside the
 * executor can wake any task, run answers EXECUTOR_DEADLOCK instead of
 * sleeping for ever; while an outside waker exists, it parks instead. */
#include <string.h>

#include "futures.h"
#include "stage03.h"

LAB_SUITE(deadlock, 10);

static void expect_deadlock(struct bg_run *b, const char *what)
{
    cr_assert(bg_run_finish(b, RESCUE_MS), "%s: executor_run slept for ever (still parked after %u "
              "ms). Every task is pending and no waker exists outside the executor: it must return "
              "EXECUTOR_DEADLOCK (executor.h contract 4)", what, RESCUE_MS);
    cr_assert_eq(b->st, EXECUTOR_DEADLOCK, "%s: executor_run returned %s; expected the deadlock "
                 "error", what, executor_status_str(b->st));
}

LAB_TEST(deadlock, forgetful_task, 10)
{
    alloc_count_start();
    struct executor *ex = new_executor();
    struct probe_stats t;
    probe_init(&t, step_forget, NULL);
    struct join_handle *jh = spawn_probe(ex, &t, NULL);
    struct bg_run b;
    bg_run_start(&b, ex);
    expect_deadlock(&b, "one task that returned Pending without keeping its waker");
    cr_assert_eq(probe_polls(&t), 1, "the forgetful task was polled %u times; expected once (nothing "
                 "woke it)", probe_polls(&t));
    cr_assert_not_null(strstr(executor_status_str(EXECUTOR_DEADLOCK), "deadlock"),
                       "executor_status_str(EXECUTOR_DEADLOCK) does not say \"deadlock\"");
    cr_assert_eq(executor_test_live_tasks(ex), 1, "after a deadlock the pending task must stay, for "
                 "executor_free (live tasks: %zu)", executor_test_live_tasks(ex));
    join_handle_drop(jh);
    executor_free(ex);
    struct alloc_counts ac = alloc_count_stop();
    cr_assert_eq(probe_drops(&t), 1, "executor_free after a deadlock did not drop the stuck future");
    cr_assert_eq(ac.frees, ac.allocs, "after a deadlock, executor_free and the last join handle: %llu "
                 "allocations, %llu frees: a task was not freed (executor.h contract 5; task.h contract 4)",
                 (unsigned long long)ac.allocs, (unsigned long long)ac.frees);
    probe_destroy(&t);
}

LAB_TEST(deadlock, outside_waker_is_not_deadlock, 10)
{
    struct executor *ex = new_executor();
    struct probe_stats t;
    probe_init(&t, step_stash_once, NULL);
    struct join_handle *jh = spawn_probe(ex, &t, NULL);
    struct bg_run b;
    bg_run_start(&b, ex);
    cr_assert_not(bg_run_finish(&b, SCALED_MS(200)), "executor_run returned %s while a waker of its "
                  "pending task was held outside (by the test): that is not a deadlock; it must park "
                  "until the wake", executor_status_str(b.st));
    struct waker w = probe_take_stash(&t);
    waker_wake(&w);
    cr_assert(bg_run_finish(&b, RESCUE_MS), "executor_run did not return after the outside wake");
    cr_assert_eq(b.st, EXECUTOR_OK, "executor_run returned %s", executor_status_str(b.st));
    join_handle_drop(jh);
    executor_free(ex);
    probe_destroy(&t);
}

/* Pending on the first poll with its waker stashed for the test, then
 * pending for ever with no waker kept. */
static enum poll step_stash_then_forget(struct probe_stats *st, unsigned nth, struct context *cx, uint64_t *out)
{
    (void)out;
    if (nth == 1)
        probe_stash(st, cx);
    return POLL_PENDING;
}

/* The outside wakers go away while run is parked: the test drops one
 * task's waker without waking it, then wakes the other, which returns
 * Pending again keeping no waker. Whichever task run found holding an
 * outside waker before it parked holds none now: run must find that out
 * and answer EXECUTOR_DEADLOCK, not park again on what it saw before. */
LAB_TEST(deadlock, outside_wakers_gone_while_parked, 10)
{
    struct executor *ex = new_executor();
    struct probe_stats a, b;
    probe_init(&a, step_stash_then_forget, NULL);
    probe_init(&b, step_stash_then_forget, NULL);
    struct join_handle *ja = spawn_probe(ex, &a, NULL), *jb = spawn_probe(ex, &b, NULL);
    struct bg_run r;
    bg_run_start(&r, ex);
    cr_assert(probe_wait_stashed(&a, RESCUE_MS) && probe_wait_stashed(&b, RESCUE_MS),
              "executor_run did not poll its two spawned tasks");
    cr_assert_not(bg_run_finish(&r, SCALED_MS(100)), "executor_run returned %s while wakers of both its "
                  "pending tasks were held outside (by the test): that is not a deadlock",
                  executor_status_str(r.st));
    struct waker wa = probe_take_stash(&a), wb = probe_take_stash(&b);
    waker_drop(&wa);
    waker_wake(&wb);
    expect_deadlock(&r, "two pending tasks whose wakers the test held while executor_run parked; the test then "
                    "dropped one task's waker without a wake and woke the other, which returned Pending keeping "
                    "no waker: no waker is left outside the executor, whichever task was seen holding one before");
    cr_assert_eq(probe_polls(&b), 2, "the woken task was polled %u times; expected twice", probe_polls(&b));
    join_handle_drop(ja);
    join_handle_drop(jb);
    executor_free(ex);
    probe_destroy(&a);
    probe_destroy(&b);
}

/* A task joining a stuck task: its waker sits in the stuck task's join
 * handle, inside the executor. Nothing outside can help either. */
struct joiner {
    struct join_handle *child;
};

static enum poll joiner_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct joiner *j = self;
    enum join_status js;
    if (join_handle_poll(j->child, cx, NULL, &js) == POLL_PENDING)
        return POLL_PENDING;
    join_handle_drop(j->child);
    j->child = NULL;
    return POLL_READY;
}

static void joiner_drop(void *self)
{
    struct joiner *j = self;
    if (j->child)
        join_handle_drop(j->child);
}

static const struct future_vtable joiner_vt = FUTURE_VTABLE_INIT(struct joiner, 0, joiner_poll, joiner_drop);

LAB_TEST(deadlock, joining_a_stuck_task, 10)
{
    alloc_count_start();
    struct executor *ex = new_executor();
    struct probe_stats stuck;
    probe_init(&stuck, step_forget, NULL);
    struct joiner j = { .child = spawn_probe(ex, &stuck, NULL) };
    struct join_handle *jh = executor_spawn(ex, future_of(&joiner_vt, &j), NULL);
    cr_assert_not_null(jh, "executor_spawn returned NULL");
    struct bg_run b;
    bg_run_start(&b, ex);
    expect_deadlock(&b, "a task joining a task that will never finish (the joiner's waker is parked "
                    "in the stuck task's join handle: only the executor's own tasks can fire it)");
    uint64_t s = state_of(jh);
    cr_assert_eq(task_state_joining(s), 1, "the joiner's state word says joining=%llu; expected 1 (its "
                 "waker parked in a join handle of the same executor)",
                 (unsigned long long)task_state_joining(s));
    join_handle_drop(jh);
    executor_free(ex);
    struct alloc_counts ac = alloc_count_stop();
    cr_assert_eq(ac.frees, ac.allocs, "after executor_free, %llu allocations were freed of %llu: the "
                 "joiner waker parked in the stuck task leaked (a cycle the free must break)",
                 (unsigned long long)ac.frees, (unsigned long long)ac.allocs);
    probe_destroy(&stuck);
}

LAB_TEST(deadlock, block_on_stuck_root, 10)
{
    struct executor *ex = new_executor();
    struct probe_stats root;
    probe_init(&root, step_forget, NULL);
    struct probe_stats *state = &root;
    uint64_t out = 0;
    struct bg_run b;
    bg_block_on_start(&b, ex, probe_future(&state), &out);
    expect_deadlock(&b, "executor_block_on of a root that never finishes");
    executor_free(ex);
    cr_assert_eq(probe_drops(&root), 1, "the stuck root's future was dropped %u times by "
                 "executor_free; expected once", probe_drops(&root));
    probe_destroy(&root);
}

LAB_TEST(deadlock, many_tasks_one_wakeable, 10)
{
    /* 1,000 stuck tasks and one that a thread wakes after 100 ms: not a
     * deadlock until that one has finished; then the rest are. */
    struct executor *ex = new_executor();
    enum { N = 1000 };
    static struct probe_stats stuck[N];
    struct join_handle *jh[N];
    for (int i = 0; i < N; i++) {
        probe_init(&stuck[i], step_forget, NULL);
        jh[i] = spawn_probe(ex, &stuck[i], NULL);
    }
    struct thread_sleep s;
    thread_sleep_init(&s, 100);
    struct join_handle *sleeper = executor_spawn(ex, thread_sleep_as_future(&s), NULL);
    cr_assert_not_null(sleeper, "executor_spawn returned NULL");
    struct bg_run b;
    bg_run_start(&b, ex);
    cr_assert(bg_run_finish(&b, RESCUE_MS), "executor_run never returned");
    cr_assert_eq(b.st, EXECUTOR_DEADLOCK, "executor_run returned %s; expected the deadlock error "
                 "once the sleeper finished", executor_status_str(b.st));
    cr_assert(join_handle_is_finished(sleeper), "executor_run reported a deadlock before the task "
              "waiting on another thread (thread_sleep, 100 ms) had finished: that task had an "
              "outside waker");
    join_handle_drop(sleeper);
    for (int i = 0; i < N; i++)
        join_handle_drop(jh[i]);
    executor_free(ex);
    for (int i = 0; i < N; i++)
        probe_destroy(&stuck[i]);
}

/* A task that joins another and, once it has the other's output, lets the
 * test drop the other's last reference before it returns Pending for good,
 * keeping no waker. */
struct last_joiner {
    struct join_handle *child;
    struct gate *joined;   /* opened once child's handle is dropped */
    struct gate *dropped;  /* opened by the test once it dropped the child's last reference */
};

static enum poll last_joiner_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct last_joiner *j = self;
    if (!j->child)
        return POLL_PENDING;
    enum join_status js;
    if (join_handle_poll(j->child, cx, NULL, &js) == POLL_PENDING)
        return POLL_PENDING;
    join_handle_drop(j->child);
    j->child = NULL;
    gate_open(j->joined);
    (void)gate_wait(j->dropped, RESCUE_MS);
    return POLL_PENDING;
}

static void last_joiner_drop(void *self)
{
    struct last_joiner *j = self;
    if (j->child)
        join_handle_drop(j->child);
}

static const struct future_vtable last_joiner_vt =
    FUTURE_VTABLE_INIT(struct last_joiner, 0, last_joiner_poll, last_joiner_drop);

/* The one task that run found holding an outside waker finishes while run
 * parks, and its last reference is a waker the test drops on its own
 * thread: there the task's memory goes back to the allocator, not to any
 * list of the executor's. The other task is left pending with no waker.
 * run must answer EXECUTOR_DEADLOCK from the tasks that are still there,
 * reading nothing of the one that is gone (Valgrind sees such a read). */
LAB_TEST(deadlock, wakeable_task_freed_on_another_thread, 10)
{
    struct executor *ex = new_executor();
    struct probe_stats a;
    probe_init(&a, step_stash_once, NULL);
    struct gate joined, dropped;
    gate_init(&joined);
    gate_init(&dropped);
    struct last_joiner j = { .child = spawn_probe(ex, &a, NULL), .joined = &joined, .dropped = &dropped };
    struct join_handle *jh = executor_spawn(ex, future_of(&last_joiner_vt, &j), NULL);
    cr_assert_not_null(jh, "executor_spawn returned NULL");
    struct bg_run r;
    bg_run_start(&r, ex);
    cr_assert(probe_wait_stashed(&a, RESCUE_MS), "executor_run did not poll the spawned task");
    cr_assert_not(bg_run_finish(&r, SCALED_MS(100)), "executor_run returned %s while a waker of its pending "
                  "task was held outside (by the test): that is not a deadlock", executor_status_str(r.st));
    struct waker w = probe_take_stash(&a);
    waker_wake_by_ref(&w);
    bool handed = gate_wait(&joined, RESCUE_MS);
    waker_drop(&w); /* the task's last reference: freed on this thread */
    gate_open(&dropped);
    cr_assert(handed, "the task woken from outside finished, but the task joining it was not polled to its "
              "end within %u ms", RESCUE_MS);
    expect_deadlock(&r, "the one task holding an outside waker finished and its last reference went on the "
                    "test's thread (its memory freed there); the other task then returned Pending keeping no "
                    "waker");
    cr_assert_eq(probe_polls(&a), 2, "the task woken from outside was polled %u times; expected twice",
                 probe_polls(&a));
    join_handle_drop(jh);
    executor_free(ex);
    probe_destroy(&a);
    gate_destroy(&joined);
    gate_destroy(&dropped);
}
