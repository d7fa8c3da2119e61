"""The graded hints: every hint block of docs/hints/ parses, names a rubric
item of its stage and numbers its levels 1..k; `make hint` hands them out one
level at a time and refuses a misspelt STAGE or ITEM in one line; and no
chapter prints hints inline or a student region of solutions/ in full."""
import re
import subprocess
import sys

import pytest

from conftest import GRADER, ROOT, stages

sys.path.insert(0, str(GRADER))
import tools  # noqa: E402


def ids(stage):
    return [i.id for i in stage.items if not i.hidden]


@pytest.mark.parametrize("stage", stages(), ids=lambda s: s.name)
def test_every_hint_block_parses(stage):
    path = ROOT / "docs" / "hints" / f"{stage.name}.md"
    assert path.is_file(), f"{stage.name} has no hint file {path.relative_to(ROOT)}"
    hints = tools.parse_hints(path, ids(stage))   # HintError names the line
    assert hints, f"{path.name}: no hint blocks"
    blocks = path.read_text().count("<details")
    assert blocks == sum(len(v) for v in hints.values()), f"{path.name}: a <details> block did not parse"


LADDER = 3   # a question, a nudge, a near-answer (issue 28)


@pytest.mark.parametrize("stage", stages(), ids=lambda s: s.name)
def test_every_item_has_a_ladder_of_three(stage):
    """Every gradable item (not hidden, not a quiz claim) has at least three
    levels, and its first level asks: it holds a question, so that the first
    thing a student reads is not the fix."""
    path = ROOT / "docs" / "hints" / f"{stage.name}.md"
    hints = tools.parse_hints(path, ids(stage))
    gradable = [i.id for i in stage.items if not i.hidden and i.lane != "quiz"]
    short = {item: len(hints.get(item, [])) for item in gradable if len(hints.get(item, [])) < LADDER}
    assert not short, (f"{path.name}: items with fewer than {LADDER} hint levels (item: levels): "
                       + ", ".join(f"{k}: {v}" for k, v in short.items()))
    telling = [item for item in gradable if "?" not in hints[item][0]]
    assert not telling, f"{path.name}: the first level of {telling} asks no question"


BLOCK = '<details markdown="1">\n<summary>{item}, level {level}</summary>\n\n{body}\n\n</details>\n\n'


@pytest.mark.parametrize("text, error", [
    (BLOCK.format(item="a", level=1, body="x") + BLOCK.format(item="a", level=3, body="y"), "without gaps"),
    (BLOCK.format(item="a", level=2, body="x"), "without gaps"),
    (BLOCK.format(item="nope", level=1, body="x"), "no rubric item 'nope'"),
    (BLOCK.format(item="a", level=1, body="x") + "<details>\n<summary>a, level 2</summary>\n\ny\n</details>\n",
     "outside a hint block"),
    ('<details markdown="1">\n<summary>a, level 1</summary>\n\nx\n\n' + BLOCK.format(item="a", level=2, body="y"),
     "holds another"),
    (BLOCK.format(item="a", level=1, body=" "), "is empty"),
])
def test_a_malformed_hint_file_is_refused(tmp_path, text, error):
    path = tmp_path / "01-x.md"
    path.write_text("# hints\n\n" + text)
    with pytest.raises(tools.HintError, match=error):
        tools.parse_hints(path, ["a", "b"])


def hint(state, *args):
    return subprocess.run([sys.executable, str(GRADER / "tools.py"), "hint", "--state", str(state), *args],
                          capture_output=True, text=True, timeout=60)


