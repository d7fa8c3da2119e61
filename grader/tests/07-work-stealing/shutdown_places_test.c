/* shutdown_places_test.c - stage 07: ws_runtime_free with tasks in each
 * place a task can be that the existing shutdown test (sched_test.c:
 * injector, long polls, outside wakers) does not reach: a worker's deque,
 * its LIFO slot, and a timer, with a worker parked in the time driver.
 *
 * Every test frees the runtime and checks the books itself (each future
 * dropped once, join handles cancelled, allocations == frees); the rubric
 * runs them under Valgrind, which names the allocation site of a leak. */
#include <stdlib.h>
#include <string.h>

#include "join_checks.h"
#include "parker.h"
#include "sleep.h"
#include "stage07.h"
#include "time_driver.h"

LAB_SUITE(shutdown_at, 20);

/* ---- a deque and a LIFO slot, both full, while both workers are in a long poll ---- */

enum { CHILDREN = 16 }; /* far below DEQUE_CAPACITY: they stay in the deque */

struct scene {
    struct gate release;  /* opened once ws_runtime_free has begun */
    atomic_uint blocked;  /* tasks inside their long poll */
    struct slot parked;   /* the waker of the task B puts in the LIFO slot */
};

static enum poll step_ready(void *arg, struct context *cx, unsigned nth)
{
    (void)arg;
    (void)cx;
    (void)nth;
    return POLL_READY; /* never polled: these children stay queued */
}

static enum poll step_park(void *arg, struct context *cx, unsigned nth)
{
    (void)nth;
    slot_store(arg, cx);
    return POLL_PENDING;
}

/* A: holds its worker in one long poll, so nobody steals B's queues. */
static enum poll step_hold(void *arg, struct context *cx, unsigned nth)
{
    (void)cx;
    (void)nth;
    struct scene *sc = arg;
    atomic_fetch_add(&sc->blocked, 1);
    gate_wait(&sc->release, RESCUE_MS);
    return POLL_PENDING; /* and then forgotten */
}

/* B: on the other worker, fills its deque (spawns) and its LIFO slot (a wake
 * from inside a task), then holds that worker too. */
static enum poll step_fill(void *arg, struct context *cx, unsigned nth)
{
    (void)cx;
    struct scene *sc = arg;
    if (nth == 1) {
        struct ws_runtime *rt = ws_current();
        for (int i = 0; i < CHILDREN; i++) {
            struct join_handle *jh = spawn_step(rt, step_ready, NULL);
            join_handle_drop(jh);
        }
        cr_assert(slot_wake(&sc->parked), "the parked task's waker was not there");
    }
    atomic_fetch_add(&sc->blocked, 1);
    gate_wait(&sc->release, RESCUE_MS);
    return POLL_PENDING;
}

static bool one_blocked(void *arg) { return atomic_load(&((struct scene *)arg)->blocked) >= 1; }
static bool two_blocked(void *arg) { return atomic_load(&((struct scene *)arg)->blocked) >= 2; }

static void *release_later(void *arg)
{
    lab_sleep_ms(30);
    gate_open(arg);
    return NULL;
}

/* What a join handle left Pending after ws_runtime_free breaks. */
#define WS_FREE_CANCELS "ws_runtime_free cancels every task it drops (runtime.h contract 6)"

static void expect_books(unsigned spawned, const char *where)
{
    cr_assert_eq(step_drops(), spawned, "%u futures were dropped at shutdown, %u were spawned, with tasks %s: "
                 "ws_runtime_free must drop every task exactly once (runtime.h, contract 6)", step_drops(), spawned,
                 where);
    struct alloc_counts c = alloc_count_stop();
    cr_assert_eq(c.allocs, c.frees, "%llu allocations but %llu frees after ws_runtime_free with tasks %s: a queue "
                 "entry there was never given back, so its task was never freed (runtime.h contract 6)",
                 (unsigned long long)c.allocs,
                 (unsigned long long)c.frees, where);
}

