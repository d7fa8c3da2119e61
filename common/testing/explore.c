/* explore.c - the wrapped synchronisation calls, held locks, spurious
 * wakeups, the explore waker and the schedule explorer (explore.h).
 *
 * The linker sends every call of a wrapped function in the test binary's
 * own objects (the student's code, the tests, common/) to __wrap_<name>
 * here; __real_<name> is the C library's. Code in this file therefore calls
 * __real_ functions only: a plain pthread_mutex_lock here would call itself.
 * Calls inside shared libraries (the C library's own, Criterion's) are not
 * wrapped.
 *
 * Without a test asking for it a wrapper costs two thread-local or relaxed
 * loads and passes the call on.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "explore.h"
#include "harness.h"

/* ---- the real functions --------------------------------------------------------- */

int __real_pthread_mutex_lock(pthread_mutex_t *m);
int __real_pthread_mutex_trylock(pthread_mutex_t *m);
int __real_pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abs);
int __real_pthread_mutex_unlock(pthread_mutex_t *m);
int __real_pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m);
int __real_pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abs);
int __real_pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clk, const struct timespec *abs);
int __real_pthread_cond_signal(pthread_cond_t *c);
int __real_pthread_cond_broadcast(pthread_cond_t *c);
int __real_pthread_spin_lock(pthread_spinlock_t *l);
int __real_pthread_spin_trylock(pthread_spinlock_t *l);
int __real_pthread_spin_unlock(pthread_spinlock_t *l);
int __real_pthread_rwlock_rdlock(pthread_rwlock_t *l);
int __real_pthread_rwlock_wrlock(pthread_rwlock_t *l);
int __real_pthread_rwlock_unlock(pthread_rwlock_t *l);

/* ---- naming places ------------------------------------------------------------------ */

/* The linker's name for the start of the test binary's first segment. */
extern const char __executable_start[];

/* Whether a code address lies in the test binary itself (the student's
 * code, the tests, common/), not in a shared library. */
static bool in_binary(const Dl_info *info)
{
    static Dl_info self;
    static atomic_bool known; /* relaxed: dladdr gives every thread the same answer */
    if (!atomic_load_explicit(&known, memory_order_relaxed)) {
        if (!dladdr((const void *)in_binary, &self))
            return false;
        atomic_store_explicit(&known, true, memory_order_relaxed);
    }
    return info->dli_fbase == self.dli_fbase;
}

/* "function+0x1c" for a code address: the nearest exported symbol (the
 * grader links with -rdynamic). A static function exports none, and the
 * student's are often static (a driver's park, a fire callback): an address
 * in the test binary is then "__executable_start+0x1a2b", its offset from
 * the binary's start, which the grader turns into "function at file:line"
 * as it does the exported ones (records.py, Symbolizer.sites). Elsewhere,
 * the bare address. */
static void site_name(const void *pc, char *buf, size_t n)
{
    Dl_info info;
    if (pc && dladdr(pc, &info) && info.dli_sname)
        snprintf(buf, n, "%s+0x%lx", info.dli_sname, (unsigned long)((const char *)pc - (const char *)info.dli_saddr));
    else if (pc && dladdr(pc, &info) && in_binary(&info))
        snprintf(buf, n, "__executable_start+0x%lx", (unsigned long)((const char *)pc - __executable_start));
    else
        snprintf(buf, n, "%p", pc);
}

/* ---- held locks ------------------------------------------------------------------ */

#define MAX_HELD 16

struct held {
    const void *lock;
    const void *site; /* the return address of the call that took it */
    const char *kind; /* "mutex", "spinlock", "rwlock" */
};

/* Per thread: which of the explorer's threads this is, and what it holds. */
static _Thread_local struct {
    int role;                     /* 0: A, 1: B, -1: not the explorer's (the zero value means A: see role_of) */
    bool controlled;              /* role is meaningful */
    unsigned nheld;               /* may exceed MAX_HELD: only the first MAX_HELD are named */
    struct held held[MAX_HELD];
    bool in_point_hook;           /* inside lab_sync_on_point's fn: its own calls are not points */
} me;

static atomic_bool tracking; /* relaxed: a switch the test flips while no code under test runs */

void lab_sync_track(bool on) { atomic_store_explicit(&tracking, on, memory_order_relaxed); }
unsigned lab_sync_held(void) { return me.nheld; }

static inline bool tracked(void) { return atomic_load_explicit(&tracking, memory_order_relaxed); }

static void held_push(const void *lock, const void *site, const char *kind)
{
    if (me.nheld < MAX_HELD)
        me.held[me.nheld] = (struct held){ lock, site, kind };
    me.nheld++;
}

