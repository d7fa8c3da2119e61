/* spawn_test.c - stage 03: spawning, running in FIFO order, one allocation
 * per task, block_on, spawning from inside a task. */
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "futures.h"
#include "stage03.h"

LAB_SUITE(spawn, 10);
LAB_SUITE(run, 10);

/* ---- spawn and join ----------------------------------------------------------------- */

LAB_TEST(spawn, one_task_output, 10)
{
    struct executor *ex = new_executor();
    struct probe_stats st;
    probe_init(&st, step_ready, NULL);
    st.value = 4242;
    struct join_handle *jh = spawn_probe(ex, &st, NULL);
    cr_assert_eq(probe_polls(&st), 0, "executor_spawn polled the future itself; spawn only queues "
                 "the task, run polls it");
    cr_assert_eq(executor_test_live_tasks(ex), 1, "executor_test_live_tasks says %zu right after one "
                 "spawn; expected 1", executor_test_live_tasks(ex));
    cr_assert_eq(executor_test_queue_len(ex), 1, "a spawned task must be queued once: the queue "
                 "holds %zu entries", executor_test_queue_len(ex));
    expect_run(ex, EXECUTOR_OK, "one ready task");
    cr_assert_eq(probe_polls(&st), 1, "a future that is Ready at once was polled %u times; expected 1",
                 probe_polls(&st));
    cr_assert_eq(probe_drops(&st), 1, "a finished task's future must be dropped exactly once; it was "
                 "dropped %u times", probe_drops(&st));
    cr_assert_eq(executor_test_live_tasks(ex), 0, "a completed task is still counted as live (%zu): "
                 "it must leave the executor's list when it completes", executor_test_live_tasks(ex));
    cr_assert(join_handle_is_finished(jh), "join_handle_is_finished is false after the task completed");

    uint64_t out = 0;
    enum join_status js = JOIN_CANCELLED;
    cr_assert_eq(join_handle_poll(jh, NULL, &out, &js), POLL_READY,
                 "join_handle_poll of a completed task said Pending");
    cr_assert_eq(js, JOIN_OK, "the join handle of a task that finished says cancelled");
    cr_assert_eq(out, 4242, "the join handle gave %llu instead of the task's output 4242",
                 (unsigned long long)out);
    join_handle_drop(jh);
    executor_free(ex);
    probe_destroy(&st);
}

/* A task that counts its polls in a shared counter and yields `left` times. */
struct counted_yield {
    atomic_ulong *polls;
    unsigned left;
};

static enum poll counted_yield_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct counted_yield *c = self;
    atomic_fetch_add_explicit(c->polls, 1, memory_order_relaxed);
    if (c->left == 0)
        return POLL_READY;
    c->left--;
    waker_wake_by_ref(cx->waker);
    return POLL_PENDING;
}

static const struct future_vtable counted_yield_vt =
    FUTURE_VTABLE_INIT(struct counted_yield, 0, counted_yield_poll, NULL);

LAB_TEST(spawn, hundred_thousand_before_run, 2) /* the reference: 0.1 s */
{
    const unsigned n = lab_scale(100000, 2000);
    struct executor *ex = new_executor();
    atomic_ulong polls;
    atomic_init(&polls, 0);
    for (unsigned i = 0; i < n; i++) {
        struct counted_yield c = { .polls = &polls, .left = 1 };
        struct join_handle *jh = executor_spawn(ex, future_of(&counted_yield_vt, &c), NULL);
        if (!jh)
            cr_assert_fail("executor_spawn returned NULL at task %u of %u before run: the ready "
                           "queue must be unbounded (a spawn never waits for room)", i + 1, n);
        join_handle_drop(jh); /* detached */
    }
    cr_assert_eq(executor_test_queue_len(ex), n, "after %u spawns the ready queue holds %zu entries; "
                 "expected one per task", n, executor_test_queue_len(ex));
    expect_run(ex, EXECUTOR_OK, "tasks spawned before run");
    unsigned long p = atomic_load(&polls);
    cr_assert_eq(p, 2ul * n, "%u tasks that yield once each were polled %lu times in all; expected "
                 "exactly %lu (twice each)", n, p, 2ul * n);
    cr_assert_eq(executor_test_live_tasks(ex), 0, "tasks left after run returned OK");
    executor_free(ex);
}

