/* tick_test.c - stage 03: the driver tick (executor.h contract 6).
 *
 * Tasks that are always ready must not keep the driver from its turn: run
 * polls the driver with a zero timeout at least every EXECUTOR_DRIVER_INTERVAL
 * (61) task polls. The executor parks on a virtual clock (common/testing),
 * which counts every park and the timeout it was given, so the test counts
 * task polls between two driver turns exactly: no milliseconds, no luck. */
#include <stdio.h>
#include <stdlib.h>

#include "stage03.h"
#include "virtual_clock.h"

LAB_SUITE(tick, 10);

/* What contract 6 promises, in task polls. */
#define TICK_MAX 61u

struct spin_book {
    struct virtual_clock *vc;
    unsigned polls_each;  /* a spinner is Ready at this poll */
    unsigned polls;       /* task polls so far, every spinner together */
    uint64_t parks_seen;  /* the clock's park count at the last poll */
    unsigned since_park;  /* polls since the park count last moved */
    unsigned worst;       /* the longest run of polls without a park */
    uint64_t slept_at;    /* virtual time at the first poll */
    bool slept;           /* virtual time moved: a tick that waited */
};

/* Wakes itself by reference and says Pending, polls_each - 1 times: always
 * ready, as a yield_now loop or any busy future. */
static enum poll step_spin(struct probe_stats *st, unsigned nth, struct context *cx, uint64_t *out)
{
    struct spin_book *b = st->arg;
    uint64_t parks = virtual_clock_parks(b->vc);
    if (b->polls == 0)
        b->slept_at = virtual_clock_now(b->vc);
    else if (virtual_clock_now(b->vc) != b->slept_at)
        b->slept = true;
    b->polls++;
    if (parks != b->parks_seen) {
        b->parks_seen = parks;
        b->since_park = 0;
    }
    if (++b->since_park > b->worst)
        b->worst = b->since_park;
    if (nth >= b->polls_each) {
        *out = nth;
        return POLL_READY;
    }
    waker_wake_by_ref(cx->waker);
    return POLL_PENDING;
}

static void check_book(struct spin_book *b, unsigned want_polls, const char *how)
{
    cr_assert_eq(b->polls, want_polls, "the spinners were polled %u times in all; expected %u",
                 b->polls, want_polls);
    /* since_park counts the poll that saw a new park as the first of a run:
     * a driver turn after every 61st poll gives runs of 61 at most. */
    cr_assert_leq(b->worst, TICK_MAX,
                  "%s: %u task polls ran one after another without a single poll of the driver; "
                  "while tasks stay ready, the driver must get a zero-timeout turn at least every "
                  "EXECUTOR_DRIVER_INTERVAL = 61 task polls, or a due timer or a readable socket "
                  "waits for as long as the busy tasks keep running (executor.h contract 6)",
                  how, b->worst);
    cr_assert_not(b->slept, "%s: virtual time moved while tasks were ready: the driver tick must "
                  "poll with a zero timeout (it never waits), not park with a timeout (executor.h contract 6)", how);
    cr_assert_eq(virtual_clock_last_timeout(b->vc), 0, "%s: the last park had a timeout of %lld ns; "
                 "the tick polls the driver with a zero timeout", how,
                 (long long)virtual_clock_last_timeout(b->vc));
}

LAB_TEST(tick, one_spinner_run, 10)
{
    struct virtual_clock *vc = virtual_clock_new(0);
    cr_assert_not_null(vc, "out of memory");
    struct executor *ex = executor_new(virtual_clock_driver(vc));
    cr_assert_not_null(ex, "executor_new returned NULL");
    struct spin_book b = { .vc = vc, .polls_each = 1000 };
    struct probe_stats st;
    probe_init(&st, step_spin, &b);
    struct join_handle *jh = spawn_probe(ex, &st, NULL);
    expect_run(ex, EXECUTOR_OK, "one task that wakes itself 999 times");
    check_book(&b, 1000, "executor_run with one task that wakes itself");
    cr_assert_geq(virtual_clock_parks(vc), 1000 / TICK_MAX,
                  "the driver was polled %llu times in 1000 task polls; at least %u expected",
                  (unsigned long long)virtual_clock_parks(vc), 1000 / TICK_MAX);
    join_handle_drop(jh);
    executor_free(ex);
    probe_destroy(&st);
    virtual_clock_free(vc);
}

LAB_TEST(tick, three_spinners_until_idle, 10)
{
    struct virtual_clock *vc = virtual_clock_new(0);
    cr_assert_not_null(vc, "out of memory");
    struct executor *ex = executor_new(virtual_clock_driver(vc));
    cr_assert_not_null(ex, "executor_new returned NULL");
    struct spin_book b = { .vc = vc, .polls_each = 400 };
    struct probe_stats st[3];
    struct join_handle *jh[3];
    for (int i = 0; i < 3; i++) {
        probe_init(&st[i], step_spin, &b);
        jh[i] = spawn_probe(ex, &st[i], NULL);
    }
    cr_assert_eq(executor_run_until_idle(ex), EXECUTOR_OK,
                 "run_until_idle with three tasks that each wake themselves 399 times did not finish them");
    check_book(&b, 1200, "executor_run_until_idle with three tasks that wake themselves");
    for (int i = 0; i < 3; i++) {
        join_handle_drop(jh[i]);
        probe_destroy(&st[i]);
    }
    executor_free(ex);
    virtual_clock_free(vc);
}

LAB_TEST(tick, block_on_spinning_root, 10)
{
    struct virtual_clock *vc = virtual_clock_new(0);
    cr_assert_not_null(vc, "out of memory");
    struct executor *ex = executor_new(virtual_clock_driver(vc));
    cr_assert_not_null(ex, "executor_new returned NULL");
    struct spin_book b = { .vc = vc, .polls_each = 500 };
    struct probe_stats *stp = malloc(sizeof *stp);
    cr_assert_not_null(stp, "out of memory");
    probe_init(stp, step_spin, &b);
    uint64_t out = 0;
    enum executor_status s = executor_block_on(ex, probe_future(&stp), &out);
    cr_assert_eq(s, EXECUTOR_OK, "block_on of a root that wakes itself 499 times returned %s",
                 executor_status_str(s));
    cr_assert_eq(out, 500, "the root's output was %llu; expected 500", (unsigned long long)out);
    check_book(&b, 500, "executor_block_on with a root that wakes itself");
    executor_free(ex);
    probe_destroy(stp);
    free(stp);
    virtual_clock_free(vc);
}
