/* alloc_count.c - the allocation counter, through the linker's --wrap. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "harness.h"
#include "measure.h"

/* Weak: the benchmarks link this counter without the harness, and then
 * nobody records the sites. */
#pragma weak lab_record_sites

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__real_aligned_alloc(size_t a, size_t n);
int __real_posix_memalign(void **p, size_t a, size_t n);

/* relaxed throughout: counters are read after the measured code has been
 * joined or has returned, which orders them; nothing else hangs off them. */
static atomic_bool counting;
static atomic_uint_fast64_t allocs, frees;
static atomic_uint_fast64_t fail_from = UINT64_MAX; /* allocations from this count on fail */

/* Where each block allocated while counting came from, so that a test whose
 * frees fall short can say which allocation leaked (a task? an output?):
 * an open-addressed table keyed by the block's address, holding the
 * address the allocation returned to. A slot's key is 0 (never used),
 * FREED (reusable) or a block; a thread claims a slot with a CAS on its key.
 * Relaxed throughout, like the counters: the table is read after the
 * measured code was joined. A block that finds no slot within PROBES is
 * simply not tracked (it is still counted). */
#define LIVE_SLOTS 16384u
#define PROBES 64u
#define FREED ((uintptr_t)1)
static atomic_uintptr_t live_key[LIVE_SLOTS];
static atomic_uintptr_t live_site[LIVE_SLOTS];

static unsigned slot_of(uintptr_t p)
{
    return (unsigned)(((p >> 4) * 0x9E3779B97F4A7C15ull) >> 50); /* 14 bits: LIVE_SLOTS */
}

static void track(void *p, void *site)
{
    for (unsigned i = 0, s = slot_of((uintptr_t)p); i < PROBES; i++, s = (s + 1) % LIVE_SLOTS) {
        uintptr_t k = atomic_load_explicit(&live_key[s], memory_order_relaxed);
        if ((k == 0 || k == FREED) &&
            atomic_compare_exchange_strong_explicit(&live_key[s], &k, (uintptr_t)p, memory_order_relaxed,
                                                    memory_order_relaxed)) {
            atomic_store_explicit(&live_site[s], (uintptr_t)site, memory_order_relaxed);
            return;
        }
    }
}

static void untrack(void *p)
{
    for (unsigned i = 0, s = slot_of((uintptr_t)p); i < PROBES; i++, s = (s + 1) % LIVE_SLOTS) {
        uintptr_t k = atomic_load_explicit(&live_key[s], memory_order_relaxed);
        if (k == 0)
            return; /* allocated before counting began, or not tracked */
        if (k == (uintptr_t)p) {
            atomic_store_explicit(&live_key[s], FREED, memory_order_relaxed);
            return;
        }
    }
}

/* Records the allocation sites of the tracked blocks still live, most
 * frequent first (at most 8 sites). */
static void record_live_sites(void)
{
    void *sites[8];
    unsigned counts[8];
    int n = 0;
    for (unsigned s = 0; s < LIVE_SLOTS; s++) {
        uintptr_t k = atomic_load_explicit(&live_key[s], memory_order_relaxed);
        if (k == 0 || k == FREED)
            continue;
        void *site = (void *)atomic_load_explicit(&live_site[s], memory_order_relaxed);
        int j = 0;
        while (j < n && sites[j] != site)
            j++;
        if (j == n) {
            if (n == 8)
                continue;
            sites[n] = site;
            counts[n++] = 0;
        }
        counts[j]++;
    }
    for (int a = 1; a < n; a++) /* insertion sort, by count, largest first */
        for (int b = a; b > 0 && counts[b] > counts[b - 1]; b--) {
            unsigned c = counts[b];
            counts[b] = counts[b - 1];
            counts[b - 1] = c;
            void *t = sites[b];
            sites[b] = sites[b - 1];
            sites[b - 1] = t;
        }
    if (n > 0 && lab_record_sites)
        lab_record_sites("leak", sites, counts, n);
}

static void count_alloc_from(void *p, void *site)
{
    if (p && atomic_load_explicit(&counting, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
        track(p, site);
    }
}
#define count_alloc(p) count_alloc_from((p), __builtin_return_address(0))

/* Should this allocation fail? Only while counting, so the harness and
 * Criterion never see an injected failure. */
static bool inject_failure(void)
{
    return atomic_load_explicit(&counting, memory_order_relaxed) &&
           atomic_load_explicit(&allocs, memory_order_relaxed) >=
               atomic_load_explicit(&fail_from, memory_order_relaxed);
}

/* Own pages (measure.h). A slot's block is 0 (free) or the start of a
 * mapping of len bytes; a thread claims a free slot with a CAS. relaxed:
 * a block reaches another thread (which frees it) only through the code
 * under test's own synchronization, which orders the slot's writes too. */
#define OWN_SLOTS 32u
static _Thread_local bool own_pages;
static atomic_uintptr_t own_block[OWN_SLOTS];
static size_t own_len[OWN_SLOTS];
static atomic_uint own_live; /* slots in use: free() looks only when some are */

void alloc_own_pages(bool on) { own_pages = on; }

static void *own_alloc(size_t n)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t len = (n + (size_t)page - 1) / (size_t)page * (size_t)page;
    if (len == 0)
        len = (size_t)page;
    for (unsigned i = 0; i < OWN_SLOTS; i++) {
        uintptr_t none = 0;
        if (atomic_load_explicit(&own_block[i], memory_order_relaxed) != 0 ||
            !atomic_compare_exchange_strong_explicit(&own_block[i], &none, 1, memory_order_relaxed,
                                                     memory_order_relaxed))
            continue;
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            atomic_store_explicit(&own_block[i], 0, memory_order_relaxed);
            return NULL;
        }
        own_len[i] = len;
        atomic_fetch_add_explicit(&own_live, 1, memory_order_relaxed);
        atomic_store_explicit(&own_block[i], (uintptr_t)p, memory_order_relaxed);
        return p;
    }
    return __real_malloc(n);
}

