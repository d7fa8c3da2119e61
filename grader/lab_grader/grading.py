"""One grading, top to bottom: what `make grade` does, in the order it does
it. The pytest plugin (grader/grade/conftest.py) only maps pytest's
lifecycle onto these calls:

    g = Grading(options)   what is graded: the options checked (arguments.py),
                           the rubric items chosen (plan.py, through the pipeline)
    g.start()              built and run: a thread per stage builds its binaries
                           (assemble.py), then runs its lanes (lanes.py)
    g.result(item)         judged: the item's result, once the runs it needs are
                           done (pipeline.py -> scoring.py)
    g.finish()             written: the pipeline's last word (which builds, and
                           whether the grader's own files stayed untouched), then
                           the report (report.py), results.json (results_json.py)
                           and JUnit (junit.py); the lines to print and the exit status

The items are judged in rubric order, one at a time (pytest's), while the
stages build and run behind them; an item waits only for what it needs.
"""
import dataclasses
import pathlib
import sys
import time

from . import arguments, junit, pipeline, report, results_json, rubric, sandbox, scoring

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _option(default, help, **more):
    return dataclasses.field(default=default, metadata={"help": help, **more})


@dataclasses.dataclass
class Options:
    """What was asked: make grade's variables, as the pytest plugin's
    options (--name for each field; a field that defaults to False is a
    flag). Checked by arguments.check_grade when the Grading is made."""
    target: str = _option(str(ROOT / "labs"), "tree shaped like labs/ to grade")
    stage: str = _option("", "stages to grade: 1, 01-signal, 1,2")
    items: str = _option("", "only these rubric item ids (comma-separated)")
    test: str = _option("", "only items that run this test (suite/name)")
    seed: str = _option("", "seed for the randomized tests")
    results: str = _option("", "write Gradescope's results.json here")
    werror: bool = _option(False, "compile the target with -Werror")
    build_dir: str = _option(str(ROOT / "build" / "grade"), None)
    valgrind_scale: str = _option("0.05", "iteration factor under Valgrind")
    timings: bool = _option(False, "print the time each lane took")
    quick: bool = _option(False, "make check: skip Valgrind, TSan and perf; race items once")
    hidden: str = _option("", "the instructor's hidden rubric items and tests (HIDDEN=dir)")
    budget: str = _option("0", "seconds for the whole grading (0: none); past it, items left are not judged, "
                          "and results.json is written item by item so a kill never leaves nothing")
    junit: str = _option("", "write JUnit XML here: a testcase per item, a suite per stage")
    unjudged: str = _option("zero", "how results.json counts an item not judged: 0 of its points (zero), "
                            "or 0 of 0 (omit)", choices=("zero", "omit"))
    watch: bool = _option(False, "make watch: when a stage does not build, the compiler's error alone "
                          "instead of the report")
    reference: str = _option("", "the tree a timed-out test is rerun on (default solutions/; "
                             "for the grader's own self-tests)")


@dataclasses.dataclass
class Finished:
    """What a grading leaves to print, and how it exits."""
    lines: list               # to print, in order
    alarm: bool = False       # the lines say the grading could not be done (printed in red)
    status: int = None        # the exit status: 2 a rubric that does not load, 3 not trusted; None: pytest's


