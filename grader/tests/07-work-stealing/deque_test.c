/* deque_test.c - the Chase–Lev deque alone: exact interleavings forced with
 * the test hooks, then owner against thieves at full speed. */
#include <stdlib.h>

#include "stage07.h"

LAB_SUITE(deque, 20);

#define ITEM(i) ((void *)(uintptr_t)((i) + 1))
#define INDEX(p) ((size_t)(uintptr_t)(p) - 1)

static struct deque *new_deque(void)
{
    struct deque *d = aligned_alloc(64, (sizeof *d + 63) / 64 * 64);
    cr_assert_not_null(d, "out of memory in the test");
    deque_init(d);
    return d;
}

LAB_TEST(deque, take_on_empty_at_zero, 5)
{
    struct deque *d = new_deque();
    cr_assert_null(deque_take(d), "take on a new deque returned an item");
    cr_assert_eq(deque_test_bottom(d), 0, "take on an empty deque at index 0 left bottom at %lld, not 0 "
                 "(deque.h contract 3: take on an empty deque leaves it empty; bottom - 1 at index 0 became that "
                 "number); the next hint: make hint STAGE=7 ITEM=deque-basics",
                 (long long)deque_test_bottom(d));
    cr_assert_eq(deque_test_top(d), 0, "take on an empty deque moved top");
    cr_assert_null(deque_take(d), "a second take on the empty deque returned an item");
    cr_assert(deque_push(d, ITEM(7)), "push on an empty deque failed");
    cr_assert_eq(deque_take(d), ITEM(7), "take after one push did not return that item");
    cr_assert_null(deque_take(d), "take returned an item from a deque that is empty again");
    void *x;
    cr_assert_eq(deque_steal(d, &x), DEQUE_EMPTY, "steal on an empty deque did not say DEQUE_EMPTY");
    cr_assert_eq(deque_len(d), 0, "an empty deque has length %zu", deque_len(d));
    free(d);
}