/* Wakes made while the executor is not running (from another thread's
 * point of view: the remote end), then the run that polls the woken
 * tasks: neither allocates anything. */
LAB_TEST(spawn, wakes_allocate_nothing, 5)
{
    enum { N = 200 };
    struct executor *ex = new_executor();
    struct probe_stats *st = calloc(N, sizeof *st);
    struct join_handle **jh = calloc(N, sizeof *jh);
    cr_assert(st && jh, "out of memory in the test");
    for (unsigned i = 0; i < N; i++) {
        probe_init(&st[i], step_stash_once, NULL);
        jh[i] = spawn_probe(ex, &st[i], NULL);
    }
    cr_assert_eq(executor_run_until_idle(ex), EXECUTOR_IDLE, "run_until_idle with %d tasks Pending did not "
                 "answer EXECUTOR_IDLE", N);
    alloc_count_start();
    for (unsigned i = 0; i < N; i++) {
        struct waker w = probe_take_stash(&st[i]);
        waker_wake(&w);
    }
    struct alloc_counts woken = alloc_count_peek();
    expect_run(ex, EXECUTOR_OK, "tasks woken from outside the executor");
    struct alloc_counts ran = alloc_count_stop();
    cr_assert_eq(woken.allocs, 0, "%d wakes of tasks, made while the executor was not running, allocated %llu "
                 "times: a wake never allocates (executor.h contract 3)", N, (unsigned long long)woken.allocs);
    cr_assert_eq(ran.allocs, 0, "running %d woken tasks to the end allocated %llu times: queuing a woken task "
                 "never allocates (executor.h contract 3)", N, (unsigned long long)ran.allocs);
    for (unsigned i = 0; i < N; i++) {
        cr_assert_eq(probe_polls(&st[i]), 2, "a task woken once was polled %u times; expected 2",
                     probe_polls(&st[i]));
        join_handle_drop(jh[i]);
        probe_destroy(&st[i]);
    }
    free(st);
    free(jh);
    executor_free(ex);
}

/* ---- FIFO ------------------------------------------------------------------------------ */

struct fifo_log {
    int ids[64];
    atomic_int n;
};

struct logged_yield {
    struct fifo_log *log;
    int id;
    unsigned yields; /* left */
    struct yield_now y;
};

static enum poll logged_yield_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct logged_yield *l = self;
    int k = atomic_fetch_add(&l->log->n, 1);
    if (k < 64)
        l->log->ids[k] = l->id;
    while (l->yields > 0) {
        if (yield_now_poll(&l->y, cx) == POLL_PENDING)
            return POLL_PENDING;
        l->yields--;
        yield_now_init(&l->y);
    }
    return POLL_READY;
}

static const struct future_vtable logged_yield_vt =
    FUTURE_VTABLE_INIT(struct logged_yield, 0, logged_yield_poll, NULL);

LAB_TEST(run, fifo_three_yielding_tasks, 10)
{
    struct executor *ex = new_executor();
    struct fifo_log log;
    memset(&log, 0, sizeof log);
    atomic_init(&log.n, 0);
    struct join_handle *jh[3];
    for (int i = 0; i < 3; i++) {
        struct logged_yield l = { .log = &log, .id = i + 1, .yields = 2 };
        yield_now_init(&l.y);
        jh[i] = executor_spawn(ex, future_of(&logged_yield_vt, &l), NULL);
        cr_assert_not_null(jh[i], "executor_spawn returned NULL");
    }
    expect_run(ex, EXECUTOR_OK, "three tasks that yield twice");
    const int want[9] = { 1, 2, 3, 1, 2, 3, 1, 2, 3 };
    int n = atomic_load(&log.n);
    char got[64] = "";
    for (int i = 0; i < n && i < 9; i++) {
        char one[4];
        snprintf(one, sizeof one, "%d ", log.ids[i]);
        strcat(got, one);
    }
    cr_assert_eq(n, 9, "three tasks that yield twice each were polled %d times in all; expected 9 "
                 "(3 polls each): order seen: %s", n, got);
    for (int i = 0; i < 9; i++)
        cr_assert_eq(log.ids[i], want[i], "poll order was %s; expected 1 2 3 1 2 3 1 2 3: a task that "
                     "yields goes to the back of the ready queue, behind every task already "
                     "ready (FIFO: executor.h contract 1)", got);
    for (int i = 0; i < 3; i++)
        join_handle_drop(jh[i]);
    executor_free(ex);
}

