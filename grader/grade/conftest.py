"""pytest plugin of the grader: one pytest item per rubric item.

    pytest grader/grade --target labs [--stage 1] [--items a,b] [--test suite/name]
                        [--seed N] [--results results.json] [--werror]

The work (builds and lanes) starts in the background when the session starts;
each item waits for what it needs and passes or fails with its diagnosis.
The report is printed at the end of the session.
"""
import os
import pathlib
import sys
import threading
import time

import pytest

GRADER = pathlib.Path(__file__).resolve().parent.parent
ROOT = GRADER.parent
sys.path.insert(0, str(GRADER))

from lab_grader import invocation, junit, pipeline, report, rubric  # noqa: E402

_state = {"grader": None, "grading": None, "results": [], "start": time.monotonic(), "error": None}


def pytest_addoption(parser):
    g = parser.getgroup("lab grader")
    g.addoption("--target", default=str(ROOT / "labs"), help="tree shaped like labs/ to grade")
    g.addoption("--stage", default="", help="stages to grade: 1, 01-signal, 1,2")
    g.addoption("--items", default="", help="only these rubric item ids (comma-separated)")
    g.addoption("--test", default="", help="only items that run this test (suite/name)")
    g.addoption("--seed", default="", help="seed for the randomized tests")
    g.addoption("--results", default="", help="write Gradescope's results.json here")
    g.addoption("--werror", action="store_true", help="compile the target with -Werror")
    g.addoption("--build-dir", default=str(ROOT / "build" / "grade"))
    g.addoption("--valgrind-scale", default="0.05", help="iteration factor under Valgrind")
    g.addoption("--timings", action="store_true", help="print the time each lane took")
    g.addoption("--quick", action="store_true", help="make check: skip Valgrind, TSan and perf; race items once")
    g.addoption("--hidden", default="", help="the instructor's hidden rubric items and tests (HIDDEN=dir)")
    g.addoption("--budget", default="0", help="seconds for the whole grading (0: none); past it, items left are "
                "not judged, and results.json is written item by item so a kill never leaves nothing")
    g.addoption("--junit", default="", help="write JUnit XML here: a testcase per item, a suite per stage")
    g.addoption("--unjudged", default="zero", choices=("zero", "omit"),
                help="how results.json counts an item not judged: 0 of its points (zero), or 0 of 0 (omit)")
    g.addoption("--watch", action="store_true", help="make watch: when a stage does not build, the compiler's "
                "error alone instead of the report")
    g.addoption("--reference", default="", help="the tree a timed-out test is rerun on (default solutions/; "
                "for the grader's own self-tests)")


def _make(config):
    opt = config.getoption
    args = invocation.grading(ROOT, target=opt("--target"), stage=opt("--stage"), items=opt("--items"),
                              test=opt("--test"), seed=opt("--seed"), budget=opt("--budget"),
                              valgrind_scale=opt("--valgrind-scale"), hidden=opt("--hidden"))
    return pipeline.Pipeline(
        root=ROOT, target=args.target, stages=args.stages, selected=args.selected,
        build_dir=pathlib.Path(opt("--build-dir")), items=args.items, test=args.test, seed=args.seed,
        werror=opt("--werror"), valgrind_scale=args.valgrind_scale, quick=opt("--quick"),
        hidden=opt("--hidden") or None, reference=opt("--reference") or None)


def pytest_configure(config):
    try:
        _state["grader"] = _make(config)
    except invocation.UsageError as e:
        # one line, exit status 2: what was given and what would do
        pytest.exit(str(e), returncode=2)
    except rubric.RubricError as e:
        _state["error"] = str(e)


def pytest_generate_tests(metafunc):
    if "item" not in metafunc.fixturenames:
        return
    g = _state["grader"]
    if g is None:
        metafunc.parametrize("item", [None], ids=["setup"])
        return
    items = g.items()
    if not items:
        metafunc.parametrize("item", [None], ids=["nothing-selected"])
        return
    metafunc.parametrize("item", items, ids=[i.key for i in items])


def pytest_collection_finish(session):
    g = _state["grader"]
    if g is not None:
        g.start()
    _state["total"] = len(session.items)
    _state["done"] = 0
    _state["failed"] = []
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    _state["progress"] = tr if (tr is not None and sys.stdout.isatty() and not os.environ.get("NO_PROGRESS")) else None
    _state["ticking"] = threading.Event()
    if _state["progress"] is not None:
        tr._show_progress_info = False   # pytest's "[100%]" would follow the line and outlive it
        threading.Thread(target=_tick, daemon=True).start()


def _end_progress():
    """Erases the progress line, for good: before pytest's own newline."""
    if "ticking" in _state:
        _state["ticking"].set()
    _progress("")
    with _progress_lock:
        _state["progress"] = None


# ---- progress on a terminal: which stage, which item, how many left, how long ----
# On a terminal the line rewrites itself in place of pytest's dots, and its
# clock ticks while an item waits; it is erased before the report prints. In
# a log (CI, grade-class, Gradescope) the dots stay, one per item.

_progress_lock = threading.Lock()


