#!/usr/bin/env python3
"""Small conveniences for students, on top of the grader.

    tools.py compile-commands [--target labs]   write compile_commands.json
    tools.py watch --stage N [--target labs]    rerun `make check` on every save

compile_commands.json lists every C file of the lab with the exact flags the
grader compiles it with, so clangd (and any editor that speaks to it) finds
the headers on the quote path and reports the same warnings.

watch polls the stage's files twice a second rather than using inotify: it
works the same on every filesystem (inotify is silent on some mounted ones).
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile-commands")
    c.add_argument("--target", default="labs")
    w = sub.add_parser("watch")
    w.add_argument("--target", default="labs")
    w.add_argument("--stage", required=True)
    args = ap.parse_args()
    target = (ROOT / args.target).resolve() if not os.path.isabs(args.target) else pathlib.Path(args.target)
    try:
        if args.cmd == "compile-commands":
            compile_commands(target)
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
