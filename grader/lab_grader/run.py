"""Running a test binary in a lane and turning what happened into outcomes.

The verdict of a test is read from two places: the runner's XML report
(Criterion's --xml, or the stand-in's copy of it) and the test's own records
(records.py). The records decide what the report cannot: a test that
"passed" without writing END left early; a TODO record means "not started";
a HANG record carries every thread's backtrace.
"""
import dataclasses
import errno
import os
import pathlib
import re
import shutil
import signal
import subprocess
import time
import xml.etree.ElementTree as ET

from . import records, sandbox

OUTPUT_CAP = 64 * 1024

# Limits on every test process (the runner and the workers it forks). They
# turn a runaway submission into a failed test instead of a stuck or flooded
# grader: an endless printer meets the file-size limit (SIGXFSZ), an
# allocation loop meets the data limit (malloc returns NULL). The data limit
# is left off in the sanitizer and Valgrind lanes, which map large shadow
# regions. No RLIMIT_CPU: setting it arms the kernel's process-wide CPU timer,
# and CLOCK_PROCESS_CPUTIME_ID then advances in whole scheduler ticks (4 ms
# here), which ruins the tests that measure CPU time; the per-test wall
# timeouts already stop a busy loop.
LIMITS = {
    "RLIMIT_FSIZE": 32 * 1024 * 1024,   # bytes in any one file the tests write
    "RLIMIT_CORE": 0,                   # no core files
    "RLIMIT_NOFILE": 4096,
}
DATA_LIMIT = 1024 * 1024 * 1024        # RLIMIT_DATA for the plain lanes: 1 GB
FORK_LIMIT_NOTE = ("the run hit its limit of " + str(sandbox.PIDS_MAX) + " processes and threads{n} "
                   "(a fork bomb, or threads that are never joined?)")


def fork_limit_note(refused):
    """The report's words for a run that met the process limit (refused < 0:
    met, but the refusals were not counted)."""
    return FORK_LIMIT_NOTE.format(n="" if refused < 0 else f": {refused} fork(s) or thread start(s) refused")
WHY_SIGNAL = {
    "XFSZ": "the test wrote more than 32 MB (to its output or a file): an endless print loop?",
}


def apply_limits(data_limit):
    """Runs in the child between fork and exec (subprocess's preexec_fn)."""
    import resource
    for name, value in LIMITS.items():
        which = getattr(resource, name)
        soft, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, hard))
    if data_limit:
        resource.setrlimit(resource.RLIMIT_DATA, (data_limit, resource.getrlimit(resource.RLIMIT_DATA)[1]))
    # The runner ignores SIGXFSZ (a write past the limit fails with EFBIG
    # instead), so a flooding test cannot take the runner and its report
    # down with it; the test harness catches the signal in the test's own
    # process and records why it died. ctypes, because Python's
    # signal.signal refuses to run outside the main thread.
    import ctypes
    import signal as signals
    ctypes.CDLL(None).signal(int(signals.SIGXFSZ), ctypes.c_void_p(1))  # SIG_IGN


@dataclasses.dataclass
class Outcome:
    test: str                 # "suite::name"
    verdict: str              # pass fail timeout crash not-started exited-early memory race missing unjudged
    message: str = ""
    details: list = dataclasses.field(default_factory=list)
    seed: str = ""
    notes: list = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    began: bool = True        # the test body wrote its BEGIN record

    @property
    def passed(self):
        return self.verdict == "pass"


def test_id(suite, name):
    return f"{suite}::{name}"


def list_tests(binary):
    """The suite::name of every test in a Criterion (or stand-in) binary."""
    proc = subprocess.run([str(binary), "--list"], capture_output=True, text=True, timeout=60)
    text = proc.stdout + proc.stderr
    tests, suite = [], None
    for line in text.splitlines():
        m = re.match(r"^(\S+): \d+ tests?$", line)
        if m:
            suite = m.group(1)
            continue
        m = re.match(r"^[├└│─ ]+(\S+)$", line)
        if m and suite:
            tests.append(test_id(suite, m.group(1)))
            continue
        m = re.match(r"^(\w+)::(\w+)$", line)  # the stand-in's format
        if m:
            tests.append(line.strip())
    return tests


