#!/usr/bin/env python3
"""Grades solutions/, labs/ and every mutant with one checkout of the lab and
keeps what each report said, so two versions of the grader engine can be
compared: a restructuring must not change a single verdict or word.

    compare_reports.py record --root CHECKOUT --out DIR [--only STAGE[,STAGE...]] [--jobs 2]
    compare_reports.py diff DIR_BEFORE DIR_AFTER

`record` grades, with the engine and the data (rubric, tests, mutants) of
CHECKOUT and a fixed seed:
  solutions        every stage, every item
  labs             every stage, every item (the untouched skeleton)
  <stage>/<mutant> the mutant's stage, on the items it says it catches
With --only 03,07 the mutants are those of stages 03 and 07 and solutions/
and labs/ are graded on those stages only (the stages a change touched).
and writes DIR/<name>.txt (the report, made comparable: timings, run
directories and temporary paths replaced by fixed words) and DIR/<name>.json
(item, status and score of each item of results.json, and the make status).

`diff` compares two such directories and prints every difference; its status
is 0 when the two are identical. With --loose the reports' numbers are not
compared (a test's counts of polls or rounds vary by run); the verdicts in
the .json files always are. A race-lane mutant's "failed on run k of n"
depends on the machine: such lines are compared with the run number removed,
and the diff says how many lines it treated so.
"""
import argparse
import concurrent.futures
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

SEED = "12345"

# things that change from one run to the next and say nothing of the verdict
NOISE = [
    (re.compile(r"\d+(\.\d+)? ?(s|ms|µs)\b"), "<time>"),
    (re.compile(r"/tmp/[^\s:'\")]+"), "<tmp>"),
    (re.compile(r"/work/[^\s:'\")]+?/(grader|common|solutions|labs|build)/"), r"<root>/\1/"),
    (re.compile(r"(failed on run )\d+( of \d+)"), r"\1<k>\2"),
    (re.compile(r"\b0x[0-9a-f]{6,}\b"), "<addr>"),
    (re.compile(r"\bpid \d+|\bthread \d+"), "<id>"),
    (re.compile(r"(round|iteration|rounds?) \d+"), r"\1 <n>"),
    (re.compile(r"\d+ of \d+ items done, \d+ left"), "<progress>"),
    # wordings that changed on purpose when the engine became a pipeline:
    # the student's files are compiled from the grader's copy of them (so a
    # path reads 03-executor/x.c, not solutions/03-executor/x.c), and the
    # sandbox line names the memory limit
    (re.compile(r"\b(?:solutions|labs)/(\d\d-[\w-]+/)"), r"\1"),
    (re.compile(r"^sandbox: .*$", re.M), "sandbox: <what the machine allows>"),
    (re.compile(r"^wrote \S+results\.json$", re.M), "wrote <results.json>"),
]


def normalise(text):
    for pattern, repl in NOISE:
        text = pattern.sub(repl, text)
    return text


def mutants(root):
    for path in sorted((root / "grader" / "mutants").glob("*/*.patch")):
        catches = []
        for line in path.read_text().splitlines():
            if line.startswith(("--- ", "diff ")):
                break
            if line.lower().startswith("catches:"):
                catches += [c.strip() for c in line.split(":", 1)[1].split(",") if c.strip()]
        yield path.parent.name, path.stem, path, catches


