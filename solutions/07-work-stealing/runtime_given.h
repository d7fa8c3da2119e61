/* runtime_given.h - stage 07: the given part of runtime.c (included by
 * runtime.c alone; not an API: the tests never include it).
 *
 * The workers' and the runtime's structs, the idle state's fields, the test
 * points, the declarations of worker_park and worker_unpark (given at the
 * end of runtime.c) and the traced steal and injector wrappers. runtime.c's header comment says who touches
 * what and draws the idle protocol; your part is in runtime.c.
 */
#ifndef LAB_RUNTIME_GIVEN_H
#define LAB_RUNTIME_GIVEN_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <time.h>

#include "deque.h"
#include "injector.h"
#include "parker.h"
#include "runtime.h"

enum { PARK_EMPTY, PARK_CONDVAR, PARK_DRIVER, PARK_NOTIFIED };

#define IDLE_SEARCHING_ONE UINT64_C(1)
#define IDLE_UNPARKED_ONE (UINT64_C(1) << 16)
#define IDLE_SEARCHING_MASK UINT64_C(0xffff)

/* The watch (park_idle): a worker that goes to sleep while another is awake
 * parks with a timeout, starting at 1 ms and doubling on each fruitless
 * watch up to 16 ms, so a task in the LIFO slot of a worker stuck in a long
 * poll waits 16 ms at the most while a worker sleeps. */
#define WS_WATCH_MIN_NS INT64_C(1000000)
#define WS_WATCH_MAX_NS INT64_C(16000000)

static inline uint64_t idle_searching(uint64_t s) { return s & IDLE_SEARCHING_MASK; }
static inline uint64_t idle_unparked(uint64_t s) { return s >> 16; }

/* A list of owned tasks: every task not yet complete is in one, holding one
 * list reference (task.h). One per worker, for the tasks it spawns, and one
 * for spawns from other threads: a spawn and a completion on one worker lock
 * that worker's list, a line no other worker writes unless it completes a
 * stolen task (docs/07-work-stealing.md#one-owned-list-per-worker). A task's
 * owned_list is its list's index (nworkers: the outside one). */
struct ws_owned {
    _Alignas(64) pthread_mutex_t lock; /* protects head, live, closing */
    struct task *head;
    size_t live;
    bool closing;                      /* ws_runtime_free has begun: no more spawns */
};

struct ws_worker {
    struct deque deque;               /* first: aligned to 64 */
    /* the LIFO slot: one queue reference, or NULL; filled by its worker,
     * emptied by anyone. A line of its own: searchers read it, and must not
     * take the line of the worker's own fields below with it. A page of its
     * own, too, so that a test sees every access to it (ws_test_lifo_page). */
    _Alignas(WS_TEST_LIFO_PAGE) _Atomic(struct task *) lifo;
    _Alignas(WS_TEST_LIFO_PAGE) struct ws_runtime *rt;
    unsigned index;
    /* own */
    unsigned tick;                    /* tasks taken so far (fairness) */
    uint64_t rng;                     /* victim choice */
    bool searching;                   /* counted as searching in idle_state */
    bool in_task;                     /* inside run_task: a wake may use the LIFO slot */
    bool sleeping;                    /* in rt->sleepers (idle_lock) */
    int64_t watch_ns;                 /* the next watch's park timeout (park_idle) */
    struct task *spill[DEQUE_CAPACITY / 2 + 1]; /* steal and overflow batches */
    struct task_cells cells;          /* freed task cells kept for this worker's spawns (task.h);
                                       * entered by worker_main, given back by ws_runtime_free */
    struct ws_owned owned;            /* the tasks this worker spawned */
    /* parking */
    _Atomic int park_state;           /* PARK_*: seq_cst, see worker_park */
    pthread_mutex_t park_lock;        /* makes the condvar handshake atomic */
    pthread_cond_t park_cond;         /* signalled when park_state becomes NOTIFIED */
    pthread_t thread;
};

