#!/usr/bin/env python3
"""Write a Gradescope autograder zip.

    autograder.py [--out build/autograder.zip]

The zip holds the student handout (make handout: no solutions, no mutants,
no answer keys; reference objects for decoupled grading), the tables of the
checks each test reaches (grader/tests/NN-name/sites.json, which the handout
leaves out), plus Gradescope's two entry points at its root:

  setup.sh         installs the distribution packages the grader needs
                   (Gradescope's images are Ubuntu; the grader uses only
                   Criterion's --list, --filter and --xml, but has been run
                   on Criterion 2.4.1 only)
  run_autograder   grades /autograder/submission (the student's labs/ tree,
                   or a tree that contains labs/) and writes
                   /autograder/results/results.json

AUTOGRADER_ROOT (default /autograder) lets the self-test run it anywhere.
"""
import argparse
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "grader"))

from lab_grader import rubric  # noqa: E402

SETUP = """#!/bin/sh
# Gradescope runs this once, as root, when the autograder image is built.
set -e
export DEBIAN_FRONTEND=noninteractive
PACKAGES="make gcc binutils patch libcriterion-dev liburing-dev valgrind python3 python3-pytest python3-jsonschema"
# an image that has them all already (a rebuilt one, a simulation) skips apt
missing=""
for p in $PACKAGES; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    apt-get update -q
    apt-get install -y -q $PACKAGES
fi
python3 -c 'import tomllib' 2>/dev/null || { apt-get update -q; apt-get install -y -q python3-tomli; }
# Warm the build cache once, here, for every submission: common/ and the
# tests compile now, not in each cold container, which then compiles only
# the student's files (docs/instructors.md, "What grading costs": cold and
# warm gradings measured at 0.5 and 1 CPU). Grading the skeleton does it;
# a failure here costs nothing but the head start (build/setup-warmup.log).
cd "$(dirname "$0")"
STAGE=""; [ -f autograder.env ] && . ./autograder.env
mkdir -p build
make -s grade TARGET=labs STAGE="$STAGE" NO_PROGRESS=1 >build/setup-warmup.log 2>&1 || true
"""

RUN = """#!/bin/sh
# Gradescope runs this for every submission. It grades the submission with
# the handout's grader and writes results.json; whatever happens, a
# results.json exists at the end, so Gradescope never shows a bare failure.
AG="${AUTOGRADER_ROOT:-/autograder}"
SRC="$AG/source"
TREE="$SRC/submission-tree"
mkdir -p "$AG/results"
rm -rf "$TREE"
cd "$SRC" || exit 1
# the assignment's stages and hidden tests, as make autograder baked them
STAGE=""; HIDDEN=""; BUDGET=540   # Gradescope stops an autograder at 10 minutes by default
UNJUDGED=omit   # an item this machine cannot judge counts 0 of 0 (make autograder UNJUDGED=zero: 0 of its points)
[ -f "$SRC/autograder.env" ] && . "$SRC/autograder.env"
# the work wherever it is: labs/ at the top or one folder down (a repository
# downloaded as a zip), stage folders, loose files, a zip
if ! python3 grader/course/find_work.py "$AG/submission" "$TREE" "$STAGE" > "$AG/results/found.txt" 2>&1; then
    (cd grader && python3 -m lab_grader.results_json nowork "$AG/results/results.json" \
        "$(tail -n 1 "$AG/results/found.txt")")
    cat "$AG/results/found.txt"
    exit 0
fi
# the rerun lines a student reads name their own labs/, not this folder
export LAB_RERUN_TARGET=""
make -s grade TARGET="$TREE" STAGE="$STAGE" BUDGET="$BUDGET" UNJUDGED="$UNJUDGED" ${HIDDEN:+HIDDEN="$SRC/$HIDDEN"} RESULTS="$AG/results/results.json" \
    > "$AG/results/grade.txt" 2>&1
status=$?
if [ ! -s "$AG/results/results.json" ]; then
    (cd grader && python3 -m lab_grader.results_json fallback "$AG/results/results.json" \
        "The grader could not run (status $status)." "$AG/results/grade.txt")
else
    # what happened to each uploaded file, where the student sees it (stdout is the instructor's)
    (cd grader && python3 -m lab_grader.results_json annotate "$AG/results/results.json" "$AG/results/found.txt")
fi
cat "$AG/results/found.txt"
cat "$AG/results/grade.txt"
exit 0
"""


