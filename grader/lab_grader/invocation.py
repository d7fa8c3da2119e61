"""What a student or an instructor typed, checked before anything runs.

Every entry point (make grade and check through the pytest plugin, make
watch, debug and hint through tools.py, make grade-class, and the Makefile
itself, before it starts any of them) reads its STAGE=, TARGET=, ITEMS=,
TEST=, SEED=, BUDGET=, VG_SCALE= and JOBS= here. A bad value is a UsageError
of one line: what was given, what is wrong, and the valid choices (the
closest first). Never a traceback, never a silent grading of something else.

    tools.py args grade --stage ... --target ... (the Makefile's check: prints the
                                        line and exits 2, or prints nothing)
"""
import dataclasses
import difflib
import pathlib
import re

from . import plan, rubric

STAGE_DIR = re.compile(r"^\d\d-[a-z0-9-]+$")
LIST_AT_MOST = 40     # names listed in one line before "... and N more"


class UsageError(rubric.RubricError):
    """A bad invocation: one line, exit status 2."""


def _choices(given, valid, label):
    """ "; did you mean x? (label: a, b, c)": the end of a line that names
    what exists, the closest first."""
    close = difflib.get_close_matches(given, valid, n=3, cutoff=0.6)
    shown = list(valid[:LIST_AT_MOST])
    more = f", ... and {len(valid) - len(shown)} more" if len(valid) > len(shown) else ""
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    return f"{hint} ({label}: {', '.join(shown)}{more})"


def check_number(name, value, kind=float, minimum=0, what="a number"):
    """VAR=value as a number >= minimum; '' is None."""
    if value in (None, ""):
        return None
    try:
        n = kind(value)
    except (TypeError, ValueError):
        n = None
    if n is None or n < minimum or n != n:   # n != n: NaN
        raise UsageError(f"{name}={value}: {what}")
    return n


def check_stages(rubric_dir, spec, hidden=None):
    """(every stage, the stages STAGE=spec selects)."""
    if hidden and not pathlib.Path(hidden).is_dir():
        raise UsageError(f"HIDDEN={hidden}: no such directory")
    every = rubric.load_all(rubric_dir, hidden or None)
    try:
        return every, rubric.select(every, spec)
    except rubric.RubricError:
        bad = next(p.strip() for p in str(spec).split(",")
                   if not [s for s in every if s.name == p.strip() or (p.strip().isdigit() and s.number == int(p.strip()))])
        names = [s.name for s in every]
        raise UsageError(f"STAGE={bad}: no such stage; a stage is its number (1 to {len(every)}), "
                         f"01 or its folder's name, or several: 1,2"
                         f"{_choices(bad, names, 'stages')}") from None


def check_one_stage(selected, what):
    if len(selected) != 1:
        raise UsageError(f"{what} wants one stage: STAGE=n "
                         f"({'none given' if not selected else 'not ' + ','.join(s.name for s in selected)})")
    return selected[0]


def check_target(path, every):
    """TARGET=path: a folder holding at least one NN-name stage folder of the
    rubric (an empty stage folder is the student's to fill; no stage folder
    at all is not a lab tree)."""
    p = pathlib.Path(path)
    if not p.is_dir():
        raise UsageError(f"TARGET={path}: no such directory (a tree shaped like labs/, e.g. TARGET=solutions)")
    names = [s.name for s in every]
    if not any((p / n).is_dir() for n in names):
        near = sorted(d.name for d in p.iterdir() if d.is_dir() and STAGE_DIR.match(d.name)) if p.is_dir() else []
        inside = [n for n in names if (p.parent / n).is_dir() and p.name == n]
        why = (f"it is the stage folder {p.name} itself: TARGET={p.parent}" if inside else
               f"its folders {', '.join(near)} are no stage of this lab" if near else
               f"no NN-name stage folders such as {names[0]}")
        raise UsageError(f"TARGET={path} is not a lab tree ({why})")
    return p


