"""make grade-class: a folder of student trees in, a gradebook out, each
student scored exactly as a lone `make grade` would."""
import csv
import shutil
import subprocess

from conftest import ROOT, mutants, stages


def test_grade_class(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copytree(ROOT / "solutions", subs / "alice")       # the reference
    shutil.copytree(ROOT / "labs", subs / "bob")              # nothing written
    m = next(m for m in mutants() if m.stage == "01-signal" and m.name == "stale-first-waker")
    shutil.copytree(ROOT / "solutions", subs / "carol")
    subprocess.run(["patch", "-s", "-p1", "-i", str(m.path)], cwd=subs / "carol", check=True)
    # the shapes students really hand in: a repository downloaded as a zip
    # (everything one folder down), and loose files
    shutil.copytree(ROOT / "solutions", subs / "dave" / "async-lab-main" / "labs")
    (subs / "erin").mkdir()
    for f in ("signal.c", "signal.h"):
        shutil.copyfile(ROOT / "solutions" / "01-signal" / f, subs / "erin" / f)
    (subs / "frank").mkdir()
    (subs / "frank" / "notes.txt").write_text("I could not get it to compile\n")
    # a hostile submission in the same batch: every signal_new starts
    # threads that never end (a thread bomb: pthread_create is allowed)
    shutil.copytree(ROOT / "labs", subs / "mallory")
    src = subs / "mallory" / "01-signal" / "signal.c"
    text = src.read_text().replace("#include", "#include <pthread.h>\n#include", 1)
    text = text.replace("               struct signal_future **future)\n{",
                        "               struct signal_future **future)\n{\n    pthread_t t;\n"
                        "    while (pthread_create(&t, NULL, spin, NULL) == 0) { }", 1)
    text = text.replace("int signal_new(", "static void *spin(void *a) { for (;;) { } return a; }\n\nint signal_new(", 1)
    src.write_text(text)
    out = tmp_path / "book.csv"
    proc = subprocess.run(["make", "-s", "-C", str(ROOT), "grade-class", f"SUBMISSIONS={subs}",
                           f"GRADEBOOK={out}", "STAGE=1"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    rows = {r["student"]: r for r in csv.DictReader(out.open())}
    full = next(s for s in stages() if s.name == "01-signal").max_points
    assert float(rows["alice"]["01-signal"]) == full
    assert float(rows["alice"]["not judged"]) == 0 and float(rows["alice"]["max"]) == full
    assert float(rows["bob"]["01-signal"]) == 0
    lost = sum(i.points for s in stages() if s.name == "01-signal" for i in s.items if i.id in m.catches)
    assert float(rows["carol"]["01-signal"]) <= full - lost
    assert "most failed items" in proc.stdout
    assert float(rows["points possible"]["01-signal"]) == full
    assert float(rows["points possible"]["01-signal/latest-waker"]) > 0     # one column per item
    assert float(rows["carol"]["01-signal/latest-waker"]) == 0 and float(rows["alice"]["01-signal/latest-waker"]) > 0
    assert float(rows["mallory"]["01-signal"]) == 0
    for student in ("dave", "erin"):
        assert float(rows[student]["01-signal"]) == full, proc.stdout[-3000:]
    assert rows["frank"]["total"] == "error"
    assert "frank: no stage folder" in proc.stdout or "frank:" in proc.stdout.split("grade these again")[-1], proc.stdout
    assert (tmp_path / "reports" / "carol.txt").exists()
