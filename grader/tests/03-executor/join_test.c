/* join_test.c - stage 03: the join handle: output, waker, detach, and the
 * races between the handle's waker and the task's completion. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "block_on.h"
#include "stage03.h"

LAB_SUITE(join, 10);
LAB_SUITE(join_race, 30);

static void expect_books_balanced(struct counting_waker *cw, const char *what)
{
    struct waker_counts c = counting_waker_counts(cw);
    cr_assert_eq(c.live, 1, "%s: the joiner's waker has %ld live references at the end (clones %u, "
                 "drops %u, wakes %u); expected 1, the test's own: %s", what, c.live, c.clones, c.drops,
                 c.wakes, c.live > 1 ? "a stored join waker was never dropped" :
                 "a join waker was dropped twice");
    counting_waker_free(cw);
}

/* ---- the joiner's waker ---------------------------------------------------------------- */

LAB_TEST(join, pending_then_ready_wakes_joiner, 10)
{
    struct executor *ex = new_executor();
    struct probe_stats t;
    probe_init(&t, step_stash_once, NULL);
    t.value = 7;
    struct join_handle *jh = spawn_probe(ex, &t, NULL);
    struct counting_waker *cw = counting_waker_new("joiner");
    struct waker w = counting_waker_get(cw);
    struct context cx = context_from_waker(&w);
    uint64_t out = 0;
    enum join_status js;
    cr_assert_eq(join_handle_poll(jh, &cx, &out, &js), POLL_PENDING, "join_handle_poll of a task "
                 "that has not run said Ready");
    cr_assert(state_of(jh) & TASK_JOIN_WAKER, "after a Pending join_handle_poll, JOIN_WAKER is not "
              "set (%s): the joiner's waker must be stored and published", state_str(state_of(jh)));
    cr_assert_eq(executor_run_until_idle(ex), EXECUTOR_IDLE, "run_until_idle with a pending task");
    cr_assert_eq(counting_waker_woken(cw), 0, "the joiner was woken although the task has not finished");
    struct waker s = probe_take_stash(&t);
    waker_wake(&s);
    cr_assert_eq(executor_run_until_idle(ex), EXECUTOR_OK, "the task did not finish after its wake");
    cr_assert_eq(counting_waker_woken(cw), 1, "the task completed and its joiner was woken %u times; "
                 "expected exactly once", counting_waker_woken(cw));
    cr_assert_eq(join_handle_poll(jh, &cx, &out, &js), POLL_READY, "join_handle_poll after completion "
                 "said Pending");
    cr_assert_eq(js, JOIN_OK, "a finished task's join handle says cancelled");
    cr_assert_eq(out, 7, "the join handle gave %llu; expected the output 7", (unsigned long long)out);
    join_handle_drop(jh);
    expect_books_balanced(cw, "a joiner woken at completion");
    executor_free(ex);
    probe_destroy(&t);
}

