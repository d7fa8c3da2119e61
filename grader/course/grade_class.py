#!/usr/bin/env python3
"""Grade a whole class: every student tree in a folder.

    grade_class.py SUBMISSIONS [--out gradebook.csv] [--jobs 2] [--stage N]
                   [--hidden DIR] [--dispatch threads|slurm|parallel]
                   [--hosts LIST] [--ssh CMD] [--sbatch-args ARGS]

SUBMISSIONS holds one entry per student: a directory (labs/ at the top or
one folder down, stage folders, loose files) or a zip. Each is graded by the
ordinary grader (the same items, lanes and report), `--jobs` at a time; the
full report of each student lands beside the gradebook
(reports/<student>.txt and reports/<student>.json). Where the gradings run
(dispatch.py): threads here (the default), a Slurm job array (one student
per task), or GNU parallel over ssh (--hosts, parallel's --sshlogin list).
Then:

  gradebook.csv   one row per student, one column per stage, the total, the
                  points judged, the points left unjudged, one column per
                  item, and a "points possible" row (a machine too loaded
                  to judge a test gives "not judged": regrade those
                  students; the list is printed at the end)
  a summary       the items most students failed, with how many: the list to
                  read before the next lecture

`grade_class.py one SUBMISSIONS --list FILE --index K ...` grades the K-th
student of FILE alone (what each Slurm task or parallel job runs).
"""
import argparse
import csv
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "grader"))
sys.path.insert(0, str(ROOT / "grader" / "course"))

import dispatch  # noqa: E402
from lab_grader import discover, invocation, rubric  # noqa: E402


def grade_one(student, reports, stage, hidden, trees, items=""):
    """Finds the student's work (discover.py: labs/ at the top or one folder
    down, stage folders, loose files, a zip), then grades it."""
    out_json = reports / f"{student.name}.json"
    out_json.unlink(missing_ok=True)
    tree = trees / student.name
    if tree.exists():
        shutil.rmtree(tree)
    found = discover.find(student, rubric.load_all(ROOT / "grader" / "rubric"), tree)
    (reports / f"{student.name}.found.txt").write_text("\n".join(found.notes + [found.problem or ""]) + "\n")
    if found.problem:
        (reports / f"{student.name}.txt").write_text(found.problem + "\n")
        return student.name, None, 2, 0.0, found.problem
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--no-header", "--tb=no", "-rN",
           str(ROOT / "grader" / "grade"), f"--target={found.tree}", f"--results={out_json}"]
    if stage:
        cmd.append(f"--stage={stage}")
    if hidden:
        cmd.append(f"--hidden={hidden}")
    if items:
        cmd.append(f"--items={items}")
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, NO_COLOR="1"))
    (reports / f"{student.name}.txt").write_text(proc.stdout + proc.stderr)
    data = json.loads(out_json.read_text()) if out_json.exists() else None
    odd = "; ".join(found.notes) if found.shape != "labs" else ""
    return student.name, data, proc.returncode, time.monotonic() - start, odd


def grade_and_record(student, reports, stage, hidden, trees, items=""):
    """grade_one, with what the gradebook needs kept in reports/<name>.meta.json
    (so a grading that ran on another node is read back the same way)."""
    try:
        name, data, rc, secs, why = grade_one(student, reports, stage, hidden, trees, items)
    except Exception as e:  # noqa: BLE001 - one student's odd tree must not stop the class
        name, rc, secs, why = student.name, 2, 0.0, f"the grader failed on this tree: {e}"
    (reports / f"{name}.meta.json").write_text(json.dumps({"rc": rc, "seconds": secs, "why": why}))


def read_back(student, reports):
    """(data, rc, seconds, why) of a student graded by grade_and_record."""
    meta = reports / f"{student.name}.meta.json"
    if not meta.exists():
        return None, 2, 0.0, "its grading never finished (a dispatch task that failed?)"
    m = json.loads(meta.read_text())
    out_json = reports / f"{student.name}.json"
    data = json.loads(out_json.read_text()) if out_json.exists() else None
    return data, m["rc"], m["seconds"], m["why"]