def stage_points(stages):
    """(automatic, quiz, hidden) points of an assignment of these stages:
    what results.json can give, what the instructor marks (the quiz), and
    what hidden items add. docs/instructors.md's Gradescope table is this
    per stage (test_autograder.py checks it)."""
    auto = sum(i.points for s in stages for i in s.items if i.lane != "quiz" and not i.hidden)
    quiz = sum(i.points for s in stages for i in s.items if i.lane == "quiz")
    hid = sum(i.points for s in stages for i in s.items if i.hidden)
    return auto, quiz, hid


def points_table(stages, hidden):
    """What the instructor sets as the assignment's total in Gradescope."""
    auto, quiz, hid = stage_points(stages)
    lines = [f"stages: {', '.join(s.name for s in stages)}",
             f"  automatic points (results.json):           {auto:g}"]
    if hid:
        lines.append(f"  hidden tests (shown once grades are out): {hid:g}")
    if quiz:
        lines.append(f"  quiz (the key is not in the zip: yours):  {quiz:g}")
    lines.append(f"set the assignment's total to {auto + hid:g} for the autograder" +
                 (f", plus {quiz:g} marked by hand" if quiz else ""))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=pathlib.Path, default=None,
                    help="default build/autograder.zip (build/autograder-stage-N.zip with --stage)")
    ap.add_argument("--stage", default="", help="the assignment's stages (1, 01-signal, 1,2); default all")
    ap.add_argument("--hidden", default="", help="the instructor's hidden items and tests (dir/rubric, dir/tests)")
    ap.add_argument("--unjudged", choices=("omit", "zero"), default="omit",
                    help="an item the machine cannot judge (a timing item on one CPU): 'omit' counts it 0 of 0 and "
                         "says so in one line (the default: no regrade requests for what the platform cannot "
                         "measure), 'zero' counts it 0 of its points until regraded")
    ap.add_argument("--budget", type=float, default=540,
                    help="seconds the grading may take (Gradescope's default limit is 600); past it, items left are "
                         "not judged and results.json holds everything done")
    args = ap.parse_args()
    try:
        if args.hidden and not pathlib.Path(args.hidden).is_dir():
            raise rubric.RubricError(f"HIDDEN={args.hidden}: no such directory")
        stages = rubric.select(rubric.load_all(ROOT / "grader" / "rubric", args.hidden or None), args.stage)
    except rubric.RubricError as e:
        print(f"autograder.py: {e}", file=sys.stderr)
        return 2
    out = args.out or ROOT / "build" / (f"autograder-stage-{args.stage.replace(',', '-')}.zip" if args.stage
                                        else "autograder.zip")
    with tempfile.TemporaryDirectory() as tmp:
        tree = pathlib.Path(tmp) / "source"
        proc = subprocess.run([sys.executable, str(ROOT / "grader" / "course" / "handout.py"), "--out", str(tree)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stdout + proc.stderr, file=sys.stderr)
            return 1
        # the tables of the checks each test reaches, which the handout
        # leaves out (handout.py): Gradescope's grading checks transcripts
        for table in sorted((ROOT / "grader" / "tests").glob("*/sites.json")):
            shutil.copyfile(table, tree / "grader" / "tests" / table.parent.name / table.name)
        for name, text in (("setup.sh", SETUP), ("run_autograder", RUN)):
            p = tree / name
            p.write_text(text)
            p.chmod(0o755)
        env = [f"STAGE={','.join(s.name for s in stages) if args.stage else ''}", f"BUDGET={args.budget:g}",
               f"UNJUDGED={args.unjudged}"]
        if args.hidden:
            for part in ("rubric", "tests"):
                if (pathlib.Path(args.hidden) / part).is_dir():
                    shutil.copytree(pathlib.Path(args.hidden) / part, tree / "hidden" / part)
            env.append("HIDDEN=hidden")
        (tree / "autograder.env").write_text("\n".join(env) + "\n")
        out = out.resolve()
        out.parent.mkdir(parents=True, exist_ok=True)
        base = str(out)[:-4] if str(out).endswith(".zip") else str(out)
        shutil.make_archive(base, "zip", tree)
    print(f"wrote {out}")
    print(points_table(stages, args.hidden))
    return 0


if __name__ == "__main__":
    sys.exit(main())
