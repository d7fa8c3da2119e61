"""What the grader prints, and what it writes for Gradescope."""
import os
import sys

from . import sandbox, text
from .outcomes import Status, Verdict

WIDTH = 78
MARK = {Status.PASSED: "PASS", Status.FAILED: "FAIL", Status.NOT_JUDGED: "----"}
VERDICT_WORDS = {
    Verdict.FAIL: "failed", Verdict.TIMEOUT: "timed out", Verdict.CRASH: "crashed", Verdict.NOT_STARTED: "not started",
    Verdict.EXITED_EARLY: "left early", Verdict.MEMORY: "memory error", Verdict.RACE: "data race",
    Verdict.MISSING: "did not run", Verdict.TOO_SLOW: "too slow to judge", Verdict.UNJUDGED: "cannot judge here",
    Verdict.STARVED: "starved of CPU",
}


def clean(s):
    """Student text (messages, output, compiler logs) as data: no escape
    sequence or control character of theirs reaches a terminal or a file."""
    return text.clean(s)


def _color(text, code):
    if os.environ.get("NO_COLOR") or not sys.stdout.isatty():
        return text
    return f"\033[{code}m{text}\033[0m"


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
    shown = os.environ.get("LAB_RERUN_TARGET")   # run_autograder: the student's own tree is labs/
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


def stage_table(grading, stage, results):
    got = sum(r.points for r in results)
    judged = sum(r.item.points for r in results if r.status != Status.NOT_JUDGED)
    head = f"== {stage.name}: {stage.title} "
    score = f" {fmt_points(got)}/{fmt_points(judged)}"
    lines = [head + "=" * max(3, WIDTH - len(head) - len(score)) + score]
    idw = max(len(r.item.id) for r in results)
    for r in results:
        mark = MARK[r.status]
        mark = _color(mark, "32" if r.status == Status.PASSED else "31" if r.status == Status.FAILED else "33")
        # an item not judged scored nothing yet: '-', not a 0 that reads as a failure
        got = "-" if r.status == Status.NOT_JUDGED else fmt_points(r.points)
        pts = f"{got}/{fmt_points(r.item.points)}"
        text = (r.item.clause if r.status == Status.PASSED else
                f"{r.summary.split(':', 1)[0]} (the compiler's error is below)" if _unbuilt(grading, r) and r.build_error.log else
                clean(r.summary))
        lines.append(f"  {mark} {pts:>6}  {r.item.id:<{idw}}  {text}")
    b = grading.builds.get(stage.name)
    if b is None:
        return lines
    for note in b.notes + b.remarks:
        lines.append(f"  note: {clean(note)}")
    review = getattr(b, "review", [])
    if review:
        lines.append("  for your instructor to read (constructs no stage needs; your score does not change): " +
                     "; ".join(clean(x) for x in review[:8]))
    if b.warnings:
        lines.append("  your code compiled with warnings (they do not cost points, but read them):")
        for w in b.warnings:
            lines += ["    " + l for l in clean(w).splitlines()[:12]]
    if not b.ok and b.error and b.error.log:
        lines.append("  the compiler said:")
        lines += ["    " + l for l in clean(b.error.log).strip().splitlines()[:15]]
    return lines


def _unbuilt(grading, r):
    """Did the item fail only because its stage's binary did not build
    (the error the stage table shows once)?"""
    b = grading.builds.get(r.item.stage)
    return r.build_error is not None and b is not None and r.build_error is b.error


def _waiting(rs):
    """What a stage that does not build holds back: its items and points."""
    return f"{len(rs)} item(s) and {fmt_points(sum(r.item.points for r in rs))} points wait on it"


def build_failures(grading, results):
    """One block per stage that did not build, in place of a block per item
    it stopped: the first error, what it costs, the command to rerun."""
    lines, by_stage = [], {}
    for r in results:
        if _unbuilt(grading, r):
            by_stage.setdefault(r.item.stage, []).append(r)
    for name, rs in by_stage.items():
        error = rs[0].build_error
        lines.append(f"{name} {rs[0].summary.split(':', 1)[0]} ({_waiting(rs)})")
        lines.append(f"  what happened: {clean(error.first)}")
        lines.append(f"  rerun it:      {rerun_command(grading, rs[0].item, None, 'make check', narrow=False)}")
        lines.append("")
    return lines