LAB_TEST(join, latest_joiner_waker_only, 10)
{
    struct executor *ex = new_executor();
    struct probe_stats t;
    probe_init(&t, step_stash_once, NULL);
    struct join_handle *jh = spawn_probe(ex, &t, NULL);
    struct counting_waker *a = counting_waker_new("first joiner"), *b = counting_waker_new("second joiner");
    struct waker wa = counting_waker_get(a), wb = counting_waker_get(b);
    struct context ca = context_from_waker(&wa), cb = context_from_waker(&wb);
    enum join_status js;
    cr_assert_eq(join_handle_poll(jh, &ca, NULL, &js), POLL_PENDING, "Ready before the task ran");
    cr_assert_eq(join_handle_poll(jh, &cb, NULL, &js), POLL_PENDING, "Ready before the task ran");
    cr_assert_eq(join_handle_poll(jh, &cb, NULL, &js), POLL_PENDING, "Ready before the task ran");
    cr_assert_eq(counting_waker_counts(a).live, 1, "the first joiner's waker is still held after a "
                 "newer one was registered: replace it (and drop it)");
    cr_assert_eq(counting_waker_counts(b).clones, 1, "polling the join handle twice with the same "
                 "waker cloned it %u times; the second poll should keep the stored one",
                 counting_waker_counts(b).clones);
    cr_assert_eq(executor_run_until_idle(ex), EXECUTOR_IDLE, "run_until_idle with a pending task");
    struct waker s = probe_take_stash(&t);
    waker_wake(&s);
    cr_assert_eq(executor_run_until_idle(ex), EXECUTOR_OK, "the task did not finish");
    cr_assert_eq(counting_waker_woken(a), 0, "the replaced joiner waker was woken");
    cr_assert_eq(counting_waker_woken(b), 1, "the latest joiner waker was woken %u times; expected 1",
                 counting_waker_woken(b));
    cr_assert_eq(join_handle_poll(jh, &cb, NULL, &js), POLL_READY, "Pending after completion");
    join_handle_drop(jh);
    expect_books_balanced(a, "a replaced joiner waker");
    expect_books_balanced(b, "the latest joiner waker");
    executor_free(ex);
    probe_destroy(&t);
}

/* The hook: the join handle is dropped inside the joiner's wake, that is,
 * while the completing thread is between COMPLETE and clearing JOIN_WAKER.
 * The completing thread must then drop the join waker (rule 4), and the join
 * handle the output (rules 5 and 6): each exactly once. */
struct drop_in_wake {
    struct join_handle *jh;
    bool dropped;
};

static void hook_drop_handle(struct counting_waker *cw, enum waker_event ev, unsigned nth, void *arg)
{
    (void)cw;
    (void)nth;
    struct drop_in_wake *d = arg;
    if ((ev == WAKER_EV_WAKE || ev == WAKER_EV_WAKE_BY_REF) && !d->dropped) {
        d->dropped = true;
        join_handle_drop(d->jh);
    }
}

static enum poll step_box_after_stash(struct probe_stats *st, unsigned nth, struct context *cx, uint64_t *out)
{
    if (nth == 1) {
        probe_stash(st, cx);
        return POLL_PENDING;
    }
    *out = box_new(st->value);
    return POLL_READY;
}

LAB_TEST(join, handle_dropped_inside_join_wake, 10)
{
    struct executor *ex = new_executor();
    struct counting_waker *cw = counting_waker_new("joiner");
    alloc_count_start();
    struct probe_stats t;
    probe_init(&t, step_box_after_stash, NULL);
    struct join_handle *jh = spawn_probe(ex, &t, box_drop_output);
    struct drop_in_wake d = { .jh = jh };
    counting_waker_set_hook(cw, hook_drop_handle, &d);
    struct waker w = counting_waker_get(cw);
    struct context cx = context_from_waker(&w);
    enum join_status js;
    cr_assert_eq(join_handle_poll(jh, &cx, NULL, &js), POLL_PENDING, "Ready before the task ran");
    cr_assert_eq(executor_run_until_idle(ex), EXECUTOR_IDLE, "run_until_idle with a pending task");
    struct waker s = probe_take_stash(&t);
    waker_wake(&s);
    cr_assert_eq(executor_run_until_idle(ex), EXECUTOR_OK, "the task did not finish");
    cr_assert(d.dropped, "the joiner was never woken at completion");
    cr_assert_eq(box_drops(), 1, "the task's output was dropped %u times when its join handle was "
                 "dropped during the joiner's wake; expected exactly once (by the join handle: "
                 "JOIN_INTEREST was set when the task completed)", box_drops());
    struct alloc_counts ac = alloc_count_stop();
    cr_assert_eq(ac.frees, ac.allocs, "%llu allocations, %llu frees: the task or its output leaked",
                 (unsigned long long)ac.allocs, (unsigned long long)ac.frees);
    expect_books_balanced(cw, "a join handle dropped inside the joiner's wake (the completing thread "
                          "owns the waker then, and must drop it)");
    executor_free(ex);
    probe_destroy(&t);
}

