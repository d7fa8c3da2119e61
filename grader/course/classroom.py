#!/usr/bin/env python3
"""GitHub Classroom: one autograding workflow per stage assignment, made from
the rubric so the two never drift.

    classroom.py --stage N [--grader OWNER/REPO@REF] [--out FILE]
                                   stage N's workflow (printed, or written to FILE)
    classroom.py --all DIR [--grader OWNER/REPO@REF]
                                   every stage's, as DIR/NN-name.yml (make handout)
    classroom.py item RESULTS.json STAGE/ITEM
                                   one step of that workflow: exit 0 when the item passed

Classroom makes one repository per assignment, so a workflow grades one
stage: the assignment for stage 03 is the handout with classroom/03-executor.yml
copied to .github/workflows/classroom.yml (docs/instructors.md, "GitHub
Classroom"). There is no workflow for every stage at once: that graded all
seven stages (about 4 minutes) on every push, for points no assignment counts.

What the workflow does, and the source each rule was read from (the versions
pinned below; docs/citations.md, "GitHub Classroom"):

- Two checkouts, side by side in the workspace: the student's repository in
  student/, and the instructor's handout repository at a ref the instructor
  controls (--grader) in lab/. Everything that grades -- the Makefile,
  grader/ (rubric, tests, this file), common/, the reference objects -- comes
  from lab/; from the student's repository only labs/, graded as TARGET. The
  results go to the runner's temporary folder, never into either checkout.
  Neither checkout keeps the job's token in its git config
  (persist-credentials: false), so the student's code, which the grading
  runs, does not find it there.
- One step grades the stage (make grade STAGE=n RESULTS=...), then one step
  per rubric item runs education/autograding-command-grader, whose command
  reads that item's verdict from the results: every item keeps its points,
  and the stage is graded once. The command grader (v1, src/main.js) runs
  `command` with an environment of PATH, HOME, FORCE_COLOR and two DOTNET_
  variables only, so the command carries every path itself; it gives
  parseInt(max-score) when the command exits 0 and 0 otherwise; `timeout` is
  in minutes.
- Quiz items (stage 04) get no step: the answer key is in the handout only
  hashed, for feedback (how many answers of a group are wrong), so no command
  can earn them there. The workflow's total is the stage's
  points less those; the instructor marks the quiz (make grade-class).
- Step ids are the item ids, which start with a letter: GitHub accepts a
  step id only if it starts with a letter or _ (actionlint: "invalid step ID").
- The reporter (education/autograding-grading-reporter v1,
  src/notify-classroom.js) writes "Points x/y" only onto the check run named
  `run-autograding-tests` of the workflow run's check suite, and only when it
  finds exactly one: so the one job has that id and no `name:`. It reads
  each step's result from the environment variable `<STEP ID, upper
  case>_RESULTS` (src/main.js).
- Triggers and the guard are those of the workflow Classroom generated:
  push, workflow_dispatch, repository_dispatch, and no run for pushes by
  github-classroom[bot] (the repository's first commit).
"""
import argparse
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "grader"))

from lab_grader import rubric  # noqa: E402

# Pinned by commit; the tag each commit was when it was read, beside it.
CHECKOUT = "actions/checkout@11d5960a326750d5838078e36cf38b85af677262"   # v4 (v4.4.0)
COMMAND_GRADER = "education/autograding-command-grader@539afcd3109661f349140cc5cee8d8eb5249a036"   # v1
REPORTER = "education/autograding-grading-reporter@a2033d213700508fc3523e303c93c8cc470fdaa6"   # v1
JOB = "run-autograding-tests"   # the check run the reporter looks for
BOT = "github-classroom[bot]"
# What make handout writes when no grader is named: a checkout of it fails,
# visibly, rather than grading with the student's own copy.
PLACEHOLDER = "CHANGE-ME/lab-handout@CHANGE-ME"

STEP_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")   # GitHub's rule for a step id
GRADER = re.compile(r"^([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)@(\S+)$")
LAB, STUDENT = "lab", "student"   # the two checkouts, under the workspace
UNEARNABLE = {"quiz": "the handout has the answer key only hashed, for feedback: the instructor marks it"}


def results_path(stage):
    return "${{ runner.temp }}/lab-results-" + stage.name + ".json"


def step_id(item):
    """The item's id: unique within a stage, and a valid step id."""
    if not STEP_ID.match(item.id):
        raise ValueError(f"{item.key}: '{item.id}' is not a valid GitHub step id (a letter or _ first)")
    return item.id


def gradable(stage):
    """(items a command can earn in CI, [(item, why not)])."""
    keep, left = [], []
    for item in stage.items:
        if item.lane in UNEARNABLE:
            left.append((item, UNEARNABLE[item.lane]))
        else:
            keep.append(item)
    return keep, left


def parse_grader(text):
    m = GRADER.match(text or "")
    if not m:
        raise ValueError(f"--grader '{text}': expected OWNER/REPO@REF (a tag or commit of the handout repository)")
    return m.group(1), m.group(2)


