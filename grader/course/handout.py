#!/usr/bin/env python3
"""Write the student handout: everything a student needs, nothing they must
not see.

    handout.py [--out DIR]        (default build/handout)

In:  README.md, Makefile, docs/ (answer files left out), common/ (the protocol, its test support in
     testing/, the trace writer in tracing/), labs/ (each stage folder with its forwarding Makefile:
     make grade there grades that stage), examples/
     (make trace, with grader/tracing/trace_build.py and grader/tracing/trace_render.py),
     the public grader (rubrics, tests, the engine), and reference objects:
     every stage's solution compiled (plain and TSan builds), no source, so a
     later stage can be graded on top of a reference earlier stage; the same
     compiled with tracing on (grader/reference/NN-name/trace/, written by
     trace_build.ship_traced_reference), so that make trace can stand them in
     for an earlier stage that make grade would replace; and each
     stage's tests linked with its reference, so a test that times out can
     be timed on the reference (calibrated timeouts); and classroom/, one GitHub
     Classroom workflow per stage assignment (CLASSROOM_GRADER=owner/repo@tag names the
     handout repository they grade with; docs/instructors.md); and each quiz's key hashed
     (grader/reference/NN-name/quiz-key.toml: per graded group, a salt and the hash of its right
     answers, from which make grade says how many answers of a group are wrong; lab_grader/quiz.py).
Out: solutions/, the mutants, the grader's self-tests, answer keys in clear, the
tables of the checks each test reaches (grader/tests/NN-name/sites.json: the
autograder zip has them; a handout's make grade does not check transcripts).
"""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "grader"))

from lab_grader import arguments, assemble, build, plan, quiz, rubric  # noqa: E402

sys.path.insert(0, str(ROOT / "grader" / "tracing"))
import trace_build  # noqa: E402

KEEP_GRADER = ["CONVENTIONS.md", "deps.sh", "authoring/skeleton.py", "grade", "lab_grader", "rubric", "tests",
               "tracing", "tools.py", "course/find_work.py", "course/classroom.py", "schemas"]


def strip_marked(text, begin, end):
    """text without the lines from each `begin` line to its `end` line."""
    out, skipping = [], False
    for line in text.splitlines(keepends=True):
        if line.strip().startswith(begin):
            skipping = True
        elif line.strip().startswith(end):
            skipping = False
        elif not skipping:
            out.append(line)
    if skipping:
        raise SystemExit(f"handout: a '{begin}' block is never closed")
    return "".join(out)


def ignore(_dir, names):
    # sites.json: which checks each test's body reaches, by line, the one
    # thing a forged completion record could not guess from the tests'
    # sources alone (lab_grader/transcript.py); the autograder zip has it
    return [n for n in names if n.startswith("ANSWERS") or n in ("answers", "__pycache__", "sites.json")]


def reference_objects(out, build_dir):
    env = arguments.read_environment(ROOT)
    b = build.Builder(ROOT, build_dir, env.cc)
    stages = rubric.load_all(ROOT / "grader" / "rubric")
    # Each stage's tests linked with the reference, for calibrated timeouts:
    # a test that times out is run again on these (calibrate.py).
    pl = plan.make(ROOT, stages, stages)
    asm = assemble.Assembler(ROOT, ROOT / "labs", ROOT / "solutions", None, build_dir, build_dir / "runs" / "handout",
                             cc=env.cc, gate_calls=env.gate_calls, given_from_target=env.given_from_target)
    for sp in pl.order:
        for variant in build.VARIANTS:
            binary = asm.reference_binary(pl, sp, variant)
            if binary is None:
                raise SystemExit(f"handout: the reference tests of {sp.stage.name} ({variant}) do not build")
            dest = out / "grader" / "reference" / sp.stage.name
            dest.mkdir(parents=True, exist_ok=True)
            _ship_without_debug(binary, dest / f"tests-{variant}")
            os.chmod(dest / f"tests-{variant}", 0o755)
    for stage in stages:
        # the stage's files as handed out: the grader compiles its tests
        # against these headers, and the gate compares with them (intake.py);
        # students edit labs/, so these are kept apart
        given = out / "grader" / "reference" / stage.name / "handout"
        given.mkdir(parents=True, exist_ok=True)
        for f in sorted((ROOT / "labs" / stage.name).iterdir()):
            if f.suffix in (".c", ".h"):
                shutil.copyfile(f, given / f.name)
        names = [*stage.uses, stage.name]
        dirs = [ROOT / "solutions" / n for n in names]
        for variant in ("plain", "tsan"):
            dest = out / "grader" / "reference" / stage.name / variant
            dest.mkdir(parents=True, exist_ok=True)
            for src in stage.sources:
                obj = b.compile(ROOT / "solutions" / stage.name / src, variant, dirs, werror=True).obj
                _ship_without_debug(obj, dest / (pathlib.Path(src).stem + ".o"))


