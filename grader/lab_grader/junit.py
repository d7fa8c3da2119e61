"""JUnit XML for CI tools (Jenkins, GitLab, GitHub's test reporters): one
<testsuite> per stage, one <testcase> per rubric item, the item's own time,
its full diagnosis in the failure body, and its points. cases() makes the
cases of a grading (the diagnosis is diagnosis.py's), write() the file.

The file is valid against the Ant JUnit schema (grader/schemas/JUnit.xsd,
from windyroad/JUnit-Schema; see grader/schemas/README.md). That schema
decides three things here:
- <testcase> may not hold <properties>, so the points are the suite's
  properties: `points` and `max_points` for the stage, and
  `points.<item>` and `max_points.<item>` for each item;
- <testsuites> has no attributes, so suite_name goes into each suite's
  `package` attribute (required there, with `id`, the suite's index);
- every <testsuite> has <properties>, <system-out> and <system-err>, and a
  timestamp without a time zone (UTC here).

All text from the cases goes through text.clean(): student output reaches
the summaries and details, and a NUL or an escape sequence would make the
XML invalid or the CI page lie.
"""
import datetime
import math
import pathlib
import socket
import xml.etree.ElementTree as ET

from . import files, text
from .diagnosis import failure_block
from .outcomes import Status

STATUSES = ("passed", "failed", "not-judged")
# how much of one item's details a report keeps (the end, where the
# diagnosis is); a stage's whole log is elsewhere
DETAILS_LIMIT = 64 * 1024


def _seconds(value):
    """A time in seconds as xs:decimal wants it: no exponent, never negative."""
    try:
        v = float(value or 0)
    except (TypeError, ValueError):
        v = 0.0
    if not math.isfinite(v) or v < 0:
        v = 0.0
    return f"{v:.3f}"


def _points(value):
    """Points as a property value: 2, 1.5, 0.333333; never 2.0 or 1e-07."""
    try:
        v = float(value or 0)
    except (TypeError, ValueError):
        return "0"
    if not math.isfinite(v):
        return "0"
    out = f"{v:.6f}".rstrip("0").rstrip(".")
    return "0" if out in ("", "-0") else out


def _token(s, fallback):
    """A name for an xs:token attribute: one line, never empty."""
    return text.one_line(s, limit=200) or fallback


def _by_stage(cases):
    """The cases grouped by stage, stages in the order first seen."""
    groups = {}
    for case in cases:
        status = case.get("status")
        if status not in STATUSES:
            raise ValueError(f"case {case.get('stage')}/{case.get('item')}: status must be one of "
                             f"{', '.join(STATUSES)}, not {status!r}")
        groups.setdefault(str(case.get("stage") or "unknown-stage"), []).append(case)
    return groups


def build(cases, suite_name="lab-grader", timestamp=None, hostname=None):
    """The <testsuites> element for the cases (see write)."""
    when = (timestamp or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y-%m-%dT%H:%M:%S")
    host = _token(hostname or socket.gethostname(), "localhost")
    package = _token(suite_name, "lab-grader")
    root = ET.Element("testsuites")
    for index, (stage, group) in enumerate(_by_stage(cases).items()):
        stage_name = _token(stage, "unknown-stage")
        failures = sum(1 for c in group if c["status"] == "failed")
        skipped = sum(1 for c in group if c["status"] == "not-judged")
        total = sum(float(_seconds(c.get("seconds"))) for c in group)
        suite = ET.SubElement(root, "testsuite", {
            "name": stage_name, "package": package, "id": str(index),
            "timestamp": when, "hostname": host,
            "tests": str(len(group)), "failures": str(failures), "errors": "0",
            "skipped": str(skipped), "time": _seconds(total)})
        props = ET.SubElement(suite, "properties")
        got = sum(float(_points(c.get("points"))) for c in group)
        most = sum(float(_points(c.get("max_points"))) for c in group)
        ET.SubElement(props, "property", {"name": "points", "value": _points(got)})
        ET.SubElement(props, "property", {"name": "max_points", "value": _points(most)})
        for c in group:
            item = _token(c.get("item"), "unnamed-item")
            ET.SubElement(props, "property", {"name": f"points.{item}", "value": _points(c.get("points"))})
            ET.SubElement(props, "property", {"name": f"max_points.{item}", "value": _points(c.get("max_points"))})
        for c in group:
            case = ET.SubElement(suite, "testcase", {
                "classname": stage_name, "name": _token(c.get("item"), "unnamed-item"),
                "time": _seconds(c.get("seconds"))})
            summary = text.one_line(c.get("summary"), limit=500)
            details = text.tail(c.get("details") or summary, DETAILS_LIMIT)
            if c["status"] == "failed":
                node = ET.SubElement(case, "failure", {"message": summary, "type": "failed"})
                node.text = details
            elif c["status"] == "not-judged":
                node = ET.SubElement(case, "skipped", {"message": summary})
                node.text = details
        out = ET.SubElement(suite, "system-out")
        out.text = f"{stage_name}: {_points(got)}/{_points(most)} points\n"
        ET.SubElement(suite, "system-err")
    return root


def cases(grading, results):
    """The cases write takes, from a grading (pipeline.Builds and its item
    results): one per item, its diagnosis in full."""
    out = []
    for r in results:
        o = r.outcome
        out.append({"stage": r.item.stage, "item": r.item.id, "points": r.points, "max_points": r.item.points,
                      "status": str(r.status), "seconds": o.seconds if o is not None else 0.0,
                      "summary": r.summary if r.status != Status.PASSED else r.item.clause,
                      "details": "" if r.status == Status.PASSED else "\n".join(failure_block(grading, r))})
    return out


def write(path, cases, suite_name="lab-grader"):
    """Writes the JUnit XML of cases to path, atomically (a reader never
    sees half a file). cases is a list of dicts: stage, item, points,
    max_points, status ("passed", "failed" or "not-judged"), seconds,
    summary (one line) and details (the full diagnosis); a case with another
    status raises ValueError."""
    path = pathlib.Path(path)
    root = build(cases, suite_name)
    ET.indent(root)
    data = b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="utf-8") + b"\n"
    return files.write_atomic(path, data)