/* ---- one allocation per task ------------------------------------------------------------ */

LAB_TEST(spawn, one_allocation_per_task, 10)
{
    const unsigned n = 1000;
    struct executor *ex = new_executor();
    struct probe_stats st;
    probe_init(&st, step_ready, NULL);
    struct join_handle **jh = malloc(n * sizeof *jh);
    cr_assert_not_null(jh, "out of memory in the test");

    alloc_count_start();
    for (unsigned i = 0; i < n; i++)
        jh[i] = spawn_probe(ex, &st, NULL);
    struct alloc_counts spawned = alloc_count_peek();
    expect_run(ex, EXECUTOR_OK, "a thousand ready tasks");
    struct alloc_counts ran = alloc_count_peek();
    for (unsigned i = 0; i < n; i++)
        join_handle_drop(jh[i]);
    struct alloc_counts end = alloc_count_stop();

    cr_assert_leq(spawned.allocs, n, "%u spawns made %llu allocations: a task is ONE allocation "
                  "(header, future and output slot together), and the queue and list are intrusive (task.h)",
                  n, (unsigned long long)spawned.allocs);
    cr_assert_eq(ran.allocs, spawned.allocs, "running %u tasks allocated %llu more times: a wake, a "
                 "queue entry or a poll must not allocate", n,
                 (unsigned long long)(ran.allocs - spawned.allocs));
    cr_assert_eq(end.frees, end.allocs, "after every task completed and every join handle was "
                 "dropped, %llu allocations were freed of %llu: tasks leak",
                 (unsigned long long)end.frees, (unsigned long long)end.allocs);
    cr_assert_eq(probe_drops(&st), n, "%u finished futures were dropped %u times in all; expected "
                 "once each", n, probe_drops(&st));
    free(jh);
    executor_free(ex);
    probe_destroy(&st);
}

LAB_TEST(spawn, out_of_memory_leaves_future_to_caller, 10)
{
    struct executor *ex = new_executor();
    struct probe_stats st;
    probe_init(&st, step_ready, NULL);
    struct probe_stats *state = &st;
    alloc_count_start();
    alloc_fail_after(0);
    struct join_handle *jh = executor_spawn(ex, probe_future(&state), NULL);
    alloc_count_stop();
    cr_assert_null(jh, "executor_spawn returned a join handle although every allocation failed");
    cr_assert_eq(probe_drops(&st), 0, "a spawn that failed dropped the future: it must leave it "
                 "to the caller, untouched");
    cr_assert_eq(executor_test_live_tasks(ex), 0, "a spawn that failed left a task behind");
    expect_run(ex, EXECUTOR_OK, "an executor whose only spawn failed");
    cr_assert_eq(probe_polls(&st), 0, "the future of a failed spawn was polled");
    executor_free(ex);
    probe_destroy(&st);
}

/* A future whose state wants 64-byte alignment: the task must honour the
 * vtable's align when it copies the future in. */
struct aligned_state {
    alignas(64) unsigned char bytes[64];
    bool misaligned;
};

static atomic_bool saw_misaligned;

static enum poll aligned_poll(void *self, struct context *cx, void *out)
{
    (void)cx;
    struct aligned_state *a = self;
    if ((uintptr_t)self % 64 != 0)
        atomic_store(&saw_misaligned, true);
    *(uint64_t *)out = a->bytes[0] + a->bytes[63];
    return POLL_READY;
}

static const struct future_vtable aligned_vt =
    FUTURE_VTABLE_INIT(struct aligned_state, sizeof(uint64_t), aligned_poll, NULL);