LAB_TEST(deque, lifo_take_fifo_steal, 5)
{
    struct deque *d = new_deque();
    for (size_t i = 0; i < 10; i++)
        cr_assert(deque_push(d, ITEM(i)), "push %zu of 10 failed", i);
    cr_assert_eq(deque_len(d), 10, "length %zu after 10 pushes", deque_len(d));
    void *x = NULL;
    cr_assert_eq(deque_steal(d, &x), DEQUE_STOLEN, "steal from a deque of 10 failed");
    cr_assert_eq(x, ITEM(0), "steal returned item %zu; the oldest (0) was expected", INDEX(x));
    cr_assert_eq(deque_take(d), ITEM(9), "take did not return the newest item (9)");
    void *out[16];
    size_t n = deque_steal_half(d, out, 16);
    cr_assert_eq(n, 4, "steal_half of 8 items took %zu, not 4 (half, rounded up)", n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(out[i], ITEM(1 + i), "steal_half's item %zu is %zu; oldest first was expected", i, INDEX(out[i]));
    n = deque_steal_half(d, out, 16);
    cr_assert_eq(n, 2, "steal_half of 4 items took %zu, not 2", n);
    n = deque_steal_half(d, out, 16);
    cr_assert_eq(n, 1, "steal_half of 2 items took %zu, not 1", n);
    n = deque_steal_half(d, out, 16);
    cr_assert_eq(n, 1, "steal_half of 1 item took %zu, not 1", n);
    cr_assert_null(deque_take(d), "the deque should be empty");
    free(d);
}

LAB_TEST(deque, full_refuses_push, 5)
{
    struct deque *d = new_deque();
    for (size_t i = 0; i < DEQUE_CAPACITY; i++)
        cr_assert(deque_push(d, ITEM(i)), "push %zu failed below the capacity (%d)", i, DEQUE_CAPACITY);
    cr_assert_not(deque_push(d, ITEM(999)), "push into a full deque succeeded: it overwrote the oldest item, "
                "which then never comes out (deque.h contract 1; deque_push says false when full)");
    for (size_t round = 0; round < 3 * DEQUE_CAPACITY; round++) {
        void *x;
        cr_assert_eq(deque_steal(d, &x), DEQUE_STOLEN, "steal from a full deque failed");
        cr_assert_eq(x, ITEM(round), "the ring returned item %zu where %zu was expected (wrap-around)", INDEX(x), round);
        cr_assert(deque_push(d, ITEM(round + DEQUE_CAPACITY)), "push after a steal freed a slot failed");
    }
    free(d);
}

/* ---- forced interleavings ------------------------------------------------------------- */

struct forced {
    int armed;               /* fire once */
    enum deque_test_point at;
    int takes;               /* owner takes to run inside the hook */
    int steals;              /* single steals to run inside the hook */
    void *taken[8];
    int ntaken;
    void *stolen[8];
    int nstolen;
};

static void forced_hook(struct deque *d, enum deque_test_point where, void *arg)
{
    struct forced *f = arg;
    if (!f->armed || where != f->at)
        return;
    f->armed = 0;
    for (int i = 0; i < f->takes; i++) {
        void *x = deque_take(d);
        if (x)
            f->taken[f->ntaken++] = x;
    }
    for (int i = 0; i < f->steals; i++) {
        void *x;
        if (deque_steal(d, &x) == DEQUE_STOLEN)
            f->stolen[f->nstolen++] = x;
    }
}

/* Owner: take, with its bottom store held in a (simulated) store buffer.
 * Two thieves steal after the owner read top. With the fence, the store is
 * visible before top is read, and the thieves see one item, not two. */
LAB_TEST(deque, take_fence_store_buffer, 5)
{
    struct deque *d = new_deque();
    cr_assert(deque_push(d, ITEM(0)) && deque_push(d, ITEM(1)), "push failed");
    struct forced f = { .armed = 1, .at = DEQUE_TEST_TAKE_READ_TOP, .steals = 2 };
    deque_test_set_hook(d, forced_hook, &f);
    deque_test_delay_stores(d, true);
    void *mine = deque_take(d);
    deque_test_delay_stores(d, false);
    deque_test_set_hook(d, NULL, NULL);
    cr_assert(!f.armed, "the owner's take never reached its test point DEQUE_TEST_TAKE_READ_TOP (deque.h: "
              "just after its load of top), so the two thieves were never let in right after that load: the "
              "test cannot show whether an item comes out twice (deque.h contract 1)");
    cr_assert_eq(mine, ITEM(1), "the owner's take returned %p, not the newest item", mine);
    cr_assert_eq(f.nstolen, 1, "two thieves stealing while the owner took from a deque of two got %d items; "
                 "with the owner's item that is %d takes of 2 items, and deque.h contract 1 says each comes out "
                 "exactly once: %s; the next hint: make hint STAGE=7 ITEM=take-fence",
                 f.nstolen, f.nstolen + 1, f.nstolen > 1
                 ? "item 1 was taken twice. The evidence: the owner's store to bottom was still in its (simulated) "
                   "store buffer when it read top, so the thieves did not see the owner's reservation and the "
                   "owner did not see their steal"
                 : "item 0, the oldest, came out of neither the thieves' steals nor the owner's take");
    cr_assert_eq(f.stolen[0], ITEM(0), "the thief stole item %zu, not the oldest", INDEX(f.stolen[0]));
    cr_assert_null(deque_take(d), "the deque should be empty");
    free(d);
}

/* Thief: has read the last item and is about to CAS top; the owner takes
 * that item in the meantime (winning its own CAS). The thief must lose. */
LAB_TEST(deque, steal_cas_races_take, 5)
{
    struct deque *d = new_deque();
    cr_assert(deque_push(d, ITEM(0)), "push failed");
    struct forced f = { .armed = 1, .at = DEQUE_TEST_STEAL_BEFORE_CAS, .takes = 1 };
    deque_test_set_hook(d, forced_hook, &f);
    void *x = NULL;
    enum deque_steal r = deque_steal(d, &x);
    deque_test_set_hook(d, NULL, NULL);
    cr_assert(!f.armed, "the thief's steal never reached its test point DEQUE_TEST_STEAL_BEFORE_CAS (deque.h: "
              "slot read, just before the CAS on top), so the owner's take was never let in while the thief held "
              "the last item: the test cannot show whether it comes out twice (deque.h contract 1)");
    cr_assert_eq(f.ntaken, 1, "the owner's take of the last item failed while a thief only looked at it");
    cr_assert_neq(r, DEQUE_STOLEN, "the owner's take and the thief's steal both returned the last item, so it "
                  "came out twice (deque.h contract 1: exactly once): the thief had read it, the owner's take "
                  "returned it first, and the thief's claim still succeeded; the next hint: make hint STAGE=7 "
                  "ITEM=steal-cas");
    cr_assert_null(deque_take(d), "the deque should be empty");
    free(d);
}

/* Thief: steal_half has looked at 4 items and is about to claim; the owner
 * takes 3 meanwhile. Claiming 2 with one CAS moving top by 2 would take the
 * owner's third item again. */
LAB_TEST(deque, steal_half_is_single_steals, 5)
{
    struct deque *d = new_deque();
    for (size_t i = 0; i < 4; i++)
        cr_assert(deque_push(d, ITEM(i)), "push failed");
    struct forced f = { .armed = 1, .at = DEQUE_TEST_STEAL_BEFORE_CAS, .takes = 3 };
    deque_test_set_hook(d, forced_hook, &f);
    void *out[8];
    size_t n = deque_steal_half(d, out, 8);
    deque_test_set_hook(d, NULL, NULL);
    cr_assert(!f.armed, "steal_half never reached the test point DEQUE_TEST_STEAL_BEFORE_CAS (deque.h: slot "
              "read, just before the CAS on top) before its claim, so the owner's takes were never let in "
              "while it held items: the test cannot show whether an item comes out twice (deque.h contracts 1 "
              "and 4); got %zu items", n);
    int count[4] = { 0 };
    for (int i = 0; i < f.ntaken; i++)
        count[INDEX(f.taken[i])]++;
    for (size_t i = 0; i < n; i++)
        count[INDEX(out[i])]++;
    void *rest;
    while ((rest = deque_take(d)))
        count[INDEX(rest)]++;
    for (int i = 0; i < 4; i++)
        cr_assert_eq(count[i], 1, "item %d was taken %d times (owner took 3 while steal_half was about to "
                     "claim 2), and deque.h contracts 1 and 4 say each item comes out once: the owner's takes "
                     "and the steal half both claimed it; the next hint: make hint STAGE=7 ITEM=steal-half",
                     i, count[i]);
    free(d);
}

/* ---- at full speed ----------------------------------------------------------------------- */

struct storm {
    struct deque *d;
    size_t n;
    _Atomic unsigned char *seen;  /* per item: how many times it was taken */
    atomic_bool done;
    atomic_size_t stolen;
    uint64_t seed;
};

static void mark(struct storm *s, void *x)
{
    size_t i = INDEX(x);
    cr_assert_lt(i, s->n, "an item that was never pushed came out: %zu (deque.h contract 1)", i);
    atomic_fetch_add_explicit(&s->seen[i], 1, memory_order_relaxed);
}

static void *thief(void *arg)
{
    struct storm *s = arg;
    uint64_t rng = s->seed;
    void *out[DEQUE_CAPACITY / 2];
    size_t mine = 0;
    while (!atomic_load_explicit(&s->done, memory_order_acquire) || deque_len(s->d) > 0) {
        if (lab_rand(&rng) % 4 == 0) {
            size_t n = deque_steal_half(s->d, out, DEQUE_CAPACITY / 2);
            for (size_t i = 0; i < n; i++)
                mark(s, out[i]);
            mine += n;
        } else {
            void *x;
            if (deque_steal(s->d, &x) == DEQUE_STOLEN) {
                mark(s, x);
                mine++;
            }
        }
    }
    atomic_fetch_add(&s->stolen, mine);
    return NULL;
}

/* overflow: when the deque is full the owner moves the older half out
 * with steal_half on its own deque, as the runtime does */
static void run_storm(size_t n, bool bursts, const char *what)
{
    struct storm s = { .d = new_deque(), .n = n, .seed = lab_seed() };
    s.seen = calloc(n, 1);
    cr_assert_not_null(s.seen, "out of memory in the test");
    atomic_init(&s.done, false);
    atomic_init(&s.stolen, 0);
    pthread_t th[3];
    struct storm per[3];
    (void)per;
    for (int i = 0; i < 3; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, thief, &s), 0, "pthread_create failed");
    uint64_t rng = s.seed ^ 0x5555;
    size_t spilled = 0, taken = 0;
    void *out[DEQUE_CAPACITY / 2];
    for (size_t i = 0; i < n; i++) {
        if (!deque_push(s.d, ITEM(i))) {
            size_t k = deque_steal_half(s.d, out, DEQUE_CAPACITY / 2);
            for (size_t j = 0; j < k; j++)
                mark(&s, out[j]);
            spilled += k;
            if (!deque_push(s.d, ITEM(i))) {
                mark(&s, ITEM(i)); /* still full: count it as spilled too */
                spilled++;
            }
        }
        uint64_t r = lab_rand(&rng);
        unsigned takes = bursts ? (r % 64 == 0) : (unsigned)(r % 3 == 0) + (r % 7 == 0);
        for (unsigned t = 0; t < takes; t++) {
            void *x = deque_take(s.d);
            if (!x)
                break;
            mark(&s, x);
            taken++;
        }
    }
    void *x;
    while ((x = deque_take(s.d))) {
        mark(&s, x);
        taken++;
    }
    atomic_store_explicit(&s.done, true, memory_order_release);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    size_t stolen = atomic_load(&s.stolen);
    lab_note("%s: %zu items, owner took %zu, spilled %zu, thieves stole %zu", what, n, taken, spilled, stolen);
    for (size_t i = 0; i < n; i++) {
        unsigned c = atomic_load_explicit(&s.seen[i], memory_order_relaxed);
        if (c != 1)
            cr_assert_fail("%s: item %zu was taken %u times (owner %zu, spilled %zu, stolen %zu of %zu): "
                           "every pushed item must come out exactly once (deque.h contract 1)", what, i, c, taken,
                           spilled, stolen, n);
    }
    if (bursts)
        cr_assert_gt(spilled, 0, "the owner never found its deque full: the test did not overflow");
    free(s.seen);
    free(s.d);
}