static void held_pop(const void *lock)
{
    unsigned top = me.nheld < MAX_HELD ? me.nheld : MAX_HELD;
    for (unsigned i = top; i-- > 0;) {
        if (me.held[i].lock == lock) {
            memmove(&me.held[i], &me.held[i + 1], (top - i - 1) * sizeof me.held[0]);
            me.nheld--;
            return;
        }
    }
    /* not found: taken before tracking began (or beyond MAX_HELD) */
    if (me.nheld > MAX_HELD)
        me.nheld--;
}

static pthread_mutex_t violation_lock = PTHREAD_MUTEX_INITIALIZER; /* protects violation, violated */
static char violation[640];
static bool violated;

void lab_sync_reset(void)
{
    __real_pthread_mutex_lock(&violation_lock);
    violated = false;
    violation[0] = 0;
    __real_pthread_mutex_unlock(&violation_lock);
}

const char *lab_sync_wake_under_lock(void)
{
    __real_pthread_mutex_lock(&violation_lock);
    const char *r = violated ? violation : NULL;
    __real_pthread_mutex_unlock(&violation_lock);
    return r; /* stays valid until lab_sync_reset: written once per violation */
}

/* Whoever called waker_wake: the first frame of the stack, from the
 * explore waker's caller (`caller`, its return address) outward, that is
 * not one of common/'s exported waker calls. The frames below `caller` are
 * this file's own, and static functions have no name to tell them by, so
 * the walk starts at `caller`: a static function of the student's (a
 * driver's park, with waker_wake inlined into it) is named, not skipped. */
static void waking_site(const void *caller, char *buf, size_t n)
{
    void *frames[12];
    int got = backtrace(frames, 12);
    int from = 1;
    while (from < got && frames[from] != caller)
        from++;
    if (from == got) { /* not on the stack as seen: name the caller itself */
        site_name((const char *)caller - 1, buf, n);
        return;
    }
    for (int i = from; i < got; i++) {
        Dl_info info;
        const char *s = dladdr(frames[i], &info) && info.dli_sname ? info.dli_sname : "";
        if (strncmp(s, "explore_", 8) == 0 || strncmp(s, "waker_", 6) == 0 || strncmp(s, "wake_obj_", 9) == 0)
            continue;
        site_name((const char *)frames[i] - 1, buf, n);
        return;
    }
    snprintf(buf, n, "?");
}

/* A wake on this thread: a violation when it holds a lock. `caller`: the
 * return address of the explore waker's wake call. */
static void check_wake(const char *label, const char *how, const void *caller)
{
    if (me.nheld == 0)
        return;
    struct held h = me.held[(me.nheld < MAX_HELD ? me.nheld : MAX_HELD) - 1];
    char taken[160], waker_site[160];
    site_name((const char *)h.site - 1, taken, sizeof taken);
    waking_site(caller, waker_site, sizeof waker_site);
    __real_pthread_mutex_lock(&violation_lock);
    if (!violated) {
        violated = true;
        snprintf(violation, sizeof violation,
                 "the waker \"%s\" was %s (in %s) while that thread held %u lock(s); the last one taken, "
                 "a %s at %p, was locked in %s. A wake runs code the lock's owner does not control "
                 "(a task's poll, another future's drop), and that code may take a lock this thread "
                 "holds",
                 label, how, waker_site, me.nheld, h.kind, h.lock, taken);
    }
    __real_pthread_mutex_unlock(&violation_lock);
}

/* ---- spurious wakeups ------------------------------------------------------------ */

static atomic_uint spurious_left; /* relaxed: a budget, ordered by nothing else */
static atomic_uint spurious_made;

void lab_sync_spurious(unsigned n)
{
    atomic_store_explicit(&spurious_made, 0, memory_order_relaxed);
    atomic_store_explicit(&spurious_left, n, memory_order_relaxed);
}

unsigned lab_sync_spurious_made(void) { return atomic_load_explicit(&spurious_made, memory_order_relaxed); }

