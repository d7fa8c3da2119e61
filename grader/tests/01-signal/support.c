/* support.c - helpers shared by the stage-01 tests. */
#include <stdatomic.h>
#include <stdlib.h>

#include "stage01.h"

enum poll poll_with(struct signal_future *fut, struct counting_waker *cw, struct signal_output *out)
{
    struct waker w = counting_waker_get(cw);
    struct context cx = context_from_waker(&w);
    *out = (struct signal_output){ .outcome = (enum signal_outcome)-1, .value = (void *)out };
    return signal_future_poll(fut, &cx, out);
}

void new_signal(void (*drop_value)(void *), struct signal **p, struct signal_future **f)
{
    *p = NULL;
    *f = NULL;
    int rc = signal_new(drop_value, p, f);
    cr_assert_eq(rc, 0, "signal_new returned %d; it must return 0 when memory is available", rc);
    cr_assert_not_null(*p, "signal_new returned 0 but did not set the producer handle");
    cr_assert_not_null(*f, "signal_new returned 0 but did not set the future handle");
}

const char *outcome_name(enum signal_outcome o)
{
    switch (o) {
    case SIGNAL_VALUE: return "SIGNAL_VALUE";
    case SIGNAL_CLOSED: return "SIGNAL_CLOSED";
    case SIGNAL_CONSUMED: return "SIGNAL_CONSUMED";
    }
    return "an unknown outcome (out was not filled in)";
}

const char *status_name(enum signal_status s)
{
    switch (s) {
    case SIGNAL_OK: return "SIGNAL_OK";
    case SIGNAL_ALREADY_COMPLETE: return "SIGNAL_ALREADY_COMPLETE";
    case SIGNAL_NO_LISTENER: return "SIGNAL_NO_LISTENER";
    }
    return "an unknown status";
}

void expect_ready(enum poll r, const struct signal_output *out, enum signal_outcome outcome,
                  void *value, const char *what)
{
    cr_assert_eq(r, POLL_READY, "%s returned POLL_PENDING; it must be POLL_READY with %s",
                 what, outcome_name(outcome));
    cr_assert_eq(out->outcome, outcome, "%s was Ready with %s; expected %s", what,
                 outcome_name(out->outcome), outcome_name(outcome));
    cr_assert_eq(out->value, value, "%s was Ready with %s but value %p; expected %p%s", what,
                 outcome_name(out->outcome), out->value, value,
                 value ? " (the producer's value)" : " (NULL: only SIGNAL_VALUE carries a value)");
}
