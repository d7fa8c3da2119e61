"""Unit tests of the grader's parts that read other programs' output: the
skeleton generator, the records, Criterion's XML, Valgrind's logs, rubrics."""
import pathlib
import sys
import textwrap

import pytest

from conftest import GRADER, ROOT

sys.path.insert(0, str(GRADER))
sys.path.insert(0, str(GRADER / "authoring"))
import skeleton  # noqa: E402
from lab_grader import arguments, binary_run, checkers, judge, plan, records, rubric  # noqa: E402


# ---- skeleton generator ------------------------------------------------------

def test_code_region_becomes_todo_with_void_params():
    src = textwrap.dedent("""\
        int f(struct s *a,
              void (*cb)(void *), const char *names[4])
        {
            /* BEGIN STUDENT: add "them" up */
            return a->x;
            /* END STUDENT */
        }
    """)
    out = skeleton.studentize(src, "x.c")
    assert "return a->x" not in out
    assert '    LAB_TODO("add \\"them\\" up");' in out
    for p in ("a", "cb", "names"):
        assert f"    (void){p};" in out


def test_fields_and_hidden_regions():
    src = textwrap.dedent("""\
        struct st {
            /* BEGIN STUDENT FIELDS: a lock */
            int lock;
            /* END STUDENT */
        };
        /* BEGIN STUDENT HIDDEN */
        static int helper(void) { return 1; }
        /* END STUDENT */
        int keep;
    """)
    out = skeleton.studentize(src, "x.c")
    assert "int todo_your_fields_here; /* TODO: a lock */" in out
    assert "helper" not in out and "int keep;" in out


@pytest.mark.parametrize("src,msg", [
    ("/* BEGIN STUDENT: x */\nint a;\n", "without END"),
    ("int a;\n/* END STUDENT */\n", "without BEGIN"),
    ("/* BEGIN STUDENT: x */\n/* BEGIN STUDENT: y */\n/* END STUDENT */\n", "nested"),
    ("void f(void)\n{\n/* BEGIN STUDENT */\n/* END STUDENT */\n}\n", "needs a hint"),
])
def test_marker_errors(src, msg):
    with pytest.raises(skeleton.MarkerError, match=msg):
        skeleton.studentize(src, "x.c")


def test_todo_include_added_once():
    out = skeleton.add_todo_include('#include <stdio.h>\n#include "a.h"\nint x;\n')
    assert out.splitlines()[2] == '#include "lab_todo.h"'
    assert not skeleton.needs_todo_include(out + 'LAB_TODO("x");')


# ---- records -----------------------------------------------------------------

RECORD = """\
BEGIN 10 s::t
SEED 10 42
NOTE 10 polls=2
HANG 10 s::t still running
THREAD 10 10 main S
BT-BEGIN 10 10 hang
prog(f+0x10)[0x1]
BT-END
THREAD 10 11 x blocked
BEGIN 12 s::t
END 12 s::t abc
TODO 13 a.c:3 f() is not written yet
"""


def test_records_parse():
    runs = records.parse(RECORD)
    first, second, third = runs
    assert first.seed == "42" and first.notes == ["polls=2"] and not first.ended
    assert first.threads[0].frames == ["prog(f+0x10)[0x1]"]
    assert first.threads[1].state == "blocked"
    assert second.ended and second.nonce == "abc"
    assert third.todo.startswith("a.c:3")


def test_short_path():
    assert records.short_path("at f (/x/y/grader/tests/01-a/t.c:3)") == "at f (grader/tests/01-a/t.c:3)"
    assert records.short_path("/tmp/q/01-signal/signal.c:9") == "01-signal/signal.c:9"


# ---- Criterion XML and judging ----------------------------------------------------

XML = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="Criterion Tests" tests="3" failures="1" errors="1" disabled="0">
  <testsuite name="s" tests="3" failures="1" errors="1">
    <testcase name="ok" assertions="1" status="PASSED" time="0.000"></testcase>
    <testcase name="bad" assertions="1" status="FAILED" time="0.001">
      <failure type="assert" message="1 assertion(s) failed."><![CDATA[t.c:6: a "quoted" <msg>]]>&#10;</failure>
    </testcase>
    <testcase name="slow" assertions="0" status="ERRORED" time="2.005">
      <error type="timeout" message="The test timed out." />    </testcase>
  </testsuite>
