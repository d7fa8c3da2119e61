"""Writes each stage's table of the checks its tests' bodies reach,
grader/tests/NN-name/sites.json (read by grader/lab_grader/transcript.py).

    python3 grader/authoring/sites.py [--stage 1,2] [--runs 3] [--honest DIR ...] [--hidden DIR]

Grades solutions/ --runs times, every lane, and keeps, for each test that
passed, the checks (file:line) its record named: `required` is what every
run of every lane reached, `also` what some run reached besides. --honest
adds the records of earlier gradings of other honest trees (a build
directory, e.g. build/grade after make test: the passing tests of every
mutant's grading), to `also` only.

Run it after changing a test (a line that moves moves its check), then
`make test`: the reference's grading fails on a stale table. With --hidden
(an instructor's HIDDEN directory), the hidden tests' table goes to
DIR/tests/NN-name/sites.json: a hidden test without one is not checked.
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "grader"))

from lab_grader import rubric, transcript  # noqa: E402


def dumps(build_dir):
    """(stage, {test: [site, ...]}) for every transcript dump under a build
    directory (runs/<tree>/<stage>/<lane>/.../sites.json)."""
    for f in sorted(pathlib.Path(build_dir).glob("runs/*/*/**/" + transcript.TABLE)):
        stage = f.relative_to(pathlib.Path(build_dir) / "runs").parts[1]
        yield stage, json.loads(f.read_text())


def grade_reference(build_dir, stages, hidden):
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(ROOT / "grader" / "grade"),
           f"--target={ROOT / 'solutions'}", f"--build-dir={build_dir}"]
    if stages:
        cmd.append(f"--stage={','.join(stages)}")
    if hidden:
        cmd.append(f"--hidden={hidden}")
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-15:])
        sys.exit(f"sites: the reference does not get full marks here; fix that first:\n{tail}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stage", default="", help="stages (1,2 or 01-signal); default all")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--honest", action="append", default=[], help="a build directory of honest trees' gradings")
    ap.add_argument("--hidden", default="", help="an instructor's hidden items and tests (HIDDEN=dir)")
    a = ap.parse_args()
    names = [s.name for s in rubric.load_all(ROOT / "grader" / "rubric")]
    wanted = set()
    for w in filter(None, a.stage.split(",")):
        match = [n for n in names if n == w or n.split("-")[0] == w.zfill(2)]
        if not match:
            sys.exit(f"sites: no stage {w!r} (stages: {', '.join(names)})")
        wanted.update(match)
    wanted = wanted or set(names)
    # the old tables go first: graded against a stale one (a test edited
    # since), the reference itself would fail
    for stage in wanted:
        (pathlib.Path(a.hidden) if a.hidden else ROOT / "grader").joinpath("tests", stage, transcript.TABLE) \
            .unlink(missing_ok=True)
    required, also = {}, {}
    with tempfile.TemporaryDirectory(prefix="lab-sites-") as tmp:
        for k in range(a.runs):
            build_dir = pathlib.Path(tmp) / str(k)
            grade_reference(build_dir, sorted(wanted), a.hidden)
            for stage, seen in dumps(build_dir):
                for test, sites in seen.items():
                    key = (stage, test)
                    required[key] = required[key] & set(sites) if key in required else set(sites)
                    also.setdefault(key, set()).update(sites)
            print(f"sites: reference run {k + 1} of {a.runs} read", file=sys.stderr)
    for d in a.honest:
        for stage, seen in dumps(d):
            for test, sites in seen.items():
                if (stage, test) in required:
                    also[(stage, test)].update(sites)
    for stage in sorted(wanted):
        # a hidden test's checks are in the hidden directory's files, which
        # the report names from the stage's folder on ("01-signal/x.c:12")
        hidden = {t for (s, t) in required if s == stage and any(x.startswith(stage + "/") for x in also[(s, t)])}
        tests = {t: {"required": sorted(required[(s, t)]), "also": sorted(also[(s, t)] - required[(s, t)])}
                 for (s, t) in sorted(required) if s == stage and (t in hidden) == bool(a.hidden)}
        if not tests:
            continue
        out = (pathlib.Path(a.hidden) if a.hidden else ROOT / "grader") / "tests" / stage / transcript.TABLE
        out.write_text(json.dumps({"about": "the checks each test's body reaches (grader/authoring/sites.py)",
                                   "tests": tests}, indent=1, sort_keys=True) + "\n")
        print(f"sites: {out}: {len(tests)} tests, "
              f"{sum(len(e['required']) for e in tests.values())} required checks")


if __name__ == "__main__":
    main()