def _q(s):
    """A YAML double-quoted scalar."""
    return json.dumps(s)


def workflow(stage, grader=PLACEHOLDER):
    """Stage's workflow, as YAML text (written by hand: no YAML writer needed)."""
    repo, ref = parse_grader(grader)
    items, left = gradable(stage)
    ids = [step_id(i) for i in items]
    if len({i.upper() for i in ids}) != len(ids):   # the reporter upper-cases them
        raise ValueError(f"{stage.name}: two item ids differ only in case")
    for i in items:
        if i.points != int(i.points):   # the command grader takes parseInt(max-score)
            raise ValueError(f"{i.key}: {i.points} points; the command grader counts whole points only")
    total = sum(int(i.points) for i in items)
    out = results_path(stage)
    lab = "${{ github.workspace }}/" + LAB
    lines = [
        f"# GitHub Classroom autograding for {stage.name}: {total} points.",
        "# Made by grader/course/classroom.py from the rubric (make handout writes one per",
        "# stage in classroom/); edit the rubric, not this file. docs/instructors.md says",
        "# where it goes and what it does and does not prove.",
    ]
    if left:
        lines.append("# Not here (no command can earn them in CI):")
        lines += [f"#   {i.key} ({i.points:g} points): {why}" for i, why in left]
    lines += [
        "name: Autograding Tests",
        '"on":',
        "  push:",
        "  workflow_dispatch:",
        "  repository_dispatch:",
        "permissions:",
        "  checks: write",
        "  actions: read",
        "  contents: read",
        "jobs:",
        f"  {JOB}:",
        "    runs-on: ubuntu-latest",
        f"    if: github.actor != '{BOT}'",
        "    timeout-minutes: 45",
        "    steps:",
        "      - name: Checkout the student's repository",
        f"        uses: {CHECKOUT}",
        "        with:",
        f"          path: {STUDENT}",
        "          persist-credentials: false",
        "      - name: Checkout the grader (the instructor's handout, pinned)",
        f"        uses: {CHECKOUT}",
        "        with:",
        f"          repository: {repo}",
        f"          ref: {_q(ref)}",
        f"          path: {LAB}",
        "          persist-credentials: false",
        # not under sudo: deps.sh calls `sudo -n apt-get` itself (the runner's
        # sudo needs no password), and a stamp or folder it made as root in
        # lab/build would stop the grading, which runs as the runner's user
        "      - name: Packages (gcc, Criterion, Valgrind, pytest)",
        f"        run: sh {LAB}/grader/deps.sh grade",
        f"      - name: Grade {stage.name}",
        "        continue-on-error: true",
        "        timeout-minutes: 30",
        "        run: >-",
        f"          make -s -C {LAB} grade STAGE={stage.number}",
        f'          TARGET="$GITHUB_WORKSPACE/{STUDENT}/labs"',
        f'          RESULTS="$RUNNER_TEMP/lab-results-{stage.name}.json"',
        "          NO_PROGRESS=1",
    ]
    for item, sid in zip(items, ids):
        lines += [f"      - name: {_q(item.key)}",
                  f"        id: {sid}",
                  f"        uses: {COMMAND_GRADER}",
                  "        with:",
                  f"          test-name: {_q(item.key)}",
                  f"          command: {_q(f'python3 {lab}/grader/course/classroom.py item {out} {item.key}')}",
                  "          timeout: 1",
                  f"          max-score: {int(item.points)}"]
    lines += ["      - name: Autograding Reporter",
              f"        uses: {REPORTER}",
              "        env:"]
    lines += [f'          {i.upper()}_RESULTS: "${{{{ steps.{i}.outputs.result }}}}"' for i in ids]
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
    ap.add_argument("--stage", default="", help="the assignment's stage (1, 01 or 01-signal)")
    ap.add_argument("--all", type=pathlib.Path, default=None, metavar="DIR",
                    help="write every stage's workflow as DIR/NN-name.yml")
    ap.add_argument("--grader", default=PLACEHOLDER, metavar="OWNER/REPO@REF",
                    help="the handout repository and the tag or commit to grade with "
                         f"(default: {PLACEHOLDER}, which fails visibly until filled in)")
    ap.add_argument("--out", type=pathlib.Path, default=None, help="with --stage: write it here (default: print it)")
    args = ap.parse_args()
    try:
        parse_grader(args.grader)
        every = rubric.load_all(ROOT / "grader" / "rubric")
        if args.all is not None:
            args.all.mkdir(parents=True, exist_ok=True)
            for s in every:
                (args.all / f"{s.name}.yml").write_text(workflow(s, args.grader))
            return 0
        if not args.stage:
            ap.error("name the assignment's stage (--stage N), or --all DIR: a workflow grades one stage")
        stages = rubric.select(every, args.stage)
        if len(stages) != 1:
            ap.error(f"--stage {args.stage}: one stage per workflow (Classroom makes one repository per assignment)")
        text = workflow(stages[0], args.grader)
    except (rubric.RubricError, ValueError) as e:
        print(f"classroom.py: {e}", file=sys.stderr)
        return 2
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
