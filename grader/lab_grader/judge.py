"""The verdict of one test in one run, from the runner's XML report and the
test's own records (records.py). The records decide what the report cannot:
a test that "passed" without writing END with this grading's nonce left
early; a test with a FAIL record (a check that failed) failed, whatever
the report says; a TODO record means "not started"; a HANG record carries
every thread's backtrace. Then what the run's processes said on the grader's
channel (channel.py), which code under test cannot take back, overrules
every pass it does not bear out.
"""
import re

from . import channel, records
from .binary_run import fork_limit_note, oom_note
from .outcomes import Outcome, Verdict

# a failure about the allocation counts: the records name the leaked blocks' sites
LEAK_WORDS = re.compile(r"\ballocations?\b|\bfrees?\b|\bfreed\b|\bleak", re.I)

WHY_SIGNAL = {
    "XFSZ": "the test wrote more than 32 MB (to its output or a file): an endless print loop?",
}


def _hang_limit(text):
    """The limit in a HANG record ("... after 4.5 s of its 5.0 s limit")."""
    m = re.search(r"of its ([\d.]+) s limit", text)
    return float(m.group(1)) if m else None


def one_test(test, report, recs, symbolizer, nonce, hang_hint=""):
    """The outcome of one test from its report line and its records."""
    runs = recs.get(test, [])
    run = runs[-1] if runs else None
    seed = run.seed if run else ""
    notes = run.notes if run else []
    o = Outcome(test=test, verdict=Verdict.MISSING, seed=seed, notes=notes, began=run is not None)
    if run and run.todo:
        o.verdict, o.message = Verdict.NOT_STARTED, f"not started: {records.short_path(run.todo)}"
        return o
    stall = re.search(r" stalled after ([\d.]+) s", run.hang) if run and run.hang else None
    killed = re.search(r" killed after [\d.]+ s of its ([\d.]+) s limit", run.hang) if run and run.hang else None
    if (stall or killed) and not run.crash and not (run.ended and run.nonce == nonce):
        # the watchdog ended the test: every thread waited for ever (a hang
        # found before the limit), or the runner had let it run past its
        # limit. Its HANG record has every thread's backtrace; the runner saw
        # a process killed.
        report = dict(report)
        report[test] = ("ERRORED", "timeout", "", float((stall or killed).group(1)))
    if test not in report:
        # the runner's report lost the test (the runner was stopped at its
        # backstop, or crashed): the test's own records decide what they can
        report = dict(report)
        limit = _hang_limit(run.hang) if run and run.hang else None
        if run and run.crash:
            report[test] = ("ERRORED", "crash", "", 0.0)
        elif run and run.ended and run.nonce == nonce:
            report[test] = ("PASSED", "", "", 0.0)   # END with the nonce: its body ran to the end
        elif limit is not None:
            report[test] = ("ERRORED", "timeout", "", limit)   # the watchdog's record: every thread's backtrace
        else:
            o.message = ("the test began, and the runner stopped before it ended (or crashed itself)" if run
                         else "the test did not run (the runner stopped before it, or crashed itself)")
            return o
    status, kind, message, secs = report[test]
    o.seconds = secs
    if status == "PASSED" and any(r.check_failed for r in runs):
        # a check's FAIL record stands (any run of the test in this
        # invocation: code under test can add BEGIN lines of its own), so
        # the body was kept going past it
        o.verdict = Verdict.FAIL
        o.message = ("a check failed, yet the test went on and reported a pass: code under test kept the "
                     "failure from ending the test")
        return o
    if status == "PASSED":
        if run and run.ended and run.nonce == nonce:
            o.verdict = Verdict.PASS
        else:
            o.verdict = Verdict.EXITED_EARLY
            o.message = ("the test process ended before the test did: something called exit() "
                         "(or returned from a thread in a way that ended the process) inside the code under test")
        return o
    if kind == "timeout":
        o.verdict = Verdict.TIMEOUT
        o.stalled = bool(stall)
        o.message = (f"stopped after {secs:.1f} s, every thread asleep with nothing left to wake it" if stall
                     else f"timed out after {secs:.1f} s") + (f": {hang_hint}" if hang_hint else "")
        threads = [t for t in run.threads if t.name != "lab-watchdog" and t.state != "blocked"] if run else []
        if threads:
            if any(t.state == "R" for t in threads):
                o.details.append("likely cause: a thread was still running when time ran out: a loop that "
                                 "polls or spins instead of parking (or plain slowness)")
            else:
                # said of every kind of test (a parker's has no future): the
                # item's hang hint is where a stage names its own mechanism
                o.details.append("likely cause: every thread was asleep: a wakeup that never came (lost "
                                 "between a check and a sleep, or dropped instead of delivered) or a deadlock")
        if run and run.threads:
            o.details.append("where each thread was when the watchdog fired:")
            for t in run.threads:
                if t.name == "lab-watchdog" or t.state == "blocked":
                    continue  # the harness's own thread; Criterion's I/O thread
                o.details.append(f"  thread {t.tid} ({t.name}, state {t.state}):")
                o.details += [f"    #{i} {f}" for i, f in enumerate(symbolizer.frames(t.frames))]
        return o
    if kind == "crash" or (run and run.crash):
        o.verdict = Verdict.CRASH
        sig = run.crash if run and run.crash else "a signal"
        o.message = f"crashed with {sig}" if sig.startswith("SIG") else f"crashed (SIG{sig})" if sig != "a signal" else "crashed"
        if sig in WHY_SIGNAL:
            o.message += ": " + WHY_SIGNAL[sig]
        if run and run.crash_frames:
            o.details.append("where it crashed:")
            o.details += [f"    #{i} {f}" for i, f in enumerate(symbolizer.frames(run.crash_frames))]
        elif message:
            o.details.append(message)
        return o
    if run and run.unjudged and run.unjudged_nonce == nonce and not run.crash:
        # lab_cannot_judge: the machine could not measure it (a forged record
        # lacks the nonce and stays an ordinary failure)
        o.verdict = Verdict.UNJUDGED
        o.message = f"cannot judge on this machine, rerun: {run.unjudged}"
        return o
    o.verdict = Verdict.FAIL
    message = symbolizer.sites(records.short_path(message))
    if message and "assertion(s) failed" not in message:
        o.message = message
    elif run and not run.ended and status == "FAILED":
        o.message = ("the test process exited with a failure status before the test finished "
                     "(exit() with a non-zero code inside the code under test?)")
    else:
        o.message = message or "failed"
    if run and run.leak_frames and LEAK_WORDS.search(o.message):
        o.details += leak_sites(run, symbolizer)
    return o


