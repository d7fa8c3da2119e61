#!/usr/bin/env python3
"""Small conveniences for students, on top of the grader.

    tools.py compile-commands [--target labs]   write compile_commands.json
    tools.py watch --stage N [--target labs]    rerun `make check` on every save
    tools.py debug --stage N --test suite/name [--target labs] [--no-gdb]
                                                run one test in this process, under gdb

compile_commands.json lists every C file of the lab with the exact flags the
grader compiles it with, so clangd (and any editor that speaks to it) finds
the headers on the quote path and reports the same warnings.

watch polls the stage's files twice a second rather than using inotify: it
works the same on every filesystem (inotify is silent on some mounted ones).

debug runs the test through the stand-in runner with --no-fork: Criterion
always forks a worker per test, which makes a debugger follow the wrong
process; the stand-in can run the test in its own process, with no timeout
and no watchdog, so gdb sees every thread of the test.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "grader"))

from lab_grader import build, rubric  # noqa: E402


def compile_commands(target):
    b = build.Builder(ROOT, ROOT / "build" / "grade")
    stages = {s.name: s for s in rubric.load_all(ROOT / "grader" / "rubric")}
    entries = []

    def closure(s):
        out = []
        for u in s.uses:
            out += [v for v in closure(stages[u]) + [u] if v not in out]
        return out

    def add(source, dirs):
        flags = build.BASE + build.WARN + build.OPT["plain"] + b.include_flags("plain", dirs)
        entries.append({"directory": str(ROOT), "file": str(source),
                        "arguments": [build.CC, *flags, "-c", str(source)]})

    for name, s in stages.items():
        dirs = [target / n for n in closure(s) + [name]]
        for f in sorted((target / name).glob("*.c")):
            add(f, dirs)
        for f in sorted((ROOT / "grader" / "tests" / name).glob("*.c")):
            add(f, dirs)
    for f in sorted((ROOT / "common").rglob("*.c")):
        add(f, [])
    out = ROOT / "compile_commands.json"
    out.write_text(json.dumps(entries, indent=1) + "\n")
    print(f"wrote {out} ({len(entries)} files)")


def snapshot(paths):
    state = {}
    for d in paths:
        for f in pathlib.Path(d).rglob("*"):
            if f.is_file() and f.suffix in (".c", ".h", ".toml", ".md"):
                try:
                    state[str(f)] = f.stat().st_mtime_ns
                except FileNotFoundError:
                    pass
    return state


def watch(target, stage):
    stages = rubric.select(rubric.load_all(ROOT / "grader" / "rubric"), stage)
    dirs = [target / s.name for s in stages]
    print(f"watching {', '.join(str(d) for d in dirs)}; Ctrl-C to stop")
    last = None
    while True:
        now = snapshot(dirs)
        if now != last:
            last = now
            subprocess.run(["make", "-s", "--no-print-directory", "-C", str(ROOT), "check",
                            f"STAGE={stage}", f"TARGET={target}"])
            print(f"\n[{time.strftime('%H:%M:%S')}] waiting for a change...", flush=True)
        time.sleep(0.5)


def debug(target, stage, test, use_gdb):
    from lab_grader import pipeline
    stages = rubric.load_all(ROOT / "grader" / "rubric")
    selected = rubric.select(stages, stage)
    if len(selected) != 1:
        raise rubric.RubricError("make debug wants one stage: STAGE=n")
    p = pipeline.Pipeline(root=ROOT, target=target, stages=stages, selected=selected,
                          build_dir=ROOT / "build" / "grade")
    name = selected[0].name
    try:
        b = p.build_only(name)
    finally:
        p.close()
    if not b.ok:
        print(f"does not build: {b.error.first}\n{b.error.log}", file=sys.stderr)
        return 1
    test = test.replace("::", "/")
    if test.replace("/", "::") not in p.plan.of(name).tests:
        raise rubric.RubricError(f"TEST={test}: no such test in {name} (make grade lists them in failures)")
    binary = b.binaries["vg"]  # the stand-in runner, -O2 -g
    cmd = [str(binary), "--no-fork", "--filter", test]
    if use_gdb:
        cmd = ["gdb", "-q", "--args", *cmd]
    env = dict(os.environ, LAB_NO_WATCHDOG="1")
    print(" ".join(cmd), flush=True)
    return subprocess.run(cmd, env=env).returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile-commands")
    c.add_argument("--target", default="labs")
    w = sub.add_parser("watch")
    w.add_argument("--target", default="labs")
    w.add_argument("--stage", required=True)
    d = sub.add_parser("debug")
    d.add_argument("--target", default="labs")
    d.add_argument("--stage", required=True)
    d.add_argument("--test", required=True)
    d.add_argument("--no-gdb", action="store_true", help="run in this process without gdb")
    args = ap.parse_args()
    target = (ROOT / args.target).resolve() if not os.path.isabs(args.target) else pathlib.Path(args.target)
    try:
        if args.cmd == "compile-commands":
            compile_commands(target)
        elif args.cmd == "debug":
            return debug(target, args.stage, args.test, not args.no_gdb)
        else:
            watch(target, args.stage)
    except rubric.RubricError as e:
        print(f"tools.py: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
