#!/usr/bin/env python3
"""trace_overhead.py - what tracing costs the stage 03 and stage 07 references (docs/tracing.md#overhead).

    make -C bench trace-overhead [RUNS=21]
    python3 bench/trace_overhead.py [--runs 21] [--base REV] [--rows yield,spawn,ws-spawn,ws-tree]
                                    [--no-same-code]

Two questions, two answers:

1. Is "tracing off" the same program as before the hooks existed? Every
   source of the benchmarks' references is compiled with the benchmark's
   flags at HEAD and at a base revision, and the disassembly of each object
   (objdump -dr) is compared. Identical code costs nothing, by construction.
   Three groups, each against its own base (the last commit before its
   hooks): common/ and solutions/01-03 and 05 (--base; default: the last
   commit without common/trace.h), solutions/06 (the last commit before
   reactor.c's hooks) and solutions/07 (before runtime.c's hooks).
2. What do the hooks cost when compiled in? The benchmarks' rows are timed
   for three builds, one process per measurement, in rotating order:
     off        build/bench_ref, build/bench_ws            (no -DLAB_TRACE)
     idle       build/bench_ref_traced, bench_ws_traced   with LAB_TRACE=0 (compiled in, off at run time)
     on         the same, recording (LAB_TRACE_FILE="": the file is not
                written; writing happens at exit, outside the timing)
   Rows: stage 03's executor benchmark (bench/bench.c: yield, spawn) and
   stage 07's (bench/ws/bench_ws.c, 2 workers: ws-spawn, 10,000 tasks
   spawned and joined by a root task; ws-tree, a fork-join tree of 8,191
   tasks). Medians and the ratios to "off" are printed, and for each row the
   events one timed iteration records (counted in one written trace) and the
   recording's extra time per event.

Only the Python standard library; gcc, objdump and git.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
BUILD = HERE / "build"
CFLAGS = ["-std=c11", "-O2", "-g", "-DNDEBUG", "-Wall", "-Wextra", "-pthread"]
DIRS = ["solutions/01-signal", "solutions/02-block-on", "solutions/03-executor"]
COMMON = ["common/waker.c", "common/wake_obj.c", "common/driver.c", "common/coop.c"]
# (what, directories whose .c files are compared, extra include directories,
#  the file whose first LAB_TRACE marks the hooks' arrival, or None: --base)
GROUPS = [
    ("stages 01-03, 05 and common/", [*DIRS, "solutions/05-timer"], [], None),
    ("stage 06", ["solutions/06-reactor"], [*DIRS, "solutions/05-timer"], "solutions/06-reactor/reactor.c"),
    ("stage 07", ["solutions/07-work-stealing"], DIRS, "solutions/07-work-stealing/runtime.c"),
]
# row: (binary stem, arguments: the row's name and in-process warm-up
# iterations as run.py and run_ws.py give them)
ROWS = {
    "yield": ("bench_ref", ["yield", "1", "1"]),
    "spawn": ("bench_ref", ["spawn", "3", "1"]),
    "ws-spawn": ("bench_ws", ["spawn", "3"]),
    "ws-tree": ("bench_ws", ["tree", "3"]),
}


def git(*args, cwd=ROOT):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def default_base():
    """The newest commit without common/trace.h (where trace.h was added;
    it lives in common/tracing/ since)."""
    first = git("log", "--diff-filter=A", "--format=%H", "--", "common/trace.h").splitlines()
    return f"{first[-1]}^" if first else "HEAD"


def hooks_base(path):
    """The parent of the first commit that put LAB_TRACE into path."""
    first = git("log", "-S", "LAB_TRACE", "--format=%H", "--", path).splitlines()
    return f"{first[-1]}^" if first else "HEAD"


def disassemble(tree, rel, tmp, inc_dirs):
    src = tree / rel
    obj = tmp / (rel.replace("/", "_") + ".o")
    incs = []
    for d in ["common", "common/tracing", *inc_dirs]:
        incs += ["-iquote", str(tree / d)]
    subprocess.run(["gcc", *CFLAGS, *incs, "-c", str(src), "-o", str(obj)], check=True, capture_output=True)
    out = subprocess.run(["objdump", "-dr", "--no-show-raw-insn", str(obj)], check=True,
                         capture_output=True, text=True).stdout
    return "\n".join(line for line in out.splitlines() if not line.startswith(str(obj)) and "file format" not in line)


def same_code(base, dirs, inc_dirs, with_common):
    with tempfile.TemporaryDirectory() as t:
        tmp = pathlib.Path(t)
        old = tmp / "base"
        old.mkdir()
        archive = subprocess.run(["git", "archive", base, "common", *inc_dirs, *dirs], cwd=ROOT,
                                 capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
        (tmp / "a").mkdir()
        (tmp / "b").mkdir()
        rels = (COMMON if with_common else []) + \
            [str(p.relative_to(ROOT)) for d in dirs for p in sorted((ROOT / d).glob("*.c"))]
        result = {}
        for rel in rels:
            if not (old / rel).exists():
                result[rel] = "new file"
                continue
            a = disassemble(old, rel, tmp / "a", [*inc_dirs, *dirs])
            b = disassemble(ROOT, rel, tmp / "b", [*inc_dirs, *dirs])
            result[rel] = "identical" if a == b else "DIFFERENT"
            if a != b and (other := untraced_changes(base, rel)):
                # the base with those commits' files as they are now: what
                # is left is what tracing changed
                patched = tmp / f"patched-{len(result)}"
                shutil.copytree(old, patched)
                for h in other:
                    for f in git("show", "--format=", "--name-only", h).splitlines():
                        if (ROOT / f).is_file() and (patched / f).parent.is_dir():
                            shutil.copy(ROOT / f, patched / f)
                a = disassemble(patched, rel, tmp / "a", [*inc_dirs, *dirs])
                result[rel] = (f"identical (with {', '.join(other)}, a change that is not tracing, "
                               f"applied to the base)" if a == b else "DIFFERENT")
        return result


def untraced_changes(base, rel):
    """Commits after base that changed rel's code without touching a trace
    hook: a difference they explain says nothing about tracing."""
    found = []
    for h in git("log", "--format=%h", f"{base}..HEAD", "--", rel).splitlines():
        diff = git("show", "--format=", "-U0", h, "--", rel)
        changed = [line for line in diff.splitlines()
                   if line[:1] in "+-" and not line.startswith(("+++", "---"))]
        if changed and not any("trace" in line.lower() for line in changed):
            found.append(h)
    return found


def run_once(binary, args, env):
    out = subprocess.run([str(binary), *args], capture_output=True, text=True, env=env, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{binary.name} {args[0]}: {out.returncode}: {out.stderr[:300]}")
    return int(re.search(r"^ns (\d+)$", out.stdout, re.M).group(1))


def events_per_iteration(binary, args, env):
    """Events recorded by one iteration: a written trace of a run without
    warm-up (the runtime's start and end included: a few dozen events)."""
    with tempfile.TemporaryDirectory() as t:
        out = pathlib.Path(t) / "t.json"
        a = [args[0], "0", *args[2:]]
        subprocess.run([str(binary), *a], capture_output=True, check=True, timeout=600,
                       env=dict(env, LAB_TRACE_FILE=str(out), LAB_TRACE_MAX_EVENTS="50000000"))
        data = json.loads(out.read_text())
        # B/E pairs and s/f flows are one record each end; M rows are not records
        return sum(1 for e in data["traceEvents"] if e["ph"] not in ("M", "s", "f"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--base", default=None)
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--no-same-code", action="store_true", help="skip question 1")
    a = ap.parse_args()

    identical = True
    if not a.no_same_code:
        print(f"1. tracing off: objdump -dr of each object against the commit before its hooks, "
              f"flags {' '.join(CFLAGS)}:")
        for what, dirs, incs, marker in GROUPS:
            base = a.base or default_base() if marker is None else hooks_base(marker)
            print(f"   {what}, against {git('rev-parse', '--short', base)}:")
            cmp = same_code(base, dirs, incs, with_common=marker is None)
            for rel, verdict in cmp.items():
                print(f"     {verdict.split(' ', 1)[0]:9}  {rel}"
                      + (f"  ({verdict.split(' ', 1)[1].strip('()')})" if " " in verdict else ""))
            identical &= all(v.startswith("identical") for v in cmp.values())
        print(f"   => {'the same machine code' if identical else 'some code differs'}\n")

    env = {k: v for k, v in os.environ.items() if not k.startswith("LAB_TRACE")}
    env["BENCH_WORKERS"] = "2"
    variants = [
        ("off", "", env),
        ("idle", "_traced", dict(env, LAB_TRACE="0")),
        ("on", "_traced", dict(env, LAB_TRACE_FILE="", LAB_TRACE_MAX_EVENTS="50000000")),
    ]
    rows = [r for r in a.rows.split(",") if r]
    for r in rows:
        if r not in ROWS:
            sys.exit(f"trace_overhead: no row {r!r} (rows: {', '.join(ROWS)})")
    missing = sorted({ROWS[r][0] + v[1] for r in rows for v in variants} -
                     {p.name for p in BUILD.glob("bench_*")})
    if missing:
        sys.exit(f"trace_overhead: build {', '.join(missing)} first (make -C bench trace-overhead)")
    times = {(r, v[0]): [] for r in rows for v in variants}
    load = os.getloadavg()
    for i in range(a.runs):
        for row in rows:
            stem, args = ROWS[row]
            order = variants[i % 3:] + variants[:i % 3]  # rotate: drift falls on every side
            for name, suffix, e in order:
                times[(row, name)].append(run_once(BUILD / (stem + suffix), args, e))
    load_after = os.getloadavg()
    events = {row: events_per_iteration(BUILD / (ROWS[row][0] + "_traced"), ROWS[row][1], env) for row in rows}
    print(f"2. {a.runs} runs per cell, one process each, rotating order; load average "
          f"{load[0]:.1f} before, {load_after[0]:.1f} after, on {os.cpu_count()} CPUs")
    print(f"   {'row':9} {'off (ms)':>10} {'idle (ms)':>10} {'on (ms)':>10} {'idle/off':>9} {'on/off':>8}"
          f" {'events':>10} {'ns/event':>9}")
    for row in rows:
        med = {v[0]: statistics.median(times[(row, v[0])]) / 1e6 for v in variants}
        per_event = (med["on"] - med["off"]) * 1e6 / events[row] if events[row] else float("nan")
        print(f"   {row:9} {med['off']:10.2f} {med['idle']:10.2f} {med['on']:10.2f} "
              f"{med['idle'] / med['off']:9.3f} {med['on'] / med['off']:8.3f} {events[row]:10,} {per_event:9.1f}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
