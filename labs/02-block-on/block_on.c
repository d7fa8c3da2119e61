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
#include "lab_todo.h"

unsigned long block_on(struct future fut, void *out)
{
    (void)fut;
    (void)out;
    LAB_TODO("block_on.h contracts 1 and 2: what wakes this thread while the future is Pending, how many polls does one wake earn, and what is given back before returning? (docs/02-block-on.md#block_on)");
}
