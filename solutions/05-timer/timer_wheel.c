/* timer_wheel.c - stage 05: the hierarchical timing wheel.
 *
 * Every list is a circular doubly-linked list with a sentinel head, so that
 * insert and unlink are a few pointer writes whatever list an entry is on.
 * The wheel owns 6 x 64 slot heads and two more lists:
 *
 *   due      entries inserted with a deadline already reached; the next
 *            advance fires them first (contract 7);
 *   firing   the slot advance is working through: it was detached from its
 *            level in one step (its bit cleared), and advance pops entries
 *            from its head one at a time, firing the due ones and
 *            re-inserting (cascading) the others. A callback that inserts
 *            never lands here: inserts go to a slot or to `due`.
 *
 * Bitmaps: bit s of occupied[l] is set exactly when slot s of level l is
 * non-empty. Every insert sets it; every unlink clears it when the slot's
 * list became empty. That one rule keeps them right even when an entry that
 * is unlinked sits on `firing` or `due` (then its slot's list is untouched,
 * and the check finds it as it is).
 */
#include <stdlib.h>

#include "timer_wheel.h"

#define SLOT_MASK (TIMER_WHEEL_SLOTS - 1)
#define DUE_LEVEL TIMER_WHEEL_LEVELS     /* entry->level while on `due` */
#define FIRING_LEVEL (TIMER_WHEEL_LEVELS + 1) /* entry->level while on `firing` */

/* A list head: only next and prev are used. */
struct list_head {
    struct timer_entry *next, *prev;
};

struct timer_wheel {
    /* BEGIN STUDENT FIELDS: timer_wheel.h contracts 4 and 5: 6 levels of 64 slots; what lets insert and cancel touch one slot, and the next-expiration query read O(levels) words, never an entry? (docs/05-timer.md#the-wheel) */
    uint64_t origin_ns;   /* tick 0 */
    uint64_t elapsed;     /* the wheel's time, in ticks: every slot before it was processed */
    size_t len;           /* armed entries */
    uint64_t occupied[TIMER_WHEEL_LEVELS];
    struct timer_entry slots[TIMER_WHEEL_LEVELS][TIMER_WHEEL_SLOTS]; /* sentinels: only next/prev used */
    struct timer_entry due;    /* sentinel of the list of entries inserted already due */
    struct timer_entry firing; /* sentinel of the slot being drained */
    /* END STUDENT */
};

/* BEGIN STUDENT HIDDEN */
static void list_init(struct timer_entry *head) { head->next = head->prev = head; }
static bool list_empty(const struct timer_entry *head) { return head->next == head; }

static void list_push_back(struct timer_entry *head, struct timer_entry *e)
{
    e->prev = head->prev;
    e->next = head;
    head->prev->next = e;
    head->prev = e;
}

static void list_unlink(struct timer_entry *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
    e->next = e->prev = NULL;
}

/* Moves every entry of `from` to the back of `to` (O(1)). */
static void list_splice(struct timer_entry *to, struct timer_entry *from)
{
    if (list_empty(from))
        return;
    struct timer_entry *first = from->next, *last = from->prev;
    first->prev = to->prev;
    to->prev->next = first;
    last->next = to;
    to->prev = last;
    list_init(from);
}

static uint64_t slot_range(int level) { return UINT64_C(1) << (TIMER_WHEEL_SLOT_BITS * level); }

/* The level for a deadline `when` > elapsed: the highest 6-bit group in
 * which they differ. Beyond the range: the top level. */
static int level_for(uint64_t elapsed, uint64_t when)
{
    uint64_t masked = (elapsed ^ when) | SLOT_MASK;
    if (masked >= TIMER_WHEEL_RANGE_TICKS)
        return TIMER_WHEEL_LEVELS - 1;
    int significant = 63 - __builtin_clzll(masked);
    return significant / TIMER_WHEEL_SLOT_BITS;
}

