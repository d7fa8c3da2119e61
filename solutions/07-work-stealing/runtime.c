/* runtime.c - stage 07: workers, the LIFO slot, stealing, the idle protocol,
 * the budget and shutdown (runtime.h).
 *
 * Who touches what:
 *   worker fields marked "own": that worker's thread only, no atomics;
 *   deque: push/take by its worker, steals by anyone (deque.h);
 *   lifo: an atomic pointer that only its worker fills; its worker and any
 *     searcher may empty it, and the queue entry in it must be taken exactly
 *     once (a task in the slot of a worker stuck in a long poll is stolen,
 *     not stranded: docs/07-work-stealing.md#a-long-poll-must-not-strand-the-slot);
 *   injector: its own mutex (injector.h);
 *   idle_state, sleepers: the idle protocol below;
 *   owned lists: each its own lock (struct ws_owned).
 *
 * Yours: notify_parked and park_idle (the idle protocol), push_local and
 * ws_schedule (the queues), next_task, search and run_task (the worker
 * loop), and ws_runtime_free's teardown. The structs are given in
 * runtime_given.h; the rest of this file is given too.
 *
 * The idle protocol (docs/07-work-stealing.md#the-idle-protocol). The
 * state is one word, idle_state = (unparked << 16) | searching, changed only
 * by seq_cst read-modify-writes (the searching transitions are given below),
 * and the list of sleepers under idle_lock. notify_parked and park_idle are
 * the two sides of one question: a thread pushes a task at the moment a
 * worker decides to sleep. Each may conclude that the other will take care
 * of the task; what makes sure that at least one of them is right?
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, pthread_condattr_setclock */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "block_on.h"
#include "coop.h"
#include "deque.h"
#include "injector.h"
#include "parker.h"
#define LAB_RUNTIME_C /* this file defines the real ws_spawn and ws_block_on (runtime.h, tracing) */
#include "runtime.h"

/* The structs and the traced wrappers are given, in runtime_given.h; parking
 * one worker is given at the end of this file. From here on, the file is the
 * idle protocol, the queues, the worker loop, creating and freeing: yours
 * where a TODO says so. */
#include "runtime_given.h"

/* ---- the idle protocol ---------------------------------------------------------- */

/* Someone made work that any worker could run: wake a sleeper, unless a
 * worker is already searching (it will find the work, or wake another). */
static inline void notify_parked(struct ws_runtime *rt)
{
    /* BEGIN STUDENT: runtime.h contract 2: a worker may be announcing its sleep at this very moment; how do this push and that worker agree on who finds the task? (docs/07-work-stealing.md#the-idle-protocol) */
    /* seq_cst RMW (not a load): ordered against the sleeper's announcement,
     * see the top of the file */
    uint64_t s = atomic_fetch_add_explicit(&rt->idle_state, 0, memory_order_seq_cst);
    if (idle_searching(s) != 0 || idle_unparked(s) == rt->nworkers)
        return;
    if (atomic_load_explicit(&rt->shutdown, memory_order_acquire))
        return;
    struct ws_worker *w = NULL;
    pthread_mutex_lock(&rt->idle_lock);
    s = atomic_load_explicit(&rt->idle_state, memory_order_seq_cst);
    if (idle_searching(s) == 0 && rt->nsleepers > 0) {
        w = &rt->workers[rt->sleepers[--rt->nsleepers]];
        w->sleeping = false;
        /* it wakes up searching: counted now, so the next notify does not
         * wake a second one for the same work */
        atomic_fetch_add_explicit(&rt->idle_state, IDLE_UNPARKED_ONE | IDLE_SEARCHING_ONE,
                                  memory_order_seq_cst);
    }
    pthread_mutex_unlock(&rt->idle_lock);
    if (w)
        worker_unpark(w);
    /* END STUDENT */
}

/* At most half the workers search at once (Tokio's rule): more would only
 * fight over the same victims. */
