/* channel.c - stage 07: the async channel's send and receive, and the async
 * mutex's lock and unlock (channel.h).
 *
 * Your part is this file: the four functions below. The rest is given:
 * channel_given.c (the unbounded channel's lock-free block list, creating,
 * closing, dropping) and channel_given.h (struct chan and the helpers these
 * four call: the wait lists, make_room and chan_ring_push for the bounded ring,
 * chan_unbounded_send and chan_unbounded_recv_poll).
 *
 * One pthread mutex per channel protects the bounded ring, the flags and
 * both wait lists. Wakers are always woken after the mutex is released: a
 * wake may run scheduler code, and must never run it under our lock.
 */
#include "channel.h"
#include "channel_given.h"
#include "coop.h"
#include "lab_todo.h"

/* ---- the channel ------------------------------------------------------------------- */

enum poll chan_send_poll(struct chan_send *s, struct context *cx, enum chan_status *st)
{
    (void)s;
    (void)cx;
    (void)st;
    LAB_TODO("channel.h contracts 2 to 4: when may a send do nothing this poll, when must it wait, and whom must it wake? (an unbounded channel: chan_unbounded_send, given) (docs/07b-channels.md#channels)");
}

enum poll chan_recv_poll(struct chan_recv *r, struct context *cx, uint64_t *out, enum chan_status *st)
{
    (void)r;
    (void)cx;
    (void)out;
    (void)st;
    LAB_TODO("channel.h contracts 1, 3 and 4: the budget may run out in this poll; what must not have happened yet when it does, and whom does taking a message free? (an unbounded channel: chan_unbounded_recv_poll, given) (docs/07b-channels.md#channels)");
}

/* ---- the mutex ------------------------------------------------------------------------ */

enum poll async_mutex_lock_poll(struct async_mutex_lock *l, struct context *cx)
{
    (void)l;
    (void)cx;
    LAB_TODO("the async mutex: when the holder unlocks, who gets the mutex, and how does a woken waiter know it holds it already? What comes before everything else in a poll? (docs/07b-channels.md#the-mutex)");
}

void async_mutex_unlock(struct async_mutex *m)
{
    (void)m;
    LAB_TODO("the async mutex: with a waiter queued, is the mutex ever free between this unlock and that waiter's poll? (docs/07b-channels.md#the-mutex)");
}
