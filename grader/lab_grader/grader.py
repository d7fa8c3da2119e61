"""The grading of one tree: builds, lanes, item verdicts.

For every selected stage the pipeline is: build (with the earlier stages it
uses: the student's own when they build and pass, the reference otherwise),
then the plain, race, Valgrind and TSan lanes side by side, then, once every
other lane of every stage is done, the performance lane alone.
"""
import concurrent.futures
import dataclasses
import fcntl
import hashlib
import json
import os
import pathlib
import secrets
import threading
import time

from . import build, quiz, records, rubric, run

VALGRIND = ["valgrind", "-q", "--trace-children=yes", "--fair-sched=yes", "--leak-check=full",
            "--show-leak-kinds=definite,indirect", "--errors-for-leak-kinds=definite,indirect",
            "--num-callers=16",
            # no vgdb: its shared-memory file in /tmp is named by pid, and a
            # file left by another jailed user id whose pid came round again
            # made Valgrind exit 1 ("cannot create shared_mem file")
            "--vgdb=no"]
QUICK_SKIPS = ("valgrind", "tsan", "perf")
TSAN_OPTIONS = "halt_on_error=1 exitcode=66 second_deadlock_stack=1 history_size=4 atexit_sleep_ms=0"


@dataclasses.dataclass
class ItemResult:
    item: rubric.Item
    status: str          # passed failed not-judged
    points: float
    summary: str = ""    # one line
    outcome: run.Outcome = None


@dataclasses.dataclass
class StageBuild:
    ok: bool
    error: build.BuildError = None
    binaries: dict = dataclasses.field(default_factory=dict)
    warnings: list = dataclasses.field(default_factory=list)
    notes: list = dataclasses.field(default_factory=list)   # "graded with the reference ..."
    tests: list = dataclasses.field(default_factory=list)
    key: str = ""   # digest of what the plain binary was linked from


class Memo:
    """Runs each keyed computation once; other callers wait for its result."""

    def __init__(self):
        self._lock = threading.Lock()
        self._futures = {}

    def get(self, key, fn):
        with self._lock:
            fut = self._futures.get(key)
            owner = fut is None
            if owner:
                fut = self._futures[key] = concurrent.futures.Future()
        if owner:
            try:
                fut.set_result(fn())
            except BaseException as e:  # noqa: BLE001 - handed to every waiter
                fut.set_exception(e)
        return fut.result()


