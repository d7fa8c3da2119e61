"""JUnit XML for CI tools (lab_grader/junit.py): valid against the Ant JUnit
schema (checked with xmllint), a suite per stage, a testcase per item, the
points where the schema allows them, and no student text that breaks XML."""
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from conftest import GRADER

sys.path.insert(0, str(GRADER))
from lab_grader import junit  # noqa: E402

XSD = GRADER / "schemas" / "JUnit.xsd"
HOSTILE = "\x1b[2J\x1b[Hall 21/21 passed\r\x00\x07\x08\x0b\x0c\x1b]0;owned\x07 <b>&amp;</b> ]]> \ud800 \ufffe end"

CASES = [
    {"stage": "01-signal", "item": "poll-pending", "points": 2, "max_points": 2, "status": "passed",
     "seconds": 1.25, "summary": "Pending means a registered waker", "details": ""},
    {"stage": "01-signal", "item": "latest-waker", "points": 0, "max_points": 1.5, "status": "failed",
     "seconds": 0.5, "summary": "signal_test.c:42: the old waker was woken " + HOSTILE,
     "details": "signal_test.c:42: the old waker was woken\n  clause: only the latest waker\n" + HOSTILE},
    {"stage": "07-work-stealing", "item": "speedup", "points": 0, "max_points": 2, "status": "not-judged",
     "seconds": 0, "summary": "not judged: 1 CPU, the item needs 2", "details": "run it on a machine with 2 CPUs"},
]


def xmllint(path):
    if not shutil.which("xmllint"):
        pytest.fail("xmllint is missing: apt-get install libxml2-utils (grader/deps.sh test)")
    return subprocess.run(["xmllint", "--noout", "--schema", str(XSD), str(path)], capture_output=True, text=True)


def test_valid_against_the_ant_schema(tmp_path):
    path = junit.write(tmp_path / "junit.xml", CASES)
    proc = xmllint(path)
    assert proc.returncode == 0, proc.stderr
    assert "validates" in proc.stderr


def test_the_schema_check_is_real(tmp_path):
    """A file shaped like pytest's (attributes on <testsuites>, a suite
    without <properties> or <system-out>, properties on a testcase) breaks
    the Ant schema: xmllint must say so, or the test above proves nothing."""
    bad = tmp_path / "pytest.xml"
    bad.write_text('<?xml version="1.0"?><testsuites name="pytest" tests="1"><testsuite name="x" tests="1" '
                   'errors="0" failures="0" skipped="0" time="1" timestamp="2026-01-01T00:00:00" hostname="h">'
                   '<testcase classname="x" name="y" time="1"><properties/></testcase></testsuite></testsuites>')
    assert xmllint(bad).returncode != 0


def test_a_suite_per_stage_and_a_case_per_item(tmp_path):
    root = ET.parse(junit.write(tmp_path / "j.xml", CASES)).getroot()
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["01-signal", "07-work-stealing"]
    first = suites[0]
    assert (first.get("tests"), first.get("failures"), first.get("skipped"), first.get("errors")) == ("2", "1", "0", "0")
    assert first.get("time") == "1.750" and first.get("package") == "lab-grader" and first.get("id") == "0"
    cases = first.findall("testcase")
    assert [(c.get("classname"), c.get("name"), c.get("time")) for c in cases] == [
        ("01-signal", "poll-pending", "1.250"), ("01-signal", "latest-waker", "0.500")]
    assert list(cases[0]) == []
    assert suites[1].get("skipped") == "1"
    skipped = suites[1].find("testcase/skipped")
    assert skipped.get("message") == "not judged: 1 CPU, the item needs 2"
    assert skipped.text == "run it on a machine with 2 CPUs"


def test_points_are_suite_properties(tmp_path):
    """The Ant schema allows <properties> only on <testsuite>."""
    root = ET.parse(junit.write(tmp_path / "j.xml", CASES)).getroot()
    props = {p.get("name"): p.get("value") for p in root.find("testsuite").find("properties")}
    assert props == {"points": "2", "max_points": "3.5", "points.poll-pending": "2",
                     "max_points.poll-pending": "2", "points.latest-waker": "0", "max_points.latest-waker": "1.5"}
    assert root.find("testsuite").find("system-out").text == "01-signal: 2/3.5 points\n"


def test_failure_holds_the_full_diagnosis_and_no_control_characters(tmp_path):
    path = junit.write(tmp_path / "j.xml", CASES)
    raw = path.read_bytes()
    assert not any(b < 0x20 and b not in (0x09, 0x0A) for b in raw), "a control character reached the file"
    failure = ET.parse(path).getroot().find("testsuite/testcase[@name='latest-waker']/failure")
    assert failure.get("type") == "failed"
    assert failure.get("message").startswith("signal_test.c:42: the old waker was woken all 21/21 passed")
    assert "\n" not in failure.get("message")
    assert failure.text.startswith("signal_test.c:42: the old waker was woken\n  clause: only the latest waker\n")
    assert "<b>&amp;</b> ]]>" in failure.text and "owned" not in failure.text
    assert "all 21/21 passed\n" in failure.text   # the carriage return shows as a new line
    assert xmllint(path).returncode == 0


def test_odd_values_still_validate(tmp_path):
    cases = [{"stage": "", "item": "", "points": None, "max_points": float("nan"), "status": "failed",
              "seconds": -3, "summary": None, "details": None},
             {"stage": "03 executor\n", "item": "a b\tc", "points": 1e-7, "max_points": 1, "status": "passed",
              "seconds": float("inf")}]
    path = junit.write(tmp_path / "j.xml", cases)
    assert xmllint(path).returncode == 0, xmllint(path).stderr
    root = ET.parse(path).getroot()
    assert root.find("testsuite").get("name") == "unknown-stage"
    assert root.findall("testsuite")[1].get("name") == "03 executor"


def test_an_unknown_status_is_refused(tmp_path):
    with pytest.raises(ValueError, match="status must be one of passed, failed, not-judged"):
        junit.write(tmp_path / "j.xml", [dict(CASES[0], status="crashed")])
    assert not (tmp_path / "j.xml").exists()


def test_no_cases_is_an_empty_valid_file(tmp_path):
    path = junit.write(tmp_path / "j.xml", [])
    assert xmllint(path).returncode == 0
    assert list(ET.parse(path).getroot()) == []
