/* bench_naive.c - the two workloads on the naive executor (naive.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "futures.h"
#include "bench.h"
#include "naive.h"

/* The article's queue: sync_channel(1024). */
#define NAIVE_CAPACITY 1024

/* As the article's benchmark: a new executor per round, 500 tasks spawned
 * before run(), spawner dropped, run() returns when every task is done. */
void bench_yield_rounds(size_t rounds, size_t tasks)
{
    for (size_t r = 0; r < rounds; r++) {
        struct naive_executor *ex;
        struct naive_spawner *sp;
        naive_new(NAIVE_CAPACITY, &ex, &sp);
        for (size_t i = 0; i < tasks; i++) {
            struct yield_future y;
            yield_future_init(&y, 2);
            struct future f = yield_future_as_future(&y);
            naive_spawn(sp, f.vtable, f.self);
        }
        naive_spawner_drop(sp);
        naive_run(ex);
    }
}

/* The root task of the spawn row: spawns n children with join handles, then
 * awaits each handle in order. */
struct root {
    struct naive_spawner *sp;
    struct naive_join **hs;
    uint64_t n, i, sum;
    uint64_t *result;
};

static enum poll root_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    struct root *r = self;
    if (!r->hs) {
        r->hs = malloc(r->n * sizeof *r->hs);
        if (!r->hs)
            abort();
        for (uint64_t i = 0; i < r->n; i++) {
            struct ret_index ri = { .i = i };
            r->hs[i] = naive_spawn_join(r->sp, &ret_index_vt, &ri);
        }
    }
    for (; r->i < r->n; r->i++) {
        uint64_t v;
        if (naive_join_poll(r->hs[r->i], cx, &v) == POLL_PENDING)
            return POLL_PENDING;
        r->sum += v;
        naive_join_drop(r->hs[r->i]);
    }
    *r->result = r->sum;
    return POLL_READY;
}

static void root_drop(void *self)
{
    struct root *r = self;
    if (r->hs) {
        for (; r->i < r->n; r->i++)
            naive_join_drop(r->hs[r->i]);
        free(r->hs);
    }
    naive_spawner_drop(r->sp);
}

static const struct future_vtable root_vt = FUTURE_VTABLE_INIT(struct root, 0, root_poll, root_drop);

/* The queue must hold all n children at once (a full queue deadlocks the one
 * thread): capacity n + 1 instead of 1024, which costs nothing, the bound
 * being a counter. */
uint64_t bench_spawn_join(uint64_t n)
{
    struct naive_executor *ex;
    struct naive_spawner *sp;
    naive_new(n + 16, &ex, &sp);
    uint64_t result = 0;
    struct root r = { .sp = naive_spawner_clone(sp), .n = n, .result = &result };
    naive_spawn(sp, &root_vt, &r);
    naive_spawner_drop(sp);
    naive_run(ex);
    return result;
}
