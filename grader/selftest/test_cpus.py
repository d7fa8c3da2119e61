"""Gradescope's default resources (0.5 CPU, 768 MB) cost no point: an item
declares the CPUs it needs to be judged (rubric `cpus`), a grading with
fewer leaves it "not judged", and a Gradescope assignment (UNJUDGED=omit,
what make autograder bakes in) shows it as 0 of 0 in one line. All of it
without a grading: a few milliseconds (issue 27)."""
import concurrent.futures
import json
import subprocess
import sys
import types

import pytest

from conftest import GRADER, MACHINE_REASONS, rubric

sys.path.insert(0, str(GRADER / "course"))

from lab_grader import machine, pipeline, results_json  # noqa: E402
from lab_grader.outcomes import Status  # noqa: E402

ITEM = '[[item]]\nid="a"\npoints=2\nlane="{lane}"\ntests=["s/a"]\nclause="c"\nsection="#s"\n'


def _load(tmp_path, body):
    p = tmp_path / "09-x.toml"
    p.write_text('stage = "09-x"\ntitle = "x"\nchapter = "docs/x.md"\nsources = ["x.c"]\n' + body)
    return rubric.load_stage(p).items[0]


def test_rubric_cpus(tmp_path):
    """A perf item needs a whole CPU unless it says; other lanes none; a bad
    value is a one-line rubric error."""
    assert _load(tmp_path, ITEM.format(lane="perf")).cpus == 1.0
    assert _load(tmp_path, ITEM.format(lane="plain")).cpus == 0.0
    assert _load(tmp_path, ITEM.format(lane="perf") + "cpus = 0.5\n").cpus == 0.5
    assert _load(tmp_path, ITEM.format(lane="race") + "cpus = 2\n").cpus == 2.0
    for bad in ('"two"', "-1", "true", "100"):
        with pytest.raises(rubric.RubricError, match=r"item 'a': cpus must be a number from 0 to 64") as e:
            _load(tmp_path, ITEM.format(lane="perf") + f"cpus = {bad}\n")
        assert "\n" not in str(e.value)


def test_the_rubrics_say_what_each_timing_item_needs():
    """The timing items that compare CPU time with CPU time are judged at
    Gradescope's default quota; the one that times two workers needs two
    cores; no other item needs more than one."""
    items = {i.key: i for s in rubric.load_all(GRADER / "rubric") for i in s.items}
    assert items["07-work-stealing/speedup"].cpus == 2
    for key in ("02-block-on/spin-comparison", "03-executor/linear", "05-timer/constant-time"):
        assert items[key].cpus == 0.5, key
    assert {k for k, i in items.items() if i.cpus > 1} == {"07-work-stealing/speedup"}


