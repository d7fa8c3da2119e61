"""Gradescope's results.json (lab_grader/results_json.py): the schema written
from Gradescope's spec takes what the spec allows and refuses the rest with
a readable line; files are written by the JSON encoder, atomically, with
student text cleaned; the crash fallback is valid whatever the log holds."""
import json
import os
import subprocess
import sys

import pytest

from conftest import GRADER

sys.path.insert(0, str(GRADER))
from lab_grader import results_json  # noqa: E402

HOSTILE = "a\tb\x1b[2J\x1b[Hfake 21/21\r\n\x00\x07\"\\ \ud800 </pre><script>x</script>\x1b]0;t\x07 end"

# the spec's own example, and the shapes the grader writes (results_json.build)
SPEC_EXAMPLE = {
    "score": 44.0, "execution_time": 136, "output": "Text relevant to the entire submission",
    "output_format": "simple_format", "test_output_format": "text", "test_name_format": "text",
    "visibility": "after_due_date", "stdout_visibility": "visible", "extra_data": {},
    "tests": [{"score": 2.0, "max_score": 2.0, "status": "passed", "name": "Your name here",
               "name_format": "text", "number": "1.1", "output": "Giant multiline string",
               "output_format": "text", "tags": ["tag1", "tag2"], "visibility": "visible", "extra_data": {}}],
    "leaderboard": [{"name": "Accuracy", "value": .926}, {"name": "Time", "value": 15.1, "order": "asc"},
                    {"name": "Stars", "value": "*****"}],
}
GRADER_SHAPE = {
    "score": 19, "execution_time": 41.5, "output": "18 of 20 items passed", "visibility": "visible",
    "stdout_visibility": "hidden",
    "tests": [{"name": "01-signal/poll-pending: Pending means ...", "number": "01-signal/poll-pending",
               "score": 2, "max_score": 2, "status": "passed", "output": "clause", "visibility": "visible"},
              {"name": "01-signal/hidden-1", "number": "01-signal/hidden-1", "score": 0, "max_score": 1,
               "status": "failed", "output": "what broke", "visibility": "after_published"}],
}


@pytest.mark.parametrize("data", [
    SPEC_EXAMPLE, GRADER_SHAPE,
    {"score": 0},
    {"tests": [{"score": 1, "max_score": 1}, {"score": 0, "max_score": 2}]},   # no top-level score
    {"score": 3, "tests": [{"name": "Compilation check", "status": "passed"}]},  # informational check
], ids=["spec-example", "grader-shape", "score-only", "scores-on-tests", "status-only-test"])
def test_valid_examples_pass(data):
    assert results_json.validate(data) == []


@pytest.mark.parametrize("data,error", [
    ({}, "(top level): a score is required at the top level unless every test has its own"),
    ({"tests": [{"score": 1}, {"max_score": 1}]}, "unless every test has its own"),
    ({"tests": []}, "unless every test has its own"),
    ({"score": "10"}, "score: '10' is not of type 'number'"),
    ({"score": 1, "visibility": "public"},
     "visibility: 'public' is not one of ['hidden', 'after_due_date', 'after_published', 'visible']"),
    ({"score": 1, "tests": [{"score": 1, "status": "pass"}]}, "tests[0].status: 'pass' is not one of"),
    ({"score": 1, "tests": [{"score": 1, "maxscore": 1}]},
     "tests[0]: Additional properties are not allowed ('maxscore' was unexpected) (the spec names no such field)"),
    ({"score": 1, "tests": [{"score": 1, "number": 1.1}]}, "tests[0].number: 1.1 is not of type 'string'"),
    ({"score": 1, "tests": [{"score": 1, "output_format": "markdown"}]}, "tests[0].output_format: 'markdown'"),
    ({"score": 1, "leaderboard": [{"value": 3}]}, "leaderboard[0]: 'name' is a required property"),
    ({"score": 1, "leaderboard": [{"name": "t", "value": 3, "order": "up"}]}, "leaderboard[0].order"),
    ({"score": float("nan")}, "score: nan is not a JSON number"),
    ({"score": 1, "execution_time": -1}, "execution_time: -1 is less than the minimum of 0"),
    ([], "(top level): [] is not of type 'object'"),
])
def test_broken_examples_fail_with_a_readable_error(data, error):
    errors = results_json.validate(data)
    assert any(error in e for e in errors), errors
    assert all("\n" not in e for e in errors)


def test_write_is_valid_json_with_control_characters_cleaned(tmp_path):
    data = {"score": 1, "output": HOSTILE, "tests": [{"score": 1, "name": HOSTILE, "output": HOSTILE}],
            "extra_data": {HOSTILE: [HOSTILE]}}
    path = results_json.write(tmp_path / "out" / "results.json", data)
    raw = path.read_bytes()
    back = json.loads(raw)
    for s in (back["output"], back["tests"][0]["name"], back["tests"][0]["output"], list(back["extra_data"])[0]):
        assert s == 'a\tbfake 21/21\n"\\  </pre><script>x</script> end'
    assert b"\x1b" not in raw and b"\x00" not in raw
    assert data["output"] == HOSTILE   # the caller's data is not changed
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"
    assert [p.name for p in path.parent.iterdir()] == ["results.json"]   # no temporary file left


