"""The harness's seal (common/testing/harness.c, seal_code) and the grader's
channel (grader/lab_grader/channel.py), tested on their own: a probe built
with the harness, outside the grader, tries each call the seal must refuse
once a test has begun and a few it must allow; and a failed check's FAIL
reaches the channel, where code under test cannot take it back, and fails
the test whatever the runner reports (issue 25: a hook on the failure path
that resumed the body at the check's passing branch earned 6 of 24 points
where the same code earns 3; a FAIL line rewritten in the record file
through a duplicate descriptor, 9 of 24)."""
import os
import pathlib
import platform
import socket
import subprocess

import pytest

from conftest import ROOT

from lab_grader import channel, judge, records
from lab_grader.outcomes import Outcome, Verdict

PROBE = pathlib.Path(__file__).parent / "data" / "seal" / "probe.c"
EPERM, EACCES = 1, 13
EXPECTED = {
    # code made writable, new code made executable
    "mprotect-exec": EPERM, "mmap-exec": EPERM,
    # the executable's image changed, however the range is given
    "mprotect-image-rw": EPERM, "mprotect-across-image": EPERM, "mmap-fixed-image": EPERM, "munmap-image": EPERM,
    "mremap-image": EPERM, "mremap-onto-image": EPERM,
    # an action of the code's own for a signal it can make arrive at a chosen
    # instruction, and the ways to make one arrive there
    "sigaction-trap": EPERM, "sigaction-segv": EPERM, "signal-bus-ignored": EPERM, "perf-event-open": EPERM,
    "userfaultfd": EPERM,
    # the kernel's keyrings, which outlive the run (a key read back by a later grading)
    "add-key": EPERM, "keyctl": EPERM, "request-key": EPERM,
    # a file written or emptied, the process written through
    "open-mem-write": EACCES, "openat-write": EACCES, "open-truncating": EACCES,
    "truncate": EPERM, "ptrace": EPERM, "personality": EPERM, "io-uring-setup": EPERM,
    "seccomp-stacked": EPERM, "prctl-seccomp": EPERM,
    # the channel's descriptor closed, replaced or changed
    "close-channel": EPERM, "dup-channel": EPERM, "dup2-channel": EPERM, "dup3-channel": EPERM,
    "fcntl-channel": EPERM, "ioctl-channel": EPERM, "close-range-channel": EPERM,
    # what the stages and the tests do
    "mmap-rw": 0, "mprotect-ro": 0, "mremap-own": 0, "munmap-own": 0, "sigaction-query": 0, "sigaction-other": 0,
    "open-read": 0,
    "close-other": 0, "close-range-above": 0, "fcntl-other": 0,
}


