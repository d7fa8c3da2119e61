/* visits_test.c - stage 05: how many timer entries an insert, a cancel and a
 * next-expiration query touch, counted by the kernel rather than timed.
 *
 * Each entry sits alone on its own page of a shared memory file (memfd),
 * mapped by itself at the start of a 64 KiB block. Before every measured
 * operation the test drops the page-table entries of all the blocks (madvise
 * MADV_DONTNEED: the contents stay in the file), so the first touch of an
 * entry's page during the operation is a minor page fault on this thread
 * (getrusage RUSAGE_THREAD). One page per mapping, the kernel's read
 * fault-around (which maps resident neighbours of a faulting page within
 * its mapping) has no other entry to map. So the faults of one operation are
 * the number of entries it looked at: an operation count, the same on a
 * quiet or a loaded machine, not a time.
 *
 * The wheel touches its own memory (slot heads, bitmaps) as it likes; only
 * entries are counted. The reference touches the entry and its list
 * neighbours: about 2 per insert, 3 per cancel, 0 per query, whatever the
 * number of timers. The item compares n timers with 8n in the same run; an
 * ordered list, a scan for the minimum or a walk of a slot grows with n.
 * Where the kernel does not count as described (the probe below), the test
 * says "not judged" instead of judging.
 *
 * The query's own work, counted in instructions (timer_steps): the entry
 * counts above cannot see a query that never reads an entry but looks at
 * the slots one by one (the slot heads are the wheel's memory). So the test
 * single-steps the query: with x86's trap flag set, the CPU stops after
 * every instruction and the kernel delivers SIGTRAP, whose handler counts
 * it; the flag survives the handler's return, so the count is exactly the
 * instructions the query ran, whatever the machine's load (an operation
 * count, not a time). Contract 5 asks O(levels): a rotate and a count of
 * trailing zeros per level. The reference runs 60 to 100 instructions per
 * query; looking at 64 slots of one level costs 3 or more each. Off x86-64
 * the test says "not judged". */
#define _GNU_SOURCE
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "stage05.h"

LAB_SUITE(timer_visits, 30);

#define BLOCK (64u * 1024u)
enum { SAMPLES = 48, SMALL = 512, BIG = 8 * SMALL };

static long thread_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_minflt + ru.ru_majflt;
}

struct arena {
    char *base;   /* n blocks of BLOCK bytes; the first page of each is shared */
    size_t bytes;
    int fd;
};

/* One page of the file per entry, each mapped alone at the start of its
 * block (the rest of the block reserved, PROT_NONE): every entry page is a
 * mapping of its own, so fault-around (which stays inside one mapping) has
 * nothing to add, and the file is only n pages (the jail limits file size). */
static bool arena_new(struct arena *a, size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    a->bytes = n * BLOCK;
    a->fd = memfd_create("lab-timer-entries", MFD_CLOEXEC);
    if (a->fd < 0)
        return false;
    void *m = MAP_FAILED;
    if (page <= BLOCK / 2 && ftruncate(a->fd, (off_t)(n * page)) == 0)
        m = mmap(NULL, a->bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        close(a->fd);
        return false;
    }
    a->base = m;
    for (size_t i = 0; i < n; i++) {
        if (mmap(a->base + i * BLOCK, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, a->fd,
                 (off_t)(i * page)) == MAP_FAILED) {
            munmap(a->base, a->bytes);
            close(a->fd);
            return false;
        }
    }
    return true;
}

static void arena_free(struct arena *a)
{
    munmap(a->base, a->bytes);
    close(a->fd);
}

static struct timer_entry *entry_at(struct arena *a, size_t i) { return (struct timer_entry *)(a->base + i * BLOCK); }

/* Forget every mapping of the arena: the next touch of each entry faults. */
static void unmap_all(struct arena *a) { madvise(a->base, a->bytes, MADV_DONTNEED); }

static void nop_fire(struct timer_entry *e, void *arg)
{
    (void)e;
    (void)arg;
}

