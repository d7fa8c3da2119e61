/* block_on.c - stage 02: run one future to completion on this thread.
 *
 * The whole executor is a loop: poll; on Pending, park until a wake. The
 * waker handed to the future unparks this thread, and the parker's token
 * makes the order of "the future's wake" and "our park" not matter:
 *
 *     poll -> Pending ----> park ----> poll -> Ready
 *               |            ^
 *               +-- wake ----+   (before park or during it: same result)
 *
 * docs/02-block-on.md#block_on walks through it.
 *
 * One parker per call, not one cached per thread. A cached parker would save
 * a malloc per call, but a future from an earlier call may still hold a
 * waker to it and wake it late; that stale token would then cost the next
 * call a poll nobody asked for, and a block_on nested inside a poll would
 * share the token with the one outside. A fresh parker makes a stale waker
 * harmless: it keeps an unwatched parker alive until it is dropped, and
 * unparks nobody.
 */
#include <stdio.h>
#include <stdlib.h>

#include "block_on.h"
#include "parker.h"

unsigned long block_on(struct future fut, void *out)
{
    /* BEGIN STUDENT: block_on.h contracts 1 and 2: what wakes this thread while the future is Pending, how many polls does one wake earn, and what is given back before returning? (docs/02-block-on.md#block_on) */
    struct parker *p = parker_new(); /* our reference */
    if (!p) {
        fputs("block_on: out of memory for a parker\n", stderr);
        abort(); /* no way to report it: block_on cannot fail */
    }
    struct waker w = parker_waker(p); /* +1: the waker's reference, lent to every poll */
    struct context cx = context_from_waker(&w);

    unsigned long polls = 0;
    for (;;) {
        polls++;
        if (future_poll(fut, &cx, out) == POLL_READY)
            break;
        /* Pending: the future has arranged a wake (the contract). Sleep until
         * it comes; if it came already, the token makes park return at once.
         * A return without a wake (spurious) is harmless: we poll again and
         * the future, which re-checks its own state, says Pending again. */
        parker_park(p);
    }

    waker_drop(&w);    /* -1: the waker's reference (the future holds clones, if any) */
    parker_release(p); /* -1: ours; a clone still held somewhere keeps p alive */
    return polls;      /* fut is still the caller's: we never drop it */
    /* END STUDENT */
}
