"""The handout carries what a student needs and none of the answers, and its
grader works without solutions/ (on the shipped reference objects)."""
import shutil
import subprocess
import sys

from conftest import GRADER, ROOT, apply_mutant, mutants, stages


def test_handout(tmp_path):
    out = tmp_path / "handout"
    proc = subprocess.run([sys.executable, str(GRADER / "course" / "handout.py"), "--out", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert not (out / "solutions").exists()
    assert not (out / "grader" / "mutants").exists()
    assert not (out / "grader" / "selftest").exists()
    leaked = [str(p.relative_to(out)) for p in out.rglob("*")
              if p.is_file() and p.suffix in (".c", ".h") and "BEGIN STUDENT" in p.read_text(errors="replace")]
    assert not leaked, f"solution markers in the handout: {leaked}"
    answers = [str(p.relative_to(out)) for p in out.rglob("ANSWERS*")]
    assert not answers, f"answer keys in the handout: {answers}"

    # a student who finished stage N but not the stages before it
    later = [s for s in stages() if s.uses][0]
    tree = tmp_path / "student"
    shutil.copytree(out / "labs", tree)
    shutil.rmtree(tree / later.name)
    shutil.copytree(ROOT / "solutions" / later.name, tree / later.name)
    proc = subprocess.run(["make", "-s", "-C", str(out), "grade", f"STAGE={later.name}", f"TARGET={tree}"],
                          capture_output=True, text=True, timeout=900, env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"})
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-4000:]
    assert f"graded with the reference {later.uses[0]}" in text, text[-3000:]

    # calibrated timeouts work from the shipped reference tests: a hang is
    # timed against the reference, which the handout has only as binaries
    assert (out / "grader" / "reference" / "01-signal" / "tests-plain").exists()
    hang = next(m for m in mutants() if m.name == "hostile-blocking-poll")
    hung = apply_mutant(hang, tmp_path / "hung")
    proc = subprocess.run(["make", "-s", "-C", str(out), "grade", "STAGE=1", "ITEMS=pending-registers",
                           f"TARGET={hung}"], capture_output=True, text=True, timeout=900,
                          env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"})
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2, text[-3000:]
    assert "the reference solution passes this test in" in text, text[-3000:]