/* Does one read of k entries cost exactly k faults here? */
static bool probe(struct arena *a, size_t n)
{
    unmap_all(a);
    long f0 = thread_faults();
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < n; i += 4)
        sink += *(volatile uint8_t *)entry_at(a, i);
    long got = thread_faults() - f0;
    (void)sink;
    return got == (long)((n + 3) / 4);
}

/* Half the timers spread over every level, half due within one 64 ms slot a
 * second from now (many connections with the same timeout): a walk of a
 * slot meets the crowd. */
static uint64_t deadline_of(uint64_t *rng)
{
    if (lab_rand(rng) & 1)
        return ORIGIN_NS + SEC_NS + MS_NS * (lab_rand(rng) % 60);
    uint64_t span = UINT64_C(64) << (6 * (lab_rand(rng) % 6)); /* ticks: one level's span */
    return ORIGIN_NS + MS_NS * (1 + lab_rand(rng) % span);
}

struct visits {
    double insert, cancel, query; /* entries touched per operation, mean over SAMPLES */
};

static struct visits measure(size_t n, uint64_t seed)
{
    struct arena a;
    if (!arena_new(&a, n + SAMPLES))
        lab_cannot_judge("a shared memory file of %zu pages could not be mapped here", n + SAMPLES);
    for (size_t i = 0; i < n + SAMPLES; i++)
        timer_entry_init(entry_at(&a, i), nop_fire, NULL);
    if (!probe(&a, n + SAMPLES)) {
        arena_free(&a);
        lab_cannot_judge("this kernel does not count one page fault per entry page touched (a fault mapped "
                         "more than its own page?): entry visits cannot be counted");
    }
    struct timer_wheel *w = timer_wheel_new(ORIGIN_NS);
    cr_assert_not_null(w, "timer_wheel_new returned NULL");
    uint64_t rng = seed;
    for (size_t i = 0; i < n; i++)
        timer_wheel_insert(w, entry_at(&a, i), deadline_of(&rng));
    long ins = 0, can = 0, qry = 0;
    uint64_t sink = 0;
    for (size_t s = 0; s < SAMPLES; s++) {
        struct timer_entry *fresh = entry_at(&a, n + s);
        uint64_t d = deadline_of(&rng);
        unmap_all(&a);
        long f0 = thread_faults();
        timer_wheel_insert(w, fresh, d);
        ins += thread_faults() - f0;

        unmap_all(&a);
        f0 = thread_faults();
        sink += timer_wheel_next_expiration(w);
        qry += thread_faults() - f0;

        struct timer_entry *victim = entry_at(&a, (size_t)(lab_rand(&rng) % n));
        unmap_all(&a);
        f0 = thread_faults();
        bool was = timer_wheel_cancel(w, victim);
        can += thread_faults() - f0;
        if (was) /* keep n armed: put it back (not measured) */
            timer_wheel_insert(w, victim, deadline_of(&rng));
        timer_wheel_cancel(w, fresh); /* not measured either */
    }
    if (sink == 42)
        lab_note("(sink)");
    cr_assert_eq(timer_wheel_len(w), n, "after %d inserts and cancels of distinct entries the wheel counts %zu "
                 "timers, not %zu", 2 * SAMPLES, timer_wheel_len(w), n);
    timer_wheel_free(w);
    arena_free(&a);
    return (struct visits){ (double)ins / SAMPLES, (double)can / SAMPLES, (double)qry / SAMPLES };
}

static void judge(const char *op, double small, double big)
{
    /* O(1): about the same at 8n as at n. Generous: twice, plus 4 entries. */
    cr_assert_leq(big, 2 * small + 4, "%s touched %.1f timer entries on average with %d timers armed and %.1f with "
                  "%d: it must be O(1) in the number of timers (the reference touches the entry and its list "
                  "neighbours, about the same at both sizes); a search of a list, a slot or every entry grows "
                  "with the timers (timer_wheel.h, contract 4, 5)", op, big, BIG, small, SMALL);
}