</testsuites>"""


def test_parse_xml(tmp_path):
    p = tmp_path / "r.xml"
    p.write_text(XML)
    r = binary_run.parse_xml(p)
    assert r["s::ok"][0] == "PASSED"
    assert r["s::bad"][2] == 't.c:6: a "quoted" <msg>'
    assert r["s::slow"][1] == "timeout"


class NoSymbols:
    def frames(self, raw):
        return raw

    def sites(self, text):
        return text


def judged(test, report_line, record_text, nonce="n"):
    recs = {}
    for r in records.parse(record_text):
        recs.setdefault(r.test, []).append(r)
    report = {test: report_line} if report_line else {}
    return judge.one_test(test, report, recs, NoSymbols(), nonce)


def test_judge_verdicts():
    assert judged("s::a", ("PASSED", "", "", 0), "BEGIN 1 s::a\nEND 1 s::a n\n").verdict == "pass"
    assert judged("s::a", ("PASSED", "", "", 0), "BEGIN 1 s::a\n").verdict == "exited-early"
    assert judged("s::a", ("PASSED", "", "", 0), "BEGIN 1 s::a\nEND 1 s::a forged\n").verdict == "exited-early"
    assert judged("s::a", ("FAILED", "assert", "x", 0), "BEGIN 1 s::a\nTODO 1 f.c:1 g()\n").verdict == "not-started"
    assert judged("s::a", ("ERRORED", "crash", "", 0), "BEGIN 1 s::a\nCRASH 1 SEGV\n").message == "crashed (SIGSEGV)"
    assert judged("s::a", ("ERRORED", "timeout", "", 2), "BEGIN 1 s::a\n").verdict == "timeout"
    assert judged("s::a", None, "").verdict == "missing"
    # lab_cannot_judge: not judged with the nonce; a record without it (code
    # under test writing one) is an ordinary failure
    unjudged = judged("s::a", ("FAILED", "assert", "loaded", 0), "BEGIN 1 s::a\nUNJUDGED 1 n the machine is loaded\n")
    assert (unjudged.verdict, unjudged.message) == ("unjudged", "cannot judge on this machine, rerun: the machine is loaded")
    assert judged("s::a", ("FAILED", "assert", "x", 0), "BEGIN 1 s::a\nUNJUDGED 1 forged text\n").verdict == "fail"
    # the watchdog ended it: a stall (no reference run needed) or a test the
    # runner let run past its limit; either way a hang, not a crash
    stall = judged("s::a", ("ERRORED", "crash", "", 0), "BEGIN 1 s::a\nHANG 1 s::a stalled after 2.1 s of its 5.0 s "
                   "limit: every thread\n")
    assert (stall.verdict, stall.stalled) == ("timeout", True) and stall.message.startswith("stopped after 2.1 s")
    late = judged("s::a", ("ERRORED", "crash", "", 0), "BEGIN 1 s::a\nHANG 1 s::a still running after 8.0 s of its 10.0 s "
                  "limit\nHANG 1 s::a killed after 11.0 s of its 10.0 s limit: the runner had not stopped it\n")
    assert (late.verdict, late.stalled) == ("timeout", False) and late.message.startswith("timed out after 10.0 s")
    assert judged("s::a", ("ERRORED", "crash", "", 0), "BEGIN 1 s::a\nCRASH 1 SEGV\nHANG 1 s::a stalled after 2.1 s "
                  "of its 5.0 s limit\n").verdict == "crash"


def test_filter_and_expand():
    assert binary_run.filter_for(["s::a"]) == "s/a"
    assert binary_run.filter_for(["s::a", "t::b"]) == "@(s/a|t/b)"
    assert plan.expand(["s/*"], ["s::a", "s::b", "t::a"]) == ["s::a", "s::b"]
    with pytest.raises(LookupError):
        plan.expand(["s/zzz"], ["s::a"])


def test_test_filter_narrows_each_item_to_the_tests_named():
    """TEST=a,b grades the items that run a or b, and each runs only those
    of its own tests (a rerun of one failing test, a mutant graded on the
    tests that catch it), not the rest of the item."""
    stages = rubric.load_all(ROOT / "grader" / "rubric")
    one = [s for s in stages if s.name == "01-signal"]
    whole = plan.make(ROOT, stages, one).of("01-signal")
    memory = next(i for i in whole.stage.items if i.id == "valgrind-drop-orders")
    assert len(whole.item_tests[memory.key]) > 1
    named = "signal_ownership/untaken_value_future_dropped_first,signal_poll/latest_waker_only"
    p = plan.make(ROOT, stages, one, test=named).of("01-signal")
    assert {i.id for i in p.items} >= {"valgrind-drop-orders", "ownership", "latest-waker"}
    assert "pending-registers" not in {i.id for i in p.items}
    for i in p.items:
        assert set(p.item_tests[i.key]) <= {"signal_ownership::untaken_value_future_dropped_first",
                                            "signal_poll::latest_waker_only"} and p.item_tests[i.key], i.id
    assert p.item_tests[memory.key] == ["signal_ownership::untaken_value_future_dropped_first"]
    args = arguments.check_grade(ROOT, target=str(ROOT / "solutions"), stage="1", test=named + ",signal_poll/latest_waker_only")
    assert args.test == named   # checked one by one, each once
    with pytest.raises(arguments.UsageError, match="no such test"):
        arguments.check_grade(ROOT, target=str(ROOT / "solutions"), stage="1", test=named + ",signal_poll/nosuch")


# ---- Valgrind logs -----------------------------------------------------------------

VG = """==7== Invalid read of size 4
==7==    at 0x1: f (a.c:3)
==7==  Address 0x2 is 0 bytes inside a block of size 8 free'd
==7==
==7== 16 bytes in 1 blocks are definitely lost in loss record 1 of 1
==7==    at 0x3: malloc (vg)
==7==    by 0x4: g (b.c:9)
==7==
"""


def test_valgrind_blocks():
    blocks = checkers.valgrind_errors(VG)
    assert len(blocks) == 2
    assert "Invalid read" in blocks[0][0] and "free'd" in blocks[0][2]
    assert "definitely lost" in blocks[1][0] and "g (b.c:9)" in blocks[1][2]


def _checked(message, by_pid, verdict):
    """Outcomes a (failed with message, pid 7), b (passed, pid 8) and c
    (failed, pid 9) after a checker's reports by_pid turned them into verdict."""
    import types
    from lab_grader.outcomes import Outcome, Verdict
    recs = {t: [types.SimpleNamespace(pid=p)] for t, p in (("a", "7"), ("b", "8"), ("c", "9"))}
    outs = {"a": Outcome(test="a", verdict=Verdict.FAIL, message=message),
            "b": Outcome(test="b", verdict=Verdict.PASS),
            "c": Outcome(test="c", verdict=Verdict.FAIL, message="x")}
    checkers.attach(outs, types.SimpleNamespace(records=recs), by_pid, (Verdict.PASS, Verdict.FAIL), verdict,
                    "checker: {n}", 3, 24)
    return outs