class Grader:
    def __init__(self, root, target, stages, selected, build_dir, items=None, test=None, seed=None,
                 werror=False, valgrind_scale=0.05, slots=2, reference=None, quick=False, hidden=None):
        self.root = pathlib.Path(root)
        self.target = pathlib.Path(target).resolve()
        self.stages = {s.name: s for s in stages}
        self.selected = selected
        self.build_dir = pathlib.Path(build_dir)
        self.builder = build.Builder(self.root, self.build_dir)
        self.items_filter = set(items) if items else None
        self.test_filter = test
        self.seed = seed
        self.werror = werror
        self.quick = quick   # make check: no Valgrind, TSan or perf lane; race items run once
        self.hidden = pathlib.Path(hidden) if hidden else None  # the instructor's hidden tests
        self.valgrind_scale = valgrind_scale
        self.reference = pathlib.Path(reference) if reference else self.root / "solutions"
        self.nonce = secrets.token_hex(8)
        self.memo = Memo()
        self.slots = threading.BoundedSemaphore(slots)
        self.nslots = slots
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=32)
        self.others_done = threading.Event()
        self.run_dirs = []   # every run directory of this grading, in order
        self.timings = []    # (run directory, seconds) for each run
        slug = "".join(c if c.isalnum() else "_" for c in str(self.target))[-80:]
        self.work = self.build_dir / "runs" / slug
        self._lock_file = None
        self._files = None   # the fingerprint of the grader's own files, taken at start()

    # ---- which items ---------------------------------------------------------

    def items(self, stage):
        out = []
        for item in stage.items:
            if self.items_filter and item.id not in self.items_filter and item.key not in self.items_filter:
                continue
            if self.test_filter and not any(self._pattern_matches(p, self.test_filter) for p in item.tests):
                continue
            out.append(item)
        return out

    @staticmethod
    def _pattern_matches(pattern, test):
        import fnmatch
        return fnmatch.fnmatchcase(test.replace("::", "/"), pattern) or pattern == test.replace("::", "/")

    def all_items(self):
        return [i for s in self.selected for i in self.items(s)]

    # ---- building ------------------------------------------------------------

    def stage_dir(self, tree, name):
        return pathlib.Path(tree) / name

    def student_objects(self, stage, variant):
        d = self.stage_dir(self.target, stage.name)
        if not d.is_dir():
            raise build.BuildError(f"{d} does not exist", "", kind="missing")
        dirs = self.include_dirs(stage, self.target)
        return [self.builder.compile(d / src, variant, dirs, werror=self.werror) for src in stage.sources]

    def reference_objects(self, stage, variant):
        """The reference stage: compiled from solutions/ in the instructor's
        repository, or the objects shipped in the handout (no source)."""
        d = self.stage_dir(self.reference, stage.name)
        if d.is_dir():
            dirs = self.include_dirs(stage, self.reference)
            return [self.builder.compile(d / src, variant, dirs, werror=True).obj for src in stage.sources]
        shipped = self.root / "grader" / "reference" / stage.name / variant
        objs = [shipped / (pathlib.Path(src).stem + ".o") for src in stage.sources]
        missing = [o for o in objs if not o.exists()]
        if missing:
            raise build.BuildError(f"no reference for {stage.name} (neither solutions/ nor {shipped})", "",
                                   kind="grader")
        return objs

    def include_dirs(self, stage, tree):
        names = self.closure(stage) + [stage.name]
        return [self.stage_dir(tree, n) for n in names]

    def closure(self, stage):
        """Every earlier stage this one needs, deepest first."""
        out = []
        for u in stage.uses:
            for v in self.closure(self.stages[u]) + [u]:
                if v not in out:
                    out.append(v)
        return out

    def stage_passes(self, name):
        """Does the student's own stage build and pass all its tests (one
        plain run)? Returns (True, "") or (False, why). The verdict is cached
        on disk by the objects it was judged on, so grading many trees that
        share a stage (the mutants of a later stage) judges it once."""
        stage = self.stages[name]
        b = self.build(stage)
        if not b.ok:
            return False, f"does not build ({b.error.first})"
        if b.notes:
            return False, "was itself graded with reference code"
        cache = self.build_dir / "verdicts" / f"{b.key}.json"
        if cache.exists():
            data = json.loads(cache.read_text())
            return data["ok"], data["why"]
        plain = self.plain(stage, b.tests)
        bad = [o for o in plain.values() if not o.passed]
        ok, why = (False, f"fails {len(bad)} of its {len(plain)} tests") if bad else (True, "")
        if not any(o.verdict == "timeout" for o in bad):  # a hang may be the machine's fault: do not keep it
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps({"ok": ok, "why": why}))
        return ok, why

    def build(self, stage):
        return self.memo.get(("build", stage.name), lambda: self._build(stage))

    def _build(self, stage):
        result = StageBuild(ok=False)
        dep_objs = {v: [] for v in ("plain", "tsan")}
        try:
            for dep in self.closure(stage):
                ok, why = self.stage_passes(dep)
                dep_stage = self.stages[dep]
                for v in dep_objs:
                    if ok:
                        dep_objs[v] += [c.obj for c in self.student_objects(dep_stage, v)]
                    else:
                        dep_objs[v] += self.reference_objects(dep_stage, v)
                if not ok:
                    result.notes.append(f"graded with the reference {dep} because your {dep} {why}")
        except build.BuildError as e:
            result.error = e
            return result
        try:
            mine = {v: self.student_objects(stage, v) for v in ("plain", "tsan")}
        except build.BuildError as e:
            result.error = e
            return result
        for c in mine["plain"]:
            if c.warnings.strip():
                result.warnings.append(records.short_path(c.warnings.strip()))
        tests_dir = self.root / "grader" / "tests" / stage.name
        hidden = [self.hidden / "tests" / stage.name] if self.hidden and (self.hidden / "tests" / stage.name).is_dir() else []
        dirs = self.include_dirs(stage, self.target)
        try:
            for variant in build.VARIANTS:
                code = build.CODE_VARIANT[variant]
                objs = (self.builder.test_objects(tests_dir, variant, dirs, hidden) + [c.obj for c in mine[code]] +
                        dep_objs[code] + self.builder.common_objects(variant))
                out = self.work / stage.name / f"tests-{variant}"
                result.binaries[variant] = self.builder.link(objs, out, variant)
        except build.BuildError as e:
            result.error = e
            return result
        result.tests = run.list_tests(result.binaries["plain"])
        result.key = build._digest(*sorted(str(o) for o in objs))
        result.ok = True
        return result

    # ---- lanes -------------------------------------------------------------------

    def _env(self):
        env = {"LAB_NONCE": self.nonce}
        if self.seed is not None:
            env["LAB_SEED"] = str(self.seed)
        return env

    def _invoke(self, inv, weight=1):
        self.run_dirs.append(inv.run_dir)
        for _ in range(weight):
            self.slots.acquire()
        start = time.monotonic()
        try:
            return inv.execute()
        finally:
            self.timings.append((str(inv.run_dir.relative_to(self.work)), time.monotonic() - start))
            for _ in range(weight):
                self.slots.release()

    def lane_seconds(self):
        """{(stage, lane): seconds spent running tests}, for instructors."""
        out = {}
        for where, secs in self.timings:
            parts = where.split("/")
            lane = parts[1].split("-")[0] if len(parts) > 1 else "?"
            out[(parts[0], lane)] = out.get((parts[0], lane), 0.0) + secs
        return out

    def _judge_all(self, tests, result, binary, hang_hints, inv=None, stage=None, variant="plain"):
        report, recs, _, refused = result
        sym = records.Symbolizer(binary)
        outs = {t: run.judge(t, report, recs, sym, self.nonce, hang_hints.get(t, "")) for t in tests}
        if refused:
            for o in outs.values():
                if not o.passed:
                    o.details.insert(0, run.fork_limit_note(refused))
        if inv is not None and stage is not None:
            self._calibrate(outs, inv, stage, variant)
        return outs

    # ---- calibrated timeouts -------------------------------------------------------

    def reference_binary(self, stage, variant):
        """The stage's tests linked with the reference of the stage and of
        every stage it uses (built from solutions/, or shipped prebuilt in the
        handout), or None when there is neither."""
        def go():
            shipped = self.root / "grader" / "reference" / stage.name / f"tests-{variant}"
            if not self.stage_dir(self.reference, stage.name).is_dir():
                return shipped if shipped.exists() else None
            code = build.CODE_VARIANT[variant]
            try:
                objs = self.builder.test_objects(self.root / "grader" / "tests" / stage.name, variant,
                                                 self.include_dirs(stage, self.reference))
                for name in self.closure(stage) + [stage.name]:
                    objs += self.reference_objects(self.stages[name], code)
                objs += self.builder.common_objects(variant)
                return self.builder.link(objs, self.work / stage.name / f"reference-tests-{variant}", variant)
            except build.BuildError:
                return None
        return self.memo.get(("reference-binary", stage.name, variant), go)

    def _calibrate(self, outs, inv, stage, variant):
        """A test that timed out is run again at once on the reference, in the
        same lane with the same limits. If the reference passes it within a
        quarter of the limit (limits are set near ten times the reference's
        time on a quiet machine), the machine is not the problem and the timeout stands (with
        the reference's time beside it). If the reference is as slow, nobody
        can be judged on this machine right now: the outcome becomes
        "too-slow" and its item is left unjudged, with "rerun" in its line.
        A hang is still caught as fast as before; only a loaded machine costs
        the second run."""
        slow = [t for t, o in outs.items() if o.verdict == "timeout"]
        if not slow:
            return
        self._retry_unbegun(outs, inv, [t for t in slow if not outs[t].began])
        slow = [t for t, o in outs.items() if o.verdict == "timeout"]
        if not slow:
            return
        ref = self.reference_binary(stage, variant)
        if ref is None:
            return
        have = set(run.list_tests(ref))
        slow = [t for t in slow if t in have]  # an instructor's hidden test is not in a shipped binary
        if not slow:
            return
        d = inv.run_dir.parent / f"{inv.run_dir.name}-reference"
        moved = run.mover({str(inv.run_dir): str(d)})
        again = dataclasses.replace(inv, binary=ref, tests=slow, run_dir=d,
                                    env={k: moved(v) for k, v in inv.env.items()},
                                    wrapper=[moved(w) for w in inv.wrapper],
                                    make_dirs=[moved(str(m)) for m in inv.make_dirs])
        mine = self._judge_all(slow, self._invoke(again), ref, {})
        for t in slow:
            o, r = outs[t], mine[t]
            limit = o.seconds
            if r.passed and r.seconds <= limit / 4:
                o.details.insert(0, f"the reference solution passes this test in {r.seconds:.1f} s on this machine "
                                    f"right now (the limit is {limit:.1f} s): this is not the machine's slowness")
                continue
            took = "timed out too" if r.verdict == "timeout" else f"took {r.seconds:.1f} s of the {limit:.1f} s limit"
            o.verdict = "too-slow"
            o.message = (f"too slow to judge, rerun: the reference solution {took} on this machine just now "
                         f"(is it loaded?)")
            o.details = []

    def _retry_unbegun(self, outs, inv, tests):
        """A test that timed out before its body began (no BEGIN record: the
        worker process was never scheduled, or its start-up stalled, on a
        machine under heavy load) has not run any code under test yet, so it
        is run once more on the same binary before it is judged."""
        if not tests:
            return
        d = inv.run_dir.parent / f"{inv.run_dir.name}-again"
        moved = run.mover({str(inv.run_dir): str(d)})
        again = dataclasses.replace(inv, tests=tests, run_dir=d,
                                    env={k: moved(v) for k, v in inv.env.items()},
                                    wrapper=[moved(w) for w in inv.wrapper],
                                    make_dirs=[moved(str(m)) for m in inv.make_dirs])
        second = self._judge_all(tests, self._invoke(again), inv.binary, {})
        for t in tests:
            first = outs[t]
            outs[t] = second[t]
            outs[t].details.insert(0, f"the first run timed out after {first.seconds:.1f} s before the test began "
                                      "(the machine did not start it): this is the second run")

    def hang_hints(self, stage):
        hints = {}
        b = self.build(stage)
        for item in stage.items:
            if item.hang:
                for t in self.tests_of(item, b):
                    hints.setdefault(t, item.hang)
        return hints

    def tests_of(self, item, b):
        if item.lane == "quiz":
            return []
        try:
            return run.expand(item.tests, b.tests)
        except LookupError as e:
            raise rubric.RubricError(f"{item.key}: test '{e.args[0]}' matches no test in the binary "
                                     f"(a filter that matches nothing would pass with zero tests)") from None

    def plain(self, stage, tests=None):
        """The plain lane: tests (by default those of the selected plain
        items; every test when nothing is filtered) once, under Criterion:
        {test: Outcome}."""
        b = self.build(stage)
        if tests is None:
            tests = b.tests if self.unfiltered() else self.lane_tests(stage, "plain")
        tests = tuple(tests)

        def go():
            if not tests:
                return {}
            name = "plain" if len(tests) == len(b.tests) else f"plain-{build._digest(*tests)[:8]}"
            inv = run.Invocation(b.binaries["plain"], list(tests), self.work / stage.name / name, env=self._env())
            return self._judge_all(tests, self._invoke(inv), b.binaries["plain"], self.hang_hints(stage), inv, stage)
        return self.memo.get(("plain", stage.name, tests), go)

    def unfiltered(self):
        return not self.items_filter and not self.test_filter

    def race(self, stage, item):
        """The item's tests `runs` times; stops at the first failing run.
        Returns (runs done, first failing outcome or None)."""
        def go():
            b = self.build(stage)
            tests = self.tests_of(item, b)
            hints = self.hang_hints(stage)
            for k in range(1 if self.quick else item.runs):
                inv = run.Invocation(b.binaries["plain"], tests, self.work / stage.name / "race" / item.id / str(k),
                                     env=self._env())
                outs = self._judge_all(tests, self._invoke(inv), b.binaries["plain"], hints, inv, stage)
                bad = [o for o in outs.values() if not o.passed]
                if bad:
                    return k + 1, bad[0]
            return (1 if self.quick else item.runs), None
        return self.memo.get(("race", item.key), go)

    def lane_tests(self, stage, lane):
        b = self.build(stage)
        tests = []
        for item in self.items(stage):
            if item.lane == lane:
                tests += [t for t in self.tests_of(item, b) if t not in tests]
        return tests

    def valgrind(self, stage):
        def go():
            b = self.build(stage)
            tests = self.lane_tests(stage, "valgrind")
            if not tests:
                return {}
            tests, hung = self._hung_in_plain(stage, tests, "Valgrind")
            if not tests:
                return hung
            d = self.work / stage.name / "valgrind"
            logs = d / "vg"
            wrapper = VALGRIND + [f"--log-file={logs}/%p.log"]
            env = self._env()
            env["LAB_SCALE"] = str(self.valgrind_scale)
            inv = run.Invocation(b.binaries["vg"], tests, d, env=env, wrapper=wrapper, jobs=2, make_dirs=[logs],
                                 data_limit=0, timeout=900)
            result = self._invoke(inv)
            outs = self._judge_all(tests, result, b.binaries["vg"], self.hang_hints(stage), inv, stage, "vg")
            self._attach_reports(outs, result, run.valgrind_by_pid(logs), ("pass", "fail"), "memory",
                                 "Valgrind found {n} memory error(s) or leak(s)", shown=3, limit=24)
            return {**outs, **hung}
        return self.memo.get(("valgrind", stage.name), go)

    def _hung_in_plain(self, stage, tests, tool):
        """Splits a slow lane's tests: those to run, and {test: outcome} for
        those that already timed out in the plain lane. Under Valgrind or TSan
        such a test would only time out again, ten times slower (a wheel that
        never fires its timers cost 15 minutes of Valgrind before this). The
        plain lane runs first for that; it takes seconds."""
        plain = self.plain(stage)
        run_these, hung = [], {}
        for t in tests:
            o = plain.get(t)
            if o is not None and o.verdict in ("timeout", "too-slow"):
                hung[t] = run.Outcome(test=t, verdict=o.verdict, seed=o.seed,
                                      message=f"not run under {tool}: {o.message} without it (the plain lane)")
            else:
                run_these.append(t)
        return run_these, hung

    @staticmethod
    def _attach_reports(outs, result, by_pid, overrides, verdict, message, shown, limit):
        """Turns a test's outcome into `verdict` when a checker (Valgrind,
        TSan) reported problems for one of the test's processes."""
        _, recs, _, _ = result
        for t, o in outs.items():
            pids = [r.pid for r in recs.get(t, [])]
            found = [rep for p in pids for rep in by_pid.get(p, [])]
            if found and o.verdict in overrides:
                o.verdict = verdict
                o.message = message.format(n=len(found))
                o.details = []
                for rep in found[:shown]:
                    o.details += run.shorten_report(rep, limit=limit)

    def tsan(self, stage):
        def go():
            b = self.build(stage)
            tests = self.lane_tests(stage, "tsan")
            if not tests:
                return {}
            tests, hung = self._hung_in_plain(stage, tests, "ThreadSanitizer")
            if not tests:
                return hung
            d = self.work / stage.name / "tsan"
            logs = d / "tsan"
            env = self._env()
            env["TSAN_OPTIONS"] = f"{TSAN_OPTIONS} log_path={logs}/tsan"
            inv = run.Invocation(b.binaries["tsan"], tests, d, env=env, jobs=1, make_dirs=[logs], data_limit=0)
            result = self._invoke(inv)
            outs = self._judge_all(tests, result, b.binaries["tsan"], self.hang_hints(stage), inv, stage, "tsan")
            self._attach_reports(outs, result, run.tsan_by_pid(logs), ("pass", "fail", "timeout", "crash", "exited-early"),
                                 "race", "ThreadSanitizer reported {n} problem(s)", shown=2, limit=30)
            return {**outs, **hung}
        return self.memo.get(("tsan", stage.name), go)

    def perf(self, stage):
        def go():
            self.others_done.wait()
            b = self.build(stage)
            tests = self.lane_tests(stage, "perf")
            if not tests:
                return {}
            inv = run.Invocation(b.binaries["plain"], tests, self.work / stage.name / "perf", env=self._env(), jobs=1)
            return self._judge_all(tests, self._invoke(inv, weight=self.nslots), b.binaries["plain"],
                                   self.hang_hints(stage), inv, stage)
        return self.memo.get(("perf", stage.name), go)

    # ---- the whole run ---------------------------------------------------------

    def lock(self):
        """One grading of a tree at a time: two would share (and delete)
        each other's run directories and binaries. A second one waits."""
        self.work.mkdir(parents=True, exist_ok=True)
        self._lock_file = open(self.work.with_suffix(".lock"), "w")
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"another grading of {self.target} is running; waiting for it", flush=True)
            fcntl.flock(self._lock_file, fcntl.LOCK_EX)

    # ---- the grader's own files ---------------------------------------------------

    def _fingerprint(self):
        """{path: sha256} of everything the verdicts depend on besides the
        target: the engine, the rubrics, the tests, common/, the shipped
        reference objects and the hidden tests."""
        roots = [self.root / "grader" / d for d in ("lab_grader", "grade", "rubric", "tests", "reference")]
        roots += [self.root / "common"] + ([self.hidden] if self.hidden else [])
        out = {}
        for r in roots:
            if not r.is_dir():
                continue
            for p in sorted(r.rglob("*")):
                if p.is_file() and "__pycache__" not in p.parts:
                    out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
        return out

    def tampered(self):
        """The grader's files that changed since grading began (a test that
        wrote to them: possible only where the sandbox could not give the
        tests a user id of their own). Empty when nothing changed."""
        if self._files is None:
            return []
        now = self._fingerprint()
        return sorted(p for p in set(now) | set(self._files) if now.get(p) != self._files.get(p))

    def start(self):
        """Starts every lane of every selected stage in the background."""
        self.lock()
        self._files = self._fingerprint()
        futures = []
        for stage in self.selected:
            items = self.items(stage)
            if not items:
                continue
            futures.append(self.pool.submit(self._stage_lanes, stage, items))

        def barrier():
            concurrent.futures.wait(futures)
            self.others_done.set()
        threading.Thread(target=barrier, daemon=True).start()

    def _stage_lanes(self, stage, items):
        b = self.build(stage)
        if not b.ok:
            return
        jobs = [self.pool.submit(self.plain, stage)] if any(i.lane == "plain" for i in items) else []
        for item in items:
            if item.lane == "race":
                jobs.append(self.pool.submit(self.race, stage, item))
        if self.quick:
            items = [i for i in items if i.lane not in QUICK_SKIPS]
        if any(i.lane == "valgrind" for i in items):
            jobs.append(self.pool.submit(self.valgrind, stage))
        if any(i.lane == "tsan" for i in items):
            jobs.append(self.pool.submit(self.tsan, stage))
        concurrent.futures.wait(jobs)

    def result(self, item):
        return self.memo.get(("item", item.key), lambda: self._result(item))

    def _result(self, item):
        stage = self.stages[item.stage]
        if item.lane == "quiz":
            return self._quiz(stage, item)
        if self.quick and item.lane in QUICK_SKIPS:
            return ItemResult(item, "not-judged", 0, f"the {item.lane} lane is left to `make grade` (make check is the quick pass)")
        b = self.build(stage)
        if not b.ok:
            e = b.error
            what = {"missing": "missing file", "link": "did not link", "grader": "grader error"}.get(e.kind, "did not compile")
            return ItemResult(item, "failed", 0, f"{what}: {e.first}" if e.kind != "link" else e.first)
        tests = self.tests_of(item, b)
        if item.lane == "plain":
            outs = self.plain(stage)
            return self._from_outcomes(item, [outs[t] for t in tests])
        if item.lane == "race":
            done, bad = self.race(stage, item)
            if bad is None:
                return ItemResult(item, "passed", item.points, f"passed {done} of {done} runs")
            r = self._from_outcomes(item, [bad])
            r.summary = f"failed on run {done} of {1 if self.quick else item.runs}: {r.summary}"
            return r
        if item.lane == "valgrind":
            outs = self.valgrind(stage)
            return self._from_outcomes(item, [outs[t] for t in tests])
        if item.lane == "tsan":
            outs = self.tsan(stage)
            return self._from_outcomes(item, [outs[t] for t in tests])
        if item.lane == "perf":
            if (os.cpu_count() or 1) < 2:
                return ItemResult(item, "not-judged", 0, "cannot judge on this machine: one CPU (a performance "
                                  "check needs the test and its helpers on separate cores)")
            outs = self.perf(stage)
            return self._from_outcomes(item, [outs[t] for t in tests])
        raise rubric.RubricError(f"{item.key}: unknown lane {item.lane}")

    def _quiz(self, stage, item):
        """A quiz item: the student's answers in TARGET/stage/quiz.toml
        against the key in the reference's quiz.toml. The key never travels
        in the handout: there, quiz items are left to the instructor."""
        key_file = self.stage_dir(self.reference, stage.name) / quiz.FILE
        if not key_file.exists():
            return ItemResult(item, "not-judged", 0, "graded by your instructor (the answer key is not in the handout)")
        mine = self.stage_dir(self.target, stage.name) / quiz.FILE
        try:
            key = quiz.load(key_file)
            answers = quiz.load(mine) if mine.exists() else {}
        except quiz.QuizError as e:
            return ItemResult(item, "failed", 0, str(e))
        verdict = quiz.judge(item.tests, answers, key)
        if verdict is None:
            return ItemResult(item, "passed", item.points, "passed")
        kind, text = verdict
        outcome = run.Outcome(test=f"quiz::{item.id}", verdict="not-started" if kind == "blank" else "fail",
                              message=text)
        return ItemResult(item, "failed", 0, text, outcome=outcome)

    def _from_outcomes(self, item, outcomes):
        bad = [o for o in outcomes if not o.passed]
        if not bad:
            return ItemResult(item, "passed", item.points, "passed")
        if all(o.verdict in ("too-slow", "unjudged") for o in bad):
            return ItemResult(item, "not-judged", 0, f"{bad[0].test}: {bad[0].message}", outcome=bad[0])
        first = bad[0]
        summary = f"{first.test}: {first.message}" if first.verdict != "not-started" else first.message
        return ItemResult(item, "failed", 0, summary, outcome=first)

    def close(self):
        self.pool.shutdown(wait=False, cancel_futures=True)
        if self._lock_file:
            self._lock_file.close()  # releases the lock
