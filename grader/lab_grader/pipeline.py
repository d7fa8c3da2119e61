"""The grading of one tree, in stage order:

    plan -> build -> lanes -> calibrate -> verdict
    plan.py  assemble.py  lanes.py  calibrate.py  scoring.py

(waiting.py: the threads and the run-once memo; tree_lock.py: one grading
of a tree at a time.)

Every stage to build (the selected ones and the earlier stages they use) gets
a thread, started in stage order. A stage's build waits for one fact about
each earlier stage it uses, which that stage's own thread has already
decided: can the student's version be linked in (it builds and passes all
its tests in the plain lane), or must the reference stand in? Then the
stage's plain and race lanes start, its thread links the Valgrind and TSan
binaries its items need, and those lanes start too; the performance lane
waits until every other lane of every stage is done, and then runs alone.
grading.py asks for each item's result, which waits for what it needs.

Nothing flows back: building never runs a test, a lane never builds (its
binary is built before it starts; calibrate.py reruns a test through the
callable it is handed, lanes.Runner.rerun), and the verdict of an item is
read from results the pipeline already has.
"""
import concurrent.futures
import dataclasses
import functools
import hashlib
import json
import pathlib
import secrets
import threading

from . import arguments, assemble, build, calibrate, integrity, judge, lanes, machine, plan, quiz, sandbox, scoring, transcript
from .outcomes import HUNG_VERDICTS, Outcome, Verdict
from .tree_lock import TreeLock
from .waiting import Memo, spawn

QUICK_SKIPS = ("valgrind", "tsan", "perf")
TOOL_LANES = ("valgrind", "tsan")   # their binaries are built after the plain one (_build_tools)
SLOW_FAIL_S = 2.0     # a plain failure that took this long waited for a rescue: not rerun under a tool


@dataclasses.dataclass
class Builds:
    """What a report needs to know of a grading, besides the item results."""
    root: pathlib.Path
    target: pathlib.Path
    stages: dict          # name -> rubric.Stage
    builds: dict          # name -> assemble.StageBuild
    untrusted: list       # the grader's files that changed while it ran (no score is given)
    items_of_test: dict = dataclasses.field(default_factory=dict)   # (stage, suite::name) -> ids of the items that run it
    rerun_target: str = None   # the TARGET= rerun lines name (LAB_RERUN_TARGET); None: the tree graded