static inline bool transition_to_searching(struct ws_worker *w)
{
    if (w->searching)
        return true;
    struct ws_runtime *rt = w->rt;
    uint64_t s = atomic_load_explicit(&rt->idle_state, memory_order_seq_cst);
    if (2 * idle_searching(s) >= rt->nworkers)
        return false;
    atomic_fetch_add_explicit(&rt->idle_state, IDLE_SEARCHING_ONE, memory_order_seq_cst);
    w->searching = true;
    return true;
}

/* The worker found work and stops searching: true when it was the last
 * searcher. */
static inline bool transition_from_searching(struct ws_worker *w)
{
    w->searching = false;
    uint64_t prev = atomic_fetch_sub_explicit(&w->rt->idle_state, IDLE_SEARCHING_ONE, memory_order_seq_cst);
    return idle_searching(prev) == 1;
}

/* Is there work anywhere this worker could take? */
static inline bool work_anywhere(struct ws_runtime *rt)
{
    if (injector_len(&rt->injector) > 0)
        return true;
    for (unsigned i = 0; i < rt->nworkers; i++) {
        if (deque_len(&rt->workers[i].deque) > 0)
            return true;
        /* acquire: pairs with the filler's exchange (a slot filled later is
         * the watch's business, park_idle) */
        if (atomic_load_explicit(&rt->workers[i].lifo, memory_order_acquire))
            return true;
    }
    return false;
}

/* Back from sleeping (or from announcing it): count ourselves awake and
 * searching, unless the notifier already did. */
static inline void unannounce(struct ws_worker *w)
{
    struct ws_runtime *rt = w->rt;
    pthread_mutex_lock(&rt->idle_lock);
    if (w->sleeping) {
        for (unsigned i = 0; i < rt->nsleepers; i++) {
            if (rt->sleepers[i] == w->index) {
                rt->sleepers[i] = rt->sleepers[--rt->nsleepers];
                break;
            }
        }
        w->sleeping = false;
        atomic_fetch_add_explicit(&rt->idle_state, IDLE_UNPARKED_ONE | IDLE_SEARCHING_ONE,
                                  memory_order_seq_cst);
    }
    pthread_mutex_unlock(&rt->idle_lock);
    w->searching = true; /* either way we are counted as searching now */
}

/* Nothing to do: sleep, without losing a task pushed meanwhile (runtime.h
 * contract 2). */
static inline void park_idle(struct ws_worker *w)
{
    struct ws_runtime *rt = w->rt;
    test_point(rt, WS_TEST_BEFORE_PARK, w->index);
    /* BEGIN STUDENT: runtime.h contracts 2 and 5: a task may be pushed while this worker goes to sleep, its notify having seen the worker still searching; what must the worker do, in which order, so that the task is not left behind, and how long may it sleep while another worker is awake? (docs/07-work-stealing.md#the-idle-protocol) */
    pthread_mutex_lock(&rt->idle_lock);
    uint64_t dec = IDLE_UNPARKED_ONE | (w->searching ? IDLE_SEARCHING_ONE : 0);
    uint64_t prev = atomic_fetch_sub_explicit(&rt->idle_state, dec, memory_order_seq_cst);
    w->searching = false;
    rt->sleepers[rt->nsleepers++] = w->index;
    w->sleeping = true;
    pthread_mutex_unlock(&rt->idle_lock);

    /* The watch: another worker is awake, and may fill its LIFO slot (no
     * notify) and then run a long poll. Park with a timeout and look again.
     * A worker that wakes (notified, or at its timeout) comes back as a
     * searcher, and the last searcher to find work wakes another, which then
     * sees it awake here: while any worker is awake, a sleeper watches. */
    int64_t timeout = DRIVER_PARK_FOREVER;
    if (idle_unparked(prev - dec) > 0) {
        timeout = w->watch_ns;
        if (w->watch_ns < WS_WATCH_MAX_NS)
            w->watch_ns *= 2; /* reset when this worker finds work */
    }
    /* The re-check. A push whose notify saw us still searching is visible
     * here (our RMW came after its RMW). */
    if (!work_anywhere(rt) && !atomic_load_explicit(&rt->shutdown, memory_order_acquire))
        worker_park(w, timeout);
    unannounce(w);
    /* END STUDENT */
    test_point(rt, WS_TEST_UNPARKED, w->index);
}