class Grading:
    def __init__(self, options, root=ROOT):
        """What is graded. Bad options raise arguments.UsageError (one
        line, exit status 2, before anything runs); a rubric that does not
        load is kept as self.error, and every item fails with it."""
        self.options = options
        self.root = pathlib.Path(root)
        self.began = time.monotonic()
        self.results = []          # the item results so far, in the order judged
        self.error = None
        self.pipeline = None
        self.budget = 0.0          # seconds for the whole grading, 0 for none
        self.environment = arguments.Environment()   # the environment's knobs, read with the options
        self.tests = None          # TEST= as checked: suite/name, several joined by commas
        o = options
        try:
            args = arguments.check_grade(self.root, target=o.target, stage=o.stage, items=o.items, test=o.test,
                                      seed=o.seed, budget=o.budget, valgrind_scale=o.valgrind_scale, hidden=o.hidden)
            self.budget = args.budget
            self.tests = args.test
            self.environment = args.environment
            self.pipeline = pipeline.Pipeline(
                root=self.root, target=args.target, stages=args.stages, selected=args.selected,
                build_dir=pathlib.Path(o.build_dir), items=args.items, test=args.test, seed=args.seed,
                werror=o.werror, valgrind_scale=args.valgrind_scale, quick=o.quick,
                hidden=o.hidden or None, reference=o.reference or None, environment=args.environment)
        except arguments.UsageError:
            raise
        except rubric.RubricError as e:
            self.error = str(e)

    def items(self):
        """The rubric items to judge, in rubric order (none when the rubric
        did not load or the options select nothing)."""
        return [] if self.pipeline is None else self.pipeline.items()

    def start(self):
        """Built and run: every stage's thread starts, in stage order; it
        builds, then runs its lanes (pipeline.Pipeline.start)."""
        if self.pipeline is not None:
            self.pipeline.start()

    def result(self, item):
        """Judged: the item's result (outcomes.ItemResult), "not judged"
        when the budget runs out before the runs it needs are done. With
        RESULTS= and a budget, results.json is written again with every
        item so far (the rest "not judged"), so a grading killed for time
        still leaves its results."""
        left = None if not self.budget else self.began + self.budget - time.monotonic()
        r = self.pipeline.result(item, timeout=left)
        self.results.append(r)
        if self.options.results and self.budget:
            done = {x.item.key for x in self.results}
            pending = [scoring.out_of_time(i) for i in self.items() if i.key not in done]
            self._write_results(self.pipeline.snapshot(), self.results + pending)
        return r

    def finish(self):
        """Written: the grading as the report sees it (pipeline.finish:
        its builds, and the grader's files that changed while it ran),
        then the report, results.json and JUnit. Returns what to print and
        the exit status (Finished)."""
        graded = None
        if self.pipeline is not None:
            try:
                graded = self.pipeline.finish()
            finally:
                self.pipeline.close()
        if self.error:
            return Finished([f"grader: {self.error}"], alarm=True, status=2)
        untrusted = 3 if graded is not None and graded.untrusted else None   # no verdict can be trusted
        if not self.results:
            asked = [f"{k}={v}" for k, v in (("ITEMS", self.options.items), ("TEST", self.options.test)) if v]
            return Finished([f"grader: nothing to grade ({' '.join(asked) or 'no items'} matched nothing)"],
                            alarm=True, status=untrusted)
        if self.options.watch:
            alone = report.compiler_first(graded, self.results)
            if alone:
                return Finished([alone], status=untrusted)
        color = self.environment.color and sys.stdout.isatty()
        lines = ["", report.text_report(graded, self.results, sandbox.shared(self.environment).describe(), color)]
        if self.options.test:
            named = self.tests
            lines += ["", f"TEST={named}: each item above ran only {'these tests' if ',' in named else 'this test'} "
                      "of its own, so its points say whether that passed; the item's grade needs all of its tests "
                      "(make grade without TEST=)."]
            lines += self._test_output()
        if self.options.timings:
            lines += ["", "time spent running tests, per stage and lane (lanes overlap; wall time is less than "
                      "the sum):"]
            lines += [f"  {stage:<20} {lane:<9} {secs:6.1f} s"
                      for (stage, lane), secs in sorted(self.pipeline.runner.lane_seconds().items())]
        if self.options.results:
            self._write_results(graded, self.results)
            lines.append(f"wrote {self.options.results}")
        if self.options.junit:
            junit.write(self.options.junit, junit.cases(graded, self.results))
            lines.append(f"wrote {self.options.junit}")
        return Finished(lines, status=untrusted)

    def _write_results(self, graded, results):
        data = results_json.build(graded, results, time.monotonic() - self.began, self.options.unjudged)
        # without python3-jsonschema (a student's machine): written unchecked rather than not at all
        results_json.write(self.options.results, data, require_schema=False)

    def _test_output(self):
        """With TEST=..., what the test printed in the plain run."""
        lines = []
        for d in self.pipeline.runner.run_dirs:
            out = d / "output.txt"
            text = out.read_text(errors="replace").strip() if out.exists() else ""
            if text:
                lines += [f"-- what the run printed ({d.relative_to(self.pipeline.work)}) --", text[-8000:]]
        return lines
