"""Every mutant (a buggy copy of the reference) loses points on the items it
names, graded on those items only; and every rubric item is named by some
mutant, so no item is a check that cannot fail."""
import pytest

from conftest import MUTANT_ENV, apply_mutant, grade, mutants, stages

MUTANTS = mutants()


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


@pytest.mark.parametrize("m", MUTANTS, ids=[f"{m.stage}/{m.name}" for m in MUTANTS])
def test_mutant_is_caught(m, tmp_path):
    tree = apply_mutant(m, tmp_path / "tree")
    g = grade(tmp_path, tree, stage=m.stage, items=m.catches, env=MUTANT_ENV)
    assert g.returncode == 2, f"make grade should fail (make's status 2) on a mutant; it exited {g.returncode}\n{g.output[-3000:]}"
    for c in m.catches:
        t = g.item(f"{m.stage}/{c}")
        assert t["score"] == 0, f"item {c} gave points to mutant {m.name} ({m.bug})\n{g.output[-3000:]}"
        assert t["status"] == "failed"
    for text in m.expect:
        assert text in g.output, f"the report should say '{text}' for mutant {m.name}\n{g.output[-3000:]}"
