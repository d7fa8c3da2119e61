"""HIDDEN=dir: an instructor's extra rubric items and tests, graded beside
the public ones, marked for Gradescope as visible only once published."""
import shutil
import subprocess

from conftest import ROOT, grade, grade_until_judged, mutants, solutions_copy

HIDDEN = ROOT / "grader" / "selftest" / "data" / "hidden"


def test_hidden_items(tmp_path):
    key = "01-signal/hidden-latest-waker-thrice"
    g, _ = grade_until_judged(tmp_path, solutions_copy(tmp_path), [key], stage="01-signal", extra=[f"HIDDEN={HIDDEN}"])
    assert g.returncode == 0, g.output[-3000:]
    t = g.item("01-signal/hidden-latest-waker-thrice")
    assert t["status"] == "passed" and t["visibility"] == "after_published"
    assert g.item("01-signal/latest-waker")["visibility"] == "visible"

    m = next(m for m in mutants() if m.name == "stale-first-waker" and m.stage == "01-signal")
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "solutions", tree)
    subprocess.run(["patch", "-s", "-p1", "-i", str(m.path)], cwd=tree, check=True)
    g, _ = grade_until_judged(tmp_path, tree, [key], stage="01-signal", items=["hidden-latest-waker-thrice"],
                              extra=[f"HIDDEN={HIDDEN}"])
    assert g.item(key)["score"] == 0 and g.item(key)["status"] == "failed", g.output[-3000:]


def test_hidden_dir_must_exist(tmp_path):
    g = grade(tmp_path, solutions_copy(tmp_path), stage="01-signal", extra=["HIDDEN=/no/such/dir"])
    assert g.returncode != 0 and "HIDDEN=/no/such/dir: no such directory" in g.output
