/* alloc_count.c - the allocation counter, through the linker's --wrap. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include "measure.h"

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

static void count_alloc(void *p)
{
    if (p && atomic_load_explicit(&counting, memory_order_relaxed))
        atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
}

/* Should this allocation fail? Only while counting, so the harness and
 * Criterion never see an injected failure. */
static bool inject_failure(void)
{
    return atomic_load_explicit(&counting, memory_order_relaxed) &&
           atomic_load_explicit(&allocs, memory_order_relaxed) >=
               atomic_load_explicit(&fail_from, memory_order_relaxed);
}

void *__wrap_malloc(size_t n)
{
    if (inject_failure())
        return NULL;
    void *p = __real_malloc(n);
    count_alloc(p);
    return p;
}

void *__wrap_calloc(size_t k, size_t n)
{
    if (inject_failure())
        return NULL;
    void *p = __real_calloc(k, n);
    count_alloc(p);
    return p;
}

void *__wrap_aligned_alloc(size_t a, size_t n)
{
    if (inject_failure())
        return NULL;
    void *p = __real_aligned_alloc(a, n);
    count_alloc(p);
    return p;
}

int __wrap_posix_memalign(void **out, size_t a, size_t n)
{
    if (inject_failure())
        return ENOMEM;
    int rc = __real_posix_memalign(out, a, n);
    if (rc == 0)
        count_alloc(*out);
    return rc;
}

void __wrap_free(void *p)
{
    if (p && atomic_load_explicit(&counting, memory_order_relaxed))
        atomic_fetch_add_explicit(&frees, 1, memory_order_relaxed);
    __real_free(p);
}

void *__wrap_realloc(void *p, size_t n)
{
    if (n > 0 && inject_failure())
        return NULL; /* like a real failed realloc: p is untouched */
    void *q = __real_realloc(p, n);
    if (!p)
        count_alloc(q);
    else if (n == 0 && atomic_load_explicit(&counting, memory_order_relaxed))
        atomic_fetch_add_explicit(&frees, 1, memory_order_relaxed);
    return q;
}

void alloc_count_start(void)
{
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
    return (struct alloc_counts){
        .allocs = atomic_load_explicit(&allocs, memory_order_relaxed),
        .frees = atomic_load_explicit(&frees, memory_order_relaxed),
    };
}
