/* join_checks.h - what a test checks of a join handle whose task a runtime
 * dropped at shutdown (stages 03 on: it needs stage 03's join.h). */
#ifndef LAB_TEST_JOIN_CHECKS_H
#define LAB_TEST_JOIN_CHECKS_H

#include "lab_test.h"
#include "join.h"

/* The task was dropped by executor_free / ws_runtime_free: its join handle
 * is finished and says JOIN_CANCELLED. Drops the handle. `what` names the
 * task in the failure ("a sleeping task"); `rule`, when not NULL, ends it
 * with the rule broken and its contract ("ws_runtime_free cancels every task
 * it drops (runtime.h contract 6)"). */
static inline void expect_join_cancelled_per(struct join_handle *jh, const char *what, const char *rule)
{
    const char *sep = rule ? ": " : "";
    rule = rule ? rule : "";
    enum join_status st = JOIN_OK;
    cr_assert_eq(join_handle_poll(jh, NULL, NULL, &st), POLL_READY, "the join handle of %s still says Pending after "
                 "the runtime was freed%s%s", what, sep, rule);
    cr_assert_eq(st, JOIN_CANCELLED, "%s was dropped when the runtime was freed, but its join handle did not say "
                 "JOIN_CANCELLED%s%s", what, sep, rule);
    join_handle_drop(jh);
}

/* The same, naming no contract. */
static inline void expect_join_cancelled(struct join_handle *jh, const char *what)
{
    expect_join_cancelled_per(jh, what, NULL);
}

#endif
