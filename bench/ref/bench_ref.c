/* bench_ref.c - the two workloads on the lab's reference executor
 * (solutions/03-executor), shaped like the Tokio side (tokio/src/lib.rs):
 *
 *   - one executor per process (executor_new_default: stage 02's parker as
 *     its driver), made at the first iteration and reused, as the Tokio
 *     runtime is built once and reused by every block_on;
 *   - each iteration is one executor_block_on of a root future that spawns
 *     from inside the executor (executor_current) and awaits every join
 *     handle in spawn order, as `rt.block_on(async { ... h.await ... })`;
 *   - the yielding task awaits stage 03's yield_now twice, as
 *     tokio::task::yield_now.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "executor.h"
#include "join.h"
#include "yield_now.h"

static struct executor *the_executor(void)
{
    static struct executor *ex;
    if (!ex) {
        ex = executor_new_default();
        if (!ex) {
            fprintf(stderr, "bench_ref: executor_new_default failed\n");
            exit(1);
        }
    }
    return ex;
}

static void block_on(struct future root, void *out)
{
    enum executor_status st = executor_block_on(the_executor(), root, out);
    if (st != EXECUTOR_OK) {
        fprintf(stderr, "bench_ref: block_on: %s\n", executor_status_str(st));
        exit(1);
    }
}

static struct join_handle *spawn(struct future f)
{
    struct join_handle *jh = executor_spawn(executor_current(), f, NULL);
    if (!jh) {
        fprintf(stderr, "bench_ref: executor_spawn failed\n");
        exit(1);
    }
    return jh;
}

/* ---- yield: async { yield_now().await; yield_now().await; } ---------------- */

struct yield_twice {
    struct yield_now y;
    unsigned done; /* yields finished */
};

static enum poll yield_twice_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct yield_twice *t = self;
    while (t->done < 2) {
        if (yield_now_poll(&t->y, cx) == POLL_PENDING)
            return POLL_PENDING;
        t->done++;
        yield_now_init(&t->y);
    }
    return POLL_READY;
}

static const struct future_vtable yield_twice_vt =
    FUTURE_VTABLE_INIT(struct yield_twice, 0, yield_twice_poll, NULL);

struct yield_root {
    size_t rounds, tasks;
    size_t r, i;              /* round, next handle to await */
    bool spawned;             /* this round's tasks are spawned */
    struct join_handle **hs;  /* `tasks` handles, reused by every round */
};

static enum poll yield_root_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct yield_root *s = self;
    for (; s->r < s->rounds; s->r++) {
        if (!s->spawned) {
            for (size_t i = 0; i < s->tasks; i++) {
                struct yield_twice t = { .done = 0 };
                yield_now_init(&t.y);
                s->hs[i] = spawn(future_of(&yield_twice_vt, &t));
            }
            s->spawned = true;
            s->i = 0;
        }
        for (; s->i < s->tasks; s->i++) {
            enum join_status st;
            if (join_handle_poll(s->hs[s->i], cx, NULL, &st) == POLL_PENDING)
                return POLL_PENDING;
            if (st != JOIN_OK)
                abort();
            join_handle_drop(s->hs[s->i]);
        }
        s->spawned = false;
    }
    return POLL_READY;
}

static const struct future_vtable yield_root_vt =
    FUTURE_VTABLE_INIT(struct yield_root, 0, yield_root_poll, NULL);

void bench_yield_rounds(size_t rounds, size_t tasks)
{
    struct join_handle **hs = malloc(tasks * sizeof *hs);
    if (!hs)
        abort();
    struct yield_root root = { .rounds = rounds, .tasks = tasks, .hs = hs };
    block_on(future_of(&yield_root_vt, &root), NULL);
    free(hs);
}

/* ---- spawn/join: spawn n tasks returning their index, await each ---------- */

struct spawn_root {
    uint64_t n, i, sum;
    bool spawned;
    struct join_handle **hs;
};

static enum poll spawn_root_poll(void *self, struct context *cx, void *out)
{
    struct spawn_root *s = self;
    if (!s->spawned) {
        for (uint64_t i = 0; i < s->n; i++) {
            struct ret_index ri = { .i = i };
            s->hs[i] = spawn(future_of(&ret_index_vt, &ri));
        }
        s->spawned = true;
    }
    for (; s->i < s->n; s->i++) {
        uint64_t v;
        enum join_status st;
        if (join_handle_poll(s->hs[s->i], cx, &v, &st) == POLL_PENDING)
            return POLL_PENDING;
        if (st != JOIN_OK)
            abort();
        s->sum += v;
        join_handle_drop(s->hs[s->i]);
    }
    *(uint64_t *)out = s->sum;
    return POLL_READY;
}

static const struct future_vtable spawn_root_vt =
    FUTURE_VTABLE_INIT(struct spawn_root, sizeof(uint64_t), spawn_root_poll, NULL);

uint64_t bench_spawn_join(uint64_t n)
{
    struct join_handle **hs = malloc(n * sizeof *hs);
    if (!hs)
        abort();
    struct spawn_root root = { .n = n, .hs = hs };
    uint64_t sum = 0;
    block_on(future_of(&spawn_root_vt, &root), &sum);
    free(hs);
    return sum;
}
