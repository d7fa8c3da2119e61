"""The examples build from solutions/ and work: the echo server answers the
load client, the HTTP server answers a GET (examples/06-reactor); the same
echo server on the work-stealing runtime answers it too, also under
ThreadSanitizer (examples/07-work-stealing)."""
import re
import socket
import subprocess

import pytest

from conftest import ROOT

EX = ROOT / "examples" / "06-reactor"
EX_MT = ROOT / "examples" / "07-work-stealing"


@pytest.fixture(scope="module")
def b(tmp_path_factory):
    """The three programs, built once for this module."""
    out = tmp_path_factory.mktemp("examples") / "build"
    proc = subprocess.run(["make", "-s", "-C", str(EX), f"B={out}"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="module")
def b_mt(tmp_path_factory):
    """echo_server_mt and the load client; and echo_server_mt built with
    -fsanitize=thread in tsan/."""
    out = tmp_path_factory.mktemp("examples-mt")
    for sub, flags in (("build", ""), ("tsan", "-fsanitize=thread -O1")):
        proc = subprocess.run(["make", "-s", "-C", str(EX_MT), f"B={out / sub}", f"EXAMPLE_CFLAGS={flags}"],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def serve(binary, *args, env=None):
    """Starts a server on any port; returns (process, port)."""
    p = subprocess.Popen([str(binary), "0", *args], stdout=subprocess.PIPE, text=True, env=env)
    line = p.stdout.readline()
    m = re.search(r":(\d+)$", line.strip())
    if not m:
        p.kill()
        p.wait()
        raise AssertionError(f"{binary.name} did not say where it listens: {line!r}")
    return p, int(m.group(1))


def test_echo_server_and_load_client(b):
    p, port = serve(b / "echo_server")
    try:
        out = subprocess.run([str(b / "load_client"), "127.0.0.1", str(port), "20", "50", "3000"],
                             capture_output=True, text=True, timeout=60)
    finally:
        p.kill()
        p.wait()
    assert out.returncode == 0, out.stderr
    assert "round_trips 1000" in out.stdout, out.stdout
    assert re.search(r"^p99_us [\d.]+$", out.stdout, re.M), out.stdout


def test_echo_server_exits_after_its_connections(b):
    """echo_server PORT N serves N connections to their end and exits 0 (how
    make trace STAGE=6 runs it, so that the trace is written at exit)."""
    p = subprocess.Popen([str(b / "echo_server"), "0", "3"], stdout=subprocess.PIPE, text=True)
    try:
        port = re.search(r":(\d+)$", p.stdout.readline().strip()).group(1)
        out = subprocess.run([str(b / "load_client"), "127.0.0.1", port, "3", "20", "100"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and "round_trips 60" in out.stdout, out.stdout + out.stderr
        assert p.wait(timeout=20) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_http_hello(b):
    p, port = serve(b / "http_hello")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /again HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
    finally:
        p.kill()
        p.wait()
    assert data.count(b"HTTP/1.1 200 OK") == 2, data
    assert data.count(b"hello, world\n") == 2, data


def test_echo_server_on_the_work_stealing_runtime(b_mt):
    """The stage 06 echo server's tasks on two workers: whichever worker is
    idle parks in epoll_wait (stage 07's contract 5), readiness wakes tasks
    polled on the other. Forty connections, served to their end, then a
    clean exit."""
    p, port = serve(b_mt / "build" / "echo_server_mt", "40")
    try:
        out = subprocess.run([str(b_mt / "build" / "load_client"), "127.0.0.1", str(port), "40", "100", "3000"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and "round_trips 4000" in out.stdout, out.stdout + out.stderr
        assert p.wait(timeout=30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_echo_server_on_the_work_stealing_runtime_under_tsan(b_mt):
    """The same under ThreadSanitizer: no report from the reactor, the
    drivers and the workers sharing them (halt_on_error: a report ends the
    server with status 66)."""
    import os
    env = dict(os.environ, TSAN_OPTIONS="halt_on_error=1 exitcode=66")
    p, port = serve(b_mt / "tsan" / "echo_server_mt", "10", env=env)
    try:
        out = subprocess.run([str(b_mt / "build" / "load_client"), "127.0.0.1", str(port), "10", "50", "3000"],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and "round_trips 500" in out.stdout, out.stdout + out.stderr
        assert p.wait(timeout=60) == 0, "echo_server_mt under TSan did not exit cleanly (66: a data race report)"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