def expand(patterns, available):
    """Rubric test names (suite/name, globs allowed) -> suite::name present."""
    import fnmatch
    out = []
    for pat in patterns:
        suite_pat, _, name_pat = pat.partition("/")
        hits = [t for t in available
                if fnmatch.fnmatchcase(t.split("::")[0], suite_pat) and fnmatch.fnmatchcase(t.split("::")[1], name_pat or "*")]
        if not hits:
            raise LookupError(pat)
        out += [h for h in hits if h not in out]
    return out


def filter_for(tests):
    """One Criterion --filter glob selecting exactly these tests."""
    names = [t.replace("::", "/") for t in tests]
    return names[0] if len(names) == 1 else "@(" + "|".join(names) + ")"


def parse_xml(path):
    """{ suite::name: (status, kind, message, seconds) }"""
    out = {}
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, FileNotFoundError):
        return out
    for suite in root.iter("testsuite"):
        for case in suite.iter("testcase"):
            status = case.get("status", "")
            kind, message = "", ""
            for child in case:
                if child.tag in ("failure", "error"):
                    kind = child.get("type", "")
                    message = (child.text or "").strip() or child.get("message", "")
            out[test_id(suite.get("name"), case.get("name"))] = (status, kind, message, float(case.get("time", 0) or 0))
    return out


def _tail(path):
    try:
        data = pathlib.Path(path).read_bytes()
    except FileNotFoundError:
        return ""
    return data[-OUTPUT_CAP:].decode(errors="replace")


@dataclasses.dataclass
class Invocation:
    """One run of a test binary over some tests."""
    binary: pathlib.Path
    tests: list
    run_dir: pathlib.Path
    jobs: int = 2
    env: dict = dataclasses.field(default_factory=dict)
    wrapper: list = dataclasses.field(default_factory=list)   # e.g. valgrind ...
    timeout: float = 300  # the whole run: a backstop behind each test's own timeout
    make_dirs: list = dataclasses.field(default_factory=list)  # created empty before the run
    data_limit: int = DATA_LIMIT  # 0: none (sanitizer and Valgrind lanes)

    def execute(self):
        if self.run_dir.exists():
            shutil.rmtree(self.run_dir)
        self.run_dir.mkdir(parents=True)
        jail = sandbox.shared().jail()
        try:
            return self._execute(jail)
        finally:
            jail.close()

    def _execute(self, jail):
        """Runs in the jail's private directory (when there is one): a copy of
        the binary, and a run directory owned by the jail's user; the files
        it leaves come back to run_dir afterwards."""
        if jail.home is not None:
            work = jail.home / "run"
            binary = jail.home / "bin" / self.binary.name
            binary.parent.mkdir(mode=0o711)
            shutil.copyfile(self.binary, binary)
            os.chmod(binary, 0o555)
        else:
            work, binary = self.run_dir, self.binary
        moved = mover({str(self.run_dir): str(work), str(self.binary): str(binary)})
        (work / "rec").mkdir(parents=True, exist_ok=True)
        for d in self.make_dirs:
            pathlib.Path(moved(str(d))).mkdir(parents=True, exist_ok=True)
        if jail.uid >= 0:
            for dirpath, dirnames, filenames in os.walk(work):
                os.chown(dirpath, jail.uid, jail.uid)
            os.chmod(work, 0o700)
        xml = work / "report.xml"
        env = dict(os.environ)
        env.update({k: moved(v) for k, v in self.env.items()})
        env["LAB_RUN_DIR"] = str(work / "rec")
        cmd = [*(moved(w) for w in self.wrapper), str(binary), f"-j{self.jobs}", f"--xml={xml}",
               "--filter", filter_for(self.tests)]

        def child():
            apply_limits(self.data_limit)
            jail.preexec()
        output = self.run_dir / "output.txt"
        refused = 0
        with open(output, "wb") as out:
            try:
                proc = _popen_retrying(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                       preexec_fn=child, cwd=work if jail.home is not None else None)
            except (OSError, subprocess.SubprocessError) as e:
                # the jail could not be set up for this run (it could when the
                # grader started): every test of the run is reported as not run
                out.write(f"[grader] could not start the test runner: {e}\n".encode())
                return {}, {}, _tail(output), 0
            try:
                proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                # the runner itself is stuck (Criterion has been seen to miss
                # a hung worker): everything in its session goes
                out.write(f"\n[grader] the test runner did not finish within {self.timeout:.0f} s; killed\n".encode())
            finally:
                # counted while a fork bomb still stands; then the runner's
                # session: any worker or process a test left behind; then the
                # jail, for one that left the session
                refused = jail.fork_failures()
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
                jail.kill_all()
            if refused:
                out.write(f"\n[grader] {fork_limit_note(refused)}\n".encode())
        if work != self.run_dir:
            sandbox.copy_back(work, self.run_dir)
        return (parse_xml(self.run_dir / "report.xml"), records.read_dir(self.run_dir / "rec"), _tail(output),
                refused)