TODO_HINT = re.compile(r"^(?P<where>\S+:\d+ \S+\(\)) (?P<hint>.*)$", re.S)
SKELETON_TODO = re.compile(r'LAB_TODO\("((?:[^"\\]|\\.)*)"\)')


def skeleton_todos(stage_dir):
    """The texts of the LAB_TODO calls in a skeleton stage folder (labs/NN-name)."""
    found = set()
    for f in sorted(stage_dir.glob("*.[ch]")) if stage_dir.is_dir() else []:
        found.update(m.group(1).replace('\\"', '"').replace("\\\\", "\\")
                     for m in SKELETON_TODO.finditer(f.read_text()))
    return found


def keep_known_todos(outs, recs, known):
    """A "not started" report shows the TODO's text only when it is one of
    the skeleton's (known): code under test can call lab_todo with any text,
    and a text read from the jail (the hidden tests' strings in the binary,
    say) would reach the student's feedback (issue 25, a red-team pass)."""
    for t, o in outs.items():
        runs = recs.get(t, [])
        if o.verdict != Verdict.NOT_STARTED or not runs or not runs[-1].todo:
            continue
        m = TODO_HINT.match(runs[-1].todo)
        if m and m.group("hint") not in known and not any(k.startswith(m.group("hint").rstrip("\u2026")) for k in known):
            o.message = (f"not started: {records.short_path(m.group('where'))} reached a LAB_TODO whose text is "
                         "not the skeleton's (not shown)")


def leak_sites(run, symbolizer):
    """Where the blocks a failed allocation count found still live were
    allocated (alloc_count.c records them when counting stops)."""
    lines = ["blocks still allocated when the test stopped counting, by where they were allocated:"]
    counts = run.leak_counts + [0] * len(run.leak_frames)
    for n, raw in zip(counts, run.leak_frames):
        where = (symbolizer.frames([raw]) or [raw])[0]   # the innermost: the function that allocated
        lines.append(f"    {n} block{'s' if n != 1 else ''} from {where}" if n else f"    {where}")
    return lines


# ---- Valgrind ------------------------------------------------------------------


def one_run(tests, result, binary, nonce, hang_hints):
    """{test: Outcome} for every test a run (binary_run.RunResult) was asked to
    run. A run that met the process limit says so on every failure."""
    sym = records.Symbolizer(binary)
    outs = {t: one_test(t, result.report, result.records, sym, nonce, hang_hints.get(t, "")) for t in tests}
    channel.overrule(outs, result.said)
    if result.starved:
        # the kernel's numbers, not the run's: a test that ran out of time
        # while the machine gave it almost no CPU says nothing of the code
        for o in outs.values():
            if o.verdict in (Verdict.TIMEOUT, Verdict.MISSING):
                o.verdict = Verdict.STARVED
                o.message = (f"not judged, regrade: the machine was too busy ({result.starved}); "
                             "the test ran out of time without the CPU to run")
    for note in ([fork_limit_note(result.refused)] if result.refused else []) + \
            ([oom_note(result.oom_kills, result.memory)] if result.oom_kills else []):
        for o in outs.values():
            if not o.passed:
                o.details.insert(0, note)
    return outs
