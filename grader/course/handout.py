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
     later stage can be graded on top of a reference earlier stage; and each
     stage's tests linked with its reference, so a test that times out can
     be timed on the reference (calibrated timeouts).
Out: solutions/, the mutants, the grader's self-tests, answer keys.
"""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "grader"))

from lab_grader import assemble, build, plan, rubric  # noqa: E402

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
    return [n for n in names if n.startswith("ANSWERS") or n == "answers" or n == "__pycache__"]


def reference_objects(out, build_dir):
    b = build.Builder(ROOT, build_dir)
    stages = rubric.load_all(ROOT / "grader" / "rubric")
    # Each stage's tests linked with the reference, for calibrated timeouts:
    # a test that times out is run again on these (calibrate.py).
    pl = plan.make(ROOT, stages, stages)
    asm = assemble.Assembler(ROOT, ROOT / "labs", ROOT / "solutions", None, build_dir, build_dir / "runs" / "handout")
    for sp in pl.order:
        for variant in build.VARIANTS:
            binary = asm.reference_binary(pl, sp, variant)
            if binary is None:
                raise SystemExit(f"handout: the reference tests of {sp.stage.name} ({variant}) do not build")
            dest = out / "grader" / "reference" / sp.stage.name
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(binary, dest / f"tests-{variant}")
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
                shutil.copyfile(obj, dest / (pathlib.Path(src).stem + ".o"))


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
    # GitHub Classroom: the autograding workflow, one step per rubric item
    subprocess.run([sys.executable, str(ROOT / "grader" / "course" / "classroom.py"),
                    "--out", str(out / ".github" / "workflows" / "classroom.yml")], check=True)
    reference_objects(out, ROOT / "build" / "grade")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
