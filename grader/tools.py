#!/usr/bin/env python3
"""Small conveniences for students, on top of the grader.

    tools.py compile-commands [--target labs]   write compile_commands.json
    tools.py watch --stage N [--target labs]    rerun `make check` on every save
    tools.py debug --stage N --test suite/name [--target labs] [--no-gdb]
                                                run one test in this process, under gdb
    tools.py hint --stage N [--item ID] [--reset]
                                                the next hint for one rubric item (make hint)
    tools.py args KIND --stage .. --target ..   the Makefile's check of its variables: one
                                                line and exit 2 when one is wrong (arguments.py)

compile_commands.json lists every C file of the lab with the exact flags the
grader compiles it with, so clangd (and any editor that speaks to it) finds
the headers on the quote path and reports the same warnings.

watch polls the stage's files twice a second rather than using inotify: it
works the same on every filesystem (inotify is silent on some mounted ones).
Each rerun clears the screen and runs the grader's pytest directly (make and
deps.sh did their part when watch started); a stage that does not build
shows the compiler's output alone (conftest's --watch), not a report.

debug builds the stage at -O0 (build.DEBUG) and runs the test through the
stand-in runner with --no-fork: Criterion always forks a worker per test,
which makes a debugger follow the wrong process; the stand-in can run the
test in its own process, with no timeout and no watchdog, so gdb sees every
thread of the test. gdb starts it and stops at the test's own body,
lab_body_<suite>_<name> (LAB_TEST in common/testing/lab_test.h).

hint prints the next level of the written hints for one rubric item, from
docs/hints/NN-name.md, and remembers the level reached in .hints at the root
of the checkout (one line per item: "03-executor/deadlock 2"), as Rustlings'
`hint` does; --reset forgets the item (or, without --item, the stage). A hint
file is Markdown a browser shows collapsed: each hint is one block

    <details markdown="1">
    <summary>latest-waker, level 1</summary>

    ...the hint, in Markdown...

    </details>

and an item's levels run 1, 2, ... in the file, without gaps.
"""
import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "grader"))

from lab_grader import arguments, build, rubric  # noqa: E402


def compile_commands(target):
    b = build.Builder(ROOT, ROOT / "build" / "grade", arguments.read_environment(ROOT).cc)
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
                        "arguments": [b.cc, *flags, "-c", str(source)]})

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


CLEAR = "\033[H\033[2J\033[3J"   # home, clear the screen, and its scrollback


def check_command(target, stage):
    """make check of these stages, run by pytest directly: make and deps.sh
    have done their part when watch started."""
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--no-header", "--tb=no", "-rN",
            str(ROOT / "grader" / "grade"), f"--target={target}", f"--stage={stage}", "--quick", "--watch"]


def watch(target, stage):
    args = arguments.check_grade(ROOT, target=target, stage=stage)
    dirs = [args.target / s.name for s in args.selected]
    shown = ", ".join(str(d) for d in dirs)
    tty = sys.stdout.isatty()
    last = None
    while True:
        now = snapshot(dirs)
        if now != last:
            last = now
            print((CLEAR if tty else "") + f"make check STAGE={stage}: {shown}", flush=True)
            began = time.monotonic()
            subprocess.run(check_command(args.target, stage))
            print(f"\n[{time.strftime('%H:%M:%S')}] checked in {time.monotonic() - began:.1f} s; "
                  "waiting for a change... (Ctrl-C to stop)", flush=True)
        time.sleep(0.5)


def debug(target, stage, test, use_gdb):
    from lab_grader import pipeline
    stages, selected = arguments.check_stages(ROOT / "grader" / "rubric", stage)
    one = arguments.check_one_stage(selected, "make debug")
    target = arguments.check_target(target, stages)
    test = arguments.check_test(test, [one], ROOT, graded=False)
    p = pipeline.Pipeline(root=ROOT, target=target, stages=stages, selected=selected,
                          build_dir=ROOT / "build" / "grade", environment=arguments.read_environment(ROOT))
    try:
        b = p.build_only(one.name, "debug")
    finally:
        p.close()
    if not b.ok:
        print(f"does not build: {b.error.first}\n{b.error.log}", file=sys.stderr)
        return 1
    # the stand-in runner at -O0 -g, in this process (no fork, no timeout, no
    # watchdog); gdb stops in the test's own body, LAB_TEST's
    # lab_body_<suite>_<name> (common/testing/lab_test.h)
    suite, name = test.split("/")
    cmd = [str(b.binaries["debug"]), "--no-fork", "--filter", test]
    if use_gdb:
        cmd = ["gdb", "-q", "-ex", f"break lab_body_{suite}_{name}", "-ex", "run", "--args", *cmd]
    env = dict(os.environ, LAB_NO_WATCHDOG="1")
    print(" ".join(cmd), flush=True)
    return subprocess.run(cmd, env=env).returncode