LAB_TEST(deque, owner_vs_three_thieves, 30)
{
    run_storm(lab_scale(2000000, 20000), false, "owner vs three thieves");
}

LAB_TEST(deque, overflow_while_thieves_steal, 30)
{
    run_storm(lab_scale(1000000, 20000), true, "overflow while thieves steal");
}

/* ---- publication: what the owner wrote before push is seen by the thief ---------------- */

struct parcel {
    uint64_t value;     /* written by the owner before push, plainly */
    uint64_t check;     /* value * 3 */
    int stolen_by;      /* written by the one thief that stole it, plainly */
};

struct publish {
    struct deque *d;
    atomic_bool done;
    atomic_uint bad;
    atomic_uint stolen;
    int id;
};

struct thief_arg {
    struct publish *p;
    int id;
};

static void *publish_thief(void *arg)
{
    struct thief_arg *a = arg;
    struct publish *p = a->p;
    /* the thieves only steal; their one link to the owner is the deque */
    while (!atomic_load_explicit(&p->done, memory_order_acquire)) {
        void *x;
        if (deque_steal(p->d, &x) != DEQUE_STOLEN)
            continue;
        struct parcel *c = x;
        if (c->check != c->value * 3)
            atomic_fetch_add_explicit(&p->bad, 1, memory_order_relaxed);
        c->stolen_by = a->id;
        atomic_fetch_add_explicit(&p->stolen, 1, memory_order_relaxed);
    }
    return NULL;
}

