/* deque.c - stage 07: the Chase–Lev deque (deque.h).
 *
 * Two kinds of code live here. The small helpers at the top are given: they
 * name every access to top and bottom with its memory order, and they carry
 * two things that are not part of the algorithm:
 *   - ThreadSanitizer does not model standalone fences (gcc 11 and later
 *     warn, -Wtsan, that a fence is not supported there). Under TSan
 *     (__SANITIZE_THREAD__) each seq_cst fence becomes a seq_cst
 *     read-modify-write of one word of the deque (all such RMWs are totally
 *     ordered and each synchronizes with the one before: the same
 *     "one of the two fences comes first" the proof uses), and a release
 *     fence makes the bottom store after it a release store. A fence you
 *     leave out is then missing under TSan too, where it shows as a race.
 *     Every other lane runs the fenced code of the paper.
 *   - A test may turn on a simulated store buffer (deque_test_delay_stores):
 *     the owner's stores to bottom then stay invisible to thieves until the
 *     owner's next seq_cst fence, exactly what an x86 store buffer does to a
 *     plain store. That is how the grader shows, every run, what the take's
 *     fence is for (docs/07-work-stealing.md#why-take-needs-its-fence).
 *
 * The algorithm itself (push, take, steal, steal_half) is yours: it starts
 * at the section "the algorithm", after the given helpers and deque_init.
 */
#include "deque.h"
#include "lab_todo.h"

#define MASK ((int64_t)DEQUE_CAPACITY - 1)

/* ---- given: accessors with their orders -------------------------------------- */

#ifdef __SANITIZE_THREAD__
#define BOTTOM_STORE_ORDER memory_order_release /* the simulated store buffer's flush (tests) */
#else
#define BOTTOM_STORE_ORDER memory_order_relaxed /* the fences order it */
#endif

/* The owner's store of bottom: relaxed, the fences around it give the order.
 * Under TSan there are no fences: a store that a release (or seq_cst) fence
 * came before is made a release store instead, which is what the fence means
 * for it; one with no fence before it stays relaxed, as it is. Goes to the
 * simulated store buffer when a test asks. */
static inline void bottom_store(struct deque *d, int64_t v)
{
    memory_order mo = memory_order_relaxed;
#ifdef __SANITIZE_THREAD__
    if (d->release_armed)
        mo = memory_order_release;
    d->release_armed = false;
#endif
    if (d->test_delay) {
        d->delayed = true;
        d->delayed_bottom = v;
        return;
    }
    atomic_store_explicit(&d->bottom, v, mo);
}

/* The owner's own view of bottom: relaxed (only the owner writes it), and it
 * sees its own buffered store first, as a CPU forwards from its store buffer. */
static inline int64_t own_bottom(struct deque *d)
{
    if (d->delayed)
        return d->delayed_bottom;
    return atomic_load_explicit(&d->bottom, memory_order_relaxed);
}

/* A thief's load of bottom: acquire, pairs with push's release fence (or its
 * release store under TSan): the slot written before bottom moved is seen. */
static inline int64_t thief_bottom(struct deque *d)
{
    return atomic_load_explicit(&d->bottom, memory_order_acquire);
}

static inline void flush_store_buffer(struct deque *d)
{
    if (d->delayed) {
        d->delayed = false;
        atomic_store_explicit(&d->bottom, d->delayed_bottom, BOTTOM_STORE_ORDER);
    }
}

/* A full (seq_cst) fence, for the owner's thread. Drains the simulated buffer,
 * as the real fence drains the real one. */
static inline void owner_fence_seq_cst(struct deque *d)
{
    flush_store_buffer(d);
#ifdef __SANITIZE_THREAD__
    atomic_fetch_add_explicit(&d->fence_word, 0, memory_order_seq_cst);
    d->release_armed = true; /* a seq_cst fence is a release fence too */
#else
    atomic_thread_fence(memory_order_seq_cst);
#endif
}

/* A full (seq_cst) fence, for a thief's thread. A thief cannot drain the
 * owner's store buffer: no flush here. */
static inline void thief_fence_seq_cst(struct deque *d)
{
#ifdef __SANITIZE_THREAD__
    atomic_fetch_add_explicit(&d->fence_word, 0, memory_order_seq_cst);
#else
    (void)d;
    atomic_thread_fence(memory_order_seq_cst);
#endif
}

/* A release fence, for the owner's thread. Under TSan
 * it makes the next bottom store a release store instead. */
static inline void fence_release(struct deque *d)
{
#ifdef __SANITIZE_THREAD__
    d->release_armed = true;
#else
    (void)d;
    atomic_thread_fence(memory_order_release);
#endif
}

static inline void test_point(struct deque *d, enum deque_test_point where)
{
    if (__builtin_expect(d->test_hook != NULL, 0))
        d->test_hook(d, where, d->test_arg);
}

void deque_init(struct deque *d)
{
    atomic_init(&d->top, 0);
    atomic_init(&d->bottom, 0);
    for (int i = 0; i < DEQUE_CAPACITY; i++)
        atomic_init(&d->buf[i], NULL);
    d->test_hook = NULL;
    d->test_arg = NULL;
    d->test_delay = false;
    d->delayed = false;
    d->delayed_bottom = 0;
#ifdef __SANITIZE_THREAD__
    atomic_init(&d->fence_word, 0);
    d->release_armed = false;
#endif
}

/* ---- the algorithm ------------------------------------------------------------- */

bool deque_push(struct deque *d, void *item)
{
    (void)d;
    (void)item;
    LAB_TODO("deque.h contracts 1 and 5: a thief may read the slot as soon as it sees the new bottom; what must it see by then, and when is the ring full? (docs/07-work-stealing.md#push)");
}

void *deque_take(struct deque *d)
{
    (void)d;
    LAB_TODO("deque.h contracts 1 to 3: a thief may be claiming the same last item right now; what must each of you see of the other's write, and who decides who gets the last item? (docs/07-work-stealing.md#take, #why-take-needs-its-fence)");
}

enum deque_steal deque_steal(struct deque *d, void **out)
{
    (void)d;
    (void)out;
    LAB_TODO("deque.h contract 1: the owner and the other thieves race you for the oldest item; when is it yours, and when may you read it? (docs/07-work-stealing.md#steal)");
}

size_t deque_steal_half(struct deque *d, void **out, size_t max)
{
    (void)d;
    (void)out;
    (void)max;
    LAB_TODO("deque.h contracts 1 and 4: the owner keeps taking while you claim several items; can any item be claimed twice? (docs/07-work-stealing.md#steal-half)");
}

size_t deque_len(struct deque *d)
{
    /* acquire loads: a snapshot good enough for "is there work?" */
    int64_t t = atomic_load_explicit(&d->top, memory_order_acquire);
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_acquire);
    return b > t ? (size_t)(b - t) : 0;
}

/* ---- test hooks ---- */

void deque_test_set_hook(struct deque *d, deque_test_hook_fn fn, void *arg)
{
    d->test_arg = arg;
    d->test_hook = fn;
}

void deque_test_delay_stores(struct deque *d, bool on)
{
    if (!on)
        flush_store_buffer(d);
    d->test_delay = on;
}

bool deque_test_buffered(struct deque *d) { return d->delayed; }

int64_t deque_test_top(struct deque *d) { return atomic_load_explicit(&d->top, memory_order_relaxed); }
int64_t deque_test_bottom(struct deque *d) { return atomic_load_explicit(&d->bottom, memory_order_relaxed); }
