#!/usr/bin/env python3
"""Grade a whole class: every student tree in a folder.

    grade_class.py SUBMISSIONS [--out gradebook.csv] [--roster roster.csv]
                   [--jobs 2] [--stage N] [--items a,b] [--hidden DIR]
                   [--canvas-title TITLE]
                   [--dispatch threads|slurm|parallel]
                   [--hosts LIST] [--ssh CMD] [--sbatch-args ARGS]

SUBMISSIONS holds one entry per student: a directory (labs/ at the top or
one folder down, stage folders, loose files) or a zip. Each is graded by the
ordinary grader (the same items, lanes and report), `--jobs` at a time.
Where the gradings run (dispatch.py): threads here (the default), a Slurm
job array (one student per task), or GNU parallel over ssh (--hosts,
parallel's --sshlogin list).

A name is data: a student's files are named by gradebook.key(name) (its
letters and digits and a hash of its bytes), never by the name itself, so
no two students share a file whatever their folders are called; the list
the dispatched jobs read (reports/students.json) holds each name's bytes in
hex; what reaches the terminal or a CSV cell is gradebook.shown(name).
reports/ and trees/ are 0700, their files 0600: one student's work and
grades are not readable by another user of the machine.

Beside the gradebook:

  reports/<key>/  report.txt (the grader's report), results.json, found.txt
                  (how the work was found), meta.json, gradings.log
  trees/<key>/    the student's work as the grader found it
  gradebook.csv   one row per student (and per roster entry): roster id and
                  email, a status and its reason, a number in every score
                  cell (per stage, total, points judged and not judged, per
                  item, hidden items included), and a "points possible" row
  canvas.csv      with a roster: Canvas's gradebook import (one assignment)
  gradescope.csv  with a roster: Gradescope's score upload

A status is one of: graded; not all judged (a machine too loaded to judge
a test: grade them again, the list is printed); nothing submitted (an empty
folder or zip, or a roster student with no entry: a 0, not an error);
no work found (no stage file anywhere: a 0, with what was found); error (the
grading did not finish: grade again). The exports leave out the students to
grade again (error, not all judged): a score there is final.

`grade_class.py one SUBMISSIONS --list FILE --index K ...` grades the K-th
student of FILE alone (what each Slurm task or parallel job runs).
"""
import argparse
import csv
import dataclasses
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "grader"))
sys.path.insert(0, str(ROOT / "grader" / "course"))

import dispatch  # noqa: E402
import gradebook  # noqa: E402
from gradebook import shown  # noqa: E402
from lab_grader import discover, arguments, rubric  # noqa: E402

GRADED, PARTLY, NOTHING, NO_WORK, ERROR = "graded", "not all judged", "nothing submitted", "no work found", "error"


@dataclasses.dataclass
class Student:
    name: str                  # the entry's name in SUBMISSIONS ("" for a roster student with none)
    path: pathlib.Path = None  # None: on the roster, nothing in SUBMISSIONS
    enrolled: gradebook.Enrolled = None

    @property
    def key(self):
        return gradebook.key(self.name if self.path is not None else "roster:" + self.enrolled.folder)

    @property
    def label(self):
        """The name to show (terminal, CSV): escaped, never raw."""
        return shown(self.name if self.path is not None else self.enrolled.folder)


# ---------------------------------------------------------------- private files

def private_dir(path):
    path = pathlib.Path(path)
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


def write_private(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as fh:
        fh.write(text)
    os.chmod(path, 0o600)


def lock_down(top):
    """Every folder under top 0700, every file 0600 (links left alone)."""
    for dirpath, dirnames, filenames in os.walk(top):
        os.chmod(dirpath, 0o700)
        for f in filenames:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p):
                os.chmod(p, 0o600)