def test_a_thread_leak_of_a_failed_test_is_not_a_race():
    """A test that gave up on a stalled thread keeps its own failure when
    ThreadSanitizer's only report is the thread it left; a passing test with
    a leak, or a failing one with a real race, is still a race."""
    from lab_grader.outcomes import Verdict
    leak = ["WARNING: ThreadSanitizer: thread leak (pid=7)", "  Thread T1 (tid=8, finished) created by main thread at:"]
    race = ["WARNING: ThreadSanitizer: data race (pid=9)", "  Write of size 4 at 0x1 by thread T1:"]
    outs = _checked("lost wakeup at iteration 3", {"7": [leak], "8": [leak], "9": [leak, race]}, Verdict.RACE)
    assert outs["a"].verdict == Verdict.FAIL and outs["a"].message == "lost wakeup at iteration 3"
    assert "not a data race" in outs["a"].details[-1]
    assert outs["b"].verdict == Verdict.RACE and outs["c"].verdict == Verdict.RACE


def test_a_leak_of_a_failed_test_does_not_hide_its_failure():
    """A test whose check failed part-way leaves memory it never freed:
    Valgrind's leak reports are that failure's doing, and the report keeps
    the failed check; a bad access beside it, or a leak of a passing test,
    is still a memory error."""
    from lab_grader.outcomes import Verdict
    bad, leak = checkers.valgrind_errors(VG)
    outs = _checked("drop_value was called 0 times", {"7": [leak], "8": [leak], "9": [leak, bad]}, Verdict.MEMORY)
    assert outs["a"].verdict == Verdict.FAIL and outs["a"].message == "drop_value was called 0 times"
    assert "the failure above comes first" in outs["a"].details[-1]
    assert outs["b"].verdict == Verdict.MEMORY and outs["c"].verdict == Verdict.MEMORY


