#!/usr/bin/env python3
"""Each chapter's "How the grader checks this stage": which items force which
clause, and by what means, rendered from the stage's rubric and its tests.

    python3 grader/authoring/checks.py --write   rewrite the section in every chapter
    python3 grader/authoring/checks.py --check   exit 1 if a chapter's section is not the rendering

The section sits between two comment lines in the chapter:

    <!-- grader checks: rendered from the rubric by grader/authoring/checks.py -->
    ...
    <!-- end grader checks -->

Every item of the stage's rubric appears in exactly one row: the first
means, in the order of MEANS below, that its lane or the code of its tests
shows (the test bodies and the helpers of the same file they call). A new
item, a test moved to another item, a lane or a run count changed: the
rendering changes, and grader/selftest/test_rubrics.py fails until --write.
"""
import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "grader"))

from lab_grader import plan, rubric  # noqa: E402

BEGIN = "<!-- grader checks: rendered from the rubric by grader/authoring/checks.py -->"
END = "<!-- end grader checks -->"
HEADING = "## How the grader checks this stage"

# (name, how an item is recognised, what it does, said once per row). The
# recognisers look at the item (its lane) or at the text of its tests.
# Deterministic means come first: an item is shown under the strongest one.
MEANS = [
    ("quiz", lambda it, code: it.lane == "quiz",
     "**The written answers**, checked against the key: no run involved"),
    ("valgrind", lambda it, code: it.lane == "valgrind",
     "**Valgrind**: every leak and invalid access, in the tests named"),
    ("tsan", lambda it, code: it.lane == "tsan",
     "**ThreadSanitizer**: every data race, including those x86 hides, in the tests named"),
    ("perf", lambda it, code: it.lane == "perf",
     "**CPU time, as ratios**: best of several runs, against the same code at a smaller size or "
     "the test's own yardstick"),
    ("explorer", lambda it, code: "lab_explore" in code,
     "**The schedule explorer**: the two threads' code runs under a scheduler that tries every "
     "schedule with at most two preemptions at their locks, unlocks and waker calls, on every run, "
     "and prints the schedule that broke the clause"),
    ("store-buffer", lambda it, code: "store_buffer" in code or "lab_sb_" in code,
     "**A simulated store buffer**: the owner's store is held back while it reads, as a real CPU "
     "may do, on every run, not once in a million"),
    ("held-locks", lambda it, code: "lab_sync_wake_under_lock" in code,
     "**The held-lock detector and the wake probe**: every lock call is wrapped, and at every wake the "
     "locks the waking thread holds are counted and named; and from inside the wake, other threads use "
     "the same object and a fresh one, which a lock of any kind held across the wake keeps waiting"),
    ("points", lambda it, code: "lab_sync_on_point" in code,
     "**Hooks in your lock calls**: the test runs its own code at every lock and condition call "
     "yours makes, to count them or to put the other thread's step exactly there"),
    ("spurious", lambda it, code: "lab_sync_spurious" in code,
     "**Injected spurious wakeups**: the wrapped condition wait returns without a signal, as POSIX allows"),
    ("steps", lambda it, code: "SIGTRAP" in code or "MADV_DONTNEED" in code,
     "**Counted work**: instructions single-stepped, or page faults one per entry touched; a count, "
     "not a time, so the machine's speed does not matter"),
    ("virtual-clock", lambda it, code: "virtual_clock_" in code,
     "**A virtual clock**: time moves only when the test or a park moves it; parks and their "
     "timeouts are recorded"),
    ("race", lambda it, code: it.lane == "race",
     "**Forced and random interleavings, repeated**: hooks that widen a window, random pauses; "
     "every run must pass, and a failure names its seed (`SEED=`)"),
    ("counters", lambda it, code: re.search(r"\balloc_(count_start|fail_after)\b|counting_waker|\.cpu_ns\b|"
                                            r"thread_cpu_ns|process_cpu_ns|poll_counter", code),
     "**Counters**: allocations (and failures injected into them), waker clones, wakes and drops, "
     "polls, CPU time of a waiting thread"),
    ("direct", lambda it, code: True,
     "**Direct checks**: a fixed scenario, its results compared with the clause"),
]


def test_texts(stage):
    """suite::name -> the text of that LAB_TEST's body, with the bodies of
    the same file's functions it calls (one level: a test's helpers)."""
    texts = {}
    for src in sorted((ROOT / "grader" / "tests" / stage.name).glob("*.c")):
        code = src.read_text()
        helpers = dict(re.findall(r"^(?:static )?[\w \*]+?\b(\w+)\([^;{]*\)\s*\{(.*?)^\}", code, flags=re.M | re.S))
        parts = re.split(r"^LAB_TEST\((\w+), (\w+),[^)]*\)", code, flags=re.M)
        for suite, name, body in zip(parts[1::3], parts[2::3], parts[3::3]):
            body = re.split(r"^\}", body, maxsplit=1, flags=re.M)[0]   # the body only, not what follows it
            called = [helpers[f] for f in set(re.findall(r"\b(\w+)\(", body)) if f in helpers]
            texts[f"{suite}::{name}"] = "\n".join([name, body] + called)
    return texts


def citation(clause):
    """The clause's citation, its last parenthesis, headers and contract
    numbers only: "(the token: parker.h contract 1)" -> "parker.h contract 1"."""
    found = re.findall(r"\(([^()]*)\)\s*$", clause.strip())
    parts = []
    for part in (found[-1] if found else "").split(";"):
        m = re.search(r"\b\w+\.h\b.*|\b(?:contracts?|rules?)\b.*", part)
        if m and len(m.group(0)) <= 48:
            parts.append(m.group(0).strip())
    return "; ".join(parts)


def render(stage):
    texts = test_texts(stage)
    names = list(texts)
    rows = {name: [] for name, _, _ in MEANS}
    for item in stage.items:
        code = "" if item.lane == "quiz" else "\n".join(texts[t] for t in plan.expand(item.tests, names))
        name = next(n for n, match, _ in MEANS if match(item, code))
        runs = f", ×{item.runs}" if item.runs > 1 else ""
        cite = citation(item.clause)
        rows[name].append(f"`{item.id}`{runs}" + (f" ({cite})" if cite else ""))
    out = [BEGIN, "", "| how | items (the clause each checks) |", "| --- | --- |"]
    for name, _, how in MEANS:
        if rows[name]:
            out.append(f"| {how} | {'; '.join(rows[name])} |")
    out += ["", END]
    return "\n".join(out) + "\n"


def block(text):
    m = re.search(re.escape(BEGIN) + r"\n.*?" + re.escape(END) + r"\n", text, re.S)
    return m.group(0) if m else None


def stages():
    return rubric.load_all(ROOT / "grader" / "rubric")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    bad = []
    for stage in stages():
        path = ROOT / stage.chapter
        text = path.read_text()
        old, new = block(text), render(stage)
        if old is None:
            bad.append(f"{stage.chapter}: no {BEGIN} ... {END} block under '{HEADING}'")
        elif old != new:
            if a.write:
                path.write_text(text.replace(old, new))
            else:
                bad.append(f"{stage.chapter}: '{HEADING}' is not its rubric rendered")
        if not a.write and not a.check:
            sys.stdout.write(f"{stage.chapter}\n{new}\n")
    if bad and (a.check or a.write):
        sys.exit("checks: " + "; ".join(bad) + "\n(python3 grader/authoring/checks.py --write)")


if __name__ == "__main__":
    main()