LAB_TEST(spawn, future_alignment_and_bytes, 10)
{
    struct executor *ex = new_executor();
    struct aligned_state a;
    memset(&a, 0, sizeof a);
    a.bytes[0] = 7;
    a.bytes[63] = 9;
    struct join_handle *jh = executor_spawn(ex, future_of(&aligned_vt, &a), NULL);
    cr_assert_not_null(jh, "executor_spawn returned NULL");
    memset(&a, 0xee, sizeof a); /* the task has its own copy now */
    expect_run(ex, EXECUTOR_OK, "one ready task");
    cr_assert_not(atomic_load(&saw_misaligned), "the future was polled at an address that is not "
                  "a multiple of its vtable's align (64), the alignment its state was declared with (executor.h, executor_spawn; task.h)");
    uint64_t out = 0;
    enum join_status js;
    cr_assert_eq(join_handle_poll(jh, NULL, &out, &js), POLL_READY, "join_handle_poll said Pending");
    cr_assert_eq(out, 16, "the task's future did not hold the bytes given to spawn (output %llu, "
                 "expected 16): the task polled something other than the future it was "
                 "given, a pointer to the caller's copy or a misaligned one (executor.h; task.h); the next "
                 "hint: make hint STAGE=3 ITEM=spawn-and-join",
                 (unsigned long long)out);
    join_handle_drop(jh);
    executor_free(ex);
}

/* ---- spawning from inside a task ----------------------------------------------------------- */

struct parent {
    struct executor *ex;
    struct probe_stats *child;
    struct join_handle *jh;
    bool current_ok;
};

static enum poll parent_poll(void *self, struct context *cx, void *out)
{
    struct parent *p = self;
    if (!p->jh) {
        p->current_ok = executor_current() == p->ex;
        p->jh = spawn_probe(executor_current() ? executor_current() : p->ex, p->child, NULL);
    }
    uint64_t v = 0;
    enum join_status js;
    if (join_handle_poll(p->jh, cx, &v, &js) == POLL_PENDING)
        return POLL_PENDING;
    join_handle_drop(p->jh);
    *(uint64_t *)out = js == JOIN_OK ? v + 1 : 0;
    return POLL_READY;
}

static const struct future_vtable parent_vt =
    FUTURE_VTABLE_INIT(struct parent, sizeof(uint64_t), parent_poll, NULL);

LAB_TEST(spawn, from_inside_a_task, 10)
{
    struct executor *ex = new_executor();
    cr_assert_null(executor_current(), "executor_current() is not NULL outside run");
    struct probe_stats child;
    probe_init(&child, step_ready, NULL);
    child.value = 99;
    struct parent p = { .ex = ex, .child = &child };
    struct join_handle *jh = executor_spawn(ex, future_of(&parent_vt, &p), NULL);
    cr_assert_not_null(jh, "executor_spawn returned NULL");
    expect_run(ex, EXECUTOR_OK, "a task that spawns a child and joins it");
    cr_assert_null(executor_current(), "executor_current() is not NULL after run returned");
    uint64_t out = 0;
    enum join_status js;
    cr_assert_eq(join_handle_poll(jh, NULL, &out, &js), POLL_READY, "the parent never finished");
    cr_assert_eq(probe_polls(&child), 1, "the child spawned from inside a task was polled %u times; "
                 "expected once", probe_polls(&child));
    cr_assert_eq(out, 100, "the parent joined its child and got %llu; expected the child's 99 + 1",
                 (unsigned long long)out);
    join_handle_drop(jh);
    executor_free(ex);
    probe_destroy(&child);
}

static enum poll step_record_current(struct probe_stats *st, unsigned nth, struct context *cx, uint64_t *out)
{
    (void)nth;
    (void)cx;
    *(struct executor **)st->arg = executor_current();
    *out = 0;
    return POLL_READY;
}

LAB_TEST(spawn, current_inside_poll, 10)
{
    struct executor *ex = new_executor();
    struct executor *seen = NULL;
    struct probe_stats st;
    probe_init(&st, step_record_current, &seen);
    struct join_handle *jh = spawn_probe(ex, &st, NULL);
    expect_run(ex, EXECUTOR_OK, "one ready task");
    cr_assert_eq(seen, ex, "executor_current() inside a task's poll was %p; expected the executor "
                 "running it (%p): spawning from inside a task needs it", (void *)seen, (void *)ex);
    cr_assert_null(executor_current(), "executor_current() is not NULL after run returned");
    join_handle_drop(jh);
    executor_free(ex);
    probe_destroy(&st);
}

