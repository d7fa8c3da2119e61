#!/usr/bin/env python3
"""Finds a student's work wherever it is in a submission and writes it as a
tree shaped like labs/ (lab_grader/discover.py says which shapes).

    find_work.py SOURCE DEST [STAGES]   SOURCE: a folder or a .zip; DEST: a new folder;
                                        STAGES: the assignment's (1,2 or 01-signal), default all

Prints one note a line; exits 0 when a tree was written, 1 (with the one
line that says what was expected and what was found) when none could be.
"""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "grader"))

from lab_grader import discover, rubric  # noqa: E402


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    source, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    try:
        stages = rubric.select(rubric.load_all(ROOT / "grader" / "rubric"), sys.argv[3] if len(sys.argv) == 4 else "")
    except rubric.RubricError as e:
        print(f"find_work.py: {e}", file=sys.stderr)
        return 2
    if not source.exists():
        # repr: a name is data, its escapes shown, never sent to the terminal
        # (this file travels in the handout alone: no import from course/)
        print(f"find_work.py: {str(source)!r}: no such file or folder", file=sys.stderr)
        return 2
    found = discover.find(source, stages, dest)
    for note in found.notes:
        print(note)
    if found.problem:
        print(found.problem)
        return 1
    print(f"found the work as {found.shape}: {', '.join(found.stages)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
