"""The exercise's steps, as a chapter states them for the machine.

A chapter's "A good order:" list says, step by step, what to write and which
items pass once it is written. Each step ends with an HTML comment (a browser
does not show it) that says the same for the self-test
(grader/selftest/test_checkpoints.py):

    2. `parker_unpark`, then `park_until` without a deadline. Run
       `make grade STAGE=2 ITEMS=token,one-token,cross-thread-unpark`.
       <!-- step 2 writes: parker_unpark, park_until; checkpoint: token, one-token, cross-thread-unpark -->

writes: the student regions (BEGIN STUDENT ... END STUDENT, skeleton.py) the
step fills in, each by what holds it: a function's name, or `struct name` for
a struct's fields; "-" for none (a step that finishes a function an earlier
step began). checkpoint: the rubric items that pass once steps 1 to this one
are written, the same items the step's text names in its ITEMS=, or "all"
(the whole stage); a step without one has no checkpoint. not yet: what the
functions written so far still leave out at this checkpoint ("park_until
without a deadline"), each as the mutant of that name has it
(grader/mutants/NN-name/<name>.patch): the checkpoint passes with them applied.

    <!-- step 2 writes: parker_unpark, park_until; checkpoint: token, one-token; not yet: park-ignores-timeout -->
"""
import dataclasses
import pathlib
import re

import skeleton

ROOT = skeleton.ROOT
STEP = re.compile(r"^[ \t]*<!-- step (?P<number>\d+) writes: (?P<writes>.*?)"
                  r"(?:; checkpoint: (?P<checkpoint>.*?))?(?:; not yet: (?P<not_yet>.*?))? -->[ \t]*$", re.M)
ITEMS = re.compile(r"ITEMS=([\w,-]+)")


@dataclasses.dataclass
class Step:
    number: int
    writes: list
    checkpoint: list      # item ids; ["all"]: the whole stage; []: none
    not_yet: list         # mutant names: what the checkpoint's code still leaves out
    text: str             # what the reader sees of the step
    line: int


def _names(text):
    return [] if text.strip() in ("", "-") else [w.strip() for w in text.split(",")]


def steps(chapter):
    """The steps a chapter (a path) states, in order."""
    text = pathlib.Path(chapter).read_text()
    out, begin = [], 0
    for m in STEP.finditer(text):
        out.append(Step(int(m.group("number")), _names(m.group("writes")), _names(m.group("checkpoint") or ""),
                        _names(m.group("not_yet") or ""), text[begin:m.start()], text.count("\n", 0, m.start()) + 1))
        begin = m.end()
    return out


def shown_items(step):
    """The items the step's text runs (its ITEMS=), in order."""
    return [i for m in ITEMS.finditer(step.text) for i in m.group(1).split(",") if i]


def owners(stage):
    """{owner: file name} of a stage's student regions (HIDDEN ones aside)."""
    out = {}
    for f in sorted((ROOT / "solutions" / stage).glob("*.[ch]")):
        for _, _, kind, _, owner in skeleton.regions(f.read_text(), str(f)):
            if kind != "HIDDEN":
                out[owner] = f.name
    return out


def written_by(stage_steps, number):
    """Every region steps 1 to `number` write."""
    return {w for s in stage_steps if s.number <= number for w in s.writes}


def partial_stage(stage, written, dest, source=ROOT / "solutions"):
    """Writes into dest/<stage> the skeleton of one stage with the regions in
    `written` filled in from `source` (a copy of solutions/, a mutant)."""
    skeleton.generate(source, dest, only=[stage], written=set(written))
