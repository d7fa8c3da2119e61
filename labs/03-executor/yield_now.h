/* yield_now.h - stage 03: give the thread to the other ready tasks, once.
 *
 * The first poll wakes its own task (by reference) and answers Pending; the
 * executor puts the task at the back of the ready queue, so every task that
 * was ready before it runs first. The second poll answers Ready. Two polls,
 * one wake, no output.
 *
 *   struct yield_now y;
 *   yield_now_init(&y);
 *   ... if (yield_now_poll(&y, cx) == POLL_PENDING) return POLL_PENDING;
 *
 * A yield_now is a plain struct: keep it in your future's state across polls,
 * like every local that lives across an await.
 */
#ifndef LAB_YIELD_NOW_H
#define LAB_YIELD_NOW_H

#include <stdbool.h>
#include "future.h"

struct yield_now {
    bool yielded; /* the first poll happened */
};

void yield_now_init(struct yield_now *y);
enum poll yield_now_poll(struct yield_now *y, struct context *cx);
/* The future view (output_size 0; nothing to drop). */
struct future yield_now_as_future(struct yield_now *y);

#endif
