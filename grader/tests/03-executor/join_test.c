/* join_test.c - stage 03: the join handle: output, waker, detach, and the
 * races between the handle's waker and the task's completion. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
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
                 c.wakes, c.live > 1 ? "a stored join waker was never dropped (join.h rule 4: the woken waker "
                 "stays in the slot, and the handle drops it)" : "a join waker was dropped twice (join.h rule 4)");
    counting_waker_free(cw);
}

/* ---- the joiner's waker ---------------------------------------------------------------- */

/* Registers first's waker (Pending), lets the task complete (first is woken),
 * then polls again with then's waker, the same one or another: Ready with the
 * output, and every waker's books balance once the handle is dropped. */
static void woken_then_polled(struct counting_waker *first, struct counting_waker *then, const char *what)
{
    struct executor *ex = new_executor();
    struct probe_stats t;
    probe_init(&t, step_stash_once, NULL);
    t.value = 7;
    struct join_handle *jh = spawn_probe(ex, &t, NULL);
    struct waker w1 = counting_waker_get(first), w2 = counting_waker_get(then);
    struct context c1 = context_from_waker(&w1), c2 = context_from_waker(&w2);
    uint64_t out = 0;
    enum join_status js = JOIN_CANCELLED;
    cr_assert_eq(join_handle_poll(jh, &c1, &out, &js), POLL_PENDING, "join_handle_poll of a task "
                 "that has not run said Ready");
    cr_assert(state_of(jh) & TASK_JOIN_WAKER, "after a Pending join_handle_poll, JOIN_WAKER is not "
              "set (%s): the joiner's waker must be stored and published", state_str(state_of(jh)));
    cr_assert_eq(executor_run_until_idle(ex), EXECUTOR_IDLE, "run_until_idle with a pending task");
    cr_assert_eq(counting_waker_woken(first), 0, "the joiner was woken although the task has not finished");
    struct waker s = probe_take_stash(&t);
    waker_wake(&s);
    cr_assert_eq(executor_run_until_idle(ex), EXECUTOR_OK, "the task did not finish after its wake");
    cr_assert_eq(counting_waker_woken(first), 1, "the task completed and its joiner was woken %u times; "
                 "expected exactly once", counting_waker_woken(first));
    cr_assert_eq(join_handle_poll(jh, &c2, &out, &js), POLL_READY, "join_handle_poll after completion "
                 "(with %s) said Pending", first == then ? "the same waker" : "a new waker");
    cr_assert_eq(js, JOIN_OK, "a finished task's join handle says cancelled");
    cr_assert_eq(out, 7, "the join handle gave %llu; expected the output 7", (unsigned long long)out);
    join_handle_drop(jh);
    expect_books_balanced(first, what);
    if (then != first)
        expect_books_balanced(then, "a waker given to join_handle_poll after completion (it must not "
                              "stay stored: nobody will ever wake it)");
    executor_free(ex);
    probe_destroy(&t);
}

LAB_TEST(join, pending_then_ready_wakes_joiner, 10)
{
    struct counting_waker *cw = counting_waker_new("joiner");
    woken_then_polled(cw, cw, "a joiner woken at completion");
}

/* The task completes and wakes the stored waker A; then the handle is polled
 * with another waker B. The completing thread woke A by reference and left it
 * in the slot (rule 4): the slot is the handle's again, holding a woken waker
 * the handle must drop. A poll that registered B now would write over A, and
 * A would leak: a handle that finds COMPLETE set registers nothing. */