/* The hook: the task completes while the join handle is registering its
 * waker (inside the clone, before it can publish JOIN_WAKER). The handle must
 * notice COMPLETE and answer Ready: nobody will ever wake the waker it was
 * about to publish (rule 2). */
struct complete_in_clone {
    struct probe_stats *task;
    struct join_handle *jh;
    bool finished;
};

static void hook_complete_task(struct counting_waker *cw, enum waker_event ev, unsigned nth, void *arg)
{
    (void)cw;
    struct complete_in_clone *c = arg;
    if (ev != WAKER_EV_CLONE || nth != 1)
        return;
    struct waker s = probe_take_stash(c->task);
    waker_wake(&s); /* the executor, on its own thread, now completes the task */
    for (unsigned waited = 0; waited < RESCUE_MS && !join_handle_is_finished(c->jh); waited++)
        lab_sleep_ms(1);
    c->finished = join_handle_is_finished(c->jh);
}

LAB_TEST(join, completes_while_registering, 10)
{
    struct executor *ex = new_executor();
    struct probe_stats t;
    probe_init(&t, step_stash_once, NULL);
    t.value = 5;
    struct join_handle *jh = spawn_probe(ex, &t, NULL);
    struct bg_run b;
    bg_run_start(&b, ex);
    for (unsigned waited = 0; probe_polls(&t) == 0 && waited < RESCUE_MS; waited++)
        lab_sleep_ms(1);
    cr_assert_eq(probe_polls(&t), 1, "the running executor did not poll the task");
    struct counting_waker *cw = counting_waker_new("joiner");
    struct complete_in_clone c = { .task = &t, .jh = jh };
    counting_waker_set_hook(cw, hook_complete_task, &c);
    struct waker w = counting_waker_get(cw);
    struct context cx = context_from_waker(&w);
    uint64_t out = 0;
    enum join_status js = JOIN_CANCELLED;
    enum poll r = join_handle_poll(jh, &cx, &out, &js);
    cr_assert(bg_run_finish(&b, RESCUE_MS), "executor_run did not return after its only task finished");
    cr_assert(c.finished, "the task did not complete after its wake (executor on another thread)");
    cr_assert_eq(r, POLL_READY, "the task completed while join_handle_poll was storing its waker, and "
                 "join_handle_poll said Pending: nobody will ever wake that waker. Set JOIN_WAKER with "
                 "a CAS that fails when COMPLETE is set, and then read the output");
    cr_assert_eq(js, JOIN_OK, "the join handle says cancelled");
    cr_assert_eq(out, 5, "the join handle gave %llu; expected 5", (unsigned long long)out);
    join_handle_drop(jh);
    expect_books_balanced(cw, "a waker that arrived too late to be published (the join handle must "
                          "drop it)");
    executor_free(ex);
    probe_destroy(&t);
}

/* ---- detach ------------------------------------------------------------------------------ */

