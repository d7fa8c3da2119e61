"""The reference solutions get full marks (compiled with -Werror); the
untouched skeletons get zero, every failure saying "not started", quickly;
a later stage is graded with the reference of an earlier one that fails."""
import shutil
import subprocess

from conftest import (MACHINE_REASONS, ROOT, CpuPressure, assert_quick, every_lane, grade, judged_in_the_end,
                      solutions_copy, stages)


def test_solutions_full_marks(tmp_path):
    g = grade(tmp_path, ROOT / "solutions", extra=["WERROR=1"])
    assert g.returncode == 0, f"solutions/ should pass everything:\n{g.output[-4000:]}"
    judged_tests = [t for t in g.results["tests"] if t.get("extra_data", {}).get("judged", True)]
    assert all(t["status"] == "passed" for t in judged_tests)
    # Full marks on every item judged. An item may go unjudged only when the
    # machine could not measure it: a perf-lane item on a loaded machine, or
    # any item whose test showed by its own clock that the machine decided
    # (lab_cannot_judge: a peer that sent its byte 380 ms late under
    # Valgrind beside make test's other worker), or the kernel said the run
    # was starved of CPU. The report names each one.
    judged = sum(t["max_score"] for t in judged_tests)
    assert g.score == judged, f"solutions/ scored {g.score} of {judged}\n{g.output[-4000:]}"
    unjudged = {line.split(":")[1].strip(): line for line in g.output.splitlines()
                if line.startswith("Not judged here:")}
    items = {i.key: i for s in stages() for i in s.items}
    for key, line in unjudged.items():
        machine = any(r in line for r in MACHINE_REASONS)
        assert items[key].lane == "perf" or machine, f"only a timing item or the machine may leave an item unjudged:\n{line}"
    assert judged + sum(items[k].points for k in unjudged) == sum(s.max_points for s in stages())
    # every item is in results.json, judged or not
    assert {t["number"] for t in g.results["tests"]} == set(items)
    for line in unjudged.values():
        print(line)
    print(f"grade TARGET=solutions: {g.seconds:.1f} s")


