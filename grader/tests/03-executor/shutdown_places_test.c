/* shutdown_places_test.c - stage 03: executor_free with tasks on both ends
 * of the ready queue: the local FIFO (spawned, never run) and the remote
 * stack (woken from another thread while the executor was not running).
 * (lifecycle_test.c covers the local end and pending tasks; this adds the
 * remote end.)
 *
 * The test checks the books itself (each future dropped once, join handles
 * cancelled, allocations == frees); the rubric runs it under Valgrind. */
#include <pthread.h>

#include "join_checks.h"
#include "stage03.h"

LAB_SUITE(shutdown_at, 10);

enum { REMOTE = 8, LOCAL = 4 };

struct wakes {
    struct probe_stats *st;
    unsigned n;
};

static void *wake_all(void *arg)
{
    struct wakes *w = arg;
    for (unsigned i = 0; i < w->n; i++) {
        struct waker k = probe_take_stash(&w->st[i]);
        waker_wake(&k); /* onto the remote stack: this is not the executor's thread */
    }
    return NULL;
}

LAB_TEST(shutdown_at, remote_and_local_ends, 10)
{
    alloc_count_start();
    struct executor *ex = new_executor();
    struct probe_stats rs[REMOTE], ls[LOCAL];
    struct join_handle *kept[REMOTE];
    for (int i = 0; i < REMOTE; i++) {
        probe_init(&rs[i], step_stash_forever, NULL);
        kept[i] = spawn_probe(ex, &rs[i], NULL);
    }
    cr_assert_eq(executor_run_until_idle(ex), EXECUTOR_IDLE, "run_until_idle with %d pending tasks did not say "
                 "EXECUTOR_IDLE", REMOTE);
    /* woken from another thread; the executor is not running, so they stay on the remote end */
    struct wakes w = { rs, REMOTE };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, wake_all, &w), 0, "pthread_create failed");
    pthread_join(th, NULL);
    for (int i = 0; i < LOCAL; i++) {
        probe_init(&ls[i], step_ready, NULL);
        join_handle_drop(spawn_probe(ex, &ls[i], NULL)); /* the local end, never run */
    }
    executor_free(ex);
    for (int i = 0; i < REMOTE; i++) {
        cr_assert_eq(probe_polls(&rs[i]), 1, "executor_free polled a woken task (%u polls): it drops tasks "
                     "unpolled", probe_polls(&rs[i]));
        cr_assert_eq(probe_drops(&rs[i]), 1, "a task woken from another thread and left on the remote end had "
                     "its future dropped %u times by executor_free, not once", probe_drops(&rs[i]));
        expect_join_cancelled(kept[i], "a task woken from another thread, never run");
        probe_destroy(&rs[i]);
    }
    for (int i = 0; i < LOCAL; i++) {
        cr_assert_eq(probe_drops(&ls[i]), 1, "a spawned, never-run task was dropped %u times, not once",
                     probe_drops(&ls[i]));
        probe_destroy(&ls[i]);
    }
    struct alloc_counts ac = alloc_count_stop();
    cr_assert_eq(ac.frees, ac.allocs, "%llu allocations, %llu frees after executor_free with %d tasks woken from "
                 "another thread and never run: the remote end's queue entries must be given back too "
                 "(executor.h, contract 5)", (unsigned long long)ac.allocs, (unsigned long long)ac.frees, REMOTE);
}