def check_args(kind, a):
    """The Makefile's check before a recipe runs (make grade, check, watch,
    debug, hint, grade-class): raises arguments.UsageError."""
    if kind in ("grade", "watch"):
        if kind == "watch" and not a.stage:
            raise arguments.UsageError("make watch wants a stage: make watch STAGE=n (or run it in a stage folder)")
        arguments.check_grade(ROOT, target=a.target, stage=a.stage, items=a.items, test=a.test, seed=a.seed,
                           budget=a.budget, valgrind_scale=a.valgrind_scale, hidden=a.hidden)
        if a.unjudged not in ("", "zero", "omit"):
            raise arguments.UsageError(f"UNJUDGED={a.unjudged}: zero (an item not judged counts 0 of its points) "
                                        "or omit (0 of 0)")
        return
    stages, selected = arguments.check_stages(ROOT / "grader" / "rubric", a.stage, a.hidden)
    if kind == "debug":
        if not a.stage or not a.test:
            raise arguments.UsageError("make debug wants TEST=suite/name and a stage (STAGE=n, or run it in the "
                                        "stage's folder); GDB=0 runs it without gdb")
        arguments.check_target(a.target, stages)
        arguments.check_test(a.test, [arguments.check_one_stage(selected, "make debug")], ROOT, a.hidden,
                              graded=False)
    elif kind == "hint":
        if a.stage:
            stage = arguments.check_one_stage(selected, "make hint")
            if a.item:
                arguments.check_items([a.item], [stage], var="ITEM")
    elif kind == "grade-class":
        if not a.submissions:
            raise arguments.UsageError("make grade-class wants SUBMISSIONS=dir (a folder of student trees)")
        if not pathlib.Path(a.submissions).is_dir():
            raise arguments.UsageError(f"SUBMISSIONS={a.submissions}: no such directory")
        arguments.check_items([i for i in a.items.split(",") if i], selected)
        arguments.check_number("JOBS", a.jobs, int, 1, "a number of gradings at once, 1 or more")


# ---- make hint ----

HINT_BLOCK = re.compile(r'^<details markdown="1">\n<summary>(?P<item>[a-z0-9][a-z0-9-]*), level (?P<level>[0-9]+)'
                        r'</summary>\n(?P<body>.*?)^</details>[ \t]*$', re.M | re.S)
HINT_TAGS = re.compile(r"</?(?:details|summary)\b")


class HintError(Exception):
    pass


def parse_hints(path, item_ids):
    """{item: [level 1 text, level 2 text, ...]} of one hint file, or
    HintError naming the first line that is not a well-formed hint block."""
    text = path.read_text()
    hints, last = {}, 0

    def where(pos):
        return f"{path.name}:{text.count(chr(10), 0, pos) + 1}"

    for m in HINT_BLOCK.finditer(text):
        stray = HINT_TAGS.search(text, last, m.start())
        if stray:
            raise HintError(f"{where(stray.start())}: a <details> or <summary> tag outside a hint block "
                            '(a block is <details markdown="1">, then <summary>ITEM, level N</summary>, ..., </details>)')
        item, level, body = m.group("item"), int(m.group("level")), m.group("body").strip()
        if HINT_TAGS.search(body):
            raise HintError(f"{where(m.start())}: the hint {item}, level {level} holds another <details> or "
                            "<summary> (an unclosed block?)")
        if item not in item_ids:
            raise HintError(f"{where(m.start())}: no rubric item '{item}' in this stage "
                            f"(items: {', '.join(item_ids)})")
        levels = hints.setdefault(item, [])
        if level != len(levels) + 1:
            raise HintError(f"{where(m.start())}: {item}, level {level} comes after level {len(levels)}: "
                            "levels run 1, 2, ... without gaps")
        if not body:
            raise HintError(f"{where(m.start())}: the hint {item}, level {level} is empty")
        levels.append(body)
        last = m.end()
    stray = HINT_TAGS.search(text, last)
    if stray:
        raise HintError(f"{where(stray.start())}: a <details> or <summary> tag outside a hint block "
                        '(a block is <details markdown="1">, then <summary>ITEM, level N</summary>, ..., </details>)')
    return hints


