"""Shared helpers of the grader's self-tests (make test)."""
import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
GRADER = ROOT / "grader"
sys.path.insert(0, str(GRADER))

from lab_grader import rubric  # noqa: E402


# What the grader says when the machine, not the code, decided an item: it
# leaves the item unjudged (no points either way) and says to rerun.
MACHINE_REASONS = ("cannot judge on this machine", "the machine was too busy", "too slow")


@dataclasses.dataclass
class Graded:
    returncode: int
    output: str
    results: dict
    seconds: float

    def item(self, key):
        for t in self.results.get("tests", []):
            if t["number"] == key:
                return t
        raise KeyError(f"{key} not in results ({[t['number'] for t in self.results.get('tests', [])]})")

    def left_to_the_machine(self, key):
        """The item went unjudged because the machine could not measure it
        (a peer's wait, a run starved of CPU): no verdict on the code."""
        t = self.item(key)
        return not t.get("extra_data", {}).get("judged", True) and any(r in t["output"] for r in MACHINE_REASONS)

    @property
    def score(self):
        return self.results.get("score", 0)


def grade(tmp_path, target, stage=None, items=None, extra=(), timeout=1200, env=None, command="grade"):
    """Runs `make grade` (or command="check": the quick pass) exactly as a
    user would (env: variables added to the environment); returns what it
    printed and the Gradescope results."""
    results = tmp_path / f"results-{time.monotonic_ns()}.json"
    # PY=: this Python (it has pytest), so that make does not look for one
    # on every grading (0.2 s each, some 250 gradings)
    cmd = ["make", "-s", "--no-print-directory", "-C", str(ROOT), command, f"TARGET={target}",
           f"RESULTS={results}", f"PY={sys.executable}"]
    if stage:
        cmd.append(f"STAGE={stage}")
    if items:
        cmd.append(f"ITEMS={','.join(items)}")
    cmd += list(extra)
    env = dict(os.environ, NO_COLOR="1", **(env or {}))
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    seconds = time.monotonic() - start
    data = json.loads(results.read_text()) if results.exists() else {}
    return Graded(proc.returncode, proc.stdout + proc.stderr, data, seconds)


# A grading that leaves an item unjudged ("not judged, regrade: the machine
# was too busy", which never gives the point) is graded again, as an
# instructor is told to: a run beside make test's other worker and its hogs
# can be held off the CPU enough to be starved by the kernel's own numbers.
# Still unjudged after these, the calling test is skipped with the reason:
# the machine, not the grader, could not judge (the developers' rule: a
# self-test whose item the machine could not judge is regraded, then reported
# as skipped, never failed).
MACHINE_REGRADES = 2


def grade_until_judged(tmp_path, target, keys, **kw):
    """grade(), again while the machine left any of keys ("stage/item")
    unjudged, at most MACHINE_REGRADES more times. Skips the calling test when
    every key is still unjudged; returns the last grading and the keys it left
    unjudged (only some: the others are the caller's to check)."""
    import pytest
    for attempt in range(1 + MACHINE_REGRADES):
        g = grade(tmp_path, target, **kw)
        unjudged = [k for k in keys if g.results.get("tests") and g.left_to_the_machine(k)]
        if not unjudged:
            return g, []
        print(f"{', '.join(unjudged)} not judged (the machine was busy); regrading")
    why = "; ".join(g.item(k)["output"].splitlines()[0][:160] for k in unjudged)
    if len(unjudged) == len(keys):
        pytest.skip(f"the machine could not judge {', '.join(unjudged)} in {1 + MACHINE_REGRADES} gradings: {why}")
    print(f"{', '.join(unjudged)} left unjudged by the machine ({why}); the others are checked")
    return g, unjudged


def unjudged_keys(g):
    """The items a grading left unjudged because the machine could not
    measure them (never a verdict on the code)."""
    return [t["number"] for t in g.results.get("tests", []) if g.left_to_the_machine(t["number"])]


def judged_in_the_end(tmp_path, target, g, **kw):
    """After grading g, the items the machine left unjudged are graded again
    on their own (grade_until_judged: skipped when none of them ever is).
    Returns the keys still unjudged; raises when a regrade fails one."""
    keys = unjudged_keys(g)
    if not keys:
        return []
    kw = dict(kw, items=keys)
    again, still = grade_until_judged(tmp_path, target, keys, **kw)
    failed = [t["number"] for t in again.results["tests"]
              if t["number"] in keys and t["number"] not in still and t["status"] != "passed"]
    assert not failed, f"regraded, {failed} failed:\n{again.output[-3000:]}"
    return still


