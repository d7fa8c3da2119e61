"""make autograder: one assignment's Gradescope zip, run against a fake
/autograder layout from the handout alone: every shape of upload scores what
make grade gives the same code, in a results.json that holds to the schema."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import GRADER, ROOT, grade, mutants


@pytest.fixture(scope="module")
def stage1_zip(tmp_path_factory):
    """make autograder STAGE=1 HIDDEN=...: one assignment's zip, with a hidden
    item, built once for the tests below."""
    tmp = tmp_path_factory.mktemp("ag")
    hidden = tmp / "hidden"
    (hidden / "rubric").mkdir(parents=True)
    (hidden / "rubric" / "01-signal.toml").write_text(
        '[[item]]\nid = "hidden-drop"\npoints = 1\nlane = "plain"\ntests = ["signal_drop/*"]\n'
        'clause = "a hidden copy of the drop item"\nsection = "#pending-means-a-registered-waker"\n'
        # an item no machine here can judge (rubric `cpus`): 0 of 0 in one line, never a failed test
        '[[item]]\nid = "hidden-needs-cpus"\npoints = 1\nlane = "plain"\ntests = ["signal_drop/*"]\ncpus = 64\n'
        'clause = "a copy of the drop item that needs 64 CPUs"\nsection = "#pending-means-a-registered-waker"\n')
    z = tmp / "ag.zip"
    proc = subprocess.run([sys.executable, str(GRADER / "course" / "autograder.py"), "--out", str(z), "--stage", "1",
                           "--hidden", str(hidden)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "set the assignment's total to" in proc.stdout, proc.stdout
    with zipfile.ZipFile(z) as f:
        names = f.namelist()
    assert "setup.sh" in names and "run_autograder" in names and "autograder.env" in names
    assert not any(n.startswith("solutions/") or "mutants/" in n for n in names)
    # the transcripts' tables, which the handout leaves out (test_handout)
    assert {n for n in names if n.endswith("/sites.json")} == \
        {f"grader/tests/{t.parent.name}/sites.json" for t in (GRADER / "tests").glob("*/sites.json")}, names
    return z, hidden


def _unpack(z, ag):
    with zipfile.ZipFile(z) as f:
        f.extractall(ag / "source")
    for n in ("run_autograder", "setup.sh"):
        (ag / "source" / n).chmod(0o755)   # Gradescope's zip loses no modes we rely on: the grader needs none
    (ag / "submission").mkdir(parents=True)


def _make_zip(src_dir, zip_path, top=""):
    with zipfile.ZipFile(zip_path, "w") as z:
        for p in sorted(src_dir.rglob("*")):
            if p.is_file():
                z.write(p, str(pathlib.PurePosixPath(top) / p.relative_to(src_dir)))


def _stage_tree(tree, stage):
    """{relative path: bytes} of one stage folder of a found tree."""
    d = tree / stage
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_one_assignment_per_stage_and_every_upload_shape(tmp_path, stage1_zip):
    """A stage-01 assignment (make autograder STAGE=1 HIDDEN=...) on
    Gradescope's layout for the four shapes students upload: the labs/ tree,
    the two files dragged in, the repository downloaded as a zip (one folder
    down), a zip of loose files. The image's own find_work.py (the first step
    of run_autograder) must make the same stage folder of each; the most
    nested shape is then graded end to end by run_autograder and gets the
    score `make grade` gives the same code, in a results.json that holds to
    Gradescope's schema. (The grading after find_work depends on that folder
    only, so one full run stands for the four: each costs a stage-01 grading.)"""
    sys.path.insert(0, str(GRADER))
    from lab_grader import results_json
    z, hidden = stage1_zip
    # the partly done stage: a copy of the reference with one bug
    m = next(m for m in mutants() if m.stage == "01-signal" and m.name == "stale-first-waker")
    work = tmp_path / "work"
    shutil.copytree(ROOT / "solutions", work)
    subprocess.run(["patch", "-s", "-p1", "-i", str(m.path)], cwd=work, check=True)
    expected = grade(tmp_path, work, stage="1", extra=[f"HIDDEN={hidden}"])
    assert 0 < expected.score < sum(t["max_score"] for t in expected.results["tests"])
    files = work / "01-signal"
    shapes = {}
    shapes["labs"] = lambda sub: shutil.copytree(work, sub / "labs")
    shapes["loose"] = lambda sub: [shutil.copyfile(files / f, sub / f) for f in ("signal.c", "signal.h")]
    shapes["repo-zip"] = lambda sub: _make_zip(work, sub / "async-lab-main.zip", top="async-lab-main/labs")
    shapes["loose-zip"] = lambda sub: _make_zip(files, sub / "work.zip")
    ag = tmp_path / "ag"   # one image for every upload, as on Gradescope
    _unpack(z, ag)
    want = {f: (files / f).read_bytes() for f in ("signal.c", "signal.h")}
    for name, make in shapes.items():
        sub, found = tmp_path / f"sub-{name}", tmp_path / f"found-{name}"
        sub.mkdir()
        make(sub)
        proc = subprocess.run([sys.executable, str(ag / "source" / "grader" / "course" / "find_work.py"), str(sub),
                               str(found)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, (name, proc.stdout + proc.stderr)
        got = _stage_tree(found, "01-signal")
        assert {f: got.get(f) for f in want} == want, (name, sorted(got), proc.stdout)
    name = "repo-zip"
    (ag / "submission").mkdir(exist_ok=True)
    shapes[name](ag / "submission")
    run = subprocess.run(["sh", str(ag / "source" / "run_autograder")], capture_output=True, text=True,
                         env=dict(os.environ, AUTOGRADER_ROOT=str(ag), NO_COLOR="1"), timeout=900)
    assert run.returncode == 0, run.stdout[-3000:]
    data = json.loads((ag / "results" / "results.json").read_text())
    assert results_json.validate(data) == [], (name, results_json.validate(data))
    assert {t["number"].split("/")[0] for t in data["tests"]} == {"01-signal"}, (name, run.stdout[-2000:])
    assert data["score"] == expected.score, (name, data["score"], expected.score, run.stdout[-3000:])
    assert any(t["number"] == "01-signal/hidden-drop" and t["visibility"] == "after_published"
               for t in data["tests"]), name
    # UNJUDGED=omit, baked into the zip: what the machine cannot judge is 0 of 0, one line, no failed status
    t = next(t for t in data["tests"] if t["number"] == "01-signal/hidden-needs-cpus")
    assert t["score"] == t["max_score"] == 0 and "status" not in t and "\n" not in t["output"], t
    assert t["output"].startswith("Not judged on this machine (it gives this grading ") and "needs 64" in t["output"], t


def test_an_upload_with_no_work_says_what_was_expected(tmp_path, stage1_zip):
    ag = tmp_path / "ag"
    _unpack(stage1_zip[0], ag)
    (ag / "submission" / "README.md").write_text("hello\n")
    subprocess.run(["sh", str(ag / "source" / "run_autograder")], capture_output=True, text=True,
                   env=dict(os.environ, AUTOGRADER_ROOT=str(ag), NO_COLOR="1"), timeout=300)
    data = json.loads((ag / "results" / "results.json").read_text())
    assert data["score"] == 0 and len(data["tests"]) == 1, data
    assert "signal.c" in data["tests"][0]["output"] and "README.md" in data["tests"][0]["output"], data



def test_students_are_told_what_happened_to_their_upload(tmp_path, stage1_zip):
    """Issue 27, item 4: a browser's 'signal (1).c' is named for what it
    most likely is, the message lists only the assignment's stage, and it
    does not blame the grader; a file left out of a graded upload is said
    at the top of the results, where the student sees it (stdout is the
    instructor's alone)."""
    cases = {"renamed": {"signal (1).c": (ROOT / "labs" / "01-signal" / "signal.c").read_bytes()},
             "extra": {"signal.c": (ROOT / "labs" / "01-signal" / "signal.c").read_bytes(), "notes.c": b"int x;\n"}}
    for name, files in cases.items():
        ag = tmp_path / name
        _unpack(stage1_zip[0], ag)
        for f, data in files.items():
            (ag / "submission" / f).write_bytes(data)
        subprocess.run(["sh", str(ag / "source" / "run_autograder")], capture_output=True, text=True,
                       env=dict(os.environ, AUTOGRADER_ROOT=str(ag), NO_COLOR="1"), timeout=300)
        data = json.loads((ag / "results" / "results.json").read_text())
        shown = data["output"] + "".join(t["output"] for t in data["tests"] if t.get("visibility") != "hidden")
        assert "tell your instructor" not in shown and "could not finish" not in shown, shown
        assert "02-block-on" not in shown and "/autograder" not in shown and str(ag) not in shown, shown
        if name == "renamed":
            assert data["score"] == 0 and "looks like signal.c" in shown and "upload.md" in shown, shown
        else:
            assert data["output"].startswith("About your upload:"), data["output"][:500]
            assert "notes.c is not a file of any stage graded here: left out" in data["output"], data["output"][:500]


def test_instructors_points_table_is_the_rubrics():
    """docs/instructors.md's table of what to set in Gradescope, stage by
    stage, is what make autograder prints for each (autograder.stage_points
    over grader/rubric/*.toml): a rubric's points changed without the table
    fail here, so the table cannot drift again (02, 05 and 06 had)."""
    sys.path.insert(0, str(GRADER / "course"))
    import autograder
    from lab_grader import rubric
    doc = (ROOT / "docs" / "instructors.md").read_text()
    head = "| stage | automatic points | quiz (marked by you) |"
    assert head in doc, f"docs/instructors.md has no table headed {head}"
    rows = {}
    for line in doc.split(head, 1)[1].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = (cells[1], cells[2])
    want = {}
    for s in rubric.load_all(GRADER / "rubric"):   # the public rubrics: hidden items are the instructor's own
        auto, quiz, _ = autograder.stage_points([s])
        want[s.name] = (f"{auto:g}", f"{quiz:g}" if quiz else "")
    assert rows == want, ("docs/instructors.md's Gradescope points table is not the rubrics' sums "
                          f"(stage: automatic, quiz):\n  table:   {rows}\n  rubrics: {want}")
    # the marking guide of stage 04's written answers restates that stage's
    # points (it said 22 while the rubric summed to 24): the same sums
    import re
    s = next(s for s in rubric.load_all(GRADER / "rubric") if s.name == "04-deadline-signal")
    auto, quiz, _ = autograder.stage_points([s])
    said = re.findall(r"stage's (\d+) automatic points and the (\d+) quiz points you mark", " ".join(doc.split()))
    assert said == [(f"{auto:g}", f"{quiz:g}")], (
        f"docs/instructors.md's marking guide gives {s.name}'s points as {said}; the rubric has "
        f"{auto:g} automatic and {quiz:g} quiz points")
    # and the Classroom section's total for that stage (its quiz points left out)
    said = re.findall(r"stage 04's assignment totals (\d+), not (\d+)", " ".join(doc.split()))
    assert said == [(f"{auto:g}", f"{auto + quiz:g}")], (
        f"docs/instructors.md's Classroom section gives stage 04's totals as {said}; the rubric: "
        f"{auto:g} without the quiz, {auto + quiz:g} with it")