/* ---- queues ---------------------------------------------------------------------- */

/* The worker's own thread: onto its deque, which refuses a push when it is
 * full (deque.h). */
static inline void push_local(struct ws_worker *w, struct task *t)
{
    /* BEGIN STUDENT: overflow: the deque is full; which tasks go somewhere every worker can reach, and which one stays hot here? (docs/07-work-stealing.md#overflow) */
    if (deque_push(&w->deque, t))
        return;
    size_t n = deque_steal_half(&w->deque, (void **)w->spill, DEQUE_CAPACITY / 2);
    injector_push_batch(&w->rt->injector, w->spill, n);
    if (!deque_push(&w->deque, t))
        injector_push(&w->rt->injector, t); /* only if thieves refilled it meanwhile: cannot happen, but never lose a task */
    /* END STUDENT */
}

static void ws_schedule(struct scheduler *s, struct task *t, enum schedule_reason why)
{
    /* BEGIN STUDENT: runtime.h contracts 2 and 3: who is calling, and why (a spawn, a yield, a wake inside a task)? Which queue keeps locality without stranding or starving anything, and when must a sleeper be woken? (docs/07-work-stealing.md#where-a-task-goes) */
    struct ws_runtime *rt = rt_of(s);
    struct ws_worker *w = current;
    if (!w || w->rt != rt) {
        injector_push(&rt->injector, t); /* the queue reference moves in */
        notify_parked(rt);
        return;
    }
    if (why == SCHEDULE_YIELD) {
        /* behind everything; no notify: this worker takes it back itself
         * (deque empty, or the 61st tick), so a task that yields on its
         * budget does not wake an idle worker to bounce between the two */
        injector_push(&rt->injector, t);
        return;
    }
    if (why == SCHEDULE_WAKE && w->in_task) {
        /* release: pairs with the acquire exchange of a searcher that takes
         * the task (a NULL read here needs no acquire: it only empties) */
        struct task *prev = atomic_exchange_explicit(&w->lifo, t, memory_order_release);
        if (!prev)
            return; /* no notify: this worker runs it next, unless its poll runs
                       long; then the watch of a sleeper (park_idle) steals it */
        t = prev;   /* the displaced one goes to the deque; the notify covers both */
    }
    push_local(w, t);
    notify_parked(rt);
    /* END STUDENT */
}

/* The owned list at index i: a worker's, or (i == nworkers) the outside one. */
static inline struct ws_owned *owned_list(struct ws_runtime *rt, unsigned i)
{
    return i < rt->nworkers ? &rt->workers[i].owned : &rt->outside;
}

static void ws_release(struct scheduler *s, struct task *t)
{
    struct ws_runtime *rt = rt_of(s);
#ifdef LAB_TRACE
    trace_task_complete(&t->trace); /* the task leaves the list: it has completed */
#endif
    /* owned_list was written before the spawn published the task */
    struct ws_owned *o = owned_list(rt, t->owned_list);
    pthread_mutex_lock(&o->lock);
    if (t->owned_prev)
        t->owned_prev->owned_next = t->owned_next;
    else
        o->head = t->owned_next;
    if (t->owned_next)
        t->owned_next->owned_prev = t->owned_prev;
    t->owned_prev = t->owned_next = NULL;
    o->live--;
    pthread_mutex_unlock(&o->lock);
}