def hint_state(path):
    state = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            key, _, level = line.partition(" ")
            if level.strip().isdigit():
                state[key] = int(level)
    return state


def save_hint_state(path, state):
    path.write_text("".join(f"{k} {v}\n" for k, v in sorted(state.items()) if v > 0))


def hint(stage_spec, item, reset, state_path=None, hints_dir=None, in_stage_folder=False):
    stages, selected = arguments.check_stages(ROOT / "grader" / "rubric", stage_spec)
    if not stage_spec:
        raise rubric.RubricError("usage: make hint STAGE=n ITEM=item [RESET=1] "
                                 f"(stages: {', '.join(s.name for s in stages)})")
    stage = arguments.check_one_stage(selected, "make hint")
    ids = [i.id for i in stage.items if not i.hidden]
    state_path = state_path or ROOT / ".hints"
    hints_file = (hints_dir or ROOT / "docs" / "hints") / f"{stage.name}.md"
    try:
        hints = parse_hints(hints_file, ids) if hints_file.is_file() else {}
    except HintError as e:
        raise rubric.RubricError(f"docs/hints/{e}") from None
    state = hint_state(state_path)
    if item:
        arguments.check_items([item], [stage], var="ITEM")
    if reset:
        for i in ([item] if item else ids):
            state.pop(f"{stage.name}/{i}", None)
        save_hint_state(state_path, state)
        print(f"hints of {stage.name}{'/' + item if item else ''} start again at level 1")
        return 0
    if not item:
        command = "make hint" if in_stage_folder else f"make hint STAGE={stage.number}"
        print(f"{stage.name}: {command} ITEM=<item> shows the next hint of one item")
        for i in ids:
            seen, k = state.get(f"{stage.name}/{i}", 0), len(hints.get(i, []))
            print(f"  {i:28} {f'{min(seen, k)} of {k} seen' if k else 'no written hints'}")
        return 0
    key, levels = f"{stage.name}/{item}", hints.get(item, [])
    it = next(i for i in stage.items if i.id == item)
    where = f"{stage.chapter}{it.section}"
    if not levels:
        print(f"{key} has no written hints. What it checks: {it.clause}.\nRead {where}; "
              f"the failure report says which test failed and how to rerun it.")
        return 0
    level = min(state.get(key, 0) + 1, len(levels))
    state[key] = level
    save_hint_state(state_path, state)
    print(f"{key}: hint {level} of {len(levels)}\n")
    print(levels[level - 1])
    print()
    if level < len(levels):
        print(f"(the same command again gives hint {level + 1}; RESET=1 starts over. Read {where} first.)")
    else:
        print(f"(that is the last hint for {item}; the chapter's section is {where}.)")
    return 0


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
    h = sub.add_parser("hint")
    h.add_argument("--stage", default="")
    h.add_argument("--item", default="")
    h.add_argument("--reset", action="store_true")
    h.add_argument("--state", type=pathlib.Path, default=None, help="the state file (default: .hints)")
    h.add_argument("--in-stage-folder", action="store_true", help="typed in the stage's folder: say no STAGE=")
    a = sub.add_parser("args", help="check make's variables: one line and exit 2 when one is wrong")
    a.add_argument("kind", choices=("grade", "watch", "debug", "hint", "grade-class"))
    for opt in ("target", "stage", "items", "item", "test", "seed", "budget", "valgrind-scale", "hidden",
                "submissions", "jobs", "unjudged"):
        a.add_argument(f"--{opt}", default="")
    args, rest = ap.parse_known_args()
    if rest and args.cmd != "args":   # args: the rest of make grade's options are not its business
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.cmd == "hint":
        try:
            return hint(args.stage, args.item, args.reset, args.state, in_stage_folder=args.in_stage_folder)
        except rubric.RubricError as e:
            print(f"make hint: {e}", file=sys.stderr)
            return 2
    if args.cmd == "args":
        args.target = args.target or "labs"
        try:
            check_args(args.kind, args)
        except rubric.RubricError as e:
            print(e)
            return 2
        return 0
    target = pathlib.Path(args.target).resolve()
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
