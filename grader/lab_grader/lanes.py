"""Step 3 of a grading: the lanes, as one table, and the runner that runs a
lane's tests once and judges what happened.

  lane      binary  runner      jobs  checker                 limits
  plain     plain   Criterion   2     -                       1 GB data, 3 GiB memory
  race      plain   Criterion   2     -                       1 GB data   (the item's tests, `runs` times)
  valgrind  vg      stand-in    2     Valgrind's logs         8 GiB memory (no data limit: Valgrind maps large regions), 900 s backstop
  tsan      tsan    stand-in    1     ThreadSanitizer's logs  8 GiB memory (no data limit: shadow memory)
  perf      plain   Criterion   1     -                       1 GB data, every slot: nothing else runs

A lane only runs and judges; calibrating a timeout (calibrate.py) and
turning checker reports into verdicts (`check`) are the pipeline's next
steps, in that order.
"""
import dataclasses
import threading
import time

from . import binary_run, checkers, judge, transcript
from .outcomes import Verdict

VALGRIND = ("valgrind", "-q", "--trace-children=yes", "--fair-sched=yes", "--leak-check=full",
            "--show-leak-kinds=definite,indirect", "--errors-for-leak-kinds=definite,indirect",
            "--num-callers=16",
            # no vgdb: its shared-memory file in /tmp is named by pid, and a
            # file left by another jailed user id whose pid came round again
            # made Valgrind exit 1 ("cannot create shared_mem file")
            "--vgdb=no")
TSAN_OPTIONS = "halt_on_error=1 exitcode=66 second_deadlock_stack=1 history_size=4 atexit_sleep_ms=0"
# The iteration factor under TSan (lab_scale), the lab's own choice: TSan
# reports one unordered pair of accesses to a word's shadow state (see
# docs/debugging.md), and the storms at full size cost 20 times their plain
# time (owner_vs_three_thieves: 6.6 s against 0.33 s)
TSAN_SCALE = "0.25"


@dataclasses.dataclass(frozen=True)
class Checker:
    """Reads a lane's logs and overrides the verdicts it has evidence for."""
    logs: str                 # the log directory's name in the run directory
    by_pid: object            # log directory -> {pid: [report lines]}
    overrides: tuple          # the verdicts a report replaces
    verdict: Verdict
    message: str              # with {n}: how many reports
    shown: int                # reports shown
    limit: int                # lines per report


@dataclasses.dataclass(frozen=True)
class Lane:
    name: str
    variant: str              # which of the stage's binaries
    jobs: int = 2
    wrapper: tuple = ()       # command before the binary; {logs} is the log directory
    env: tuple = ()           # (name, value) pairs; {logs} is the log directory, {scale} the Valgrind scale
    timeout: float = 300      # the whole run: a backstop behind each test's own timeout
    data_limit: int = binary_run.DATA_LIMIT
    memory: int = binary_run.MEMORY_LIMIT
    checker: Checker = None
    exclusive: bool = False   # takes every slot: nothing else runs beside it
    strip_symbols: bool = False  # run a copy without .symtab and DWARF (Valgrind keeps them: it names lines itself)

    def make_run(self, binary, tests, run_dir, base_env, scale, cpu_quota=None):
        logs = run_dir / self.checker.logs if self.checker else None
        fill = lambda s: s.format(logs=logs, scale=scale)  # noqa: E731
        env = dict(base_env)
        env.update({k: fill(v) for k, v in self.env})
        return binary_run.BinaryRun(binary, list(tests), run_dir, jobs=self.jobs, env=env,
                                    wrapper=[fill(w) for w in self.wrapper], timeout=self.timeout,
                                    make_dirs=[logs] if logs else [], data_limit=self.data_limit, memory=self.memory,
                                    strip_symbols=self.strip_symbols, cpu_quota=cpu_quota)


LANES = {
    "plain": Lane("plain", "plain", strip_symbols=True),
    "race": Lane("race", "plain", strip_symbols=True),
    "valgrind": Lane("valgrind", "vg", wrapper=VALGRIND + ("--log-file={logs}/%p.log",), env=(("LAB_SCALE", "{scale}"),),
                     timeout=900, data_limit=0, memory=binary_run.TOOL_MEMORY_LIMIT,
                     checker=Checker("vg", checkers.valgrind_by_pid, (Verdict.PASS, Verdict.FAIL), Verdict.MEMORY,
                                     "Valgrind found {n} memory error(s) or leak(s)", shown=3, limit=24)),
    "tsan": Lane("tsan", "tsan", jobs=1, env=(("TSAN_OPTIONS", TSAN_OPTIONS + " log_path={logs}/tsan"),
                                              ("LAB_SCALE", TSAN_SCALE)), data_limit=0,
                 memory=binary_run.TOOL_MEMORY_LIMIT, strip_symbols=True,
                 checker=Checker("tsan", checkers.tsan_by_pid,
                                 (Verdict.PASS, Verdict.FAIL, Verdict.TIMEOUT, Verdict.CRASH, Verdict.EXITED_EARLY),
                                 Verdict.RACE, "ThreadSanitizer reported {n} problem(s)", shown=2, limit=30)),
    "perf": Lane("perf", "plain", jobs=1, exclusive=True, strip_symbols=True),
}
# the words a report uses for a lane's tool
TOOL = {"valgrind": "Valgrind", "tsan": "ThreadSanitizer"}


def repeat(once, runs, every=False):
    """A race item's runs: once(k) is run k's first failing outcome or None.
    Stops at the first failing run, unless `every` (LAB_RACE_RUNS=n, the
    self-tests' measure of how often a mutant is caught). Returns (runs
    done, first failing outcome or None, how many runs failed when every run
    was made, else None)."""
    first, failing = None, 0
    for k in range(runs):
        bad = once(k)
        if bad is not None:
            first, failing = first or (k + 1, bad), failing + 1
            if not every:
                return k + 1, bad, None
    if every:
        return runs, first[1] if first else None, failing
    return runs, None, None


