"""make grade-class: a folder of student trees in, a gradebook out, each
student scored exactly as a lone `make grade` would; a roster joined in and
the exports an instructor uploads (Canvas, Gradescope), checked against
the rules their documentation gives; names that are data (issue 25, class
10: no two students share a file, any byte in a name is safe, nothing a
name holds reaches the terminal or a spreadsheet as anything but text)."""
import csv
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT, mutants, stages

sys.path.insert(0, str(ROOT / "grader" / "course"))
import gradebook  # noqa: E402

DATA = ROOT / "grader" / "selftest" / "data"
HIDDEN = DATA / "hidden"
CLASS = [sys.executable, str(ROOT / "grader" / "course" / "grade_class.py")]


def _rows(path):
    return {r["student"]: r for r in csv.DictReader(open(path, newline=""))}


def _private(top):
    """Every folder under top 0700 and every file 0600 (issue 25: trees and
    reports were world-readable)."""
    bad = []
    for dirpath, dirnames, filenames in os.walk(top):
        if stat.S_IMODE(os.stat(dirpath).st_mode) != 0o700:
            bad.append(dirpath)
        bad += [os.path.join(dirpath, f) for f in filenames
                if stat.S_IMODE(os.lstat(os.path.join(dirpath, f)).st_mode) != 0o600]
    return bad