class Pipeline:
    def __init__(self, root, target, stages, selected, build_dir, items=None, test=None, seed=None,
                 werror=False, valgrind_scale=0.05, slots=2, reference=None, quick=False, hidden=None,
                 environment=None):
        self.root = pathlib.Path(root)
        # the environment's knobs (arguments.Environment), read by the entry point that checked the options
        self.environment = env = environment or arguments.read_environment(self.root)
        self.target = pathlib.Path(target).resolve()
        self.build_dir = pathlib.Path(build_dir)
        self.hidden = pathlib.Path(hidden) if hidden else None
        self.reference = pathlib.Path(reference) if reference else self.root / "solutions"
        self.plan = plan.make(self.root, stages, selected, items, test, self.hidden, quick)
        self.items_of_test = {}   # (stage, suite::name) -> ids of the items that run it, for the rerun line
        for sp in self.plan.order:
            for item in sp.stage.items:
                for t in sp.item_tests[item.key]:
                    self.items_of_test.setdefault((sp.stage.name, t), []).append(item.id)
        slug = "".join(c if c.isalnum() else "_" for c in str(self.target))[-80:]
        self.work = self.build_dir / "runs" / slug
        self.assembler = assemble.Assembler(self.root, self.target, self.reference, self.hidden, self.build_dir,
                                            self.work, werror, cc=env.cc, gate_calls=env.gate_calls,
                                            given_from_target=env.given_from_target)
        self.runner = lanes.Runner(secrets.token_hex(8), seed, slots, valgrind_scale, self.work,
                                   passed_on=env.passed_on, cpu_quota=env.run_cpu_quota)
        for sp in self.plan.order:
            tests, hidden = self.assembler.test_dirs(sp.stage.name)
            self.runner.expected[sp.stage.name] = transcript.load(tests, *hidden)
            self.runner.todo_hints[sp.stage.name] = judge.skeleton_todos(self.root / "labs" / sp.stage.name)
        self.memo = Memo()
        self.builds = {}     # name -> Future of StageBuild
        self.tools = {}      # (name, lane) -> Future of the Valgrind or TSan lane's binary (BuildError if none)
        self.usable = {}     # name -> Future of (True, "") or (False, why)
        self.others_done = threading.Event()
        self.tree_lock = TreeLock(self.work, self.target)
        self._files = None   # the fingerprint of the grader's own files, taken at start()
        self._run_lanes = True

    # ---- the run ------------------------------------------------------------

    def start(self, lanes=True, variants=()):
        """Starts every stage's thread, in stage order (lanes=False: builds
        only, with the plain runs that decide which earlier stages are
        usable, of the plain binary and `variants`)."""
        self._run_lanes = lanes
        self._variants = {"plain", *variants}
        self.tree_lock.acquire()
        self._files = integrity.fingerprint(self.root, self.hidden)
        sandbox.shared(self.environment).protect([self.root, self.hidden])
        used = {d for sp in self.plan.order for d in sp.closure}
        threads = []
        for sp in self.plan.order:
            self.builds[sp.stage.name] = concurrent.futures.Future()
            for lane in TOOL_LANES:
                self.tools[sp.stage.name, lane] = concurrent.futures.Future()
            if sp.stage.name in used:
                self.usable[sp.stage.name] = concurrent.futures.Future()
            threads.append(spawn(self._stage, sp))

        def barrier():
            concurrent.futures.wait(threads)
            self.others_done.set()
        threading.Thread(target=barrier, daemon=True).start()

    def _stage(self, sp):
        name = sp.stage.name
        try:
            deps = {d: self.usable[d].result() for d in sp.closure}
            # the plain binary first, and its lanes start; then the Valgrind
            # and TSan binaries its items need (_build_tools). build_only: the
            # ones asked for (make debug runs the -O0 one).
            variants = self._variants
            graded = bool(sp.items and self._run_lanes) or build.DEBUG in variants
            b = self.assembler.build(self.plan, sp, deps, variants,
                                     link_plain=lambda key: graded or not self._verdict_file(key, name).exists())
        except BaseException as e:  # noqa: BLE001 - whoever waits for the build sees it
            self.builds[name].set_exception(e)
            for lane in TOOL_LANES:
                self.tools[name, lane].set_exception(e)
            if name in self.usable:
                self.usable[name].set_exception(e)
            raise
        self.builds[name].set_result(b)
        jobs = []
        if name in self.usable:
            jobs.append(spawn(self._decide_usable, sp, b))
        lanes_wanted = sp.lanes() - set(QUICK_SKIPS if self.plan.quick else ())
        if not (b.ok and sp.items and self._run_lanes):
            lanes_wanted = set()
        if "plain" in lanes_wanted:
            jobs.append(spawn(self.plain, sp))
        jobs += [spawn(self.race, sp, i) for i in sp.items if i.lane == "race" and "race" in lanes_wanted]
        self._build_tools(sp, deps, b, [lane for lane in TOOL_LANES if lane in lanes_wanted])
        jobs += [spawn(self.checked_lane, sp, lane) for lane in TOOL_LANES if lane in lanes_wanted]
        concurrent.futures.wait(jobs)

    def _build_tools(self, sp, deps, b, wanted):
        """The Valgrind and TSan binaries of the lanes wanted, linked while
        the plain lane runs, so that no lane builds; a lane not wanted gets
        no binary (a mutant graded on plain items never compiles for TSan).
        One that does not build fails only that lane's items."""
        for lane in TOOL_LANES:
            fut = self.tools[sp.stage.name, lane]
            if lane not in wanted:
                fut.set_exception(RuntimeError(f"no {lane} binary: the {lane} lane was not asked for"))
                continue
            try:
                self.assembler.add_variant(self.plan, sp, deps, lanes.LANES[lane].variant, b)
                fut.set_result(b.binaries[lanes.LANES[lane].variant])
            except BaseException as e:  # noqa: BLE001 - a BuildError fails only this lane's items
                fut.set_exception(e)

    def _decide_usable(self, sp, b):
        """Can the student's stage stand in for the reference in the stages
        that use it? (True, "") or (False, why). Kept on disk by the objects
        it was judged on, so grading many trees that share a stage (the
        mutants of a later stage) judges it once."""
        fut = self.usable[sp.stage.name]
        try:
            fut.set_result(self._usable(sp, b))
        except BaseException as e:  # noqa: BLE001
            fut.set_exception(e)

    def _usable(self, sp, b):
        if not b.ok and b.error is not None and b.error.kind == "not-submitted":
            return False, "was not submitted"
        if not b.ok:
            return False, f"does not build ({b.error.first})"
        if b.notes:
            return False, "was itself graded with reference code"
        cache = self._verdict_file(b.key, sp.stage.name)
        if cache.exists():
            data = json.loads(cache.read_text())
            return data["ok"], data["why"]
        try:
            self.assembler.link_unlinked(self.plan, sp, b)
        except build.BuildError as e:
            return False, f"does not build ({self.assembler.theirs(e.first)})"
        outs = self.plain(sp, sp.tests)
        bad = [o for o in outs.values() if not o.passed]
        named = ", ".join(o.test.replace("::", "/") for o in bad[:3]) + (", ..." if len(bad) > 3 else "")
        ok, why = (False, f"fails {len(bad)} of its {len(outs)} tests ({named})") if bad else (True, "")
        if not any(o.verdict == Verdict.TIMEOUT for o in bad):  # a hang may be the machine's fault: do not keep it
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps({"ok": ok, "why": why}))
        return ok, why

    def _verdict_file(self, key, stage):
        """Where _usable keeps its decision for the objects of digest key,
        judged against the stage's table of checks (sites.json): a passing
        test whose record no longer matches a regenerated table fails, so a
        new table judges again."""
        expected = self.runner.expected.get(stage, {})
        table = sorted((t, sorted(e.required), sorted(e.allowed)) for t, e in expected.items())
        digest = hashlib.sha256(json.dumps(table).encode()).hexdigest()[:16]
        return self.build_dir / "verdicts" / f"{key}-{digest}.json"

    def build_only(self, name, variant=build.DEBUG):
        """The stage's build, as a grading would link it, with the binary of
        `variant` besides the plain one (make debug)."""
        self.start(lanes=False, variants=(variant,))
        return self.builds[name].result()

    # ---- lanes ----------------------------------------------------------------

    def _lane_run(self, sp, lane, tests, run_dir):
        """One run of a lane: run and judge, calibrate timeouts, apply the
        lane's checker. With an instructor's hidden tests, the public tests
        run in a binary without them and the hidden ones in a run of their
        own (run_dir + "-hidden"): nothing of a hidden test, not its name on the
        runner's command line, is in a process whose results the student
        sees. (A sibling folder, not one inside run_dir: the public run's
        own files come back into run_dir.)"""
        b = self.builds[sp.stage.name].result()
        public = b.public_binaries.get(lane.variant)
        if public is None:
            return self._one_run(sp, lane, b, b.binaries[lane.variant], tests, run_dir)
        shown = set(sp.public)
        outs = {}
        for binary, part, where in ((public, [t for t in tests if t in shown], run_dir),
                                    (b.binaries[lane.variant], [t for t in tests if t not in shown],
                                     run_dir.with_name(run_dir.name + "-hidden"))):
            if part:
                outs.update(self._one_run(sp, lane, b, binary, part, where))
        return outs

    def _one_run(self, sp, lane, b, binary, tests, run_dir):
        inv = self.runner.make_run(lane, binary, tests, run_dir)
        outs, result = self.runner.run(inv, sp.hang_hints, lane.exclusive)
        rerun = functools.partial(self.runner.rerun, inv)   # calibrate's second runs, in this lane
        calibrate.calibrate(outs, rerun, b.reference.get(lane.variant), set(sp.public),
                            limits_hit=bool(result.refused or result.oom_kills))
        return lanes.check(lane, outs, result, run_dir, inv.binary)

    def plain(self, sp, tests=None):
        """The plain lane: tests (by default those of the graded plain items,
        and those the Valgrind and TSan items will run, so that a test that
        hangs or gives up slowly is known before a tool runs it ten times
        slower; every test when nothing is filtered) once: {test: Outcome}."""
        tests = tuple(self.plain_tests(sp) if tests is None else tests)

        def go():
            if not tests:
                return {}
            name = "plain" if len(tests) == len(sp.tests) else f"plain-{build._digest(*tests)[:8]}"
            return self._lane_run(sp, lanes.LANES["plain"], tests, self.work / sp.stage.name / name)
        return self.memo.get(("plain", sp.stage.name, tests), go)

    def plain_tests(self, sp):
        if self.plan.unfiltered:
            return sp.tests
        return list(dict.fromkeys(sp.lane_tests("plain") + sp.lane_tests("valgrind") + sp.lane_tests("tsan")))

    def race(self, sp, item):
        """The item's tests `runs` times (once in make check): lanes.repeat."""
        def once(k):
            outs = self._lane_run(sp, lanes.LANES["race"], sp.item_tests[item.key],
                                  self.work / sp.stage.name / "race" / item.id / str(k))
            return next((o for o in outs.values() if not o.passed), None)
        every = self.environment.race_runs   # the self-tests' count of how often a mutant is caught
        runs = every or (1 if self.plan.quick else item.runs)
        return self.memo.get(("race", item.key), lambda: lanes.repeat(once, runs, every=bool(every)))

    def checked_lane(self, sp, name):
        """The Valgrind or TSan lane. A test that already timed out (or hit a
        TODO) in the plain lane is not run again under the tool: it would only
        do the same again, ten times slower (a wheel that never fires its timers cost 15
        minutes of Valgrind before this). The plain lane takes seconds. Nor is
        one that failed there after waiting SLOW_FAIL_S or more: a rescue
        that gave up on a lost wake, which under the tool waits its scaled
        time again (a stage 07 runtime that never unparks: 5 of its 6
        minutes)."""
        def go():
            tests = sp.lane_tests(name)
            if not tests:
                return {}
            plain = self.plain(sp)
            run_these, hung = [], {}
            for t in tests:
                o = plain.get(t)
                if o is not None and o.verdict in HUNG_VERDICTS:
                    hung[t] = Outcome(test=t, verdict=o.verdict, seed=o.seed,
                                      message=f"not run under {lanes.TOOL[name]}: {o.message} without it (the plain lane)")
                elif o is not None and o.verdict == Verdict.FAIL and o.seconds >= SLOW_FAIL_S:
                    hung[t] = Outcome(test=t, verdict=o.verdict, seed=o.seed, details=list(o.details),
                                      message=f"not run under {lanes.TOOL[name]}: it failed without it (the plain "
                                              f"lane) after {o.seconds:.1f} s: {o.message}")
                elif o is not None and o.verdict == Verdict.NOT_STARTED:
                    # it stops at the same TODO under the tool, only slower
                    hung[t] = dataclasses.replace(o, details=list(o.details))
                else:
                    run_these.append(t)
            if not run_these:
                return hung
            self.tools[sp.stage.name, name].result()   # BuildError: the items of this lane fail with it
            outs = self._lane_run(sp, lanes.LANES[name], run_these, self.work / sp.stage.name / name)
            return {**outs, **hung}
        return self.memo.get((name, sp.stage.name), go)

    def perf(self, sp):
        def go():
            self.others_done.wait()
            tests = sp.lane_tests("perf")
            return self._lane_run(sp, lanes.LANES["perf"], tests, self.work / sp.stage.name / "perf") if tests else {}
        return self.memo.get(("perf", sp.stage.name), go)

    # ---- verdicts ---------------------------------------------------------------

    def items(self):
        return self.plan.items()

    def result(self, item, timeout=None):
        """The item's result; with a timeout (seconds), NOT_JUDGED when the
        lanes it needs are not done by then (the grading's time budget)."""
        if timeout is None:
            return self.memo.get(("item", item.key), lambda: self._result(item))
        fut = spawn(self.memo.get, ("item", item.key), lambda: self._result(item))
        try:
            return fut.result(timeout=max(0.0, timeout))
        except concurrent.futures.TimeoutError:
            return scoring.out_of_time(item)

    def _result(self, item):
        sp = self.plan.of(item.stage)
        if item.lane == "quiz":
            name = sp.stage.name
            return scoring.from_quiz(item, self.reference / name / quiz.FILE, self.target / name / quiz.FILE,
                                     self.root / "grader" / "reference" / name / quiz.HASHED)
        if self.plan.quick and item.lane in QUICK_SKIPS:
            return scoring.left_to_make_grade(item)
        b = self.builds[item.stage].result()
        if not b.ok:
            return scoring.not_built(item, b.error)
        tests = sp.item_tests[item.key]
        if item.lane == "race":
            done, bad, failing = self.race(sp, item)
            return scoring.from_race(item, done, 1 if self.plan.quick else item.runs, bad, failing)
        if item.cpus and machine.share() < item.cpus:
            return scoring.too_few_cpus(item, machine.share())
        if item.lane == "perf":
            outs = self.perf(sp)
        elif item.lane == "plain":
            outs = self.plain(sp)
        else:
            try:
                outs = self.checked_lane(sp, item.lane)
            except build.BuildError as e:
                return scoring.not_built(item, e)
        return scoring.from_outcomes(item, [outs[t] for t in tests])

    # ---- the end ---------------------------------------------------------------------

    def snapshot(self):
        """The grading so far, for a report written before the end (the
        builds that are done; no integrity verdict yet)."""
        builds = {n: f.result() for n, f in self.builds.items() if f.done() and f.exception() is None}
        return Builds(self.root, self.target, self.plan.stages, builds, [], self.items_of_test,
                      self.environment.rerun_target)

    def finish(self):
        """The grading as the report sees it, with the integrity check: the
        grader's files that changed since start() (empty when none did)."""
        untrusted = []
        if self._files is not None:
            untrusted = integrity.changed(self._files, integrity.fingerprint(self.root, self.hidden))
        concurrent.futures.wait(list(self.builds.values()))   # a quiz item's result does not wait for its build
        builds = {n: f.result() for n, f in self.builds.items() if f.exception() is None}
        return Builds(self.root, self.target, self.plan.stages, builds, untrusted, self.items_of_test,
                      self.environment.rerun_target)

    def close(self):
        self.tree_lock.release()