LAB_TEST(join, new_waker_after_completion, 10)
{
    struct counting_waker *a = counting_waker_new("joiner before completion");
    struct counting_waker *b = counting_waker_new("joiner after completion");
    woken_then_polled(a, b, "the waker registered before completion, woken by the completing thread "
                      "and left in the slot for the join handle to drop (rule 4); a poll after "
                      "completion must not write a new waker over it");
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
                 "newer one was registered (join.h rule 3: the latest waker replaces the old one)");
    cr_assert_eq(counting_waker_counts(b).clones, 1, "polling the join handle twice with the same "
                 "waker cloned it %u times, where the first clone was still the right waker",
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
    alloc_count_start(); /* the executor too: its free gives back the cells it kept (task.h) */
    struct executor *ex = new_executor();
    struct counting_waker *cw = counting_waker_new("joiner");
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
    expect_books_balanced(cw, "a join handle dropped inside the joiner's wake (the completing thread "
                          "owns the waker then, and must drop it)");
    executor_free(ex);
    struct alloc_counts ac = alloc_count_stop();
    cr_assert_eq(ac.frees, ac.allocs, "%llu allocations, %llu frees: the task or its output leaked",
                 (unsigned long long)ac.allocs, (unsigned long long)ac.frees);
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
    /* the stash, not the poll count: a poll is counted as it begins, and the
     * hook must find the task's waker there to wake it */
    bool stashed = probe_wait_stashed(&t, RESCUE_MS);
    cr_assert(stashed && probe_polls(&t) == 1, "the running executor did not poll the task");
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
                 "join_handle_poll said Pending: nobody will ever wake that waker, and the output was "
                 "there to read (join.h rule 2: a store that meets COMPLETE ends in the output)");
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
    alloc_count_start(); /* the executor too: its free gives back the cells it kept (task.h) */
    struct executor *ex = new_executor();
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
                 "expected exactly once, by the thread that completed it (join.h rule 5)", box_drops());
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
    executor_free(ex);
    struct alloc_counts ac = alloc_count_stop();
    cr_assert_eq(ac.frees, ac.allocs, "%llu allocations, %llu frees: a task or an output leaked (an untaken output is the "
                 "completer's to drop, join.h rule 5; the last reference frees the task, task.h contract 4)",
                 (unsigned long long)ac.allocs, (unsigned long long)ac.frees);
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
        struct join_future join;
        join_future_init(&join, jh, &box);
        enum join_status js = JOIN_CANCELLED;
        block_on(join_future_as_future(&join), &js); /* stage 02's block_on, on this thread */
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

/* The gap between join_handle_poll's first look at the state word and the
 * registration's own look. If the completing thread does the whole of rule 4
 * in that gap (COMPLETE, wake the stored waker by reference, clear
 * JOIN_WAKER), the registration finds JOIN_WAKER clear and COMPLETE set: the
 * slot holds the woken waker, the handle's to drop, and writing a new waker
 * there loses it. The gap is a few instructions wide, so the test only makes
 * it likely: one poller thread, reused for every round, polls the handle in a
 * tight loop (in three rounds of four with the stored waker itself, which
 * costs the registration no clone, so a good share of each poll lies between
 * the two looks; else alternating two wakers) while the test's thread,
 * which owns the executor, completes the task at a random moment. Each round
 * is a fresh task; the rounds stop after a fixed count or about a second,
 * whichever comes first. */
struct gap_poller {
    pthread_t thread;
    struct counting_waker *cw[2];
    struct join_handle *jh;  /* this round's, written before `go` */
    bool alternate;          /* this round: alternate the two wakers */
    atomic_uint go;          /* test -> poller: round n's handle is ready */
    atomic_uint armed;       /* poller -> test: round n's first poll is done */
    atomic_uint done;        /* poller -> test: round n's handle was Ready and dropped */
    atomic_bool quit;
    /* round n's results, written before `done` */
    enum poll first;
    bool gave_up;            /* still Pending RESCUE_MS after the task completed */
    enum join_status js;
    uint64_t out;
};

/* Spins (yielding now and then) until *word == want, or ms pass. */
static bool await_round(atomic_uint *word, unsigned want, unsigned ms)
{
    uint64_t deadline = monotonic_ns() + (uint64_t)ms * MS_NS;
    for (unsigned spins = 0; atomic_load_explicit(word, memory_order_acquire) != want; spins++) {
        /* acquire: pairs with the other side's release: its round is visible */
        if (spins % 64 == 63) {
            sched_yield();
            if (monotonic_ns() > deadline)
                return false;
        }
    }
    return true;
}