LAB_TEST(join, detached_output_dropped_once, 10)
{
    struct executor *ex = new_executor();
    alloc_count_start();
    struct probe_stats a, b, c;
    probe_init(&a, step_box_after_stash, NULL);
    probe_init(&b, step_box_after_stash, NULL);
    probe_init(&c, step_box_after_stash, NULL);
    c.value = 77;
    struct join_handle *ja = spawn_probe(ex, &a, box_drop_output);
    struct join_handle *jb = spawn_probe(ex, &b, box_drop_output);
    struct join_handle *jc = spawn_probe(ex, &c, box_drop_output);
    join_handle_drop(ja); /* detached before it ran */
    cr_assert_eq(executor_run_until_idle(ex), EXECUTOR_IDLE, "run_until_idle");
    struct waker w[3] = { probe_take_stash(&a), probe_take_stash(&b), probe_take_stash(&c) };
    for (int i = 0; i < 3; i++)
        waker_wake(&w[i]);
    cr_assert_eq(executor_run_until_idle(ex), EXECUTOR_OK, "the tasks did not finish");
    cr_assert_eq(box_drops(), 1, "a detached task finished and its output was dropped %u times; "
                 "expected exactly once, by the thread that completed it", box_drops());
    join_handle_drop(jb); /* complete, output never taken */
    cr_assert_eq(box_drops(), 2, "a join handle dropped after completion, without taking the output, "
                 "dropped it %u times in all; expected once", box_drops() - 1);
    uint64_t box = 0;
    enum join_status js;
    cr_assert_eq(join_handle_poll(jc, NULL, &box, &js), POLL_READY, "Pending after completion");
    join_handle_drop(jc);
    cr_assert_eq(box_drops(), 2, "a join handle dropped after its output was taken dropped the output "
                 "again: after join_handle_poll moved it out, it is the caller's");
    cr_assert_eq(box_value(box), 77, "the joined output is wrong");
    box_free(box);
    struct alloc_counts ac = alloc_count_stop();
    cr_assert_eq(ac.frees, ac.allocs, "%llu allocations, %llu frees: a task or an output leaked",
                 (unsigned long long)ac.allocs, (unsigned long long)ac.frees);
    executor_free(ex);
    probe_destroy(&a);
    probe_destroy(&b);
    probe_destroy(&c);
}

/* A task that joins another and reports how it ended. */
struct joiner {
    struct join_handle *child;
};

static enum poll joiner_poll(void *self, struct context *cx, void *out)
{
    struct joiner *j = self;
    uint64_t v = 0;
    enum join_status js;
    if (join_handle_poll(j->child, cx, &v, &js) == POLL_PENDING)
        return POLL_PENDING;
    join_handle_drop(j->child);
    *(uint64_t *)out = js == JOIN_CANCELLED ? 1000 : v;
    return POLL_READY;
}

static const struct future_vtable joiner_vt = FUTURE_VTABLE_INIT(struct joiner, sizeof(uint64_t), joiner_poll, NULL);

LAB_TEST(join, aborted_join_says_cancelled, 10)
{
    struct executor *ex = new_executor();
    struct probe_stats child;
    probe_init(&child, step_stash_forever, NULL);
    struct joiner j = { .child = spawn_probe(ex, &child, box_drop_output) };
    struct join_handle *parent = executor_spawn(ex, future_of(&joiner_vt, &j), NULL);
    cr_assert_not_null(parent, "executor_spawn returned NULL");
    cr_assert_eq(executor_run_until_idle(ex), EXECUTOR_IDLE, "run_until_idle");
    join_handle_abort(j.child);
    expect_run(ex, EXECUTOR_OK, "a parent joining an aborted child");
    uint64_t out = 0;
    enum join_status js;
    cr_assert_eq(join_handle_poll(parent, NULL, &out, &js), POLL_READY, "the parent never finished: "
                 "aborting a task must wake its joiner");
    cr_assert_eq(out, 1000, "the parent joined an aborted child and did not see JOIN_CANCELLED "
                 "(output %llu)", (unsigned long long)out);
    cr_assert_eq(probe_drops(&child), 1, "the aborted child's future was dropped %u times; expected once",
                 probe_drops(&child));
    cr_assert_eq(box_drops(), 0, "an aborted task has no output, yet drop_output was called");
    join_handle_drop(parent);
    executor_free(ex);
    probe_destroy(&child);
}

/* ---- across threads ------------------------------------------------------------------------ */

static enum poll step_yield_box(struct probe_stats *st, unsigned nth, struct context *cx, uint64_t *out)
{
    if (nth <= (unsigned)st->id) {
        waker_wake_by_ref(cx->waker);
        return POLL_PENDING;
    }
    *out = box_new(st->value);
    return POLL_READY;
}

