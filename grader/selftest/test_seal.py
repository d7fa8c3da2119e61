"""The harness's seal (common/testing/harness.c, seal_code) and the FAIL
record, tested on their own: a probe built with the harness, outside the
grader, tries each call the seal must refuse once a test has begun and a few
it must allow; and a FAIL record, once written, stays and fails the test
whatever the runner reports (issue 25: a hook on the failure path that
resumed the body at the check's passing branch earned 6 of 24 points where
the same code earns 3)."""
import pathlib
import platform
import subprocess

import pytest

from conftest import ROOT

from lab_grader import judge, records
from lab_grader.outcomes import Verdict

PROBE = pathlib.Path(__file__).parent / "data" / "seal" / "probe.c"
EPERM, EACCES = 1, 13
EXPECTED = {
    # code made writable, new code made executable, a file written
    "mprotect-exec": EPERM, "mmap-exec": EPERM, "open-mem-write": EACCES, "openat-write": EACCES,
    "open-truncating": EACCES,
    "truncate": EPERM, "ptrace": EPERM, "personality": EPERM, "io-uring-setup": EPERM,
    # the record's descriptor closed, replaced, changed or cut
    "seccomp-stacked": EPERM, "prctl-seccomp": EPERM,
    "close-record": EPERM, "dup-record": EPERM, "dup2-record": EPERM, "dup3-record": EPERM, "fcntl-record": EPERM,
    "ftruncate-record": EPERM, "fallocate-record": EPERM, "ioctl-record": EPERM, "close-range-record": EPERM,
    "pwritev2-record": EPERM, "ftruncate-after-fail": EPERM,
    # what the stages and the tests do
    "mmap-rw": 0, "mprotect-ro": 0, "open-read": 0, "close-other": 0, "close-range-above": 0, "fcntl-other": 0,
}


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    if platform.machine() != "x86_64":
        pytest.skip("the seal is built for x86-64 only (harness.c)")
    d = tmp_path_factory.mktemp("seal")
    exe = d / "probe"
    c = ROOT / "common"
    build = subprocess.run(["gcc", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", f"-I{c}", f"-I{c / 'testing'}",
                            str(PROBE), str(c / "testing" / "harness.c"), str(c / "lab_todo.c"), "-o", str(exe),
                            "-lpthread"], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    rec = d / "rec"
    rec.mkdir()
    victim = d / "victim"
    victim.write_text("unchanged\n")
    run = subprocess.run([str(exe), str(victim)], capture_output=True, text=True, timeout=60, cwd=d,
                         env={"LAB_RUN_DIR": str(rec), "LAB_NONCE": "n0nce", "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stdout + run.stderr
    seen = dict(line.rsplit(" ", 1) for line in run.stdout.splitlines())
    return {k: int(v) for k, v in seen.items()}, (rec / "seal.probe.log").read_text(), victim, exe, d


def test_the_seal_refuses_what_a_forge_needs_and_allows_the_rest(probe):
    seen, _, victim, _, _ = probe
    wrong = {k: (seen.get(k), want) for k, want in EXPECTED.items() if seen.get(k) != want}
    assert not wrong, f"call: (errno seen, errno expected): {wrong}"
    assert victim.read_text() == "unchanged\n"


def test_a_fail_record_stays_and_fails_a_reported_pass(probe):
    _, log, _, _, _ = probe
    runs = records.parse(log)
    assert len(runs) == 1 and runs[0].check_failed and runs[0].ended, log
    report = {"seal::probe": ("PASSED", "", "", 0.1)}

    class NoSymbols:
        def sites(self, text):
            return text

    o = judge.judge("seal::probe", report, {"seal::probe": runs}, NoSymbols(), "n0nce")
    assert o.verdict == Verdict.FAIL and "a check failed" in o.message, o
    clean = records.parse(log.replace("\nFAIL ", "\nNOTE "))
    assert judge.judge("seal::probe", report, {"seal::probe": clean}, NoSymbols(), "n0nce").verdict == Verdict.PASS


def test_a_fail_record_that_cannot_be_written_ends_the_test(probe):
    """Code under test that made the FAIL write fail (the third red-team
    pass: a file-size limit at the record's size, SIGXFSZ ignored) gets no
    chance to resume: the process ends there, with no END."""
    _, _, victim, exe, d = probe
    rec = d / "rec-fsize"
    rec.mkdir()
    run = subprocess.run([str(exe), str(victim), "fsize"], capture_output=True, text=True, timeout=60, cwd=d,
                         env={"LAB_RUN_DIR": str(rec), "LAB_NONCE": "n0nce", "PATH": "/usr/bin:/bin"})
    assert run.returncode == 70 and "survived" not in run.stdout, (run.returncode, run.stdout)
    assert not records.parse((rec / "seal.probe.log").read_text())[0].ended


def test_a_fail_line_inside_a_backtrace_block_still_counts():
    """A backtrace block that code under test opened (BT-BEGIN, never
    closed) swallowed the FAIL line of the check that failed after it (the
    third red-team pass: 14 of 24 for code that earns 1)."""
    log = "BEGIN 7 s::t\nBT-BEGIN 7 7 hang\n\nFAIL 7\nBT-END\nSITES 7 1f\nEND 7 s::t n0nce\n"
    run = records.parse(log)[0]
    assert run.check_failed and run.ended


def test_the_tsan_lane_has_no_runtime_to_call_by_name(tmp_path):
    """The TSan lane's binary carries the TSan runtime inside, its functions
    out of the dynamic symbol table (build.LINK): code under test finds no
    libtsan.so among the loaded libraries and no __tsan_ignore_* to hide its
    own race from the lane (issue 25's red team: 23 of 23, honestly 22).
    That TSan still finds races this way, the stage's TSan mutants show
    (test_mutants)."""
    from lab_grader import build
    src = tmp_path / "t.c"
    src.write_text("#include <pthread.h>\nstatic pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;\n"
                   "int main(void) { pthread_mutex_lock(&m); return pthread_mutex_unlock(&m); }\n")
    exe = tmp_path / "t"
    flags = build.BASE + build.OPT["tsan"] + build.LINK["tsan"] + ["-rdynamic"]
    p = subprocess.run([build.CC, *flags, str(src), "-o", str(exe)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    needed = subprocess.run(["readelf", "-d", str(exe)], capture_output=True, text=True).stdout
    assert "libtsan" not in needed, needed
    dynamic = subprocess.run(["nm", "-D", "--defined-only", str(exe)], capture_output=True, text=True).stdout
    exported = [line.split()[-1] for line in dynamic.splitlines()]
    assert not [s for s in exported if s.startswith(("__tsan_", "__sanitizer_"))], exported
    assert subprocess.run([str(exe)], capture_output=True, timeout=60).returncode == 0


def test_stage_08_rings_cannot_open_or_close(tmp_path):
    """io_uring's operations pass beside the seal, which refuses
    io_uring_setup; stage 08's code gets rings made before it, restricted
    (grader/tests/08-uring/uring_guard.c, through build.WRAP): no open (of
    /proc/self/mem, say) and no close through a ring, while a no-op runs."""
    from lab_grader import build
    if not pathlib.Path("/usr/include/liburing.h").exists():
        pytest.skip("liburing's header is not installed (sh grader/deps.sh installs it)")
    exe = tmp_path / "uring"
    p = subprocess.run([build.CC, "-std=c11", "-O1", str(PROBE.with_name("uring_probe.c")),
                        str(ROOT / "grader" / "tests" / "08-uring" / "uring_guard.c"), build.WRAP, "-o", str(exe), "-luring", "-lpthread"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60).stdout
    seen = dict(line.split() for line in out.splitlines())
    if "setup" in seen:
        pytest.skip(f"io_uring is not available here ({seen['setup']})")
    assert seen == {"nop": "0", "openat": "-13", "close": "-13"}, out
