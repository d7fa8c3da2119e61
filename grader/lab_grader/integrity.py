"""The grader's own files, fingerprinted at the start and the end of a
grading: everything the verdicts depend on besides the target (the engine,
the rubrics, the tests, common/, the shipped reference objects, the hidden
tests). Where the sandbox could not give the tests a user id of their own, a
test could write to them; any change means no verdict of the run can be
trusted.
"""
import hashlib
import pathlib


def fingerprint(root, hidden=None):
    """{path: sha256} of the grader's files."""
    root = pathlib.Path(root)
    roots = [root / "grader" / d for d in ("lab_grader", "grade", "rubric", "tests", "reference")]
    roots += [root / "common"] + ([pathlib.Path(hidden)] if hidden else [])
    out = {}
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