def test_hint_hands_out_one_level_at_a_time(tmp_path):
    state = tmp_path / ".hints"
    stage = next(s for s in stages() if s.name == "03-executor")
    levels = tools.parse_hints(ROOT / "docs" / "hints" / f"{stage.name}.md", ids(stage))
    item = max(levels, key=lambda i: len(levels[i]))
    k = len(levels[item])
    assert k >= 2
    seen = [hint(state, "--stage", "3", "--item", item) for _ in range(k + 1)]
    for n, p in enumerate(seen, 1):
        assert p.returncode == 0, p.stderr
        level = min(n, k)
        assert f"03-executor/{item}: hint {level} of {k}" in p.stdout, p.stdout
        assert levels[item][level - 1] in p.stdout
        for other in range(k):                  # only that level: none of the others
            if other != level - 1:
                assert levels[item][other] not in p.stdout
    assert state.read_text() == f"03-executor/{item} {k}\n"
    listing = hint(state, "--stage", "03-executor")
    assert listing.returncode == 0 and f"{k} of {k} seen" in listing.stdout
    reset = hint(state, "--stage", "3", "--item", item, "--reset")
    assert reset.returncode == 0 and state.read_text() == ""
    again = hint(state, "--stage", "3", "--item", item)
    assert f"hint 1 of {k}" in again.stdout
    quiz = next(s for s in stages() if s.name == "04-deadline-signal")   # a quiz item has no hints
    bare = next(i.id for i in quiz.items if i.lane == "quiz")
    p = hint(state, "--stage", "4", "--item", bare)
    assert p.returncode == 0 and "no written hints" in p.stdout and quiz.chapter in p.stdout, p.stdout


def test_quiz_items_have_no_hints():
    """A hint for a claim of the quiz would be its answer."""
    for stage in stages():
        hints = tools.parse_hints(ROOT / "docs" / "hints" / f"{stage.name}.md", ids(stage))
        quiz = [i.id for i in stage.items if i.lane == "quiz" and i.id in hints]
        assert not quiz, f"{stage.name}: hints for quiz items {quiz}"


@pytest.mark.parametrize("args, names", [
    (["--stage", "3", "--item", "dedlock"], "deadlock"),
    (["--stage", "9", "--item", "deadlock"], "03-executor"),
    (["--stage", "", "--item", "deadlock"], "01-signal"),
])
def test_a_misspelt_stage_or_item_is_one_line(tmp_path, args, names):
    p = hint(tmp_path / ".hints", *args)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and names in p.stderr, p.stderr
    assert not (tmp_path / ".hints").exists()


