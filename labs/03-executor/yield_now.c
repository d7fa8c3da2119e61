/* yield_now.c - stage 03: one step back in the line (yield_now.h). */
#include "yield_now.h"
#include "lab_todo.h"

void yield_now_init(struct yield_now *y) { y->yielded = false; }

enum poll yield_now_poll(struct yield_now *y, struct context *cx)
{
    (void)y;
    (void)cx;
    LAB_TODO("yield_now.h: how does a future get polled again when nothing outside will wake it? (docs/03-executor.md#yield_now)");
}

static enum poll yield_now_future_poll(void *self, struct context *cx, void *out)
{
    (void)out;
    return yield_now_poll(self, cx);
}

static const struct future_vtable yield_now_vt =
    FUTURE_VTABLE_INIT(struct yield_now, 0, yield_now_future_poll, NULL);

struct future yield_now_as_future(struct yield_now *y) { return future_of(&yield_now_vt, y); }
