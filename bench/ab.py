#!/usr/bin/env python3
"""ab.py - one row of the executor benchmark for any set of binaries that
speak bench.c's command line (ROW WARMUP REPS -> "ns N" lines), side by
side: a copy of the reference built before a change beside the one after,
say. One process per run, the binaries alternating and the order rotating;
prints the median and minimum time and the page faults per process (minor
faults from wait4's rusage: warm-up and start-up included).

  python3 bench/ab.py --row spawn --runs 11 before=/tmp/bench_ref_old \\
      after=bench/build/bench_ref tokio=bench/tokio/target/release/tokio_bench
"""
import argparse, os, re, statistics, subprocess, sys, time


def run(binary, row, warmup, env):
    p = subprocess.Popen([binary, row, str(warmup), "1"], stdout=subprocess.PIPE, env=env, text=True)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit(f"{binary} {row}: exit status {status}")
    m = re.search(r"^ns (\d+)$", out, re.M)
    return int(m.group(1)), ru.ru_minflt + ru.ru_majflt


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--row", default="spawn")
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for every run")
    ap.add_argument("bins", nargs="+", help="name=path")
    a = ap.parse_args()
    env = dict(os.environ)
    for kv in a.env:
        k, v = kv.split("=", 1)
        env[k] = v
    bins = [b.split("=", 1) for b in a.bins]
    res = {n: [] for n, _ in bins}
    for n, p in bins:
        run(p, a.row, a.warmup, env)  # untimed: caches, page cache
    load0 = open("/proc/loadavg").read().split()[0]
    for r in range(a.runs):
        k = r % len(bins)
        for n, p in bins[k:] + bins[:k]:
            res[n].append(run(p, a.row, a.warmup, env))
    load1 = open("/proc/loadavg").read().split()[0]
    print(f"row {a.row}, {a.runs} runs each, alternating, warm-up {a.warmup}, load {load0} -> {load1}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    base = statistics.median(t for t, _ in res[bins[0][0]])
    for n, _ in bins:
        ts = [t for t, _ in res[n]]
        fs = [f for _, f in res[n]]
        med = statistics.median(ts)
        print(f"  {n:<12} median {med / 1e6:8.3f} ms  min {min(ts) / 1e6:8.3f} ms  "
              f"faults/process {statistics.median(fs):8.0f}  {bins[0][0]}/{n} {base / med:5.2f}x")


if __name__ == "__main__":
    main()
