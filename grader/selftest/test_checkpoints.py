"""Every checkpoint of a chapter's "A good order:" is reachable with only its
steps written: what each step writes and checks is stated under it
(grader/authoring/steps.py); the statement names real regions, each once,
and the items the step's text runs; and a tree with the regions of steps 1
to k from solutions/ (with the step's "not yet" mutants applied: what its
functions still leave out), the rest as the skeleton has them, passes step
k's items under `make check`.

make test runs the gradings with the rest: 23 s on two cores with a cold
build directory, 10 s when the other self-tests have compiled the tests and
common/ already (only the partial stage's own files compile anew);
`make checkpoints` runs this file alone."""
import re
import shutil
import sys

import pytest

from conftest import GRADER, MUTANT_ENV, ROOT, apply_mutants, grade, mutants, stages

sys.path.insert(0, str(GRADER / "authoring"))
import steps  # noqa: E402

STAGES = [s for s in stages() if steps.steps(ROOT / s.chapter)]
CHECKPOINTS = [(s, st) for s in STAGES for st in steps.steps(ROOT / s.chapter)
               if st.checkpoint and (st.not_yet or steps.written_by(steps.steps(ROOT / s.chapter), st.number)
                                     != set(steps.owners(s.name)))]   # else the tree is solutions/
MUTANTS = {(m.stage, m.name): m for m in mutants()}
TODO = re.compile(r"not started: \S+?:\d+:? (\w+)\(\)")


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
def test_steps_state_what_they_write(stage):
    chapter = ROOT / stage.chapter
    all_steps = steps.steps(chapter)
    where = lambda st: f"{stage.chapter}:{st.line}: step {st.number}"  # noqa: E731
    assert [st.number for st in all_steps] == list(range(1, len(all_steps) + 1)), \
        f"{stage.chapter}: the steps are not numbered 1..n: {[st.number for st in all_steps]}"
    owners = steps.owners(stage.name)
    named = [w for st in all_steps for w in st.writes]
    unknown = [f"{where(st)}: {w}" for st in all_steps for w in st.writes if w not in owners]
    assert not unknown, f"steps write regions {stage.name} does not have (a function or 'struct name'): {unknown}"
    twice = sorted({w for w in named if named.count(w) > 1})
    assert not twice, f"{stage.chapter}: regions written by two steps: {twice}"
    left = [f"{f}: {o}" for o, f in owners.items() if o not in named]
    assert not left, f"{stage.chapter}: no step writes these student regions: {left}"
    ids = {i.id for i in stage.items}
    for st in all_steps:
        if st.checkpoint == ["all"]:
            assert st is all_steps[-1], f"{where(st)}: only the last step grades the whole stage"
            continue
        bad = [i for i in st.checkpoint if i not in ids]
        assert not bad, f"{where(st)}: the checkpoint names items {stage.name} does not have: {bad}"
        assert steps.shown_items(st) == st.checkpoint, \
            f"{where(st)}: the text runs ITEMS={','.join(steps.shown_items(st))}, the statement says {st.checkpoint}"
        missing = [n for n in st.not_yet if (stage.name, n) not in MUTANTS]
        assert not missing, f"{where(st)}: 'not yet' names no mutant of grader/mutants/{stage.name}/: {missing}"
        assert st.checkpoint or not st.not_yet, f"{where(st)}: 'not yet' without a checkpoint"


@pytest.mark.parametrize("comment,error", [
    ("<!-- step 1 write: f -->", "'write: f' is not one of writes: .., checkpoint: .., not yet: .."),
    ("<!-- step 1 writes: f; writes: g -->", "(each once, separated by ';')"),
    ("<!-- step 1 checkpoint: a -->", "step 1 says nothing it writes (writes: -)"),
])
def test_a_bad_step_comment_is_one_line(comment, error, tmp_path):
    chapter = tmp_path / "ch.md"
    chapter.write_text(f"A good order:\n\n1. Write f.\n   {comment}\n")
    with pytest.raises(steps.StepError) as e:
        steps.steps(chapter)
    assert str(e.value).startswith(f"{chapter}:4: ") and error in str(e.value) and "\n" not in str(e.value)


