/* support.c - helpers shared by the stage-04 tests. */
#include <stdatomic.h>
#include <stdlib.h>

#include "stage04.h"

struct ds new_ds(void (*drop_value)(void *))
{
    struct ds d = { NULL, NULL, NULL };
    int rc = deadline_signal_new(drop_value, &d.producer, &d.timer, &d.future);
    cr_assert_eq(rc, 0, "deadline_signal_new returned %d; it must return 0 when memory is available", rc);
    cr_assert(d.producer && d.timer && d.future,
              "deadline_signal_new returned 0 but left a handle unset (producer %p, timer %p, future %p)",
              (void *)d.producer, (void *)d.timer, (void *)d.future);
    return d;
}

enum poll poll_with(struct deadline_signal_future *f, struct counting_waker *cw,
                    struct deadline_signal_output *out)
{
    struct waker w = counting_waker_get(cw);
    struct context cx = context_from_waker(&w);
    *out = (struct deadline_signal_output){ .outcome = (enum deadline_signal_outcome)-1, .value = (void *)out };
    return deadline_signal_future_poll(f, &cx, out);
}

const char *outcome_name(enum deadline_signal_outcome o)
{
    switch (o) {
    case DEADLINE_SIGNAL_VALUE: return "DEADLINE_SIGNAL_VALUE";
    case DEADLINE_SIGNAL_EXPIRED: return "DEADLINE_SIGNAL_EXPIRED";
    case DEADLINE_SIGNAL_CONSUMED: return "DEADLINE_SIGNAL_CONSUMED";
    }
    return "an unknown outcome (out was not filled in)";
}

const char *status_name(enum deadline_signal_status s)
{
    switch (s) {
    case DEADLINE_SIGNAL_WON: return "DEADLINE_SIGNAL_WON";
    case DEADLINE_SIGNAL_LOST_TO_VALUE: return "DEADLINE_SIGNAL_LOST_TO_VALUE";
    case DEADLINE_SIGNAL_LOST_TO_EXPIRY: return "DEADLINE_SIGNAL_LOST_TO_EXPIRY";
    case DEADLINE_SIGNAL_NO_LISTENER: return "DEADLINE_SIGNAL_NO_LISTENER";
    }
    return "an unknown status";
}

void expect_ready(enum poll r, const struct deadline_signal_output *out,
                  enum deadline_signal_outcome outcome, void *value, const char *what)
{
    cr_assert_eq(r, POLL_READY, "%s returned POLL_PENDING; it must be POLL_READY with %s", what,
                 outcome_name(outcome));
    cr_assert_eq(out->outcome, outcome, "%s was Ready with %s; expected %s", what,
                 outcome_name(out->outcome), outcome_name(outcome));
    cr_assert_eq(out->value, value, "%s was Ready with %s but value %p; expected %p%s", what,
                 outcome_name(out->outcome), out->value, value,
                 value ? " (the producer's value)" : " (NULL: only DEADLINE_SIGNAL_VALUE carries a value)");
}

void expect_status(enum deadline_signal_status got, enum deadline_signal_status want, const char *what,
                   const char *why)
{
    cr_assert_eq(got, want, "%s returned %s; expected %s (%s)", what, status_name(got), status_name(want), why);
}

void spin_random(uint64_t *rng, unsigned max_bits)
{
    uint64_t r = lab_rand(rng);
    unsigned bits = (unsigned)(r % (max_bits + 1));
    uint64_t n = bits ? (r >> 8) & ((UINT64_C(1) << bits) - 1) : 0;
    for (volatile uint64_t i = 0; i < n; i++)
        ;
}

void spin_uniform(uint64_t *rng, unsigned n)
{
    uint64_t k = n ? lab_rand(rng) % n : 0;
    for (volatile uint64_t i = 0; i < k; i++)
        ;
}
