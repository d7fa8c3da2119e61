"""Running a test binary over some tests, once, in the jail: the command
line, the limits on every test process, the backstop timeout, and what the
run leaves (the runner's XML report, the test records, the output's tail).

Nothing here decides a verdict: judge.py reads what a run left.
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

from . import channel, cpu_watch, records, sandbox
from .jail import copy_back

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
MEMORY_LIMIT = 3 << 30                 # the whole run (the runner and its workers) in the plain lanes
TOOL_MEMORY_LIMIT = 8 << 30            # under Valgrind or TSan (shadow memory; RLIMIT_DATA is off there)
OOM_NOTE = ("the run went over its memory limit of {gib:g} GiB and the kernel killed {n} of its processes "
            "(an allocation that never stops?)")
FORK_LIMIT_NOTE = ("the run hit its limit of " + str(sandbox.PIDS_MAX) + " processes and threads{n} "
                   "(a fork bomb, or threads that are never joined?)")


def fork_limit_note(refused):
    """The report's words for a run that met the process limit (refused < 0:
    met, but the refusals were not counted)."""
    return FORK_LIMIT_NOTE.format(n="" if refused < 0 else f": {refused} fork(s) or thread start(s) refused")

def oom_note(n, memory):
    return OOM_NOTE.format(gib=memory / (1 << 30), n=n)


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


def filter_for(tests):
    """One Criterion --filter glob selecting exactly these tests."""
    names = [t.replace("::", "/") for t in tests]
    return names[0] if len(names) == 1 else "@(" + "|".join(names) + ")"


def test_id(suite, name):
    return f"{suite}::{name}"


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
class RunResult:
    """What one run left behind."""
    report: dict      # judge.parse_xml of the runner's report: {test: (status, kind, message, seconds)}
    records: dict     # records.read_dir of the run's records: {test: [records.ProcessRecord]}
    output: str       # the tail of what the run printed
    refused: int      # forks the process limit refused (-1: met, not counted)
    oom_kills: int = 0  # processes the kernel killed for going over the run's memory limit
    memory: int = 0     # that limit
    starved: str = ""   # when the machine gave the run too little CPU: what it got (cpu_watch)
    said: object = None  # channel.Evidence: what the run's processes said on the grader's channel


@dataclasses.dataclass
class BinaryRun:
    """One run of a test binary over some tests."""
    binary: pathlib.Path
    tests: list
    run_dir: pathlib.Path
    jobs: int = 2
    env: dict = dataclasses.field(default_factory=dict)   # all the run's environment has, besides PATH
    wrapper: list = dataclasses.field(default_factory=list)   # e.g. valgrind ...
    timeout: float = 300  # the whole run: a backstop behind each test's own timeout
    make_dirs: list = dataclasses.field(default_factory=list)  # created empty before the run
    data_limit: int = DATA_LIMIT  # 0: none (sanitizer and Valgrind lanes)
    memory: int = MEMORY_LIMIT    # bytes the whole run may hold (a memory cgroup, where there is one)
    strip_symbols: bool = False   # the jail's copy without .symtab and DWARF (the grader reads its own copy's)
    cpu_quota: float = None       # CPUs the run may use (LAB_RUN_CPU_QUOTA: the self-tests of the starvation check)

    def execute(self):
        if self.run_dir.exists():
            shutil.rmtree(self.run_dir)
        self.run_dir.mkdir(parents=True)
        jail = sandbox.shared().jail(memory=self.memory, quota=self.cpu_quota, binds=[])
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
            if not (self.strip_symbols and _without_symbols(self.binary, binary)):
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
        jail.cwd = str(work) if jail.home is not None else None
        env = {"PATH": "/usr/bin:/bin"}   # and self.env: nothing else of the grader's environment
        env.update({k: moved(v) for k, v in self.env.items()})
        env["LAB_RUN_DIR"] = str(work / "rec")
        talk = channel.Channel()
        env[channel.ENV] = "1"   # the runner's standard output (channel.py)
        cmd = jail.command([*(moved(w) for w in self.wrapper), str(binary), f"-j{self.jobs}", f"--xml={xml}",
                            "--filter", filter_for(self.tests)])

        def child():
            apply_limits(self.data_limit)
            jail.preexec()
        output = self.run_dir / "output.txt"
        refused = oom = 0
        with open(output, "wb") as out:
            try:
                proc = _popen_retrying(cmd, stdout=talk.child_fd(), stderr=out, env=env,
                                       start_new_session=True, preexec_fn=child,
                                       cwd=work if jail.home is not None else None)
            except (OSError, subprocess.SubprocessError) as e:
                # the jail could not be set up for this run (it could when the
                # grader started): every test of the run is reported as not run
                talk.close()
                out.write(f"[grader] could not start the test runner: {e}\n".encode())
                return RunResult({}, {}, _tail(output), 0)
            talk.started()
            watch = cpu_watch.Watch(jail).start()
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
                watch.stop()
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
                jail.kill_all()
                oom = jail.oom_kills()
                said = talk.close()
                out.write(said.output)   # what else reached the channel: the runner's own standard output
                for why in said.unsealed:
                    sandbox.shared().unsealed(why)
            if refused:
                out.write(f"\n[grader] {fork_limit_note(refused)}\n".encode())
            if oom:
                out.write(f"\n[grader] {oom_note(oom, self.memory)}\n".encode())
        if work != self.run_dir:
            copy_back(work, self.run_dir)
        return RunResult(parse_xml(self.run_dir / "report.xml"), records.read_dir(self.run_dir / "rec"),
                         _tail(output), refused, oom, self.memory, watch.describe() if watch.starved() else "", said)


def _without_symbols(src, dest):
    """dest: src without its static symbol table (.symtab, .strtab), which
    names every function of the binary, the harness's hidden ones too, and
    without its DWARF, whose line table would name the test's checks by
    address (transcript.py); its dynamic symbols stay, so backtraces still
    name functions, and the grader turns their addresses into lines with its
    own copy. False when strip could not make it."""
    try:
        return subprocess.run(["strip", "--strip-all", "-o", str(dest), str(src)],
                              capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


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