/* Takes one spurious return from the budget, if there is one left. */
static bool take_spurious(void)
{
    unsigned left = atomic_load_explicit(&spurious_left, memory_order_relaxed);
    while (left > 0)
        if (atomic_compare_exchange_weak_explicit(&spurious_left, &left, left - 1, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            atomic_fetch_add_explicit(&spurious_made, 1, memory_order_relaxed);
            return true;
        }
    return false;
}

/* Condition waits go through wrapped_wait while held locks are tracked or
 * spurious returns are asked for. */
static inline bool waits_wrapped(void)
{
    return tracked() || atomic_load_explicit(&spurious_left, memory_order_relaxed) > 0;
}

/* ---- the scheduler ------------------------------------------------------------------- */

enum op { OP_LOCK, OP_TRYLOCK, OP_UNLOCK, OP_WAIT, OP_SIGNAL, OP_BROADCAST,
          OP_CLONE, OP_WAKE, OP_WAKE_BY_REF, OP_DROP, OP_WAITED };
static const char *const OP_NAME[] = { "lock", "trylock", "unlock", "cond wait", "cond signal", "cond broadcast",
                                       "waker clone", "waker wake", "waker wake_by_ref", "waker drop",
                                       "cond waited" };

enum ev_kind { EV_POINT, EV_PREEMPT, EV_BLOCKED, EV_WAITS, EV_WOKEN, EV_RETURNS };

struct event {
    enum ev_kind kind;
    int who;             /* 0: A, 1: B */
    unsigned n;          /* EV_POINT: the thread's point number, from 1 */
    enum op op;
    const void *obj;
    const void *site;
    bool candidate;      /* EV_POINT: the other thread could run here (a preemption would change something) */
};

#define FREE (-1)          /* turn: nobody is scheduled; both run as they like */
#define MAX_EVENTS 256
#define MAX_PRE 4

struct pre { int who; unsigned at; };

static struct {
    pthread_mutex_t mu;      /* protects everything below (a real mutex: never wrapped) */
    pthread_cond_t cv;       /* broadcast on every change of turn, done or waiting */
    bool ready;              /* mu and cv initialized */
    bool active;             /* a schedule is running */
    int turn;                /* 0, 1 or FREE */
    bool done[2];
    bool waiting[2];         /* inside a real condition wait */
    bool blocked[2];         /* a lock attempt failed, waiting to try again */
    unsigned points[2];
    struct pre pre[MAX_PRE];
    unsigned npre, next_pre;
    unsigned last_pre_event; /* the event index of the last preemption taken */
    bool lost;               /* control was given up (a thread did not come back) */
    unsigned long handoffs;  /* switches for a failed lock since the last point */
    struct event ev[MAX_EVENTS];
    unsigned nev;
} S = { .mu = PTHREAD_MUTEX_INITIALIZER };

static inline bool controlled(void) { return me.controlled; }

static void add_event(enum ev_kind kind, int who, unsigned n, enum op op, const void *obj, const void *site,
                      bool candidate)
{
    if (S.nev < MAX_EVENTS)
        S.ev[S.nev++] = (struct event){ kind, who, n, op, obj, site, candidate };
}

/* Called with S.mu held: until this thread may run. A thread that does not
 * come back within 2 s (it blocked somewhere the explorer does not see)
 * loses the schedule its control: from then on both run freely. */
static void wait_turn(void)
{
    int self = me.role, other = 1 - self;
    unsigned waited = 0;
    while (S.active && S.turn != self && S.turn != FREE) {
        if (S.waiting[other]) {
            S.turn = self; /* the other is asleep in a condition wait: nothing to wait for */
            break;
        }
        struct timespec until;
        lab_deadline_after_ms(&until, 100);
        __real_pthread_cond_timedwait(&S.cv, &S.mu, &until);
        if (++waited == 20) {
            S.lost = true;
            S.turn = FREE;
            __real_pthread_cond_broadcast(&S.cv);
        }
    }
}

/* ---- a hook at every point ------------------------------------------------------------ */

static _Atomic(lab_sync_point_fn) point_fn; /* release/acquire: publishes point_arg */
static void *point_arg;                     /* written before point_fn, read after it */

void lab_sync_on_point(lab_sync_point_fn fn, void *arg)
{
    if (fn)
        point_arg = arg;
    /* release: pairs with the acquire load in run_point_hook, so a thread
     * that sees fn sees its arg */
    atomic_store_explicit(&point_fn, fn, memory_order_release);
}

void lab_sync_site(const void *site, char *buf, size_t n) { site_name(site, buf, n); }

static void run_point_hook(enum op op, const void *site)
{
    if (me.in_point_hook)
        return;
    lab_sync_point_fn fn = atomic_load_explicit(&point_fn, memory_order_acquire); /* pairs with lab_sync_on_point */
    if (!fn)
        return;
    me.in_point_hook = true;
    fn(OP_NAME[op], site, me.nheld, point_arg);
    me.in_point_hook = false;
}

/* A synchronisation point of the calling thread, before its operation (or
 * after it, for an unlock): the point hook runs, and the schedule may switch
 * to the other thread. */
static void point(enum op op, const void *obj, const void *site)
{
    run_point_hook(op, site);
    if (!controlled())
        return;
    int self = me.role, other = 1 - self;
    __real_pthread_mutex_lock(&S.mu);
    if (S.active) {
        /* counted and shown also once the other thread has returned (FREE) */
        unsigned n = ++S.points[self];
        bool can = S.turn != FREE && !S.done[other] && !S.waiting[other];
        add_event(EV_POINT, self, n, op, obj, site, can);
        S.handoffs = 0;
        if (S.next_pre < S.npre && S.pre[S.next_pre].who == self && S.pre[S.next_pre].at == n) {
            S.next_pre++;
            if (can) {
                S.last_pre_event = S.nev - 1;
                add_event(EV_PREEMPT, self, n, op, obj, site, false);
                S.turn = other;
                __real_pthread_cond_broadcast(&S.cv);
                wait_turn();
            }
        }
    }
    __real_pthread_mutex_unlock(&S.mu);
}

/* The calling thread could not take `lock`: let the other run, then retry. */
static void blocked_on(const void *lock, const void *site, bool first)
{
    int self = me.role, other = 1 - self;
    __real_pthread_mutex_lock(&S.mu);
    bool handoff = S.active && S.turn != FREE && !S.done[other] && !S.waiting[other];
    if (handoff && ++S.handoffs > 100000) {
        S.lost = true; /* a deadlock between A and B: let it show as one */
        S.turn = FREE;
        __real_pthread_cond_broadcast(&S.cv);
        handoff = false;
    }
    if (handoff) {
        if (first)
            add_event(EV_BLOCKED, self, 0, OP_LOCK, lock, site, false);
        S.blocked[self] = true;
        S.turn = other;
        __real_pthread_cond_broadcast(&S.cv);
        wait_turn();
        S.blocked[self] = false;
    }
    __real_pthread_mutex_unlock(&S.mu);
    if (!handoff)
        sched_yield();
}

static void thread_returns(void)
{
    __real_pthread_mutex_lock(&S.mu);
    add_event(EV_RETURNS, me.role, 0, OP_LOCK, NULL, NULL, false);
    S.done[me.role] = true;
    S.turn = FREE; /* one thread left: nothing to schedule against */
    __real_pthread_cond_broadcast(&S.cv);
    __real_pthread_mutex_unlock(&S.mu);
    me.controlled = false;
}

/* Takes a mutex-like lock under the scheduler: try, and when it is taken,
 * let the other thread run until it can be. */
#define CONTROLLED_ACQUIRE(trylock_call, lock, site)                     \
    do {                                                                 \
        bool first_ = true;                                              \
        while ((trylock_call) != 0) {                                    \
            blocked_on((lock), (site), first_);                          \
            first_ = false;                                              \
        }                                                                \
    } while (0)

/* ---- the wrappers ---------------------------------------------------------------------- */

#define SITE __builtin_return_address(0)

int __wrap_pthread_mutex_lock(pthread_mutex_t *m)
{
    if (!tracked())
        return __real_pthread_mutex_lock(m);
    const void *site = SITE;
    int rc = 0;
    point(OP_LOCK, m, site);
    if (controlled()) {
        CONTROLLED_ACQUIRE((rc = __real_pthread_mutex_trylock(m)) == EBUSY, m, site);
    } else {
        rc = __real_pthread_mutex_lock(m);
    }
    if (rc == 0)
        held_push(m, site, "mutex");
    return rc;
}

int __wrap_pthread_mutex_trylock(pthread_mutex_t *m)
{
    if (!tracked())
        return __real_pthread_mutex_trylock(m);
    point(OP_TRYLOCK, m, SITE);
    int rc = __real_pthread_mutex_trylock(m);
    if (rc == 0)
        held_push(m, SITE, "mutex");
    return rc;
}

int __wrap_pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abs)
{
    if (!tracked())
        return __real_pthread_mutex_timedlock(m, abs);
    const void *site = SITE;
    int rc;
    point(OP_LOCK, m, site);
    if (controlled()) {
        bool first = true;
        while ((rc = __real_pthread_mutex_trylock(m)) == EBUSY) {
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now); /* timedlock's clock */
            if (now.tv_sec > abs->tv_sec || (now.tv_sec == abs->tv_sec && now.tv_nsec >= abs->tv_nsec))
                return ETIMEDOUT;
            blocked_on(m, site, first);
            first = false;
        }
    } else {
        rc = __real_pthread_mutex_timedlock(m, abs);
    }
    if (rc == 0)
        held_push(m, site, "mutex");
    return rc;
}