/* Some task still owned, or NULL (ws_runtime_free, once the workers are gone). */
static inline struct task *any_owned(struct ws_runtime *rt)
{
    for (unsigned i = 0; i <= rt->nworkers; i++) {
        struct ws_owned *o = owned_list(rt, i);
        pthread_mutex_lock(&o->lock);
        struct task *t = o->head;
        pthread_mutex_unlock(&o->lock);
        if (t)
            return t;
    }
    return NULL;
}

static const struct scheduler_vtable ws_scheduler_vtable = {
    .schedule = ws_schedule,
    .release = ws_release,
};

/* ---- the worker loop ------------------------------------------------------------- */

/* One tick: the task this worker runs next. Its deque's newest keeps
 * locality; runtime.h contract 3 says what else must get a turn, and how
 * often (WS_INJECTOR_INTERVAL, WS_OLDEST_PHASE), and contract 5 that timers
 * fire while every worker is busy. */
static inline struct task *next_task(struct ws_worker *w)
{
    w->tick++;
    /* BEGIN STUDENT: runtime.h contract 3: this worker's own deque may never empty; how do the injector and the deque's oldest task still get their turns? (docs/07-work-stealing.md#fairness, #the-old-end) */
    struct ws_runtime *rt = w->rt;
    struct task *t;
    unsigned phase = w->tick % WS_INJECTOR_INTERVAL;
    if (phase == 0) {
        if (!atomic_exchange_explicit(&rt->driver_busy, true, memory_order_acquire)) {
            driver_park(rt->driver, 0); /* fire what is due; returns at once */
            atomic_store_explicit(&rt->driver_busy, false, memory_order_release);
        }
        if ((t = injector_pop(&rt->injector)))
            return t;
    } else if (phase == WS_OLDEST_PHASE) {
        /* A steal from our own top (deque.h contract 5 allows it). ABORT
         * means a thief took the oldest just now: it left the deque all the
         * same, which is what the bound counts. */
        void *old;
        if (deque_steal(&w->deque, &old) == DEQUE_STOLEN)
            return old;
    }
    if ((t = deque_take(&w->deque)))
        return t;
    return injector_pop(&rt->injector);
    /* END STUDENT */
}

/* This worker's own queues are empty: where else can work be? */
static inline struct task *search(struct ws_worker *w)
{
    /* BEGIN STUDENT: runtime.h contract 2: where can work be that is not in this worker's own queues, and how much of it should one search take? (docs/07-work-stealing.md#stealing, #a-long-poll-must-not-strand-the-slot) */
    struct ws_runtime *rt = w->rt;
    if (transition_to_searching(w) && rt->nworkers > 1) {
        unsigned n = rt->nworkers;
        unsigned start = (unsigned)(xorshift(&w->rng) % n);
        for (unsigned i = 0; i < n; i++) {
            unsigned v = (start + i) % n;
            if (v == w->index)
                continue;
            size_t got = deque_steal_half(&rt->workers[v].deque, (void **)w->spill, DEQUE_CAPACITY / 2);
            if (got == 0)
                continue;
            for (size_t k = 1; k < got; k++)
                push_local(w, w->spill[k]); /* our deque is empty: this never spills */
            return w->spill[0];
        }
    }
    struct task *t = injector_pop(&rt->injector);
    if (t || !w->searching || rt->nworkers == 1)
        return t;
    /* Last, the LIFO slots: their owners run them next, unless stuck in a
     * long poll. A relaxed load first, so empty slots are not written. */
    unsigned n = rt->nworkers;
    unsigned start = (unsigned)(xorshift(&w->rng) % n);
    for (unsigned i = 0; i < n; i++) {
        struct ws_worker *v = &rt->workers[(start + i) % n];
        if (v == w || !atomic_load_explicit(&v->lifo, memory_order_relaxed))
            continue;
        /* acquire: pairs with the owner's exchange that filled the slot; the
         * owner empties it with an exchange too, so one of us gets it */
        if ((t = atomic_exchange_explicit(&v->lifo, NULL, memory_order_acquire)))
            return t;
    }
    return NULL;
    /* END STUDENT */
}

