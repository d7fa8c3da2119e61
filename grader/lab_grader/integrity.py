"""The grader's own files, fingerprinted at the start and the end of a
grading: everything the verdicts depend on besides the target (the engine,
the rubrics, the tests, common/, the shipped reference objects, the hidden
tests, the Makefile and the scripts make runs). Where the sandbox could not
give the tests a user id of their own, a test could write to them; any
change means no verdict of the run can be trusted. Not root, the runs also
see the checkout read-only (sandbox.Sandbox.protect), so a write there fails
where the kernel allows the bind.
"""
import hashlib
import pathlib


def fingerprint(root, hidden=None):
    """{path: sha256} of the grader's files."""
    root = pathlib.Path(root)
    roots = [root / "grader" / d for d in ("lab_grader", "grade", "rubric", "tests", "reference", "course",
                                           "tracing")]
    roots += [root / "common"] + ([pathlib.Path(hidden)] if hidden else [])
    out = {}
    # what make runs next time: a line appended to the Makefile would run as
    # the grader's user at the next `make`
    for f in [root / "Makefile", *sorted((root / "grader").glob("*.py")), root / "grader" / "deps.sh"]:
        if f.is_file():
            out[str(f)] = hashlib.sha256(f.read_bytes()).hexdigest()
    for r in roots:
        if not r.is_dir():
            continue
        for p in sorted(r.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def changed(before, now):
    """The paths whose content differs between two fingerprints (added and
    removed files too), sorted. Empty when nothing changed."""
    return sorted(p for p in set(now) | set(before) if now.get(p) != before.get(p))
