/* store_buffer.h - what a store buffer may do to one thread's store, every
 * run, not once in a million.
 *
 * A core's store waits in its store buffer while the core's later loads go
 * to memory: on x86 (and on every machine the lab runs on) a load may pass
 * an earlier store to another location. Code that must have a store seen
 * before a later load of another word (the store-buffer, or Dekker, shape:
 * "push the task, then read whether anyone sleeps" against "announce that I
 * sleep, then look for tasks") needs a full barrier between the two: on
 * x86 a locked instruction (what every C11 read-modify-write compiles to:
 * fetch_add, exchange, compare_exchange, ...), an xchg with memory (a
 * seq_cst store) or an mfence (atomic_thread_fence(memory_order_seq_cst));
 * those wait until the buffer has drained. A load does not, whatever its
 * order: relaxed, acquire and seq_cst loads are all a plain mov on x86.
 *
 * The test keeps one store in a simulated buffer (the code under test
 * offers that, as stage 07's deque_test_delay_stores does for the deque's
 * bottom) and runs a stretch of code on one thread with lab_sb_run:
 *
 *   - the thread is single-stepped (x86's trap flag: after every
 *     instruction the kernel delivers SIGTRAP, as in stage 05's
 *     timer_steps), and right before each instruction that would drain the
 *     real buffer (a lock prefix, xchg with a memory operand, mfence) the
 *     simulated one is drained too: drain(arg), when buffered(arg);
 *   - one page, which holds one word and nothing else, is protected: the
 *     first access the thread makes to it while the store is still
 *     buffered (or the first after `skip` such accesses) faults, is let
 *     through, and right after that instruction the thread stops and
 *     at(arg) runs on it. There the test lets another
 *     thread run the other half of the shape (announce, look, park) before
 *     this thread goes on: the worst timing the buffer allows, forced.
 *     Accesses while nothing is buffered are let through and watched on.
 *     Right before a system call the page is opened for that one
 *     instruction: the kernel reads what it was given (a futex word, say)
 *     as the thread would, where a protected page would fail the call.
 *
 * So a stretch that reads the word with a load while its store is buffered
 * shows, every run, what a real buffer shows rarely; one that drains first
 * (an RMW of the word, a fence) does not. Any way of writing either is seen
 * the same way: the machine's instructions are read, not the source.
 *
 * x86-64 only (lab_sb_run returns false elsewhere, and with a page size
 * other than 4 KiB); not under Valgrind (it does not single-step). One
 * lab_sb_run at a time in a process.
 */
#ifndef LAB_TEST_STORE_BUFFER_H
#define LAB_TEST_STORE_BUFFER_H

#include <stdbool.h>
#include <stddef.h>

struct lab_sb {
    void *page;                   /* the watched page (4 KiB, aligned), or NULL: no watch */
    bool (*buffered)(void *arg);  /* the store is in the simulated buffer now */
    void (*drain)(void *arg);     /* makes it visible (called on the stepped thread) */
    void (*at)(void *arg);        /* right after the first access to the page while buffered */
    void *arg;
    long skip;                    /* accesses while buffered let through before the one at() follows */
};

struct lab_sb_result {
    long steps;     /* instructions run */
    long drains;    /* instructions that drained a buffered store */
    bool watched;   /* at() ran: the page was read or written while the store was buffered */
    bool foreign;   /* another thread touched the page meanwhile: the watch stopped there */
};

/* Runs fn(fn_arg) on the calling thread as described above; fills *r.
 * False (fn not run) where it cannot: not x86-64, pages not 4 KiB, or the
 * page could not be protected. */
bool lab_sb_run(const struct lab_sb *sb, void (*fn)(void *), void *fn_arg, struct lab_sb_result *r);


/* ---- an unpark against a park, at the unpark's first plain access ----------
 *
 * A parker's (or driver's) unpark must both leave its token and learn
 * whether the owner sleeps, as one step: a read-modify-write of the state
 * word (an exchange), or the lock the owner sleeps under. An unpark that
 * first reads the state with a load (any order) and then writes the token
 * has a window between the two: an owner that announces its sleep in that
 * window is overwritten and never woken.
 *
 * lab_sb_unpark_race runs unpark(arg) stepped on the calling thread, the
 * parker's page watched (allocate the parker with alloc_own_pages on, so the
 * page is its own). The simulated buffer holds nothing but "no locked
 * instruction yet": the unpark's first access to the page before any
 * locked instruction (a plain load or store) stops it there, and the owner
 * (a helper thread running park(arg), which must return by itself within
 * some seconds: a timed park) is let go and given time to fall asleep
 * (its thread seen sleeping in /proc) before the unpark goes on. An unpark
 * that drains first (an exchange, a lock) is never stopped; the owner then
 * parks after it. Either way the owner's park must return within wake_ms
 * (well before its own timeout): it took the token, or was woken. */