/* Runs t, and the tasks its poll puts in the LIFO slot (runtime.h
 * contracts 3 and 4). */
static inline void run_task(struct ws_worker *w, struct task *t)
{
    /* BEGIN STUDENT: runtime.h contracts 2 to 4: a searcher that found work may be the one the others counted on; what does it owe them? What does every poll get first, and how long may the LIFO slot keep this worker? (docs/07-work-stealing.md#running-a-task) */
    struct ws_runtime *rt = w->rt;
    if (w->searching && transition_from_searching(w))
        notify_parked(rt); /* we were the last searcher: more work may be queued */
    w->in_task = true;
    unsigned lifo_polls = 0;
    for (;;) {
        coop_reset(COOP_BUDGET_DEFAULT);
        task_run(t); /* consumes the queue reference */
        /* relaxed: only this thread fills the slot; a searcher may have
         * emptied it (then NULL), never filled it. Load first: an exchange
         * on an empty slot would write the line searchers read. */
        if (!atomic_load_explicit(&w->lifo, memory_order_relaxed))
            break;
        struct task *next = atomic_exchange_explicit(&w->lifo, NULL, memory_order_relaxed);
        if (!next)
            break;
        if (++lifo_polls > WS_LIFO_CAP) {
            /* the cap: behind the deque's older work, where anyone can take it */
            injector_push(&rt->injector, next);
            notify_parked(rt);
            break;
        }
        t = next;
    }
    w->in_task = false;
    coop_unlimit();
    /* END STUDENT */
}

static void *worker_main(void *arg)
{
    struct ws_worker *w = arg;
    struct ws_runtime *rt = w->rt;
    current = w;
    struct task_cells *outer_cells = task_cells_enter(&w->cells);
#ifdef LAB_TRACE
    char name[32];
    snprintf(name, sizeof name, "worker %u", w->index);
    trace_thread_name(name);
#endif
    /* acquire: pairs with ws_runtime_free's release store */
    while (!atomic_load_explicit(&rt->shutdown, memory_order_acquire)) {
        struct task *t = next_task(w);
        if (!t)
            t = search(w);
        if (t) {
            w->watch_ns = WS_WATCH_MIN_NS;
            run_task(w, t);
            continue;
        }
        park_idle(w);
    }
    task_cells_leave(outer_cells);
    current = NULL;
    return NULL;
}

/* ---- creating and freeing ---------------------------------------------------------- */

static void stop_workers(struct ws_runtime *rt, unsigned started)
{
    /* release: the workers' loads of shutdown see everything before it */
    atomic_store_explicit(&rt->shutdown, true, memory_order_release);
    for (unsigned i = 0; i < started; i++)
        worker_unpark(&rt->workers[i]); /* a park after this returns at once */
    for (unsigned i = 0; i < started; i++)
        pthread_join(rt->workers[i].thread, NULL);
}

static void free_memory(struct ws_runtime *rt)
{
    for (unsigned i = 0; i < rt->nworkers; i++) {
        task_cells_release(&rt->workers[i].cells); /* its thread has ended */
        pthread_mutex_destroy(&rt->workers[i].owned.lock);
        pthread_mutex_destroy(&rt->workers[i].park_lock);
        pthread_cond_destroy(&rt->workers[i].park_cond);
    }
    injector_destroy(&rt->injector);
    pthread_mutex_destroy(&rt->idle_lock);
    pthread_mutex_destroy(&rt->outside.lock);
    if (rt->own_parker)
        parker_release(rt->own_parker); /* -1: ours */
    free(rt->workers);
    free(rt);
}

