"""Calibrated timeouts: a test that times out is run again on the reference.

A hang in the student's code still fails, now with the reference's time on
this machine beside it. When the reference is as slow (here: the reference is
the same hanging tree, which is what a machine too loaded to run anything in
time looks like to the grader), the item is left unjudged with "rerun", not
failed.
"""
import json
import os
import subprocess
import sys
import time

from conftest import GRADER, ROOT, apply_mutant, grade_until_judged, mutants

ITEM = "pending-registers"
HANG = next(m for m in mutants() if m.name == "hostile-blocking-poll")


def test_a_hang_still_fails_beside_the_references_time(tmp_path):
    tree = apply_mutant(HANG, tmp_path / "tree")
    # a hang on a loaded machine may be starved by the kernel's numbers: regrade
    g, _ = grade_until_judged(tmp_path, tree, [f"01-signal/{ITEM}"], stage="01-signal", items=[ITEM])
    assert g.returncode == 2, g.output[-3000:]
    assert "the reference solution passes this test in" in g.output, g.output[-3000:]
    assert g.item(f"01-signal/{ITEM}")["score"] == 0


def test_a_reference_as_slow_means_too_slow_to_judge(tmp_path):
    tree = apply_mutant(HANG, tmp_path / "tree")
    results = tmp_path / "results.json"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--no-header", "-rN",
           str(GRADER / "grade"), f"--target={tree}", f"--reference={tree}", "--stage=01-signal",
           f"--items={ITEM}", f"--results={results}", f"--build-dir={tmp_path / 'build'}"]
    start = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, NO_COLOR="1"),
                       timeout=600)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]           # not judged is not a failure
    # the kernel's numbers may say first that the machine starved the run (a
    # loaded machine): that is the other honest "not judged", also a regrade
    assert "too slow to judge, rerun" in out or "the machine was too busy" in out, out[-3000:]
    assert "Not judged here: 01-signal/" + ITEM in out, out[-3000:]
    data = json.loads(results.read_text())
    assert data["score"] == 0
    assert time.monotonic() - start < 120, "the second run must be bounded by the same test limit"


def test_a_timeout_before_begin_is_run_again(tmp_path):
    """A timeout with no BEGIN record: the test body never started (a worker
    the loaded machine did not get going: seen once in make test, a stage 01
    test of microseconds "timed out after 5 s" with no watchdog record). No
    code under test ran, so the grader runs it once more before judging; a
    timeout after BEGIN is judged at once."""
    sys.path.insert(0, str(GRADER))
    from lab_grader import calibrate, binary_run, judge, lanes, outcomes, records

    reruns = []

    def rerun(tests, binary, name):   # what lanes.Runner.rerun does, without running anything
        reruns.append((list(tests), binary, name))
        return {t: outcomes.Outcome(test=t, verdict=outcomes.Verdict.PASS) for t in tests}, None

    report = {"s::early": ("ERRORED", "timeout", "", 5.0), "s::late": ("ERRORED", "timeout", "", 5.0)}
    recs = records.read_dir(tmp_path)  # empty
    recs["s::late"] = records.parse("BEGIN 1 s::late\n")
    outs = {t: judge.one_test(t, report, recs, None, "n") for t in report}
    assert not outs["s::early"].began and outs["s::late"].began
    calibrate.retry_unbegun(outs, rerun, [t for t, o in outs.items() if not o.began])
    assert reruns == [(["s::early"], None, "again")]
    assert outs["s::early"].passed and "before the test began" in outs["s::early"].details[0]
    assert outs["s::late"].verdict == "timeout"
    # and the run directory the runner gives that rerun
    run_dir = tmp_path / "run" / "0"
    inv = binary_run.BinaryRun(tmp_path / "bin", list(report), run_dir, env={"LOG": str(run_dir / "x")})
    runner = lanes.Runner("n", None, 1, 0.05, tmp_path)
    runner.run = lambda again, hints: (again, None)
    again, _ = runner.rerun(inv, ["s::early"], None, "again")
    assert again.run_dir.name == "0-again" and again.tests == ["s::early"] and again.binary == inv.binary
    assert again.env["LOG"] == str(tmp_path / "run" / "0-again" / "x")


def test_a_test_whose_outcome_was_lost_is_run_again(tmp_path):
    """A test that began (BEGIN, even a FAIL record) but left nothing else:
    the runner's report lost it, with no END, crash or hang record (seen in
    CI under load: a stage 04 mutant's failing check reported as "did not
    run", naming no clause). Its outcome is unknown, so it is run once more,
    and that run's verdict is the one given."""
    sys.path.insert(0, str(GRADER))
    from lab_grader import calibrate, judge, outcomes, records

    reruns = []

    def rerun(tests, binary, name):
        reruns.append((list(tests), binary, name))
        return {t: outcomes.Outcome(test=t, verdict=outcomes.Verdict.FAIL, message="x: contract 10") for t in tests}, None

    recs = records.read_dir(tmp_path)
    recs["s::lost"] = records.parse("BEGIN 7 s::lost\nFAIL 7\n")
    out = judge.one_test("s::lost", {}, recs, None, "n")
    assert out.verdict == outcomes.Verdict.MISSING and out.began
    assert "began" in out.message
    outs = {"s::lost": out}
    calibrate.calibrate(outs, rerun, None, [])
    assert reruns == [(["s::lost"], None, "again")]
    assert outs["s::lost"].verdict == outcomes.Verdict.FAIL and outs["s::lost"].message == "x: contract 10"
    assert "lost the test's outcome" in outs["s::lost"].details[0]