struct lab_sb_park {
    void *page;                /* the page that holds the state word (4 KiB, aligned) */
    void (*unpark)(void *arg); /* unpark race: stepped, on the calling thread; park race: on a helper */
    void (*park)(void *arg);   /* the owner's timed park: unpark race on a helper; park race stepped */
    void *arg;
    unsigned wake_ms;          /* how long the owner's park may last: well under its timeout */
};

struct lab_sb_park_result {
    bool ran;        /* false: the machine cannot single-step (lab_sb_run returned false) */
    bool watched;    /* the unpark was stopped at a plain access, and the owner let go there */
    bool slept;      /* the owner was seen asleep before the stopped unpark went on */
    bool foreign;    /* another thread touched the page while it was watched */
    bool returned;   /* the owner's park lasted less than wake_ms (lab_sb_park_race: after the stop) */
    bool beyond;     /* lab_sb_park_race: the park slept or ended before its access number k */
    long steps, drains;
};

/* False when the helper thread could not be started. */
bool lab_sb_unpark_race(const struct lab_sb_park *sp, struct lab_sb_park_result *r);

/* What a test says of it: writes the note (what happened; `what` names the
 * parker: "the parker", "the I/O driver") into note, and returns NULL when
 * the run can be judged, or why it cannot (no single-stepping here, another
 * thread on the page, an owner that never fell asleep and did not return).
 * Judged, the owner either returned, or slept through the stopped unpark
 * (r->watched), or missed a token left before its park (!r->watched). */
const char *lab_sb_unpark_unjudged(const struct lab_sb_park_result *r, const char *what, char *note, size_t len);


/* ---- a park against an unpark, after each of the park's accesses ----------
 *
 * The other half of the same rule: a park must learn whether a token is
 * there and announce its sleep as one step (a compare-exchange from EMPTY
 * to PARKED, or both under the lock an unparker takes). A park that reads
 * the state (a load, or a failed exchange it does not look at) and then
 * stores PARKED overwrites a token left in between, and sleeps with it lost.
 * Where the bug sits depends on how the park is written, so no one stop
 * finds it: every stop does.
 *
 * lab_sb_park_race runs park(arg) (timed) stepped on the calling thread,
 * the parker's page watched, and stops it right after its access number k
 * to the page (0: the first), any kind of access. There a helper thread
 * runs unpark(arg) to its end (or until it is seen asleep: blocked on a
 * lock the stopped owner holds), then the park goes on. Whatever was
 * stopped where, the park began before that unpark ended, so it must
 * return within wake_ms of the stop's end (parker contracts: a token left
 * during a park ends it). A park that sleeps (or returns) before its
 * access number k is not stopped: r->beyond, and the helper unparks it
 * then. A test runs k = 0, 1, 2, ... until a run is beyond. */
bool lab_sb_park_race(const struct lab_sb_park *sp, long k, struct lab_sb_park_result *r);

/* lab_sb_unpark_unjudged's counterpart for one run of lab_sb_park_race. */
const char *lab_sb_park_unjudged(const struct lab_sb_park_result *r, long k, const char *what, char *note,
                                 size_t len);

/* Every stop, in turn: lab_sb_park_race for k = 0, 1, 2, ... (below max),
 * each on a fresh parker (fresh(ctx, sp) fills sp's page and arg;
 * done(ctx, sp) frees them; the rest of *sp is the caller's). It ends at the
 * first run that is beyond (every stop was tried), cannot be judged, or
 * whose park slept on. *k and *r are that run's; the note says what it
 * saw (`what` names the parker). Returns why it cannot be judged, or NULL:
 * then r->returned says whether every stop kept the token. */
const char *lab_sb_park_explore(struct lab_sb_park *sp, void (*fresh)(void *ctx, struct lab_sb_park *sp),
                                void (*done)(void *ctx, struct lab_sb_park *sp), void *ctx, long max, long *k,
                                struct lab_sb_park_result *r, const char *what, char *note, size_t len);

#endif
