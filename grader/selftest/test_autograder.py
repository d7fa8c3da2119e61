"""make autograder: the Gradescope zip, run against a fake /autograder
layout: a submission with stage 01 done scores stage 01's points, in
results.json, from the handout alone."""
import json
import os
import shutil
import subprocess
import sys
import zipfile

from conftest import GRADER, ROOT, stages


def test_autograder_zip(tmp_path):
    z = tmp_path / "autograder.zip"
    proc = subprocess.run([sys.executable, str(GRADER / "course" / "autograder.py"), "--out", str(z)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    ag = tmp_path / "autograder"
    with zipfile.ZipFile(z) as f:
        names = f.namelist()
        assert "setup.sh" in names and "run_autograder" in names
        assert not any(n.startswith("solutions/") or "mutants/" in n for n in names)
        f.extractall(ag / "source")
    for name in ("run_autograder", "setup.sh"):
        (ag / "source" / name).chmod(0o755)
    # Gradescope's zip loses no modes we rely on: the grader needs none
    sub = ag / "submission"
    shutil.copytree(ROOT / "labs", sub / "labs")
    shutil.rmtree(sub / "labs" / "01-signal")
    shutil.copytree(ROOT / "solutions" / "01-signal", sub / "labs" / "01-signal")
    proc = subprocess.run(["sh", str(ag / "source" / "run_autograder")], capture_output=True, text=True,
                          env=dict(os.environ, AUTOGRADER_ROOT=str(ag), NO_COLOR="1"), timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:]
    results = json.loads((ag / "results" / "results.json").read_text())
    s1 = next(s for s in stages() if s.name == "01-signal")
    got = sum(t["score"] for t in results["tests"] if t["number"].startswith("01-signal/"))
    assert got == s1.max_points, proc.stdout[-3000:]
    assert all(t["status"] == "failed" for t in results["tests"] if not t["number"].startswith("01-signal/"))
    assert results["score"] == s1.max_points
