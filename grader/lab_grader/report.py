"""What the grader prints on the terminal at the end of a grading: a table
per stage, the total, then what to fix. It prints what it is handed
(the grading, the item results, the sandbox's line, whether to color)
and reads nothing else; the words of one item's diagnosis are
diagnosis.py's, shared with results.json and JUnit.
"""
from .diagnosis import UNTRUSTED, clean, failure_block, fmt_points, rerun_command
from .outcomes import Status, Verdict

WIDTH = 78
MARK = {Status.PASSED: "PASS", Status.FAILED: "FAIL", Status.NOT_JUDGED: "----"}


def _color(text, code, color):
    if not color:
        return text
    return f"\033[{code}m{text}\033[0m"


def stage_table(grading, stage, results, color=False):
    got = sum(r.points for r in results)
    judged = sum(r.item.points for r in results if r.status != Status.NOT_JUDGED)
    head = f"== {stage.name}: {stage.title} "
    score = f" {fmt_points(got)}/{fmt_points(judged)}"
    lines = [head + "=" * max(3, WIDTH - len(head) - len(score)) + score]
    idw = max(len(r.item.id) for r in results)
    for r in results:
        mark = MARK[r.status]
        mark = _color(mark, "32" if r.status == Status.PASSED else "31" if r.status == Status.FAILED else "33", color)
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


def text_report(grading, results, sandbox, color=False):
    """The report: grading is pipeline.Builds, results the item results
    in the order judged, sandbox the line that says how the tests ran
    (sandbox.Sandbox.describe), color whether the marks are colored."""
    lines = []
    if grading.untrusted:
        lines += [UNTRUSTED] + [f"  changed: {p}" for p in grading.untrusted[:10]] + [""]
    by_stage = {}
    for r in results:
        by_stage.setdefault(r.item.stage, []).append(r)
    for name, rs in by_stage.items():
        lines += stage_table(grading, grading.stages[name], rs, color)
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
    lines.append(sandbox)
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
