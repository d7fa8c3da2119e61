/* trace.h - what the runtime did, as a Chrome Trace Event file for Perfetto.
 *
 * A compile-time switch. Built with -DLAB_TRACE (`make trace`), the runtime
 * records its events into a buffer per thread and writes them, when the
 * program exits (or when trace_write() is called), as Chrome Trace Event JSON:
 * the {"traceEvents": [...]} file that ui.perfetto.dev and chrome://tracing
 * open as it is, and that grader/tracing/trace_render.py draws. Built without it,
 * every hook below is an empty static inline function: the compiler removes
 * the calls and the program is the same machine code as without this header
 * (docs/tracing.md#overhead shows the comparison).
 *
 * Where the hooks sit, so that a student's runtime is traced too: in common/
 * code every stage calls (driver_park, driver_unpark, coop_proceed), and in
 * the given parts of the solutions, outside the student's marked regions
 * (task.h/task.c and executor.c of stage 03, time_driver.c of stage 05,
 * reactor.h/reactor.c of stage 06, runtime.h/runtime.c of stage 07).
 *
 * Events (one row each in the JSON; "ph" is the trace-event phase):
 *   spawn           "i"   a task was created; its id, future type and spawn site
 *   poll            "B"/"E" one run of a task (a poll, or the drop of a
 *                         cancelled future) on this thread; name "task N"
 *   wake            "B"/"E" a waker was called; args.source is where it came
 *                         from: "task" (args.by: the task being polled on
 *                         this thread), "timer", "io" or "outside" (any other
 *                         thread or place); the wake's arrow is a flow
 *                         "s" here and "f" at the woken task's next poll
 *   complete        "i"   a task finished or was cancelled
 *   park            "B"/"E" the thread sleeps in its driver (args: timeout)
 *   unpark          "i"   a driver was unparked (any thread)
 *   budget          "i"   a leaf future found the cooperative budget spent
 *   time driver / reactor  "B"/"E" a driver's turn: wakes inside come
 *                         from timers / from I/O readiness
 *   timer fire      "i"   timers fired in that turn (args.count)
 *   readiness       "i"   an I/O source became ready (stage 06)
 *   steal           "i"   a worker took tasks from another (stage 07)
 *   injector pull   "i"   a worker took tasks from the global queue (stage 07)
 *   stall           "i"   a poll ran longer than the stall threshold
 * plus "M" metadata rows that name the process and each thread.
 *
 * Environment (read once, when the program starts):
 *   LAB_TRACE_FILE      where to write (default trace.json)
 *   LAB_TRACE=0         record nothing (the hooks are compiled in but off)
 *   LAB_TRACE_STALL_MS  the stall lamp's threshold (default 10 ms; 0: off)
 *   LAB_TRACE_MAX_EVENTS  per thread, default 4,000,000; further events are
 *                       dropped and counted (written into the file)
 *
 * The stall lamp: a poll longer than the threshold prints, at its end,
 *   trace: stall: task 2 (examples/03-executor/three_tasks.c:83, struct yielder)
 *       polled for 20.1 ms (threshold 10 ms)
 * on stderr, and leaves a "stall" instant in the trace.
 *
 * ---- for a scheduler or a driver of your own ----
 * What stages 06 and 07 do (docs/tracing.md#how-the-hooks-reach-your-code):
 * A scheduler's thread names itself: trace_thread_name("worker 0").
 * A scheduler that runs tasks through stage 03's task_run() gets spawn, poll,
 * wake and the stall lamp from task.h with nothing to add; its release hook
 * calls trace_task_complete(&t->trace) (executor.c and stage 07's ws_release
 * show it), and:
 *   - stage 07: trace_steal(victim, n) after a successful steal of n tasks
 *     from another worker; trace_injector_pull(n) after a worker took n tasks
 *     from the injector (runtime.c wraps deque_steal_half, deque_steal and
 *     injector_pop for it); parks and unparks are traced by
 *     driver_park/driver_unpark; a worker that parks on something else (a
 *     condition variable) brackets it with trace_park_begin(timeout_ns) and
 *     trace_park_end(woken), and its waker calls trace_unpark().
 *   - stage 06: the reactor's dispatch (after epoll_wait returns) is
 *     bracketed with trace_source_begin(TRACE_SRC_IO) and trace_source_end(),
 *     with trace_io_ready(token, events) per event, so every wake inside is
 *     drawn as coming from I/O (reactor.c's reactor_dispatch_traced).
 *
 * Threads: every hook may be called from any thread; each thread records into
 * its own buffer without a lock. trace_write() may run while other threads
 * record: it writes what they had published when it looked.
 */