# ---- rubric validation ---------------------------------------------------------------

def write_rubric(tmp_path, body):
    p = tmp_path / "09-x.toml"
    p.write_text('stage = "09-x"\ntitle = "x"\nchapter = "docs/x.md"\nsources = ["x.c"]\n' + body)
    return p


@pytest.mark.parametrize("body,msg", [
    ("", "no items"),
    ('[[item]]\nid="a"\npoints=1\nlane="nope"\ntests=["s/a"]\nclause="c"\nsection="#s"\n', "lane must be"),
    ('[[item]]\nid="a"\npoints=1\nlane="plain"\ntests=[]\nclause="c"\nsection="#s"\n', "names no test"),
    ('[[item]]\nid="a"\npoints=1\nlane="plain"\ntests=["s/a"]\nclause="c"\nsection="#s"\n' * 2, "used twice"),
    ('[[item]]\nid="a"\npoints=0\nlane="plain"\ntests=["s/a"]\nclause="c"\nsection="#s"\n', "worth points"),
    ('[[item]]\nid="a"\npoints=1\nlane="plain"\ntests=["s/a"]\nclause="c"\nsection="#s"\nrepeat=3\n', "unknown keys"),
])
def test_rubric_errors(tmp_path, body, msg):
    with pytest.raises(rubric.RubricError, match=msg):
        rubric.load_stage(write_rubric(tmp_path, body))


def test_stage_selection():
    a = rubric.Stage("01-a", "", "", [], [], [], pathlib.Path("01-a.toml"))
    b = rubric.Stage("02-b", "", "", [], [], [], pathlib.Path("02-b.toml"))
    assert rubric.select([a, b], "2") == [b]
    assert rubric.select([a, b], "01-a,2") == [a, b]
    with pytest.raises(rubric.RubricError, match="no such stage"):
        rubric.select([a, b], "7")


# ---- quizzes ---------------------------------------------------------------------

def test_blank_answers():
    text = 'choices = ["a", "b"]\nanswer = "b"  # STUDENT-ANSWER\nanswer = "kept"\n'
    assert skeleton.blank_answers(text) == 'choices = ["a", "b"]\nanswer = ""\nanswer = "kept"\n'


def test_quiz_judge(tmp_path):
    from lab_grader import quiz
    key_file = tmp_path / "key.toml"
    key_file.write_text('[q1]\nchoices = ["yes", "no"]\nanswer = "yes"\n[q2]\nchoices = ["yes", "no"]\nanswer = "no"\n')
    key = quiz.load(key_file)
    assert quiz.score(["q1", "q2"], key, key) is None
    blank = {"q1": {"answer": ""}, "q2": {"answer": ""}}
    assert quiz.score(["q1", "q2"], blank, key)[0] == "blank"
    wrong = {"q1": {"answer": "no"}, "q2": {"answer": "no"}}
    kind, text = quiz.score(["q1", "q2"], wrong, key)
    # how many, never which, and never the key
    assert kind == "wrong" and text.startswith("1 of the 2 answers") and "q1" not in text and "yes" not in text
    half = {"q1": {"answer": "no"}, "q2": {"answer": ""}}
    assert quiz.score(["q1", "q2"], half, key)[0] == "blank"   # no count of a group answered in part
    invalid = {"q1": {"answer": "maybe"}, "q2": {"answer": "no"}}
    assert "not among the choices" in quiz.score(["q1", "q2"], invalid, key)[1]
    with pytest.raises(quiz.QuizError):
        quiz.score(["q9"], key, key)


# ---- quotes.py: docs quote code by named regions ------------------------------------------