/* ---- block_on ----------------------------------------------------------------------------------- */

struct summer {
    struct probe_stats *kids;
    unsigned n;
    struct join_handle *jh[8];
    unsigned next;
    uint64_t sum;
    bool spawned;
};

static enum poll summer_poll(void *self, struct context *cx, void *out)
{
    struct summer *s = self;
    if (!s->spawned) {
        for (unsigned i = 0; i < s->n; i++)
            s->jh[i] = spawn_probe(executor_current(), &s->kids[i], NULL);
        s->spawned = true;
    }
    for (; s->next < s->n; s->next++) {
        uint64_t v;
        enum join_status js;
        if (join_handle_poll(s->jh[s->next], cx, &v, &js) == POLL_PENDING)
            return POLL_PENDING;
        s->sum += v;
        join_handle_drop(s->jh[s->next]);
    }
    *(uint64_t *)out = s->sum;
    return POLL_READY;
}

static const struct future_vtable summer_vt = FUTURE_VTABLE_INIT(struct summer, sizeof(uint64_t), summer_poll, NULL);

static enum poll step_yield_then_value(struct probe_stats *st, unsigned nth, struct context *cx, uint64_t *out)
{
    if (nth <= (unsigned)st->id) {
        waker_wake_by_ref(cx->waker);
        return POLL_PENDING;
    }
    *out = st->value;
    return POLL_READY;
}

LAB_TEST(run, block_on_root_joins_children, 10)
{
    struct executor *ex = new_executor();
    struct probe_stats kids[8];
    for (int i = 0; i < 8; i++) {
        probe_init(&kids[i], step_yield_then_value, NULL);
        kids[i].id = i % 3;   /* yields before Ready */
        kids[i].value = (uint64_t)i + 1;
    }
    struct summer s = { .kids = kids, .n = 8 };
    uint64_t out = 0;
    struct bg_run b;
    bg_block_on_start(&b, ex, future_of(&summer_vt, &s), &out);
    cr_assert(bg_run_finish(&b, RESCUE_MS), "executor_block_on never returned: a wake was lost "
              "(a child's completion must wake the root that joins it)");
    cr_assert_eq(b.st, EXECUTOR_OK, "executor_block_on returned %s; expected OK", executor_status_str(b.st));
    cr_assert_eq(out, 36, "block_on's root summed its children's outputs to %llu; expected 36 (the "
                 "root's output must be moved to block_on's out)", (unsigned long long)out);
    for (int i = 0; i < 8; i++) {
        cr_assert_eq(probe_polls(&kids[i]), (unsigned)(i % 3) + 1, "child %d was polled %u times; "
                     "expected %d", i, probe_polls(&kids[i]), i % 3 + 1);
        probe_destroy(&kids[i]);
    }
    cr_assert_eq(executor_test_live_tasks(ex), 0, "tasks left after block_on's root joined them all");
    executor_free(ex);
}

LAB_TEST(run, run_until_idle_does_not_park, 10)
{
    struct executor *ex = new_executor();
    struct probe_stats st;
    probe_init(&st, step_stash_once, NULL);
    struct join_handle *jh = spawn_probe(ex, &st, NULL);
    struct bg_run b;
    bg_run_idle_start(&b, ex);
    cr_assert(bg_run_finish(&b, RESCUE_MS), "executor_run_until_idle did not return while a task "
              "was pending: it must return when nothing is ready, never park (executor.h, executor_run_until_idle)");
    cr_assert_eq(b.st, EXECUTOR_IDLE, "executor_run_until_idle with one pending task returned %s; "
                 "expected EXECUTOR_IDLE", executor_status_str(b.st));
    cr_assert_eq(probe_polls(&st), 1, "the task was polled %u times; expected once", probe_polls(&st));
    struct waker w = probe_take_stash(&st);
    waker_wake(&w);
    cr_assert_eq(executor_run_until_idle(ex), EXECUTOR_OK, "after the wake the task finishes: "
                 "executor_run_until_idle must then say EXECUTOR_OK");
    cr_assert_eq(probe_polls(&st), 2, "the task was polled %u times; expected 2", probe_polls(&st));
    join_handle_drop(jh);
    executor_free(ex);
    probe_destroy(&st);
}
