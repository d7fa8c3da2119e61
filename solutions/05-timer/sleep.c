/* sleep.c - stage 05: sleep as a future over the time driver's timers. */
#include "sleep.h"

struct sleep sleep_until(struct time_driver *td, uint64_t deadline_ns)
{
    struct sleep s;
    time_timer_init(&s.timer);
    s.td = td;
    s.deadline_ns = deadline_ns;
    return s;
}

struct sleep sleep_for(struct time_driver *td, uint64_t duration_ns)
{
    return sleep_until(td, time_driver_now(td) + duration_ns);
}

enum poll sleep_poll(struct sleep *s, struct context *cx)
{
    /* BEGIN STUDENT: sleep.h contracts 1 and 2: who decides whether the deadline has passed, and who holds the waker until it does? (docs/05-timer.md#sleep) */
    return time_timer_poll(s->td, &s->timer, s->deadline_ns, cx->waker) ? POLL_READY : POLL_PENDING;
    /* END STUDENT */
}

void sleep_drop(struct sleep *s)
{
    /* BEGIN STUDENT: sleep.h contract 3: after this drop, what may the wheel and the driver still hold of the sleep? (docs/05-timer.md#sleep) */
    time_timer_cancel(s->td, &s->timer);
    /* END STUDENT */
}

static enum poll sleep_vpoll(void *self, struct context *cx, void *out)
{
    (void)out;
    return sleep_poll(self, cx);
}

static void sleep_vdrop(void *self) { sleep_drop(self); }

const struct future_vtable sleep_vtable = FUTURE_VTABLE_INIT(struct sleep, 0, sleep_vpoll, sleep_vdrop);

struct future sleep_future(struct sleep *s) { return future_of(&sleep_vtable, s); }