static void *gap_poller_main(void *arg)
{
    struct gap_poller *p = arg;
    for (unsigned n = 1;; n++) {
        for (unsigned spins = 0; atomic_load_explicit(&p->go, memory_order_acquire) != n; spins++) {
            /* acquire: pairs with the test's release of `go`: jh is visible */
            if (atomic_load_explicit(&p->quit, memory_order_relaxed))
                return NULL;
            if (spins % 64 == 63)
                sched_yield();
        }
        struct waker w[2] = { counting_waker_get(p->cw[0]), counting_waker_get(p->cw[1]) };
        struct context cx[2] = { context_from_waker(&w[0]), context_from_waker(&w[1]) };
        enum join_status js = JOIN_CANCELLED;
        uint64_t out = 0;
        p->gave_up = false;
        p->first = join_handle_poll(p->jh, &cx[0], &out, &js);
        atomic_store_explicit(&p->armed, n, memory_order_release); /* pairs with await_round's acquire */
        if (p->first == POLL_PENDING) {
            uint64_t deadline = 0;
            for (unsigned i = 1;; i++) {
                if (join_handle_poll(p->jh, &cx[p->alternate ? i & 1 : 0], &out, &js) == POLL_READY)
                    break;
                if (i % 1024 == 0) {
                    /* A handle that never says Ready: give up RESCUE_MS after completion. */
                    if (!join_handle_is_finished(p->jh))
                        continue;
                    if (!deadline)
                        deadline = monotonic_ns() + (uint64_t)RESCUE_MS * MS_NS;
                    else if (monotonic_ns() > deadline) {
                        p->gave_up = true;
                        break;
                    }
                }
            }
        }
        p->js = js;
        p->out = out;
        join_handle_drop(p->jh);
        atomic_store_explicit(&p->done, n, memory_order_release); /* pairs with await_round's acquire */
    }
}

LAB_TEST(join_race, register_after_completion, 30)
{
    const unsigned rounds = lab_scale(100000, 100);
    const uint64_t budget_ns = 1000 * MS_NS; /* the rounds stop here, whatever the count */
    uint64_t rng = lab_seed();
    struct executor *ex = new_executor();
    struct gap_poller p = { .cw = { counting_waker_new("joiner A"), counting_waker_new("joiner B") } };
    atomic_init(&p.go, 0);
    atomic_init(&p.armed, 0);
    atomic_init(&p.done, 0);
    atomic_init(&p.quit, false);
    cr_assert_eq(pthread_create(&p.thread, NULL, gap_poller_main, &p), 0, "could not start a thread");
    uint64_t start = monotonic_ns();
    unsigned k;
    for (k = 0; k < rounds && monotonic_ns() - start < budget_ns; k++) {
        struct probe_stats t;
        probe_init(&t, step_stash_once, NULL);
        t.value = k;
        p.jh = spawn_probe(ex, &t, NULL);
        p.alternate = lab_rand(&rng) % 4 == 0;
        cr_assert_eq(executor_run_until_idle(ex), EXECUTOR_IDLE, "round %u: run_until_idle with a "
                     "pending task", k);
        struct waker s = probe_take_stash(&t);
        atomic_store_explicit(&p.go, k + 1, memory_order_release); /* pairs with the poller's acquire */
        cr_assert(await_round(&p.armed, k + 1, RESCUE_MS), "round %u: the poller's first "
                  "join_handle_poll did not return", k);
        cr_assert_eq(p.first, POLL_PENDING, "round %u: join_handle_poll said Ready before the task "
                     "completed", k);
        uint64_t spin = lab_rand(&rng) % 1024;
        for (volatile uint64_t i = 0; i < spin; i++)
            ;
        waker_wake(&s);
        cr_assert_eq(executor_run_until_idle(ex), EXECUTOR_OK, "round %u: the task did not finish "
                     "after its wake", k);
        cr_assert(await_round(&p.done, k + 1, 2 * RESCUE_MS), "round %u: the poller's loop did not "
                  "end: join_handle_poll kept saying Pending after the task completed", k);
        cr_assert_not(p.gave_up, "round %u: the task completed and join_handle_poll, polled again "
                      "and again for %u ms, kept saying Pending", k, RESCUE_MS);
        cr_assert_eq(p.js, JOIN_OK, "round %u: the join handle says cancelled", k);
        cr_assert_eq(p.out, k, "round %u: the join handle gave %llu; expected %u", k,
                     (unsigned long long)p.out, k);
        for (int i = 0; i < 2; i++) {
            struct waker_counts c = counting_waker_counts(p.cw[i]);
            cr_assert_eq(c.live, 1, "round %u: %s has %ld live references after the join handle "
                         "was dropped (clones %u, drops %u, wakes %u); expected 1. The task completed "
                         "while the handle was being polled, and a waker the completing thread had "
                         "already woken was written over or kept (join.h rules 2 and 4: the woken waker "
                         "stays for the handle to drop); the next hint: make hint STAGE=3 ITEM=join-race",
                         k, counting_waker_label(p.cw[i]), c.live, c.clones, c.drops, c.wakes);
        }
        probe_destroy(&t);
    }
    atomic_store_explicit(&p.quit, true, memory_order_relaxed);
    pthread_join(p.thread, NULL);
    lab_note("%u rounds in %.2f s", k, (double)(monotonic_ns() - start) / 1e9);
    for (int i = 0; i < 2; i++)
        counting_waker_free(p.cw[i]);
    executor_free(ex);
}