def _popen_retrying(cmd, **kw):
    """Popen, tried again on ETXTBSY. The binary was copied into the jail a
    moment ago; another grader thread that forked while the copy's file was
    open for writing holds that descriptor until its own child execs (after
    the jail's setup), and until then exec says "Text file busy"."""
    for attempt in range(100):
        try:
            return subprocess.Popen(cmd, **kw)
        except OSError as e:
            if e.errno != errno.ETXTBSY or attempt == 99:
                raise
            time.sleep(0.02)


def mover(mapping):
    """A function that rewrites every path under a key of mapping (the
    grader's run directory, its binary) to its place in the jail."""
    pattern = re.compile("|".join(re.escape(k) for k in sorted(mapping, key=len, reverse=True)) + r"(?=/|$|\s)")
    return lambda text: pattern.sub(lambda m: mapping[m.group(0)], text)


def judge(test, report, recs, symbolizer, nonce, hang_hint=""):
    """The outcome of one test from its report line and its records."""
    runs = recs.get(test, [])
    run = runs[-1] if runs else None
    seed = run.seed if run else ""
    notes = run.notes if run else []
    o = Outcome(test=test, verdict="missing", seed=seed, notes=notes, began=run is not None)
    if run and run.todo:
        o.verdict, o.message = "not-started", f"not started: {records.short_path(run.todo)}"
        return o
    if test not in report:
        if run and run.crash:  # the test's own record outlived the runner's report
            report = dict(report)
            report[test] = ("ERRORED", "crash", "", 0.0)
        else:
            o.message = "the test did not run (the runner stopped before it, or crashed itself)"
            return o
    status, kind, message, secs = report[test]
    o.seconds = secs
    if status == "PASSED":
        if run and run.ended and run.nonce == nonce:
            o.verdict = "pass"
        else:
            o.verdict = "exited-early"
            o.message = ("the test process ended before the test did: something called exit() "
                         "(or returned from a thread in a way that ended the process) inside the code under test")
        return o
    if kind == "timeout":
        o.verdict = "timeout"
        o.message = f"timed out after {secs:.1f} s" + (f": {hang_hint}" if hang_hint else "")
        threads = [t for t in run.threads if t.name != "lab-watchdog" and t.state != "blocked"] if run else []
        if threads:
            if any(t.state == "R" for t in threads):
                o.details.append("likely cause: a thread was still running when time ran out: a loop that "
                                 "polls or spins instead of parking (or plain slowness)")
            else:
                o.details.append("likely cause: every thread was asleep: a wake that never came (a lost "
                                 "wakeup: Pending returned with no waker registered, or the waker was "
                                 "dropped instead of woken) or a deadlock")
        if run and run.threads:
            o.details.append("where each thread was when the watchdog fired:")
            for t in run.threads:
                if t.name == "lab-watchdog" or t.state == "blocked":
                    continue  # the harness's own thread; Criterion's I/O thread
                o.details.append(f"  thread {t.tid} ({t.name}, state {t.state}):")
                o.details += [f"    #{i} {f}" for i, f in enumerate(symbolizer.frames(t.frames))]
        return o
    if kind == "crash" or (run and run.crash):
        o.verdict = "crash"
        sig = run.crash if run and run.crash else "a signal"
        o.message = f"crashed with {sig}" if sig.startswith("SIG") else f"crashed (SIG{sig})" if sig != "a signal" else "crashed"
        if sig in WHY_SIGNAL:
            o.message += ": " + WHY_SIGNAL[sig]
        if run and run.crash_frames:
            o.details.append("where it crashed:")
            o.details += [f"    #{i} {f}" for i, f in enumerate(symbolizer.frames(run.crash_frames))]
        elif message:
            o.details.append(message)
        return o
    if run and run.unjudged and run.unjudged_nonce == nonce and not run.crash:
        # lab_cannot_judge: the machine could not measure it (a forged record
        # lacks the nonce and stays an ordinary failure)
        o.verdict = "unjudged"
        o.message = f"cannot judge on this machine, rerun: {run.unjudged}"
        return o
    o.verdict = "fail"
    message = records.short_path(message)
    if message and "assertion(s) failed" not in message:
        o.message = message
    elif run and not run.ended and status == "FAILED":
        o.message = ("the test process exited with a failure status before the test finished "
                     "(exit() with a non-zero code inside the code under test?)")
    else:
        o.message = message or "failed"
    return o


