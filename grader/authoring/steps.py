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

    <!-- step 2 writes: parker_unpark, park_until; checkpoint: token, one-token;
         not yet: park-ignores-timeout -->

A comment may run over several lines; its fields are separated by ";".
"""
import dataclasses
import pathlib
import re

import skeleton

ROOT = skeleton.ROOT
STEP = re.compile(r"^[ \t]*<!-- step (?P<number>\d+) (?P<body>.*?) -->[ \t]*$", re.M | re.S)
FIELDS = ("writes", "checkpoint", "not yet")
ITEMS = re.compile(r"ITEMS=([\w,-]+)")
FIRST_ITEM = re.compile(r"^[ \t]*1\.[ \t]", re.M)


@dataclasses.dataclass
class Step:
    number: int
    writes: list
    checkpoint: list      # item ids; ["all"]: the whole stage; []: none
    not_yet: list         # mutant names: what the checkpoint's code still leaves out
    text: str             # what the reader sees of the step
    line: int


class StepError(Exception):
    pass


def _names(text):
    return [] if text.strip() in ("", "-") else [" ".join(w.split()) for w in text.split(",")]


def steps(chapter):
    """The steps a chapter (a path) states, in order. A comment may run over
    several lines; its fields are separated by ";"."""
    text = pathlib.Path(chapter).read_text()
    out, begin = [], 0
    for m in STEP.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        if not out:
            # step 1's text starts at its list item, not at the top of the
            # chapter: the sections before the exercise run ITEMS= of their own
            # (a first version and the item that fails on it)
            firsts = [f.start() for f in FIRST_ITEM.finditer(text, 0, m.start())]
            begin = firsts[-1] if firsts else 0
        fields = {}
        for part in m.group("body").split(";"):
            key, sep, value = part.partition(":")
            key = " ".join(key.split())
            if not sep or key not in FIELDS or key in fields:
                raise StepError(f"{chapter}:{line}: '{' '.join(part.split())}' is not one of "
                                f"{', '.join(f + ': ..' for f in FIELDS)} (each once, separated by ';')")
            fields[key] = _names(value)
        if "writes" not in fields:
            raise StepError(f"{chapter}:{line}: step {m.group('number')} says nothing it writes (writes: -)")
        out.append(Step(int(m.group("number")), fields["writes"], fields.get("checkpoint", []),
                        fields.get("not yet", []), text[begin:m.start()], line))
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