/* Puts an armed-to-be entry on the list it belongs to, relative to elapsed. */
static void place(struct timer_wheel *w, struct timer_entry *e)
{
    uint64_t when = e->deadline_tick;
    if (when <= w->elapsed) {
        e->level = DUE_LEVEL;
        e->slot = 0;
        list_push_back(&w->due, e);
        return;
    }
    if (when - w->elapsed >= TIMER_WHEEL_RANGE_TICKS)
        when = w->elapsed + TIMER_WHEEL_RANGE_TICKS - 1; /* contract 6: park it at the far end */
    int level = level_for(w->elapsed, when);
    int slot = (int)((when >> (TIMER_WHEEL_SLOT_BITS * level)) & SLOT_MASK);
    e->level = (uint8_t)level;
    e->slot = (uint8_t)slot;
    list_push_back(&w->slots[level][slot], e);
    w->occupied[level] |= UINT64_C(1) << slot;
}

/* Takes e off whatever list it is on, keeping the bitmaps exact. */
static void take(struct timer_wheel *w, struct timer_entry *e)
{
    list_unlink(e);
    if (e->level < TIMER_WHEEL_LEVELS && list_empty(&w->slots[e->level][e->slot]))
        w->occupied[e->level] &= ~(UINT64_C(1) << e->slot);
}

/* The earliest non-empty slot of `level` after the current one, going
 * round, and the tick it is due at. False when the level is empty.
 *
 * The current slot comes last: it never holds a timer of this turn (one
 * whose deadline shares the slot's bits with elapsed differs from it only
 * below this level, so place filed it lower). On the top level it may hold
 * timers of the next turn: a deadline up to a range ahead, from an elapsed
 * past the slot's start, lands in the same slot index one turn later. */
static bool next_in_level(const struct timer_wheel *w, int level, int *slot_out, uint64_t *when_out)
{
    uint64_t occ = w->occupied[level];
    if (occ == 0)
        return false;
    uint64_t range = slot_range(level);
    unsigned first = (unsigned)((w->elapsed / range + 1) & SLOT_MASK);
    /* rotate so that the slot after the current one is bit 0; the first set
     * bit is the distance to the next occupied slot */
    uint64_t rotated = first ? (occ >> first) | (occ << (64 - first)) : occ;
    unsigned slot = (first + (unsigned)__builtin_ctzll(rotated)) & SLOT_MASK;
    uint64_t level_range = range * TIMER_WHEEL_SLOTS;
    uint64_t level_start = w->elapsed & ~(level_range - 1);
    uint64_t when = level_start + slot * range;
    if (when <= w->elapsed)
        when += level_range; /* the slot comes round in the next turn of this level */
    *slot_out = (int)slot;
    *when_out = when;
    return true;
}

/* The earliest (level, slot, tick) over the levels: the lowest non-empty
 * level holds it (an entry sits at level l only when its deadline lies
 * beyond every slot of the levels below). */
static bool next_slot(const struct timer_wheel *w, int *level_out, int *slot_out, uint64_t *when_out)
{
    for (int l = 0; l < TIMER_WHEEL_LEVELS; l++) {
        if (next_in_level(w, l, slot_out, when_out)) {
            *level_out = l;
            return true;
        }
    }
    return false;
}

static uint64_t ticks_up(const struct timer_wheel *w, uint64_t ns)
{
    if (ns <= w->origin_ns)
        return 0;
    uint64_t d = ns - w->origin_ns;
    return d / TIMER_WHEEL_TICK_NS + (d % TIMER_WHEEL_TICK_NS != 0);
}

static uint64_t ticks_down(const struct timer_wheel *w, uint64_t ns)
{
    return ns <= w->origin_ns ? 0 : (ns - w->origin_ns) / TIMER_WHEEL_TICK_NS;
}
/* END STUDENT */

void timer_entry_init(struct timer_entry *e, timer_fire_fn fire, void *arg)
{
    e->next = e->prev = NULL;
    e->deadline_tick = 0;
    e->fire = fire;
    e->arg = arg;
    e->level = e->slot = 0;
    e->armed = false;
}

struct timer_wheel *timer_wheel_new(uint64_t origin_ns)
{
    /* BEGIN STUDENT: one allocation; every list empty, every bit clear (docs/05-timer.md#the-wheel) */
    struct timer_wheel *w = malloc(sizeof *w);
    if (!w)
        return NULL;
    w->origin_ns = origin_ns;
    w->elapsed = 0;
    w->len = 0;
    for (int l = 0; l < TIMER_WHEEL_LEVELS; l++) {
        w->occupied[l] = 0;
        for (int s = 0; s < TIMER_WHEEL_SLOTS; s++)
            list_init(&w->slots[l][s]);
    }
    list_init(&w->due);
    list_init(&w->firing);
    return w;
    /* END STUDENT */
}