int __wrap_pthread_mutex_unlock(pthread_mutex_t *m)
{
    if (!tracked())
        return __real_pthread_mutex_unlock(m);
    held_pop(m);
    int rc = __real_pthread_mutex_unlock(m);
    point(OP_UNLOCK, m, SITE);
    return rc;
}

/* A condition wait of the code under test: maybe spurious; under the
 * scheduler the other thread runs while this one sleeps. `real` does the
 * wait itself. */
static int wrapped_wait(pthread_cond_t *c, pthread_mutex_t *m, const void *site,
                        int (*real)(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *),
                        clockid_t clk, const struct timespec *abs)
{
    point(OP_WAIT, c, site);
    if (take_spurious()) {
        /* as a real wakeup does: release the mutex, let others in, take it again */
        bool counted = tracked();
        if (counted)
            held_pop(m);
        __real_pthread_mutex_unlock(m);
        sched_yield();
        if (controlled())
            CONTROLLED_ACQUIRE(__real_pthread_mutex_trylock(m) == EBUSY, m, site);
        else
            __real_pthread_mutex_lock(m);
        if (counted)
            held_push(m, site, "mutex");
        return 0;
    }
    bool ctl = controlled();
    if (ctl) {
        __real_pthread_mutex_lock(&S.mu);
        int self = me.role, other = 1 - self;
        if (S.active && S.turn != FREE) {
            add_event(EV_WAITS, self, 0, OP_WAIT, c, site, false);
            S.waiting[self] = true;
            if (S.turn == self && !S.done[other])
                S.turn = other;
            __real_pthread_cond_broadcast(&S.cv);
        }
        __real_pthread_mutex_unlock(&S.mu);
    }
    int rc = real(c, m, clk, abs);
    if (ctl) {
        __real_pthread_mutex_lock(&S.mu);
        if (S.waiting[me.role]) {
            S.waiting[me.role] = false;
            add_event(EV_WOKEN, me.role, 0, OP_WAIT, c, site, false);
            wait_turn();
        }
        __real_pthread_mutex_unlock(&S.mu);
    }
    run_point_hook(OP_WAITED, site); /* the hook only: not a point the explorer switches at */
    return rc;
}