LAB_TEST(timer_visits, entries_touched_per_operation, 30)
{
    uint64_t seed = lab_seed();
    struct visits small = measure(SMALL, seed), big = measure(BIG, seed + 1);
    lab_note("entries touched per operation, %d timers / %d: insert %.2f / %.2f, cancel %.2f / %.2f, "
             "next_expiration %.2f / %.2f", SMALL, BIG, small.insert, big.insert, small.cancel, big.cancel,
             small.query, big.query);
    judge("timer_wheel_next_expiration", small.query, big.query);
    judge("timer_wheel_insert", small.insert, big.insert);
    judge("timer_wheel_cancel", small.cancel, big.cancel);
}

/* ---- the query's instructions ------------------------------------------------------ */

LAB_SUITE(timer_steps, 10);

enum { STEP_LEVEL_BUDGET = 40, STEP_FIXED_BUDGET = 64, STEP_SPREAD = 32 };
#define STEP_BUDGET (STEP_LEVEL_BUDGET * TIMER_WHEEL_LEVELS + STEP_FIXED_BUDGET)

static volatile long steps_taken;

static void on_step(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    steps_taken++;
}

#if defined(__x86_64__)
/* The instructions one timer_wheel_next_expiration runs (with the few of
 * the call and of clearing the flag). The most of three, the first query
 * after the wheel changed among them: a query that scans once after each
 * change and then answers from a cache is counted at its scan. The test
 * makes one query, not counted, before any (lazily bound library calls are
 * resolved then, once). */
__attribute__((noinline)) static long query_steps(const struct timer_wheel *w, uint64_t *answer)
{
    long most = 0;
    for (int i = 0; i < 3; i++) {
        steps_taken = 0;
        __asm__ volatile("pushfq\n\torq $0x100, (%%rsp)\n\tpopfq" ::: "memory", "cc");
        uint64_t r = timer_wheel_next_expiration(w);
        __asm__ volatile("pushfq\n\tandq $-257, (%%rsp)\n\tpopfq" ::: "memory", "cc");
        long n = steps_taken;
        if (i == 0)
            *answer = r;
        cr_assert_eq(r, *answer, "timer_wheel_next_expiration answered %" PRIu64 " then %" PRIu64
                     " on the same wheel", *answer, r);
        if (n > most)
            most = n;
    }
    return most;
}
#endif

/* One timer alone on `level`, `d` slots after the wheel's current slot
 * (the wheel's time is tick 0, so slot d of that level). */
static long one_timer_steps(struct timer_wheel *w, struct timer_entry *e, int level, unsigned d)
{
    uint64_t tick = (uint64_t)d << (TIMER_WHEEL_SLOT_BITS * level);
    uint64_t answer;
    timer_wheel_insert(w, e, ORIGIN_NS + tick * MS_NS);
#if defined(__x86_64__)
    long n = query_steps(w, &answer);
#else
    long n = 0;
    answer = 0;
#endif
    cr_assert(timer_wheel_cancel(w, e), "cancel of the one armed timer returned false");
    cr_assert_eq(answer, ORIGIN_NS + tick * MS_NS, "one timer alone on level %d, slot %u (its deadline on the "
                 "slot's first tick, %" PRIu64 " ms after the wheel's time): the next expiration said %" PRIu64
                 " ns after the origin, not %" PRIu64, level, d, tick, answer - ORIGIN_NS, tick * MS_NS);
    return n;
}

/* One timer at a time on each level, 1, 32 and 63 slots after the current
 * one; an empty wheel; 4,096 timers over every level. Every query must run
 * at most STEP_BUDGET instructions (40 a level, 64 more), and on one level
 * the far slot may cost at most STEP_SPREAD more than the near one: the
 * work of a query depends on the number of levels, not on how far the next
 * timer is nor on how many there are (timer_wheel.h contract 5). */
