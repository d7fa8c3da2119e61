/* bench_ws.c - stage 07's work-stealing runtime (solutions/07-work-stealing)
 * on the rows of source 003's table, 2 workers; the Tokio side is
 * bench/tokio-mt, the oneTBB side bench/ws/bench_tbb.cpp.
 *
 *   bench_ws <row> <warmup> : <warmup> untimed iterations, then one timed;
 *   prints "ns <wall>", and with BENCH_COUNT "polls <n>" "allocs <n>" "ops <n>".
 *
 * Rows (the same shapes on every side):
 *   spawn     a root task spawns 10,000 tasks that return their index, then
 *             joins them in order
 *   pingpong  1,000,000 round trips between two tasks over two channels of
 *             capacity 1
 *   bounded   4 producers x 2,500 messages into one channel of capacity 64,
 *             one consumer
 *   unbounded the same over an unbounded channel
 *   mutex1    1 task: 10,000 lock / increment / unlock
 *   mutex16   16 tasks x 625 lock / increment / unlock on one mutex
 *   tree      a binary fork-join tree of depth 12 (4,096 leaves, 8,191 tasks)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "channel.h"
#include "join.h"
#include "runtime.h"

#ifdef BENCH_COUNT
#include "measure.h"
static _Atomic uint64_t polls;
#define POLLED() atomic_fetch_add_explicit(&polls, 1, memory_order_relaxed)
#else
#define POLLED() ((void)0)
#endif

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void die(const char *m)
{
    fprintf(stderr, "bench_ws: %s\n", m);
    exit(1);
}

static struct join_handle *spawn_here(const struct future_vtable *vt, void *state)
{
    struct join_handle *jh = ws_spawn(ws_current(), future_of(vt, state), NULL);
    if (!jh)
        die("spawn failed");
    return jh;
}

/* Polls a join handle; Ready when done (output to out). */
static bool joined(struct join_handle *jh, struct context *cx, void *out)
{
    enum join_status st;
    if (join_handle_poll(jh, cx, out, &st) == POLL_PENDING)
        return false;
    join_handle_drop(jh);
    return true;
}

/* ---- spawn ---------------------------------------------------------------- */

struct ret { uint64_t i; };
static enum poll ret_poll(void *self, struct context *cx, void *out)
{
    (void)cx;
    POLLED();
    *(uint64_t *)out = ((struct ret *)self)->i;
    return POLL_READY;
}
static const struct future_vtable ret_vt = FUTURE_VTABLE_INIT(struct ret, sizeof(uint64_t), ret_poll, NULL);

struct spawner { uint64_t n, next, sum; struct join_handle **jh; };
static enum poll spawner_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    POLLED();
    struct spawner *s = self;
    if (!s->jh) {
        s->jh = malloc(s->n * sizeof *s->jh);
        for (uint64_t i = 0; i < s->n; i++) {
            struct ret r = { i };
            s->jh[i] = spawn_here(&ret_vt, &r);
        }
    }
    for (; s->next < s->n; s->next++) {
        uint64_t v;
        if (!joined(s->jh[s->next], cx, &v))
            return POLL_PENDING;
        s->sum += v;
    }
    free(s->jh);
    return POLL_READY;
}
static const struct future_vtable spawner_vt = FUTURE_VTABLE_INIT(struct spawner, 0, spawner_poll, NULL);

/* ---- ping-pong -------------------------------------------------------------- */

struct pinger {
    struct chan *out, *in;
    uint64_t left;
    int phase; /* 0 send, 1 receive */
    bool active;
    struct chan_send s;
    struct chan_recv r;
    bool first_receives; /* the pong side starts by receiving */
};
static enum poll pinger_poll(void *self, struct context *cx, void *outp)
{
    (void)outp;
    POLLED();
    struct pinger *p = self;
    while (p->left > 0) {
        enum chan_status st;
        if (p->phase == 0) {
            if (!p->active) {
                chan_send_init(&p->s, p->out, p->left);
                p->active = true;
            }
            if (chan_send_poll(&p->s, cx, &st) == POLL_PENDING)
                return POLL_PENDING;
            chan_send_drop(&p->s);
            p->active = false;
            p->phase = 1;
            if (p->first_receives)
                p->left--;
        } else {
            if (!p->active) {
                chan_recv_init(&p->r, p->in);
                p->active = true;
            }
            uint64_t v;
            if (chan_recv_poll(&p->r, cx, &v, &st) == POLL_PENDING)
                return POLL_PENDING;
            chan_recv_drop(&p->r);
            p->active = false;
            p->phase = 0;
            if (!p->first_receives)
                p->left--;
        }
    }
    return POLL_READY;
}
static const struct future_vtable pinger_vt = FUTURE_VTABLE_INIT(struct pinger, 0, pinger_poll, NULL);

