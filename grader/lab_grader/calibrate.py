"""Step 4 of a grading: a timeout is judged against the machine.

Two rules, applied in this order to a lane run's outcomes:

1. A test that timed out or did not run before its body began (no BEGIN
   record: the worker was never scheduled, or its start-up stalled, or the
   runner was stopped at its backstop, on a machine under heavy load) has
   run no code under test, so it is run once more on the same binary before
   it is judged; so is one that began but left no outcome at all (the
   runner's report lost it, and its records show no end, crash or hang:
   the runner was stopped while it ran). One that did not start, or left no
   outcome, in either run is run on the reference: if the reference starts and passes it now, the machine can
   run it, so what stopped the runner was the code under test (a kill(-1)
   stops Criterion's own helpers) and it stays a failure; else not judged.
2. A test that still timed out (and did not stall: see judge.py) is run
   again at once on the reference, in
   the same lane with the same limits. If the reference passes it within a
   quarter of the limit (limits are set near ten times the reference's time
   on a quiet machine), the machine is not the problem and the timeout
   stands, with the reference's time beside it. If the reference is as
   slow, nobody can be judged on this machine right now: the outcome
   becomes TOO_SLOW and its item is left unjudged, with "rerun" in its line.

A hang is still caught as fast as before; only a loaded machine costs the
second run.
"""
from .outcomes import Verdict


def calibrate(outs, rerun, reference, reference_tests, limits_hit=False):
    """Applies both rules to outs ({test: Outcome} of one lane run), in
    place. rerun(tests, binary, name): those tests run again in the same
    lane with the same limits, on `binary` (None: the same one), in a run
    directory named for `name` beside the first; returns ({test: Outcome},
    RunResult) (lanes.Runner.rerun, handed in by the pipeline).
    reference: the reference's test binary for the lane, or None;
    reference_tests: the tests it has (an instructor's hidden test is not in
    it)."""
    unbegun = [t for t, o in outs.items()
               if o.verdict == Verdict.MISSING or (o.verdict == Verdict.TIMEOUT and not o.began)]
    limits_hit = retry_unbegun(outs, rerun, unbegun) or limits_hit
    twice = [t for t in unbegun if outs[t].verdict == Verdict.MISSING and not limits_hit]
    started = _reference_starts(twice, rerun, reference, reference_tests)
    for t in twice:
        o = outs[t]
        if t in started:
            # the machine runs it now, with the reference: what stopped the
            # runner was in the code under test (a kill of the run's other
            # processes stops Criterion's own): it stays a failure
            o.details.insert(0, f"the test did not start or end in two runs, and the reference solution runs and passes "
                                f"it on this machine right now ({started[t]:.1f} s): something in the code under "
                                "test stopped the test runner (a kill() or exit of processes it did not start?)")
            continue
        # twice not started: the machine (another run, a loaded host) kept
        # it from running; nothing of the code under test was seen
        o.verdict = Verdict.TOO_SLOW
        o.message = ("not judged, regrade: the test did not start or end in two runs (the runner was stopped or "
                     "starved before it began or while it ran)")
    slow = [t for t, o in outs.items() if o.verdict == Verdict.TIMEOUT]
    if not slow:
        return outs
    # a stall (every thread in a wait with no timeout, none running for
    # seconds) is no machine's slowness: it needs no reference run
    slow = [t for t, o in outs.items() if o.verdict == Verdict.TIMEOUT and not o.stalled and t in reference_tests]
    if not slow or reference is None:
        return outs
    mine, _ = rerun(slow, reference, "reference")
    for t in slow:
        o, r = outs[t], mine[t]
        limit = o.seconds
        if r.passed and r.seconds <= limit / 4:
            o.details.insert(0, f"the reference solution passes this test in {r.seconds:.1f} s on this machine "
                                f"right now (the limit is {limit:.1f} s): this is not the machine's slowness")
            continue
        took = "timed out too" if r.verdict == Verdict.TIMEOUT else f"took {r.seconds:.1f} s of the {limit:.1f} s limit"
        o.verdict = Verdict.TOO_SLOW
        o.message = (f"too slow to judge, rerun: the reference solution {took} on this machine just now "
                     f"(is it loaded?)")
        o.details = []
    return outs


def _reference_starts(tests, rerun, reference, reference_tests):
    """{test: seconds} of the tests (of those the reference has) that the
    reference solution runs and passes in the same lane right now."""
    tests = [t for t in tests if t in reference_tests]
    if not tests or reference is None:
        return {}
    mine, _ = rerun(tests, reference, "reference-start")
    return {t: mine[t].seconds for t in tests if mine[t].passed}


def retry_unbegun(outs, rerun, tests):
    """Rule 1: the tests that timed out or were not run before they began,
    or left no outcome, run once more. Returns whether that run met its process or memory limit."""
    if not tests:
        return False
    second, result = rerun(tests, None, "again")
    for t in tests:
        first = outs[t]
        outs[t] = second[t]
        if first.began:
            why = "lost the test's outcome: the runner stopped while it ran, with no record of its end"
        else:
            why = (f"timed out after {first.seconds:.1f} s" if first.verdict == Verdict.TIMEOUT else "stopped")
            why += " before the test began (the machine did not start it)"
        outs[t].details.insert(0, f"the first run {why}: this is the second run")
    return bool(result is not None and (result.refused or result.oom_kills))