static int real_wait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clk, const struct timespec *abs)
{
    (void)clk;
    (void)abs;
    return __real_pthread_cond_wait(c, m);
}

static int real_timedwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clk, const struct timespec *abs)
{
    (void)clk;
    return __real_pthread_cond_timedwait(c, m, abs);
}

static int real_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clk, const struct timespec *abs)
{
    return __real_pthread_cond_clockwait(c, m, clk, abs);
}

int __wrap_pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
    if (!waits_wrapped())
        return __real_pthread_cond_wait(c, m);
    return wrapped_wait(c, m, SITE, real_wait, CLOCK_REALTIME, NULL);
}

int __wrap_pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abs)
{
    if (!waits_wrapped())
        return __real_pthread_cond_timedwait(c, m, abs);
    return wrapped_wait(c, m, SITE, real_timedwait, CLOCK_REALTIME, abs);
}

int __wrap_pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clk, const struct timespec *abs)
{
    if (!waits_wrapped())
        return __real_pthread_cond_clockwait(c, m, clk, abs);
    return wrapped_wait(c, m, SITE, real_clockwait, clk, abs);
}

int __wrap_pthread_cond_signal(pthread_cond_t *c)
{
    if (tracked())
        point(OP_SIGNAL, c, SITE);
    return __real_pthread_cond_signal(c);
}

int __wrap_pthread_cond_broadcast(pthread_cond_t *c)
{
    if (tracked())
        point(OP_BROADCAST, c, SITE);
    return __real_pthread_cond_broadcast(c);
}

int __wrap_pthread_spin_lock(pthread_spinlock_t *l)
{
    if (!tracked())
        return __real_pthread_spin_lock(l);
    const void *site = SITE;
    int rc = 0;
    point(OP_LOCK, (const void *)l, site);
    if (controlled()) {
        CONTROLLED_ACQUIRE((rc = __real_pthread_spin_trylock(l)) == EBUSY, (const void *)l, site);
    } else {
        rc = __real_pthread_spin_lock(l);
    }
    if (rc == 0)
        held_push((const void *)l, site, "spinlock");
    return rc;
}

int __wrap_pthread_spin_trylock(pthread_spinlock_t *l)
{
    if (!tracked())
        return __real_pthread_spin_trylock(l);
    point(OP_TRYLOCK, (const void *)l, SITE);
    int rc = __real_pthread_spin_trylock(l);
    if (rc == 0)
        held_push((const void *)l, SITE, "spinlock");
    return rc;
}

int __wrap_pthread_spin_unlock(pthread_spinlock_t *l)
{
    if (!tracked())
        return __real_pthread_spin_unlock(l);
    held_pop((const void *)l);
    int rc = __real_pthread_spin_unlock(l);
    point(OP_UNLOCK, (const void *)l, SITE);
    return rc;
}

static int rw_acquire(pthread_rwlock_t *l, bool write, const void *site)
{
    int rc = 0;
    point(OP_LOCK, l, site);
    if (controlled()) {
        CONTROLLED_ACQUIRE((rc = write ? pthread_rwlock_trywrlock(l) : pthread_rwlock_tryrdlock(l)) == EBUSY, l, site);
    } else {
        rc = write ? __real_pthread_rwlock_wrlock(l) : __real_pthread_rwlock_rdlock(l);
    }
    if (rc == 0)
        held_push(l, site, "rwlock");
    return rc;
}

