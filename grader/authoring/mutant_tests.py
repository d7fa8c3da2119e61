"""Writes each mutant's `Tests:` line: for each item it catches that runs
under Valgrind or ThreadSanitizer, the test that fails on it (every test
of its other items), so that make test grades the mutant on those tests
alone (TEST=), not on every test of a tool's item.

    python3 grader/authoring/mutant_tests.py [--stage 7] [--mutant name] [--write]

Grades each mutant as make test does (its items, ITEMS=), reads from each
caught item's report the test its "rerun it" line names (the first one
that failed), grades it --verify more times on those tests alone (a race
item three runs each, as make test does) and prints the line when every one
failed; --write puts it in the patch's header,
after Catches:. A mutant whose item failed without naming a test (a build
error, a quiz answer), that an item did not catch, whose items run no
other test, or whose test let it pass once (a catch by chance, in a stress
test, where a forced test of the item is the one to name by hand) gets no
line, and the self-test grades it on whole items.

Run it after a test edit that changes which test catches a mutant (make
test then fails with "item X gave points to mutant Y"), and for a new
mutant whose items run many tests. The self-test still checks what it
always did: the mutant loses every item it names, each failure names its
clause, and a race item fails every one of its runs.
"""
import argparse
import concurrent.futures
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "grader" / "selftest"))

from conftest import MUTANT_ENV, apply_mutant, mutants, stages  # noqa: E402
from test_mutants import RACE_RUNS  # noqa: E402
from lab_grader import plan  # noqa: E402

RERUN = re.compile(r"rerun it:\s+make grade .*?\bTEST=(\S+)")


def graded(m, tree, work, tests=()):
    """[(item, status, the test its rerun line names or None)] of one
    grading of tree on m's items (tests: TEST=, with the self-test's three
    runs of a race item)."""
    results = work / f"results-{len(list(work.glob('results-*')))}.json"
    cmd = ["make", "-s", "--no-print-directory", "-C", str(ROOT), "grade", f"TARGET={tree}", f"STAGE={m.stage}",
           f"ITEMS={','.join(m.catches)}", f"RESULTS={results}", f"PY={sys.executable}"]
    env = dict(os.environ, NO_COLOR="1", **MUTANT_ENV)
    if tests:
        cmd.append(f"TEST={','.join(tests)}")
        env["LAB_RACE_RUNS"] = str(RACE_RUNS)
    subprocess.run(cmd, capture_output=True, text=True, env=env)
    if not results.exists():
        return []
    out = []
    for t in json.loads(results.read_text()).get("tests", []):
        found = RERUN.search(t["output"]) if t["status"] == "failed" else None
        out.append((t["number"].split("/", 1)[1], t["status"], found.group(1) if found else None))
    return out


def failing_tests(m, work, verify):
    """{item: test} for the items of mutant m that failed naming a test, and
    the items whose test let the mutant through in one of `verify` more
    gradings on those tests alone (a catch that came by chance, in a
    stress test: a forced test of the same item is the one to name)."""
    tree = apply_mutant(m, work / "tree")
    out = {item: test for item, status, test in graded(m, tree, work) if test}
    chance = set()
    for _ in range(verify if all(c in out for c in m.catches) else 0):
        chance |= {item for item, status, _ in graded(m, tree, work, line_for(m, out)) if status != "failed"}
    stage = next(s for s in stages() if s.name == m.stage)
    narrowed = {i.id for i in stage.items if i.lane in NARROWED_LANES}
    return out, {c for c in chance if c in narrowed}


# Only an item run under a tool is narrowed to the test that catches the
# mutant: there a test costs ten to fifty times its plain run, and a
# finding (a leak, a race report) comes from the code the test runs, not
# from the schedule it happened to get. A plain or race item keeps every
# test: narrowed, make test gained 16 % on them and lost its catches by
# chance (08 resend-from-start passed its one test beside other work, 02
# token-less-parker's stress test missed one race run of three).
NARROWED_LANES = ("valgrind", "tsan")


def line_for(m, found):
    """The tests to name for mutant m, found {item: the test that failed}:
    that test for an item under a tool, every test of any other item."""
    stage = next(s for s in stages() if s.name == m.stage)
    every = plan.tests_in([ROOT / "grader" / "tests" / m.stage])
    tests = []
    for item in (i for i in stage.items if i.id in m.catches):
        tests += [found[item.id]] if item.lane in NARROWED_LANES else \
            [t.replace("::", "/") for t in plan.expand(item.tests, every)]
    return list(dict.fromkeys(tests))


def narrows(m, tests):
    """Does TEST=tests leave out a test of some item m catches?"""
    stage = next(s for s in stages() if s.name == m.stage)
    every = plan.tests_in([ROOT / "grader" / "tests" / m.stage])
    named = {t.replace("/", "::") for t in tests}
    return any(set(plan.expand(i.tests, every)) - named for i in stage.items if i.id in m.catches)


def write_line(m, tests):
    lines = m.path.read_text().splitlines(keepends=True)
    lines = [ln for ln in lines if not ln.startswith("Tests:")]
    at = next(i for i, ln in enumerate(lines) if ln.startswith("Catches:")) + 1
    if tests:
        lines.insert(at, f"Tests: {', '.join(tests)}\n")
    m.path.write_text("".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stage", default="", help="stage numbers, e.g. 5 or 5,7 (default: all)")
    ap.add_argument("--mutant", default="", help="one mutant's name")
    ap.add_argument("--write", action="store_true", help="put the line in each patch")
    ap.add_argument("--jobs", type=int, default=1, help="mutants graded at once (each grading is one make grade)")
    ap.add_argument("--verify", type=int, default=2,
                    help="gradings on the tests found alone that must each fail (default 2; race items run 3 times)")
    a = ap.parse_args()
    stages = {int(s) for s in a.stage.split(",") if s}
    chosen = [m for m in mutants() if (not stages or int(m.stage[:2]) in stages)
              and (not a.mutant or m.name == a.mutant)
              and not m.name.startswith("hostile-")]   # a hostile tree is graded whole: its report is the point
    if not chosen:
        sys.exit("mutant_tests: no mutant matches")
    def one(m):
        with tempfile.TemporaryDirectory() as d:
            found, chance = failing_tests(m, pathlib.Path(d), a.verify)
        missing = [c for c in m.catches if c not in found]
        tests = [] if missing or chance else line_for(m, found)
        if missing:
            said = f"no line ({', '.join(missing)} named no failing test)"
        elif chance:
            said = "no line (" + ", ".join(f"{c}'s {found[c]} let it pass once" for c in sorted(chance)) + \
                   "; name a forced test by hand, or let it be graded on whole items)"
        elif not narrows(m, tests):
            said, tests = "no line (its items run no other test)", []
        else:
            said = f"Tests: {', '.join(tests)}"
        print(f"{m.stage}/{m.name}: {said}", flush=True)
        if a.write:
            write_line(m, tests)
    with concurrent.futures.ThreadPoolExecutor(max(1, a.jobs)) as pool:
        list(pool.map(one, chosen))

if __name__ == "__main__":
    main()
