/* wake_probe.h - is the API still usable while a waker is being woken?
 *
 * "Wake outside every lock" (stage 01's contract 4 and its heirs) is checked
 * two ways. explore.h counts the pthread locks the waking thread holds, and
 * names the one it took; that sees only locks made of pthread calls. This
 * probe asks what the rule is for, whatever the lock is made of (a pthread
 * mutex, a spinlock on an atomic flag, a ticket lock, a flag guarded by a
 * condition variable): inside the wake, the woken side can use the API.
 *
 * The test adds operations to a probe (at most LAB_PROBE_MAX), typically one
 * on the object whose waker is woken (poll the future just completed, a
 * receive on the same channel, a timer on the same driver) and one on a
 * fresh object of the same kind (which a global lock stops), and sets
 * lab_wake_probe_hook as a counting waker's hook. At the first wake of that
 * waker, on the waking thread, every operation starts on a helper thread of
 * its own, and the wake waits for them. An operation that needs a lock the
 * waking thread still holds cannot finish until the wake returns: a real
 * executor's worker that runs the woken task at once would deadlock, or
 * wait for as long as the wake takes.
 *
 * Bounded, and fair to a loaded machine: each helper gets `bound_ms` of time
 * in which it was not waiting for a CPU (its run-queue wait, from
 * /proc/self/task/<tid>/schedstat, is not counted), up to three times
 * bound_ms of wall time. A helper still inside its operation after its
 * bound_ms is blocked (it slept on a lock, or spun on one); one that never
 * had its bound_ms of CPU-or-sleep before the wall limit was starved by the
 * machine, and the test reports "not judged" (lab_cannot_judge), never a
 * failure. A correct operation needs microseconds.
 */
#ifndef LAB_TEST_WAKE_PROBE_H
#define LAB_TEST_WAKE_PROBE_H

#include <stdbool.h>
#include "wakers.h"

#define LAB_PROBE_MAX 4

struct lab_wake_probe;

/* A probe whose helpers each get bound_ms (scale it for the Valgrind lane:
 * SCALED_MS or the stage's own). */
struct lab_wake_probe *lab_wake_probe_new(unsigned bound_ms);
/* An operation to run from inside the wake; `what` names it for the report
 * ("signal_future_poll of the signal just completed"). fn runs on a helper
 * thread and must not assert (record what it saw in arg instead). */
void lab_wake_probe_add(struct lab_wake_probe *p, const char *what, void (*fn)(void *arg), void *arg);
/* Runs the probe once: starts the helpers and waits for them as above.
 * Later calls do nothing. Call it from inside the wake. */
void lab_wake_probe_run(struct lab_wake_probe *p);
/* A counting-waker hook (wakers.h) that runs the probe `arg` at the first
 * wake or wake_by_ref. */
void lab_wake_probe_hook(struct counting_waker *cw, enum waker_event ev, unsigned nth, void *arg);
/* The same at the first drop: a waker given back (a future dropped, a
 * registration removed) runs the executor's code too, which the same rule
 * keeps out of every lock. */
void lab_wake_probe_drop_hook(struct counting_waker *cw, enum waker_event ev, unsigned nth, void *arg);

enum lab_probe_verdict {
    LAB_PROBE_NOT_RUN,  /* no wake ran it */
    LAB_PROBE_USABLE,   /* every operation finished while the wake was running */
    LAB_PROBE_BLOCKED,  /* one did not, in its bound_ms: a lock it needs was held across the wake */
    LAB_PROBE_STARVED,  /* the machine did not give a helper the CPU to tell: not judged */
    LAB_PROBE_STUCK,    /* blocked, and still not finished bound_ms after the wake returned */
};

/* After the call that woke returned: waits for the helpers (their bound
 * again) and says what the probe saw. Call it before touching the objects
 * the operations use: with LAB_PROBE_STUCK a helper is still inside one,
 * and the test must end at once (fail). */
enum lab_probe_verdict lab_wake_probe_finish(struct lab_wake_probe *p);
/* The evidence, in a sentence: what each operation did and for how long
 * ("signal_future_poll of the signal just completed had not returned after
 * 1000 ms in which it was not waiting for a CPU (it ran 0.0 ms, slept
 * 1000 ms)"). Valid until lab_wake_probe_free. */
const char *lab_wake_probe_evidence(struct lab_wake_probe *p);
/* Frees the probe (after lab_wake_probe_finish, with every helper joined). */
void lab_wake_probe_free(struct lab_wake_probe *p);

#endif
