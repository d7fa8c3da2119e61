/* coop.c - the thread-local cooperative budget (the functions are inline in
 * coop.h; this file owns the variable and the escape hatch). */
#include <limits.h>
#include "coop.h"

_Thread_local unsigned coop_budget_ = UINT_MAX;

unsigned coop_unconstrained_begin(void)
{
    unsigned saved = coop_budget_;
    coop_budget_ = UINT_MAX;
    return saved;
}

void coop_unconstrained_end(unsigned saved) { coop_budget_ = saved; }