def grade(root, target, out, name, stage="", items=()):
    results = out / f"{name.replace('/', '__')}.results.json"
    # make grade's command without its `deps` step (an install running
    # beside it must not turn a report into apt-get's complaint)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--no-header", "--tb=no", "-rN",
           str(root / "grader" / "grade"), f"--target={target}", f"--results={results}", f"--seed={SEED}",
           f"--stage={stage}", f"--items={','.join(items)}"]
    # a mutant's given files are graded as they are (intake.py; the mutants of given code)
    given = {"LAB_GIVEN_FROM_TARGET": "1"} if "/" in name else {}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=root,
                          env=dict(os.environ, NO_COLOR="1", NO_PROGRESS="1", **given), timeout=3600)
    data = json.loads(results.read_text()) if results.exists() else {}
    results.unlink(missing_ok=True)
    summary = {
               "items": {t["number"]: [t["status"], t["score"], t["max_score"]] for t in data.get("tests", [])},
               "score": data.get("score"), "status": proc.returncode}
    base = out / name.replace("/", "__")
    base.with_suffix(".txt").write_text(normalise(proc.stdout + proc.stderr))
    base.with_suffix(".json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    return name


def record(args):
    root = args.root.resolve()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="compare-"))
    only = [o.strip() for o in args.only.split(",") if o.strip()]
    wanted = sorted(p.stem for p in (root / "grader" / "rubric").glob("[0-9][0-9]-*.toml"))
    stages = ",".join(s for s in wanted if any(s.startswith(o) for o in only)) if only else ""
    if only and not stages:
        print(f"compare_reports: --only {args.only}: no stage starts so", file=sys.stderr)
        return 2
    jobs = [("solutions", root / "solutions", stages, ()), ("labs", root / "labs", stages, ())]
    for stage, name, patch, catches in mutants(root):
        if only and not any(stage.startswith(o) for o in only):
            continue
        tree = scratch / stage / name
        shutil.copytree(root / "solutions", tree)
        subprocess.run(["patch", "-s", "-p1", "--batch", "--no-backup-if-mismatch", "-i", str(patch)], cwd=tree,
                       check=True)
        jobs.append((f"{stage}/{name}", tree, stage, catches))
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futs = [pool.submit(grade, root, tree, out, name, stage, items) for name, tree, stage, items in jobs]
        for k, f in enumerate(concurrent.futures.as_completed(futs), 1):
            print(f"[{k}/{len(jobs)}] {f.result()}", flush=True)
    shutil.rmtree(scratch, ignore_errors=True)
    print(f"recorded {len(jobs)} gradings in {time.monotonic() - start:.0f} s into {out}")
    return 0


LOOSE = [
    (re.compile(r"\d+(\.\d+)?"), "N"),   # counts a test measured (polls, rounds, clones) vary by run
]


def diff(args):
    a, b = args.before, args.after
    names = sorted({p.name for p in a.glob("*")} | {p.name for p in b.glob("*")})
    bad = 0
    for n in names:
        pa, pb = a / n, b / n
        if not pa.exists() or not pb.exists():
            print(f"{n}: only in {'after' if not pa.exists() else 'before'}")
            bad += 1
            continue
        ta, tb = pa.read_text(), pb.read_text()
        if args.loose and n.endswith(".txt"):
            for pattern, repl in LOOSE:
                ta, tb = pattern.sub(repl, ta), pattern.sub(repl, tb)
        ta, tb = ta.splitlines(), tb.splitlines()
        if ta != tb:
            bad += 1
            import difflib
            print(f"--- {n}")
            for line in difflib.unified_diff(ta, tb, "before", "after", n=1, lineterm=""):
                print("   " + line)
    print(f"{len(names)} files compared, {bad} differ")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--root", type=pathlib.Path, required=True)
    r.add_argument("--out", type=pathlib.Path, required=True)
    r.add_argument("--only", default="", help="only the stages whose name starts so, comma-separated (e.g. 01 or 03,04): their mutants, "
                   "and solutions/ and labs/ graded on them alone")
    r.add_argument("--jobs", type=int, default=2)
    d = sub.add_parser("diff")
    d.add_argument("before", type=pathlib.Path)
    d.add_argument("after", type=pathlib.Path)
    d.add_argument("--loose", action="store_true", help="reports: every number the same (the .json verdicts stay exact)")
    args = ap.parse_args()
    return record(args) if args.cmd == "record" else diff(args)


if __name__ == "__main__":
    sys.exit(main())
