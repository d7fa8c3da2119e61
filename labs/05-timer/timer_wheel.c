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
#include "lab_todo.h"

#define SLOT_MASK (TIMER_WHEEL_SLOTS - 1)
#define DUE_LEVEL TIMER_WHEEL_LEVELS     /* entry->level while on `due` */
#define FIRING_LEVEL (TIMER_WHEEL_LEVELS + 1) /* entry->level while on `firing` */

/* A list head: only next and prev are used. */
struct list_head {
    struct timer_entry *next, *prev;
};

struct timer_wheel {
    int todo_your_fields_here; /* TODO: timer_wheel.h contracts 4 and 5: 6 levels of 64 slots; what lets insert and cancel touch one slot, and the next-expiration query read O(levels) words, never an entry? (docs/05-timer.md#the-wheel) */
};


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
    (void)origin_ns;
    LAB_TODO("one allocation; every list empty, every bit clear (docs/05-timer.md#the-wheel)");
}

void timer_wheel_free(struct timer_wheel *w)
{
    free(w);
}

void timer_wheel_insert(struct timer_wheel *w, struct timer_entry *e, uint64_t deadline_ns)
{
    (void)w;
    (void)e;
    (void)deadline_ns;
    LAB_TODO("timer_wheel.h contracts 1, 4, 6, 7 and 9: which way does a deadline round, which level and slot does it belong to from the wheel's time, and what if it is armed already, due already or beyond the range? (docs/05-timer.md#inserting)");
}

bool timer_wheel_cancel(struct timer_wheel *w, struct timer_entry *e)
{
    (void)w;
    (void)e;
    LAB_TODO("timer_wheel.h contracts 4 and 8: what must stay true of the slot's bit once the entry leaves, and what does cancelling an entry that is not armed do? (docs/05-timer.md#cancelling)");
}

size_t timer_wheel_advance(struct timer_wheel *w, uint64_t now_ns, size_t limit)
{
    (void)w;
    (void)now_ns;
    (void)limit;
    LAB_TODO("timer_wheel.h contracts 1, 2, 3 and 7: when a slot above level 0 comes due, are its timers due? And what may a fire callback do to the list you are walking? (docs/05-timer.md#advancing-and-cascading)");
}

uint64_t timer_wheel_next_expiration(const struct timer_wheel *w)
{
    (void)w;
    LAB_TODO("timer_wheel.h contract 5: never after the earliest deadline's tick, in O(levels): which level holds the earliest slot, and how do you find it without reading an entry? (docs/05-timer.md#the-next-expiration)");
}

size_t timer_wheel_len(const struct timer_wheel *w)
{
    (void)w;
    LAB_TODO("armed entries (docs/05-timer.md#the-wheel)");
}

uint64_t timer_wheel_test_elapsed(const struct timer_wheel *w)
{
    (void)w;
    LAB_TODO("the wheel's time in ticks (docs/05-timer.md#the-wheel)");
}

int timer_wheel_test_level(const struct timer_wheel *w, const struct timer_entry *e)
{
    (void)w;
    if (!e->armed)
        return -1;
    return e->level >= TIMER_WHEEL_LEVELS ? TIMER_WHEEL_LEVELS : e->level;
}
