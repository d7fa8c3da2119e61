#!/usr/bin/env python3
"""GitHub Classroom: the autograding workflow for a student repository, made
from the rubric so the two never drift.

    classroom.py [--stage N] [--out .github/workflows/classroom.yml]
    classroom.py item RESULTS.json STAGE/ITEM     (a step of that workflow)

Classroom's autograder adds up the `max-score` of every step of GitHub's
command grader (education/autograding-command-grader) whose command exits 0,
and its reporter (education/autograding-grading-reporter) sends the total
back. A step is all or nothing, so the workflow grades each stage once
(`make grade STAGE=n RESULTS=...`) and then has one step per rubric item that
reads that stage's results.json: every item keeps its own points, and the
stage is graded once, not once per item.
"""
import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "grader"))

from lab_grader import rubric  # noqa: E402

RESULTS = "build/classroom/{stage}.json"


def step_id(key):
    return key.replace("/", "-").lower()


def workflow(stages):
    """The workflow, as YAML text (written by hand: no YAML writer needed)."""
    lines = [
        "# Made by grader/course/classroom.py from the rubric (make handout writes it);",
        "# edit the rubric, not this file.",
        "name: Autograding",
        '"on":',
        "  - push",
        "  - workflow_dispatch",
        "permissions:",
        "  checks: write",
        "  actions: read",
        "  contents: read",
        "jobs:",
        "  autograding:",
        "    runs-on: ubuntu-latest",
        "    timeout-minutes: 60",
        "    steps:",
        "      - uses: actions/checkout@v4",
        "      - name: Packages (gcc, Criterion, Valgrind, pytest)",
        "        run: sudo sh grader/deps.sh grade",
    ]
    ids = []
    for s in stages:
        out = RESULTS.format(stage=s.name)
        lines += [f"      - name: Grade {s.name}",
                  f"        run: make -s grade STAGE={s.number} RESULTS={out} NO_PROGRESS=1 || true"]
        for item in s.items:
            sid = step_id(item.key)
            ids.append(sid)
            lines += [f"      - name: {item.key}",
                      f"        id: {sid}",
                      "        uses: education/autograding-command-grader@v1",
                      "        with:",
                      f"          test-name: {item.key}",
                      f"          command: python3 grader/course/classroom.py item {out} {item.key}",
                      "          timeout: 1",
                      f"          max-score: {item.points:g}"]
    lines += ["      - name: Autograding Reporter",
              "        uses: education/autograding-grading-reporter@v1",
              "        env:"]
    lines += [f'          {i.upper()}_RESULTS: "${{{{steps.{i}.outputs.result}}}}"' for i in ids]
    lines += ["        with:", f"          runners: {','.join(ids)}"]
    return "\n".join(lines) + "\n"


def item(results, key):
    """Exit 0 when the item passed in the stage's results.json; print what
    the grader said of it either way."""
    try:
        data = json.loads(pathlib.Path(results).read_text())
    except (OSError, ValueError):
        print(f"{key}: the stage's grading left no results ({results}); see the step 'Grade ...' above")
        return 1
    for t in data.get("tests", []):
        if t.get("number") == key:
            print(t.get("output", ""))
            return 0 if t.get("status") == "passed" else 1
    print(f"{key}: not in the stage's results")
    return 1


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "item":
        if len(sys.argv) != 4:
            print("usage: classroom.py item RESULTS.json STAGE/ITEM", file=sys.stderr)
            return 2
        return item(sys.argv[2], sys.argv[3])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stage", default="", help="only these stages (1, 01-signal, 1,2)")
    ap.add_argument("--out", type=pathlib.Path, default=None, help="default: print it")
    args = ap.parse_args()
    try:
        stages = rubric.select(rubric.load_all(ROOT / "grader" / "rubric"), args.stage)
    except rubric.RubricError as e:
        print(f"classroom.py: {e}", file=sys.stderr)
        return 2
    text = workflow(stages)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