#ifndef LAB_TRACE_H
#define LAB_TRACE_H

#include <stdbool.h>
#include <stdint.h>

/* Where a wake comes from, when no task is being polled on the waking thread. */
enum trace_source {
    TRACE_SRC_OUTSIDE = 0, /* a thread (or a place) that is none of the below */
    TRACE_SRC_TASK = 1,    /* the task being polled on this thread (set by the poll hooks) */
    TRACE_SRC_TIMER = 2,   /* a driver firing timers (stage 05) */
    TRACE_SRC_IO = 3,      /* a reactor dispatching readiness (stage 06) */
};

#ifdef LAB_TRACE

#include <stdatomic.h>

/* What a traced task carries: embed it in the task (task.h does). Written by
 * trace_task_spawn before the task is published to any other thread. */
struct trace_task {
    uint32_t id;                 /* 1, 2, ... in spawn order; 0: spawned before tracing */
    int line;                    /* spawn site */
    const char *file;            /* spawn site; a string literal (__FILE__) or NULL */
    const char *name;            /* the future's type (future_vtable.name) or NULL */
    _Atomic uint32_t flow;       /* the pending wake arrow's id, 0 for none */
};

/* What trace_poll_begin hands to trace_poll_end: the poll's end must not
 * touch the task, which the poll may have freed. */
struct trace_poll {
    uint64_t t0;
    const char *file;
    const char *name;
    uint32_t id;
    uint32_t outer;  /* the task this thread was polling before (0: none) */
    int line;
};

/* True while recording (set once, before main, from LAB_TRACE): the hooks
 * below that sit on hot paths test it inline before calling in, so a build
 * with tracing compiled in but switched off pays a load and a branch. */
extern bool trace_on_;

/* Whether this run records (LAB_TRACE=0: no). A traced wrapper tests it
 * first, so that a switched-off build does no more than that. */
static inline bool trace_enabled(void) { return trace_on_; }
/* The next spawn on this thread was written at file:line (the spawn macros
 * of executor.h call it; a scheduler's own spawn macro may too). */
static inline void trace_spawn_site(const char *file, int line);
/* A task was created: gives it an id, takes the pending spawn site. Until
 * then (and when not recording) *tt is not read by any hook. */
static inline void trace_task_spawn(struct trace_task *tt, const char *future_name);
/* One run of the task begins on this thread (cancelled: it drops its future). */
static inline struct trace_poll trace_poll_begin(struct trace_task *tt, bool cancelled);
/* ... and ends; lights the stall lamp when it took too long. */
static inline void trace_poll_end(struct trace_poll p);
/* The task completed (or was cancelled): from a scheduler's release hook. */
static inline void trace_task_complete(const struct trace_task *tt);
/* A waker of the task is being called; arrow: whether to draw a wake arrow
 * to the task's next poll (false for a wake that cannot lead to one, for
 * instance on a completed task). */
static inline void trace_wake_begin(struct trace_task *tt, bool arrow);
static inline void trace_wake_end(void);
/* A driver's turn whose wakes come from `src` (timer, io). Turns nest (the
 * reactor's inside the time driver's): the end gives the outer one back. */
void trace_source_begin(enum trace_source src);
void trace_source_end(void);
/* The thread parks in a driver / is back (woken: an unpark was consumed). */
static inline void trace_park_begin(int64_t timeout_ns);
static inline void trace_park_end(bool woken);
static inline void trace_unpark(void);
/* The cooperative budget ran out inside the task being polled. */
static inline void trace_budget_exhausted(void);
/* n timers fired in the current turn. */
void trace_timer_fire(uint64_t count);
/* Stage 06: readiness `events` (EPOLLIN|...) for registration `token`. */
void trace_io_ready(uint64_t token, uint32_t events);
/* Stage 07: this worker stole n tasks from worker `victim`; took n from the injector. */
void trace_steal(uint32_t victim, uint32_t n);
void trace_injector_pull(uint32_t n);
/* Names this thread's track ("executor", "worker 1"); copied. */
void trace_thread_name(const char *name);
/* Writes the file now (LAB_TRACE_FILE); also done at exit. 0, or -1 (errno). */
int trace_write(void);

