/* combinators.h - stage 05: join, select and timeout.
 *
 * Futures made of futures. Each combinator is a plain struct (the state of
 * a future, like struct sleep) that holds its children as struct future fat
 * pointers: it owns their lifetimes (it drops each of them exactly once) but
 * not their storage, which stays where the caller put it and must not move
 * or go away until the combinator is dropped. Children's outputs go where
 * the caller said (out pointers may be NULL for outputs of size 0).
 *
 *   join2     Ready when both children are; each child is polled only until
 *             it is Ready, and dropped as soon as it is.
 *   select2   Ready when either child is; children are polled in order (a
 *             first), so when both could finish the first wins. The loser
 *             is dropped at once, before select2 returns Ready:
 *             cancellation by drop. Output: int, the winner (0 = a, 1 = b).
 *   timeout   select2 of the future and a sleep (sleep.h): the future's
 *             output if it finishes first (or in the same poll as the
 *             deadline), TIMEOUT_ELAPSED otherwise; the loser is dropped at
 *             once, so a finished future leaves no timer in the wheel and an
 *             expired one is cancelled by its drop. Output: enum
 *             timeout_result.
 *
 * Why not stage 04's DeadlineSignal? It needs someone to call expire (a
 * thread, or a wheel callback), three handles and a shared allocation, and
 * it races a producer against a timer for a value. timeout races a future
 * against a timer: both are already futures, the wheel is already there,
 * and select's drop of the loser is the whole of the cancellation.
 * docs/05-timer.md#timeout says more.
 */
#ifndef LAB_COMBINATORS_H
#define LAB_COMBINATORS_H

#include <stdbool.h>
#include <stdint.h>

#include "future.h"
#include "sleep.h"

struct join2 {
    struct future child[2];
    void *out[2];
    bool done[2];    /* Ready, output written, child dropped */
    bool dropped;    /* join2_drop ran */
};
struct join2 join2_new(struct future a, void *a_out, struct future b, void *b_out);
enum poll join2_poll(struct join2 *j, struct context *cx);
void join2_drop(struct join2 *j);     /* drops the children not yet done */
extern const struct future_vtable join2_vtable;      /* output: none */
struct future join2_future(struct join2 *j);

struct select2 {
    struct future child[2];
    void *out[2];
    int winner;      /* -1 while none; then 0 or 1 */
    bool live[2];    /* not yet dropped */
};
struct select2 select2_new(struct future a, void *a_out, struct future b, void *b_out);
/* On POLL_READY writes the winner (0 or 1) to *winner (may be NULL). */
enum poll select2_poll(struct select2 *s, struct context *cx, int *winner);
void select2_drop(struct select2 *s); /* drops the children still live */
extern const struct future_vtable select2_vtable;    /* output: int */
struct future select2_future(struct select2 *s);

enum timeout_result { TIMEOUT_OK = 0, TIMEOUT_ELAPSED = 1 };

struct timeout {
    struct future inner;
    void *inner_out;
    struct sleep sleep;     /* the deadline: registered at the first poll */
    struct select2 race;    /* select2(inner, sleep), built at the first poll */
    bool started;
};
/* timeout of `inner` (moved in: the timeout drops it) after duration_ns
 * from now on td's clock. */
struct timeout timeout_new(struct future inner, void *inner_out, struct time_driver *td,
                           uint64_t duration_ns);
enum poll timeout_poll(struct timeout *t, struct context *cx, enum timeout_result *res);
void timeout_drop(struct timeout *t);
extern const struct future_vtable timeout_vtable;    /* output: enum timeout_result */
struct future timeout_future(struct timeout *t);

#endif
