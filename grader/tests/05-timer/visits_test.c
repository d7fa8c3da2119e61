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
 * says "not judged" instead of judging. */
#define _GNU_SOURCE
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