def compiler_first(grading, results):
    """make watch with a stage that does not build: the compiler's own
    output alone (what an editor can jump to), then one line of what it
    costs; None when everything built."""
    unbuilt = [r for r in results if _unbuilt(grading, r)]
    if not unbuilt:
        return None
    lines = []
    for name in dict.fromkeys(r.item.stage for r in unbuilt):
        rs = [r for r in unbuilt if r.item.stage == name]
        error = rs[0].build_error
        lines.append(f"{name} {rs[0].summary.split(':', 1)[0]}:")
        log = clean(error.log).strip() if error.log else clean(error.first)
        lines += ["  " + l for l in log.splitlines()[:40]]
        lines.append(f"({_waiting(rs)}; the rest of the report comes once it builds)")
        lines.append("")
    return "\n".join(lines).rstrip()


def failure_block(grading, r):
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
    if o is not None:
        lines.append(f"  rerun it:      {rerun_command(grading, r.item, o)}")
        if o.seed:
            lines.append(f"  seed:          {o.seed}")
    for d in (o.details if o else []):
        lines.append("  " + clean(d))
    return lines


UNTRUSTED = ("NOT TRUSTED: the grader's own files changed while it ran, so a test wrote to them "
             "(the tests could not be given a user id of their own here). No score is given; "
             "grade again from a fresh copy of the lab.")


def text_report(grading, results):
    lines = []
    if grading.untrusted:
        lines += [UNTRUSTED] + [f"  changed: {p}" for p in grading.untrusted[:10]] + [""]
    by_stage = {}
    for r in results:
        by_stage.setdefault(r.item.stage, []).append(r)
    for name, rs in by_stage.items():
        lines += stage_table(grading, grading.stages[name], rs)
        lines.append("")
    total = sum(r.points for r in results)
    judged = sum(r.item.points for r in results if r.status != Status.NOT_JUDGED)
    failed = [r for r in results if r.status == Status.FAILED]
    lines.append(f"Total: {fmt_points(total)}/{fmt_points(judged)}" +
                 ("" if not failed else f"   ({len(failed)} item(s) to fix; details below)"))
    deferred = [r for r in results if r.deferred]
    if deferred:
        left = sum(r.item.points for r in deferred)
        lanes = list(dict.fromkeys(r.item.lane for r in deferred))
        named = " and ".join([", ".join(lanes[:-1]), lanes[-1]] if len(lanes) > 1 else lanes)
        lines.append(f"  of {fmt_points(judged + left)} points in all: {fmt_points(left)} more ({len(deferred)} item(s), "
                     f"the {named} lane{'s' if len(lanes) > 1 else ''}) are judged by `make grade` only")
    lines.append(sandbox.shared().describe())
    not_judged = [r for r in results if r.status == Status.NOT_JUDGED and not r.deferred]
    for r in not_judged:
        lines.append(f"Not judged here: {r.item.key}: {clean(r.summary)}")
    not_started = [r for r in failed if r.outcome is not None and r.outcome.verdict == Verdict.NOT_STARTED]
    others = [r for r in failed if r not in not_started and not _unbuilt(grading, r)]
    unbuilt = build_failures(grading, failed)
    if not_started:
        lines += ["", "Not started yet", "---------------"]
        by_todo = {}
        for r in not_started:
            by_todo.setdefault(r.outcome.message, []).append(r)
        for message, rs in by_todo.items():
            lines.append(clean(message))
            lines.append("  blocks: " + ", ".join(f"{r.item.key} ({fmt_points(r.item.points)})" for r in rs))
    if others or unbuilt:
        lines += ["", "What to fix", "-----------"] + unbuilt
        for r in others:
            lines += failure_block(grading, r)
            lines.append("")
    return "\n".join(lines)


def _advice(r):
    """What a student should do about an item that was not judged."""
    if r.item.lane == "quiz":
        return ("your instructor marks this item (the grader you were given has the answer key only hashed: "
                "it counts a group's wrong answers, it gives no points)")
    if "make check" in r.summary:
        return "run make grade for this lane"
    return ("nothing here says your code is wrong: the machine could not judge this item just now; "
            "ask for a regrade (or resubmit)")


