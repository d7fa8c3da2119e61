"""The handout carries what a student needs and none of the answers, and its
grader works without solutions/ (on the shipped reference objects)."""
import os
import re
import shutil
import signal
import subprocess
import sys
import threading

import pytest

from conftest import GRADER, ROOT, apply_mutant, every_lane, mutants, stages


@pytest.fixture(scope="module")
def handout(tmp_path_factory):
    out = tmp_path_factory.mktemp("h") / "handout"
    proc = subprocess.run([sys.executable, str(GRADER / "course" / "handout.py"), "--out", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return out


def test_handout(tmp_path, handout):
    out = handout
    assert not (out / "solutions").exists()
    assert not (out / "grader" / "mutants").exists()
    assert not (out / "grader" / "selftest").exists()
    leaked = [str(p.relative_to(out)) for p in out.rglob("*")
              if p.is_file() and p.suffix in (".c", ".h") and "BEGIN STUDENT" in p.read_text(errors="replace")]
    assert not leaked, f"solution markers in the handout: {leaked}"
    answers = [str(p.relative_to(out)) for p in out.rglob("ANSWERS*")]
    assert not answers, f"answer keys in the handout: {answers}"
    tables = [str(p.relative_to(out)) for p in out.rglob("sites.json")]
    assert not tables, f"the transcripts' tables in the handout: {tables}"

    # a student who finished stage N but not the stages before it
    later = [s for s in stages() if s.uses][0]
    tree = tmp_path / "student"
    shutil.copytree(out / "labs", tree)
    shutil.rmtree(tree / later.name)
    shutil.copytree(ROOT / "solutions" / later.name, tree / later.name)
    items = ",".join(i.key for i in every_lane(later))   # each lane, on the shipped reference objects
    proc = subprocess.run(["make", "-s", "-C", str(out), "grade", f"STAGE={later.name}", f"TARGET={tree}",
                           f"ITEMS={items}"],
                          capture_output=True, text=True, timeout=900, env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"})
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-4000:]
    assert f"graded with the reference {later.uses[0]}" in text, text[-3000:]

    # calibrated timeouts work from the shipped reference tests: a hang is
    # timed against the reference, which the handout has only as binaries
    assert (out / "grader" / "reference" / "01-signal" / "tests-plain").exists()
    hang = next(m for m in mutants() if m.name == "hostile-blocking-poll")
    hung = apply_mutant(hang, tmp_path / "hung")
    proc = subprocess.run(["make", "-s", "-C", str(out), "grade", "STAGE=1", "ITEMS=pending-registers",
                           f"TARGET={hung}"], capture_output=True, text=True, timeout=900,
                          env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"})
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2, text[-3000:]
    assert "the reference solution passes this test in" in text, text[-3000:]


def test_every_command_of_the_handout_readme_works_there(handout):
    """The handout's README offers only what works in the handout: every
    `make ...` line of its code blocks is run there (on the untouched
    skeleton) and must end with a report or a one-line error of its own,
    never a Python traceback or make's "No rule to make target"."""
    import re
    out = handout
    readme = (out / "README.md").read_text()
    assert "make test" not in readme and "TARGET=solutions" not in readme and "make labs" not in readme
    makefile = (out / "Makefile").read_text()
    assert "#+instructors" not in makefile and "\ntest:" not in makefile
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.S)
    commands = [line.split("#")[0].strip() for b in blocks for line in b.splitlines()
                if line.strip().startswith("make ")]
    assert len(commands) >= 10, commands
    # each make target runs for real once (a bare `make grade` as STAGE=1:
    # the other stages are the same target); every other line is checked by
    # make's dry run, which refuses a target the Makefile does not have
    ran, seen = [], set()
    for cmd in commands:
        target = cmd.split()[1]
        # the README's placeholders, filled in (make checks its variables
        # before anything runs, in a dry run too: a TARGET that is not a
        # folder is a one-line error)
        cmd = cmd.replace("TEST=suite/name", "TEST=signal_poll/pending_registers")
        cmd = cmd.replace("TARGET=path/to/tree", f"TARGET={out / 'labs'}")
        if target in seen:
            p = subprocess.run(cmd.split() + ["-n", "-C", str(out)], capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, f"{cmd}: {p.stderr[-2000:]}"
            continue
        seen.add(target)
        if target in ("grade", "check", "trace", "watch") and "STAGE=" not in cmd:
            cmd += " STAGE=1"
        if cmd.startswith("make debug"):
            cmd += " GDB=0"
        watch = cmd.startswith("make watch")
        p = subprocess.Popen(cmd.split() + ["-s", "-C", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"}, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        if watch:
            # make watch never ends: read until its first check is over
            # (a timer kills it if that never comes), then stop it
            timer = threading.Timer(120, os.killpg, (p.pid, signal.SIGKILL))
            timer.start()
            text = ""
            for line in p.stdout:
                text += line
                if "waiting for a change" in line:
                    break
            timer.cancel()
            os.killpg(p.pid, signal.SIGKILL)   # make watch and what it started
            p.communicate()
            assert "waiting for a change" in text, f"{cmd} never finished its first check:\n{text[-3000:]}"
            assert "Traceback" not in text and "No rule to make target" not in text, f"{cmd}:\n{text[-3000:]}"
            ran.append(cmd)
            continue
        try:
            text, _ = p.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            raise AssertionError(f"{cmd} did not finish in 300 s")
        assert "Traceback" not in text and "No rule to make target" not in text, f"{cmd}:\n{text[-3000:]}"
        assert p.returncode in (0, 1, 2), f"{cmd} exited {p.returncode}:\n{text[-3000:]}"
        assert text.strip(), f"{cmd} printed nothing"
        ran.append(cmd)
    print("ran in the handout:", *ran, sep="\n  ")


def test_make_trace_in_the_handout_stands_the_traced_reference_in(tmp_path, handout):
    """The handout ships every stage's reference built traced (handout.py
    calls trace_build.ship_traced_reference), so make trace there, at a
    stage finished over earlier stages that are still skeletons, links the
    traced reference of those, says so in one line, and writes a trace."""
    from test_trace import validate

    ref = handout / "grader" / "reference"
    unshipped = [s.name for s in stages() if not list((ref / s.name / "trace").glob("*.o"))]
    assert not unshipped, f"no traced reference objects in the handout for {unshipped}"
    stage = next(s for s in stages() if s.name.startswith("05-"))
    tree = tmp_path / "student"
    shutil.copytree(handout / "labs", tree)
    shutil.rmtree(tree / stage.name)
    shutil.copytree(ROOT / "solutions" / stage.name, tree / stage.name)
    out = tmp_path / "trace.json"
    proc = subprocess.run(["make", "-s", "--no-print-directory", "-C", str(handout), "trace", "STAGE=5",
                           f"TARGET={tree}", f"OUT={out}"], capture_output=True, text=True, timeout=600,
                          env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"})
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-3000:]
    said = [line for line in proc.stdout.splitlines() if "the reference's" in line]
    assert len(said) == 1, text[-3000:]
    for n in stage.uses:
        assert n in said[0] and f"your {n} still has a LAB_TODO" in said[0], said[0]
    assert "stand in for yours, as in make grade" in said[0], said[0]
    assert stage.name not in said[0], said[0]
    validate(out)


def test_the_handout_quiz_key_is_hashed_and_counts_wrong_answers(tmp_path, handout):
    """docs/04's claim audit promises, in the handout too, how many answers
    of a group are wrong and never which: the handout ships the key hashed
    per group (quiz.HASHED), no answer in clear, and make grade there says
    the count for each group as feedback, the points left to the instructor."""
    sys.path.insert(0, str(GRADER))
    from lab_grader import quiz
    stage = next(s for s in stages() if s.lane_items("quiz"))
    key = quiz.load(ROOT / "solutions" / stage.name / quiz.FILE)
    assert all(not q["answer"] for q in quiz.load(handout / "labs" / stage.name / quiz.FILE).values())
    groups = quiz.load_hashed(handout / "grader" / "reference" / stage.name / quiz.HASHED)
    assert set(groups) == {i.id for i in stage.lane_items("quiz")}
    assert all(set(g) == {"questions", "choices", "salt", "sha256"} for g in groups.values()), groups
    tree = tmp_path / "student"
    shutil.copytree(handout / "labs", tree)
    first, *others = stage.lane_items("quiz")
    changed = first.tests[1]
    wrong = next(c for c in key[changed]["choices"] if c != key[changed]["answer"])
    text = (ROOT / "solutions" / stage.name / quiz.FILE).read_text()
    text = re.sub(rf'(\[{changed}\]\n.*?\nanswer = )"[^"]*"', rf'\1"{wrong}"', text, count=1, flags=re.S)
    (tree / stage.name / quiz.FILE).write_text(text)
    assert quiz.load(tree / stage.name / quiz.FILE)[changed]["answer"] == wrong
    proc = subprocess.run(["make", "-s", "-C", str(handout), "grade", f"STAGE={stage.name}", f"TARGET={tree}",
                           "ITEMS=" + ",".join(i.id for i in stage.lane_items("quiz"))],
                          capture_output=True, text=True, timeout=600, env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"})
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out[-3000:]
    lines = {i.id: [l for l in out.splitlines() if l.startswith(f"Not judged here: {i.key}:")] for i in stage.lane_items("quiz")}
    assert all(len(v) == 1 for v in lines.values()), out[-3000:]
    said = lines[first.id][0]
    assert f"1 of the {len(first.tests)} answers of this group is not right" in said, said
    # how many, not which: no claim named, no choice word said
    assert not any(q in said for q in first.tests), said
    assert not any(c in said for q in first.tests for c in key[q]["choices"]), said
    for i in others:
        assert f"all {len(i.tests)} answers of this group agree" in lines[i.id][0], lines[i.id][0]
    assert "Total: 0/0" in out, out[-3000:]   # feedback only: the quiz's points are the instructor's
