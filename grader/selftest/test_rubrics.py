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
def test_every_item_is_explained(stage):
    """The chapter's "How the grader checks each clause" names every item, so
    a student who lost a point can read what its tests force."""
    text = (ROOT / stage.chapter).read_text()
    heading = "## How the grader checks each clause"
    assert heading in text, f"{stage.chapter} has no '{heading}' section"
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([a-z0-9-]+)`", section))
    missing = [i.id for i in stage.items if i.id not in named]
    assert not missing, f"items that {stage.chapter}'s '{heading}' does not explain: {missing}"


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
    libs = [lib for n in names for lib in by_name[n].libs]   # stage 08's -luring (rubric libs)
    binary = b.link(objs + b.common_objects("plain"), tmp_path / "t", "plain", libs)
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


@pytest.mark.parametrize("stage", STAGES, ids=[s.name for s in STAGES])
def test_every_clause_cites_its_contract(stage):
    """A failure message names the contract it shows broken (test_mutants.py),
    so every item says which contract it checks: '(contract 3)',
    '(parker.h contract 6)', '(join.h)'. A written answer cites its claims."""
    import clauses
    bare = [i.id for i in stage.items if i.lane != "quiz" and not clauses.cited(i.clause)]
    assert not bare, f"items whose clause cites no header or contract (end it with '(header.h contract N)'): {bare}"


FUTURE_WORDS = re.compile(r"\b(Pending|future|poll|waker)s?\b", re.I)


def lab_test_texts(stage):
    """suite::name -> the text of that LAB_TEST's body, with the bodies of
    the same file's functions it calls (one level: a test's helpers)."""
    texts = {}
    for src in sorted((GRADER / "tests" / stage.name).glob("*.c")):
        code = src.read_text()
        helpers = dict(re.findall(r"^(?:static )?[\w \*]+?\b(\w+)\([^;{]*\)\s*\{(.*?)^\}", code, flags=re.M | re.S))
        parts = re.split(r"^LAB_TEST\((\w+), (\w+),[^)]*\)", code, flags=re.M)
        for suite, name, body in zip(parts[1::3], parts[2::3], parts[3::3]):
            called = [helpers[f] for f in set(re.findall(r"\b(\w+)\(", body)) if f in helpers]
            texts[f"{suite}::{name}"] = "\n".join([body] + called)
    return texts


@pytest.mark.parametrize("stage", STAGES, ids=[s.name for s in STAGES])
def test_hang_hints_fit_their_tests(stage):
    """A hang hint is said when one of the item's tests times out: it must
    not explain a parker's or a deque's hang with futures and wakers when no
    test of the item has any."""
    texts = lab_test_texts(stage)
    names = list(texts)
    wrong = []
    for item in stage.items:
        if not item.hang or item.lane == "quiz" or not FUTURE_WORDS.search(item.hang):
            continue
        tests = plan.expand(item.tests, names)
        if not any(FUTURE_WORDS.search(texts[t]) for t in tests):
            wrong.append(f"{item.id}: {item.hang!r}")
    assert not wrong, f"hang hints that speak of futures for tests with none: {wrong}"


@pytest.mark.parametrize("stage", STAGES, ids=[s.name for s in STAGES])
def test_checks_section_is_the_rubric_rendered(stage):
    """A chapter's "How the grader checks this stage" is its rubric and its
    tests rendered (grader/authoring/checks.py): an item added, moved to
    another lane or given other tests changes it, and the chapter must follow."""
    sys.path.insert(0, str(GRADER / "authoring"))
    import checks
    text = (ROOT / stage.chapter).read_text()
    assert checks.HEADING in text, f"{stage.chapter} has no '{checks.HEADING}' section"
    got = checks.block(text)
    assert got is not None, f"{stage.chapter} has no {checks.BEGIN} ... {checks.END} block"
    assert got == checks.render(stage), (f"{stage.chapter}'s '{checks.HEADING}' is not its rubric rendered: "
                                         "python3 grader/authoring/checks.py --write")