/* The owner never takes (a take's fence would order it with the thieves
 * too): only push publishes. Under TSan a push without its release fence is
 * a data race on the parcel, reported every run. */
LAB_TEST(deque, push_publishes_the_item, 20)
{
    struct publish p = { .d = new_deque() };
    atomic_init(&p.done, false);
    atomic_init(&p.bad, 0);
    atomic_init(&p.stolen, 0);
    unsigned n = lab_scale(20000, 2000);
    struct parcel *parcels = calloc(n, sizeof *parcels);
    cr_assert_not_null(parcels, "out of memory in the test");
    pthread_t th[2];
    struct thief_arg ta[2] = { { &p, 1 }, { &p, 2 } };
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, publish_thief, &ta[i]), 0, "pthread_create failed");
    for (unsigned i = 0; i < n; i++) {
        parcels[i].value = i + 1;
        parcels[i].check = (i + 1) * 3;
        while (!deque_push(p.d, &parcels[i]))
            ; /* full: the thieves will make room */
    }
    uint64_t end = monotonic_ns() + (uint64_t)SCALED_MS(10000) * 1000000u;
    while (deque_len(p.d) > 0 && monotonic_ns() < end)
        ;
    atomic_store_explicit(&p.done, true, memory_order_release);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    cr_assert_eq(atomic_load(&p.stolen), n, "%u of %u items were stolen", atomic_load(&p.stolen), n);
    cr_assert_eq(atomic_load(&p.bad), 0, "%u items were seen by their thief before the owner's writes to them: "
                 "a thief read a slot that nothing ordered after those writes (deque.h contract 1); the next "
                 "hint: make hint STAGE=7 ITEM=races", atomic_load(&p.bad));
    for (unsigned i = 0; i < n; i++)
        cr_assert(parcels[i].stolen_by == 1 || parcels[i].stolen_by == 2, "item %u was never stolen", i);
    free(parcels);
    free(p.d);
}
