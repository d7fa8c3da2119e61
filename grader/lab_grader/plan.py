"""Step 1 of a grading: what to grade.

From the rubric and the selection (STAGE, ITEMS, TEST): which stages are
built (the selected ones and every earlier stage they use, deepest first),
which items are graded, which tests each item runs, in which lane.

The test names come from the grader's own test sources, read as text: no
binary is run to learn them. A binary linked with a student's code must never
run outside the jail, and what it printed for --list could lie.
"""
import dataclasses
import fnmatch
import pathlib
import re

from . import rubric

# LAB_TEST(suite, name, timeout) in common/testing/lab_test.h: one Criterion test each
TEST_MACRO = re.compile(r"^[ \t]*LAB_TEST\(\s*(\w+)\s*,\s*(\w+)\s*,", re.M)


def tests_in(dirs):
    """suite::name of every LAB_TEST in the .c files of dirs, in the order
    Criterion runs and lists them (by suite, then by name)."""
    found = set()
    for d in dirs:
        for src in sorted(pathlib.Path(d).glob("*.c")):
            found.update(TEST_MACRO.findall(src.read_text(errors="replace")))
    return [f"{s}::{n}" for s, n in sorted(found)]


def expand(patterns, available):
    """Rubric test names (suite/name, globs allowed) -> suite::name present."""
    out = []
    for pat in patterns:
        suite_pat, _, name_pat = pat.partition("/")
        hits = [t for t in available
                if fnmatch.fnmatchcase(t.split("::")[0], suite_pat) and fnmatch.fnmatchcase(t.split("::")[1], name_pat or "*")]
        if not hits:
            raise LookupError(pat)
        out += [h for h in hits if h not in out]
    return out


def pattern_matches(pattern, test):
    """Does TEST=test select a rubric pattern?"""
    return fnmatch.fnmatchcase(test.replace("::", "/"), pattern) or pattern == test.replace("::", "/")


@dataclasses.dataclass
class StagePlan:
    stage: rubric.Stage
    closure: list        # the earlier stages it links, deepest first (names)
    tests: list          # every test of the stage's binary (public and hidden)
    public: list         # the tests of the public test sources alone (those a reference binary has)
    items: list          # the items graded (after ITEMS= and TEST=); empty for a stage built only as a dependency
    item_tests: dict     # item key -> [suite::name], for every item of the stage (a graded one's narrowed by TEST=)
    hang_hints: dict     # suite::name -> the first hang hint of an item that runs it

    def lane_tests(self, lane):
        out = []
        for item in self.items:
            if item.lane == lane:
                out += [t for t in self.item_tests[item.key] if t not in out]
        return out

    def lanes(self):
        return {i.lane for i in self.items}


@dataclasses.dataclass
class Plan:
    stages: dict         # name -> rubric.Stage, every stage of the rubric
    order: list          # StagePlan of every stage to build, each after the stages it uses
    selected: list       # names of the stages the report shows
    unfiltered: bool     # no ITEMS= and no TEST=: every test of a stage runs in its plain lane
    quick: bool          # make check: no Valgrind, TSan or perf lane; race items once

    def of(self, name):
        return next(p for p in self.order if p.stage.name == name)

    def items(self):
        return [i for name in self.selected for i in self.of(name).items]


def closure(stages, stage):
    """Every earlier stage `stage` needs, deepest first."""
    out = []
    for u in stage.uses:
        for v in closure(stages, stages[u]) + [u]:
            if v not in out:
                out.append(v)
    return out


def make(root, all_stages, selected, items=None, test=None, hidden=None, quick=False):
    """The plan of a grading. test (TEST=: suite/name, several joined by
    commas): only the items that run one of them are graded, and each runs
    only those of its tests. Raises rubric.RubricError when a rubric item
    names a test that does not exist (a filter that matches nothing would
    pass with zero tests)."""
    stages = {s.name: s for s in all_stages}
    wanted = set(items or ())
    named = [t.replace("::", "/") for t in test.split(",")] if test else []
    names = []
    for s in selected:
        for n in closure(stages, s) + [s.name]:
            if n not in names:
                names.append(n)
    names.sort(key=lambda n: stages[n].number)   # a stage is numbered after every stage it uses
    order = []
    for name in names:
        stage = stages[name]
        dirs = [pathlib.Path(root) / "grader" / "tests" / name]
        if hidden and (pathlib.Path(hidden) / "tests" / name).is_dir():
            dirs.append(pathlib.Path(hidden) / "tests" / name)
        tests, public = tests_in(dirs), tests_in(dirs[:1])
        item_tests, hints = {}, {}
        for item in stage.items:
            try:
                item_tests[item.key] = [] if item.lane == "quiz" else expand(item.tests, tests)
            except LookupError as e:
                raise rubric.RubricError(f"{item.key}: test '{e.args[0]}' matches no test of {name} "
                                         f"(a filter that matches nothing would pass with zero tests)") from None
            if item.hang:
                for t in item_tests[item.key]:
                    hints.setdefault(t, item.hang)
        graded = []
        if stage in selected:
            for item in stage.items:
                if wanted and item.id not in wanted and item.key not in wanted:
                    continue
                if named and not any(pattern_matches(p, t) for p in item.tests for t in named):
                    continue
                if named:   # the item runs the tests named, not the rest of its own
                    item_tests[item.key] = [t for t in item_tests[item.key] if t.replace("::", "/") in named]
                graded.append(item)
        order.append(StagePlan(stage, closure(stages, stage), tests, public, graded, item_tests, hints))
    return Plan(stages, order, [s.name for s in selected], unfiltered=not wanted and not test, quick=quick)