def list_students(subs):
    return sorted(p for p in subs.iterdir() if p.is_dir() or p.suffix == ".zip")


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
    names = a.list.read_text().splitlines()
    if not 0 <= a.index < len(names):
        print(f"grade_class.py one: --index {a.index} is not in 0..{len(names) - 1}", file=sys.stderr)
        return 2
    grade_and_record(a.submissions / names[a.index], a.reports, a.stage, a.hidden, a.trees, a.items)
    return 0


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["one"]:
        return one(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("submissions", type=pathlib.Path)
    ap.add_argument("--out", type=pathlib.Path, default=None, help="default: SUBMISSIONS/../gradebook.csv")
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
        print(f"grade_class.py: SUBMISSIONS={subs}: no such directory", file=sys.stderr)
        return 2
    students = list_students(subs)
    if not students:
        print(f"grade_class.py: {subs} holds no student directory", file=sys.stderr)
        return 2
    try:
        _, stages = invocation.check_stages(ROOT / "grader" / "rubric", args.stage)
        invocation.check_items([i for i in args.items.split(",") if i], stages)
    except invocation.UsageError as e:
        print(f"grade_class.py: {e}", file=sys.stderr)
        return 2
    out = (args.out or subs.parent / "gradebook.csv").resolve()
    reports = out.parent / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    trees = out.parent / "trees"   # each student's work as the grader found it
    for s in students:
        (reports / f"{s.name}.meta.json").unlink(missing_ok=True)
    listing = reports / "students.txt"
    listing.write_text("".join(s.name + "\n" for s in students))
    command = [sys.executable, str(pathlib.Path(__file__).resolve()), "one", str(subs), "--list", str(listing),
               "--reports", str(reports), "--trees", str(trees), f"--stage={args.stage}", f"--hidden={args.hidden}",
               f"--items={args.items}"]

    start = time.monotonic()
    results, reasons = {}, {}

    def done(k):
        data, rc, secs, why = read_back(students[k], reports)
        results[students[k].name], reasons[students[k].name] = data, why
        score = data["score"] if data else "no work found" if why else "error"
        print(f"  graded {students[k].name}: {score} ({secs:.1f} s)" + (f": {why}" if why else ""), flush=True)
    try:
        if args.dispatch == "threads":
            dispatch.threads(len(students), lambda k: grade_and_record(students[k], reports, args.stage,
                                                                        args.hidden, trees, args.items),
                             args.jobs, done)
        elif args.dispatch == "slurm":
            job = dispatch.slurm(len(students), command, args.jobs, reports, args.sbatch_args.split())
            print(f"  Slurm job array {job}: {len(students)} tasks done")
        else:
            dispatch.parallel(len(students), command, args.jobs, args.hosts, args.ssh or None)
    except dispatch.DispatchError as e:
        print(f"grade_class.py: --dispatch {args.dispatch}: {e}", file=sys.stderr)
        return 2
    if args.dispatch != "threads":
        for k in range(len(students)):
            done(k)

    failures = {}
    with open(out, "w", newline="") as fh:
        w = csv.writer(fh)
        items = [i for s in stages for i in s.items]
        w.writerow(["student", *[s.name for s in stages], "total", "max", "not judged", *[i.key for i in items]])
        w.writerow(["points possible", *[f"{s.max_points:g}" for s in stages], f"{sum(s.max_points for s in stages):g}",
                    "", "", *[f"{i.points:g}" for i in items]])
        rerun = []
        for s_dir in students:
            data = results.get(s_dir.name)
            if data is None:
                w.writerow([s_dir.name, *["error"] * len(stages), "error", "", "", *[""] * len(items)])
                rerun.append((s_dir.name, reasons.get(s_dir.name) or "the grader gave no results"))
                continue
            per_stage = {s.name: 0 for s in stages}
            total_max = unjudged = 0
            for t in data["tests"]:
                st = t["number"].split("/")[0]
                per_stage[st] = per_stage.get(st, 0) + t["score"]
                if not t.get("extra_data", {}).get("judged", True):
                    # not judged (a machine too loaded: "too slow to judge";
                    # performance items on one CPU; a quiz left to you)
                    unjudged += t["max_score"]
                    continue
                total_max += t["max_score"]
                if t["status"] != "passed":
                    failures[t["number"]] = failures.get(t["number"], 0) + 1
            per_item = {t["number"]: t for t in data["tests"]}
            cells = [("" if i.key not in per_item else "not judged"
                      if not per_item[i.key].get("extra_data", {}).get("judged", True)
                      else f"{per_item[i.key]['score']:g}") for i in items]
            w.writerow([s_dir.name, *[f"{per_stage[s.name]:g}" for s in stages], f"{data['score']:g}",
                        f"{total_max:g}", f"{unjudged:g}", *cells])
            if unjudged:
                rerun.append((s_dir.name, f"{unjudged:g} points not judged (see reports/{s_dir.name}.txt)"))
    print(f"\nwrote {out} ({len(students)} students, {time.monotonic() - start:.1f} s); reports in {reports}")
    if rerun:
        print("\ngrade these again (on a quieter machine, or alone):")
        for name, why in rerun:
            print(f"  {name}: {why}")
    if failures:
        print("\nmost failed items (students who lost points on it):")
        for key, n in sorted(failures.items(), key=lambda kv: (-kv[1], kv[0]))[:15]:
            print(f"  {n:4d}  {key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