struct ws_runtime {
    struct scheduler sched;           /* first: a task's scheduler pointer is the runtime */
    struct driver driver;             /* borrowed, or own_parker's */
    struct parker *own_parker;
    unsigned nworkers;
    struct ws_worker *workers;        /* aligned array of nworkers */
    struct injector injector;
    /* the idle protocol (docs/07-work-stealing.md#the-idle-protocol) */
    /* alone on its page, so that a test sees every access to it (ws_test_idle_page) */
    _Alignas(WS_TEST_IDLE_PAGE) _Atomic uint64_t idle_state; /* (unparked << 16) | searching; seq_cst RMWs */
    _Alignas(WS_TEST_IDLE_PAGE) pthread_mutex_t idle_lock;   /* protects sleepers, nsleepers, worker->sleeping */
    unsigned sleepers[WS_MAX_WORKERS];
    unsigned nsleepers;
    _Atomic bool driver_busy;         /* a worker is inside the driver (only one may be) */
    _Atomic bool shutdown;            /* workers leave their loop */
    struct ws_owned outside;          /* the tasks spawned from other threads */
    _Atomic(ws_test_hook_fn) test_hook; /* set while workers run: acquire/release */
    void *test_arg;
};

/* The worker running on this thread, or NULL: own thread only. */
static _Thread_local struct ws_worker *current;

static inline struct ws_runtime *rt_of(struct scheduler *s) { return (struct ws_runtime *)s; }

static inline void test_point(struct ws_runtime *rt, enum ws_test_point p, unsigned idx)
{
    /* acquire: pairs with ws_test_set_hook's release, so test_arg is seen */
    ws_test_hook_fn fn = atomic_load_explicit(&rt->test_hook, memory_order_acquire);
    if (__builtin_expect(fn != NULL, 0))
        fn(rt, p, idx, rt->test_arg);
}

static inline uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* ---- parking one worker (given, at the end of runtime.c) ---------------------------- */

/* Wakes w if it is parked; else makes its next park return at once. */
static inline void worker_unpark(struct ws_worker *w);

/* Sleeps until worker_unpark, the timeout (ns; DRIVER_PARK_FOREVER: none)
 * or a spurious return. */
static inline void worker_park(struct ws_worker *w, int64_t timeout_ns);

/* ---- tracing (common/tracing/trace.h, docs/tracing.md) ----------------------------- */

#ifdef LAB_TRACE
/* Traced (given): in this file, a steal from another worker's deque and a
 * pop from the injector by a worker go through these wrappers, which record
 * a "steal" (victim, count) or an "injector pull" instant on the worker's
 * thread. A steal from a worker's own deque (the overflow into the
 * injector) is no steal. Without -DLAB_TRACE the calls are the plain ones. */
static inline void trace_steal_from(struct deque *d, size_t n)
{
    if (n && current && d != &current->deque) {
        struct ws_worker *victim = (struct ws_worker *)(void *)((char *)d - offsetof(struct ws_worker, deque));
        trace_steal(victim->index, (uint32_t)n);
    }
}
static inline size_t deque_steal_half_traced(struct deque *d, void **out, size_t max)
{
    size_t n = deque_steal_half(d, out, max);
    trace_steal_from(d, n);
    return n;
}
static inline enum deque_steal deque_steal_traced(struct deque *d, void **out)
{
    enum deque_steal r = deque_steal(d, out);
    trace_steal_from(d, r == DEQUE_STOLEN);
    return r;
}
static inline struct task *injector_pop_traced(struct injector *q)
{
    struct task *t = injector_pop(q);
    if (t && current)
        trace_injector_pull(1);
    return t;
}
#define deque_steal_half(d, out, max) deque_steal_half_traced(d, out, max)
#define deque_steal(d, out) deque_steal_traced(d, out)
#define injector_pop(q) injector_pop_traced(q)
#endif

#endif