def is_empty(path):
    """Nothing submitted: a folder with no file anywhere in it, or a zip
    with no file member (a zero-byte .zip too). A zip that cannot be read
    is not empty: the grader says what is wrong with it."""
    if path.is_dir() and not path.is_symlink():
        for _, _, files in os.walk(path):
            if files:
                return False
        return True
    if path.is_file() and path.suffix.lower() == ".zip":
        if path.stat().st_size == 0:
            return True
        try:
            with zipfile.ZipFile(path) as z:
                return not any(not n.endswith("/") for n in z.namelist())
        except (zipfile.BadZipFile, OSError):
            return False
    return False


# ---------------------------------------------------------------- one student

def grade_one(student, reports, stage, hidden, trees, items=""):
    """(status, rc, why): finds the student's work (discover.py: labs/ at the
    top or one folder down, stage folders, loose files, a zip), then grades it."""
    d = reports / student.key
    out_json = d / "results.json"
    out_json.unlink(missing_ok=True)
    if is_empty(student.path):
        write_private(d / "report.txt", f"nothing submitted: {student.label} is empty\n")
        return NOTHING, 0, f"the submission is empty ({'a zip with no file' if student.path.is_file() else 'a folder with no file'})"
    tree = trees / student.key
    if tree.exists():
        shutil.rmtree(tree)
    private_dir(trees)
    found = discover.find(student.path, rubric.load_all(ROOT / "grader" / "rubric"), tree)
    write_private(d / "found.txt", "\n".join(found.notes + [found.problem or ""]) + "\n")
    if found.problem:
        shutil.rmtree(tree, ignore_errors=True)     # discover left it empty
        write_private(d / "report.txt", found.problem + "\n")
        return NO_WORK, 2, found.problem
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--no-header", "--tb=no", "-rN",
           str(ROOT / "grader" / "grade"), f"--target={found.tree}", f"--results={out_json}"]
    if stage:
        cmd.append(f"--stage={stage}")
    if hidden:
        cmd.append(f"--hidden={hidden}")
    if items:
        cmd.append(f"--items={items}")
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, NO_COLOR="1"))
    write_private(d / "report.txt", proc.stdout + proc.stderr)
    lock_down(tree)
    if not out_json.exists():
        return ERROR, proc.returncode, f"the grader wrote no results (exit status {proc.returncode}; see the report)"
    os.chmod(out_json, 0o600)
    odd = "; ".join(found.notes) if found.shape != "labs" else ""
    return GRADED, proc.returncode, odd