struct pair_root { uint64_t n; struct join_handle *a, *b; struct chan *c1, *c2; };
static enum poll pair_root_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    POLLED();
    struct pair_root *r = self;
    if (!r->a) {
        struct pinger ping = { .out = r->c1, .in = r->c2, .left = r->n, .phase = 0 };
        struct pinger pong = { .out = r->c2, .in = r->c1, .left = r->n, .phase = 1, .first_receives = true };
        r->a = spawn_here(&pinger_vt, &ping);
        r->b = spawn_here(&pinger_vt, &pong);
    }
    if (r->a && r->a != (void *)1) {
        if (!joined(r->a, cx, NULL))
            return POLL_PENDING;
        r->a = (void *)1;
    }
    if (!joined(r->b, cx, NULL))
        return POLL_PENDING;
    return POLL_READY;
}
static const struct future_vtable pair_root_vt = FUTURE_VTABLE_INIT(struct pair_root, 0, pair_root_poll, NULL);

/* ---- channels ------------------------------------------------------------------ */

struct producer { struct chan *c; uint64_t left; bool active; struct chan_send s; };
static enum poll producer_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    POLLED();
    struct producer *p = self;
    while (p->left > 0) {
        if (!p->active) {
            chan_send_init(&p->s, p->c, p->left);
            p->active = true;
        }
        enum chan_status st;
        if (chan_send_poll(&p->s, cx, &st) == POLL_PENDING)
            return POLL_PENDING;
        chan_send_drop(&p->s);
        p->active = false;
        p->left--;
    }
    return POLL_READY;
}
static const struct future_vtable producer_vt = FUTURE_VTABLE_INIT(struct producer, 0, producer_poll, NULL);

struct chan_root { struct chan *c; unsigned producers; uint64_t per, got; bool started, active; struct chan_recv r;
                   struct join_handle *jh[16]; };
static enum poll chan_root_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    POLLED();
    struct chan_root *k = self;
    if (!k->started) {
        for (unsigned i = 0; i < k->producers; i++) {
            struct producer p = { .c = k->c, .left = k->per };
            k->jh[i] = spawn_here(&producer_vt, &p);
        }
        k->started = true;
    }
    while (k->got < k->producers * k->per) {
        if (!k->active) {
            chan_recv_init(&k->r, k->c);
            k->active = true;
        }
        uint64_t v;
        enum chan_status st;
        if (chan_recv_poll(&k->r, cx, &v, &st) == POLL_PENDING)
            return POLL_PENDING;
        chan_recv_drop(&k->r);
        k->active = false;
        k->got++;
    }
    for (unsigned i = 0; i < k->producers; i++) {
        if (k->jh[i]) {
            if (!joined(k->jh[i], cx, NULL))
                return POLL_PENDING;
            k->jh[i] = NULL;
        }
    }
    return POLL_READY;
}
static const struct future_vtable chan_root_vt = FUTURE_VTABLE_INIT(struct chan_root, 0, chan_root_poll, NULL);

/* ---- mutex -------------------------------------------------------------------------- */

struct shared_count { struct async_mutex m; uint64_t value; };
struct locker { struct shared_count *c; uint64_t left; bool active; struct async_mutex_lock l; };
static enum poll locker_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    POLLED();
    struct locker *k = self;
    while (k->left > 0) {
        if (!k->active) {
            async_mutex_lock_init(&k->l, &k->c->m);
            k->active = true;
        }
        if (async_mutex_lock_poll(&k->l, cx) == POLL_PENDING)
            return POLL_PENDING;
        k->c->value++;
        async_mutex_lock_drop(&k->l);
        k->active = false;
        async_mutex_unlock(&k->c->m);
        k->left--;
    }
    return POLL_READY;
}
static const struct future_vtable locker_vt = FUTURE_VTABLE_INIT(struct locker, 0, locker_poll, NULL);

struct mutex_root { struct shared_count *c; unsigned tasks; uint64_t per; bool started; struct join_handle *jh[16]; };
static enum poll mutex_root_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    POLLED();
    struct mutex_root *r = self;
    if (!r->started) {
        for (unsigned i = 0; i < r->tasks; i++) {
            struct locker k = { .c = r->c, .left = r->per };
            r->jh[i] = spawn_here(&locker_vt, &k);
        }
        r->started = true;
    }
    for (unsigned i = 0; i < r->tasks; i++) {
        if (r->jh[i]) {
            if (!joined(r->jh[i], cx, NULL))
                return POLL_PENDING;
            r->jh[i] = NULL;
        }
    }
    return POLL_READY;
}
static const struct future_vtable mutex_root_vt = FUTURE_VTABLE_INIT(struct mutex_root, 0, mutex_root_poll, NULL);