def test_make_hint_is_wired():
    p = subprocess.run(["make", "-s", "-C", str(ROOT), "hint", "STAGE=1", "ITEM=no-such-item"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "ITEM=no-such-item: no such item in 01-signal" in p.stderr, p.stderr


def student_regions():
    """The student regions of solutions/, as lists of normalized code lines."""
    def norm(line):
        line = re.sub(r"\s+", " ", re.sub(r"/\*.*?\*/|//.*", "", line)).strip()
        return line if len(line) > 3 else None
    regions = []
    for f in sorted(ROOT.glob("solutions/*/*.c")):
        cur = None
        for line in f.read_text().splitlines():
            if "BEGIN STUDENT" in line and "HIDDEN" not in line and "FIELDS" not in line:
                cur = []
            elif "END STUDENT" in line and cur is not None:
                regions.append((f.relative_to(ROOT), [n for n in map(norm, cur) if n]))
                cur = None
            elif cur is not None:
                cur.append(line)
    return regions, norm


def test_no_chapter_prints_hints_or_solution_code():
    """Hints live in docs/hints/ only; and no code block anywhere in docs/
    repeats 4 consecutive lines of a student region (a solution function,
    or the heart of one, printed for the student to copy)."""
    for doc in sorted((ROOT / "docs").glob("0*.md")):
        assert "<details" not in doc.read_text(), f"{doc.name} prints hints inline: they belong in docs/hints/"
    regions, norm = student_regions()
    at = {}
    for f, r in regions:
        for i, line in enumerate(r):
            at.setdefault(line, []).append((f, r, i))
    for doc in sorted((ROOT / "docs").rglob("*.md")):
        for block in re.findall(r"^```\w*\n(.*?)^```", doc.read_text(), re.M | re.S):
            lines = [n for n in map(norm, block.splitlines()) if n]
            for j, line in enumerate(lines):
                for f, r, i in at.get(line, []):
                    k = 0
                    while j + k < len(lines) and i + k < len(r) and lines[j + k] == r[i + k]:
                        k += 1
                    assert k < 4, (f"{doc.relative_to(ROOT)} prints {k} lines of a student region of {f} "
                                   f"in a row:\n  " + "\n  ".join(lines[j:j + k]))


def test_the_site_keeps_hints_folded_and_out_of_search():
    """grader/authoring/site_hooks.py: a hint page's meta excludes it from
    search (mkdocs-material 9), the written search index loses its entries
    (older versions, mkdocs' own search), and a <details> is never open on
    load. Needs mkdocs (make docs installs it); `make docs` and test_site.py
    build the real site."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("pymdownx")
    import types
    sys.path.insert(0, str(GRADER / "authoring"))
    import site_hooks

    page = types.SimpleNamespace(file=types.SimpleNamespace(src_path="hints/01-signal.md"), meta={})
    out = site_hooks.on_page_markdown('<details open markdown="1">\n<summary>a, level 1</summary>\n\nx\n\n</details>\n',
                                      page, {}, None)
    assert page.meta == {"search": {"exclude": True}}
    assert "<details" in out and not re.search(r"<details[^>]*\bopen\b", out), out
    chapter = types.SimpleNamespace(file=types.SimpleNamespace(src_path="01-signal.md"), meta={})
    site_hooks.on_page_markdown("# x\n", chapter, {}, None)
    assert chapter.meta == {}
    index = {"config": {}, "docs": [{"location": "01-signal.html", "text": "a"},
                                    {"location": "hints/01-signal.html", "text": "b"},
                                    {"location": "hints/01-signal.html#latest-waker-level-1", "text": "c"}]}
    assert [d["location"] for d in site_hooks.without_hints(index)["docs"]] == ["01-signal.html"]


# ---- reports say what happened, not what to write (issue 28) ----------------

# A report text a student sees (an assertion's message, an explorer's or a
# checker's sentence in common/testing/, an item's hang hint) says what
# happened, the clause it broke (by number) and the values seen; the way on
# is `make hint` (the report prints the command). These shapes hand over the
# code instead: an imperative ("use waker_clone_from", "build them with
# wake_obj_waker()", "Count a join handle's reference only while ..."), a
# must that names the call to make ("the drop must queue an
# IORING_OP_ASYNC_CANCEL"), or the barrier to put in ("take needs a seq_cst
# fence between the two").
_SENTENCE = r"(?:^|[.;:?!]\s+|\(\s*|\bthen\s+|\bso\s+)"
_VERB = (r"(?:use|call|build|write|submit|queue|add|move|replace|count|look at|take|hold|clear|check|put|"
         r"make sure|remember to|do not|don't|keep|drop|wake|free|store|lock|unlock|recheck|announce|give|set|"
         r"copy|make(?! hint| grade| check| debug| trace| test))")
_OBJECT = r"(?:the|a|an|it|them|what|every|each|only|one|its|and|before|all|[a-z]+_[a-z_]+(?:\(\))?)"
FIX_PHRASES = [
    ("an imperative", re.compile(_SENTENCE + _VERB + r"\s+(?!after free)" + _OBJECT + r"\b", re.I)),
    ("a must that names the call", re.compile(r"\b(?:must|should|has to|have to|needs? to)\s+(?:also\s+)?"
                                              r"(?:call|use|queue|submit|build|be told to use|check what|"
                                              r"(?:clear|take|look at|hold|store|wake) only)\b", re.I)),
    ("the barrier to put in", re.compile(r"\bneeds? an? [\w -]*?(?:fence|lock|barrier)\b", re.I)),
    ("the helper to call", re.compile(r"\b(?:use|call|build \w+ with)\s+[a-z]+_[a-z_]+\b")),
]
# texts that are not a report of the student's code: a usage error for a
# variable the student types (LAB_SCHEDULE), said to whoever mistyped it
FIX_ALLOWED = ("is not a schedule: write the first thread",)


REPORTING = ("judge.py", "checkers.py", "calibrate.py", "diagnosis.py")


def report_texts():
    """(where, text) of every string a student's report can carry: each run
    of adjacent string literals of the tests and of common/testing/ (comments
    left out), the strings of the grader's modules that word a failure, and
    each rubric item's hang hint."""
    lit = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
    run = re.compile(lit.pattern + r'(?:\s*' + lit.pattern + r')*')
    files = sorted(f for d in (GRADER / "tests", ROOT / "common" / "testing")
                   for f in d.rglob("*") if f.suffix in (".c", ".h"))
    for f in files:
        code = re.sub(r"/\*.*?\*/|//[^\n]*", lambda m: re.sub(r"[^\n]", " ", m.group(0)), f.read_text(), flags=re.S)
        for m in run.finditer(code):
            text = "".join(lit.findall(m.group(0)))
            if len(text) > 20:
                yield f"{f.relative_to(ROOT)}:{code.count(chr(10), 0, m.start()) + 1}", text
    for f in REPORTING:   # the grader's own words of a failure: a hang's likely cause, a checker's finding
        for m in re.finditer(r'f?"((?:[^"\\\n]|\\.)*)"', (GRADER / "lab_grader" / f).read_text()):
            if len(m.group(1)) > 20:
                yield f"grader/lab_grader/{f}", m.group(1)
    for stage in stages():
        for item in stage.items:
            if item.hang:
                yield f"grader/rubric/{stage.name}.toml {item.id}", item.hang


def fix_phrase(text):
    """The first shape of FIX_PHRASES the text has, with its words, or None."""
    if any(a in text for a in FIX_ALLOWED):
        return None
    for kind, rx in FIX_PHRASES:
        m = rx.search(text)
        if m:
            return f"{kind}: ...{text[max(0, m.start() - 40):m.end() + 40]}..."
    return None


@pytest.mark.parametrize("text, kind", [
    ("cloned its waker 4 times (use waker_clone_from, contract 2)", "an imperative"),
    ("do not will_wake() each other: build them with wake_obj_waker() so they share", "an imperative"),
    ("the waker is outside. Count a join handle's reference only while one exists", "an imperative"),
    ("still an orphan: the drop must queue an IORING_OP_ASYNC_CANCEL for it", "a must that names the call"),
    ("took both; take needs a seq_cst fence between the two", "the barrier to put in"),
    ("stale readiness; clear_ready must clear only the readiness of the snapshot's tick",
     "a must that names the call"),
    ("stranded. Look at every queue after announcing, not before", "an imperative"),
    ("it never parks while a task stays ready: give the driver a zero-timeout turn every 61 polls",
     "an imperative"),
    ("said Pending. Set JOIN_WAKER with a CAS that fails when COMPLETE is set", "an imperative"),
    ("cloned its waker 4 times; contract 2 allows one clone in all", None),
    ("the task never ran. The next hint: make hint STAGE=7 ITEM=wake-another", None),
    ("its future dropped during its own poll (use after free waiting to happen)", None),
    ("signal_complete must return SIGNAL_OK (contract 5)", None),
])
def test_the_fix_phrase_check_tells_a_fix_from_a_finding(text, kind):
    got = fix_phrase(text)
    assert (got is None) if kind is None else (got or "").startswith(kind), (text, got)


def test_no_report_text_hands_over_the_fix():
    """No failure text of the tests, common/testing/ or the rubrics' hang
    hints tells the student what code to write (FIX_PHRASES): they say what
    happened, the clause and the evidence, and the report adds the command
    for the next hint (diagnosis.hint_command)."""
    found = [f"{where}: {fix_phrase(text)}" for where, text in report_texts() if fix_phrase(text)]
    assert not found, "report texts that give the fix instead of the finding:\n  " + "\n  ".join(found)
