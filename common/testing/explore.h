/* explore.h - the tests' hand on every synchronisation point of the code
 * under test.
 *
 * The grader links every test binary with -Wl,--wrap= for the lock and
 * condition-variable calls the lab allows (pthread_mutex_*, pthread_spin_*,
 * pthread_rwlock_*, pthread_cond_*): a call the student's code makes lands
 * in explore.c first, which passes it on unchanged unless a test asked for
 * one of three things.
 *
 *   held locks         every wrapped lock a thread takes is counted, with the
 *                      place that took it, until it is released. An explore
 *                      waker (below) woken while its thread holds any lock
 *                      records a violation that names the lock's acquisition
 *                      site: a wake runs code the lock's owner does not know
 *                      (a task, another future's poll) that may need the
 *                      same lock.
 *   spurious wakeups   lab_sync_spurious(n): the next n condition waits of
 *                      any thread return at once, without a signal, as
 *                      POSIX allows (the mutex is released and taken again,
 *                      as in a real wakeup). A wait without a loop that
 *                      re-checks its predicate takes that for the event.
 *   the explorer       lab_explore(): two test threads, A and B, run one
 *                      step each (a poll, a completion) under a scheduler
 *                      that lets one of them run at a time and switches at
 *                      the synchronisation points: before every wrapped
 *                      lock, trylock, condition wait or signal and every
 *                      explore-waker call, after every unlock. A first run
 *                      without preemption counts the points; then every
 *                      schedule with at most `bound` preemptions is run, each
 *                      from a fresh setup, and checked: the preemption
 *                      bounding of CHESS (Musuvathi and Qadeer, "Iterative
 *                      context bounding for systematic testing of
 *                      multithreaded programs", PLDI 2007) and loom's
 *                      preemption_bound (docs.rs/loom, model::Builder). A failing
 *                      schedule is printed as a timeline and as a string that
 *                      LAB_SCHEDULE=... replays.
 *
 * What it cannot prove: a schedule whose switches fall between two points
 * (a plain or atomic access outside any lock) is not explored; nor are
 * schedules with more than `bound` preemptions, threads other than A and B,
 * or the weak-memory reorderings of relaxed atomics (the switches are
 * sequentially consistent). docs/debugging.md#the-schedule-explorer.
 * Held locks are the wrapped ones only: a lock made of anything else (a
 * spinlock on an atomic) is not counted; wake_probe.h asks, from inside
 * the wake, whether the API is still usable, whatever the lock.
 */
#ifndef LAB_TEST_EXPLORE_H
#define LAB_TEST_EXPLORE_H

#include <stdbool.h>
#include <stddef.h>
#include "../waker.h"

/* ---- held locks ----------------------------------------------------------- */

/* Starts (true) or stops counting held locks in every thread. lab_explore
 * turns it on for its runs. Locks taken before it was on are not counted. */
void lab_sync_track(bool on);
/* Wrapped locks the calling thread holds now. */
unsigned lab_sync_held(void);
/* Forgets a recorded wake-under-lock violation. */
void lab_sync_reset(void);
/* The first wake of an explore waker made while its thread held a lock, as
 * a sentence naming the lock's acquisition site; NULL when there was none. */
const char *lab_sync_wake_under_lock(void);

/* ---- spurious wakeups ------------------------------------------------------ */

/* The next n wrapped condition waits (any thread) return 0 at once, without
 * a signal. n == 0 stops it. */
void lab_sync_spurious(unsigned n);
/* How many spurious returns were made since the last lab_sync_spurious. */
unsigned lab_sync_spurious_made(void);

/* ---- a hook at every point ----------------------------------------------------- */

/* fn runs on the calling thread at each of its synchronisation points (the
 * explorer's points, below: before a wrapped lock, trylock, condition wait,
 * signal or broadcast and every explore-waker call, after an unlock; and,
 * as "cond waited", when a condition wait returns with its mutex held again,
 * which is not a point the explorer switches at) while
 * held locks are counted (lab_sync_track(true)), with the operation's name
 * ("lock", "unlock", "cond wait", ...), the call's return address and the
 * wrapped locks the thread holds then. Wrapped calls made inside fn are not
 * points (fn is never re-entered). A test uses it to act at a chosen point
 * of a thread the explorer does not schedule, such as a runtime's worker
 * (stage 07's idle/push_at_every_point_before_announcing). NULL turns it
 * off; set it while no other thread can be inside the old one. */
typedef void (*lab_sync_point_fn)(const char *op, const void *site, unsigned held, void *arg);
void lab_sync_on_point(lab_sync_point_fn fn, void *arg);
/* "function+0x1c" for a code address such as a point's site. */
void lab_sync_site(const void *site, char *buf, size_t n);

/* ---- explore waker ----------------------------------------------------------- */

/* A counting waker whose four calls are synchronisation points of the
 * explorer and whose wakes check the held-lock count. One live reference at
 * creation: the test's own (explore_waker_get lends it). */
struct explore_waker;
struct explore_waker *explore_waker_new(const char *label);
struct waker explore_waker_get(struct explore_waker *ew);
unsigned explore_waker_woken(struct explore_waker *ew);  /* wakes + wake_by_refs */
unsigned explore_waker_dropped(struct explore_waker *ew); /* references dropped without a wake */
long explore_waker_live(struct explore_waker *ew);       /* references alive, the test's included */
void explore_waker_free(struct explore_waker *ew);

/* ---- the explorer ------------------------------------------------------------ */

struct explore_case {
    const char *a_name, *b_name;   /* what each thread does, for the timeline ("poll", "complete") */
    void *(*setup)(void);          /* a fresh state for one schedule */
    void (*a)(void *state);        /* runs on the test's thread */
    void (*b)(void *state);        /* runs on a thread of the explorer's */
    /* After both returned: NULL when the schedule was correct, else what went
     * wrong, in a sentence (a static or thread-local buffer). */
    const char *(*check)(void *state);
    void (*teardown)(void *state); /* frees what setup made */
};

struct explore_result {
    unsigned schedules;            /* schedules run (the first run included) */
    unsigned points_a, points_b;   /* synchronisation points in the first run */
    unsigned lost;                 /* schedules in which a thread did not come back for 2 s: run freely */
    bool failed;
    char schedule[64];             /* the failing schedule, for LAB_SCHEDULE */
    char why[512];                 /* check()'s sentence */
    char timeline[3072];           /* the failing schedule, one line per point */
};

/* Runs every schedule of `c` with at most `bound` preemptions (1: the
 * competing step at every point of the other, in turn; 2: also every
 * second switch back), starting with A and with B, and stops at the first
 * that fails. $LAB_SCHEDULE, when set, runs that one schedule only. */
void lab_explore(const struct explore_case *c, unsigned bound, struct explore_result *r);

/* lab_explore, and a NOTE of what it ran; NULL when every schedule passed,
 * else the failure message for cr_assert: the schedule, check()'s sentence,
 * the timeline and the command that replays it (make debug STAGE=<stage>
 * TEST=<test> LAB_SCHEDULE=...). */
const char *lab_explore_check(const struct explore_case *c, unsigned bound, unsigned stage, const char *test);

#endif