def test_quotes_catch_a_stale_excerpt(tmp_path):
    import quotes
    (tmp_path / "docs").mkdir()
    (tmp_path / "common").mkdir()
    src = tmp_path / "common" / "x.h"
    src.write_text("int a;\n/* quote: pair */\nstruct pair { int a, b; };\n/* end quote: pair */\n")
    doc = tmp_path / "docs" / "ch.md"
    doc.write_text("Text.\n\n<!-- quote: common/x.h#pair -->\n```c\nstruct pair { int a, b; };\n```\n")
    assert quotes.run(tmp_path, write=False) == ([], 1)
    src.write_text(src.read_text().replace("int a, b;", "int a, b, c;"))
    problems, _ = quotes.run(tmp_path, write=False)
    assert len(problems) == 1 and "no longer matches" in problems[0] and "int a, b, c;" in problems[0]
    assert quotes.run(tmp_path, write=True)[0] == []
    assert "int a, b, c;" in doc.read_text() and quotes.run(tmp_path, write=False)[0] == []
    doc.write_text(doc.read_text().replace("#pair", "#gone"))
    problems, _ = quotes.run(tmp_path, write=False)
    assert problems and "no region 'gone'" in problems[0]
    src.write_text("/* quote: pair */\nint a;\n")
    problems, _ = quotes.run(tmp_path, write=False)
    assert problems and "has no 'end quote: pair'" in problems[0]



def test_quotes_catch_a_drifted_contract_clause(tmp_path):
    """A chapter quotes a header's numbered clauses by number: a clause whose
    text changes, or a number the header does not have, fails the check."""
    import quotes
    (tmp_path / "docs").mkdir()
    (tmp_path / "labs").mkdir()
    src = tmp_path / "labs" / "w.h"
    src.write_text("/* w.h\n *\n * The contract:\n *  1. Never early.\n *  2. Late by less\n *     than a tick.\n"
                   " *       - when idle;\n *\n * Threads: none.\n */\nint w;\n")
    doc = tmp_path / "docs" / "ch.md"
    doc.write_text("Text.\n\n<!-- contract: labs/w.h#2 -->\n<!-- end contract -->\n")
    assert quotes.run(tmp_path, write=False)[0]                       # empty: not the header's text
    assert quotes.run(tmp_path, write=True)[0] == []
    assert "- **2.** Late by less\n  than a tick.\n    - when idle;\n<!-- end" in doc.read_text()
    assert "Never early" not in doc.read_text() and "Threads" not in doc.read_text()
    assert quotes.run(tmp_path, write=False) == ([], 1)
    src.write_text(src.read_text().replace("than a tick", "than two ticks"))
    problems, _ = quotes.run(tmp_path, write=False)
    assert len(problems) == 1 and "contract 2 no longer matches" in problems[0] and "two ticks" in problems[0]
    doc.write_text(doc.read_text().replace("#2", "#1,3"))
    problems, _ = quotes.run(tmp_path, write=False)
    assert problems and "has no contract clause 3" in problems[0]

