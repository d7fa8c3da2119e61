"""The rubrics are coherent: every item's tests exist, every test is graded,
every docs anchor exists, the generator's handout is up to date."""
import re
import subprocess
import sys

import pytest

from conftest import GRADER, ROOT, stages

sys.path.insert(0, str(GRADER))
from lab_grader import build, plan  # noqa: E402

STAGES = stages()


def list_tests(binary):
    """The suite::name of every test in a Criterion binary, as --list prints them."""
    proc = subprocess.run([str(binary), "--list"], capture_output=True, text=True, timeout=60)
    tests, suite = [], None
    for line in (proc.stdout + proc.stderr).splitlines():
        m = re.match(r"^(\S+): \d+ tests?$", line)
        if m:
            suite = m.group(1)
            continue
        m = re.match(r"^[├└│─ ]+(\S+)$", line)
        if m and suite:
            tests.append(f"{suite}::{m.group(1)}")
    return tests


def slugs(markdown):
    """GitHub-style heading anchors, plus explicit <a id="..."> anchors."""
    out = set(re.findall(r'<a (?:id|name)="([^"]+)"', markdown))
    for m in re.finditer(r"^#{1,6}\s+(.*)$", markdown, re.M):
        text = re.sub(r"[`*_]", "", m.group(1)).strip().lower()
        slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        out.add(slug)
    return out


@pytest.mark.parametrize("stage", STAGES, ids=[s.name for s in STAGES])
def test_sections_exist(stage):
    chapter = ROOT / stage.chapter
    assert chapter.exists(), f"{stage.chapter} is missing"
    anchors = slugs(chapter.read_text())
    missing = [f"{i.id} -> {i.section}" for i in stage.items if i.section.lstrip("#") not in anchors]
    assert not missing, f"rubric sections with no anchor in {stage.chapter}: {missing}"


@pytest.mark.parametrize("stage", STAGES, ids=[s.name for s in STAGES])
def test_every_test_is_graded_and_every_item_has_tests(stage, tmp_path):
    b = build.Builder(ROOT, ROOT / "build" / "grade")
    by_name = {s.name: s for s in STAGES}

    def closure(s):
        out = []
        for u in s.uses:
            out += [v for v in closure(by_name[u]) + [u] if v not in out]
        return out
    names = closure(stage) + [stage.name]
    dirs = [ROOT / "solutions" / n for n in names]
    objs = b.test_objects(GRADER / "tests" / stage.name, "plain", dirs)
    srcs = [ROOT / "solutions" / n / f for n in names for f in by_name[n].sources]
    objs += [b.compile(s, "plain", dirs, werror=True).obj for s in srcs]
    binary = b.link(objs + b.common_objects("plain"), tmp_path / "t", "plain")
    tests = plan.tests_in([GRADER / "tests" / stage.name])
    assert tests, "the stage's test sources define no test"
    # the grader learns test names from its sources, never by running a
    # binary: they must be what Criterion itself lists, in its order (this
    # binary is the reference's, so running it here is safe)
    assert list_tests(binary) == tests, "plan.tests_in disagrees with the binary's --list"
    used = set()
    for item in stage.items:
        if item.lane == "quiz":
            continue
        used.update(plan.expand(item.tests, tests))  # raises on a pattern that matches nothing
    unused = sorted(set(tests) - used)
    assert not unused, f"tests no rubric item grades: {unused}"


@pytest.mark.parametrize("stage", STAGES, ids=[s.name for s in STAGES])
def test_race_items_repeat(stage):
    for item in stage.lane_items("race"):
        assert item.runs >= 2, f"{item.key}: a race item must run more than once"


def test_labs_up_to_date():
    proc = subprocess.run([sys.executable, str(GRADER / "authoring" / "skeleton.py"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("stage", [s for s in STAGES if s.lane_items("quiz")],
                         ids=[s.name for s in STAGES if s.lane_items("quiz")])
def test_quiz_questions_graded(stage):
    from lab_grader import quiz
    key = quiz.load(ROOT / "solutions" / stage.name / quiz.FILE)
    asked = {q for item in stage.lane_items("quiz") for q in item.tests}
    assert asked <= set(key), f"quiz items name questions the key lacks: {sorted(asked - set(key))}"
    assert set(key) <= asked, f"questions no quiz item grades: {sorted(set(key) - asked)}"
    for qid, q in key.items():
        assert q["answer"] in q["choices"], f"{qid}: the key's answer is not one of its choices"
    labs = quiz.load(ROOT / "labs" / stage.name / quiz.FILE)
    assert all(not q["answer"] for q in labs.values()), "labs/ carries quiz answers"