def run_probe(exe, d, *args, wrapper=()):
    """The probe run as the grader runs a test: the channel its standard
    output. (exit status, standard error, the channel's Evidence)"""
    rec = d / ("rec" + "-".join(args) + "-".join(pathlib.Path(w).name for w in wrapper[:1]))
    rec.mkdir(exist_ok=True)
    talk = channel.Channel()
    proc = subprocess.Popen([*wrapper, str(exe), str(d / "victim"), *args], stdout=talk.child_fd(), stderr=subprocess.PIPE,
                            text=True, cwd=d, env={"LAB_RUN_DIR": str(rec), "LAB_NONCE": "n0nce",
                                                   channel.ENV: "1", "PATH": "/usr/bin:/bin"})
    talk.started()
    err = proc.communicate(timeout=120)[1]
    return proc.returncode, err, talk.close(), rec


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    if platform.machine() != "x86_64":
        pytest.skip("the seal is built for x86-64 only (harness.c)")
    d = tmp_path_factory.mktemp("seal")
    exe = d / "probe"
    c = ROOT / "common"
    from lab_grader import build
    cmd = ["gcc", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", f"-I{c}", f"-I{c / 'testing'}", *build.BIND,
           str(PROBE), str(c / "testing" / "harness.c"), str(c / "lab_todo.c"), "-o", str(exe), "-lpthread"]
    built = subprocess.run(cmd, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    (d / "victim").write_text("unchanged\n")
    status, err, said, rec = run_probe(exe, d)
    assert status == 0, err
    seen = dict(line.rsplit(" ", 1) for line in err.splitlines() if line.count(" ") == 1)
    return {k: int(v) for k, v in seen.items()}, said, rec, exe, d


def test_the_seal_refuses_what_a_forge_needs_and_allows_the_rest(probe):
    seen, _, _, _, d = probe
    wrong = {k: (seen.get(k), want) for k, want in EXPECTED.items() if seen.get(k) != want}
    assert not wrong, f"call: (errno seen, errno expected): {wrong}"
    assert (d / "victim").read_text() == "unchanged\n"


# Under Valgrind (harness.c): no PROT_EXEC rule (its translations need it)
# and no rule on signal handlers (it keeps them to itself); the rest holds.
UNDER_VALGRIND = {k: v for k, v in EXPECTED.items() if k not in (
    "mmap-exec", "sigaction-trap", "sigaction-segv", "signal-bus-ignored", "seccomp-stacked", "mremap-image",
    "mremap-onto-image", "perf-event-open", "userfaultfd")}


def test_under_valgrind_the_channel_and_the_image_hold_too(probe):
    """The Valgrind lane's seal: the channel's descriptor stays in place
    and the image unchanged, so a FAIL reaches the grader there too
    (Valgrind 3.19 has no seccomp(2): the harness installs the filter
    through prctl, which it passes on; its own mremap and seccomp answers
    are its own, and left out here)."""
    import shutil
    if not shutil.which("valgrind"):
        pytest.skip("valgrind is not installed")
    _, _, _, exe, d = probe
    status, err, said, _ = run_probe(exe, d, wrapper=("valgrind", "-q"))
    assert status == 0, err
    seen = {k: int(v) for k, v in (line.rsplit(" ", 1) for line in err.splitlines()
                                    if line.count(" ") == 1 and not line.startswith("--"))}
    wrong = {k: (seen.get(k), want) for k, want in UNDER_VALGRIND.items() if seen.get(k) != want}
    assert not wrong, f"call: (errno seen, errno expected): {wrong}"
    assert [(s.begun, s.failed) for s in said.said] == [({"seal::probe"}, 1)]


def test_a_process_that_could_not_be_sealed_says_so(probe, tmp_path):
    """Where the machine refuses seccomp (a container's own profile, here a
    filter that refuses it), the harness runs on and says so on the
    channel, and the report's header says it (sandbox.unsealed)."""
    _, _, _, exe, d = probe
    wrapper = tmp_path / "no_seccomp"
    built = subprocess.run(["gcc", "-std=c11", "-O1", str(PROBE.with_name("no_seccomp.c")), "-o", str(wrapper)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    status, err, said, _ = run_probe(exe, d, "quiet", wrapper=(str(wrapper),))
    assert status == 0, err
    assert said.unsealed == {"Operation not permitted"}, said.unsealed
    # code under test can send the same message: its text is not shown
    talk = channel.Channel()
    forged = socket.socket(fileno=os.dup(talk.child_fd()))
    forged.send(b"UNSEALED \x1b[2J=cmd|x see your instructor at evil.example")
    forged.close()
    talk.started()
    assert talk.close().unsealed == {"a reason not shown"}
    from lab_grader import sandbox
    box = sandbox.Sandbox.__new__(sandbox.Sandbox)
    box.why_not = []
    box.unsealed("Operation not permitted")
    box.unsealed("Operation not permitted")
    assert len(box.why_not) == 1 and "without the seal" in box.why_not[0]


def passed(test="seal::probe"):
    return {test: Outcome(test=test, verdict=Verdict.PASS)}


def test_a_failed_check_reaches_the_channel_and_fails_a_reported_pass(probe):
    _, said, rec, _, _ = probe
    mine = [s for s in said.said if "seal::probe" in s.begun]
    assert len(mine) == 1 and mine[0].failed == 1, [(s.begun, s.failed) for s in said.said]
    outs = passed()
    channel.overrule(outs, said)
    assert outs["seal::probe"].verdict == Verdict.FAIL and "a check failed" in outs["seal::probe"].message
    # the record file has it too, for the report; the channel is what counts
    assert records.parse((rec / "seal.probe.log").read_text())[0].check_failed


def test_a_pass_that_never_began_on_the_channel_fails(probe):
    _, said, _, _, _ = probe
    outs = passed("seal::other")
    channel.overrule(outs, said)
    assert outs["seal::other"].verdict == Verdict.FAIL and "never reached the grader" in outs["seal::other"].message
    outs = passed()
    channel.overrule(outs, channel.Evidence({}, channel.Said()))
    assert outs["seal::probe"].verdict == Verdict.FAIL


def test_a_clean_channel_lets_a_pass_stand():
    said = channel.Said()
    said.begun.add("s::t")
    outs = passed("s::t")
    channel.overrule(outs, channel.Evidence({7: said}, channel.Said()))
    assert outs["s::t"].verdict == Verdict.PASS


def test_a_fail_write_the_channel_refuses_ends_the_test(probe):
    """Code under test that shut the channel down before its check failed
    gets no chance to resume: the write fails and the process ends there
    (status 70), SIGPIPE ignored, with no END."""
    _, _, _, exe, d = probe
    status, err, said, rec = run_probe(exe, d, "shut")
    assert status == 70 and "survived" not in err, (status, err)
    assert "ignore-sigpipe 0" in err, err
    assert not records.parse((rec / "seal.probe.log").read_text())[0].ended


def test_a_check_failed_in_a_process_that_began_no_test_fails_the_run(probe):
    _, _, _, exe, d = probe
    status, err, said, _ = run_probe(exe, d, "orphan")
    assert status == 0, err
    outs = passed()
    channel.overrule(outs, said)
    assert outs["seal::probe"].verdict == Verdict.FAIL and "began no test" in outs["seal::probe"].message


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
    from lab_grader import arguments, build
    src = tmp_path / "t.c"
    src.write_text("#include <pthread.h>\nstatic pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;\n"
                   "int main(void) { pthread_mutex_lock(&m); return pthread_mutex_unlock(&m); }\n")
    exe = tmp_path / "t"
    flags = build.BASE + build.OPT["tsan"] + build.LINK["tsan"] + ["-rdynamic"]
    p = subprocess.run([arguments.read_environment().cc, *flags, str(src), "-o", str(exe)], capture_output=True, text=True)
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
    from lab_grader import arguments, build
    if not pathlib.Path("/usr/include/liburing.h").exists():
        pytest.skip("liburing's header is not installed (sh grader/deps.sh installs it)")
    exe = tmp_path / "uring"
    p = subprocess.run([arguments.read_environment().cc, "-std=c11", "-O1", str(PROBE.with_name("uring_probe.c")),
                        str(ROOT / "grader" / "tests" / "08-uring" / "uring_guard.c"), build.WRAP, "-o", str(exe), "-luring", "-lpthread"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60).stdout
    seen = dict(line.split() for line in out.splitlines())
    if "setup" in seen:
        pytest.skip(f"io_uring is not available here ({seen['setup']})")
    assert seen == {"nop": "0", "openat": "-13", "close": "-13"}, out