def test_cpus_counts_quota_and_affinity(tmp_path, monkeypatch):
    """machine.cpus(): Gradescope's half-CPU quota and a pinned process are
    one CPU, whatever os.cpu_count() says."""
    from lab_grader import machine
    monkeypatch.setattr(machine, "quota", lambda: 0.5)
    assert machine.cpus() == 1
    monkeypatch.setattr(machine, "quota", lambda: None)
    monkeypatch.setattr(machine.os, "sched_getaffinity", lambda pid: {0})
    assert machine.cpus() == 1
    monkeypatch.setattr(machine.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    monkeypatch.setattr(machine, "quota", lambda: 2.5)
    assert machine.cpus() == 2


def test_a_symlinked_quiz_is_refused(tmp_path):
    """quiz.toml is read outside the jail: a link (to /etc/shadow, say) is
    refused, never read or quoted."""
    from lab_grader import rubric as rb, scoring
    key = tmp_path / "key.toml"
    key.write_text('[claim-1]\nclaim = "x"\nchoices = ["a", "b"]\nanswer = "a"\n')
    link = tmp_path / "quiz.toml"
    link.symlink_to("/etc/shadow")
    item = rb.Item(stage="04-deadline-signal", id="q", points=1, lane="quiz", tests=["claim-1"], clause="c", section="#s")
    r = scoring.from_quiz(item, key, link)
    assert r.status == "failed" and "not a regular file" in r.summary and "root" not in r.summary


def test_the_hashed_quiz_key_counts_wrong_answers_without_naming_them(tmp_path):
    """The handout's quiz key (quiz.HASHED, one salted hash per graded
    group) gives what the chapter promises: how many answers of a group are
    wrong, never which, as feedback that scores nothing; the stage 04 key
    itself is checked against it, answer by answer."""
    import itertools
    from lab_grader import quiz, scoring
    from conftest import ROOT, stages
    stage = next(s for s in stages() if s.lane_items("quiz"))
    key = quiz.load(ROOT / "solutions" / stage.name / quiz.FILE)
    groups = {i.id: quiz.hash_group(i.tests, key) for i in stage.lane_items("quiz")}
    hashed = tmp_path / quiz.HASHED
    quiz.write_hashed(hashed, groups)
    for i in stage.lane_items("quiz"):
        g = quiz.load_hashed(hashed)[i.id]
        assert set(g) == {"questions", "choices", "salt", "sha256"}, g
        right = {q: {"answer": key[q]["answer"]} for q in i.tests}
        assert quiz.score_hashed(i.tests, right, g) is None
        # one, then two, answers changed: the count follows, no claim is named
        for n in (1, 2):
            mine = {q: dict(a) for q, a in right.items()}
            for q in i.tests[:n]:
                mine[q]["answer"] = next(c for c in key[q]["choices"] if c != key[q]["answer"])
            kind, message = quiz.score_hashed(i.tests, mine, g)
            assert kind == "wrong" and message.startswith(f"{n} of the {len(i.tests)} answers"), message
            assert not any(q in message for q in i.tests) and not any(key[q]["answer"] in message for q in i.tests)
            assert (kind, message) == quiz.score(i.tests, mine, key)   # the same words as with the key in clear
        # every answer set: the hashed count is the key's count
        for values in itertools.islice(itertools.product(*g["choices"]), 0, None, 7):
            mine = {q: {"answer": v} for q, v in zip(i.tests, values)}
            assert quiz.score_hashed(i.tests, mine, g) == quiz.score(i.tests, mine, key)
        # through the grader: not judged (the instructor's points), the count in the summary
        answers = tmp_path / quiz.FILE
        answers.write_text("".join(f'[{q}]\nanswer = "{a["answer"]}"\n' for q, a in mine.items()))
        r = scoring.from_quiz(i, tmp_path / "no-key-here.toml", answers, hashed)
        want = quiz.score(i.tests, quiz.load(answers), key)
        assert r.status == "not-judged" and r.points == 0 and "your instructor marks" in r.summary, r.summary
        assert (want is None and r.summary.startswith(f"all {len(i.tests)} answers")) or want[1] in r.summary
    # a salt is random per handout: two hashes of one key differ
    i = stage.lane_items("quiz")[0]
    assert quiz.hash_group(i.tests, key)["sha256"] != quiz.hash_group(i.tests, key)["sha256"]
    # a hashed key from another quiz is no feedback, and says so
    other = dict(groups[i.id], sha256="0" * 64)
    with pytest.raises(quiz.QuizError):
        quiz.score_hashed(i.tests, {q: {"answer": key[q]["answer"]} for q in i.tests}, other)
    # no hashed key (an older handout): graded by the instructor, as before
    r = scoring.from_quiz(i, tmp_path / "no-key-here.toml", answers, tmp_path / "none.toml")
    assert r.status == "not-judged" and "graded by your instructor" in r.summary


# ---- the report's rerun line -------------------------------------------------

def graded_snapshot(tmp_path, name):
    """A grading of solutions/ at stage `name`, not run (its items and the
    tests each runs), and that stage's items by id."""
    from lab_grader import pipeline
    from conftest import ROOT, stages
    every = {s.name: s for s in stages()}
    p = pipeline.Pipeline(ROOT, ROOT / "solutions", list(every.values()), [every[name]], tmp_path)
    try:
        return p.snapshot(), {i.id: i for i in every[name].items}
    finally:
        p.close()


def test_rerun_line_names_the_item_when_other_items_run_the_same_test(tmp_path):
    from lab_grader import diagnosis, outcomes
    g, items = graded_snapshot(tmp_path, "02-block-on")
    shared = outcomes.Outcome("parker_stress::ping_pong", outcomes.Verdict.FAIL)
    runners = g.items_of_test[("02-block-on", shared.test)]
    assert len(runners) > 1, f"ping_pong should run in several items (plain, Valgrind, TSan): {runners}"
    line = diagnosis.rerun_command(g, items[runners[0]], shared)
    assert line.startswith(f"make grade STAGE=2 TEST=parker_stress/ping_pong ITEMS={runners[0]}"), line
    alone = next((t, ids) for (s, t), ids in g.items_of_test.items() if s == "02-block-on" and len(ids) == 1)
    line = diagnosis.rerun_command(g, items[alone[1][0]], outcomes.Outcome(alone[0], outcomes.Verdict.FAIL))
    assert "ITEMS=" not in line, f"a test only one item runs needs no ITEMS=: {line}"


def test_a_failure_names_the_command_for_its_next_hint(tmp_path):
    """A report says what happened and the clause; the way on is the item's
    hint ladder, and the failure block says the command (once: not when
    the message names it already; never for a quiz claim)."""
    from lab_grader import diagnosis, outcomes
    g, items = graded_snapshot(tmp_path, "04-deadline-signal")

    def block(item, message):
        o = outcomes.Outcome(f"deadline_poll::{item}", outcomes.Verdict.FAIL, message=message)
        r = outcomes.ItemResult(items[item], outcomes.Status.FAILED, 0, outcome=o)
        return diagnosis.failure_block(g, r)
    lines = block("latest-waker", "cloned its waker 4 times (contract 2)")
    assert "  next hint:     make hint STAGE=4 ITEM=latest-waker" in lines, lines
    lines = block("latest-waker", "lost (contract 3). The next hint: make hint STAGE=4 ITEM=latest-waker")
    assert not any(x.startswith("  next hint:") for x in lines), lines
    quiz = next(i for i in items.values() if i.lane == "quiz")
    assert diagnosis.hint_command(g, quiz) is None


def test_a_tool_item_alone_runs_its_tests_without_the_tool_first(tmp_path):
    """ITEMS= naming a Valgrind item: the plain lane runs that item's tests
    too, so that one that hangs, or gives up after a slow rescue, is known
    (and not rerun ten times slower under the tool: a 03 refcount bug's
    memory item took 38 s of Valgrind, 9.6 s with this)."""
    from lab_grader import pipeline
    from conftest import ROOT, stages
    every = {s.name: s for s in stages()}
    p = pipeline.Pipeline(ROOT, ROOT / "solutions", list(every.values()), [every["01-signal"]], tmp_path,
                          items=["valgrind-drop-orders"])
    try:
        sp = p.plan.of("01-signal")
        item = next(i for i in sp.items if i.id == "valgrind-drop-orders")
        assert p.plain_tests(sp) == sp.item_tests[item.key]
    finally:
        p.close()


def test_a_test_starved_beside_its_own_grading_is_run_again_alone(tmp_path, monkeypatch):
    """Issue 25, class 8: tests the kernel calls starved in a run beside
    this grading's other runs run again with every slot taken; alone, a
    busy-waiting poll gets its CPU and fails as what it is. Still starved
    alone, they stay "not judged". Never a third run."""
    from lab_grader import lanes
    from lab_grader.outcomes import Outcome, Verdict
    runner = lanes.Runner("n", None, 2, 0.05, tmp_path)
    calls = []

    def execute(inv, exclusive=False):
        calls.append((tuple(inv.tests), exclusive))
        return binary_run.RunResult({}, {}, "", 0, starved="busy" if alone_starves or not exclusive else "")

    def one_run(tests, result, binary, nonce, hints):
        v = Verdict.STARVED if result.starved else Verdict.TIMEOUT
        return {t: Outcome(t, v if t != "s::ok" else Verdict.PASS) for t in tests}
    monkeypatch.setattr(runner, "execute", execute)
    monkeypatch.setattr(judge, "one_run", one_run)
    inv = binary_run.BinaryRun(tmp_path / "bin", ["s::a", "s::b", "s::ok"], tmp_path / "run" / "plain")
    for alone_starves, expected in ((False, Verdict.TIMEOUT), (True, Verdict.STARVED)):
        calls.clear()
        outs, _ = runner.run(inv, {})
        assert calls == [(("s::a", "s::b", "s::ok"), False), (("s::a", "s::b"), True)], calls
        assert outs["s::a"].verdict == outs["s::b"].verdict == expected
        assert outs["s::ok"].verdict == Verdict.PASS
    calls.clear()
    runner.run(inv, {}, exclusive=True)   # a run that was alone already is not run again
    assert len(calls) == 1, calls


def test_copy_back_brings_only_what_the_grader_reads(tmp_path):
    """A run's files come back into the grader's run directory only where
    the grader reads them (the report, the records, the tools' logs): files
    a test left anywhere else stay in the jail (the third red-team pass left
    103 MB in 70,104 files per grading), and a link put in place of one of
    those folders is not followed."""
    import os
    from lab_grader import jail
    src, dst = tmp_path / "src", tmp_path / "dst"
    for d in ("rec", "vg", "junk"):
        (src / d).mkdir(parents=True)
    dst.mkdir()
    (src / "report.xml").write_text("<x/>")
    (src / "rec" / "s.t.log").write_text("BEGIN 1 s::t\n")
    (src / "vg" / "1.log").write_text("==1==\n")
    (src / "junk" / "filler").write_text("j" * 100)
    (src / "left.txt").write_text("t")
    os.symlink("/etc", src / "tsan")
    jail.copy_back(src, dst)
    assert sorted(str(p.relative_to(dst)) for p in dst.rglob("*") if p.is_file()) == [
        "rec/s.t.log", "report.xml", "vg/1.log"]


# ---- the object cache: a student's file keyed by what its compile read -------

def test_a_student_object_is_compiled_again_exactly_when_what_it_read_changes(tmp_path):
    """build.Builder's direct mode: an edit to one file of a stage compiles
    that file again and no other; an edit to a header compiles its
    includers; a new file that a `__has_include` finds compiles the file
    that asked again; a tree elsewhere with the same contents compiles nothing."""
    import shutil
    from lab_grader import build

    def tree(name):
        d = tmp_path / name / "stage"
        d.mkdir(parents=True)
        (d / "h.h").write_text("#define H_VALUE 1\n")
        (d / "a.c").write_text('#include "h.h"\nint a_value(void) { return H_VALUE; }\n')
        (d / "b.c").write_text('#if __has_include("x.h")\nint b_value(void) { return 2; }\n'
                               '#else\nint b_value(void) { return 3; }\n#endif\n')
        return d

    b = build.Builder(ROOT, tmp_path / "build")

    def objs(d):
        return {n: b.compile(d / n, "plain", [d], werror=True, jailed=True).obj for n in ("a.c", "b.c")}

    one = tree("one")
    first = objs(one)
    assert objs(one) == first, "nothing changed, yet a file compiled again"
    (one / "b.c").write_text((one / "b.c").read_text() + "/* edited */\n")
    second = objs(one)
    assert second["a.c"] == first["a.c"] and second["b.c"] != first["b.c"], (first, second)
    (one / "h.h").write_text("#define H_VALUE 4\n")
    third = objs(one)
    assert third["a.c"] != second["a.c"] and third["b.c"] == second["b.c"], (second, third)
    (one / "x.h").write_text("/* found by __has_include */\n")
    fourth = objs(one)
    # (a.c compiles again too: a new name could change any file's
    # preprocessing, and which files it changes is known only by compiling)
    assert fourth["b.c"] != third["b.c"], (third, fourth)
    for o in fourth.values():
        assert o.with_suffix(".i").is_file() and o.with_suffix(".s").is_file(), "the gate reads the .i and .s"
    other = tmp_path / "other" / "stage"
    shutil.copytree(one, other)
    assert objs(other) == fourth, "a copy of the same files elsewhere compiled again"


def test_the_environment_is_read_in_one_place():
    """Every environment variable the grader heeds is read once, by
    arguments.read_environment, and passed down: no other module of the
    engine looks at os.environ (issue 29)."""
    readers = sorted(p.name for p in (GRADER / "lab_grader").glob("*.py")
                     if p.name != "arguments.py" and ("os.environ" in p.read_text() or "getenv" in p.read_text()))
    assert not readers, f"modules that read the environment themselves: {readers}"
    env = arguments.read_environment(None, {"CC": "clang", "NO_COLOR": "1", "LAB_RACE_RUNS": "3", "LANG": "C"})
    assert env.cc == "clang" and not env.color and env.progress and env.race_runs == 0   # no solutions/ at None
    assert env.passed_on == (("LANG", "C"),)
    with pytest.raises(arguments.UsageError, match="LAB_RACE_RUNS=x"):
        arguments.read_environment(None, {"LAB_RACE_RUNS": "x"})