/* ---- tree ----------------------------------------------------------------------------- */

struct node { unsigned depth; bool started; struct join_handle *kid[2]; uint64_t sum; };
static const struct future_vtable node_vt;
static enum poll node_poll(void *self, struct context *cx, void *out)
{
    POLLED();
    struct node *n = self;
    if (n->depth == 0) {
        *(uint64_t *)out = 1;
        return POLL_READY;
    }
    if (!n->started) {
        for (int i = 0; i < 2; i++) {
            struct node c = { .depth = n->depth - 1 };
            n->kid[i] = spawn_here(&node_vt, &c);
        }
        n->started = true;
    }
    for (int i = 0; i < 2; i++) {
        if (n->kid[i]) {
            uint64_t v;
            if (!joined(n->kid[i], cx, &v))
                return POLL_PENDING;
            n->kid[i] = NULL;
            n->sum += v;
        }
    }
    *(uint64_t *)out = n->sum;
    return POLL_READY;
}
static const struct future_vtable node_vt = FUTURE_VTABLE_INIT(struct node, sizeof(uint64_t), node_poll, NULL);

/* ---- driver ------------------------------------------------------------------------------ */

static uint64_t one(struct ws_runtime *rt, const char *row)
{
    uint64_t ops = 0;
    bool ok = false;
    if (!strcmp(row, "spawn")) {
        struct spawner s = { .n = 10000 };
        ok = ws_block_on(rt, future_of(&spawner_vt, &s), NULL);
        ops = 10000;
    } else if (!strcmp(row, "pingpong")) {
        struct pair_root r = { .n = 1000000, .c1 = chan_new(1), .c2 = chan_new(1) };
        ok = ws_block_on(rt, future_of(&pair_root_vt, &r), NULL);
        chan_free(r.c1);
        chan_free(r.c2);
        ops = 1000000;
    } else if (!strcmp(row, "bounded") || !strcmp(row, "unbounded")) {
        struct chan_root k = { .c = chan_new(!strcmp(row, "bounded") ? 64 : 0), .producers = 4, .per = 2500 };
        ok = ws_block_on(rt, future_of(&chan_root_vt, &k), NULL);
        chan_free(k.c);
        ops = 10000;
    } else if (!strcmp(row, "mutex1") || !strcmp(row, "mutex16")) {
        struct shared_count c = { .value = 0 };
        async_mutex_init(&c.m);
        unsigned tasks = !strcmp(row, "mutex1") ? 1 : 16;
        struct mutex_root r = { .c = &c, .tasks = tasks, .per = 10000 / tasks };
        ok = ws_block_on(rt, future_of(&mutex_root_vt, &r), NULL);
        if (c.value != 10000)
            die("mutex count wrong");
        async_mutex_destroy(&c.m);
        ops = 10000;
    } else if (!strcmp(row, "tree")) {
        struct node n = { .depth = 12 };
        uint64_t leaves = 0;
        struct join_handle *jh = ws_spawn(rt, future_of(&node_vt, &n), NULL);
        struct join_future join;
        join_future_init(&join, jh, &leaves);
        extern unsigned long block_on(struct future fut, void *out);
        enum join_status st;
        block_on(join_future_as_future(&join), &st);
        join_handle_drop(jh);
        ok = leaves == 4096;
        ops = 8191;
    } else {
        die("unknown row");
    }
    if (!ok)
        die("the workload did not complete");
    return ops;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        die("usage: bench_ws <spawn|pingpong|bounded|unbounded|mutex1|mutex16|tree> <warmup>");
    const char *row = argv[1];
    int warmup = atoi(argv[2]);
    unsigned workers = getenv("BENCH_WORKERS") ? (unsigned)atoi(getenv("BENCH_WORKERS")) : 2;
    struct ws_runtime *rt = ws_runtime_new_default(workers);
    if (!rt)
        die("runtime");
    for (int i = 0; i < warmup; i++)
        one(rt, row);
#ifdef BENCH_COUNT
    atomic_store(&polls, 0);
    alloc_count_start();
#endif
    uint64_t t0 = now_ns();
    uint64_t ops = one(rt, row);
    uint64_t t1 = now_ns();
#ifdef BENCH_COUNT
    struct alloc_counts ac = alloc_count_stop();
    printf("polls %llu\nallocs %llu\nops %llu\n", (unsigned long long)atomic_load(&polls),
           (unsigned long long)ac.allocs, (unsigned long long)ops);
#else
    (void)ops;
#endif
    printf("ns %llu\n", (unsigned long long)(t1 - t0));
    ws_runtime_free(rt);
    return 0;
}
