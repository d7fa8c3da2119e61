/* deque.h - stage 07: the Chase–Lev work-stealing deque.
 *
 * One owner thread pushes and takes at the bottom; any number of thieves
 * steal at the top. A fixed ring of DEQUE_CAPACITY slots indexed by two
 * signed 64-bit counters that only grow (bottom may step back by one, in
 * take, and forward again):
 *
 *             top (thieves CAS it forward)        bottom (the owner's)
 *              v                                   v
 *     ... | old | old | ... | new | new |  free  | free | ...
 *              \_____ items: top <= i < bottom ___/
 *
 *   slot of index i = buf[i & (DEQUE_CAPACITY - 1)]
 *
 * The memory orders are those of Lê, Pop, Cohen and Zappa Nardelli, "Correct
 * and efficient work-stealing for weak memory models" (PPoPP 2013), fixed
 * capacity (no resize, so none of the resize errata apply): a full deque
 * refuses the push and the caller moves the older half elsewhere
 * (deque_steal_half on its own deque). docs/07-work-stealing.md#push and the
 * sections after it derive every atomic's order; the whole table is the last
 * level of `make hint STAGE=7 ITEM=races`.
 *
 * The contract:
 *   1. Every pushed item is returned exactly once, by take or by a steal.
 *   2. take returns the newest item (LIFO for the owner); steal the oldest.
 *   3. take on an empty deque returns NULL and leaves the deque empty, also
 *      at index 0 (signed indices: bottom - 1 is -1, never SIZE_MAX).
 *   4. deque_steal_half takes ceil(n / 2) of the n items it sees, oldest
 *      first, as repeated single steals, each its own CAS on top.
 *   5. push and take: the owner thread only. steal, steal_half, len: any
 *      thread (steal_half on one's own deque is how the owner spills).
 * Items are non-NULL pointers the deque does not own.
 */
#ifndef LAB_DEQUE_H
#define LAB_DEQUE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DEQUE_CAPACITY 256 /* a power of two */

struct deque;

enum deque_test_point {
    DEQUE_TEST_TAKE_READ_TOP,   /* take: just after its load of top */
    DEQUE_TEST_STEAL_BEFORE_CAS /* steal: slot read, just before the CAS on top */
};
typedef void (*deque_test_hook_fn)(struct deque *d, enum deque_test_point where, void *arg);

struct deque {
    /* top and bottom on their own cache lines: thieves hammer top, the owner bottom */
    _Alignas(64) _Atomic int64_t top;
    _Alignas(64) _Atomic int64_t bottom;
    /* the ring: atomic slots, accessed relaxed (a thief may read a slot the
     * owner is overwriting after a wrap; its CAS then fails and the value is
     * thrown away, but a plain read would still be a data race) */
    _Alignas(64) _Atomic(void *) buf[DEQUE_CAPACITY];
    /* ---- test instrumentation (tests only; costs one predictable branch) */
    deque_test_hook_fn test_hook;
    void *test_arg;
    bool test_delay;         /* simulate a store buffer for the owner's bottom store */
    bool delayed;            /* a bottom store is sitting in the simulated buffer */
    int64_t delayed_bottom;  /* its value */
#ifdef __SANITIZE_THREAD__
    _Atomic uint64_t fence_word; /* TSan: seq_cst fences become RMWs on this word */
    bool release_armed;          /* TSan: a release fence makes the next bottom store a release store */
#endif
};

enum deque_steal {
    DEQUE_STOLEN,  /* *out holds the item */
    DEQUE_EMPTY,   /* nothing to steal */
    DEQUE_ABORT,   /* lost a race (another thief or the owner): try again */
};

void deque_init(struct deque *d);
/* Owner: pushes item at the bottom. False (nothing pushed) when full. */
bool deque_push(struct deque *d, void *item);
/* Owner: the newest item, or NULL when empty. */
void *deque_take(struct deque *d);
/* Anyone: one item from the top. */
enum deque_steal deque_steal(struct deque *d, void **out);
/* Anyone: up to max items (ceil of half of what it sees), oldest first, into
 * out[]; returns how many. Repeated single steals. */
size_t deque_steal_half(struct deque *d, void **out, size_t max);
/* Anyone: items right now (a snapshot, exact only when nobody else acts). */
size_t deque_len(struct deque *d);

/* ---- test hooks ---- */

/* Calls fn(d, where, arg) at the points of enum deque_test_point (NULL: off). */
void deque_test_set_hook(struct deque *d, deque_test_hook_fn fn, void *arg);
/* On: the owner's bottom stores stay in a simulated store buffer (visible to
 * the owner, not to thieves) until the next seq_cst fence or the next store,
 * as an x86 store buffer would keep them. Off: flushed. */
void deque_test_delay_stores(struct deque *d, bool on);
/* A bottom store is in the simulated store buffer right now (the owner's
 * thread only, as the buffer is its own). */
bool deque_test_buffered(struct deque *d);
/* The raw indices (relaxed): for tests. */
int64_t deque_test_top(struct deque *d);
int64_t deque_test_bottom(struct deque *d);

#endif