void timer_wheel_free(struct timer_wheel *w)
{
    free(w);
}

void timer_wheel_insert(struct timer_wheel *w, struct timer_entry *e, uint64_t deadline_ns)
{
    /* BEGIN STUDENT: timer_wheel.h contracts 1, 4, 6, 7 and 9: which way does a deadline round, which level and slot does it belong to from the wheel's time, and what if it is armed already, due already or beyond the range? (docs/05-timer.md#inserting) */
    if (e->armed)
        take(w, e);
    else
        w->len++;
    e->deadline_tick = ticks_up(w, deadline_ns);
    e->armed = true;
    place(w, e);
    /* END STUDENT */
}

bool timer_wheel_cancel(struct timer_wheel *w, struct timer_entry *e)
{
    /* BEGIN STUDENT: timer_wheel.h contracts 4 and 8: what must stay true of the slot's bit once the entry leaves, and what does cancelling an entry that is not armed do? (docs/05-timer.md#cancelling) */
    if (!e->armed)
        return false;
    take(w, e);
    e->armed = false;
    w->len--;
    return true;
    /* END STUDENT */
}

size_t timer_wheel_advance(struct timer_wheel *w, uint64_t now_ns, size_t limit)
{
    /* BEGIN STUDENT: timer_wheel.h contracts 1, 2, 3 and 7: when a slot above level 0 comes due, are its timers due? And what may a fire callback do to the list you are walking? (docs/05-timer.md#advancing-and-cascading) */
    uint64_t now = ticks_down(w, now_ns);
    size_t fired = 0;
    /* what was inserted already due goes first; what callbacks insert due
     * from here on lands on a fresh `due` list, for the next advance */
    for (struct timer_entry *e = w->due.next; e != &w->due; e = e->next)
        e->level = FIRING_LEVEL;
    list_splice(&w->firing, &w->due);
    for (;;) {
        if (limit && fired == limit)
            return fired;
        if (list_empty(&w->firing)) {
            int level, slot;
            uint64_t when;
            if (!next_slot(w, &level, &slot, &when) || when > now)
                break;
            w->elapsed = when;
            struct timer_entry *head = &w->slots[level][slot];
            for (struct timer_entry *e = head->next; e != head; e = e->next)
                e->level = FIRING_LEVEL;
            list_splice(&w->firing, head);
            w->occupied[level] &= ~(UINT64_C(1) << slot);
            continue;
        }
        struct timer_entry *e = w->firing.next;
        list_unlink(e);
        if (e->deadline_tick <= w->elapsed) {
            e->armed = false;
            w->len--;
            fired++;
            e->fire(e, e->arg); /* may insert, cancel or free e */
        } else {
            place(w, e); /* cascade: a lower level now */
        }
    }
    if (now > w->elapsed)
        w->elapsed = now;
    return fired;
    /* END STUDENT */
}

uint64_t timer_wheel_next_expiration(const struct timer_wheel *w)
{
    /* BEGIN STUDENT: timer_wheel.h contract 5: never after the earliest deadline's tick, in O(levels): which level holds the earliest slot, and how do you find it without reading an entry? (docs/05-timer.md#the-next-expiration) */
    if (!list_empty(&w->due) || !list_empty(&w->firing))
        return w->origin_ns + w->elapsed * TIMER_WHEEL_TICK_NS;
    int level, slot;
    uint64_t when;
    if (!next_slot(w, &level, &slot, &when))
        return TIMER_WHEEL_NEVER;
    return w->origin_ns + when * TIMER_WHEEL_TICK_NS;
    /* END STUDENT */
}

size_t timer_wheel_len(const struct timer_wheel *w)
{
    /* BEGIN STUDENT: armed entries (docs/05-timer.md#the-wheel) */
    return w->len;
    /* END STUDENT */
}

uint64_t timer_wheel_test_elapsed(const struct timer_wheel *w)
{
    /* BEGIN STUDENT: the wheel's time in ticks (docs/05-timer.md#the-wheel) */
    return w->elapsed;
    /* END STUDENT */
}

int timer_wheel_test_level(const struct timer_wheel *w, const struct timer_entry *e)
{
    (void)w;
    if (!e->armed)
        return -1;
    return e->level >= TIMER_WHEEL_LEVELS ? TIMER_WHEEL_LEVELS : e->level;
}
