#!/usr/bin/env python3
"""http.py - the HTTP benchmark: examples/06-reactor/http_hello against the
same server on libuv, driven by real clients (`make -C bench http`).

  ref    the lab's reference: examples/06-reactor/http_hello.c on solutions/
         stages 01-03, 05, 06 (build/http_ref)
  uv     libuv 1.44 with the same http_parser and the same answers:
         http/http_uv.c (build/http_uv)

Clients from the distribution: ab (apache2-utils), wrk, h2load
(nghttp2-client); each cell below is one client command. Server pinned to
CPU 0, client to CPU 1 (taskset) when the machine has two. The servers take
turns, the order rotating from run to run; each run starts a fresh server.
Per cell: requests per second (median over the runs) and server CPU time per
request (/proc/PID/task/*/schedstat, before and after the client), and the
ratio ref/uv of each.

Then the fairness cell (issue 12): one client floods its connection with
pipelined requests (h2load -c1 -m1000: a thousand in flight), while another opens a connection every
50 ms and times one request on it. The delay the flooder causes the other
client is the figure: p50 and max over the probes.

Only the Python standard library is used. Everything is on 127.0.0.1.
"""
import argparse
import os
import pathlib
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from echo import cpu_ns  # noqa: E402 - the server CPU a run took, counted as for the echo rows

HERE = pathlib.Path(__file__).resolve().parent
BUILD = HERE / "build"
SERVERS = [("ref", BUILD / "http_ref"), ("uv", BUILD / "http_uv")]

CELLS = [
    ("ab -c50 (HTTP/1.0, a connection per request)", ["ab", "-q", "-s", "10", "-n", "20000", "-c", "50"]),
    ("ab -k -c50 (keep-alive)", ["ab", "-q", "-s", "10", "-k", "-n", "50000", "-c", "50"]),
    ("wrk -c50 2 s", ["wrk", "-t1", "-c50", "-d2s", "--timeout", "5s"]),
    ("h2load --h1 -c10 -m16 (pipelined)", ["h2load", "--h1", "-n", "200000", "-c", "10", "-m", "16", "-T", "10"]),
]


def pin(cpu):
    return ["taskset", "-c", str(cpu)] if shutil.which("taskset") and os.cpu_count() >= 2 else []


def start(binary):
    p = subprocess.Popen([*pin(0), str(binary), "0"], stdout=subprocess.PIPE, text=True)
    m = re.search(r":(\d+)$", p.stdout.readline().strip())
    if not m:
        p.kill()
        raise RuntimeError(f"{binary.name} did not say where it listens")
    return p, int(m.group(1))


def requests_done(tool, out):
    """(requests answered, requests per second, failures) from a client's output."""
    if tool == "ab":
        n = int(re.search(r"^Complete requests:\s+(\d+)", out, re.M).group(1))
        rps = float(re.search(r"^Requests per second:\s+([\d.]+)", out, re.M).group(1))
        failed = int(re.search(r"^Failed requests:\s+(\d+)", out, re.M).group(1))
        failed += int(m.group(1)) if (m := re.search(r"^Non-2xx responses:\s+(\d+)", out, re.M)) else 0
    elif tool == "wrk":
        n = int(re.search(r"^\s*(\d+) requests in", out, re.M).group(1))
        rps = float(re.search(r"^Requests/sec:\s+([\d.]+)", out, re.M).group(1))
        failed = 0 if "Socket errors" not in out and "Non-2xx" not in out else 1
    else:
        m = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed", out)
        n, failed = int(m.group(2)), int(m.group(3))
        rps = float(re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", out).group(1))
    return n, rps, failed


def run_cell(binary, cmd):
    p, port = start(binary)
    try:
        before = cpu_ns(p.pid)
        out = subprocess.run([*pin(1), *cmd, f"http://127.0.0.1:{port}/"], capture_output=True, text=True,
                             timeout=120)
        spent = cpu_ns(p.pid) - before
        if out.returncode != 0:
            raise RuntimeError(f"{cmd[0]} failed: {(out.stdout + out.stderr)[-300:]}")
        n, rps, failed = requests_done(cmd[0], out.stdout)
        return rps, spent / max(n, 1), failed
    finally:
        p.kill()
        p.wait()


def probe(port, seconds):
    """Times one request on a fresh connection every 50 ms, for `seconds`."""
    delays = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        start = time.monotonic()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
                while s.recv(4096):
                    pass
            delays.append(time.monotonic() - start)
        except OSError:
            delays.append(float("inf"))
        time.sleep(0.05)
    return delays


def fairness(binary, seconds):
    p, port = start(binary)
    try:
        flood = subprocess.Popen([*pin(1), "h2load", "--h1", "-c1", "-m1000", "-D", str(seconds + 1),
                                  f"http://127.0.0.1:{port}/"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        delays = probe(port, seconds)
        flood.kill()
        flood.wait()
        return delays
    finally:
        p.kill()
        p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--flood-seconds", type=float, default=4)
    args = ap.parse_args()
    servers = [(k, b) for k, b in SERVERS if b.exists()]
    for k, b in SERVERS:
        if not b.exists():
            print(f"http: {b.name} was not built: running without it")
    cells = [(name, cmd) for name, cmd in CELLS if shutil.which(cmd[0])]
    for name, cmd in CELLS:
        if not shutil.which(cmd[0]):
            print(f"http: {cmd[0]} is not installed: '{name}' left out")
    print(f"load average {os.getloadavg()[0]:.1f}; {args.runs} runs per cell; medians")
    print(f"{'cell':48} " + " ".join(f"{k + ' req/s':>12} {k + ' ns/req':>12}" for k, _ in servers)
          + ("   ratio ref/uv: req/s, CPU/req" if len(servers) == 2 else ""))
    for name, cmd in cells:
        res = {k: [] for k, _ in servers}
        for run in range(args.runs):
            order = servers[run % len(servers):] + servers[:run % len(servers)]
            for k, b in order:
                res[k].append(run_cell(b, cmd))
        med = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v), sum(r[2] for r in v))
               for k, v in res.items()}
        line = f"{name:48} " + " ".join(f"{med[k][0]:12.0f} {med[k][1]:12.0f}" for k, _ in servers)
        if len(servers) == 2:
            line += f"   {med['ref'][0] / med['uv'][0]:.2f}x, {med['ref'][1] / med['uv'][1]:.2f}x"
        failed = {k: m[2] for k, m in med.items() if m[2]}
        print(line + (f"   FAILURES {failed}" if failed else ""))
    if shutil.which("h2load"):
        print(f"fairness: a probe request every 50 ms beside a flooding connection (h2load -c1 -m1000), "
              f"{args.flood_seconds:.0f} s")
        for k, b in servers:
            d = fairness(b, args.flood_seconds)
            print(f"  {k:5} probes {len(d):3}  p50 {statistics.median(d) * 1e3:8.1f} ms  max {max(d) * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
