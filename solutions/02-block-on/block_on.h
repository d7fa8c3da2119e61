/* block_on.h - stage 02: run one future to completion on this thread.
 *
 * The contract (docs/02-block-on.md#the-contract):
 *  1. block_on() never spins: it polls the future with a waker that unparks
 *     this thread; on POLL_PENDING it parks (parker.h) and polls again only
 *     after a wake (or a spurious return of park). Waiting costs no CPU.
 *  2. It leaves the future to its caller: it does not drop it; it writes the
 *     output to `out` and returns the number of polls it made.
 */
#ifndef LAB_BLOCK_ON_H
#define LAB_BLOCK_ON_H

#include "future.h"

/* Polls `fut` until POLL_READY, writing its output to `out` (which must hold
 * fut.vtable->output_size bytes; NULL when that is 0). Does not drop fut: the
 * caller still owns it. Returns the number of polls it made. */
unsigned long block_on(struct future fut, void *out);

#endif
