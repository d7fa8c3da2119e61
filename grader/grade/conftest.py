"""The pytest plugin of the grader: pytest's lifecycle mapped onto one
grading (lab_grader/grading.py, where a grading reads top to bottom), one
pytest item per rubric item.

    pytest grader/grade --target labs [--stage 1] [--items a,b] [--test suite/name]
                        [--seed N] [--results results.json] [--werror]
"""
import dataclasses
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from lab_grader import grading, arguments, progress  # noqa: E402

_run = {}   # "grading": the one grading; "progress": its line; "finished": what it leaves to print


def pytest_addoption(parser):
    group = parser.getgroup("lab grader")
    for f in dataclasses.fields(grading.Options):
        more = {"action": "store_true"} if f.default is False else {"default": f.default}
        more.update({"choices": f.metadata["choices"]} if "choices" in f.metadata else {})
        group.addoption("--" + f.name.replace("_", "-"), help=f.metadata["help"], **more)


def pytest_configure(config):
    options = grading.Options(**{f.name: config.getoption(f.name) for f in dataclasses.fields(grading.Options)})
    try:
        _run["grading"] = grading.Grading(options)
    except arguments.UsageError as e:   # one line, exit status 2: what was given and what would do
        pytest.exit(str(e), returncode=2)
    _run["progress"] = progress.Progress(None, 0, _run["grading"].began)   # no line until the items are known


def pytest_generate_tests(metafunc):
    if "item" in metafunc.fixturenames:
        g = _run["grading"]
        items = g.items()
        ids = [i.key for i in items] if items else ["setup" if g.error else "nothing-selected"]
        metafunc.parametrize("item", items or [None], ids=ids)


def pytest_collection_finish(session):
    _run["grading"].start()
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    terminal = tr is not None and sys.stdout.isatty() and _run["grading"].environment.progress
    if terminal:
        tr._show_progress_info = False   # pytest's "[100%]" would follow the line and outlive it
    _run["progress"] = progress.Progress((lambda text: tr.write(text, flush=True)) if terminal else None,
                                         len(session.items), _run["grading"].began)


@pytest.fixture(scope="session")
def grader():
    if _run["grading"].error:
        pytest.fail(_run["grading"].error, pytrace=False)
    return _run["grading"]


def pytest_runtest_logstart(nodeid, location):
    _run["progress"].started(nodeid.rsplit("[", 1)[-1].rstrip("]"))


def pytest_runtest_logreport(report):
    if report.when == "call":
        _run["progress"].judged(report.nodeid.rsplit("[", 1)[-1].rstrip("]"), report.failed)


def pytest_report_teststatus(report, config):
    if _run["progress"].shown and report.when == "call":
        return report.outcome, "", report.outcome.upper()   # no dots under the line


def pytest_sessionfinish(session, exitstatus):
    _run["finished"] = finished = _run["grading"].finish()
    _run["progress"].end()
    if finished.status is not None:
        session.exitstatus = finished.status
    elif _run["grading"].results and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter):
    _run["progress"].end()
    finished = _run["finished"]
    for line in finished.lines:
        terminalreporter.write_line(line, **({"red": True} if finished.alarm else {}))