def hashed_quiz_keys(out):
    """grader/reference/NN-name/quiz-key.toml for each stage with a quiz:
    the key as hashes per graded group, never in clear (quiz.py)."""
    for stage in rubric.load_all(ROOT / "grader" / "rubric"):
        items = stage.lane_items("quiz")
        if not items:
            continue
        try:
            key = quiz.load(ROOT / "solutions" / stage.name / quiz.FILE)
            groups = {i.id: quiz.hash_group(i.tests, key) for i in items}
        except quiz.QuizError as e:
            raise SystemExit(f"handout: {stage.name}'s quiz: {e}")
        dest = out / "grader" / "reference" / stage.name
        dest.mkdir(parents=True, exist_ok=True)
        quiz.write_hashed(dest / quiz.HASHED, groups)


def _ship_without_debug(src, dest):
    """A reference object or binary as the handout ships it: its symbols
    (the gate reads what the reference defines and calls) but no DWARF,
    which printed the reference's private structs field by field, its line
    numbers and the instructors' paths (the red-team pass of issue 25)."""
    proc = subprocess.run(["strip", "--strip-debug", "-o", str(dest), str(src)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"handout: strip {src.name}: {proc.stderr.strip()[:200]}")


CLASSROOM_README = """\
# GitHub Classroom: one workflow per stage

GitHub Classroom makes one repository per assignment, so each stage is its own
assignment, graded by its own workflow (docs/instructors.md, "GitHub
Classroom"). For stage NN's assignment, the template repository is this
handout with one file added:

    mkdir -p .github/workflows
    cp classroom/NN-name.yml .github/workflows/classroom.yml

Nothing under classroom/ runs by itself: GitHub runs only files in
.github/workflows/.

Each workflow grades the student's labs/ with the grader of {grader},
checked out beside the student's repository: the instructor's handout
repository at a tag or commit the student cannot change.{placeholder}

Made by grader/course/classroom.py from the rubric.
"""

CLASSROOM_PLACEHOLDER = """

These were written without a grader repository: they name {placeholder},
and their checkout of it fails until you write them again with
`make handout CLASSROOM_GRADER=your-org/your-handout@tag`
(or `python3 grader/course/classroom.py --all classroom --grader your-org/your-handout@tag`)."""


def classroom_workflows(out, grader=""):
    """GitHub Classroom: classroom/NN-name.yml, one workflow per stage
    assignment, each grading with the handout repository named by grader
    (OWNER/REPO@REF, from CLASSROOM_GRADER=) at that ref; without it, a
    placeholder whose checkout fails visibly. None is put in
    .github/workflows/: one there would grade on every push of a repository
    made from the handout, whatever its assignment."""
    cmd = [sys.executable, str(ROOT / "grader" / "course" / "classroom.py"), "--all", str(out / "classroom")]
    if grader:
        cmd += ["--grader", grader]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"handout: {proc.stderr.strip()}")
    sys.path.insert(0, str(ROOT / "grader" / "course"))
    import classroom
    named = grader or classroom.PLACEHOLDER
    (out / "classroom" / "README.md").write_text(CLASSROOM_README.format(
        grader=named,
        placeholder="" if grader else CLASSROOM_PLACEHOLDER.format(placeholder=classroom.PLACEHOLDER)))
    if not grader:
        print(f"handout: classroom/*.yml name the placeholder {classroom.PLACEHOLDER} as their grader; "
              "for GitHub Classroom, make handout CLASSROOM_GRADER=your-org/your-handout@tag")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "build" / "handout")
    args = ap.parse_args()
    out = args.out.resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    shutil.copyfile(ROOT / ".gitignore", out / ".gitignore")
    # the README and the Makefile offer only what works in the handout: the
    # parts that need this repository are marked, and left out
    (out / "README.md").write_text(strip_marked((ROOT / "README.md").read_text(), "<!-- instructors -->",
                                                "<!-- /instructors -->"))
    (out / "Makefile").write_text(strip_marked((ROOT / "Makefile").read_text(), "#+instructors", "#-instructors"))
    for d in ("docs", "common", "labs", "examples"):
        shutil.copytree(ROOT / d, out / d, ignore=ignore)
    (out / "grader").mkdir()
    for name in KEEP_GRADER:
        src = ROOT / "grader" / name
        if src.is_dir():
            shutil.copytree(src, out / "grader" / name, ignore=ignore)
        else:
            (out / "grader" / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, out / "grader" / name)
    classroom_workflows(out, os.environ.get("CLASSROOM_GRADER", ""))
    reference_objects(out, ROOT / "build" / "grade")
    hashed_quiz_keys(out)
    # make trace in the handout: an unfinished earlier stage is replaced by
    # these, as make grade replaces it by the objects above (trace_build.py)
    trace_build.ship_traced_reference(out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
