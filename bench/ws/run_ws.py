#!/usr/bin/env python3
"""run_ws.py - stage 07's benchmark table (`make bench`, after the executor
and timer tables): the lab's work-stealing runtime (build/bench_ws, from
solutions/07-work-stealing), Tokio's multi_thread runtime
(tokio-mt/target/release/tokio_mt) and oneTBB's task_arena (build/bench_tbb,
only the rows that fit), 2 workers each.

One measurement is one process: `<row> <warmup>` runs `warmup` untimed
iterations, then one timed one, and prints `ns <wall>`. The implementations
take turns, one process at a time, and the order rotates from run to run, so
drift and other load fall on every side alike. The table gives the median.
Polls and allocations per operation come from the counting binaries
(*_allocs / tokio_mt_counts): one iteration after the warm-up.

Only the Python standard library is used.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess

HERE = pathlib.Path(__file__).resolve().parent
BENCH = HERE.parent
BUILD = BENCH / "build"

IMPLS = [
    # key, timing binary, counting binary, label
    ("ws", BUILD / "bench_ws", BUILD / "bench_ws_allocs", "lab (stage 07)"),
    ("tokio", BENCH / "tokio-mt/target/release/tokio_mt", BENCH / "tokio-mt/target/release/tokio_mt_counts",
     "Tokio multi_thread"),
    ("tbb", BUILD / "bench_tbb", BUILD / "bench_tbb_allocs", "oneTBB task_arena"),
]

ROWS = [
    # key, label, warm-up iterations, implementations that have the row
    ("spawn", "spawn/join, 10k tasks", 3, ("ws", "tokio", "tbb")),
    ("pingpong", "ping-pong, 1M round trips", 1, ("ws", "tokio")),
    ("bounded", "bounded channel (64), 4x2,500 msgs", 3, ("ws", "tokio")),
    ("unbounded", "unbounded channel, 4x2,500 msgs", 3, ("ws", "tokio")),
    ("mutex1", "mutex, 1 task x 10k", 3, ("ws", "tokio")),
    ("mutex16", "mutex, 16 tasks x 625", 3, ("ws", "tokio")),
    ("tree", "fork-join tree, depth 12", 3, ("ws", "tokio", "tbb")),
]


def run(binary, row, warmup, env):
    out = subprocess.run([str(binary), row, str(warmup)], capture_output=True, text=True, env=env, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"{binary.name} {row}: exit {out.returncode}: {out.stderr.strip()[:200]}")
    vals = {}
    for line in out.stdout.splitlines():
        k, _, v = line.partition(" ")
        if v:
            vals[k] = int(v)
    return vals


def fmt(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e3:.1f} us"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--rows", default="")
    ap.add_argument("--json", default=str(BUILD / "ws-results.json"))
    args = ap.parse_args()
    env = dict(os.environ, BENCH_WORKERS="2")
    present = [i for i in IMPLS if i[1].exists()]
    for i in IMPLS:
        if not i[1].exists():
            print(f"  {i[3]}: not built, left out")
    want = set(args.rows.split(",")) if args.rows else None
    load = os.getloadavg()
    print(f"\nwork-stealing benchmark (stage 07): 2 workers each; {args.runs} runs per cell, implementations "
          f"alternating; load average before: {load[0]:.1f}")
    results = {}
    for key, label, warmup, has in ROWS:
        if want and key not in want:
            continue
        impls = [i for i in present if i[0] in has]
        times = {i[0]: [] for i in impls}
        for r in range(args.runs):
            order = impls[r % len(impls):] + impls[:r % len(impls)]
            for i in order:
                times[i[0]].append(run(i[1], key, warmup, env)["ns"])
        counts = {}
        for i in impls:
            if i[2].exists():
                c = run(i[2], key, 1, env)
                ops = max(c.get("ops", 1), 1)
                counts[i[0]] = (c.get("polls", 0) / ops, c.get("allocs", 0) / ops)
        results[key] = {"label": label, "median_ns": {k: statistics.median(v) for k, v in times.items()},
                        "min_ns": {k: min(v) for k, v in times.items()}, "counts": counts}
    load_after = os.getloadavg()
    names = [i for i in present]
    head = f"{'row':38} " + " ".join(f"{i[3]:>20}" for i in names) + "   Tokio/lab   TBB/lab"
    print(head)
    print("-" * len(head))
    for key, res in results.items():
        cells = []
        for i in names:
            m = res["median_ns"].get(i[0])
            cells.append(f"{fmt(m) if m is not None else '-':>20}")
        ws = res["median_ns"].get("ws")
        tk = res["median_ns"].get("tokio")
        tb = res["median_ns"].get("tbb")
        r1 = f"{tk / ws:9.2f}x" if ws and tk else f"{'-':>10}"
        r2 = f"{tb / ws:9.2f}x" if ws and tb else f"{'-':>10}"
        print(f"{res['label']:38} " + " ".join(cells) + f"  {r1}  {r2}")
        cl = []
        for i in names:
            c = res["counts"].get(i[0])
            cl.append(f"{(f'{c[0]:.2f}p {c[1]:.2f}a') if c else '-':>20}")
        print(f"{'  polls (p) and allocations (a) per op':38} " + " ".join(cl))
    print(f"(median wall time per row; ratio above 1: the lab's runtime is faster; load average after: "
          f"{load_after[0]:.1f}. TBB's polls are not counted: it has no futures)")
    pathlib.Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.json).write_text(json.dumps({"runs": args.runs, "load": [load, load_after],
                                                   "rows": results}, indent=1))


if __name__ == "__main__":
    main()