struct ws_runtime *ws_runtime_new(unsigned workers, struct driver driver)
{
    if (workers == 0 || workers > WS_MAX_WORKERS)
        return NULL;
    /* aligned: the idle word has a page of its own (runtime_given.h) */
    struct ws_runtime *rt = aligned_alloc(_Alignof(struct ws_runtime), sizeof *rt);
    if (!rt)
        return NULL;
    memset(rt, 0, sizeof *rt);
    /* aligned: each LIFO slot has a page of its own (runtime_given.h); the
     * struct's size is a multiple of its alignment */
    size_t bytes = sizeof(struct ws_worker) * workers;
    rt->workers = aligned_alloc(_Alignof(struct ws_worker), bytes);
    if (!rt->workers) {
        free(rt);
        return NULL;
    }
    memset(rt->workers, 0, bytes);
    rt->sched.vtable = &ws_scheduler_vtable;
    rt->driver = driver;
    rt->nworkers = workers;
    /* Each init that can fail is undone, in reverse, by the labels at the end. */
    if (injector_init(&rt->injector) != 0)
        goto no_injector;
    if (pthread_mutex_init(&rt->idle_lock, NULL) != 0)
        goto no_idle_lock;
    if (pthread_mutex_init(&rt->outside.lock, NULL) != 0)
        goto no_owned_lock;
    /* every worker starts awake, not searching */
    atomic_init(&rt->idle_state, (uint64_t)workers * IDLE_UNPARKED_ONE);
    atomic_init(&rt->driver_busy, false);
    atomic_init(&rt->shutdown, false);
    unsigned ready; /* workers whose park_lock and park_cond exist */
    for (ready = 0; ready < workers; ready++) {
        struct ws_worker *w = &rt->workers[ready];
        unsigned i = ready;
        deque_init(&w->deque);
        atomic_init(&w->lifo, NULL);
        atomic_init(&w->park_state, PARK_EMPTY);
        if (pthread_mutex_init(&w->owned.lock, NULL) != 0)
            goto no_workers;
        if (pthread_mutex_init(&w->park_lock, NULL) != 0) {
            pthread_mutex_destroy(&w->owned.lock);
            goto no_workers;
        }
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* worker_park's timeout */
        int rc = pthread_cond_init(&w->park_cond, &ca);
        pthread_condattr_destroy(&ca);
        if (rc != 0) {
            pthread_mutex_destroy(&w->park_lock);
            pthread_mutex_destroy(&w->owned.lock);
            goto no_workers;
        }
        w->rt = rt;
        w->index = i;
        w->rng = 0x9e3779b97f4a7c15ull * (i + 1);
        w->watch_ns = WS_WATCH_MIN_NS;
    }
    for (unsigned i = 0; i < workers; i++) {
        if (pthread_create(&rt->workers[i].thread, NULL, worker_main, &rt->workers[i]) != 0) {
            stop_workers(rt, i);
            free_memory(rt);
            return NULL;
        }
    }
    return rt;

no_workers:
    while (ready-- > 0) {
        pthread_mutex_destroy(&rt->workers[ready].owned.lock);
        pthread_mutex_destroy(&rt->workers[ready].park_lock);
        pthread_cond_destroy(&rt->workers[ready].park_cond);
    }
    pthread_mutex_destroy(&rt->outside.lock);
no_owned_lock:
    pthread_mutex_destroy(&rt->idle_lock);
no_idle_lock:
    injector_destroy(&rt->injector);
no_injector:
    free(rt->workers);
    free(rt);
    return NULL;
}

struct ws_runtime *ws_runtime_new_default(unsigned workers)
{
    struct parker *p = parker_new(); /* our reference, released by free */
    if (!p)
        return NULL;
    struct ws_runtime *rt = ws_runtime_new(workers, parker_driver(p));
    if (!rt) {
        parker_release(p);
        return NULL;
    }
    rt->own_parker = p;
    return rt;
}