def test_a_step_comment_may_run_over_lines(tmp_path):
    chapter = tmp_path / "ch.md"
    chapter.write_text("1. Write f and g. `ITEMS=a`\n   <!-- step 1 writes: f,\n        struct\n        g;\n"
                       "        checkpoint: a; not\n        yet: m -->\n")
    (st,) = steps.steps(chapter)
    assert (st.writes, st.checkpoint, st.not_yet, steps.shown_items(st)) == (["f", "struct g"], ["a"], ["m"], ["a"])


def test_step_one_runs_only_its_own_items(tmp_path):
    """A section before the exercise may run a first version's failing item
    (ITEMS=z): step 1's text starts at its list item, so that is not its."""
    chapter = tmp_path / "ch.md"
    chapter.write_text("Write the first version and run `make grade ITEMS=z`.\n\n"
                       "1. a list of the section's own\n\nA good order:\n\n"
                       "1. Write f. `ITEMS=a`\n   <!-- step 1 writes: f; checkpoint: a -->\n"
                       "2. Write g. `ITEMS=b`\n   <!-- step 2 writes: g; checkpoint: b -->\n")
    one, two = steps.steps(chapter)
    assert (steps.shown_items(one), steps.shown_items(two)) == (["a"], ["b"])


def test_partial_stage_keeps_only_the_steps_regions(tmp_path):
    """The tree of a step: its regions as in solutions/, the others stubs."""
    s, st = CHECKPOINTS[0]
    written = steps.written_by(steps.steps(ROOT / s.chapter), st.number)
    steps.partial_stage(s.name, written, tmp_path)
    owners = steps.owners(s.name)
    for name in {f for f in owners.values()}:
        text = (tmp_path / s.name / name).read_text()
        todo = [o for o, f in owners.items() if f == name and o not in written]
        assert text.count("LAB_TODO(") + text.count("todo_your_fields_here") == len(todo), (name, todo)


@pytest.mark.parametrize("stage,step", CHECKPOINTS, ids=[f"{s.name}/step-{st.number}" for s, st in CHECKPOINTS])
def test_checkpoint_is_reachable(stage, step, tmp_path):
    all_steps = steps.steps(ROOT / stage.chapter)
    tree = apply_mutants([MUTANTS[(stage.name, n)] for n in step.not_yet], tmp_path / "tree")
    steps.partial_stage(stage.name, steps.written_by(all_steps, step.number), tmp_path / "partial", tree)
    shutil.rmtree(tree / stage.name)   # the stages before stay the reference
    shutil.copytree(tmp_path / "partial" / stage.name, tree / stage.name)
    g = grade(tmp_path, tree, stage=stage.name, items=step.checkpoint, command="check",
              env=MUTANT_ENV if step.not_yet else None)
    later = {w: st.number for st in all_steps for w in st.writes}
    failed = []
    for item in step.checkpoint:
        t = g.item(f"{stage.name}/{item}")
        if g.left_to_the_machine(f"{stage.name}/{item}"):   # as for the full marks: no verdict either way
            print(f"{item} not judged here: {t['output'][:300]}")
            continue
        if t["status"] != "passed":
            blocked = sorted({f"{f}() of step {later.get(f, '?')}" for f in TODO.findall(t["output"])})
            failed.append(f"{item}: " + (f"not started, needs {', '.join(blocked)}" if blocked
                                         else t["output"][:600]))
    yet = f" (not yet: {', '.join(step.not_yet)})" if step.not_yet else ""
    assert not failed, (f"{stage.chapter}:{step.line}: step {step.number}'s checkpoint is not reachable "
                        f"with steps 1-{step.number} written{yet}:\n  " + "\n  ".join(failed))