def _progress(text):
    with _progress_lock:
        tr = _state.get("progress")
        if tr is not None:
            tr.write("\r\033[K" + text, flush=True)


def _progress_line():
    key, done, total = _state.get("current", ""), _state["done"], _state["total"]
    secs = int(time.monotonic() - _state["start"])
    failed = _state.get("failed", [])
    # a failure shows as soon as it is judged: a stage whose other lanes take
    # minutes (Valgrind on a stalling runtime) names its broken item at once
    shown = ", ".join(failed[:3]) + (f" and {len(failed) - 3} more" if len(failed) > 3 else "")
    return (f"grading {key}   ({done} of {total} items done, {total - done} left, "
            f"{secs // 60}:{secs % 60:02d} so far" + (f"; failed so far: {shown}" if failed else "") + ")")


def _tick():
    while not _state["ticking"].wait(1.0):
        if _state.get("progress") is not None and _state.get("current"):
            _progress(_progress_line())


def pytest_runtest_logstart(nodeid, location):
    if _state.get("progress") is None:
        return
    _state["current"] = nodeid.rsplit("[", 1)[-1].rstrip("]")
    _progress(_progress_line())


def pytest_runtest_logreport(report):
    if report.when == "call":
        _state["done"] = _state.get("done", 0) + 1
        if report.failed:
            _state.setdefault("failed", []).append(report.nodeid.rsplit("[", 1)[-1].rstrip("]").split("/")[-1])


def pytest_report_teststatus(report, config):
    if _state.get("progress") is not None and report.when == "call":
        return report.outcome, "", report.outcome.upper()


@pytest.fixture(scope="session")
def grader():
    if _state["error"]:
        pytest.fail(_state["error"], pytrace=False)
    return _state["grader"]


def record_result(result, config):
    """Keeps an item's result; with --results and a budget, rewrites
    results.json with every item so far (the rest marked not yet graded),
    so a grading killed for time still leaves its results."""
    _state["results"].append(result)
    path = config.getoption("--results")
    if path and budget(config):
        g = _state["grader"]
        done = {r.item.key for r in _state["results"]}
        from lab_grader import verdict
        pending = [verdict.out_of_time(i) for i in g.items() if i.key not in done]
        report.write_json(path, report.gradescope(g.snapshot(), _state["results"] + pending,
                                                  time.monotonic() - _state["start"], config.getoption("--unjudged")))


def budget(config):
    try:
        return float(config.getoption("--budget") or 0)
    except ValueError:
        return 0.0


def time_left(config):
    """Seconds left of the grading's budget, or None without one."""
    b = budget(config)
    return None if not b else _state["start"] + b - time.monotonic()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    g = _state["grader"]
    tr = terminalreporter
    _end_progress()
    if _state["error"]:
        tr.write_line(f"grader: {_state['error']}", red=True)
        return
    results = _state["results"]
    if not results:
        sel = []
        if config.getoption("--items"):
            sel.append(f"ITEMS={config.getoption('--items')}")
        if config.getoption("--test"):
            sel.append(f"TEST={config.getoption('--test')}")
        tr.write_line(f"grader: nothing to grade ({' '.join(sel) or 'no items'} matched nothing)", red=True)
        return
    grading = _state["grading"]
    alone = report.compiler_first(grading, results) if config.getoption("--watch") else None
    if alone:
        tr.write_line(alone)
        return
    tr.write_line("")
    tr.write_line(report.text_report(grading, results))
    if config.getoption("--test"):
        _print_test_output(tr, g, config.getoption("--test"))
    if config.getoption("--timings"):
        tr.write_line("")
        tr.write_line("time spent running tests, per stage and lane (lanes overlap; wall time is less than the sum):")
        for (stage, lane), secs in sorted(g.runner.lane_seconds().items()):
            tr.write_line(f"  {stage:<20} {lane:<9} {secs:6.1f} s")
    path = config.getoption("--results")
    if path:
        report.write_json(path, report.gradescope(grading, results, time.monotonic() - _state["start"],
                                                 config.getoption("--unjudged")))
        tr.write_line(f"wrote {path}")
    path = config.getoption("--junit")
    if path:
        junit.write(path, report.junit_cases(grading, results))
        tr.write_line(f"wrote {path}")


def _print_test_output(tr, g, test):
    """With TEST=..., show what the test printed in the plain run."""
    for d in g.runner.run_dirs:
        out = d / "output.txt"
        text = out.read_text(errors="replace").strip() if out.exists() else ""
        if text:
            rel = d.relative_to(g.work)
            tr.write_line(f"-- what the run printed ({rel}) --")
            tr.write_line(text[-8000:])


def pytest_sessionfinish(session, exitstatus):
    g = _state["grader"]
    if g is not None:
        _state["grading"] = g.finish()   # before the report: pytest prints it after this hook
        g.close()
    _end_progress()
    if _state["error"]:
        session.exitstatus = 2
    elif _state["grading"] is not None and _state["grading"].untrusted:
        session.exitstatus = 3   # no verdict can be trusted
    elif _state["results"] and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = 1