void ws_runtime_free(struct ws_runtime *rt)
{
    if (current) {
        fputs("ws_runtime_free: called from a worker thread\n", stderr);
        abort();
    }
    for (unsigned i = 0; i <= rt->nworkers; i++) {
        struct ws_owned *o = owned_list(rt, i);
        pthread_mutex_lock(&o->lock);
        o->closing = true; /* no more spawns */
        pthread_mutex_unlock(&o->lock);
    }
    /* BEGIN STUDENT: runtime.h contract 6: where can a task be when the runtime goes (in a poll, queued in any of three places, waiting on a waker), and who gives back each of its references? (docs/07-work-stealing.md#shutdown) */
    stop_workers(rt, rt->nworkers);
    /* Only this thread is left. Dropping a future may wake other tasks
     * (onto the injector: we are not a worker) or drop join handles. */
    for (;;) {
        struct task *t = any_owned(rt);
        if (!t)
            break;
        task_shutdown(t); /* its release hook unlinks it */
    }
    for (unsigned i = 0; i < rt->nworkers; i++) {
        struct ws_worker *w = &rt->workers[i];
        struct task *t;
        while ((t = deque_take(&w->deque)))
            task_drop_reference(t); /* -1: a queue entry of a task now complete */
        if ((t = atomic_exchange_explicit(&w->lifo, NULL, memory_order_relaxed)))
            task_drop_reference(t); /* -1: the slot's queue entry */
    }
    struct task *t;
    while ((t = injector_pop(&rt->injector)))
        task_drop_reference(t); /* -1: a queue entry */
    /* END STUDENT */
    free_memory(rt);
}

/* ---- spawning -------------------------------------------------------------------------- */

struct join_handle *ws_spawn(struct ws_runtime *rt, struct future fut, task_output_drop_fn drop_output)
{
    struct join_handle *jh;
    /* this worker's own list (a line no other worker writes, unless it
     * completes one of our tasks), or the outside one */
    unsigned idx = current && current->rt == rt ? current->index : rt->nworkers;
    struct ws_owned *o = owned_list(rt, idx);
    pthread_mutex_lock(&o->lock);
    if (o->closing) {
        pthread_mutex_unlock(&o->lock);
        return NULL;
    }
    struct task *t = task_new(&rt->sched, fut, drop_output, &jh);
    if (!t) {
        pthread_mutex_unlock(&o->lock);
        return NULL;
    }
    /* the list reference, at the head */
    t->owned_list = (unsigned char)idx; /* published with the task by ws_schedule below */
    t->owned_prev = NULL;
    t->owned_next = o->head;
    if (o->head)
        o->head->owned_prev = t;
    o->head = t;
    o->live++;
    pthread_mutex_unlock(&o->lock);
    /* the queue reference */
    ws_schedule(&rt->sched, t, SCHEDULE_SPAWN);
    return jh;
}

bool ws_block_on(struct ws_runtime *rt, struct future fut, void *out)
{
    struct join_handle *jh = ws_spawn(rt, fut, NULL);
    if (!jh)
        return false;
    struct join_future join;
    join_future_init(&join, jh, out);
    enum join_status st = JOIN_CANCELLED;
    block_on(join_future_as_future(&join), &st);
    join_handle_drop(jh);
    return st == JOIN_OK;
}

struct ws_runtime *ws_current(void) { return current ? current->rt : NULL; }
int ws_current_worker(void) { return current ? (int)current->index : -1; }
unsigned ws_workers(struct ws_runtime *rt) { return rt->nworkers; }

/* ---- parking one worker (given; declared in runtime_given.h) ------------------ */

/* Wakes w if it is parked; else makes its next park return at once. */
static inline void worker_unpark(struct ws_worker *w)
{
    /* seq_cst: pairs with the parker's CAS into PARKED_*; and what we did
     * before (pushed a task, set shutdown) is seen when it wakes */
    int prev = atomic_exchange_explicit(&w->park_state, PARK_NOTIFIED, memory_order_seq_cst);
    if (prev == PARK_CONDVAR) {
        trace_unpark(); /* a driver's unpark is traced by driver_unpark (driver.h) */
        /* The parker holds park_lock from its check to its wait: taking it
         * here means it is waiting (or saw NOTIFIED): the signal is not lost. */
        pthread_mutex_lock(&w->park_lock);
        pthread_mutex_unlock(&w->park_lock);
        pthread_cond_signal(&w->park_cond);
    } else if (prev == PARK_DRIVER) {
        driver_unpark(w->rt->driver); /* its token is not lost either (driver.h) */
    }
}