/* The slot of an own-pages block, or -1. */
static int own_slot(void *p)
{
    if (!p || atomic_load_explicit(&own_live, memory_order_relaxed) == 0)
        return -1;
    for (unsigned i = 0; i < OWN_SLOTS; i++)
        if (atomic_load_explicit(&own_block[i], memory_order_relaxed) == (uintptr_t)p)
            return (int)i;
    return -1;
}

static void own_free(int i)
{
    munmap((void *)atomic_load_explicit(&own_block[i], memory_order_relaxed), own_len[i]);
    atomic_fetch_sub_explicit(&own_live, 1, memory_order_relaxed);
    atomic_store_explicit(&own_block[i], 0, memory_order_relaxed);
}

void *__wrap_malloc(size_t n)
{
    if (inject_failure())
        return NULL;
    void *p = own_pages ? own_alloc(n) : __real_malloc(n);
    count_alloc(p);
    return p;
}

void *__wrap_calloc(size_t k, size_t n)
{
    if (inject_failure())
        return NULL;
    void *p;
    if (own_pages && (n == 0 || k <= SIZE_MAX / n))
        p = own_alloc(k * n); /* a fresh mapping is zeroed */
    else
        p = __real_calloc(k, n);
    count_alloc(p);
    return p;
}

void *__wrap_aligned_alloc(size_t a, size_t n)
{
    if (inject_failure())
        return NULL;
    void *p = own_pages && a <= (size_t)sysconf(_SC_PAGESIZE) ? own_alloc(n) : __real_aligned_alloc(a, n);
    count_alloc(p);
    return p;
}

int __wrap_posix_memalign(void **out, size_t a, size_t n)
{
    if (inject_failure())
        return ENOMEM;
    int rc;
    if (own_pages && a <= (size_t)sysconf(_SC_PAGESIZE)) {
        *out = own_alloc(n);
        rc = *out ? 0 : ENOMEM;
    } else {
        rc = __real_posix_memalign(out, a, n);
    }
    if (rc == 0)
        count_alloc(*out);
    return rc;
}

void __wrap_free(void *p)
{
    if (p && atomic_load_explicit(&counting, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&frees, 1, memory_order_relaxed);
        untrack(p);
    }
    int own = own_slot(p);
    if (own >= 0)
        own_free(own);
    else
        __real_free(p);
}

void *__wrap_realloc(void *p, size_t n)
{
    if (n > 0 && inject_failure())
        return NULL; /* like a real failed realloc: p is untouched */
    int own = own_slot(p);
    void *q;
    if (own >= 0) {
        /* an own-pages block moves to an ordinary one (or goes, for n == 0) */
        q = n ? __real_malloc(n) : NULL;
        if (n && !q)
            return NULL;
        if (q)
            memcpy(q, p, n < own_len[own] ? n : own_len[own]);
        own_free(own);
    } else {
        q = __real_realloc(p, n);
    }
    if (!p) {
        count_alloc(q);
    } else if (n == 0 && atomic_load_explicit(&counting, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&frees, 1, memory_order_relaxed);
        untrack(p);
    } else if (q != p && q && atomic_load_explicit(&counting, memory_order_relaxed)) {
        untrack(p); /* moved: the block lives on at q, from the same site if it was tracked */
        track(q, __builtin_return_address(0));
    }
    return q;
}

void alloc_count_start(void)
{
    for (unsigned s = 0; s < LIVE_SLOTS; s++)
        atomic_store_explicit(&live_key[s], 0, memory_order_relaxed);
    atomic_store_explicit(&allocs, 0, memory_order_relaxed);
    atomic_store_explicit(&frees, 0, memory_order_relaxed);
    atomic_store_explicit(&counting, true, memory_order_relaxed);
}

void alloc_fail_after(uint64_t n)
{
    atomic_store_explicit(&fail_from, n, memory_order_relaxed);
}

struct alloc_counts alloc_count_peek(void)
{
    return (struct alloc_counts){
        .allocs = atomic_load_explicit(&allocs, memory_order_relaxed),
        .frees = atomic_load_explicit(&frees, memory_order_relaxed),
    };
}

struct alloc_counts alloc_count_stop(void)
{
    atomic_store_explicit(&counting, false, memory_order_relaxed);
    atomic_store_explicit(&fail_from, UINT64_MAX, memory_order_relaxed);
    struct alloc_counts c = {
        .allocs = atomic_load_explicit(&allocs, memory_order_relaxed),
        .frees = atomic_load_explicit(&frees, memory_order_relaxed),
    };
    if (c.allocs > c.frees)
        record_live_sites(); /* for the report, if the test then fails on the counts */
    return c;
}