int __wrap_pthread_rwlock_rdlock(pthread_rwlock_t *l)
{
    if (!tracked())
        return __real_pthread_rwlock_rdlock(l);
    return rw_acquire(l, false, SITE);
}

int __wrap_pthread_rwlock_wrlock(pthread_rwlock_t *l)
{
    if (!tracked())
        return __real_pthread_rwlock_wrlock(l);
    return rw_acquire(l, true, SITE);
}

int __wrap_pthread_rwlock_unlock(pthread_rwlock_t *l)
{
    if (!tracked())
        return __real_pthread_rwlock_unlock(l);
    held_pop(l);
    int rc = __real_pthread_rwlock_unlock(l);
    point(OP_UNLOCK, l, SITE);
    return rc;
}

/* ---- explore waker --------------------------------------------------------------------- */

struct explore_waker {
    const char *label;
    pthread_mutex_t lock; /* protects the counts (a real mutex: no point of its own) */
    unsigned wakes;
    unsigned drops; /* references dropped without a wake */
    long live;
};

static const struct waker_vtable explore_vtable;

static void explore_count(struct explore_waker *ew, int wake, long live)
{
    __real_pthread_mutex_lock(&ew->lock);
    ew->wakes += (unsigned)wake;
    ew->drops += wake == 0 && live < 0;
    ew->live += live;
    __real_pthread_mutex_unlock(&ew->lock);
}

static struct waker explore_clone(const void *data)
{
    struct explore_waker *ew = (struct explore_waker *)data;
    if (tracked())
        point(OP_CLONE, ew->label, SITE);
    explore_count(ew, 0, +1); /* +1: the clone's reference */
    return (struct waker){ .data = ew, .vtable = &explore_vtable };
}

static void explore_wake(const void *data)
{
    struct explore_waker *ew = (struct explore_waker *)data;
    if (tracked()) {
        check_wake(ew->label, "woken", SITE);
        point(OP_WAKE, ew->label, SITE);
    }
    explore_count(ew, 1, -1); /* -1: wake consumes its reference */
}

static void explore_wake_by_ref(const void *data)
{
    struct explore_waker *ew = (struct explore_waker *)data;
    if (tracked()) {
        check_wake(ew->label, "woken by reference", SITE);
        point(OP_WAKE_BY_REF, ew->label, SITE);
    }
    explore_count(ew, 1, 0);
}

static void explore_drop(const void *data)
{
    struct explore_waker *ew = (struct explore_waker *)data;
    if (tracked())
        point(OP_DROP, ew->label, SITE);
    explore_count(ew, 0, -1); /* -1: the dropped reference */
}

static const struct waker_vtable explore_vtable = {
    .clone = explore_clone, .wake = explore_wake, .wake_by_ref = explore_wake_by_ref, .drop = explore_drop,
};

struct explore_waker *explore_waker_new(const char *label)
{
    struct explore_waker *ew = calloc(1, sizeof *ew);
    if (!ew)
        abort();
    ew->label = label;
    pthread_mutex_init(&ew->lock, NULL);
    ew->live = 1; /* the test's own reference */
    return ew;
}

struct waker explore_waker_get(struct explore_waker *ew) { return (struct waker){ .data = ew, .vtable = &explore_vtable }; }

enum explore_count_kind { COUNT_WAKES, COUNT_DROPS, COUNT_LIVE };

static long explore_read(struct explore_waker *ew, enum explore_count_kind kind)
{
    __real_pthread_mutex_lock(&ew->lock);
    long v = kind == COUNT_WAKES ? (long)ew->wakes : kind == COUNT_DROPS ? (long)ew->drops : ew->live;
    __real_pthread_mutex_unlock(&ew->lock);
    return v;
}

unsigned explore_waker_woken(struct explore_waker *ew) { return (unsigned)explore_read(ew, COUNT_WAKES); }
unsigned explore_waker_dropped(struct explore_waker *ew) { return (unsigned)explore_read(ew, COUNT_DROPS); }
long explore_waker_live(struct explore_waker *ew) { return explore_read(ew, COUNT_LIVE); }

void explore_waker_free(struct explore_waker *ew)
{
    pthread_mutex_destroy(&ew->lock);
    free(ew);
}

/* ---- running schedules ------------------------------------------------------------------ */

struct spec {
    int start;
    unsigned npre;
    struct pre pre[MAX_PRE];
};

struct b_thread {
    const struct explore_case *c;
    void *state;
};

