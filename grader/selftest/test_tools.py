"""The students' conveniences: compile_commands.json and make watch."""
import json
import os
import shutil
import subprocess
import sys
import time

from conftest import GRADER, ROOT


def test_compile_commands(tmp_path):
    proc = subprocess.run([sys.executable, str(GRADER / "tools.py"), "compile-commands", "--target", "labs"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    entries = json.loads((ROOT / "compile_commands.json").read_text())
    files = {e["file"] for e in entries}
    assert str(ROOT / "labs" / "01-signal" / "signal.c") in files
    one = next(e for e in entries if e["file"].endswith("labs/01-signal/signal.c"))
    assert "-iquote" in one["arguments"] and str(ROOT / "labs" / "01-signal") in one["arguments"]


def test_watch_regrades_on_save(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "solutions", tree)
    proc = subprocess.Popen(["make", "-s", "-C", str(ROOT), "watch", "STAGE=1", f"TARGET={tree}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, NO_COLOR="1"), start_new_session=True)
    try:
        # a grading of stage 01 is some 20 s beside make test's other load;
        # the deadline only ends a watch that never regrades
        deadline = time.monotonic() + 300
        seen = ""
        while time.monotonic() < deadline and seen.count("waiting for a change") < 1:
            seen += proc.stdout.readline()
        (tree / "01-signal" / "signal.c").touch()
        while time.monotonic() < deadline and seen.count("waiting for a change") < 2:
            seen += proc.stdout.readline()
        assert seen.count("Total:") >= 2, seen[-2000:]
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


def test_debug_runs_one_test_in_process():
    proc = subprocess.run(["make", "-s", "-C", str(ROOT), "debug", "STAGE=1", "TARGET=solutions", "GDB=0",
                           "TEST=signal_poll/pending_registers"], capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-2000:]
    assert "Tested: 1 | Passing: 1" in out and "(in this process)" in out
    assert "tests-debug" in out   # the -O0 build, not a graded one
    bad = subprocess.run(["make", "-s", "-C", str(ROOT), "debug", "STAGE=1", "TARGET=solutions", "GDB=0",
                          "TEST=signal_poll/no_such_test"], capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "no such test" in bad.stdout + bad.stderr
    if shutil.which("gdb"):
        # gdb stops in the test's own body (its stdin at an end, it then quits)
        gdb = subprocess.run(["make", "-s", "-C", str(ROOT), "debug", "STAGE=1", "TARGET=solutions",
                              "TEST=signal_poll/pending_registers"], capture_output=True, text=True, timeout=300,
                             stdin=subprocess.DEVNULL)
        out = gdb.stdout + gdb.stderr
        assert "Breakpoint 1, lab_body_signal_poll_pending_registers" in out, out[-3000:]


def test_lab_schedule_reaches_the_test(tmp_path):
    """A failing schedule's report says to replay it with LAB_SCHEDULE=...
    (docs/debugging.md#the-schedule-explorer): through make grade's jail and
    make debug alike, the variable must reach the explorer in the test. A
    schedule that does not parse is the proof: only the explorer says so."""
    from conftest import grade, solutions_copy
    tree = solutions_copy(tmp_path)
    g = grade(tmp_path, tree, stage="1", extra=["TEST=signal_explore/poll_vs_complete", "LAB_SCHEDULE=Q:nonsense"])
    assert "LAB_SCHEDULE=Q:nonsense is not a schedule" in g.output, g.output[-2000:]
    ok = grade(tmp_path, tree, stage="1", extra=["TEST=signal_explore/poll_vs_complete", "LAB_SCHEDULE=A:A2"])
    assert ok.returncode == 0 and "not a schedule" not in ok.output, ok.output[-2000:]
    dbg = subprocess.run(["make", "-s", "-C", str(ROOT), "debug", "STAGE=1", f"TARGET={tree}", "GDB=0",
                          "TEST=signal_explore/poll_vs_complete", "LAB_SCHEDULE=Q:nonsense"],
                         capture_output=True, text=True, timeout=300)
    assert "LAB_SCHEDULE=Q:nonsense is not a schedule" in dbg.stdout + dbg.stderr, (dbg.stdout + dbg.stderr)[-2000:]


def test_progress_line_names_a_failure_as_soon_as_it_is_judged(tmp_path):
    """On a terminal the progress line says which items failed so far, so a
    stage whose slower lanes take minutes names its broken item at once."""
    import pty
    from conftest import apply_mutant, mutants
    m = next(m for m in mutants() if m.stage == "01-signal" and m.name == "stale-first-waker")
    tree = apply_mutant(m, tmp_path / "tree")
    out = bytearray()

    def read(fd):
        data = os.read(fd, 4096)
        out.extend(data)
        return data
    pid, fd = pty.fork()
    if pid == 0:   # the child: make grade on a terminal, as a student types it
        os.execvp("make", ["make", "-s", "-C", str(ROOT), "grade", "STAGE=1", f"TARGET={tree}",
                           "ITEMS=latest-waker,pending-registers,first-poll-ready"])
    try:
        while read(fd):
            pass
    except OSError:   # the terminal closed: make is done
        pass
    os.waitpid(pid, 0)
    text = out.decode(errors="replace")
    assert "failed so far: latest-waker" in text, text[-3000:]
