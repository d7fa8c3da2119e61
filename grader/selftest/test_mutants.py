"""Every mutant (a buggy copy of the reference) loses points on the items it
names, graded on those items only; and every rubric item is named by some
mutant, so no item is a check that cannot fail."""
import pytest

import re
import subprocess

import clauses
from conftest import MACHINE_REGRADES, MUTANT_ENV, ROOT, apply_mutant, grade_until_judged, mutants, stages
from lab_grader import plan

MUTANTS = mutants()
ITEMS = {(s.name, i.id): i for s in stages() for i in s.items}


def test_every_item_has_a_mutant():
    named = {(m.stage, c) for m in MUTANTS for c in m.catches}
    orphans = [i.key for s in stages() for i in s.items if (s.name, i.id) not in named]
    assert not orphans, f"items that no mutant is meant to fail (a check nobody showed can fail): {orphans}"


def test_mutants_name_real_items():
    known = {(s.name, i.id) for s in stages() for i in s.items}
    bad = [f"{m.path.name}: {c}" for m in MUTANTS for c in m.catches if (m.stage, c) not in known]
    assert not bad, f"mutants that name unknown items: {bad}"
    empty = [m.path.name for m in MUTANTS if not m.catches or not m.bug]
    assert not empty, f"mutants without Catches: or Bug: lines: {empty}"


def test_mutant_tests_are_tests_of_its_items():
    """A Tests: line names, for every item the mutant catches, a test that
    item runs (TEST= grades only the items that run one of them: an item
    with none would silently not be graded)."""
    bad = []
    for m in MUTANTS:
        if not m.tests:
            continue
        for c in m.catches:
            item = ITEMS[(m.stage, c)]
            if not any(plan.pattern_matches(p, t) for p in item.tests for t in m.tests):
                bad.append(f"{m.stage}/{m.name}: none of {m.tests} is a test of {c}")
    assert not bad, "Tests: lines that leave an item ungraded (grader/authoring/mutant_tests.py --write):\n  " + \
        "\n  ".join(bad)


def test_mutants_apply_exactly():
    """Every patch applies to solutions/ as written: no fuzz (patch dropping
    context lines that no longer match, which can land a hunk in the wrong
    place) and no offset (line numbers gone stale). After an edit to
    solutions/, a mutant that drifted is made again: apply it with patch,
    then diff -u the files it touches (its header lines kept)."""
    bad = []
    for m in MUTANTS:
        proc = subprocess.run(["patch", "-p1", "--dry-run", "--batch", "--fuzz=0", "-i", str(m.path)],
                              cwd=ROOT / "solutions", capture_output=True, text=True)
        said = proc.stdout + proc.stderr
        if proc.returncode != 0 or re.search(r"\b(fuzz|offset)\b", said):
            bad.append(f"{m.stage}/{m.path.name}: " + "; ".join(
                line.strip() for line in said.splitlines() if re.search(r"fuzz|offset|FAILED|reject", line)))
    assert not bad, "mutants that do not apply exactly to solutions/ (remake them with diff -u):\n  " + "\n  ".join(bad)


# A race item stops at its first failing run; here each makes exactly this
# many runs and must fail every one: a catch that comes on some runs only is a
# verdict that varies between two gradings of the same code.
RACE_RUNS = 3

# A grading the machine could not judge is graded again (conftest's
# grade_until_judged); a mutant that is judged and passes still fails. A
# failure that is a bare timeout where the item's own check names its clause
# is graded again too, at most MACHINE_REGRADES times: the mutant lost the
# points either way, but the report a student gets is the clause, and a
# machine stalled for the test's whole limit (seen once in make test beside
# the flake check: uncapped-lifo, a 2 s grading, timed out at 10 s and its
# reference rerun passed) must not decide which report the self-test checks.


@pytest.mark.parametrize("m", MUTANTS, ids=[f"{m.stage}/{m.name}" for m in MUTANTS])
def test_mutant_is_caught(m, tmp_path):
    tree = apply_mutant(m, tmp_path / "tree")
    race = [c for c in m.catches if ITEMS[(m.stage, c)].lane == "race"]
    env = dict(MUTANT_ENV, **({"LAB_RACE_RUNS": str(RACE_RUNS)} if race else {}))
    for attempt in range(1 + MACHINE_REGRADES):
        g, unjudged = grade_until_judged(tmp_path, tree, [f"{m.stage}/{c}" for c in m.catches],
                                         stage=m.stage, items=m.catches, env=env, extra=narrowed(m))
        stalled = [c for c in m.catches if f"{m.stage}/{c}" not in unjudged and stalled_for_the_limit(m, c, g)]
        if not stalled:
            break
        print(f"{m.name}: {', '.join(stalled)} timed out without naming its clause; regrading")
    unjudged = [k.split("/", 1)[1] for k in unjudged]
    judged = [c for c in m.catches if c not in unjudged]
    race = [c for c in race if c in judged]
    assert g.returncode == 2, f"make grade should fail (make's status 2) on a mutant; it exited {g.returncode}\n{g.output[-3000:]}"
    for c in judged:
        t = g.item(f"{m.stage}/{c}")
        assert t["score"] == 0, f"item {c} gave points to mutant {m.name} ({m.bug})\n{g.output[-3000:]}"
        assert t["status"] == "failed"
        assert_names_its_clause(m, ITEMS[(m.stage, c)], t["output"])
    for c in race:
        caught = re.search(rf"\b{re.escape(c)}\s+failed (\d+) of (\d+) runs", g.output)
        assert caught and caught.group(1) == caught.group(2) == str(RACE_RUNS), (
            f"race item {c} must catch mutant {m.name} on every run: "
            f"{caught.group(0) if caught else 'no run count in the report'}\n{g.output[-3000:]}")
    for text in m.expect:
        assert text in g.output, f"the report should say '{text}' for mutant {m.name}\n{g.output[-3000:]}"


def narrowed(m):
    """A mutant with a Tests: line is graded on those tests of its items
    alone (TEST=): an item under Valgrind or ThreadSanitizer on the test
    that fails on this mutant, without the 20-odd others of the item each
    run under the tool; its plain and race items on all their tests."""
    return [f"TEST={','.join(m.tests)}"] if m.tests else []


def stalled_for_the_limit(m, c, g):
    """Item c failed as a bare timeout whose report does not name its clause."""
    t = g.item(f"{m.stage}/{c}")
    return (t["score"] == 0 and clauses.status(t["output"]).startswith("timed out")
            and not clauses.names(clauses.what_happened(t["output"]), clauses.cited(ITEMS[(m.stage, c)].clause)))


def assert_names_its_clause(m, item, output):
    """The caught item's 'what happened' names a contract its clause cites:
    the evidence says which rule of which header to reread. Not asked of a
    checker's own finding (a leak on a no-leak item is the clause), a crash
    (its backtrace is the evidence), a written answer or a hostile tree
    (those check their texts with Expect: lines)."""
    verdict = clauses.status(output)
    if item.lane == "quiz" or m.name.startswith("hostile-") or verdict in clauses.SELF_EVIDENT or verdict == "crashed":
        return
    what = clauses.what_happened(output)
    refs = clauses.cited(item.clause)
    assert clauses.names(what, refs), (
        f"mutant {m.name}: item {item.id}'s failure does not name the clause its evidence shows broken "
        f"(one of {sorted(refs, key=str)} from its rubric clause); it said:\n  {what}")