# latest-waker: carol's mutant loses it; pending-registers: a second public
# item; the hidden one: its column, and the points possible it adds
CLASS_ITEMS = ["latest-waker", "pending-registers", "hidden-latest-waker-thrice"]


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
    # nothing submitted: an empty folder and an empty zip
    (subs / "gina").mkdir()
    with zipfile.ZipFile(subs / "hal.zip", "w"):
        pass
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
    roster = tmp_path / "roster.csv"
    roster.write_text("id,email,folder,name,section\n"
                      + "".join(f"s{100 + k},{n}@example.edu,{f},{n.title()} Student,S1\n"
                                for k, (n, f) in enumerate([("alice", "alice"), ("bob", "bob"), ("carol", "carol"),
                                                            ("dave", "dave"), ("erin", "erin"), ("frank", "frank"),
                                                            ("gina", "gina"), ("hal", "hal"), ("mallory", "mallory"),
                                                            ("ivan", "ivan")])))   # ivan: on the roster, no entry
    out = tmp_path / "book.csv"
    # ROSTER= reaches grade_class.py through the environment make gives its
    # recipes (a variable set on make's command line is exported)
    # Three items, one of them hidden: the batch, the roster, the exports and
    # the hostile neighbour are what is tested here, and a stage's every
    # item on every tree is test_reference's (a whole stage-01 grading of
    # each of the six trees cost 270 s of make test's time).
    proc = subprocess.run(["make", "-s", "-C", str(ROOT), "grade-class", f"SUBMISSIONS={subs}",
                           f"GRADEBOOK={out}", "STAGE=1", f"HIDDEN={HIDDEN}", f"ROSTER={roster}",
                           f"ITEMS={','.join(CLASS_ITEMS)}"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    rows = _rows(out)
    st = next(s for s in stages() if s.name == "01-signal")
    hidden_points = 1                                  # data/hidden/rubric/01-signal.toml
    full = sum(i.points for i in st.items if i.id in CLASS_ITEMS) + hidden_points
    # hidden items are in the points possible, and have their column
    assert float(rows["points possible"]["01-signal"]) == full
    assert float(rows["points possible"]["total"]) == full
    assert float(rows["points possible"]["01-signal/hidden-latest-waker-thrice"]) == hidden_points
    def full_marks(r):
        """Every point judged earned; an item the machine left unjudged (a
        loaded machine: "too slow to judge") is no verdict either way, and
        puts the student on the regrade list, out of the exports."""
        return (float(r["01-signal"]) == float(r["total"]) == float(r["points judged"])
                and float(r["points judged"]) + float(r["points not judged"]) == full
                and (r["status"] == "graded") == (float(r["points not judged"]) == 0))
    assert full_marks(rows["alice"]), (rows["alice"], proc.stdout[-3000:])
    assert rows["alice"]["id"] == "s100" and rows["alice"]["email"] == "alice@example.edu"
    assert float(rows["bob"]["01-signal"]) == 0
    lost = sum(i.points for i in st.items if i.id in m.catches and i.id in CLASS_ITEMS)
    assert float(rows["carol"]["01-signal"]) <= full - lost
    assert "most failed items" in proc.stdout
    assert float(rows["points possible"]["01-signal/latest-waker"]) > 0     # one column per item
    assert float(rows["carol"]["01-signal/latest-waker"]) == 0 and float(rows["alice"]["01-signal/latest-waker"]) > 0
    assert float(rows["mallory"]["01-signal"]) == 0
    for student in ("dave", "erin"):
        assert full_marks(rows[student]), (rows[student], proc.stdout[-3000:])
    # a 0 with its reason, never a text cell, and not for regrading
    assert rows["frank"]["status"] == "no work found" and float(rows["frank"]["total"]) == 0
    assert "no stage folder" in rows["frank"]["reason"]
    for student in ("gina", "hal.zip", "ivan"):
        assert rows[student]["status"] == "nothing submitted" and float(rows[student]["total"]) == 0, rows[student]
    regrade = proc.stdout.split("grade these again")[-1] if "grade these again" in proc.stdout else ""
    for student in ("frank", "gina", "hal.zip", "ivan"):
        assert f"  {student}:" not in regrade, proc.stdout
    # numeric cells only: every score column of every row is a number
    head = next(csv.reader(open(out, newline="")))
    scores = [h for h in head if h not in ("student", "id", "email", "status", "reason", "report", "review")]
    for name, r in rows.items():
        for h in scores:
            if name == "points possible" and h in ("points judged", "points not judged"):
                continue
            float(r[h])
    assert (tmp_path / "reports" / rows["carol"]["report"].split("/", 1)[1]).exists()
    assert _private(tmp_path / "reports") == [] and _private(tmp_path / "trees") == []
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    # the exports: valid by the documented rules, the roster's ids, one row
    # per roster student graded (everyone here: nobody is left to regrade
    # unless the machine left an item unjudged)
    assert gradebook.check_canvas(tmp_path / "canvas.csv") == []
    assert gradebook.check_gradescope(tmp_path / "gradescope.csv") == []
    canvas = list(csv.reader(open(tmp_path / "canvas.csv", newline="")))
    assert canvas[0][:5] == gradebook.CANVAS_STUDENT_COLUMNS and canvas[1][0] == "Points Possible"
    assert float(canvas[1][5]) == full
    by_sis = {r[2]: r for r in canvas[2:]}
    assert float(by_sis["s109"][5]) == 0 and float(by_sis["s105"][5]) == 0
    assert rows["alice"]["status"] != "graded" or float(by_sis["s100"][5]) == full
    gs = {r["SID"]: r for r in csv.DictReader(open(tmp_path / "gradescope.csv", newline=""))}
    assert "s100" not in gs or (float(gs["s100"]["Total Score"]) == full and gs["s100"]["Email"] == "alice@example.edu")
    left_out = {r["id"] for r in rows.values() if r["status"] in ("error", "not all judged")}
    assert set(gs) == {f"s{100 + k}" for k in range(10)} - left_out


# ---------------------------------------------------------------- names are data (red team)

# (name, tree, what the one item graded is worth): the reference earns the
# item, the skeleton does not, so a report that went to the wrong student
# shows as a wrong score
RED_TEAM = [
    ("x", "labs", 0),
    ("x.meta", "solutions", 1),        # x.meta.json was x's meta file
    ("line\nbreak", "solutions", 1),   # shifted students.txt: the last student was never graded
    ("last", "solutions", 1),
    ("\x1b[2J\x1b[31mFAKE 23 of 23", "labs", 0),   # an escape sequence for the terminal
    ("=cmd|' -c calc'!A0", "solutions", 1),    # a formula for the spreadsheet (no "/": a path)
    ("bob", "labs", 0),
    ("bad\udcffbyte", "solutions", 1),          # not UTF-8
]
ITEM = "pending-registers"


def _red_team_class(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    expected = {}
    for name, tree, points in RED_TEAM:
        shutil.copytree(ROOT / tree / "01-signal", subs / name / "01-signal")
        expected[name] = points
    # bob.zip beside the folder bob: two students, two reports
    with zipfile.ZipFile(subs / "bob.zip", "w") as z:
        for f in ("signal.c", "signal.h"):
            z.write(ROOT / "solutions" / "01-signal" / f, f"01-signal/{f}")
    expected["bob.zip"] = 1
    return subs, expected


def _check_red_team(tmp_path, proc, expected):
    """Every student graded once, under their own name, nothing overwritten,
    nothing raw on the terminal or in a CSV cell."""
    reports = tmp_path / "reports"
    folders = sorted(p.name for p in reports.iterdir() if p.is_dir())
    assert folders == sorted(gradebook.key(n) for n in expected), folders
    for name, points in expected.items():
        d = reports / gradebook.key(name)
        meta = json.loads((d / "meta.json").read_text())
        assert bytes.fromhex(meta["name_hex"]) == os.fsencode(name), (name, meta)
        assert len((d / "gradings.log").read_text().splitlines()) == 1, name     # graded once
        res = json.loads((d / "results.json").read_text())
        assert res["score"] == points, (name, res["score"], proc.stdout)
    # the list the jobs read holds every name, byte for byte
    listing = json.loads((reports / "students.json").read_text())["students"]
    assert sorted(os.fsdecode(bytes.fromhex(s["name_hex"])) for s in listing) == sorted(expected)
    # the terminal: no escape, no control character but newline
    out = proc.stdout + proc.stderr
    assert not [c for c in out if (ord(c) < 32 and c != "\n") or 0x7f <= ord(c) < 0xa0], repr(out[-2000:])
    for name in expected:
        assert f"graded {gradebook.shown(name)}: {expected[name]} " in out, (name, out)
    # the gradebook: one row per student, the name shown escaped, a formula
    # neutralised as text, the score the student's own
    rows = list(csv.DictReader(open(tmp_path / "book.csv", newline="")))[1:]
    assert len(rows) == len(expected)
    got = {r["student"]: float(r["total"]) for r in rows}
    want = {gradebook.cell(gradebook.shown(n)): p for n, p in expected.items()}
    assert got == want, (got, want)
    assert "'=cmd|' -c calc'!A0" in got and "\\x1b[2J\\x1b[31mFAKE 23 of 23" in got and "line\\x0abreak" in got
    raw = (tmp_path / "book.csv").read_text(errors="replace")
    assert "\x1b" not in raw and "\n=cmd" not in raw and ",=cmd" not in raw
    assert _private(reports) == [] and _private(tmp_path / "trees") == []


def test_names_are_data(tmp_path):
    subs, expected = _red_team_class(tmp_path)
    proc = subprocess.run([*CLASS, str(subs), "--out", str(tmp_path / "book.csv"), "--stage=1", f"--items={ITEM}"],
                          capture_output=True, text=True, errors="replace", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    _check_red_team(tmp_path, proc, expected)


@pytest.mark.skipif(shutil.which("parallel") is None, reason="needs GNU parallel (make deps-test installs it)")
def test_names_are_data_dispatched(tmp_path):
    """The same class through GNU parallel on this machine (--hosts :): each
    job finds its student by index in reports/students.json, so a newline
    in a name shifts nobody (students.txt, one name a line, did: the student
    after it was never graded)."""
    subs, expected = _red_team_class(tmp_path)
    proc = subprocess.run([*CLASS, str(subs), "--out", str(tmp_path / "book.csv"), "--stage=1", f"--items={ITEM}",
                           "--dispatch=parallel", "--hosts=:"],
                          capture_output=True, text=True, errors="replace", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    _check_red_team(tmp_path, proc, expected)


def test_keys_and_cells():
    names = ["x", "x.meta", "x.json", "x.meta.json", "a\nb", "a_b", "a b", "bob", "bob.zip", "..", ".",
             "", "\udcff", "\udcfe", "=1+1", "-", "é", "e\u0301"]
    keys = [gradebook.key(n) for n in names]
    assert len(set(keys)) == len(names)
    for k in keys:
        assert "/" not in k and not k.startswith(".") and k.isascii() and k.isprintable()
    for bad in ("\x1b[2J", "a\nb", "a\rb", "\u202eevil", "\x00", "\x9b1m", "\udcff"):
        s = gradebook.shown(bad)
        assert s.isprintable() and s.isascii(), (bad, s)
    assert gradebook.shown("a\\x0ab") != gradebook.shown("a\nb")     # the escape cannot be forged
    # OWASP's list: = + - @ tab carriage return (and = + - @ after blanks)
    for c in ("=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1", " =1", "\u00a0=1"):
        assert gradebook.cell(c) == "'" + c, c
    for c in ("alice", "1", "a=b", "'=1"):
        assert gradebook.cell(c) == c


# ---------------------------------------------------------------- the roster

def test_roster(tmp_path):
    r = tmp_path / "r.csv"
    r.write_text("\ufeffID,Email,Folder,Name\ns1,a@x.edu,alice,Alice A\ns2,b@x.edu,bob,Bob B\n\n")
    roster = gradebook.load_roster(r)
    assert [(e.id, e.email, e.folder, e.name) for e in roster] == [("s1", "a@x.edu", "alice", "Alice A"),
                                                                  ("s2", "b@x.edu", "bob", "Bob B")]
    # bob matches bob.zip when there is no folder bob; alice the folder, not alice.zip
    j = gradebook.join(["alice", "alice.zip", "bob.zip", "stray"], roster)
    assert {k: v.id for k, v in j.items()} == {"alice": "s1", "bob.zip": "s2"}
    for text, says in [("id,email\n1,a@x\n", "no folder column"),
                       ("id,email,folder\n1,a@x,f\n1,b@x,g\n", "id 1 is also on line 2"),
                       ("id,email,folder\n1,a@x,f\n2,b@x,f\n", "folder f is also on line 2"),
                       ("id,email,folder\n,a@x,f\n", "must not be empty"), ("", "empty")]:
        r.write_text(text)
        with pytest.raises(gradebook.RosterError, match=says):
            gradebook.load_roster(r)


def test_a_bad_roster_is_one_line(tmp_path):
    """Before any grading: the roster is read first, and what is wrong with
    it is one line (exit status 2)."""
    (tmp_path / "subs" / "alice").mkdir(parents=True)
    roster = tmp_path / "roster.csv"
    roster.write_text("student,mail\nalice,a@x.edu\n")
    proc = subprocess.run([*CLASS, str(tmp_path / "subs"), "--roster", str(roster)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "no id, email, folder column" in proc.stderr and not (tmp_path / "reports").exists()


# ---------------------------------------------------------------- the export checkers
#
# Each rule (gradebook.RULES says where it is documented) as a test case: the
# fixture that meets every rule passes; the same file with one rule broken
# fails with that rule's id, and only that rule.

CANVAS_GOOD = (DATA / "gradebook" / "canvas-good.csv").read_bytes().decode()
GS_GOOD = (DATA / "gradebook" / "gradescope-good.csv").read_bytes().decode()

CANVAS_BROKEN = {
    "csv": CANVAS_GOOD + '"s9,unclosed\r\n',
    "canvas-header": CANVAS_GOOD.replace("Student,ID,", "Name,Number,", 1),
    "canvas-student-columns": CANVAS_GOOD.replace("SIS Login ID,Section", "Login,Group", 1),
    "canvas-assignment": CANVAS_GOOD.replace(",Async lab 01-signal", ",", 1),
    "canvas-points-possible": CANVAS_GOOD.replace("Points Possible,,,,,24", "Points Possible,,,,,many", 1),
    "canvas-identifies": CANVAS_GOOD + ",,,,Section 1,3\r\n",
    "canvas-score": CANVAS_GOOD.replace("Section 1,24", "Section 1,error", 1),
    "no-formula": CANVAS_GOOD.replace('"Roe, Rick"', "=HYPERLINK(1)", 1),
}
GS_BROKEN = {
    "csv": GS_GOOD.encode().replace(b"Rick", b"R\xe9ck"),
    "gradescope-header": GS_GOOD.replace("Name,SID,Email,", "Name,,Mail,", 1),
    "gradescope-email": GS_GOOD.replace("rroe@example.edu", "JDOE@example.edu", 1),
    "gradescope-score": GS_GOOD.replace(",0\r\n", ",not judged\r\n", 1),
    "no-formula": GS_GOOD.replace("Rick Roe", "@SUM(1+1)", 1),
}


def _ids(problems):
    return sorted({rule for rule, _ in problems})


def test_export_rules_are_documented():
    broken = set(CANVAS_BROKEN) | set(GS_BROKEN)
    assert broken == set(gradebook.RULES), "a test case for every rule, a rule for every test case"
    for rule, (what, where) in gradebook.RULES.items():
        assert what and where, rule


def test_canvas_rules(tmp_path):
    f = tmp_path / "c.csv"
    f.write_text(CANVAS_GOOD, newline="")
    assert gradebook.check_canvas(f) == []
    for rule, text in CANVAS_BROKEN.items():
        f.write_bytes(text.encode() if isinstance(text, str) else text)
        assert _ids(gradebook.check_canvas(f)) == [rule], (rule, gradebook.check_canvas(f))


def test_gradescope_rules(tmp_path):
    f = tmp_path / "g.csv"
    f.write_text(GS_GOOD, newline="")
    assert gradebook.check_gradescope(f) == []
    for rule, text in GS_BROKEN.items():
        f.write_bytes(text.encode() if isinstance(text, str) else text)
        assert _ids(gradebook.check_gradescope(f)) == [rule], (rule, gradebook.check_gradescope(f))


def test_exports_written_pass_the_checkers(tmp_path):
    """What write_canvas/write_gradescope make of hostile roster text passes
    (the roster is the instructor's, but names in it come from students)."""
    hostile = [gradebook.Enrolled(id="=1+1", email="a@x.edu", folder="a", name="@evil"),
               gradebook.Enrolled(id="s2", email="b@x.edu", folder="b", name="Roe, \"Rick\"\nJr",
                                  section="-S1", login="+b")]
    gradebook.write_canvas(tmp_path / "c.csv", "=Lab", 24, [(hostile[0], 24), (hostile[1], 0.5)])
    gradebook.write_gradescope(tmp_path / "g.csv", [(hostile[0], 24), (hostile[1], 0.5)])
    assert gradebook.check_canvas(tmp_path / "c.csv") == []
    assert gradebook.check_gradescope(tmp_path / "g.csv") == []
    rows = list(csv.reader(io.StringIO((tmp_path / "c.csv").read_text())))
    assert rows[0][5] == "'=Lab" and rows[2][2] == "'=1+1" and rows[3][4] == "'-S1" and rows[3][5] == "0.5"
    assert stat.S_IMODE(os.stat(tmp_path / "c.csv").st_mode) == 0o600