LAB_TEST(timer_steps, next_expiration_runs_o_levels_instructions, 10)
{
#if !defined(__x86_64__)
    lab_cannot_judge("counting a query's instructions needs x86-64's trap flag; this machine is not x86-64");
#else
    /* the handler runs on a stack of its own: the query's stack below its
     * frame shows no sign of being stepped */
    static char trap_stack[1 << 16];
    stack_t ss = { .ss_sp = trap_stack, .ss_size = sizeof trap_stack, .ss_flags = 0 }, old_ss;
    cr_assert_eq(sigaltstack(&ss, &old_ss), 0, "sigaltstack failed");
    /* SIGTRAP is the harness's for the whole test: the seal refuses code
     * under test a handler for it, since a step handler could move a
     * failed check past its FAIL record (harness.c). The harness hands
     * each step to on_step, which runs on the stack set above (its
     * SIGTRAP handler runs on the thread's alternate stack). */
    cr_assert(lab_set_step_handler(on_step), "the harness took no step handler");
    struct timer_wheel *w = timer_wheel_new(ORIGIN_NS);
    cr_assert_not_null(w, "timer_wheel_new returned NULL");
    uint64_t answer;
    (void)timer_wheel_next_expiration(w); /* not counted: binds whatever library call it makes */
    long empty = query_steps(w, &answer);
    cr_assert_eq(answer, TIMER_WHEEL_NEVER, "an empty wheel's next expiration was not TIMER_WHEEL_NEVER");
    /* a sanity check of the counter itself: a query runs some instructions */
    if (empty <= 0)
        lab_cannot_judge("single-stepping counted no instructions here (a debugger or the machine took the "
                         "trap): a query's work cannot be counted");
    struct timer_entry e;
    timer_entry_init(&e, nop_fire, NULL);
    static const unsigned dist[] = { 1, 32, 63 };
    long worst = empty, most = 0;
    const char *worst_what = "an empty wheel";
    static char what[160];
    for (int level = 0; level < TIMER_WHEEL_LEVELS; level++) {
        long lo = LONG_MAX, hi = 0;
        unsigned lo_d = 0, hi_d = 0;
        for (size_t k = 0; k < sizeof dist / sizeof dist[0]; k++) {
            long n = one_timer_steps(w, &e, level, dist[k]);
            if (n < lo) {
                lo = n;
                lo_d = dist[k];
            }
            if (n > hi) {
                hi = n;
                hi_d = dist[k];
            }
            if (n > worst) {
                worst = n;
                snprintf(what, sizeof what, "one timer on level %d, %u slots after the current one", level, dist[k]);
                worst_what = what;
            }
        }
        if (hi - lo > most)
            most = hi - lo;
        cr_assert_leq(hi - lo, STEP_SPREAD, "with one timer on level %d, the next expiration ran %ld instructions "
                      "when the timer was %u slots after the current one and %ld when it was %u: its work grows "
                      "with the distance to the next occupied slot. What tells you, in a few operations, which "
                      "slot of a level is the first occupied one, without looking at the slots in turn "
                      "(timer_wheel.h contract 5: O(levels))?", level, hi, hi_d, lo, lo_d);
    }
    /* many timers over every level */
    enum { MANY = 4096 };
    struct timer_entry *many = calloc(MANY, sizeof *many);
    cr_assert_not_null(many, "out of memory");
    uint64_t rng = lab_seed();
    for (size_t i = 0; i < MANY; i++) {
        timer_entry_init(&many[i], nop_fire, NULL);
        timer_wheel_insert(w, &many[i], deadline_of(&rng));
    }
    long full = query_steps(w, &answer);
    if (full > worst) {
        worst = full;
        worst_what = "4,096 timers over every level";
    }
    lab_note("instructions per next-expiration query: empty wheel %ld, worst %ld (%s), 4,096 timers %ld; on one "
             "level, far slot minus near slot at most %ld; budget %d (%d a level, %d more), spread %d",
             empty, worst, worst_what, full, most, STEP_BUDGET, STEP_LEVEL_BUDGET, STEP_FIXED_BUDGET, STEP_SPREAD);
    timer_wheel_free(w);
    free(many);
    lab_set_step_handler(NULL);
    sigaltstack(&old_ss, NULL);
    cr_assert_leq(worst, STEP_BUDGET, "timer_wheel_next_expiration ran %ld instructions for %s (an empty wheel: "
                  "%ld), more than %d, %d a level: looking at slots (or entries) one by one costs a few "
                  "instructions each, 384 slots in all. Which of the wheel's fields answers \"is anything in this "
                  "level, and where is the first one\" at once (timer_wheel.h contract 5: O(levels))?",
                  worst, worst_what, empty, STEP_BUDGET, STEP_LEVEL_BUDGET);
#endif
}
