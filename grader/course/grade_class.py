#!/usr/bin/env python3
"""Grade a whole class: every student tree in a folder.

    grade_class.py SUBMISSIONS [--out gradebook.csv] [--jobs 2] [--stage N]

SUBMISSIONS holds one directory per student, each shaped like labs/. Each is
graded by the ordinary grader (the same items, lanes and report), two at a
time by default; the full report of each student lands beside the gradebook
(reports/<student>.txt and reports/<student>.json). Then:

  gradebook.csv   one row per student, one column per stage, the total, the
                  points judged, and the points left unjudged (a machine too
                  loaded to judge a test gives "too slow to judge": regrade
                  those students; the list is printed at the end)
  a summary       the items most students failed, with how many: the list to
                  read before the next lecture
"""
import argparse
import concurrent.futures
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

from lab_grader import discover, rubric  # noqa: E402


def grade_one(student, reports, stage, hidden, trees):
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
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, NO_COLOR="1"))
    (reports / f"{student.name}.txt").write_text(proc.stdout + proc.stderr)
    data = json.loads(out_json.read_text()) if out_json.exists() else None
    odd = "; ".join(found.notes) if found.shape != "labs" else ""
    return student.name, data, proc.returncode, time.monotonic() - start, odd


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("submissions", type=pathlib.Path)
    ap.add_argument("--out", type=pathlib.Path, default=None, help="default: SUBMISSIONS/../gradebook.csv")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--stage", default="")
    ap.add_argument("--hidden", default="", help="the instructor's hidden items and tests")
    args = ap.parse_args()
    subs = args.submissions.resolve()
    if not subs.is_dir():
        print(f"grade_class.py: SUBMISSIONS={subs}: no such directory", file=sys.stderr)
        return 2
    students = sorted(p for p in subs.iterdir() if p.is_dir() or p.suffix == ".zip")
    if not students:
        print(f"grade_class.py: {subs} holds no student directory", file=sys.stderr)
        return 2
    stages = rubric.select(rubric.load_all(ROOT / "grader" / "rubric"), args.stage)
    out = (args.out or subs.parent / "gradebook.csv").resolve()
    reports = out.parent / "reports"
    reports.mkdir(parents=True, exist_ok=True)

    start = time.monotonic()
    results, reasons = {}, {}
    trees = out.parent / "trees"   # each student's work as the grader found it
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(grade_one, s, reports, args.stage, args.hidden, trees) for s in students]
        for f in concurrent.futures.as_completed(futures):
            name, data, rc, secs, why = f.result()
            results[name] = data
            reasons[name] = why
            score = data["score"] if data else "no work found" if why else "error"
            print(f"  graded {name}: {score} ({secs:.1f} s)" + (f": {why}" if why else ""), flush=True)

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
