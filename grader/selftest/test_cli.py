"""The daily loop's front door: a bad invocation is one line and exit status
2, naming what would do; make typed in a stage folder grades that stage of
that tree. Nothing here grades a stage (each check stops before a test runs,
or grades a tree whose only stage does not compile)."""
import os
import shutil
import subprocess
import sys
import types

import pytest

from conftest import GRADER, ROOT

ENV = dict(os.environ, NO_COLOR="1", NO_PROGRESS="1")


def make(*args, cwd=ROOT, timeout=60):
    proc = subprocess.run(["make", "-s", "--no-print-directory", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=ENV)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


# (make's arguments, words the one line must hold: what was given, the valid choices or the closest)
BAD = [
    (["grade", "STAGE=1", "TARGET=solutions", "VG_SCALE=abc"], ["VG_SCALE=abc", "0.05"]),
    (["grade", "STAGE=1", "TARGET=/etc"], ["TARGET=/etc is not a lab tree", "01-signal"]),
    (["grade", "STAGE=1", "TARGET=solutions/01-signal"], ["TARGET=solutions"]),
    (["grade", "STAGE=1", "TARGET=no/such/dir"], ["TARGET=no/such/dir: no such directory"]),
    (["grade", "STAGE=1", "TARGET=solutions", "ITEMS=latest-waker,nosuch"], ["ITEMS=nosuch", "latest-waker", "tsan-races"]),
    (["grade", "STAGE=1", "TARGET=solutions", "ITEMS=latest-wakr"], ["did you mean latest-waker?"]),
    (["grade", "STAGE=1", "TARGET=solutions", "TEST=signal_poll"], ["a test is suite/name", "signal_poll/pending_registers"]),
    (["grade", "STAGE=1", "TARGET=solutions", "TEST=signal_pol/pending_registers"],
     ["did you mean signal_poll/pending_registers?"]),
    (["grade", "STAGE=9"], ["STAGE=9: no such stage", "01-signal", "07-work-stealing"]),
    (["grade", "STAGE=abc"], ["STAGE=abc: no such stage"]),
    (["grade", "STAGE=1", "SEED=x"], ["SEED=x", "non-negative integer"]),
    (["grade", "STAGE=1", "BUDGET=x"], ["BUDGET=x", "seconds"]),
    (["grade", "STAGE=1", "UNJUDGED=x"], ["UNJUDGED=x", "omit"]),
    (["check", "STAGE=1", "TEST=nosuch/test"], ["TEST=nosuch/test: no such test in 01-signal"]),
    (["grade", "STAGE=1", "TARGET=solutions", "ITEMS=latest-waker", "TEST=signal_poll/pending_registers"],
     ["TEST=signal_poll/pending_registers is not a test of ITEMS=latest-waker", "pending-registers"]),
    (["watch"], ["make watch wants a stage"]),
    (["watch", "STAGE=abc"], ["STAGE=abc"]),
    (["debug", "STAGE=1"], ["make debug wants TEST=suite/name"]),
    (["debug", "STAGE=1,2", "TEST=signal_poll/pending_registers"], ["one stage"]),
    (["debug", "STAGE=1", "TEST=signal_poll/nosuch"], ["no such test in 01-signal", "signal_poll/pending_registers"]),
    (["hint", "STAGE=1", "ITEM=latest-wker"], ["did you mean latest-waker?", "pending-registers"]),
    (["grade-class"], ["SUBMISSIONS=dir"]),
    (["grade-class", "SUBMISSIONS=/", "JOBS=x"], ["JOBS=x"]),
]


def check_args(args):
    """What the Makefile's check (tools.py args) says of make's arguments,
    in this process: the line, or None."""
    sys.path.insert(0, str(GRADER))
    import tools
    kind = "grade" if args[0] == "check" else args[0]
    names = {"VG_SCALE": "valgrind-scale", "ITEM": "item"}
    opts = {k: "" for k in ("target", "stage", "items", "item", "test", "seed", "budget", "valgrind_scale", "hidden",
                            "submissions", "jobs", "unjudged")}
    for a in args[1:]:
        k, _, v = a.partition("=")
        opts[names.get(k, k.lower()).replace("-", "_")] = v
    opts["target"] = opts["target"] or "labs"
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        tools.check_args(kind, types.SimpleNamespace(**opts))
    except tools.rubric.RubricError as e:
        return str(e)
    finally:
        os.chdir(cwd)
    return None


@pytest.mark.parametrize("args,words", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_bad_invocation_is_one_line(args, words):
    out = check_args(args)
    assert out is not None and len(out.splitlines()) == 1, out
    for w in words:
        assert w in out, out


# make itself: the same line, alone, and make's exit status 2, for each kind of check
WIRED = [BAD[0], BAD[1], BAD[4], BAD[13], BAD[14], BAD[18], BAD[19], BAD[21]]


@pytest.mark.parametrize("args,words", WIRED, ids=[" ".join(a) for a, _ in WIRED])
def test_make_stops_in_one_line(args, words):
    rc, out = make(*args)
    assert rc == 2 and len(out.splitlines()) == 1 and words[0] in out, out


def test_the_grader_itself_says_one_line():
    """pytest run by hand (grade-class, the autograder) gets the same
    line, from the same checks, and exit status 2."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(GRADER / "grade"),
                           "--target=solutions", "--stage=1", "--valgrind-scale=abc"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, env=ENV)
    out = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 2 and len(out.splitlines()) == 1 and "VG_SCALE=abc" in out, out
    proc = subprocess.run([sys.executable, str(GRADER / "course" / "grade_class.py"), str(ROOT / "labs"),
                           "--stage=9"], capture_output=True, text=True, timeout=60)
    out = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 2 and len(out.splitlines()) == 1 and "STAGE=9" in out, out


def test_make_in_a_stage_folder_takes_that_stage_of_that_tree(tmp_path):
    for tree in ("labs", "solutions"):
        rc, out = make("grade", "ITEMS=nosuch", cwd=ROOT / tree / "03-executor")
        assert rc == 2 and "no such item in 03-executor" in out, out
    rc, out = make("hint", cwd=ROOT / "labs" / "01-signal")
    assert rc == 0 and "01-signal" in out and "latest-waker" in out, out
    # there, make hint says the command that works there: no STAGE=
    assert "make hint ITEM=<item>" in out and "STAGE=" not in out, out
    rc, out = make("hint", "STAGE=2", cwd=ROOT / "labs" / "01-signal")   # another stage: it says so
    assert rc == 0 and "make hint STAGE=2 ITEM=<item>" in out, out
    rc, out = make("hint", "STAGE=1")
    assert rc == 0 and "make hint STAGE=1 ITEM=<item>" in out, out
    # a tree outside the lab: one line saying how, then LAB_ROOT= finds it
    # and TARGET is that tree (its one stage folder makes it a lab tree)
    outside = tmp_path / "mine" / "01-signal"
    shutil.copytree(ROOT / "solutions" / "01-signal", outside)
    rc, out = make("grade", cwd=outside)
    assert rc == 2 and len(out.splitlines()) == 1 and "LAB_ROOT=" in out, out
    rc, out = make("grade", f"LAB_ROOT={ROOT}", "ITEMS=nosuch", cwd=outside)
    assert rc == 2 and "no such item in 01-signal" in out, out


def test_a_stage_that_does_not_compile_is_one_block(tmp_path):
    """make check: the compiler's error once, not a block per item; make
    watch's report: the compiler's output alone, pointing at the student's
    own file."""
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "solutions" / "01-signal", tree / "01-signal")
    src = tree / "01-signal" / "signal.c"
    src.write_text(src.read_text().replace("return -1;", "retur -1;", 1))
    rc, out = make("check", "STAGE=1", f"TARGET={tree}", timeout=300)
    assert rc != 0 and out.count("what happened:") == 1 and "01-signal did not compile (15 item(s)" in out, out
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--no-header",
                           str(GRADER / "grade"), f"--target={tree}", "--stage=1", "--quick", "--watch"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=ENV)
    out = proc.stdout
    assert "01-signal did not compile:" in out and "Total:" not in out, out
    assert "tree/01-signal/signal.c:" in out and "build/grade" not in out, out


def test_deps_probe_is_cached_by_the_compiler(tmp_path):
    """deps.sh's stamp holds the compiler's identity: a stamp written for
    another compiler is probed again (and rewritten)."""
    stamp = ROOT / "build" / ".deps-grade.ok"
    subprocess.run(["sh", str(GRADER / "deps.sh"), "grade"], check=True, timeout=120)
    key = stamp.read_text()
    assert "/" in key, key
    stamp.write_text("another compiler\n")
    subprocess.run(["sh", str(GRADER / "deps.sh"), "grade"], check=True, timeout=120)
    assert stamp.read_text() == key