/* The hot hooks: a test inline, the work in trace.c. */
void trace_spawn_site_(const char *file, int line);
void trace_task_spawn_(struct trace_task *tt, const char *future_name);
struct trace_poll trace_poll_begin_(struct trace_task *tt, bool cancelled);
void trace_poll_end_(struct trace_poll p);
void trace_task_complete_(const struct trace_task *tt);
void trace_wake_begin_(struct trace_task *tt, bool arrow);
void trace_wake_end_(void);
void trace_park_begin_(int64_t timeout_ns);
void trace_park_end_(bool woken);
void trace_unpark_(void);
void trace_budget_exhausted_(void);

static inline void trace_spawn_site(const char *file, int line)
{
    if (trace_on_)
        trace_spawn_site_(file, line);
}
static inline void trace_task_spawn(struct trace_task *tt, const char *future_name)
{
    if (trace_on_)
        trace_task_spawn_(tt, future_name);
}
static inline struct trace_poll trace_poll_begin(struct trace_task *tt, bool cancelled)
{
    if (trace_on_)
        return trace_poll_begin_(tt, cancelled);
    return (struct trace_poll){ .id = 0 };
}
static inline void trace_poll_end(struct trace_poll p)
{
    if (trace_on_)
        trace_poll_end_(p);
}
static inline void trace_task_complete(const struct trace_task *tt)
{
    if (trace_on_)
        trace_task_complete_(tt);
}
static inline void trace_wake_begin(struct trace_task *tt, bool arrow)
{
    if (trace_on_)
        trace_wake_begin_(tt, arrow);
}
static inline void trace_wake_end(void)
{
    if (trace_on_)
        trace_wake_end_();
}
static inline void trace_park_begin(int64_t timeout_ns)
{
    if (trace_on_)
        trace_park_begin_(timeout_ns);
}
static inline void trace_park_end(bool woken)
{
    if (trace_on_)
        trace_park_end_(woken);
}
static inline void trace_unpark(void)
{
    if (trace_on_)
        trace_unpark_();
}
static inline void trace_budget_exhausted(void)
{
    if (trace_on_)
        trace_budget_exhausted_();
}

#else /* !LAB_TRACE: every hook is empty, and disappears when inlined */

struct trace_task { char unused_; };
struct trace_poll { char unused_; };

static inline bool trace_enabled(void) { return false; }
static inline void trace_spawn_site(const char *file, int line) { (void)file; (void)line; }
static inline void trace_task_spawn(struct trace_task *tt, const char *n) { (void)tt; (void)n; }
static inline struct trace_poll trace_poll_begin(struct trace_task *tt, bool c)
{
    (void)tt; (void)c;
    return (struct trace_poll){ 0 };
}
static inline void trace_poll_end(struct trace_poll p) { (void)p; }
static inline void trace_task_complete(const struct trace_task *tt) { (void)tt; }
static inline void trace_wake_begin(struct trace_task *tt, bool arrow) { (void)tt; (void)arrow; }
static inline void trace_wake_end(void) {}
static inline void trace_source_begin(enum trace_source src) { (void)src; }
static inline void trace_source_end(void) {}
static inline void trace_park_begin(int64_t timeout_ns) { (void)timeout_ns; }
static inline void trace_park_end(bool woken) { (void)woken; }
static inline void trace_unpark(void) {}
static inline void trace_budget_exhausted(void) {}
static inline void trace_timer_fire(uint64_t count) { (void)count; }
static inline void trace_io_ready(uint64_t token, uint32_t events) { (void)token; (void)events; }
static inline void trace_steal(uint32_t victim, uint32_t n) { (void)victim; (void)n; }
static inline void trace_injector_pull(uint32_t n) { (void)n; }
static inline void trace_thread_name(const char *name) { (void)name; }
static inline int trace_write(void) { return 0; }

#endif /* LAB_TRACE */
#endif