static void *b_main(void *arg)
{
    struct b_thread *bt = arg;
    me.role = 1;
    me.controlled = true;
    __real_pthread_mutex_lock(&S.mu);
    wait_turn();
    __real_pthread_mutex_unlock(&S.mu);
    bt->c->b(bt->state);
    thread_returns();
    return NULL;
}

/* One schedule from a fresh setup: check()'s sentence, or NULL. The events
 * stay in S.ev for the caller. */
static const char *run_one(const struct explore_case *c, const struct spec *sp, bool *lost)
{
    void *state = c->setup();
    __real_pthread_mutex_lock(&S.mu);
    S.active = true;
    S.turn = sp->start;
    S.done[0] = S.done[1] = false;
    S.waiting[0] = S.waiting[1] = false;
    S.blocked[0] = S.blocked[1] = false;
    S.points[0] = S.points[1] = 0;
    S.npre = sp->npre;
    memcpy(S.pre, sp->pre, sizeof S.pre);
    S.next_pre = 0;
    S.last_pre_event = 0;
    S.lost = false;
    S.handoffs = 0;
    S.nev = 0;
    __real_pthread_mutex_unlock(&S.mu);

    struct b_thread bt = { c, state };
    pthread_t t;
    if (pthread_create(&t, NULL, b_main, &bt) != 0)
        abort();
    me.role = 0;
    me.controlled = true;
    __real_pthread_mutex_lock(&S.mu);
    wait_turn();
    __real_pthread_mutex_unlock(&S.mu);
    c->a(state);
    thread_returns();
    pthread_join(t, NULL);

    __real_pthread_mutex_lock(&S.mu);
    S.active = false;
    *lost = S.lost;
    __real_pthread_mutex_unlock(&S.mu);
    const char *why = c->check(state);
    static _Thread_local char copy[512];
    if (why) {
        snprintf(copy, sizeof copy, "%s", why);
        why = copy;
    }
    c->teardown(state);
    return why;
}

static void format_spec(const struct spec *sp, char *buf, size_t n)
{
    int len = snprintf(buf, n, "%c:", "AB"[sp->start]);
    for (unsigned i = 0; i < sp->npre && len > 0 && (size_t)len < n; i++)
        len += snprintf(buf + len, n - (size_t)len, "%s%c%u", i ? "," : "", "AB"[sp->pre[i].who], sp->pre[i].at);
}

/* "A:" "B:A3" "A:A3,B2": the start, then each preemption as thread and
 * point. False on anything else. */
static bool parse_spec(const char *s, struct spec *sp)
{
    memset(sp, 0, sizeof *sp);
    if ((s[0] != 'A' && s[0] != 'B') || s[1] != ':')
        return false;
    sp->start = s[0] - 'A';
    const char *p = s + 2;
    while (*p) {
        if ((*p != 'A' && *p != 'B') || sp->npre == MAX_PRE)
            return false;
        char *end;
        unsigned long at = strtoul(p + 1, &end, 10);
        if (end == p + 1 || at == 0 || at > 100000)
            return false;
        sp->pre[sp->npre++] = (struct pre){ *p - 'A', (unsigned)at };
        p = end;
        if (*p == ',')
            p++;
        else if (*p)
            return false;
    }
    return true;
}

/* The failing schedule as a timeline, one line per event. */
static void format_timeline(const struct explore_case *c, char *buf, size_t n)
{
    const void *objs[16];
    unsigned nobjs = 0;
    size_t len = 0;
    const char *names[2] = { c->a_name, c->b_name };
    for (unsigned i = 0; i < S.nev && len + 1 < n; i++) {
        const struct event *e = &S.ev[i];
        char line[256], where[160] = "";
        unsigned obj = 0;
        if (e->obj && e->op < OP_CLONE) {
            for (obj = 0; obj < nobjs && objs[obj] != e->obj; obj++)
                ;
            if (obj == nobjs && nobjs < 16)
                objs[nobjs++] = e->obj;
            obj++;
        }
        if (e->site)
            site_name((const char *)e->site - 1, where, sizeof where);
        const char *who = names[e->who];
        switch (e->kind) {
        case EV_POINT:
            if (e->op >= OP_CLONE)
                snprintf(line, sizeof line, "  %c%-3u %-11s %s \"%s\"\n", "AB"[e->who], e->n, who, OP_NAME[e->op],
                         (const char *)e->obj);
            else
                snprintf(line, sizeof line, "  %c%-3u %-11s %s %s#%u in %s\n", "AB"[e->who], e->n, who,
                         OP_NAME[e->op], e->op >= OP_WAIT ? "cond" : "lock", obj, where);
            break;
        case EV_PREEMPT:
            snprintf(line, sizeof line, "       -- preempted: %s runs --\n", names[1 - e->who]);
            break;
        case EV_BLOCKED:
            snprintf(line, sizeof line, "       -- %s waits for lock#%u: %s runs --\n", who, obj, names[1 - e->who]);
            break;
        case EV_WAITS:
            snprintf(line, sizeof line, "       -- %s sleeps in a condition wait: %s runs --\n", who, names[1 - e->who]);
            break;
        case EV_WOKEN:
            snprintf(line, sizeof line, "       -- %s wakes from its condition wait --\n", who);
            break;
        case EV_RETURNS:
            snprintf(line, sizeof line, "       -- %s returns --\n", who);
            break;
        }
        size_t l = strlen(line);
        if (len + l >= n)
            break;
        memcpy(buf + len, line, l + 1);
        len += l;
    }
}

