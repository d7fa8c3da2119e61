"""What the grader says of one item, the same in every output: the
diagnosis of a failure (what happened, the contract, where to read, the
command that reruns it) and the words it is made of. The terminal report
(report.py), results.json (results_json.py) and JUnit (junit.py) each
print it their own way; none of them writes it again.
"""

from . import text
from .outcomes import Verdict

VERDICT_WORDS = {
    Verdict.FAIL: "failed", Verdict.TIMEOUT: "timed out", Verdict.CRASH: "crashed", Verdict.NOT_STARTED: "not started",
    Verdict.EXITED_EARLY: "left early", Verdict.MEMORY: "memory error", Verdict.RACE: "data race",
    Verdict.MISSING: "did not run", Verdict.TOO_SLOW: "too slow to judge", Verdict.UNJUDGED: "cannot judge here",
    Verdict.STARVED: "starved of CPU",
}

UNTRUSTED = ("NOT TRUSTED: the grader's own files changed while it ran, so a test wrote to them "
             "(the tests could not be given a user id of their own here). No score is given; "
             "grade again from a fresh copy of the lab.")


def clean(s):
    """Student text (messages, output, compiler logs) as data: no escape
    sequence or control character of theirs reaches a terminal or a file."""
    return text.clean(s)


def fmt_points(p):
    return f"{p:g}"


def rerun_command(grading, item, outcome, command="make grade", narrow=True):
    """The command that reruns just this item's failing test (narrow=False:
    the item's stage); with ITEMS= too when other items run that test (a
    race or tool item would rerun it in their lanes as well)."""
    stage = grading.stages[item.stage]
    parts = [command, f"STAGE={stage.number}"]
    if narrow and outcome is not None and not outcome.test.startswith("quiz::"):
        parts.append(f"TEST={outcome.test.replace('::', '/')}")
        if len(grading.items_of_test.get((item.stage, outcome.test), ())) > 1:
            parts.append(f"ITEMS={item.id}")
    elif narrow:
        parts.append(f"ITEMS={item.id}")
    if outcome is not None and outcome.seed:
        parts.append(f"SEED={outcome.seed}")
    shown = grading.rerun_target   # LAB_RERUN_TARGET (run_autograder: the student's own tree is labs/)
    if shown is not None:
        if shown:
            parts.append(f"TARGET={shown}")
        return " ".join(parts)
    target = grading.target
    default = (grading.root / "labs").resolve()
    if target != default:
        try:
            rel = target.relative_to(grading.root)
        except ValueError:
            rel = target
        parts.append(f"TARGET={rel}")
    return " ".join(parts)


def hint_command(grading, item):
    """The command that hands out the item's next written hint (make hint,
    docs/hints/), or None for an item with none: a quiz claim, a hidden
    item. A report says what happened and which clause; the way on is
    the student's to find, one hint level at a time."""
    if item.hidden or item.lane == "quiz":
        return None
    return f"make hint STAGE={grading.stages[item.stage].number} ITEM={item.id}"


def failure_block(grading, r):
    """The diagnosis of an item that did not pass, a line each: what
    happened, the contract, where to read, the next hint (unless the
    message names it already), how to rerun it, its details."""
    stage = grading.stages[r.item.stage]
    o = r.outcome
    verdict = VERDICT_WORDS.get(o.verdict, o.verdict) if o else "failed"
    lines = [f"{r.item.key} ({fmt_points(r.points)} of {fmt_points(r.item.points)} points): {verdict}"]
    if o is not None and o.message:
        lines.append(f"  what happened: {clean(o.message)}")
    elif r.summary:
        lines.append(f"  what happened: {clean(r.summary)}")
    lines.append(f"  contract:      {r.item.clause}")
    lines.append(f"  read:          {stage.chapter}{r.item.section}")
    hint = hint_command(grading, r.item)
    said = (o.message if o is not None and o.message else r.summary) or ""
    if hint and "make hint" not in said:
        lines.append(f"  next hint:     {hint}")
    if o is not None:
        lines.append(f"  rerun it:      {rerun_command(grading, r.item, o)}")
        if o.seed:
            lines.append(f"  seed:          {o.seed}")
    for d in (o.details if o else []):
        lines.append("  " + clean(d))
    return lines
