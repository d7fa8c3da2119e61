#!/usr/bin/env python3
"""run.py - run the executor benchmark and print the table (`make bench`).

Every runtime is a separate binary with the same command line
(`<yield|spawn> <warmup> <reps>`, printing `ns <wall time>` lines): the lab's
reference executor (build/bench_ref), Tokio's current_thread runtime
(tokio/target/release/tokio_bench) and the naive port of seed 004's executor
(build/bench_naive). One measurement is one process: `--warmup` untimed
iterations, then one timed iteration. The runtimes take turns, one process at
a time, and the order rotates from run to run, so drift (frequency, other
load on the machine) falls on every side alike. Nothing is pinned unless
--pin says so.

Allocations per task come from the *_allocs binaries (the C ones linked with
common/testing/alloc_count.c through -Wl,--wrap; Tokio's with a counting
global allocator): one iteration after the warm-up, allocations / tasks.

The timer benchmark (bench/timers/, bench/tokio-time/) runs after it in the
same run: the lab's reference timer wheel (build/timer_ref), libuv's timers
(build/timer_uv) and Tokio's time driver (tokio-time/target/release/
tokio_timer), each `<bulk|fire>` printing `key value` lines. Its own table:
bulk insert and cancel of a million timers in ns per operation, and the
lateness, early fires and CPU time of 100,000 timers firing over a second.

Only the Python standard library is used.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import re
import shutil
import statistics
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
BUILD = HERE / "build"

RUNTIMES = [
    # name, timing binary, allocation binary, label
    ("ref", BUILD / "bench_ref", BUILD / "bench_ref_allocs", "reference (stage 03)"),
    ("tokio", HERE / "tokio/target/release/tokio_bench", HERE / "tokio/target/release/tokio_allocs",
     "Tokio current_thread"),
    ("naive", BUILD / "bench_naive", BUILD / "bench_naive_allocs", "naive (seed 004 port)"),
]

# A diagnostic row: the same spawn/join with glibc's heap trimming turned off.
# With the default trim threshold (128 KiB), freeing the 10,000 tasks at the
# end of an iteration hands the top of the heap back to the kernel and the
# next iteration page-faults it in again; in a VM those faults cost as much as
# the executor's own work. The row shows what is left without them.
NO_TRIM = {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1073741824"}

ROWS = [
    # key, workload, label, default in-process warm-up iterations, extra environment,
    # whether the target is judged on it
    ("yield", "yield", "yield: {rounds} rounds x {tasks} tasks x 2 yields", 1, {}, True),
    ("spawn", "spawn", "spawn/join: {spawn_n:,} tasks", 3, {}, True),
    ("spawn-keep", "spawn", "spawn/join, heap not trimmed (diagnostic)", 3, NO_TRIM, False),
]

TIMER_IMPLS = [
    # name, binary, label
    ("ref", BUILD / "timer_ref", "reference wheel (stage 05)"),
    ("uv", BUILD / "timer_uv", "libuv (binary heap)"),
    ("tokio", HERE / "tokio-time/target/release/tokio_timer", "Tokio time driver"),
]

TIMER_ROWS = [
    # key, workload, label, extra environment; the targets are judged on bulk and fire
    ("bulk", "bulk", "bulk: {timer_n:,} timers, random deadlines; insert all, cancel all in random order", {}),
    # A diagnostic row: the same, with the k-th insert going to a random element
    # of the timer array, so that neighbours in a list or heap are not
    # neighbours in memory (every insert touches a cold line, as with timers
    # embedded in separately allocated objects).
    ("bulk-scatter", "bulk", "bulk, timers scattered in memory (diagnostic)", {"BENCH_BULK_SCATTER": "1"}),
    ("fire", "fire", "fire: {fire_n:,} timers over {span} ms", {}),
]

# The targets for the reference wheel
TIMER_INSERT_MAX = 1.2     # bulk insert within 1.2x of libuv's time per insert
TIMER_CANCEL_VS_UV = 1.5   # bulk cancel >= 1.5x faster than libuv's
TIMER_CANCEL_VS_TOKIO = 1.0  # ... and faster than Tokio's
# lateness p99 no worse than libuv's; never early

TARGET_SPEEDUP = 1.5   # the issue: reference >= 1.5x faster than Tokio on both rows
TARGET_ALLOCS = 1.0    # ... with at most one allocation per task


def sizes_env(args):
    env = dict(os.environ)
    env["BENCH_ROUNDS"] = str(args.rounds)
    env["BENCH_TASKS"] = str(args.tasks)
    env["BENCH_SPAWN_N"] = str(args.spawn_n)
    return env


def run_once(binary, row, warmup, env, pin):
    pre = (lambda: os.sched_setaffinity(0, {pin})) if pin is not None else None
    out = subprocess.run([str(binary), row, str(warmup), "1"], capture_output=True, text=True,
                         env=env, timeout=600, preexec_fn=pre)
    if out.returncode != 0:
        raise RuntimeError(f"{binary.name} {row} failed ({out.returncode}): {out.stderr.strip()[:400]}")
    m = re.search(r"^ns (\d+)$", out.stdout, re.M)
    if not m:
        raise RuntimeError(f"{binary.name} {row}: no timing in {out.stdout!r}")
    return int(m.group(1))


def run_timer(binary, row, env, pin):
    pre = (lambda: os.sched_setaffinity(0, {pin})) if pin is not None else None
    out = subprocess.run([str(binary), row], capture_output=True, text=True,
                         env=env, timeout=600, preexec_fn=pre)
    if out.returncode != 0:
        raise RuntimeError(f"{binary.name} {row} failed ({out.returncode}): {out.stderr.strip()[:400]}")
    kv = {}
    for line in out.stdout.splitlines():
        k, _, v = line.partition(" ")
        try:
            kv[k] = int(v)
        except ValueError:
            kv[k] = v
    need = ("insert_ns", "cancel_ns", "n") if row == "bulk" else ("p50_ns", "p99_ns", "max_ns", "early", "cpu_ns")
    if any(k not in kv for k in need):
        raise RuntimeError(f"{binary.name} {row}: incomplete output {out.stdout!r}")
    return kv


def count_allocs(binary, row, warmup, env):
    out = subprocess.run([str(binary), row, str(warmup)], capture_output=True, text=True,
                         env=env, timeout=600)
    m = re.search(r"allocs (\d+) frees (\d+) tasks (\d+)", out.stdout)
    if out.returncode != 0 or not m:
        return None
    a, f, t = (int(x) for x in m.groups())
    return {"allocs": a, "frees": f, "tasks": t, "per_task": a / t}


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, shell=True, timeout=60).stdout.strip()
    except Exception:
        return ""


def machine():
    lscpu = sh("LC_ALL=C lscpu")
    model = re.search(r"^Model name:\s*(.*)$", lscpu, re.M)
    hyp = re.search(r"^Hypervisor vendor:\s*(.*)$", lscpu, re.M)
    cc = os.environ.get("CC", "cc")
    tokio = "?"
    for lock in (HERE / "tokio/Cargo.lock", HERE / "tokio-time/Cargo.lock"):
        if lock.exists():
            m = re.search(r'name = "tokio"\nversion = "([^"]+)"', lock.read_text())
            tokio = m.group(1) if m else "?"
            break
    return {
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "cpu": (model.group(1) if model else platform.processor() or "?")
        + (f" ({hyp.group(1)} guest)" if hyp else ""),
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "cc": sh(f"{cc} --version | head -1"),
        "rustc": sh("rustc --version"),
        "cargo": sh("cargo --version"),
        "tokio": tokio,
        "libuv": sh("pkg-config --modversion libuv") or "?",
        "loadavg_start": os.getloadavg()[0],
    }


def fmt_ms(ns):
    return f"{ns / 1e6:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=11, help="timed runs per runtime and row (11)")
    ap.add_argument("--warmup", type=int, default=None,
                    help="untimed iterations inside each process (default: 1 yield, 3 spawn)")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--tasks", type=int, default=500)
    ap.add_argument("--spawn-n", type=int, default=10000)
    ap.add_argument("--pin", type=int, default=None, help="run every process on this CPU")
    ap.add_argument("--only", default="", help="comma list of runtimes (ref,tokio,naive,uv)")
    ap.add_argument("--rows", default="", help="comma list of rows (yield,spawn,spawn-keep,bulk,bulk-scatter,fire)")
    ap.add_argument("--timer-runs", type=int, default=5, help="timed runs per timer implementation and row (5)")
    ap.add_argument("--timer-n", type=int, default=1000000, help="timers in the bulk row")
    ap.add_argument("--fire-n", type=int, default=100000, help="timers in the fire row")
    ap.add_argument("--fire-span-ms", type=int, default=1000, help="the fire row's deadlines spread over this")
    ap.add_argument("--json", default=str(BUILD / "results.json"), help="where to write the results")
    ap.add_argument("--build-log", default=None, help="file with the Tokio build's start and end")
    args = ap.parse_args()

    env = sizes_env(args)
    env["BENCH_TIMER_N"] = str(args.timer_n)
    env["BENCH_FIRE_N"] = str(args.fire_n)
    env["BENCH_FIRE_SPAN_MS"] = str(args.fire_span_ms)
    only = set(filter(None, args.only.split(",")))
    want_rows = set(filter(None, args.rows.split(",")))
    exec_wanted = not want_rows or any(r[0] in want_rows for r in ROWS)
    timer_wanted = not want_rows or any(r[0] in want_rows for r in TIMER_ROWS)
    present = [r for r in RUNTIMES if r[1].exists() and (not only or r[0] in only)] if exec_wanted else []
    missing = [r for r in RUNTIMES if not r[1].exists() and (not only or r[0] in only)] if exec_wanted else []
    tpresent = [r for r in TIMER_IMPLS if r[1].exists() and (not only or r[0] in only)] if timer_wanted else []
    tmissing = [r for r in TIMER_IMPLS if not r[1].exists() and (not only or r[0] in only)] if timer_wanted else []
    if not present and not tpresent:
        print("nothing to run: no benchmark binaries were built", file=sys.stderr)
        return 2

    info = machine()
    if args.build_log and pathlib.Path(args.build_log).exists():
        try:
            s, e = (float(x) for x in pathlib.Path(args.build_log).read_text().split())
            info["tokio_build_s"] = round(e - s, 2)
        except ValueError:
            pass

    rows = [(key, workload, label.format(rounds=args.rounds, tasks=args.tasks, spawn_n=args.spawn_n),
             args.warmup if args.warmup is not None else w, extra, judged)
            for key, workload, label, w, extra, judged in ROWS
            if not args.rows or key in args.rows.split(",")]

    print(f"{'executor' if present else 'timer'} benchmark: {info['date']}, {info['cpu']}, {info['cpus']} CPUs, "
          f"load {info['loadavg_start']:.2f}")
    print(f"  {info['cc']}; {info['rustc']}; Tokio {info['tokio']}"
          + (f" (cargo build: {info['tokio_build_s']} s)" if "tokio_build_s" in info else ""))
    if present:
        print(f"  {args.runs} runs per cell, runtimes alternating; in-process warm-up "
              + ", ".join(f"{key} {w}" for key, _, _, w, _, _ in rows)
              + ("" if args.pin is None else f"; pinned to CPU {args.pin}"))
    for r in missing:
        if r[0] == "ref":
            print("  reference: not built (solutions/03-executor/executor.c is not there yet)")
        else:
            print(f"  {r[0]}: not built ({r[1]})")
    sys.stdout.flush()

    results = {"machine": info, "runs": args.runs, "rows": {}}
    for key, row, label, warm, extra, judged in (rows if present else []):
        renv = dict(env, **extra)
        times = {r[0]: [] for r in present}
        # one untimed pass of every process first: page cache, binaries, CPU clocks
        for r in present:
            run_once(r[1], row, warm, renv, args.pin)
        for i in range(args.runs):
            k = i % len(present)
            for r in present[k:] + present[:k]:
                times[r[0]].append(run_once(r[1], row, warm, renv, args.pin))
        allocs = {r[0]: count_allocs(r[2], row, warm, renv) for r in present if r[2].exists()}
        results["rows"][key] = {
            "label": label,
            "env": extra,
            "judged": judged,
            "ns": times,
            "median_ns": {k: statistics.median(v) for k, v in times.items()},
            "min_ns": {k: min(v) for k, v in times.items()},
            "allocs": allocs,
        }

    if present:
        results["machine"]["loadavg_end"] = os.getloadavg()[0]
        print_table(results, present)
        sys.stdout.flush()

    if tpresent:
        results["timer_runs"] = args.timer_runs
        results["timer_rows"] = run_timers(args, env, tpresent, tmissing, info)
        results["machine"]["loadavg_end"] = os.getloadavg()[0]
        print_timer_table(results, tpresent)
    pathlib.Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.json).write_text(json.dumps(results, indent=1))
    print(f"\n(raw times: {os.path.relpath(args.json)})")
    return 0


def run_timers(args, env, tpresent, tmissing, info):
    print(f"\ntimer benchmark: libuv {info['libuv']}; Tokio {info['tokio']} (features rt, time)")
    print(f"  {args.timer_runs} runs per cell, implementations alternating; bulk: 1 untimed "
          "insert-all/cancel-all round in the process first; fire: deadlines from 200 ms after the start"
          + ("" if args.pin is None else f"; pinned to CPU {args.pin}"))
    for r in tmissing:
        if r[0] == "ref":
            print("  reference wheel: not built (solutions/05-timer/timer_wheel.c is not there or did not build)")
        else:
            print(f"  {r[0]}: not built ({os.path.relpath(r[1])})")
    sys.stdout.flush()
    want = set(filter(None, args.rows.split(",")))
    out = {}
    for key, workload, label, extra in TIMER_ROWS:
        if want and key not in want:
            continue
        renv = dict(env, **extra)
        runs = {r[0]: [] for r in tpresent}
        for i in range(args.timer_runs):
            k = i % len(tpresent)
            for r in tpresent[k:] + tpresent[:k]:
                runs[r[0]].append(run_timer(r[1], workload, renv, args.pin))
        med = {}
        for n, rs in runs.items():
            if workload == "bulk":
                med[n] = {
                    "insert_ns_op": statistics.median(x["insert_ns"] / x["n"] for x in rs),
                    "cancel_ns_op": statistics.median(x["cancel_ns"] / x["n"] for x in rs),
                    "insert_min_ns_op": min(x["insert_ns"] / x["n"] for x in rs),
                    "cancel_min_ns_op": min(x["cancel_ns"] / x["n"] for x in rs),
                }
            else:
                med[n] = {
                    "p50_ns": statistics.median(x["p50_ns"] for x in rs),
                    "p99_ns": statistics.median(x["p99_ns"] for x in rs),
                    "p99_max_ns": max(x["p99_ns"] for x in rs),
                    "max_ns": max(x["max_ns"] for x in rs),
                    "max_med_ns": statistics.median(x["max_ns"] for x in rs),
                    "min_ns": min(x["min_ns"] for x in rs),
                    "early": sum(x["early"] for x in rs),
                    "fired": sum(x["n"] for x in rs),
                    "cpu_ns": statistics.median(x["cpu_ns"] for x in rs),
                }
        out[key] = {"label": label.format(timer_n=args.timer_n, fire_n=args.fire_n, span=args.fire_span_ms),
                    "runs": runs, "summary": med}
    return out


def print_timer_table(results, tpresent):
    names = [r[0] for r in tpresent]
    labels = {r[0]: r[2] for r in TIMER_IMPLS}
    rows = results["timer_rows"]

    def table(head, lines):
        widths = [max(len(str(x)) for x in col) for col in zip(head, *lines)]
        print()
        print("| " + " | ".join(h.ljust(w) for h, w in zip(head, widths)) + " |")
        print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for line in lines:
            print("| " + " | ".join(str(x).ljust(w) for x, w in zip(line, widths)) + " |")

    bulk_rows = [k for k in ("bulk", "bulk-scatter") if k in rows]
    if bulk_rows:
        table(["row", "implementation", "insert ns/op median (min)", "cancel ns/op median (min)"],
              [[rows[b]["label"] if n == names[0] else "", labels[n],
                f"{rows[b]['summary'][n]['insert_ns_op']:.1f} ({rows[b]['summary'][n]['insert_min_ns_op']:.1f})",
                f"{rows[b]['summary'][n]['cancel_ns_op']:.1f} ({rows[b]['summary'][n]['cancel_min_ns_op']:.1f})"]
               for b in bulk_rows for n in names])
    if "fire" in rows:
        sm = rows["fire"]["summary"]
        table(["row", "implementation", "late p50 ms", "late p99 ms (worst run)", "late max ms",
               "early", "CPU ms"],
              [[rows["fire"]["label"] if n == names[0] else "", labels[n],
                f"{sm[n]['p50_ns'] / 1e6:.3f}", f"{sm[n]['p99_ns'] / 1e6:.3f} ({sm[n]['p99_max_ns'] / 1e6:.3f})",
                f"{sm[n]['max_ns'] / 1e6:.3f}", f"{sm[n]['early']}/{sm[n]['fired']}",
                f"{sm[n]['cpu_ns'] / 1e6:.1f}"] for n in names])
        print("  (medians over the runs of each run's p50 and p99; max and early over all runs; CPU: the\n"
              "   process's CPU time from the last registration to the last fire, median)")

    print("\ntimer ratios (libuv or Tokio over the reference: above 1 means the reference is faster)")
    verdict = []
    for b in bulk_rows:
        sm = rows[b]["summary"]
        for op in ("insert", "cancel"):
            parts = []
            for o in ("uv", "tokio"):
                if "ref" in sm and o in sm:
                    parts.append(f"{o}/ref {sm[o][op + '_ns_op'] / sm['ref'][op + '_ns_op']:.2f}")
            if "uv" in sm and "tokio" in sm:
                parts.append(f"tokio/uv {sm['tokio'][op + '_ns_op'] / sm['uv'][op + '_ns_op']:.2f}")
            print(f"  {b + ' ' + op:19} " + "   ".join(parts))
    if "bulk" in rows:
        sm = rows["bulk"]["summary"]
        if "ref" in sm and "uv" in sm:
            q = sm["ref"]["insert_ns_op"] / sm["uv"]["insert_ns_op"]
            verdict.append((f"bulk insert within {TIMER_INSERT_MAX}x of libuv's", f"ref/uv {q:.2f}",
                            q <= TIMER_INSERT_MAX))
            q = sm["uv"]["cancel_ns_op"] / sm["ref"]["cancel_ns_op"]
            verdict.append((f"bulk cancel >= {TIMER_CANCEL_VS_UV}x faster than libuv's", f"{q:.2f}x",
                            q >= TIMER_CANCEL_VS_UV))
        if "ref" in sm and "tokio" in sm:
            q = sm["tokio"]["cancel_ns_op"] / sm["ref"]["cancel_ns_op"]
            verdict.append(("bulk cancel faster than Tokio's", f"{q:.2f}x", q > TIMER_CANCEL_VS_TOKIO))
    if "fire" in rows:
        sm = rows["fire"]["summary"]
        parts = []
        for o in ("uv", "tokio"):
            if "ref" in sm and o in sm:
                parts.append(f"p99 {o}/ref {sm[o]['p99_ns'] / sm['ref']['p99_ns']:.2f}, "
                             f"CPU {o}/ref {sm[o]['cpu_ns'] / sm['ref']['cpu_ns']:.2f}")
        if parts:
            print(f"  {'fire':19} " + "   ".join(parts))
        if "ref" in sm and "uv" in sm:
            verdict.append(("lateness p99 no worse than libuv's",
                            f"{sm['ref']['p99_ns'] / 1e6:.3f} ms vs {sm['uv']['p99_ns'] / 1e6:.3f} ms",
                            sm["ref"]["p99_ns"] <= sm["uv"]["p99_ns"]))
        if "ref" in sm:
            verdict.append(("never early", f"{sm['ref']['early']} early of {sm['ref']['fired']}",
                            sm["ref"]["early"] == 0))
    if verdict:
        print("\ntarget (the issue), reference timer wheel:")
        w = max(len(v[0]) for v in verdict)
        for what, val, ok in verdict:
            print(f"  {what.ljust(w)}  {val:24} " + ("met" if ok else "MISSED"))
        print("  overall: " + ("met" if all(v[2] for v in verdict) else "MISSED"))
    m = results["machine"]
    if max(m["loadavg_start"], m["loadavg_end"]) > 0.5 * (m["cpus"] or 1):
        print(f"\nnote: the machine was busy (load {m['loadavg_start']:.2f} -> {m['loadavg_end']:.2f}); "
              "lateness tails are the first to suffer")


def print_table(results, present):
    names = [r[0] for r in present]
    head = ["row", "runtime", "median ms", "min ms", "allocs/task"]
    lines = []
    for row, res in results["rows"].items():
        for n in names:
            a = res["allocs"].get(n)
            al = f"{a['per_task']:.2f} ({a['allocs']}/{a['tasks']})" if a else "-"
            lines.append([res["label"] if n == names[0] else "", dict(
                ref="reference", tokio="Tokio current_thread", naive="naive port")[n],
                fmt_ms(res["median_ns"][n]), fmt_ms(res["min_ns"][n]), al])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines)]
    print()
    print("| " + " | ".join(h.ljust(w) for h, w in zip(head, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for line in lines:
        print("| " + " | ".join(str(x).ljust(w) for x, w in zip(line, widths)) + " |")

    print("\nratios of median times (time / time: below 1 is faster; the speed-up beside it)")
    verdict = []
    for row, res in results["rows"].items():
        med = res["median_ns"]
        parts = []
        for a, b in (("ref", "tokio"), ("ref", "naive"), ("naive", "tokio")):
            if a in med and b in med:
                q = med[a] / med[b]
                parts.append(f"{a}/{b} {q:.2f} ({1 / q:.2f}x)")
        print(f"  {row:10} " + "   ".join(parts))
        if "ref" in med and "tokio" in med and res["judged"]:
            sp = med["tokio"] / med["ref"]
            a = res["allocs"].get("ref")
            verdict.append((row, sp, a["per_task"] if a else None))
    if verdict:
        print(f"\ntarget (the issue): reference >= {TARGET_SPEEDUP}x faster than Tokio current_thread "
              f"on the yield and spawn rows, <= {TARGET_ALLOCS:g} allocation per task")
        ok_all = True
        for row, sp, apt in verdict:
            ok = sp >= TARGET_SPEEDUP and apt is not None and apt <= TARGET_ALLOCS + 0.01
            ok_all &= ok
            print(f"  {row:10} {sp:.3f}x faster, {apt if apt is None else f'{apt:.2f}'} allocs/task: "
                  + ("met" if ok else "MISSED"))
        print("  overall: " + ("met" if ok_all else "MISSED"))
    m = results["machine"]
    if max(m["loadavg_start"], m["loadavg_end"]) > 0.5 * (m["cpus"] or 1):
        print(f"\nnote: the machine was busy (load {m['loadavg_start']:.2f} -> {m['loadavg_end']:.2f}); "
              "the ratios hold better than the absolute times")


if __name__ == "__main__":
    sys.exit(main())
