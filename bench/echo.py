#!/usr/bin/env python3
"""echo.py - the echo benchmark (`make bench`, after run.py's tables).

Three single-threaded echo servers on 127.0.0.1, one load client:

  ref    the lab's reference: examples/06-reactor/echo_server.c on
         solutions/ stages 01-03, 05, 06 (build/echo_ref)
  uv     libuv 1.44 (libuv1-dev): echo/echo_uv.c (build/echo_uv)
  tokio  Tokio's current_thread runtime, offline from Debian's crates:
         tokio-echo/ (tokio-echo/target/release/tokio_echo)

The client is examples/06-reactor/load_client.c (plain C, level-triggered
epoll, N connections with one message in flight each). Server pinned to
CPU 0, client to CPU 1 (taskset). For every row (connections x message
size) and run, the servers take turns, the order rotating; each server runs
for the whole benchmark. Per cell: round trips per second and p99 latency
(medians over the runs), server CPU time per round trip (the server's
/proc/PID/task/*/schedstat run time, before and after the client's run:
nanoseconds, every thread counted; median over the runs), and syscalls per
round trip (one shorter run under `strace -c -f -p PID`; strace slows the
server down, but it counts calls, not time).

Only the Python standard library is used.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
BUILD = HERE / "build"
SERVERS = [
    ("ref", BUILD / "echo_ref", "reference (stage 06)"),
    ("uv", BUILD / "echo_uv", "libuv 1.44"),
    ("tokio", HERE / "tokio-echo/target/release/tokio_echo", "Tokio current_thread"),
]
CLIENT = BUILD / "load_client"
ROWS = [(1, 64), (1, 4096), (100, 64), (100, 4096)]


def cpu_ns(pid):
    total = 0
    for t in pathlib.Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((t / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def start(binary, cpu):
    p = subprocess.Popen(["taskset", "-c", str(cpu), str(binary), "0"], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    m = re.search(r":(\d+)$", line.strip())
    if not m:
        p.kill()
        raise RuntimeError(f"{binary.name} did not say where it listens: {line!r}")
    return p, int(m.group(1))


def client(port, conns, rounds, size, cpu):
    out = subprocess.run(["taskset", "-c", str(cpu), str(CLIENT), "127.0.0.1", str(port), str(conns), str(rounds),
                          str(size)], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"load_client failed: {out.stderr.strip()[:300]}")
    kv = {}
    for line in out.stdout.splitlines():
        k, _, v = line.partition(" ")
        kv[k] = float(v)
    return kv


def syscalls(pid, port, conns, rounds, size, cpu):
    """Syscalls per round trip, and the three most frequent, from strace -c."""
    log = BUILD / f"strace-{pid}.txt"
    st = subprocess.Popen(["strace", "-c", "-f", "-q", "-p", str(pid), "-o", str(log)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # attached to every thread by then
    kv = client(port, conns, rounds, size, cpu)
    time.sleep(0.1)
    st.send_signal(signal.SIGINT)
    st.wait(timeout=30)
    text = log.read_text()
    log.unlink()
    calls = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 5 and re.match(r"^[\d.]+$", parts[0]) and parts[-1] != "total":
            # % time, seconds, usecs/call, calls, [errors], syscall
            calls[parts[-1]] = int(parts[3])
    rt = kv["round_trips"]
    total = sum(calls.values())
    top = sorted(calls.items(), key=lambda x: -x[1])[:4]
    return total / rt, [(name, n / rt) for name, n in top]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="timed runs per server and row (3)")
    ap.add_argument("--round-trips", type=int, default=40000, help="round trips per timed run, over all connections")
    ap.add_argument("--strace-round-trips", type=int, default=4000, help="round trips of the strace run")
    ap.add_argument("--only", default="", help="comma list of servers (ref,uv,tokio)")
    ap.add_argument("--json", default=str(BUILD / "echo.json"))
    args = ap.parse_args()

    servers = [s for s in SERVERS if s[1].exists() and (not args.only or s[0] in args.only.split(","))]
    missing = [s[0] for s in SERVERS if not s[1].exists()]
    if missing:
        print(f"echo benchmark: not built, left out: {', '.join(missing)}", file=sys.stderr)
    if not CLIENT.exists() or not servers:
        print("echo benchmark: nothing to run (build/load_client or every server is missing)", file=sys.stderr)
        return 1
    have_strace = shutil.which("strace") is not None
    cpus = os.cpu_count() or 1
    scpu, ccpu = (0, 1) if cpus >= 2 else (0, 0)
    load0 = os.getloadavg()[0]
    procs = {}
    try:
        for name, binary, _ in servers:
            procs[name] = start(binary, scpu)
        results = {}
        for conns, size in ROWS:
            per_conn = max(1, args.round_trips // conns)
            for r in range(args.runs):
                order = servers[r % len(servers):] + servers[:r % len(servers)]
                for name, _, _ in order:
                    p, port = procs[name]
                    c0 = cpu_ns(p.pid)
                    kv = client(port, conns, per_conn, size, ccpu)
                    c1 = cpu_ns(p.pid)
                    cell = results.setdefault(f"{conns}x{size}", {}).setdefault(name, {"runs": []})
                    cell["runs"].append({"rt_per_s": kv["rt_per_s"], "p50_us": kv["p50_us"], "p99_us": kv["p99_us"],
                                         "cpu_ns_per_rt": (c1 - c0) / kv["round_trips"]})
            if have_strace:
                for name, _, _ in servers:
                    p, port = procs[name]
                    per, top = syscalls(p.pid, port, conns, max(1, args.strace_round_trips // conns), size, ccpu)
                    results[f"{conns}x{size}"][name]["syscalls_per_rt"] = per
                    results[f"{conns}x{size}"][name]["top"] = top
    finally:
        for p, _ in procs.values():
            p.terminate()
            p.wait()
    load1 = os.getloadavg()[0]

    labels = {n: label for n, _, label in SERVERS}
    print(f"\necho benchmark: {args.runs} runs per cell, {args.round_trips:,} round trips per run, servers "
          f"alternating; server on CPU {scpu}, client on CPU {ccpu}; load average {load0:.1f} -> {load1:.1f}\n")
    head = ("| row | server | round trips/s | p50 us | p99 us | server CPU ns/rt | syscalls/rt | most frequent (per rt) |")
    print(head)
    print("|---|---|---|---|---|---|---|---|")
    summary = {}
    for conns, size in ROWS:
        key = f"{conns}x{size}"
        for name, _, _ in servers:
            cell = results[key][name]
            med = {k: statistics.median(run[k] for run in cell["runs"]) for k in cell["runs"][0]}
            cell["median"] = med
            summary.setdefault(key, {})[name] = med | {"syscalls_per_rt": cell.get("syscalls_per_rt")}
            sc = f"{cell['syscalls_per_rt']:.2f}" if "syscalls_per_rt" in cell else "-"
            top = ", ".join(f"{n} {v:.2f}" for n, v in cell.get("top", []))
            row = f"{conns} conn x {size} B" if name == servers[0][0] else ""
            print(f"| {row} | {labels[name]} | {med['rt_per_s']:,.0f} | {med['p50_us']:.1f} | {med['p99_us']:.1f} | "
                  f"{med['cpu_ns_per_rt']:,.0f} | {sc} | {top} |")
    names = [s[0] for s in servers]
    if "ref" in names:
        print("\nratios (other / reference: above 1 means the reference is cheaper or faster; rt/s: reference / other)")
        for conns, size in ROWS:
            key = f"{conns}x{size}"
            ref = summary[key]["ref"]
            parts = []
            for other in (n for n in names if n != "ref"):
                o = summary[key][other]
                s = f"{other}: CPU/rt {o['cpu_ns_per_rt'] / ref['cpu_ns_per_rt']:.2f}"
                if o.get("syscalls_per_rt") and ref.get("syscalls_per_rt"):
                    s += f", syscalls/rt {o['syscalls_per_rt'] / ref['syscalls_per_rt']:.2f}"
                s += f", p99 {o['p99_us'] / ref['p99_us']:.2f}, rt/s {ref['rt_per_s'] / o['rt_per_s']:.2f}"
                parts.append(s)
            print(f"  {conns:>3} conn x {size:>4} B   " + "   ".join(parts))
    BUILD.mkdir(exist_ok=True)
    pathlib.Path(args.json).write_text(json.dumps({"load": [load0, load1], "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
