"""Step 2 of a grading: one stage's test binaries.

A stage's binaries link the grader's tests, the student's files of the
stage, the earlier stages it uses and common/. For each earlier stage the
pipeline has already decided, from that stage's own results, whether the
student's version can be used (it builds and passes all its tests) or the
reference must stand in; this step only follows that decision and writes the
note the report shows. Nothing here runs a test.

The same step links the stage's tests with the reference of every stage (for
calibrating timeouts: a test that timed out is run again on it), once per
set of objects.
"""
import dataclasses
import json
import os
import pathlib
import threading

from . import build, gate, intake, records

# A gate verdict kept beside an object names the code that reached it (this
# file's sequence of checks and gate.py's checks): a stricter gate judges
# every object again instead of trusting what an older one let through.
GATE_CODE = build._digest(*(pathlib.Path(f).read_text() for f in (__file__, gate.__file__)))[:12]


@dataclasses.dataclass
class StageBuild:
    ok: bool
    error: build.BuildError = None
    binaries: dict = dataclasses.field(default_factory=dict)   # variant -> path
    # variant -> the same without the instructor's hidden tests, for the
    # public tests' runs: no hidden test's code, strings or name is in the
    # process whose results the student sees (only when there are hidden tests)
    public_binaries: dict = dataclasses.field(default_factory=dict)
    reference: dict = dataclasses.field(default_factory=dict)  # variant -> the reference's test binary, or None
    warnings: list = dataclasses.field(default_factory=list)
    notes: list = dataclasses.field(default_factory=list)      # "graded with the reference ..."
    remarks: list = dataclasses.field(default_factory=list)    # about the student's files (a header not used)
    review: list = dataclasses.field(default_factory=list)     # for the instructor: constructs to read (gate.review)
    key: str = ""   # digest of the objects the plain binary is linked from
    unlinked: tuple = None  # (objects, without hidden tests): build(..., link_plain=False) left the link