def grade_and_record(student, reports, stage, hidden, trees, items=""):
    """grade_one, with what the gradebook needs kept in reports/<key>/meta.json
    (so a grading that ran on another node is read back the same way), and
    one line in reports/<key>/gradings.log per grading."""
    d = private_dir(reports / student.key)
    (d / "meta.json").unlink(missing_ok=True)
    fd = os.open(d / "gradings.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "a") as fh:
        fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {os.uname().nodename} pid {os.getpid()}\n")
    start = time.monotonic()
    try:
        status, rc, why = grade_one(student, reports, stage, hidden, trees, items)
    except Exception as e:  # noqa: BLE001 - one student's odd tree must not stop the class
        status, rc, why = ERROR, 2, f"the grader failed on this tree: {e}"
    meta = {"name_hex": gradebook.name_bytes(student.name).hex(), "key": student.key, "status": status,
            "rc": rc, "seconds": time.monotonic() - start, "why": why}
    write_private(d / "meta.json", json.dumps(meta))


def read_back(student, reports):
    """(status, data, seconds, why) of a student graded by grade_and_record."""
    d = reports / student.key
    try:
        m = json.loads((d / "meta.json").read_text())
    except (OSError, ValueError):
        return ERROR, None, 0.0, "its grading never finished (a dispatch task that failed?)"
    if m.get("name_hex") != gradebook.name_bytes(student.name).hex():
        return ERROR, None, 0.0, "its record names another student (reports/ written by another run?)"
    data = None
    if m["status"] == GRADED:
        try:
            data = json.loads((d / "results.json").read_text())
        except (OSError, ValueError):
            return ERROR, None, m["seconds"], "its results.json is missing or unreadable"
    return m["status"], data, m["seconds"], m["why"]


# ---------------------------------------------------------------- the class

def list_students(subs):
    """Every folder or .zip in subs, sorted by the bytes of its name."""
    return sorted((p for p in subs.iterdir() if p.is_dir() or p.suffix.lower() == ".zip"),
                  key=lambda p: gradebook.name_bytes(p.name))


def write_listing(path, students):
    """The list the dispatched jobs read: index K is students[K]; names as
    the hex of their bytes, so any byte (newline, NUL-free or not) is safe."""
    write_private(path, json.dumps({"students": [{"key": s.key, "name_hex": gradebook.name_bytes(s.name).hex()}
                                                 for s in students]}, indent=1) + "\n")


def read_listing(path):
    return [os.fsdecode(bytes.fromhex(s["name_hex"])) for s in json.loads(pathlib.Path(path).read_text())["students"]]


def one(argv):
    """`one SUBMISSIONS --list FILE --index K --reports R --trees T [--stage] [--hidden]`"""
    ap = argparse.ArgumentParser(prog="grade_class.py one")
    ap.add_argument("submissions", type=pathlib.Path)
    ap.add_argument("--list", type=pathlib.Path, required=True)
    ap.add_argument("--index", type=int, required=True)
    ap.add_argument("--reports", type=pathlib.Path, required=True)
    ap.add_argument("--trees", type=pathlib.Path, required=True)
    ap.add_argument("--stage", default="")
    ap.add_argument("--hidden", default="")
    ap.add_argument("--items", default="")
    a = ap.parse_args(argv)
    names = read_listing(a.list)
    if not 0 <= a.index < len(names):
        print(f"grade_class.py one: --index {a.index} is not in 0..{len(names) - 1}", file=sys.stderr)
        return 2
    name = names[a.index]
    if not name or "/" in name or name in (".", ".."):     # not an entry of a folder: a listing not ours
        print(f"grade_class.py one: entry {a.index} of {shown(str(a.list))} is not a folder's name", file=sys.stderr)
        return 2
    grade_and_record(Student(name, a.submissions / name), a.reports, a.stage, a.hidden, a.trees, a.items)
    return 0


def review_of(data):
    """What the grader put before the instructor (the results' hidden
    "NN/review" entries, gate.review): one line, "" when nothing."""
    if not data:
        return ""
    return "; ".join(f"{t['number'].split('/')[0]}: " + "; ".join(t.get("output", "").splitlines())
                     for t in data.get("tests", []) if t.get("number", "").endswith("/review"))


def score_row(student, status, data, why, stages, items):
    """The gradebook's numbers for one student: (per stage, total, judged,
    not judged, per item, reason)."""
    per_stage = {s.name: 0.0 for s in stages}
    per_item = {i.key: 0.0 for i in items}
    judged = unjudged = 0.0
    reason = why or ""
    failed = []
    if data is not None:
        left = []
        for t in data.get("tests", []):
            st = t["number"].split("/")[0]
            per_stage[st] = per_stage.get(st, 0.0) + t["score"]
            if t["number"] in per_item:
                per_item[t["number"]] = t["score"]
            if not t.get("extra_data", {}).get("judged", True):
                unjudged += t["max_score"]
                left.append(t["number"])
                continue
            judged += t["max_score"]
            if t["status"] != "passed":
                failed.append(t["number"])
        if left:
            status = PARTLY
            reason = f"{unjudged:g} points not judged ({', '.join(left)}): grade again" + (f"; {why}" if why else "")
        elif not data.get("tests"):
            reason = "; ".join(x for x in [data.get("output", "").splitlines()[0] if data.get("output") else "",
                                            why] if x)
    total = data["score"] if data is not None else 0.0
    return status, per_stage, total, judged, unjudged, per_item, reason, failed


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["one"]:
        return one(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("submissions", type=pathlib.Path)
    ap.add_argument("--out", type=pathlib.Path, default=None, help="default: SUBMISSIONS/../gradebook.csv")
    ap.add_argument("--roster", default=os.environ.get("ROSTER", ""),
                    help="a CSV with id,email,folder (and optionally name,login,section,canvas_id); "
                         "default: $ROSTER (make grade-class ROSTER=...)")
    ap.add_argument("--canvas-title", default=os.environ.get("CANVAS_TITLE", ""),
                    help="the Canvas assignment's column: a title, or 'Title (id)' for an existing one")
    ap.add_argument("--jobs", type=int, default=2, help="gradings at once (per host, with --dispatch parallel)")
    ap.add_argument("--stage", default="")
    ap.add_argument("--hidden", default="", help="the instructor's hidden items and tests")
    ap.add_argument("--items", default="", help="only these items (make grade's ITEMS=): a regrade of one item")
    ap.add_argument("--dispatch", choices=("threads", "slurm", "parallel"), default="threads")
    ap.add_argument("--hosts", default=":", help="--dispatch parallel: its --sshlogin list (':' is this machine)")
    ap.add_argument("--ssh", default="", help="--dispatch parallel: the ssh command (parallel's --ssh)")
    ap.add_argument("--sbatch-args", default="", help="--dispatch slurm: more sbatch options (e.g. --partition=x)")
    args = ap.parse_args(argv)
    subs = args.submissions.resolve()
    if not subs.is_dir():
        print(f"grade_class.py: SUBMISSIONS={shown(str(subs))}: no such directory", file=sys.stderr)
        return 2
    entries = list_students(subs)
    try:
        every, stages = arguments.check_stages(ROOT / "grader" / "rubric", args.stage, args.hidden or None)
        chosen = arguments.check_items([i for i in args.items.split(",") if i], stages)
        roster = gradebook.load_roster(args.roster) if args.roster else None
    except (arguments.UsageError, gradebook.RosterError) as e:
        print(f"grade_class.py: {e}", file=sys.stderr)
        return 2
    students = [Student(p.name, p) for p in entries]
    if roster is not None:
        joined = gradebook.join([s.name for s in students], roster)
        for s in students:
            s.enrolled = joined.get(s.name)
        have = {id(e) for e in joined.values()}
        students += [Student("", None, e) for e in sorted(roster, key=lambda e: e.folder) if id(e) not in have]
    if not students:
        print(f"grade_class.py: {shown(str(subs))} holds no student directory or zip", file=sys.stderr)
        return 2
    keys = {}
    for s in students:
        if s.key in keys:   # 40 bits of SHA-256 alike: never seen, but never silently merged
            print(f"grade_class.py: {s.label} and {keys[s.key].label} would share the report folder {s.key}",
                  file=sys.stderr)
            return 2
        keys[s.key] = s

    out = (args.out or subs.parent / "gradebook.csv").resolve()
    reports = private_dir(out.parent / "reports")
    trees = private_dir(out.parent / "trees")   # each student's work as the grader found it
    to_grade = [s for s in students if s.path is not None]
    for s in to_grade:
        d = reports / s.key
        for f in ("meta.json", "gradings.log"):
            (d / f).unlink(missing_ok=True)
    listing = reports / "students.json"
    write_listing(listing, to_grade)
    command = [sys.executable, str(pathlib.Path(__file__).resolve()), "one", str(subs), "--list", str(listing),
               "--reports", str(reports), "--trees", str(trees), f"--stage={args.stage}", f"--hidden={args.hidden}",
               f"--items={args.items}"]

    start = time.monotonic()
    results = {}

    def done(k):
        s = to_grade[k]
        status, data, secs, why = read_back(s, reports)
        results[s.key] = (status, data, why)
        score = f"{data['score']:g}" if data else status
        print(f"  graded {s.label}: {score} ({secs:.1f} s)" + (f": {shown(why)}" if why else ""), flush=True)
    try:
        if args.dispatch == "threads":
            dispatch.threads(len(to_grade), lambda k: grade_and_record(to_grade[k], reports, args.stage,
                                                                       args.hidden, trees, args.items),
                             args.jobs, done)
        elif args.dispatch == "slurm":
            job = dispatch.slurm(len(to_grade), command, args.jobs, reports, args.sbatch_args.split())
            print(f"  Slurm job array {job}: {len(to_grade)} tasks done")
        else:
            dispatch.parallel(len(to_grade), command, args.jobs, args.hosts, args.ssh or None)
    except dispatch.DispatchError as e:
        print(f"grade_class.py: --dispatch {args.dispatch}: {e}", file=sys.stderr)
        return 2
    if args.dispatch != "threads":
        for k in range(len(to_grade)):
            done(k)

    items = [i for s in stages for i in s.items if not chosen or i.id in chosen or i.key in chosen]
    possible = {s.name: sum(i.points for i in items if i.stage == s.name) for s in stages}
    total_possible = sum(possible.values())
    failures, rerun, zeroes, scored = {}, [], [], []
    rows = [["student", "id", "email", "status", "reason", *[s.name for s in stages], "total", "points judged",
             "points not judged", "report", "review", *[i.key for i in items]],
            ["points possible", "", "", "", "", *[gradebook.number(possible[s.name]) for s in stages],
             gradebook.number(total_possible), "", "", "", "", *[gradebook.number(i.points) for i in items]]]
    for s in students:
        if s.path is None:
            status, data, why = NOTHING, None, "no folder or zip of this name in SUBMISSIONS"
        else:
            status, data, why = results.get(s.key, (ERROR, None, "not graded"))
        status, per_stage, total, judged, unjudged, per_item, reason, failed = score_row(s, status, data, why,
                                                                                         stages, items)
        for key in failed:
            failures[key] = failures.get(key, 0) + 1
        if status in (ERROR, PARTLY):
            rerun.append((s, reason))
        elif status in (NOTHING, NO_WORK):
            zeroes.append((s, status, reason))
        if s.enrolled is not None and status not in (ERROR, PARTLY):
            scored.append((s.enrolled, total))
        e = s.enrolled
        rows.append([gradebook.cell(s.label), gradebook.cell(e.id if e else ""), gradebook.cell(e.email if e else ""),
                     status, gradebook.cell(shown(reason)), *[gradebook.number(per_stage[st.name]) for st in stages],
                     gradebook.number(total), gradebook.number(judged), gradebook.number(unjudged),
                     f"reports/{s.key}/report.txt" if s.path is not None else "",
                     gradebook.cell(shown(review_of(data))),
                     *[gradebook.number(per_item[i.key]) for i in items]])
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    write_private(out, buf.getvalue())
    print(f"\nwrote {shown(str(out))} ({len(students)} students, {time.monotonic() - start:.1f} s); "
          f"reports in {shown(str(reports))}")
    if roster is not None:
        title = args.canvas_title or f"Async lab {'+'.join(s.name for s in stages)}"
        gradebook.write_canvas(out.parent / "canvas.csv", title, total_possible, scored)
        gradebook.write_gradescope(out.parent / "gradescope.csv", scored)
        print(f"wrote canvas.csv (Canvas: Grades > Import) and gradescope.csv (Gradescope: the assignment's "
              f"upload scores) beside it: {len(scored)} of {len(roster)} roster students")
        strays = [s for s in students if s.path is not None and s.enrolled is None]
        if strays:
            print("\nnot on the roster (in gradebook.csv, not in the exports):")
            for s in strays:
                print(f"  {s.label}")
    if zeroes:
        print("\nscored 0 (not an error, nothing to grade again):")
        for s, status, why in zeroes:
            print(f"  {s.label}: {status}: {shown(why)}")
    if rerun:
        print("\ngrade these again (on a quieter machine, or alone)" +
              (", left out of the exports until then" if roster is not None else "") + ":")
        for s, why in rerun:
            print(f"  {s.label}: {shown(why)}")
    if failures:
        print("\nmost failed items (students who lost points on it):")
        for key, n in sorted(failures.items(), key=lambda kv: (-kv[1], kv[0]))[:15]:
            print(f"  {n:4d}  {key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