def check(lane, outs, result, run_dir, binary=None):
    """The lane's checker over a finished run's outcomes. A lane that ran a
    copy without symbols (strip_symbols) has its reports' frames named from
    `binary`, the grader's own copy."""
    c = lane.checker
    if c is not None:
        by_pid = c.by_pid(run_dir / c.logs)
        if lane.strip_symbols and binary is not None:
            by_pid = {p: [checkers.symbolize(rep, binary) for rep in reps] for p, reps in by_pid.items()}
        checkers.attach(outs, result, by_pid, c.overrides, c.verdict, c.message, c.shown, c.limit)
    return outs


class Runner:
    """Runs binary runs two at a time (the machine's slots), keeps every run
    directory and how long each took, and judges what a run left."""

    def __init__(self, nonce, seed, slots, valgrind_scale, work, passed_on=(), cpu_quota=None):
        self.nonce = nonce
        self.passed_on = dict(passed_on)   # the grader's environment every run takes (arguments.PASSED_ON)
        self.cpu_quota = cpu_quota         # LAB_RUN_CPU_QUOTA (arguments.Environment)
        self.seed = seed
        self.nslots = slots
        self.slots = threading.BoundedSemaphore(slots)
        self.exclusive = threading.Lock()   # held while a run takes every slot
        self.valgrind_scale = valgrind_scale
        self.work = work
        self.run_dirs = []   # every run directory, in order
        self.timings = []    # (run directory relative to work, seconds)
        self.expected = {}   # stage name -> {test: transcript.Expected}: the checks each body must reach
        self.todo_hints = {}  # stage name -> the LAB_TODO texts of its skeleton: the only ones a report shows

    def env(self):
        env = dict(self.passed_on)
        env["LAB_NONCE"] = self.nonce
        if self.seed is not None:
            env["LAB_SEED"] = str(self.seed)
        return env

    def make_run(self, lane, binary, tests, run_dir):
        return lane.make_run(binary, tests, run_dir, self.env(), self.valgrind_scale, self.cpu_quota)

    def execute(self, inv, exclusive=False):
        """One run; returns its binary_run.RunResult."""
        self.run_dirs.append(inv.run_dir)
        weight = self.nslots if exclusive else 1
        if weight == 1:
            self.slots.acquire()
        else:
            # one taker of every slot at a time: two that each held one slot
            # and waited for the other's would wait for ever
            with self.exclusive:
                for _ in range(weight):
                    self.slots.acquire()
        start = time.monotonic()
        try:
            return inv.execute()
        finally:
            self.timings.append((str(inv.run_dir.relative_to(self.work)), time.monotonic() - start))
            for _ in range(weight):
                self.slots.release()

    def run(self, inv, hang_hints, exclusive=False):
        """One run, judged: ({test: Outcome}, RunResult). Tests the kernel
        says were starved of CPU beside other runs of this grading run again
        alone (every slot taken), once: what held the CPU may have been the
        code's own other runs (a poll that busy-waits, two tests of it side
        by side), and that is the code's doing, not the machine's. Starved
        again while alone, they stay "not judged"; otherwise the run alone
        judges them."""
        result = self.execute(inv, exclusive)
        outs = self._judge(inv, result, hang_hints)
        starved = [t for t, o in outs.items() if o.verdict == Verdict.STARVED]
        if starved and not exclusive and self.nslots > 1:
            alone = dataclasses.replace(inv, tests=starved, run_dir=inv.run_dir.with_name(inv.run_dir.name + "-alone"))
            again = self._judge(alone, self.execute(alone, exclusive=True), hang_hints)
            for t in starved:
                outs[t] = again[t]
                if again[t].verdict != Verdict.STARVED:
                    outs[t].details.insert(0, "starved of CPU beside this grading's other runs; run again alone, "
                                              "it was judged on its own")
        return outs, result

    def rerun(self, inv, tests, binary, name):
        """Some of inv's tests run again, judged (no hang hints), in the same
        lane with the same limits, on `binary` (None: inv's), in the run
        directory inv's with -name after it: calibrate.py's second runs,
        handed to it as functools.partial(runner.rerun, inv)."""
        run_dir = inv.run_dir.parent / f"{inv.run_dir.name}-{name}"
        moved = binary_run.mover({str(inv.run_dir): str(run_dir)})
        again = dataclasses.replace(inv, run_dir=run_dir, tests=list(tests), binary=binary or inv.binary,
                                    env={k: moved(v) for k, v in inv.env.items()},
                                    wrapper=[moved(w) for w in inv.wrapper],
                                    make_dirs=[moved(str(m)) for m in inv.make_dirs])
        return self.run(again, {})

    def _judge(self, inv, result, hang_hints):
        """The run's outcomes: its records and report (judge.py), then each
        passed test's transcript of checks against the stage's table."""
        outs = judge.one_run(inv.tests, result, inv.binary, self.nonce, hang_hints)
        stage = inv.run_dir.relative_to(self.work).parts[0]
        if stage in self.todo_hints:
            judge.keep_known_todos(outs, result.records, self.todo_hints[stage])
        return transcript.check(outs, result.records, inv.binary, self.expected.get(stage, {}),
                                dump=inv.run_dir / transcript.TABLE)

    def lane_seconds(self):
        """{(stage, lane): seconds spent running tests}, for instructors."""
        out = {}
        for where, secs in self.timings:
            parts = where.split("/")
            lane = parts[1].split("-")[0] if len(parts) > 1 else "?"
            out[(parts[0], lane)] = out.get((parts[0], lane), 0.0) + secs
        return out
