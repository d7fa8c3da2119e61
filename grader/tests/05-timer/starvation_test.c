/* starvation_test.c - stage 05: timers fire beside tasks that never stop
 * being ready (time_driver.h contract 5, executor.h contract 6).
 *
 * An executor parks, and so fires timers, only when nothing is ready. A task
 * that wakes itself on every poll keeps something ready for ever; the timers
 * are then fired by the executor's driver tick, a zero-timeout park at least
 * every 61 task polls. Everything runs in virtual time: the spinner moves
 * the clock by 100 us per poll (its "work"), so the test counts polls, not
 * milliseconds, and is exact on any machine. */
#include "stage05.h"

LAB_SUITE(starvation, 10);

#define STEP_NS (MS_NS / 10)   /* virtual time one spinner poll takes */
#define TICK_POLLS 61u         /* executor.h contract 6 */
#define GIVE_UP 5000u          /* the spinner stops here, fired or not */
#define NSLEEPS 3

struct book {
    struct virtual_clock *vc;
    unsigned spins;               /* spinner polls so far */
    unsigned woke_at[NSLEEPS];    /* spins when sleep i finished (0: not yet) */
    uint64_t woke_ns[NSLEEPS];    /* the time driver's now() then */
    unsigned done;                /* sleeps finished */
    bool stop_when_done;          /* the spinner stops once every sleep finished */
};

struct spinner {
    struct book *b;
};

static enum poll spinner_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct spinner *s = self;
    struct book *b = s->b;
    b->spins++;
    virtual_clock_advance(b->vc, STEP_NS); /* this poll's work takes 100 us */
    if (b->spins >= GIVE_UP || (b->stop_when_done && b->done == NSLEEPS))
        return POLL_READY;
    waker_wake_by_ref(cx->waker); /* still busy: ready again at once */
    return POLL_PENDING;
}

static const struct future_vtable spinner_vt = FUTURE_VTABLE_INIT(struct spinner, 0, spinner_poll, NULL);

struct noted_sleep {
    struct sleep sleep;
    struct book *b;
    int id;
};

static enum poll noted_sleep_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct noted_sleep *ns = self;
    if (sleep_poll(&ns->sleep, cx) == POLL_PENDING)
        return POLL_PENDING;
    ns->b->woke_at[ns->id] = ns->b->spins;
    ns->b->woke_ns[ns->id] = time_driver_now(ns->sleep.td);
    ns->b->done++;
    return POLL_READY;
}

static void noted_sleep_drop(void *self)
{
    struct noted_sleep *ns = self;
    sleep_drop(&ns->sleep);
}

static const struct future_vtable noted_sleep_vt =
    FUTURE_VTABLE_INIT(struct noted_sleep, 0, noted_sleep_poll, noted_sleep_drop);

static void run_beside_spinner(bool stop_when_done)
{
    struct vstack s;
    vstack_new(&s);
    struct book b = { .vc = s.vc, .stop_when_done = stop_when_done };
    static const uint64_t after_ms[NSLEEPS] = { 10, 25, 40 };
    /* the sleeps first: their first polls register the timers at ORIGIN_NS */
    for (int i = 0; i < NSLEEPS; i++) {
        struct noted_sleep ns = { .sleep = sleep_until(s.td, ORIGIN_NS + after_ms[i] * MS_NS), .b = &b, .id = i };
        struct join_handle *h = executor_spawn(s.ex, future_of(&noted_sleep_vt, &ns), NULL);
        cr_assert_not_null(h, "spawn failed");
        join_handle_drop(h);
    }
    struct spinner sp = { .b = &b };
    struct join_handle *h = executor_spawn(s.ex, future_of(&spinner_vt, &sp), NULL);
    cr_assert_not_null(h, "spawn failed");
    join_handle_drop(h);
    enum executor_status st = executor_run(s.ex);
    cr_assert_eq(st, EXECUTOR_OK, "run ended with %s", executor_status_str(st));
    cr_assert_eq(b.done, NSLEEPS, "%u of %d sleeps finished", b.done, NSLEEPS);
    for (int i = 0; i < NSLEEPS; i++) {
        /* due after spinner poll `due`; fired at the next driver tick (at
         * most 61 task polls later), then queued behind the spinner */
        unsigned due = (unsigned)(after_ms[i] * MS_NS / STEP_NS);
        unsigned bound = due + TICK_POLLS + 2;
        cr_assert_geq(b.woke_ns[i], ORIGIN_NS + after_ms[i] * MS_NS,
                      "a %llu ms sleep finished early, at +%llu ns", (unsigned long long)after_ms[i],
                      (unsigned long long)(b.woke_ns[i] - ORIGIN_NS));
        cr_assert_leq(b.woke_at[i], bound,
                      "a %llu ms sleep beside a task that wakes itself on every poll (100 us of virtual "
                      "work each) finished after %u of its polls (%.1f ms); its deadline passed at poll %u, "
                      "so it was due at the executor's next driver tick, %u polls later at most: at most "
                      "%u polls expected. A timer fires in a park of the time driver, and while a task "
                      "stays ready the executor's only parks are its driver ticks (executor.h contract 6): "
                      "did those zero-timeout parks reach the wheel, and did they fire what was due "
                      "(time_driver.h contract 5)?",
                      (unsigned long long)after_ms[i], b.woke_at[i],
                      (double)(b.woke_ns[i] - ORIGIN_NS) / (double)MS_NS, due, TICK_POLLS, bound);
    }
    vstack_free(&s);
}

/* The spinner runs on after the sleeps are done (until GIVE_UP). */
LAB_TEST(starvation, sleeps_beside_a_spinner, 10) { run_beside_spinner(false); }

/* The spinner stops as soon as every sleep finished: if the timers never
 * fire while it runs, it runs to GIVE_UP and the bound fails. */
LAB_TEST(starvation, spinner_waits_for_the_sleeps, 10) { run_beside_spinner(true); }
