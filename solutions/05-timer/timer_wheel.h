/* timer_wheel.h - stage 05: a hierarchical timing wheel.
 *
 * A timer wheel answers three questions cheaply, whatever the number of
 * timers: "add this timer", "forget this timer", and "when is the next one
 * due?". It is six levels of 64 slots. A level-0 slot is one tick (1 ms);
 * each level is 64 times coarser than the one below:
 *
 *   level   slot width        level span (64 slots)
 *     0     1 ms              64 ms
 *     1     64 ms             ~4.1 s
 *     2     ~4.1 s            ~4.4 min
 *     3     ~4.4 min          ~4.7 h
 *     4     ~4.7 h            ~12.4 days
 *     5     ~12.4 days        ~2.2 years   (2^36 ticks: the wheel's range)
 *
 * Each level keeps a 64-bit occupied bitmap (bit s set <=> slot s is
 * non-empty). Which level and slot a timer belongs in, how the bitmaps
 * answer "when is the next one due?" without a look at slots or entries
 * one by one, and what becomes of a coarse slot's timers when time reaches
 * it are the chapter's questions (docs/05-timer.md#the-wheel onward), and
 * the contract below is what your answers must keep.
 *
 * The contract (docs/05-timer.md#the-contract):
 *  1. Never early: a deadline is rounded up to the next tick boundary, and a
 *     timer fires only in an advance whose `now` is at or past that boundary,
 *     hence at or past its deadline.
 *  2. Late by less than one tick: an advance to `now` fires every timer whose
 *     rounded deadline is <= now; a timer with deadline d therefore fires in
 *     the first advance with now >= d rounded up, i.e. before d + 1 ms
 *     when an advance comes then. When advances come is the driver's and
 *     the executor's business: time_driver.h contract 5 gives the bound a
 *     task sees (idle executor: under a tick; busy: the driver tick's).
 *  3. Timers that fire in one advance fire in order of their rounded
 *     deadlines (ties: any order).
 *  4. Insert and cancel are O(1) and never allocate: the entry is intrusive
 *     (it lives in the caller's memory) and the wheel is one allocation made
 *     by timer_wheel_new.
 *  5. timer_wheel_next_expiration() is O(levels): the time of the earliest
 *     non-empty slot (a tick boundary at or before the earliest deadline in
 *     it), so a driver that parks until then never oversleeps a timer. After
 *     an advance to `now` it is > now, or the wheel is empty, or a timer was
 *     inserted already due (then it is <= now: advance again).
 *  6. A deadline beyond the wheel's range (2^36 ticks from now) is kept
 *     exactly; the entry is parked in the level-5 slot furthest ahead and
 *     re-inserted each time that slot comes round, so it is never fired early.
 *  7. A timer inserted with a deadline already due (rounded deadline <= the
 *     wheel's time) fires in the next advance, not the current one: a fire
 *     callback that re-arms at "now" cannot make one advance loop forever.
 *     A timer inserted during an advance with a later deadline goes into its
 *     slot as usual and fires in this advance if that slot is <= now.
 *  8. Cancel removes an armed entry and returns true; cancelling an entry
 *     that is not armed (never inserted, already fired, already cancelled)
 *     does nothing and returns false. A fire callback may cancel or insert
 *     any entry, its own included, and may free its own entry's memory.
 *  9. Re-inserting an armed entry moves it (cancel, then insert).
 *
 * Threads: a wheel is not thread-safe; whoever shares one locks around it
 * (stage 05's time driver does, with one mutex).
 * Ownership: the wheel never owns entries; free an entry's memory only when
 * it is not armed (or from its own fire callback). timer_wheel_free leaves
 * armed entries untouched (they are simply forgotten).
 */
#ifndef LAB_TIMER_WHEEL_H
#define LAB_TIMER_WHEEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TIMER_WHEEL_LEVELS 6
#define TIMER_WHEEL_SLOTS 64
#define TIMER_WHEEL_SLOT_BITS 6
#define TIMER_WHEEL_TICK_NS UINT64_C(1000000) /* 1 ms */
/* The far end of the wheel: a deadline more than this many ticks ahead is
 * re-inserted until it comes into range (contract 6). */
#define TIMER_WHEEL_RANGE_TICKS (UINT64_C(1) << (TIMER_WHEEL_LEVELS * TIMER_WHEEL_SLOT_BITS))
/* What next_expiration answers for an empty wheel. */
#define TIMER_WHEEL_NEVER UINT64_MAX

struct timer_wheel;
struct timer_entry;

/* Called by timer_wheel_advance for a timer that is due, after the entry
 * was removed (it is no longer armed: the callback may re-insert it, or free
 * it). */
typedef void (*timer_fire_fn)(struct timer_entry *entry, void *arg);

/* An intrusive timer: embed it in your own struct, timer_entry_init it once,
 * then insert and cancel it as often as you like. The fields are the
 * wheel's: read none of them, write none of them. */
struct timer_entry {
    struct timer_entry *next, *prev; /* the links of the list it is on (a slot, or due) */
    uint64_t deadline_tick;          /* rounded-up deadline, in ticks since the wheel's origin */
    timer_fire_fn fire;
    void *arg;
    uint8_t level, slot;             /* where it is (meaningful while armed) */
    bool armed;                      /* on one of the wheel's lists */
};

/* Prepares an entry: not armed; `fire(entry, arg)` is what a due entry calls. */
void timer_entry_init(struct timer_entry *e, timer_fire_fn fire, void *arg);
/* True while the entry is in the wheel (inserted, not yet fired or cancelled). */
static inline bool timer_entry_armed(const struct timer_entry *e) { return e->armed; }

/* A wheel whose time starts at origin_ns (tick 0 = origin_ns), empty.
 * NULL when out of memory. */
struct timer_wheel *timer_wheel_new(uint64_t origin_ns);
void timer_wheel_free(struct timer_wheel *w);

/* Arms e to fire at deadline_ns (absolute, same clock as origin_ns), rounded
 * up to the next tick. O(1); no allocation. An armed e is moved. */
void timer_wheel_insert(struct timer_wheel *w, struct timer_entry *e, uint64_t deadline_ns);
/* Disarms e. True when it was armed. O(1). */
bool timer_wheel_cancel(struct timer_wheel *w, struct timer_entry *e);

/* Moves the wheel's time to now_ns (never backwards: an earlier now_ns only
 * fires what is already due), firing due timers in deadline order and
 * cascading the rest, firing at most `limit` timers (0 = no limit).
 * Returns how many fired; when that equals a non-zero limit, call again (the
 * rest are still due). */
size_t timer_wheel_advance(struct timer_wheel *w, uint64_t now_ns, size_t limit);

/* The time (ns, a tick boundary) at which the earliest non-empty slot is due,
 * or TIMER_WHEEL_NEVER when no timer is armed. O(levels). */
uint64_t timer_wheel_next_expiration(const struct timer_wheel *w);

/* Armed entries. O(1). */
size_t timer_wheel_len(const struct timer_wheel *w);

/* ---- test hooks ---- */

/* The wheel's time, in ticks since the origin (how far advance has gone). */
uint64_t timer_wheel_test_elapsed(const struct timer_wheel *w);
/* The level an armed entry sits at now (TIMER_WHEEL_LEVELS for one that is
 * due, waiting for the next advance); -1 when not armed. */
int timer_wheel_test_level(const struct timer_wheel *w, const struct timer_entry *e);

#endif