class Assembler:
    def __init__(self, root, target, reference, hidden, build_dir, work, werror=False, cc="gcc", gate_calls=True,
                 given_from_target=False):
        """cc, gate_calls, given_from_target: from arguments.Environment."""
        self.root = pathlib.Path(root)
        self.target = pathlib.Path(target)
        self.reference = pathlib.Path(reference)
        self.hidden = pathlib.Path(hidden) if hidden else None
        self.builder = build.Builder(self.root, build_dir, cc)
        self.gate_calls = gate_calls
        self.given_from_target = given_from_target
        self.shared = pathlib.Path(build_dir) / "reference-bin"
        self.nm_kept = pathlib.Path(build_dir) / "nm"   # what nm said of each object, for the next grading
        self.work = pathlib.Path(work)
        self.werror = werror
        self.src = self.work / "src"   # the student's stages as taken in (intake.py)
        self._intakes = {}
        self._allowed = {}
        self._review = {}   # stage -> {source: gate.review's findings}
        self._locks = {}
        self._guard = threading.Lock()

    def _dirs(self, sp, tree):
        return [pathlib.Path(tree) / n for n in sp.closure + [sp.stage.name]]

    def take_in(self, sp):
        """The stage's files as the grader compiles them (once per grading)."""
        name = sp.stage.name
        with self._lock(("intake", name)):
            if name not in self._intakes:
                self._intakes[name] = intake.take_in(self.target / name, self.src / name,
                                                     intake.handout_files(self.root, name),
                                                     self.given_from_target)
            return self._intakes[name]

    def student_objects(self, plan, sp, variant):
        if not (self.target / sp.stage.name).is_dir():
            raise build.BuildError(f"{sp.stage.name} was not submitted", "", kind="not-submitted")
        taken = self.take_in(sp)
        if taken.refused:
            raise build.BuildError(taken.refused, "", kind="refused")
        dirs = [self.take_in(plan.of(n)).dir for n in sp.closure + [sp.stage.name]]
        out = build.each(lambda src: self.builder.compile(taken.dir / src, variant, dirs, werror=self.werror,
                                                          jailed=True), sp.stage.sources)
        if variant in ("plain", "tsan"):
            plain = (out if variant == "plain" else
                     build.each(lambda src: self.builder.compile(taken.dir / src, "plain", dirs, werror=self.werror,
                                                                 jailed=True), sp.stage.sources))
            for src, c, p in zip(sp.stage.sources, out, plain):
                found = self._gate(plan, sp, taken.dir / src, c.obj, variant, p.obj, dirs)
                if variant == "plain":
                    with self._guard:
                        self._review.setdefault(sp.stage.name, {})[src] = found
        return out

    def review(self, name):
        """What the gate put before the instructor in a stage's files:
        "file: construct" lines."""
        with self._guard:
            return [f"{src}: {what}" for src, found in self._review.get(name, {}).items() for what in found]

    def _gate(self, plan, sp, source, obj, variant, plain_obj, dirs):
        """The gate's checks of one compiled student file, once per object:
        what the compiler made of it (gate.py), and for TSan that its code is
        the plain lane's."""
        allow = self.allowed(plan, sp)
        mark = obj.with_suffix(f".gate-{allow.digest}-{GATE_CODE}")
        if mark.exists():
            try:
                return json.loads(mark.read_text() or "[]")
            except ValueError:
                pass
        try:
            pre = obj.with_suffix(".i").read_text(errors="replace")
            students = [p for p in (self.src / sp.stage.name).iterdir()]
            found = gate.review(pre, students)
            gate.check_preprocessed(pre, students)
            gate.check_assembly(obj.with_suffix(".s").read_text(errors="replace"), source.name, variant)
            if variant == "tsan":
                gate.check_lanes_agree(source.name, plain_obj.with_suffix(".i").read_text(errors="replace"), pre,
                                       self._handout_difference(sp, source.name, dirs))
            gate.check_object(obj, source.name, allow, variant, kept_dir=self.nm_kept, check_calls=self.gate_calls)
        except OSError as e:
            raise build.BuildError(f"{source.name}: the compiler's output could not be read ({e})", "",
                                   kind="refused") from None
        except gate.Refused as e:
            raise build.BuildError(str(e), "", kind="refused") from None
        mark.write_text(json.dumps(found))
        return found

    def _handout_difference(self, sp, name, dirs):
        """Where the handout's own copy of a file differs between the plain
        and the TSan lane (stage 07's fences), as gate.lane_difference."""
        given = intake.handout_files(self.root, sp.stage.name).get(name)
        if given is None:
            return []
        key = ("lanes", sp.stage.name, name)
        with self._lock(key):
            if key not in self._allowed:
                plain = self.builder.preprocess(given, dirs, build.OPT["plain"])
                tsan = self.builder.preprocess(given, dirs, build.OPT["tsan"])
                self._allowed[key] = gate.lane_difference(plain, tsan) if plain and tsan else []
            return self._allowed[key]

    def allowed(self, plan, sp):
        """What the stage's student objects may define and use, from its
        reference objects (memoized)."""
        name = sp.stage.name
        with self._lock(("allowed", name)):
            if name not in self._allowed:
                ref = self.reference_objects(sp, "plain")
                earlier = [o for n in sp.closure for o in self.reference_objects(plan.of(n), "plain")]
                self._allowed[name] = gate.allowed(ref, earlier, self.builder.api_objects(), kept_dir=self.nm_kept)
            return self._allowed[name]

    def reference_objects(self, sp, variant):
        """The reference stage: compiled from solutions/ in the instructor's
        repository, or the objects shipped in the handout (no source)."""
        d = self.reference / sp.stage.name
        if d.is_dir():
            dirs = self._dirs(sp, self.reference)
            return [c.obj for c in build.each(lambda src: self.builder.compile(d / src, variant, dirs, werror=True),
                                              sp.stage.sources)]
        # make debug links the reference's -O2 objects where no source is at hand
        shipped = self.root / "grader" / "reference" / sp.stage.name / ("plain" if variant == build.DEBUG else variant)
        objs = [shipped / (pathlib.Path(src).stem + ".o") for src in sp.stage.sources]
        if any(not o.exists() for o in objs):
            raise build.BuildError(f"no reference for {sp.stage.name} (neither solutions/ nor {shipped})", "",
                                   kind="grader")
        return objs

    def test_dirs(self, name):
        tests = self.root / "grader" / "tests" / name
        hidden = self.hidden / "tests" / name if self.hidden else None
        return tests, ([hidden] if hidden is not None and hidden.is_dir() else [])

    def build(self, plan, sp, deps, variants=build.VARIANTS, link_plain=lambda key: True):
        """The stage's binaries, of the variants asked for (plain always: it
        decides whether the stage is usable; add_variant links the others
        once the plain lane has started). deps: {earlier stage: (usable, why)}
        for every stage of sp.closure, decided by the pipeline. link_plain(key)
        false: the plain binary's objects are compiled and gated but not
        linked (result.unlinked; link_unlinked links them): a stage only used
        by a later one, whose usability was judged on these objects before,
        needs no binary."""
        variants = [v for v in (*build.VARIANTS, build.DEBUG) if v in variants or v == "plain"]
        result = StageBuild(ok=False)
        for dep in sp.closure:
            ok, why = deps[dep]
            if not ok:
                result.notes.append(f"graded with the reference {dep} because your {dep} {why}")
        try:
            mine = {v: self.student_objects(plan, sp, v) for v in sorted({build.CODE_VARIANT[v] for v in variants})}
            for c in mine["plain"]:
                if c.warnings.strip():
                    result.warnings.append(records.short_path(c.warnings.strip()))
            result.remarks = list(self.take_in(sp).notes)
            result.review = self.review(sp.stage.name)
            for variant in variants:
                objs, public = self._both(plan, sp, deps, variant)
                if variant == "plain":
                    result.key = build._digest(*sorted(str(o) for o in objs))
                    if not link_plain(result.key):
                        result.unlinked = (objs, public)
                        continue
                self._link(plan, sp, variant, objs, result, public)
        except build.BuildError as e:
            e.first, e.log = self.theirs(e.first), self.theirs(e.log)
            result.error = e
            return result
        result.ok = True
        return result

    def theirs(self, text):
        """A compiler's words with the path of the grader's copy of a stage
        (work/src/NN-name/file.c) put back to the student's own file, from
        where make runs when it is below it: what an editor opens."""
        theirs = self.target
        try:
            theirs = theirs.relative_to(pathlib.Path.cwd())
        except ValueError:
            pass
        prefix = "" if str(theirs) == "." else f"{theirs}{os.sep}"
        return text.replace(f"{self.src}{os.sep}", prefix) if text else text

    def add_variant(self, plan, sp, deps, variant, result):
        """Links one more variant of a stage that built (a tool lane's: the
        pipeline builds those after the plain one, while the plain lane
        runs). Raises BuildError."""
        objs, public = self._both(plan, sp, deps, variant)
        self._link(plan, sp, variant, objs, result, public)

    def link_unlinked(self, plan, sp, result):
        """Links the plain binary build(..., link_plain=...) left unlinked.
        Raises BuildError."""
        if result.unlinked is not None:
            objs, public = result.unlinked
            self._link(plan, sp, "plain", objs, result, public)
            result.unlinked = None

    def _link(self, plan, sp, variant, objs, result, public_objs=None):
        """Links result.binaries[variant] from objs (and finds result.reference[variant]);
        with hidden tests, result.public_binaries[variant] too, from objs
        without them."""
        libs = self.system_libs(plan, sp)
        tests = self._test_objects(plan, sp, variant)
        result.binaries[variant] = self.builder.link(objs, self.work / sp.stage.name / f"tests-{variant}", variant,
                                                     libs, shuffle=[o for o in objs if o in tests])
        if public_objs is not None and variant != build.DEBUG:
            result.public_binaries[variant] = self.builder.link(
                public_objs, self.work / sp.stage.name / f"tests-{variant}-public", variant, libs,
                shuffle=[o for o in public_objs if o in tests])
        result.reference[variant] = self.reference_binary(plan, sp, variant) if variant != build.DEBUG else None

    def _both(self, plan, sp, deps, variant):
        """(objects of the stage's binary, the same without the hidden tests
        or None when there are none)."""
        _, hidden = self.test_dirs(sp.stage.name)
        return (self._objects(plan, sp, deps, variant),
                self._objects(plan, sp, deps, variant, with_hidden=False) if hidden else None)

    def _objects(self, plan, sp, deps, variant, with_hidden=True):
        """The objects of the stage's binary of one variant."""
        code = build.CODE_VARIANT[variant]
        objs = []
        for dep in sp.closure:
            usable, _ = deps[dep]
            objs += ([c.obj for c in self.student_objects(plan, plan.of(dep), code)] if usable
                     else self.reference_objects(plan.of(dep), code))
        return (self._test_objects(plan, sp, variant, with_hidden) +
                [c.obj for c in self.student_objects(plan, sp, code)] + objs + self.builder.common_objects(variant))

    def _test_objects(self, plan, sp, variant, with_hidden=True):
        """The tests' objects in the stage's binary of one variant (compiled
        once: the builder's cache)."""
        tests_dir, hidden = self.test_dirs(sp.stage.name)
        dirs = [self.take_in(plan.of(n)).dir for n in sp.closure + [sp.stage.name]]
        return self.builder.test_objects(tests_dir, variant, dirs, hidden if with_hidden else ())

    def system_libs(self, plan, sp):
        """The system libraries (rubric `libs`) of the stage and of every stage
        it uses, in order, each once: stage 08's -luring, nothing for 01-07."""
        libs = []
        for name in sp.closure + [sp.stage.name]:
            libs += [lib for lib in plan.of(name).stage.libs if lib not in libs]
        return libs

    def reference_binary(self, plan, sp, variant):
        """The stage's public tests linked with the reference of the stage and
        of every stage it uses (built from solutions/, or shipped prebuilt in
        the handout), or None when there is neither. Linked once per set of
        objects, under the build directory, for every tree graded."""
        shipped = self.root / "grader" / "reference" / sp.stage.name / f"tests-{variant}"
        if not (self.reference / sp.stage.name).is_dir():
            return shipped if shipped.exists() else None
        code = build.CODE_VARIANT[variant]
        try:
            tests_dir, _ = self.test_dirs(sp.stage.name)
            objs = self.builder.test_objects(tests_dir, variant, self._dirs(sp, self.reference))
            for name in sp.closure + [sp.stage.name]:
                objs += self.reference_objects(plan.of(name), code)
            objs += self.builder.common_objects(variant)
        except build.BuildError:
            return None
        out = self.shared / build._digest(*map(str, objs)) / f"tests-{variant}"
        with self._lock(str(out)):
            if out.exists():
                return out
            tmp = out.with_name(f".{out.name}.{threading.get_ident()}")
            try:
                self.builder.link(objs, tmp, variant, self.system_libs(plan, sp))
            except build.BuildError:
                return None
            tmp.replace(out)   # another grader process may link the same: either copy is the same binary
            return out

    def _lock(self, key):
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

