"""What a student or an instructor typed, checked before anything runs.

Every entry point (make grade and check through the pytest plugin, make
watch, debug and hint through tools.py, make grade-class, and the Makefile
itself, before it starts any of them) reads its STAGE=, TARGET=, ITEMS=,
TEST=, SEED=, BUDGET=, VG_SCALE= and JOBS= here. A bad value is a UsageError
of one line: what was given, what is wrong, and the valid choices (the
closest first). Never a traceback, never a silent grading of something else.

The environment variables the grader heeds (CC, NO_COLOR, NO_PROGRESS and
the LAB_* knobs) are read here too, once (read_environment), checked like
the rest, and handed down as an Environment: no other module of the grader
reads os.environ.

    tools.py args grade --stage ... --target ... (the Makefile's check: prints the
                                        line and exits 2, or prints nothing)
"""
import dataclasses
import difflib
import os
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


def check_tests(given, selected, root, hidden=None):
    """TEST=suite/name[,suite/name...]: each a test a rubric item of a
    selected stage runs; the names, joined by commas again."""
    if not given:
        return None
    names = [check_test(t.strip(), selected, root, hidden) for t in str(given).split(",") if t.strip()]
    return ",".join(dict.fromkeys(names)) or None


def check_test_in_items(tests, items, selected):
    """TEST= with ITEMS=: each test must be one of those items' tests, or
    it would run in no item graded."""
    if not tests or not items:
        return
    chosen = [i for s in selected for i in s.items if i.id in items or i.key in items]
    for test in tests.split(","):
        if not any(plan.pattern_matches(p, test) for i in chosen for p in i.tests):
            runs_it = [i.id for s in selected for i in s.items if any(plan.pattern_matches(p, test) for p in i.tests)]
            raise UsageError(f"TEST={test} is not a test of ITEMS={','.join(items)}: "
                             f"it belongs to {', '.join(runs_it)} (give one of the two, or both that agree)")


# What a test run takes of the grader's environment: nothing that says how it
# is graded (MAKEFLAGS holds HIDDEN=, the grader's paths), only what the C
# library and the tools read, and LAB_SCHEDULE (a replay asked for).
PASSED_ON = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "LAB_SCHEDULE")


@dataclasses.dataclass(frozen=True)
class Environment:
    """Every environment variable the grader heeds, read once and checked
    (read_environment), and where each goes."""
    cc: str = "gcc"                  # CC: the C compiler (build.Builder)
    color: bool = True               # NO_COLOR unset: a report on a terminal in colour (grading.py)
    progress: bool = True            # NO_PROGRESS unset: the progress line on a terminal (grade/conftest.py)
    sandbox: bool = True             # LAB_SANDBOX=0: runs outside the jail (sandbox.shared)
    sandbox_cgroups: bool = True     # LAB_SANDBOX_CGROUP=0: the jail without cgroups (sandbox.Sandbox)
    gate_calls: bool = True          # LAB_GATE_CALLS=0: the gate's call allowlist off, for the self-tests
                                     # of the jail (assemble.py -> gate.check_object)
    race_runs: int = 0               # LAB_RACE_RUNS=n, instructor's repository only: every race item makes
                                     # n runs and counts the failed ones (pipeline.py)
    given_from_target: bool = False  # LAB_GIVEN_FROM_TARGET=1, instructor's repository only: given .c files
                                     # from the target (assemble.py -> intake.take_in)
    run_cpu_quota: float = None      # LAB_RUN_CPU_QUOTA: each run's CPU quota, for the self-tests of the
                                     # starvation check (lanes.py -> binary_run.BinaryRun)
    rerun_target: str = None         # LAB_RERUN_TARGET: the TARGET= a rerun line names (run_autograder:
                                     # the student's tree is labs/); None: the graded tree (diagnosis.py)
    passed_on: tuple = ()            # (name, value) of PASSED_ON that are set: what every test run takes


def read_environment(root=None, environ=None):
    """The Environment from os.environ (or `environ`); raises UsageError
    for a value that is not what its variable takes. The knobs meant for
    the instructor's repository count only where root holds solutions/."""
    env = os.environ if environ is None else environ
    instructor = root is not None and (pathlib.Path(root) / "solutions").is_dir()
    runs = env.get("LAB_RACE_RUNS", "")
    if runs and not runs.isdigit():
        raise UsageError(f"LAB_RACE_RUNS={runs}: a whole number of runs")
    quota = check_number("LAB_RUN_CPU_QUOTA", env.get("LAB_RUN_CPU_QUOTA"), float, 0,
                         "a number of CPUs, such as 0.5")
    return Environment(
        cc=env.get("CC") or "gcc",
        color=not env.get("NO_COLOR"),
        progress=not env.get("NO_PROGRESS"),
        sandbox=env.get("LAB_SANDBOX", "1") != "0",
        sandbox_cgroups=env.get("LAB_SANDBOX_CGROUP", "1") != "0",
        gate_calls=env.get("LAB_GATE_CALLS", "1") != "0",
        race_runs=int(runs) if runs and instructor else 0,
        given_from_target=env.get("LAB_GIVEN_FROM_TARGET") == "1" and instructor,
        run_cpu_quota=quota or None,
        rerun_target=env.get("LAB_RERUN_TARGET"),
        passed_on=tuple((k, env[k]) for k in PASSED_ON if k in env))


@dataclasses.dataclass
class Arguments:
    """The checked options of one grading."""
    stages: list          # every stage of the rubric (with HIDDEN's items)
    selected: list        # the stages STAGE= selects
    target: pathlib.Path
    items: list
    test: str             # suite/name, several joined by commas, or None
    seed: str             # digits or None
    budget: float         # seconds, 0 for none
    valgrind_scale: float
    environment: Environment


def check_grade(root, *, target, stage="", items="", test="", seed="", budget="", valgrind_scale="", hidden=""):
    """Checks the options of make grade / check / watch, and the
    environment (raises UsageError)."""
    root = pathlib.Path(root)
    environment = read_environment(root)
    every, selected = check_stages(root / "grader" / "rubric", stage, hidden)
    tree = check_target(target, every)
    wanted = check_items([i for i in str(items or "").split(",") if i], selected)
    tests = check_tests(test, selected, root, hidden)
    check_test_in_items(tests, wanted, selected)
    if seed and not str(seed).isdigit():
        raise UsageError(f"SEED={seed}: a seed is a non-negative integer (the report prints the one to replay)")
    b = check_number("BUDGET", budget, float, 0, "a number of seconds (0: no budget)")
    scale = check_number("VG_SCALE", valgrind_scale, float, 0, "a factor such as 0.05 (the Valgrind lane's iterations)")
    return Arguments(every, selected, tree, wanted, tests, seed or None, b or 0.0,
                     0.05 if scale is None else scale, environment)