LAB_TEST(shutdown_at, deque_and_lifo_slot, 20)
{
    step_drops_reset();
    alloc_count_start();
    struct ws_runtime *rt = new_runtime(2);
    struct scene sc;
    memset(&sc, 0, sizeof sc);
    gate_init(&sc.release);
    slot_init(&sc.parked);
    unsigned spawned = 0;
    /* C: polled once, then pending on a waker the test holds */
    struct join_handle *c = spawn_step(rt, step_park, &sc.parked);
    spawned++;
    cr_assert(wait_until(slot_filled, &sc.parked, RESCUE_MS), "the first task was never polled");
    /* A on one worker (after C's poll: a worker runs one task at a time) */
    join_handle_drop(spawn_step(rt, step_hold, &sc));
    spawned++;
    cr_assert(wait_until(one_blocked, &sc, RESCUE_MS), "the blocking task never started");
    /* B on the other: CHILDREN in its deque, C in its LIFO slot */
    struct join_handle *b = spawn_step(rt, step_fill, &sc);
    spawned += 1 + CHILDREN;
    cr_assert(wait_until(two_blocked, &sc, RESCUE_MS), "the task that fills the queues never started");
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, release_later, &sc.release), 0, "pthread_create failed");
    ws_runtime_free(rt);
    pthread_join(th, NULL);
    expect_join_cancelled_per(c, "the task woken into the LIFO slot", WS_FREE_CANCELS);
    expect_join_cancelled_per(b, "the task that spawned into its deque", WS_FREE_CANCELS);
    slot_wake(&sc.parked); /* a waker that outlived the runtime: harmless */
    slot_destroy(&sc.parked);
    gate_destroy(&sc.release);
    expect_books(spawned, "in a worker's deque and its LIFO slot");
}

/* ---- timers: sleeping tasks, one worker parked in the time driver, the other asleep ---- */

struct nap {
    struct sleep s;
};
static atomic_uint nap_drops;

static enum poll nap_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct nap *n = self;
    return sleep_poll(&n->s, cx);
}
static void nap_drop(void *self)
{
    sleep_drop(&((struct nap *)self)->s);
    atomic_fetch_add(&nap_drops, 1);
}
static const struct future_vtable nap_vt = FUTURE_VTABLE_INIT(struct nap, 0, nap_poll, nap_drop);

struct timers_of {
    struct time_driver *td;
    size_t n;
};
static bool timers_armed(void *arg)
{
    struct timers_of *t = arg;
    return time_driver_test_timers(t->td) == t->n;
}

LAB_TEST(shutdown_at, sleeping_tasks_idle_workers, 20)
{
    atomic_store(&nap_drops, 0);
    alloc_count_start();
    struct parker *p = parker_new();
    cr_assert_not_null(p, "parker_new failed");
    struct time_driver *td = time_driver_new(parker_driver(p));
    cr_assert_not_null(td, "time_driver_new failed");
    struct ws_runtime *rt = ws_runtime_new(2, time_driver_driver(td));
    cr_assert_not_null(rt, "ws_runtime_new failed");
    enum { NAPS = 3 };
    struct join_handle *jh[NAPS];
    for (unsigned i = 0; i < NAPS; i++) {
        struct nap nap = { .s = sleep_for(td, (uint64_t)(i + 1) * 3600u * 1000000000u) }; /* hours */
        jh[i] = ws_spawn(rt, future_of(&nap_vt, &nap), NULL);
        cr_assert_not_null(jh[i], "ws_spawn failed");
    }
    struct timers_of want = { td, NAPS };
    cr_assert(wait_until(timers_armed, &want, RESCUE_MS), "the sleeping tasks registered %zu timers, not %d",
              time_driver_test_timers(td), NAPS);
    /* both idle: one parked in the driver until the first timer (an hour), one on its own */
    cr_assert(wait_sleepers(rt, 2, RESCUE_MS), "the two workers never went to sleep beside three sleeping tasks");
    uint64_t t0 = monotonic_ns();
    ws_runtime_free(rt);
    uint64_t took = monotonic_ns() - t0;
    lab_note("ws_runtime_free with %d sleeping tasks: %.1f ms", NAPS, took / 1e6);
    cr_assert_eq(atomic_load(&nap_drops), NAPS, "%u of %d sleeping tasks' futures were dropped by ws_runtime_free: "
                 "a task waiting on a timer is pending and still owned; it must be dropped (runtime.h, contract 6)",
                 atomic_load(&nap_drops), NAPS);
    cr_assert_eq(time_driver_test_timers(td), 0, "%zu timers were still registered after ws_runtime_free dropped "
                 "the sleeping tasks: dropping a sleep must cancel its timer (sleep.h contract 3)",
                 time_driver_test_timers(td));
    for (unsigned i = 0; i < NAPS; i++)
        expect_join_cancelled_per(jh[i], "a sleeping task", WS_FREE_CANCELS);
    time_driver_free(td);
    parker_release(p);
    struct alloc_counts c = alloc_count_stop();
    cr_assert_eq(c.allocs, c.frees, "%llu allocations but %llu frees after ws_runtime_free with sleeping tasks: "
                 "a task waiting on a timer was never freed (runtime.h contract 6)", (unsigned long long)c.allocs,
                 (unsigned long long)c.frees);
}