def test_share_counts_quota_and_affinity(monkeypatch):
    monkeypatch.setattr(machine.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(machine, "quota", lambda: 0.5)
    assert machine.share() == 0.5
    monkeypatch.setattr(machine, "quota", lambda: None)
    assert machine.share() == 2
    monkeypatch.setattr(machine.os, "sched_getaffinity", lambda pid: {3})
    monkeypatch.setattr(machine, "quota", lambda: 1.5)
    assert machine.share() == 1


def _result_at(monkeypatch, share, cpus, lane="perf"):
    """pipeline.Pipeline._result for one built item, on a machine of `share`
    CPUs; the lane, if it were run, says the test passed."""
    item = rubric.Item(stage="05-timer", id="lateness", points=1, lane=lane, tests=["s/t"], clause="a clause",
                       section="#s", cpus=cpus)
    built = concurrent.futures.Future()
    built.set_result(types.SimpleNamespace(ok=True))
    passed = types.SimpleNamespace(passed=True)
    sp = types.SimpleNamespace(item_tests={item.key: ["s::t"]})
    stub = types.SimpleNamespace(plan=types.SimpleNamespace(of=lambda name: sp, quick=False),
                                 builds={"05-timer": built}, perf=lambda sp: {"s::t": passed},
                                 plain=lambda sp: {"s::t": passed})
    monkeypatch.setattr(machine, "share", lambda: share)
    return item, pipeline.Pipeline._result(stub, item)


def test_an_item_that_needs_more_cpus_is_not_judged(monkeypatch):
    _, r = _result_at(monkeypatch, 0.5, 1.0)
    assert r.status == Status.NOT_JUDGED and r.points == 0
    assert r.summary.startswith(MACHINE_REASONS[0]) and "0.5 CPU" in r.summary, r.summary
    _, r = _result_at(monkeypatch, 1, 2.0)
    assert r.status == Status.NOT_JUDGED and "needs 2" in r.summary, r.summary
    for share, cpus, lane in ((0.5, 0.5, "perf"), (1, 1.0, "perf"), (0.5, 0.0, "plain")):
        _, r = _result_at(monkeypatch, share, cpus, lane)
        assert r.status == Status.PASSED, (share, cpus, lane, r.summary)


def _results(monkeypatch, unjudged):
    item, r = _result_at(monkeypatch, 0.5, 1.0)
    ok = types.SimpleNamespace(item=types.SimpleNamespace(key="05-timer/ok", id="ok", clause="ok's clause", points=2,
                                                          hidden=False, lane="plain", stage="05-timer"),
                               status=Status.PASSED, points=2, summary="passed", outcome=None, build_error=None)
    grading = types.SimpleNamespace(untrusted=[], stages={"05-timer": types.SimpleNamespace(chapter="docs/05.md", number=5)},
                                    builds={"05-timer": types.SimpleNamespace(
        notes=[], remarks=[], warnings=[], ok=True, error=None, review=[])})
    data = results_json.build(grading, [ok, r], 1.0, unjudged=unjudged)
    assert results_json.validate(data) == [], results_json.validate(data)
    return data, next(t for t in data["tests"] if t["number"] == item.key)


def test_in_a_gradescope_assignment_it_is_0_of_0_in_one_line(monkeypatch):
    """UNJUDGED=omit (a make autograder zip's default): full marks for the
    reference at 0.5 CPU, the item one line that says why, no status, no
    "regrade"; UNJUDGED=zero (make grade's default) keeps its points owed."""
    data, t = _results(monkeypatch, "omit")
    assert data["score"] == sum(x["max_score"] for x in data["tests"]) == 2, data
    assert t["max_score"] == 0 and "status" not in t and t["extra_data"] == {"judged": False}, t
    assert t["output"].startswith("Not judged on this machine (it gives this grading 0.5 CPU(s), the item needs 1")
    assert "\n" not in t["output"] and "regrade" not in t["output"] and "cannot judge" not in t["output"], t
    data, t = _results(monkeypatch, "zero")
    assert t["max_score"] == 1 and t["score"] == 0 and t["status"] == "failed", t
    # and it does not send the student to ask for a regrade on the same machine
    assert "regrade there cannot judge it either" in t["output"] and "ask for a regrade" not in t["output"], t


def test_a_gradescope_zip_bakes_omit_and_passes_it_on():
    """make autograder's zip: UNJUDGED=omit unless asked otherwise, and
    run_autograder hands it to make grade (building a zip takes a minute:
    test_autograder.py does, this reads what it writes)."""
    import autograder
    assert "UNJUDGED=omit" in autograder.RUN and 'UNJUDGED="$UNJUDGED"' in autograder.RUN
    proc = subprocess.run([sys.executable, str(GRADER / "course" / "autograder.py"), "--help"], capture_output=True,
                          text=True)
    assert "default" in proc.stdout and "'omit'" in proc.stdout, proc.stdout


def test_the_simulator_refuses_bad_input_in_one_line(tmp_path):
    """grader/course/gradescope_sim.py (the reference at Gradescope's
    resources): bad input is one line and status 2, before anything runs."""
    sim = GRADER / "course" / "gradescope_sim.py"
    for args, said in ((["--stage", "1", "--cpus", "0"], "--cpus=0: between 0 and 64"),
                       (["--stage", "1", "--memory", "lots"], "--memory=lots: not a size"),
                       (["--stage", "1", "--runs", "0"], "--runs must be at least 1"),
                       (["--zip", str(tmp_path / "none.zip")], "no such file"),
                       (["--stage", "42"], "STAGE=42: no such stage")):
        proc = subprocess.run([sys.executable, str(sim), *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and said in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, \
            (args, proc.returncode, proc.stderr)


def test_the_simulator_reads_a_results_json(tmp_path):
    import gradescope_sim
    p = tmp_path / "results.json"
    p.write_text(json.dumps({"score": 3, "output": "x", "tests": [
        {"number": "a", "score": 3, "max_score": 3, "status": "passed"},
        {"number": "b", "score": 0, "max_score": 0, "output": "Not judged on this machine (x): not part of your score.",
         "extra_data": {"judged": False}},
        {"number": "c", "score": 0, "max_score": 1, "status": "failed", "output": "c failed\nmore"}]}))
    score, total, unjudged, lost, errors = gradescope_sim.read_results(p)
    assert (score, total, errors) == (3, 4, [])
    assert unjudged == [("b", "Not judged on this machine (x): not part of your score.")]
    assert lost == [("c", 0, 1, "c failed")]
    assert gradescope_sim.parse_bytes("768M") == 768 << 20 and gradescope_sim.parse_bytes("1g") == 1 << 30
