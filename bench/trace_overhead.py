#!/usr/bin/env python3
"""trace_overhead.py - what tracing costs the stage 03 reference (docs/tracing.md#overhead).

    make -C bench trace-overhead [RUNS=21]
    python3 bench/trace_overhead.py [--runs 21] [--base REV] [--rows yield,spawn]

Two questions, two answers:

1. Is "tracing off" the same program as before tracing existed? Every source
   of the benchmark's reference (solutions/01-03, common/) is compiled with
   the benchmark's flags at HEAD and at --base (a revision without
   common/trace.h; default: the last commit that did not have it), and the
   disassembly of each object (objdump -dr) is compared. Identical code
   costs nothing, by construction.
2. What do the hooks cost when compiled in? The executor benchmark's rows
   (bench/bench.c: yield, spawn) are timed for three builds, one process
   per measurement, in rotating order:
     off        build/bench_ref          (no -DLAB_TRACE)
     idle       build/bench_ref_traced   with LAB_TRACE=0 (compiled in, switched off at run time)
     on         build/bench_ref_traced   recording (LAB_TRACE_FILE="": the file is not
                                         written; writing happens at exit, outside the timing)
   Medians and the ratios to "off" are printed.

Only the Python standard library; gcc, objdump and git.
"""
import argparse
import os
import pathlib
import re
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
ROWS = {"yield": 1, "spawn": 3}  # row: in-process warm-up iterations (as run.py)


def git(*args, cwd=ROOT):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def default_base():
    """The newest commit without common/trace.h."""
    first = git("log", "--diff-filter=A", "--format=%H", "--", "common/trace.h").splitlines()
    return f"{first[-1]}^" if first else "HEAD"


def disassemble(tree, rel, tmp):
    src = tree / rel
    obj = tmp / (rel.replace("/", "_") + ".o")
    incs = []
    for d in ["common", *DIRS]:
        incs += ["-iquote", str(tree / d)]
    subprocess.run(["gcc", *CFLAGS, *incs, "-c", str(src), "-o", str(obj)], check=True, capture_output=True)
    out = subprocess.run(["objdump", "-dr", "--no-show-raw-insn", str(obj)], check=True,
                         capture_output=True, text=True).stdout
    return "\n".join(line for line in out.splitlines() if not line.startswith(str(obj)) and "file format" not in line)


def same_code(base):
    with tempfile.TemporaryDirectory() as t:
        tmp = pathlib.Path(t)
        old = tmp / "base"
        old.mkdir()
        archive = subprocess.run(["git", "archive", base, "common", *DIRS], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
        (tmp / "a").mkdir()
        (tmp / "b").mkdir()
        rels = COMMON + [str(p.relative_to(ROOT)) for d in DIRS for p in sorted((ROOT / d).glob("*.c"))]
        result = {}
        for rel in rels:
            if not (old / rel).exists():
                result[rel] = "new file"
                continue
            a = disassemble(old, rel, tmp / "a")
            b = disassemble(ROOT, rel, tmp / "b")
            result[rel] = "identical" if a == b else "DIFFERENT"
        return result


def run_once(binary, row, env):
    out = subprocess.run([str(binary), row, str(ROWS[row]), "1"], capture_output=True, text=True,
                         env=env, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{binary.name} {row}: {out.returncode}: {out.stderr[:300]}")
    return int(re.search(r"^ns (\d+)$", out.stdout, re.M).group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--base", default=None)
    ap.add_argument("--rows", default="yield,spawn")
    a = ap.parse_args()

    base = a.base or default_base()
    print(f"1. tracing off against {git('rev-parse', '--short', base)} (before common/trace.h), "
          f"objdump -dr of each object, flags {' '.join(CFLAGS)}:")
    cmp = same_code(base)
    for rel, verdict in cmp.items():
        print(f"   {verdict:9}  {rel}")
    identical = all(v == "identical" for v in cmp.values())
    print(f"   => {'the same machine code' if identical else 'some code differs'}\n")

    env = {k: v for k, v in os.environ.items() if not k.startswith("LAB_TRACE")}
    variants = [
        ("off", BUILD / "bench_ref", env),
        ("idle", BUILD / "bench_ref_traced", dict(env, LAB_TRACE="0")),
        ("on", BUILD / "bench_ref_traced", dict(env, LAB_TRACE_FILE="", LAB_TRACE_MAX_EVENTS="50000000")),
    ]
    rows = [r for r in a.rows.split(",") if r]
    times = {(r, v[0]): [] for r in rows for v in variants}
    load = os.getloadavg()
    for i in range(a.runs):
        for row in rows:
            order = variants[i % 3:] + variants[:i % 3]  # rotate: drift falls on every side
            for name, binary, e in order:
                times[(row, name)].append(run_once(binary, row, e))
    print(f"2. {a.runs} runs per cell, one process each, rotating order; load average at start "
          f"{load[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"   {'row':7} {'off (ms)':>10} {'idle (ms)':>10} {'on (ms)':>10} {'idle/off':>9} {'on/off':>8}")
    for row in rows:
        med = {v[0]: statistics.median(times[(row, v[0])]) / 1e6 for v in variants}
        print(f"   {row:7} {med['off']:10.2f} {med['idle']:10.2f} {med['on']:10.2f} "
              f"{med['idle'] / med['off']:9.3f} {med['on'] / med['off']:8.3f}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