class CpuPressure:
    """How much of a stretch of wall time some task on the machine waited
    for a CPU: the kernel's pressure stall information (/proc/pressure/cpu,
    "some"), or the load average per core where the kernel has none."""

    def __init__(self):
        self.start, self.wall = self._stalled(), time.monotonic()

    @staticmethod
    def _stalled():
        try:
            line = pathlib.Path("/proc/pressure/cpu").read_text().splitlines()[0]
            return int(line.rsplit("total=", 1)[1]) / 1e6
        except (OSError, IndexError, ValueError):
            return None

    def fraction(self):
        end, wall = self._stalled(), time.monotonic() - self.wall
        if end is None or self.start is None:
            # a rough stand-in: two runnable tasks per core reads as waiting all the time
            return min(1.0, os.getloadavg()[0] / (os.cpu_count() or 1) / 2)
        return min(1.0, (end - self.start) / max(wall, 1e-3))


def assert_quick(seconds, bound, what, pressure):
    """A wall-time bound that the machine can leave unjudged: over bound
    while tasks waited for a CPU a quarter of the time or more, the calling
    test is skipped with the reason; over it on a machine that was free, or
    over four times it however busy, it fails."""
    import pytest
    if seconds < bound:
        return
    busy = pressure.fraction()
    if seconds < 4 * bound and busy >= 0.25:
        pytest.skip(f"{what} took {seconds:.0f} s, over its {bound} s, while tasks waited for a CPU "
                    f"{busy:.0%} of the time: the machine, not the grader, was slow")
    raise AssertionError(f"{what} took {seconds:.0f} s; the bound is {bound} s "
                         f"(tasks waited for a CPU {busy:.0%} of the time)")


def stages():
    return rubric.load_all(GRADER / "rubric")


def every_lane(stage):
    """The stage's plain items and the first item of each other lane: a
    grading that goes through every lane's build and run, at a fraction of
    the whole stage's cost."""
    lanes = {}
    for i in stage.items:
        lanes.setdefault(i.lane, []).append(i)
    return lanes.pop("plain", []) + [same[0] for same in lanes.values()]


@dataclasses.dataclass
class Mutant:
    stage: str
    name: str
    path: pathlib.Path
    catches: list
    bug: str
    expect: list     # texts the report must contain for the caught items
    tests: list      # the tests of those items that fail on it (grader/authoring/mutant_tests.py), or []


def mutants():
    out = []
    for path in sorted((GRADER / "mutants").glob("*/*.patch")):
        fields = {}
        for line in path.read_text().splitlines():
            if line.startswith(("--- ", "diff ")):
                break
            if ":" in line:
                k, _, v = line.partition(":")
                fields.setdefault(k.strip().lower(), []).append(v.strip())
        catches = [c.strip() for v in fields.get("catches", []) for c in v.split(",") if c.strip()]
        tests = [t.strip() for v in fields.get("tests", []) for t in v.split(",") if t.strip()]
        out.append(Mutant(stage=path.parent.name, name=path.stem, path=path, catches=catches,
                          bug=" ".join(fields.get("bug", [])), expect=fields.get("expect", []), tests=tests))
    return out


def solutions_copy(tmp_path):
    """A copy of solutions/ to grade. A grading holds a lock on its target
    (one grading of a tree at a time), so self-tests that each graded
    solutions/ itself waited for each other in turn (make check's 5 s took
    158 s behind the full-marks grading); objects are cached by content, so
    a copy compiles nothing again."""
    dest = tmp_path / "solutions"
    if not dest.exists():
        shutil.copytree(ROOT / "solutions", dest)
    return dest


# A mutant is the instructor's own tree, and some are bugs in given code (a
# file with no student part, which a student's grading takes from the
# handout, intake.py): their given files are graded as they are.
MUTANT_ENV = {"LAB_GIVEN_FROM_TARGET": "1"}


def apply_mutant(m, dest):
    """A copy of solutions/ with the mutant's patch applied."""
    return apply_mutants([m], dest)


def apply_mutants(ms, dest):
    """A copy of solutions/ with the mutants' patches applied, in turn."""
    shutil.copytree(ROOT / "solutions", dest)
    for m in ms:
        proc = subprocess.run(["patch", "-p1", "--batch", "--no-backup-if-mismatch", "-i", str(m.path)],
                              cwd=dest, capture_output=True, text=True)
        assert proc.returncode == 0, (f"mutant {m.path.name} does not apply to solutions/"
                                      f"{' with ' + ', '.join(o.name for o in ms[:ms.index(m)]) if ms.index(m) else ''}:"
                                      f"\n{proc.stdout}{proc.stderr}")
    return dest