def test_skeleton_scores_zero_and_says_not_started(tmp_path):
    junit = tmp_path / "junit.xml"
    pressure = CpuPressure()
    g = grade(tmp_path, ROOT / "labs", extra=[f"JUNIT={junit}"])
    # JUNIT=: a testcase per item, a suite per stage, valid for CI tools
    proc = subprocess.run(["xmllint", "--noout", "--schema", str(ROOT / "grader" / "schemas" / "JUnit.xsd"),
                           str(junit)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import xml.etree.ElementTree as ET
    suites = ET.parse(junit).getroot().findall("testsuite")
    assert {s.get("name") for s in suites} == {s.name for s in stages()}
    assert sum(len(s.findall("testcase")) for s in suites) == sum(len(s.items) for s in stages())
    assert g.returncode == 2, g.output[-3000:]   # make's status for a failed recipe
    assert g.score == 0, f"the untouched skeleton scored {g.score}\n{g.output[-3000:]}"
    not_started = [t for t in g.results["tests"] if "not started" in t["output"]]
    others = [t["number"] for t in g.results["tests"] if "not started" not in t["output"]]
    assert not others, f"these items fail on the skeleton for another reason than 'not started': {others}\n{g.output[-4000:]}"
    assert not_started
    # about 12 s on a quiet machine; make test runs it beside other load (the
    # flake check keeps every core busy), so the bound here is looser
    assert_quick(g.seconds, 120, "grading the skeleton", pressure)
    print(f"grade of the untouched labs/: {g.seconds:.1f} s")


def test_later_stage_uses_reference_when_earlier_fails(tmp_path):
    """Stage 02 on top of the untouched stage 01 skeleton: stage 02 is still
    graded, in every lane, against the reference stage 01, and the report
    says so."""
    later = [s for s in stages() if s.uses]
    assert later, "no stage uses another"
    s = later[0]
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "labs", tree)
    shutil.rmtree(tree / s.name)
    shutil.copytree(ROOT / "solutions" / s.name, tree / s.name)
    items = every_lane(s)
    g = grade(tmp_path, tree, stage=s.name, items=[i.key for i in items])
    assert g.returncode == 0, g.output[-4000:]
    # an item the machine could not judge is graded again on its own
    unjudged = {t["number"] for t in g.results["tests"] if g.left_to_the_machine(t["number"])}
    assert g.score == sum(i.points for i in items if i.key not in unjudged), g.output[-3000:]
    judged_in_the_end(tmp_path, tree, g, stage=s.name)
    for dep in s.uses:
        assert f"graded with the reference {dep}" in g.output, g.output[-3000:]


def test_grader_exit_status(tmp_path):
    """The grader itself exits 1 when an item fails (make turns that into 2)."""
    import subprocess
    import sys
    from conftest import GRADER
    s = stages()[0]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--tb=no",
                           str(GRADER / "grade"), f"--target={ROOT / 'labs'}", f"--stage={s.name}",
                           f"--items={s.items[0].id}"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "not started" in proc.stdout


def test_check_is_the_quick_pass(tmp_path):
    """make check: no Valgrind, TSan or perf lane, race items once; a few seconds."""
    import os
    import subprocess
    import time
    pressure = CpuPressure()
    start = time.monotonic()
    proc = subprocess.run(["make", "-s", "-C", str(ROOT), "check", "STAGE=1", f"TARGET={solutions_copy(tmp_path)}"],
                          capture_output=True, text=True, env=dict(os.environ, NO_COLOR="1"), timeout=300)
    seconds = time.monotonic() - start
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "the valgrind lane is left to `make grade`" in proc.stdout
    # the total says what make check judged, and what the stage is out of
    stage = next(s for s in stages() if s.name == "01-signal")
    deferred = [i for i in stage.items if i.lane in ("valgrind", "tsan", "perf")]
    quick = sum(i.points for i in stage.items) - sum(i.points for i in deferred)
    assert f"Total: {quick}/{quick}" in proc.stdout, proc.stdout[-2000:]
    assert (f"of {quick + sum(i.points for i in deferred)} points in all: {sum(i.points for i in deferred)} more "
            f"({len(deferred)} item(s)") in proc.stdout, proc.stdout[-2000:]
    assert "----    -/" in proc.stdout   # an item left to make grade has no score yet, not a 0
    assert "passed 1 of 1 runs" not in proc.stdout  # passed items show their clause, but none ran Valgrind
    # a few seconds on a quiet machine; make test runs it beside other load
    # (the flake check keeps every core busy), so the bound only catches a
    # quick pass that is not quick at all
    assert_quick(seconds, 150, "make check STAGE=1", pressure)


def test_compile_error_costs_its_stage_only(tmp_path):
    """A stage that does not compile fails its own items with the compiler's
    first error; the stage before it is graded as usual, and the stage that
    uses it is graded against the reference, in every lane (its plain items
    and the first item of each other lane: each lane links the broken
    stage's reference objects of its own variant)."""
    later = next(s for s in stages() if len(s.uses) >= 2)   # 03 uses 01 and 02
    broken = later.uses[-1]
    first = next(s for s in stages() if s.name == later.uses[0])
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "solutions", tree)
    src = sorted((tree / broken).glob("*.c"))[0]
    src.write_text(src.read_text() + "\nthis is not C;\n")
    graded = every_lane(later)
    items = [i.key for i in first.items if i.lane == "plain"] + [i.key for i in graded]
    items += [i.key for s in stages() if s.name == broken for i in s.items]
    g = grade(tmp_path, tree, stage=f"{first.name},{broken},{later.name}", items=items)
    by_stage = {}
    for t in g.results["tests"]:
        by_stage.setdefault(t["number"].split("/")[0], []).append(t)
    assert by_stage[first.name] and all(t["score"] == t["max_score"] for t in by_stage[first.name]), g.output[-3000:]
    assert all(t["score"] == 0 and "did not compile" in t["output"] for t in by_stage[broken]), g.output[-3000:]
    assert f"{src.name}:" in g.output, "the report should quote the compiler's first error"
    assert len(by_stage[later.name]) == len(graded), g.output[-3000:]
    # a perf item may go unjudged on a loaded machine (never failed)
    judged = [t for t in by_stage[later.name] if t.get("extra_data", {}).get("judged", True)]
    assert all(t["score"] == t["max_score"] for t in judged), g.output[-3000:]
    assert f"graded with the reference {broken}" in g.output, g.output[-3000:]


def test_a_time_budget_ends_the_grading_with_every_item_in_results(tmp_path):
    """BUDGET=: past it the items left are not judged (never failed), the
    grading ends, and results.json, written item by item, holds every item
    and holds to Gradescope's schema."""
    import sys
    sys.path.insert(0, str(ROOT / "grader"))
    from lab_grader import results_json
    tree = tmp_path / "tree"   # a tree of its own: another self-test grading solutions/ holds its lock
    shutil.copytree(ROOT / "solutions", tree)
    pressure = CpuPressure()
    g = grade(tmp_path, tree, stage="3", extra=["BUDGET=4"])
    assert results_json.validate(g.results) == []
    s3 = next(s for s in stages() if s.name == "03-executor")
    assert {t["number"] for t in g.results["tests"]} == {i.key for i in s3.items}
    late = [t for t in g.results["tests"] if t.get("extra_data", {}).get("judged") is False]
    # past the budget, or (before it) one the machine could not judge
    assert late and all("time budget" in t["output"] or g.left_to_the_machine(t["number"]) for t in late), \
        g.output[-2000:]
    assert any("time budget" in t["output"] for t in late), g.output[-2000:]
    assert all(t["status"] == "passed" for t in g.results["tests"] if t not in late)
    # last: a bound the machine can leave unjudged skips the test, after every check above ran
    assert_quick(g.seconds, 120, "a grading with a 4 s budget", pressure)