LAB_TEST(join_race, block_on_join_from_other_thread, 20)
{
    const unsigned rounds = lab_scale(100, 5);
    uint64_t rng = lab_seed();
    for (unsigned r = 0; r < rounds; r++) {
        struct executor *ex = new_executor();
        struct probe_stats t;
        probe_init(&t, step_yield_box, NULL);
        t.id = (int)(lab_rand(&rng) % 4);
        t.value = r;
        struct join_handle *jh = spawn_probe(ex, &t, box_drop_output);
        struct bg_run b;
        bg_run_start(&b, ex);
        uint64_t box = 0;
        struct join_future jf;
        join_future_init(&jf, jh, &box);
        enum join_status js = JOIN_CANCELLED;
        block_on(join_future_as_future(&jf), &js); /* stage 02's block_on, on this thread */
        cr_assert(bg_run_finish(&b, RESCUE_MS), "executor_run did not return");
        cr_assert_eq(js, JOIN_OK, "round %u: the join handle said cancelled", r);
        cr_assert_eq(box_value(box), r, "round %u: joined the wrong output", r);
        box_free(box);
        join_handle_drop(jh);
        executor_free(ex);
        probe_destroy(&t);
    }
}

/* A thread keeps polling the join handle with two alternating counting
 * wakers while the executor completes the task, then drops it at a random
 * moment. Every waker reference and the output are accounted for. */
struct racer {
    struct join_handle *jh;
    struct counting_waker *cw[2];
    uint64_t seed;
    bool took;
    uint64_t box;
};

static void *racer_main(void *arg)
{
    struct racer *r = arg;
    uint64_t rng = r->seed;
    unsigned polls = (unsigned)(lab_rand(&rng) % 50);
    for (unsigned i = 0; i < polls && !r->took; i++) {
        struct waker w = counting_waker_get(r->cw[i & 1]);
        struct context cx = context_from_waker(&w);
        enum join_status js;
        if (join_handle_poll(r->jh, &cx, &r->box, &js) == POLL_READY)
            r->took = (js == JOIN_OK);
        if (lab_rand(&rng) & 1)
            sched_yield();
    }
    join_handle_drop(r->jh);
    return NULL;
}

LAB_TEST(join_race, waker_and_completion_race, 30)
{
    const unsigned rounds = lab_scale(300, 10);
    uint64_t rng = lab_seed();
    for (unsigned k = 0; k < rounds; k++) {
        struct executor *ex = new_executor();
        unsigned before = box_drops();
        struct probe_stats t;
        probe_init(&t, step_yield_box, NULL);
        t.id = (int)(lab_rand(&rng) % 3);
        struct racer r = { .seed = lab_rand(&rng) };
        r.cw[0] = counting_waker_new("joiner A");
        r.cw[1] = counting_waker_new("joiner B");
        r.jh = spawn_probe(ex, &t, box_drop_output);
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, racer_main, &r), 0, "could not start a thread");
        struct bg_run b;
        bg_run_start(&b, ex);
        cr_assert(bg_run_finish(&b, RESCUE_MS), "executor_run did not return");
        pthread_join(th, NULL);
        unsigned drops = box_drops() - before;
        if (r.took) {
            cr_assert_eq(drops, 0, "round %u: the output was taken by the join handle and also "
                         "dropped", k);
            box_free(r.box);
        } else {
            cr_assert_eq(drops, 1, "round %u: the join handle was dropped without taking the output, "
                         "and the output was dropped %u times; expected exactly once (by the join "
                         "handle if JOIN_INTEREST was set at completion, else by the task)", k, drops);
        }
        for (int i = 0; i < 2; i++) {
            struct waker_counts c = counting_waker_counts(r.cw[i]);
            cr_assert_eq(c.live, 1, "round %u: a joiner waker has %ld live references after the "
                         "join handle was dropped (clones %u, drops %u, wakes %u); expected 1: the "
                         "waker stored in the task leaked, or was dropped twice", k, c.live, c.clones,
                         c.drops, c.wakes);
            counting_waker_free(r.cw[i]);
        }
        executor_free(ex);
        probe_destroy(&t);
    }
}
