"""The student's files of one stage, taken in: copied (regular files only,
through the gate's text checks) into a folder of the grading's own, with the
grader's copy of every public header in place of the student's.

The grader's tests are compiled against those headers, never the
student's: a signal.h that redefined cr_assert would otherwise remove every
assertion. A header that differs from the handout's is reported, not
trusted. The one kind of header a student edits (struct fields of their own,
where the handout has `int todo_your_fields_here;`) is taken from the student
when everything outside those fields is as handed out.

A .c file with no part of the student's (the handout's copy has no TODO
stub: stage 07's channel_given.c) is given code, compiled from the handout's
copy like a header: a student who edits it changes nothing that is graded,
and the report says their copy was not used. In the instructor's repository
(solutions/ beside labs/), LAB_GIVEN_FROM_TARGET=1 grades the target's own
given files instead: the mutants of given code show that the tests catch a
bug there (grader/mutants/07-work-stealing/send-wakes-nobody.patch).
"""
import dataclasses
import os
import pathlib
import shutil

from . import gate

FIELDS_LINE = "int todo_your_fields_here;"
TODO_STUB = "LAB_TODO("   # what the skeleton puts in each student region of a .c (skeleton.py)
KINDS = (".c", ".h")


@dataclasses.dataclass
class Intake:
    dir: pathlib.Path          # the stage's folder as the grader compiles it
    refused: str = ""          # the gate's one line, when it refused the student's files
    notes: list = dataclasses.field(default_factory=list)


def handout_files(root, name):
    """{file name: path} of a stage's files as handed out: shipped in the
    handout's grader (students edit labs/ there), or the skeleton's in the
    instructor's repository."""
    shipped = pathlib.Path(root) / "grader" / "reference" / name / "handout"
    d = shipped if shipped.is_dir() else pathlib.Path(root) / "labs" / name
    return {p.name: p for p in sorted(d.iterdir()) if p.is_file() and p.suffix in KINDS} if d.is_dir() else {}


def given_sources(handout):
    """{file name: path} of the handout's given .c files: those with no TODO
    stub, so no part of the student's."""
    return {n: p for n, p in handout.items()
            if n.endswith(".c") and TODO_STUB not in p.read_text(errors="replace")}


def _fields_ok(mine, handout):
    """Does a student header match the handout's outside the fields line?
    None when it does; else the first line number that differs."""
    hl = [x.rstrip() for x in handout.splitlines()]
    ml = [x.rstrip() for x in mine.splitlines()]
    i = next(k for k, x in enumerate(hl) if FIELDS_LINE in x)
    prefix, suffix = hl[:i], hl[i + 1:]
    for k, x in enumerate(prefix):
        if k >= len(ml) or ml[k] != x:
            return k + 1
    tail = ml[len(ml) - len(suffix):] if suffix else []
    if len(ml) < len(prefix) + len(suffix) or tail != suffix:
        return max(len(prefix) + 1, len(ml) - len(suffix) + 1)
    for k in range(len(prefix), len(ml) - len(suffix)):
        if ml[k].lstrip().startswith("#"):
            return k + 1
    return None


def take_in(src, dest, handout, given_from_target=False):
    """src: the student's stage folder (it may not exist); dest: a fresh
    folder named like the stage; handout: handout_files of the stage;
    given_from_target: the given .c files too are src's (see above)."""
    src, dest = pathlib.Path(src), pathlib.Path(dest)
    headers = [p for n, p in handout.items() if n.endswith(".h")]
    given_c = {} if given_from_target else given_sources(handout)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for h in [*headers, *given_c.values()]:
        shutil.copyfile(h, dest / h.name)
    result = Intake(dest)
    if src.is_symlink():   # a stage folder that is a link to another tree (solutions/, say) is not the student's
        result.refused = (f"{src.name} is a symbolic link (to {os.readlink(src)}): hand in the folder itself")
        return result
    if not src.is_dir():
        return result
    theirs = {h.name: h for h in headers}
    handout_of = handout
    try:
        gate.check_tree(src)
        files = sorted(p for p in src.iterdir() if p.is_file() and p.suffix in KINDS)
        for p in files:
            if p.name in given_c:
                if p.read_bytes() != given_c[p.name].read_bytes():
                    result.notes.append(f"your {p.name} differs from the handout's; the grader compiled the "
                                        "handout's copy (a given file has no part of yours to change)")
                continue
            handout = theirs.get(p.name)
            if handout is None:
                given = handout_of.get(p.name)
                gate.check_source(p, given.read_text(errors="replace") if given else None)
                shutil.copyfile(p, dest / p.name)
                continue
            mine, given = p.read_text(errors="replace"), handout.read_text(errors="replace")
            if FIELDS_LINE in given:
                line = _fields_ok(mine, given)
                if line is not None:
                    raise gate.Refused(f"{p.name}:{line}: outside the struct fields you may add, this header must "
                                       "be as handed out (the tests are compiled against it)")
                gate.check_source(p, given)
                shutil.copyfile(p, dest / p.name)
            elif mine != given:
                result.notes.append(f"your {p.name} differs from the handout's; the grader compiled everything with "
                                    "the handout's copy (a public header is not yours to change)")
    except gate.Refused as e:
        result.refused = str(e)
        for p in dest.iterdir():   # nothing of theirs stays: the grader's headers and given files alone
            if p.name not in theirs and p.name not in given_c:
                p.unlink()
    return result