/* Sleeps until worker_unpark, the timeout (ns; DRIVER_PARK_FOREVER: none)
 * or a spurious return. The first idle worker to get here parks in the
 * driver, so timers (and I/O) still fire; the others on their condition
 * variable. */
static inline void worker_park(struct ws_worker *w, int64_t timeout_ns)
{
    struct ws_runtime *rt = w->rt;
    int expect = PARK_EMPTY;
    /* acquire: pairs with the release store that gave the driver back */
    if (!atomic_exchange_explicit(&rt->driver_busy, true, memory_order_acquire)) {
        if (atomic_compare_exchange_strong_explicit(&w->park_state, &expect, PARK_DRIVER,
                                                    memory_order_seq_cst, memory_order_seq_cst))
            driver_park(rt->driver, timeout_ns);
        atomic_store_explicit(&w->park_state, PARK_EMPTY, memory_order_seq_cst); /* consume */
        atomic_store_explicit(&rt->driver_busy, false, memory_order_release);    /* give it back */
        return;
    }
    struct timespec until;
    if (timeout_ns >= 0) {
        clock_gettime(CLOCK_MONOTONIC, &until); /* park_cond's clock */
        until.tv_sec += timeout_ns / 1000000000 + (until.tv_nsec + timeout_ns % 1000000000) / 1000000000;
        until.tv_nsec = (until.tv_nsec + timeout_ns % 1000000000) % 1000000000;
    }
    pthread_mutex_lock(&w->park_lock);
    if (atomic_compare_exchange_strong_explicit(&w->park_state, &expect, PARK_CONDVAR,
                                                memory_order_seq_cst, memory_order_seq_cst)) {
        trace_park_begin(timeout_ns); /* empty unless built with -DLAB_TRACE (trace.h) */
        bool woken = true;
        while (atomic_load_explicit(&w->park_state, memory_order_seq_cst) == PARK_CONDVAR) {
            if (timeout_ns < 0) {
                pthread_cond_wait(&w->park_cond, &w->park_lock);
            } else if (pthread_cond_timedwait(&w->park_cond, &w->park_lock, &until) == ETIMEDOUT) {
                woken = false;
                break;
            }
        }
        trace_park_end(woken);
    }
    atomic_store_explicit(&w->park_state, PARK_EMPTY, memory_order_seq_cst); /* consume */
    pthread_mutex_unlock(&w->park_lock);
}

/* ---- test hooks ---- */

void ws_test_set_hook(struct ws_runtime *rt, ws_test_hook_fn fn, void *arg)
{
    if (fn)
        rt->test_arg = arg;
    atomic_store_explicit(&rt->test_hook, fn, memory_order_release);
}

unsigned ws_test_sleepers(struct ws_runtime *rt)
{
    pthread_mutex_lock(&rt->idle_lock);
    unsigned n = rt->nsleepers;
    pthread_mutex_unlock(&rt->idle_lock);
    return n;
}

size_t ws_test_live_tasks(struct ws_runtime *rt)
{
    size_t n = 0;
    for (unsigned i = 0; i <= rt->nworkers; i++) {
        struct ws_owned *o = owned_list(rt, i);
        pthread_mutex_lock(&o->lock);
        n += o->live;
        pthread_mutex_unlock(&o->lock);
    }
    return n;
}

struct deque *ws_test_own_deque(void) { return current ? &current->deque : NULL; }

void *ws_test_idle_page(struct ws_runtime *rt) { return (void *)&rt->idle_state; }
void *ws_test_lifo_page(struct ws_runtime *rt, unsigned worker)
{
    return worker < rt->nworkers ? (void *)&rt->workers[worker].lifo : NULL;
}
