#!/usr/bin/env python3
"""Write a Gradescope autograder zip.

    autograder.py [--out build/autograder.zip]

The zip holds the student handout (make handout: no solutions, no mutants,
no answer keys; reference objects for decoupled grading) plus Gradescope's two
entry points at its root:

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

SETUP = """#!/bin/sh
# Gradescope runs this once, as root, when the autograder image is built.
set -e
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q make gcc binutils patch libcriterion-dev valgrind python3 python3-pytest python3-jsonschema
python3 -c 'import tomllib' 2>/dev/null || apt-get install -y -q python3-tomli
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
# the work wherever it is: labs/ at the top or one folder down (a repository
# downloaded as a zip), stage folders, loose files, a zip
if ! python3 grader/course/find_work.py "$AG/submission" "$TREE" > "$AG/results/found.txt" 2>&1; then
    (cd grader && python3 -m lab_grader.results_json fallback "$AG/results/results.json" \
        "Your submission holds no work of this lab's stages. $(tail -n 1 "$AG/results/found.txt")")
    cat "$AG/results/found.txt"
    exit 0
fi
make -s grade TARGET="$TREE" RESULTS="$AG/results/results.json" > "$AG/results/grade.txt" 2>&1
status=$?
if [ ! -s "$AG/results/results.json" ]; then
    (cd grader && python3 -m lab_grader.results_json fallback "$AG/results/results.json" \
        "The grader could not run (status $status)." "$AG/results/grade.txt")
fi
cat "$AG/results/found.txt"
cat "$AG/results/grade.txt"
exit 0
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "build" / "autograder.zip")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tree = pathlib.Path(tmp) / "source"
        proc = subprocess.run([sys.executable, str(ROOT / "grader" / "course" / "handout.py"), "--out", str(tree)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stdout + proc.stderr, file=sys.stderr)
            return 1
        for name, text in (("setup.sh", SETUP), ("run_autograder", RUN)):
            p = tree / name
            p.write_text(text)
            p.chmod(0o755)
        out = args.out.resolve()
        out.parent.mkdir(parents=True, exist_ok=True)
        base = str(out)[:-4] if str(out).endswith(".zip") else str(out)
        shutil.make_archive(base, "zip", tree)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