def test_the_encoder_keeps_raw_control_characters_valid():
    """Even a string write() did not clean (had it been skipped) is valid
    JSON from the encoder: that is what the old printf fallback was not."""
    text = json.dumps({"score": 0, "output": "\x00\t\r\x1b\"\\"}, ensure_ascii=False)
    assert json.loads(text)["output"] == "\x00\t\r\x1b\"\\"


def test_write_refuses_invalid_data_and_writes_nothing(tmp_path):
    path = tmp_path / "results.json"
    with pytest.raises(ValueError, match=r"not a valid results.json: tests\[0\].score: 'x' is not of type"):
        results_json.write(path, {"score": 1, "tests": [{"score": "x"}]})
    assert not path.exists()
    path.write_text('{"score": 7}')
    with pytest.raises(ValueError):
        results_json.write(path, {"score": float("inf")})
    assert json.loads(path.read_text()) == {"score": 7}   # the old file is untouched


def test_fallback_is_valid_whatever_the_log_holds(tmp_path):
    log = ("compiling...\n" * 2000) + "signal.c:3: error: expected ';'\t<here>\r\n" + HOSTILE
    data = results_json.fallback("the grader crashed: KeyError 'x'\x1b[31m", log)
    assert results_json.validate(data) == []
    assert data["score"] == 0 and len(data["tests"]) == 1
    test = data["tests"][0]
    assert test["status"] == "failed" and test["visibility"] == "visible" and test["output_format"] == "text"
    assert test["output"].startswith("the grader crashed: KeyError 'x'\n\nThe end of the grader's log:\n\n[... the first")
    assert "signal.c:3: error: expected ';'\t<here>\n" in test["output"] and "\x1b" not in test["output"]
    assert len(test["output"]) < 5000
    back = json.loads(results_json.write(tmp_path / "r.json", data).read_text())
    assert back == data


def test_fallback_without_a_log():
    data = results_json.fallback("", None)
    assert results_json.validate(data) == []
    assert data["tests"][0]["output"].startswith("the grader stopped before it wrote its results")


def test_command_line_fallback_and_validate(tmp_path):
    log = tmp_path / "grade.txt"
    log.write_bytes(b"a\tb\x1b[2J\xff\xfe \"quoted\" \\ back\n")
    out = tmp_path / "results" / "results.json"
    env = dict(os.environ, PYTHONPATH=str(GRADER))
    cmd = [sys.executable, "-m", "lab_grader.results_json"]
    proc = subprocess.run(cmd + ["fallback", str(out), 'status 2: "make grade" failed', str(log)],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert 'status 2: "make grade" failed' in data["output"]
    assert 'a\tb\ufffd\ufffd "quoted" \\ back' in data["tests"][0]["output"]
    assert subprocess.run(cmd + ["validate", str(out)], env=env).returncode == 0
    out.write_text('{"score": "x"}')
    proc = subprocess.run(cmd + ["validate", str(out)], capture_output=True, text=True, env=env)
    assert proc.returncode == 1 and "score: 'x' is not of type 'number'" in proc.stderr
    assert subprocess.run(cmd, capture_output=True, env=env).returncode == 2


def test_an_unjudged_item_in_omit_mode_is_one_line_of_no_points():
    """Gradescope's default assignment (UNJUDGED=omit): an item the platform
    could not measure is 0 of 0, one line, no failed status (so nobody asks
    for a regrade of it); the summary counts visible items only; the review
    list is a hidden entry of no points. Valid against the schema."""
    import types
    from lab_grader.outcomes import Status

    def result(key, status, hidden=False, lane="plain"):
        item = types.SimpleNamespace(key=f"05-timer/{key}", id=key, clause=f"{key}'s clause", points=2,
                                     hidden=hidden, lane=lane, stage="05-timer", section="#x")
        return types.SimpleNamespace(item=item, status=status, points=2 if status == Status.PASSED else 0,
                                     summary="cannot judge: one CPU usable", outcome=None, build_error=None)
    results = [result("ok", Status.PASSED), result("lateness", Status.NOT_JUDGED),
               result("secret", Status.PASSED, hidden=True)]
    grading = types.SimpleNamespace(untrusted=[], stages={"05-timer": types.SimpleNamespace(chapter="docs/05.md", number=5)},
                                    builds={"05-timer": types.SimpleNamespace(
        notes=[], remarks=[], warnings=[], ok=True, error=None, review=["time_driver.c: uses dlsym"])})
    data = results_json.build(grading, results, 1.0, unjudged="omit")
    assert results_json.validate(data) == [], results_json.validate(data)
    late = next(t for t in data["tests"] if t["number"] == "05-timer/lateness")
    assert late["max_score"] == 0 and "status" not in late and "\n" not in late["output"], late
    assert "not part of your score" in late["output"] and "regrade" not in late["output"], late
    assert data["output"].startswith("1 of 2 visible items passed"), data["output"]
    review = next(t for t in data["tests"] if t["number"] == "05-timer/review")
    assert review["visibility"] == "hidden" and review["max_score"] == 0, review