/* The last reference given back by a thread that never synchronised with
 * the one that read the task last: a joiner thread takes the output out of
 * the task (a plain read of the task's memory) and drops its handle; then
 * this thread, which only ever saw a relaxed flag from it, drops the last
 * waker of the task, and frees it. Nothing orders the joiner's read before
 * the free but the reference count: the decrement that reaches zero must
 * acquire what every earlier one released (task_state.h: acq_rel), or the
 * free is a data race with that read. ThreadSanitizer's lane judges it
 * (the races item); elsewhere it runs as a plain check of the output. */
LAB_SUITE(free_race, 10);

struct held_waker_task {
    struct waker *held;
    uint64_t value;
};

static enum poll held_waker_poll(void *self, struct context *cx, void *out)
{
    struct held_waker_task *f = self;
    *f->held = waker_clone(cx->waker); /* +1: outlives the task's completion */
    *(uint64_t *)out = f->value;
    return POLL_READY;
}
static const struct future_vtable held_waker_vt =
    FUTURE_VTABLE_INIT(struct held_waker_task, sizeof(uint64_t), held_waker_poll, NULL);

struct late_joiner {
    struct join_handle *jh;
    atomic_int *run_done, *joined; /* relaxed only: no ordering between the two threads */
    uint64_t got;
    enum join_status js;
};

static void *late_joiner_main(void *arg)
{
    struct late_joiner *j = arg;
    while (!atomic_load_explicit(j->run_done, memory_order_relaxed))
        sched_yield();
    struct waker nw = noop_waker();
    struct context cx = context_from_waker(&nw);
    while (join_handle_poll(j->jh, &cx, &j->got, &j->js) == POLL_PENDING)
        sched_yield();
    join_handle_drop(j->jh);
    atomic_store_explicit(j->joined, 1, memory_order_relaxed);
    return NULL;
}

LAB_TEST(free_race, last_reference_dropped_after_an_unsynchronised_join, 10)
{
    struct executor *ex = new_executor();
    struct waker held;
    struct held_waker_task f = { .held = &held, .value = 4242 };
    struct join_handle *jh = executor_spawn(ex, future_of(&held_waker_vt, &f), NULL);
    cr_assert_not_null(jh, "executor_spawn returned NULL");
    atomic_int run_done, joined;
    atomic_init(&run_done, 0);
    atomic_init(&joined, 0);
    struct late_joiner j = { .jh = jh, .run_done = &run_done, .joined = &joined, .js = JOIN_CANCELLED };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, late_joiner_main, &j), 0, "pthread_create failed");
    enum executor_status st = executor_run(ex);
    atomic_store_explicit(&run_done, 1, memory_order_relaxed);
    while (!atomic_load_explicit(&joined, memory_order_relaxed))
        sched_yield();
    waker_drop(&held); /* the last reference: the task is freed here */
    pthread_join(th, NULL);
    executor_free(ex);
    cr_assert_eq(st, EXECUTOR_OK, "executor_run ended with %s", executor_status_str(st));
    cr_assert_eq(j.js, JOIN_OK, "the join handle said cancelled for a task that completed");
    cr_assert_eq(j.got, 4242u, "joined %llu, not the task's output 4242", (unsigned long long)j.got);
}