def gradescope(grading, results, seconds, unjudged="zero"):
    """results.json in Gradescope's format: every item, always. An item not
    judged is there with why and what to do; unjudged="zero" counts it as 0
    of its points (until regraded), "omit" as 0 of 0."""
    tests = []
    for r in results:
        entry = {
            "name": f"{r.item.key}: {r.item.clause}",
            "number": r.item.key,
            "score": r.points,
            "max_score": r.item.points,
            "status": "passed" if r.status == Status.PASSED else "failed",
            "output": r.item.clause if r.status == Status.PASSED else "\n".join(failure_block(grading, r)),
            "output_format": "text",
            # hidden tests: students see them once the instructor publishes the grades
            "visibility": "after_published" if r.item.hidden else "visible",
        }
        if r.status == Status.NOT_JUDGED:
            entry["output"] = f"Not judged: {clean(r.summary)}\nWhat to do: {_advice(r)}"
            entry["extra_data"] = {"judged": False}
            if unjudged == "omit":
                # 0 of 0, in one line, with no status: Gradescope shows it
                # neither failed nor owed, and nobody asks for a regrade of
                # what the platform cannot measure
                entry["max_score"] = 0
                del entry["status"]
                entry["output"] = (f"Not judged on this machine ({text.one_line(r.summary, 160)}): not part of your "
                                   "score." if r.item.lane != "quiz" else
                                   f"Not judged here: {clean(r.summary)}.")
        tests.append(entry)
    for name in dict.fromkeys(r.item.stage for r in results):
        review = getattr(grading.builds.get(name), "review", [])
        if review:
            # the instructor's alone: a hidden entry of no points (students never see it)
            tests.append({"name": f"{name}/review: code for the instructor to read", "number": f"{name}/review",
                          "score": 0, "max_score": 0, "status": "passed", "visibility": "hidden",
                          "output": "\n".join(clean(x) for x in review[:40]), "output_format": "text"})
    if grading.untrusted:
        return {"score": 0, "execution_time": round(seconds, 1), "output": UNTRUSTED, "output_format": "text",
                "visibility": "visible", "stdout_visibility": "hidden", "tests": []}
    # the visible items only: a count over hidden ones too tells a student a hidden item failed
    visible = [r for r in results if not r.item.hidden]
    head = [f"{sum(1 for r in visible if r.status == Status.PASSED)} of {len(visible)} visible items passed"]
    not_judged = [r for r in results if r.status == Status.NOT_JUDGED]
    if not_judged:
        head.append(f"{len(not_judged)} item(s) not judged: each says why and what to do")
    for name in dict.fromkeys(r.item.stage for r in results):
        b = grading.builds.get(name)
        if b is None:
            continue
        for note in b.notes + b.remarks:
            head.append(f"{name}: note: {clean(note)}")
        for w in b.warnings:
            head.append(f"{name}: your code compiled with warnings:")
            head += ["  " + line for line in clean(w).splitlines()[:12]]
        if not b.ok and b.error and b.error.log:
            head.append(f"{name}: the compiler said:")
            head += ["  " + line for line in clean(b.error.log).strip().splitlines()[:25]]
    return {
        "score": sum(r.points for r in results),
        "execution_time": round(seconds, 1),
        "output": "\n".join(head),
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
    }


def junit_cases(grading, results):
    """The cases junit.write takes: one per item, its diagnosis in full."""
    cases = []
    for r in results:
        o = r.outcome
        cases.append({"stage": r.item.stage, "item": r.item.id, "points": r.points, "max_points": r.item.points,
                      "status": str(r.status), "seconds": o.seconds if o is not None else 0.0,
                      "summary": r.summary if r.status != Status.PASSED else r.item.clause,
                      "details": "" if r.status == Status.PASSED else "\n".join(failure_block(grading, r))})
    return cases


def write_json(path, data):
    """results.json through its one writer (results_json.write): cleaned,
    checked against the schema from Gradescope's spec, written atomically."""
    from . import results_json
    results_json.write(path, data, require_schema=False)
