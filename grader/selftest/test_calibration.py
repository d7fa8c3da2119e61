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

from conftest import GRADER, ROOT, apply_mutant, grade, mutants

ITEM = "pending-registers"
HANG = next(m for m in mutants() if m.name == "hostile-blocking-poll")


def test_a_hang_still_fails_beside_the_references_time(tmp_path):
    tree = apply_mutant(HANG, tmp_path / "tree")
    g = grade(tmp_path, tree, stage="01-signal", items=[ITEM])
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
    assert "too slow to judge, rerun" in out, out[-3000:]
    assert "Not judged here: 01-signal/" + ITEM in out, out[-3000:]
    data = json.loads(results.read_text())
    assert data["score"] == 0
    assert time.monotonic() - start < 120, "the second run must be bounded by the same test limit"