def _tests(root, stage, hidden):
    dirs = [pathlib.Path(root) / "grader" / "tests" / stage.name]
    if hidden and (pathlib.Path(hidden) / "tests" / stage.name).is_dir():
        dirs.append(pathlib.Path(hidden) / "tests" / stage.name)
    return [t.replace("::", "/") for t in plan.tests_in(dirs)]


def check_items(ids, selected, var="ITEMS"):
    """ITEMS=a,b: every id names an item of a selected stage (id or
    stage/id)."""
    known = {i.id for s in selected for i in s.items} | {i.key for s in selected for i in s.items}
    for given in ids:
        if given in known:
            continue
        where = selected[0].name if len(selected) == 1 else f"{len(selected)} stages"
        valid = [i.id if len(selected) == 1 else i.key for s in selected for i in s.items]
        raise UsageError(f"{var}={given}: no such item in {where}{_choices(given, valid, 'items')}")
    return list(ids)


def check_test(given, selected, root, hidden=None, graded=True):
    """TEST=suite/name: a test of a selected stage (graded: that a rubric
    item runs)."""
    if not given:
        return None
    name = given.replace("::", "/")
    where = selected[0].name if len(selected) == 1 else "the stages selected"
    every = [t for s in selected for t in _tests(root, s, hidden)]
    if name not in every:
        suite = [t for t in every if t.split("/")[0] == name.split("/")[0]]
        if "/" not in name and suite:
            raise UsageError(f"TEST={given} is a suite; a test is suite/name"
                             f"{_choices(name, suite, 'its tests')}")
        raise UsageError(f"TEST={given}: no such test in {where}"
                         f"{_choices(name, suite or every, 'tests, suite/name')}")
    if graded and not any(plan.pattern_matches(p, name) for s in selected for i in s.items for p in i.tests):
        raise UsageError(f"TEST={given}: no rubric item runs it (make debug TEST={name} runs it alone)")
    return name


def check_test_in_items(test, items, selected):
    """TEST= with ITEMS=: the test must be one of those items' tests, or
    nothing would be graded."""
    if not test or not items:
        return
    chosen = [i for s in selected for i in s.items if i.id in items or i.key in items]
    if not any(plan.pattern_matches(p, test) for i in chosen for p in i.tests):
        runs_it = [i.id for s in selected for i in s.items if any(plan.pattern_matches(p, test) for p in i.tests)]
        raise UsageError(f"TEST={test} is not a test of ITEMS={','.join(items)}: "
                         f"it belongs to {', '.join(runs_it)} (give one of the two, or both that agree)")


@dataclasses.dataclass
class Grading:
    """The checked options of one grading."""
    stages: list          # every stage of the rubric (with HIDDEN's items)
    selected: list        # the stages STAGE= selects
    target: pathlib.Path
    items: list
    test: str             # suite/name or None
    seed: str             # digits or None
    budget: float         # seconds, 0 for none
    valgrind_scale: float


def grading(root, *, target, stage="", items="", test="", seed="", budget="", valgrind_scale="", hidden=""):
    """Checks the options of make grade / check / watch (raises UsageError)."""
    root = pathlib.Path(root)
    every, selected = check_stages(root / "grader" / "rubric", stage, hidden)
    tree = check_target(target, every)
    wanted = check_items([i for i in str(items or "").split(",") if i], selected)
    one = check_test(test, selected, root, hidden)
    check_test_in_items(one, wanted, selected)
    if seed and not str(seed).isdigit():
        raise UsageError(f"SEED={seed}: a seed is a non-negative integer (the report prints the one to replay)")
    b = check_number("BUDGET", budget, float, 0, "a number of seconds (0: no budget)")
    scale = check_number("VG_SCALE", valgrind_scale, float, 0, "a factor such as 0.05 (the Valgrind lane's iterations)")
    return Grading(every, selected, tree, wanted, one, seed or None, b or 0.0,
                   0.05 if scale is None else scale)