struct search {
    const struct explore_case *c;
    unsigned bound;
    struct explore_result *r;
    bool stop;
};

static void dfs(struct search *s, struct spec *sp)
{
    bool lost = false;
    const char *why = run_one(s->c, sp, &lost);
    s->r->schedules++;
    if (s->r->schedules == 1) {
        s->r->points_a = S.points[0];
        s->r->points_b = S.points[1];
    }
    /* A schedule whose control was lost (a thread waited where the explorer
     * cannot see it, or a starved machine kept one away for 2 s) still ran
     * and was checked, in some order: counted, never a failure by itself. */
    s->r->lost += lost;
    if (why) {
        s->r->failed = true;
        s->stop = true;
        format_spec(sp, s->r->schedule, sizeof s->r->schedule);
        snprintf(s->r->why, sizeof s->r->why, "%s", why);
        format_timeline(s->c, s->r->timeline, sizeof s->r->timeline);
        return;
    }
    if (sp->npre >= s->bound)
        return;
    /* every later point where the other thread could run is a new schedule */
    unsigned from = sp->npre ? S.last_pre_event + 1 : 0, nev = S.nev;
    struct pre cand[MAX_EVENTS];
    unsigned ncand = 0;
    for (unsigned i = from; i < nev; i++)
        if (S.ev[i].kind == EV_POINT && S.ev[i].candidate)
            cand[ncand++] = (struct pre){ S.ev[i].who, S.ev[i].n };
    for (unsigned i = 0; i < ncand && !s->stop; i++) {
        struct spec next = *sp;
        next.pre[next.npre++] = cand[i];
        dfs(s, &next);
    }
}

void lab_explore(const struct explore_case *c, unsigned bound, struct explore_result *r)
{
    memset(r, 0, sizeof *r);
    if (!S.ready) {
        lab_monotonic_cond_init(&S.cv);
        S.ready = true;
    }
    if (bound > MAX_PRE)
        bound = MAX_PRE;
    lab_sync_reset();
    lab_sync_track(true);
    struct search s = { c, bound, r, false };
    const char *replay = getenv("LAB_SCHEDULE");
    if (replay && *replay) {
        struct spec sp;
        if (!parse_spec(replay, &sp)) {
            r->failed = true;
            snprintf(r->schedule, sizeof r->schedule, "?");
            snprintf(r->why, sizeof r->why,
                     "LAB_SCHEDULE=%.40s is not a schedule: write the first thread, a colon and the preemptions, "
                     "e.g. A: or A:A3 or B:B2,A4", replay);
        } else {
            s.bound = sp.npre; /* run exactly this one */
            dfs(&s, &sp);
        }
    } else {
        for (int start = 0; start < 2 && !s.stop; start++) {
            struct spec sp = { .start = start };
            dfs(&s, &sp);
        }
    }
    lab_sync_track(false);
    me.controlled = false;
}

const char *lab_explore_check(const struct explore_case *c, unsigned bound, unsigned stage, const char *test)
{
    static _Thread_local struct explore_result r;
    static _Thread_local char msg[sizeof r.why + sizeof r.timeline + 400];
    lab_explore(c, bound, &r);
    lab_note("%u schedules explored (the %s has %u synchronisation points, the %s %u), preemption bound %u%s",
             r.schedules, c->a_name, r.points_a, c->b_name, r.points_b, bound,
             r.lost ? "; in some the explorer lost control (a wait it cannot see) and the threads ran freely" : "");
    if (!r.failed)
        return NULL;
    if (r.schedule[0] == '?')
        snprintf(msg, sizeof msg, "%s", r.why); /* a LAB_SCHEDULE that does not parse */
    else
        snprintf(msg, sizeof msg,
                 "schedule %s: %s.\nThe schedule, point by point (A: the %s, B: the %s):\n%s"
                 "Replay just this schedule: make debug STAGE=%u TEST=%s LAB_SCHEDULE=%s",
                 r.schedule, r.why, c->a_name, c->b_name, r.timeline, stage, test, r.schedule);
    return msg;
}