# ---- Valgrind ------------------------------------------------------------------

VG_ERROR_START = re.compile(r"^==\d+== (Invalid (read|write|free)|Mismatched free|Conditional jump|Use of uninitialised|Syscall param|Source and destination overlap|Argument 'size'|Process terminating|\d[\d,]* (\(\d[\d,]* direct, \d[\d,]* indirect\) )?bytes in [\d,]+ blocks are (definitely|indirectly) lost)")


def valgrind_errors(log_text):
    """The error blocks of one Valgrind log (each a list of lines)."""
    blocks, cur = [], None
    for line in log_text.splitlines():
        if VG_ERROR_START.match(line):
            cur = [line]
            blocks.append(cur)
        elif cur is not None:
            if line.rstrip() in ("", ) or re.match(r"^==\d+==\s*$", line):
                cur = None
            else:
                cur.append(line)
    return blocks


def valgrind_by_pid(log_dir):
    out = {}
    for f in pathlib.Path(log_dir).glob("*.log"):
        blocks = valgrind_errors(f.read_text(errors="replace"))
        if blocks:
            out[f.stem] = blocks
    return out


def tsan_by_pid(log_dir):
    out = {}
    for f in pathlib.Path(log_dir).glob("tsan.*"):
        text = f.read_text(errors="replace")
        reports = [b for b in text.split("==================") if "ThreadSanitizer" in b]
        if reports:
            out[f.name.rsplit(".", 1)[-1]] = [r.strip().splitlines() for r in reports]
    return out


# frames of the grader's own plumbing, never the student's business
PLUMBING = ("__wrap_", "lab_standin_fn_", "run_one (", "run_one common/", "main (runner.c", "main common/testing/standin",
            "criterion_internal_test_main", "(below main)")


def shorten_report(lines, limit=24):
    keep = []
    for line in lines:
        line = records.short_path(re.sub(r"^==\d+== ?", "", line))
        line = re.sub(r" \((?:tests-\w+|libtsan\.so[.\d]*)\+0x[0-9a-f]+\)$", "", line)
        if any(p in line for p in PLUMBING):
            continue
        keep.append("    " + line)
        if len(keep) >= limit:
            keep.append("    ...")
            break
    return keep
