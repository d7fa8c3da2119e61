"""Compiling a stage: the student's files, the earlier stages it uses, common/
and the grader's own tests, into one test binary per lane variant.

  plain  Criterion, -O2                              (plain, race and perf lanes)
  vg     the stand-in runner, -O2, timeouts x10        (Valgrind lane)
  tsan   the stand-in runner, -O1 -fsanitize=thread    (TSan lane)
  debug  the stand-in runner, -O0                      (make debug alone: gdb steps
         through the student's code and the test's body as written)

The Valgrind lane uses the stand-in runner rather than Criterion: it forks a
test without exec'ing anything, so Valgrind starts once per run instead of
once per test and per runner (about 2 s instead of 20 s for nine tests).

Stage and common directories are on the quote include path (-iquote) only:
a stage header named like a system header (signal.h) must never hide the
system one from `#include <signal.h>`.

Objects are cached by the hash of their source, flags and the headers they
can see, so grading many trees (a class, the mutants) compiles common/ and the
tests once. A student's file is cached by what its compile read (ccache's
"direct mode"): a manifest, keyed by the source, the flags and the names of
the files the compiler could see, lists the files the last such compile
read (gcc -MD), and the object's key hashes their contents; a mutant of one
file compiles that file again, not its stage's other files. A group of objects (a stage's tests, common/) compiles on up to
JOBS threads; an object is compiled under a file lock too, so two graders
sharing a build directory (make watch beside make grade, the self-tests'
two workers) compile it once, not both at the same time.
"""
import concurrent.futures
import contextlib
import dataclasses
import fcntl
import hashlib
import os
import pathlib
import re
import shutil
import signal
import subprocess
import threading

from . import layout, sandbox

BASE = ["-std=c11", "-g", "-pthread"]
WARN = ["-Wall", "-Wextra"]
OPT = {"plain": ["-O2"], "vg": ["-O2"], "tsan": ["-O1", "-fsanitize=thread"], "debug": ["-O0"]}
WRAP = "-Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free,--wrap=aligned_alloc,--wrap=posix_memalign"
# every lock and condition call the gate allows (gate.ALWAYS), for common/testing/explore.c
WRAP += "".join(f",--wrap=pthread_{f}" for f in (
    "mutex_lock", "mutex_trylock", "mutex_timedlock", "mutex_unlock", "cond_wait", "cond_timedwait",
    "cond_clockwait", "cond_signal", "cond_broadcast", "spin_lock", "spin_trylock", "spin_unlock",
    "rwlock_rdlock", "rwlock_wrlock", "rwlock_unlock"))
# stage 08's rings, restricted before they run, and its submits, -EBUSY on a test's demand
# (grader/tests/08-uring/uring_guard.c);
# a stage that sets up no ring has nothing to wrap
WRAP += ",--wrap=io_uring_queue_init,--wrap=io_uring_queue_init_params,--wrap=io_uring_submit"
# The TSan runtime linked into the binary, its own functions left out of the
# dynamic symbol table (-rdynamic exports everything else, for backtraces):
# code under test that walked the loaded libraries to libtsan.so found
# __tsan_ignore_thread_begin and hid its own race from the TSan lane (issue
# 25's red team: 23 of 23 where the honest score was 22). Now there is no
# such library, and no name to find. The interceptors stay exported.
LINK = {"tsan": ["-static-libtsan", "-Wl,--exclude-libs,libtsan.a"]}
# Every binary bound at load (-z now) with its relocated tables read-only
# after (-z relro): no table of library addresses stays writable for a hook,
# and the seal keeps the image's protections as they are (harness.c).
BIND = ["-Wl,-z,relro", "-Wl,-z,now"]
VARIANTS = ("plain", "vg", "tsan")   # what a grading links (DEBUG: make debug's, never shipped or graded)
DEBUG = "debug"
# the variant whose objects a lane variant links (student code is the same for plain and vg)
CODE_VARIANT = {"plain": "plain", "vg": "plain", "tsan": "tsan", DEBUG: DEBUG}
VG_TIMEOUT_SCALE = 10

COMMON_SOURCES = ["waker.c", "wake_obj.c", "driver.c", "coop.c", "lab_todo.c"]
TESTING_SOURCES = ["harness.c", "wakers.c", "measure.c", "alloc_count.c", "futures.c", "virtual_clock.c", "still_clock.c", "store_buffer.c", "explore.c", "wake_probe.c"]

ERROR = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:(?P<col>\d+):)? (?:fatal )?error: (?P<msg>.*)$", re.M)
UNDEFINED = re.compile(r"undefined reference to `([^']+)'")


# Limits on the compiler and linker: the source is the student's, and
# `#include "/dev/zero"` took cc1 to 3 GiB in 3 s before the gate refused it.
# The whole process group (the driver, cc1, as, collect2, ld) is killed on a
# timeout, not the driver alone.
COMPILE_LIMITS = {"RLIMIT_AS": 4 << 30, "RLIMIT_CPU": 240, "RLIMIT_FSIZE": 512 << 20, "RLIMIT_CORE": 0}
COMPILE_TIMEOUT = 300
COMPILE_MEMORY = 4 << 30    # the jailed compiler's memory cgroup (as RLIMIT_AS)


def _compile_limits():
    import resource
    for name, value in COMPILE_LIMITS.items():
        which = getattr(resource, name)
        hard = resource.getrlimit(which)[1]
        resource.setrlimit(which, (value if hard == resource.RLIM_INFINITY else min(value, hard), hard))


def run_limited(cmd, timeout=COMPILE_TIMEOUT, output=None, jailed=False, sees=(), also=()):
    """cmd under COMPILE_LIMITS in a session of its own: a CompletedProcess,
    or one whose stderr says it was stopped. jailed: the input is the
    student's, so also in a jail (sandbox.py: a user id of its own, its own
    network, pids, memory and CPU cgroups, a private directory with a disk
    quota), writing `output` (the path after -o in cmd) and its temporary
    files there first; the grader moves the output into place, and the
    files named in `also` made beside it (the -save-temps files). Where the
    machine allows, the jail is a root of its own that holds /usr and the
    folders in `sees` (read-only) and nothing else: whatever the source
    includes or the assembler pulls in, it can only be one of those files."""
    box = sandbox.shared()
    # a user id of its own only inside a root of its own: on the machine's
    # own files it could not read a tree in a folder only root may enter
    # (a pytest tmp folder, /root), and the gate has refused every include
    # that reaches outside the stage, common/ and the system headers
    own = bool(box.minimal_root and box.pidns)
    jail = (box.jail(memory=COMPILE_MEMORY, private=False, own_user=own, binds=[(d, False) for d in _bindable(sees)])
            if jailed else None)
    cwd, env = None, None
    try:
        if jail is not None and jail.home is not None:
            out_dir = jail.home / "out"
            out_dir.mkdir()
            if jail.uid >= 0:
                os.chown(out_dir, jail.uid, jail.uid)
            if output is not None:
                cmd = [str(out_dir / pathlib.Path(output).name) if c == str(output) else c for c in cmd]
            cwd = out_dir
            env = {"PATH": "/usr/bin:/bin", "TMPDIR": str(out_dir), "LC_ALL": "C"}   # its temporary files too
            jail.cwd = str(out_dir)

        def child():
            _compile_limits()
            if jail is not None:
                jail.preexec()
        run = jail.command(cmd) if jail is not None else cmd   # preexec and command go together
        proc = subprocess.Popen(run, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env,
                                start_new_session=True, preexec_fn=child)
        try:
            out, err = proc.communicate(timeout=timeout)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            err += f"\nerror: the compiler did not finish within {timeout} s and was stopped\n"
            code = -9
        if code == 0 and output is not None and cwd is not None:
            made = cwd / pathlib.Path(output).name
            if made.is_symlink() or not made.is_file():
                return subprocess.CompletedProcess(cmd, 1, out, err + "\nerror: the compiler left no output file\n")
            shutil.copyfile(made, output)
            if os.access(made, os.X_OK):
                os.chmod(output, 0o755)
            for suffix, dest in also:
                temp = made.with_suffix(suffix)
                if temp.is_symlink() or not temp.is_file():
                    return subprocess.CompletedProcess(cmd, 1, out, err + f"\nerror: the compiler left no {suffix}\n")
                shutil.copyfile(temp, dest)
        return subprocess.CompletedProcess(cmd, code, out, err)
    finally:
        if jail is not None:
            jail.close()


def _bindable(dirs):
    """The folders a jailed compiler is shown: each once, none below
    another one shown already (a bind of the outer one holds it)."""
    out = []
    for d in sorted({os.path.realpath(d) for d in dirs}):
        if os.path.isdir(d) and not any(d.startswith(o + os.sep) for o in out):
            out.append(d)
    return out


class BuildError(Exception):
    """The code does not compile or link: `first` is the line to show."""

    def __init__(self, first, log, kind="compile"):
        super().__init__(first)
        self.first = first
        self.log = log
        self.kind = kind


@dataclasses.dataclass
class Compiled:
    obj: pathlib.Path
    warnings: str   # the compiler's output, when it said anything


JOBS = max(1, min(4, os.cpu_count() or 1))


def each(fn, items):
    """[fn(x) for x in items] on up to JOBS threads, in order; the first
    error in that order is raised, as when one ran after another."""
    items = list(items)
    if len(items) < 2 or JOBS == 1:
        return [fn(x) for x in items]
    with concurrent.futures.ThreadPoolExecutor(min(JOBS, len(items))) as pool:
        futures = [pool.submit(fn, x) for x in items]
    return [f.result() for f in futures]


@contextlib.contextmanager
def _file_lock(path):
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _digest(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def _listing(dirs):
    """The names of every file under each folder, by the folder's place
    in the list: what `__has_include` could find (names, not contents; the
    contents that matter are the ones a compile read)."""
    parts = []
    for i, d in enumerate(dirs):
        for top, subdirs, files in os.walk(d):
            subdirs.sort()
            rel = os.path.relpath(top, d)
            parts += [f"{i}/{rel}/{f}" for f in sorted(files)]
    return _digest(*parts)


def _where(path, dirs):
    """(the folder's place in dirs, the path below it), the innermost folder
    first; (-1, path) for a file outside them (the system's headers)."""
    path = os.path.normpath(path)
    best = (-1, path, -1)
    for i, d in enumerate(dirs):
        for base in {os.path.normpath(str(d)), os.path.realpath(d)}:
            if path.startswith(base + os.sep) and len(base) > best[2]:
                best = (i, os.path.relpath(path, base), len(base))
    return best[:2]


def _path(dep, dirs):
    i, rel = dep
    return pathlib.Path(rel) if i < 0 else pathlib.Path(dirs[i]) / rel


def _read_deps(dfile, dirs):
    """The files gcc -MD says a compile read, as _where places them."""
    text = dfile.read_text().replace("\\\n", " ")
    words = re.findall(r"(?:\\.|[^\s\\])+", text.split(":", 1)[1] if ":" in text else "")
    seen = []
    for w in words:
        dep = _where(re.sub(r"\\(.)", r"\1", w).replace("$$", "$"), dirs)
        if dep not in seen:
            seen.append(dep)
    return seen


def _deps_key(manifest, deps, dirs):
    """An object's key: its manifest and the contents of the files it
    read (the system's headers under /usr by name: they change with the
    machine, not the tree); None when one is gone."""
    parts = [manifest.name]
    for dep in deps:
        parts.append(f"{dep[0]}/{dep[1]}")
        if dep[0] >= 0 or not dep[1].startswith("/usr/"):
            try:
                parts.append(_path(dep, dirs).read_bytes())
            except OSError:
                return None
    return _digest(*parts)


def _compiled_or_raise(proc, tmp, also):
    """The compiler's output; BuildError with its first error (and the
    temporary files removed) when it failed."""
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        for _, t in also:
            t.unlink(missing_ok=True)
        m = ERROR.search(out)
        first = (f"{m.group('file')}:{m.group('line')}: {m.group('msg')}" if m
                 else (out.strip().splitlines() or ["the compiler failed"])[0])
        raise BuildError(first, out)
    return out


class Builder:
    def __init__(self, root, build_dir, cc="gcc"):
        """cc: the C compiler (CC, arguments.Environment)."""
        self.root = pathlib.Path(root)
        self.cc = cc
        self.common = self.root / "common"
        self.testing = self.common / "testing"
        self.tracing = self.common / "tracing"   # trace.h, which driver.h and coop.h include
        self.obj_dir = pathlib.Path(build_dir) / "obj"
        self.obj_dir.mkdir(parents=True, exist_ok=True)
        self._locks = {}
        self._guard = threading.Lock()

    # -- single objects ---------------------------------------------------

    def _lock(self, key):
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def include_flags(self, variant, stage_dirs, student=False):
        """The include path: common/, the stages, and for the grader's own
        code its test support (the stand-in's <criterion/criterion.h> off
        Criterion's lanes). A student's file gets the same path in every
        variant, with no test support on it: no header it can test for
        (__has_include) tells one lane from another."""
        flags = []
        if variant != "plain" and not student:
            flags.append(f"-I{self.testing / 'standin'}")  # <criterion/criterion.h> is the stand-in's
        for d in [self.common, self.tracing, *([] if student else [self.testing]), *stage_dirs]:
            flags += ["-iquote", str(d)]
        return flags

    def _files_digest(self, dirs, pattern):
        parts = []
        for d in dirs:
            d = pathlib.Path(d)
            if d.is_dir():
                for h in sorted(d.glob(pattern)):
                    if h.is_file():
                        parts += [h.name, h.read_bytes()]  # names and contents, not paths
        return _digest(*parts)

    def compile(self, source, variant, stage_dirs, werror=False, extra=(), jailed=False):
        """One object file; raises BuildError with the first error. jailed:
        the source is the student's (run_limited): compiled in a root that
        holds only the stage folders and common/, with the preprocessed text
        and the assembly kept beside the object (Compiled.obj's .i and .s)
        for the gate, which checks what the compiler did, not the text."""
        source = pathlib.Path(source)
        if not source.is_file():
            raise BuildError(f"{source.name} is missing", "", kind="missing")
        flags = BASE + WARN + OPT[variant] + (["-Werror"] if werror else []) + list(extra)
        incs = self.include_flags(variant, stage_dirs, student=jailed)
        if jailed:
            # a student's file may include any file of its stage folders
            # (impl.c as well as a header), and nothing else but common/ and
            # the system's
            return self._compile_student(source, variant, flags, incs, [self.common, self.tracing, *stage_dirs])
        # the grader's own sources include headers only: two trees with the
        # same headers share the grader's test objects
        visible = [self.common, self.tracing, self.testing, self.testing / "standin" / "criterion"] + list(stage_dirs)
        key = _digest(source.read_bytes(), " ".join(flags), self._files_digest(visible, "*.h"), variant, "")
        obj = self.obj_dir / f"{source.stem}-{key}.o"
        log = obj.with_suffix(".log")
        if obj.exists():
            return Compiled(obj, log.read_text() if log.exists() else "")
        with self._lock(str(obj)), _file_lock(obj.with_suffix(".lock")):
            if obj.exists():
                return Compiled(obj, log.read_text() if log.exists() else "")
            tmp = obj.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}.o")
            out = _compiled_or_raise(run_limited([self.cc, *flags, *incs, "-c", str(source), "-o", str(tmp)]), tmp, [])
            log.write_text(out)
            os.replace(tmp, obj)
            return Compiled(obj, out)

    # -- a student's file: cached by what its compile read ------------------

    def _compile_student(self, source, variant, flags, incs, visible):
        """compile(jailed=True): in the jail, with the preprocessed text and
        the assembly kept beside the object (its .i and .s) for the gate.
        Looked up through the manifest of what the last compile of this
        source, with these flags and these visible file names, read."""
        text = source.read_bytes()
        listing = _listing(visible)
        manifest = self.obj_dir / f"{source.stem}-{_digest(text, ' '.join(flags), variant, 'student', listing)}.deps"
        found = self._cached(source, manifest, visible)
        if found:
            return found
        with self._lock(str(manifest)), _file_lock(manifest.with_suffix(".lock")):
            found = self._cached(source, manifest, visible)
            if found:
                return found
            tmp = manifest.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}.o")
            also = [(s, tmp.with_suffix(s)) for s in (".i", ".s", ".d")]
            proc = run_limited([self.cc, *flags, "-save-temps=obj", "-MD", *incs, "-c", str(source), "-o", str(tmp)],
                               output=tmp, jailed=True, sees=visible, also=also)
            out = _compiled_or_raise(proc, tmp, also)
            deps = _read_deps(also[2][1], visible)
            also[2][1].unlink(missing_ok=True)
            key = _deps_key(manifest, deps, visible)
            # the folders are the grading's own copies (intake.py), so no
            # file changes while it compiles; a source that did anyway
            # keeps its object under a name no lookup makes
            steady = key is not None and source.read_bytes() == text
            obj = self.obj_dir / (f"{source.stem}-{key}.o" if steady else tmp.with_suffix(".unsteady.o").name)
            obj.with_suffix(".log").write_text(out)
            for suffix, t in also[:2]:
                os.replace(t, obj.with_suffix(suffix))
            os.replace(tmp, obj)
            if steady:
                part = manifest.with_suffix(f".part{os.getpid()}.{threading.get_ident()}")
                part.write_text("\n".join(f"{i}\t{rel}" for i, rel in deps) + "\n")
                os.replace(part, manifest)
            return Compiled(obj, out)

    def _cached(self, source, manifest, visible):
        """The object the manifest leads to with today's contents, if it
        was made; None otherwise."""
        try:
            deps = [tuple(line.split("\t", 1)) for line in manifest.read_text().splitlines() if line]
        except OSError:
            return None
        key = _deps_key(manifest, [(int(i), rel) for i, rel in deps], visible)
        obj = self.obj_dir / f"{source.stem}-{key}.o"
        if key is None or not obj.exists():
            return None
        log = obj.with_suffix(".log")
        return Compiled(obj, log.read_text() if log.exists() else "")

    def preprocess(self, source, stage_dirs, flags=()):
        """A file after the preprocessor, in the jail, as a student's file is
        compiled (the gate compares a stage's handed-out files in two lanes
        with this); "" when it does not preprocess."""
        visible = [self.common, self.tracing, *stage_dirs, pathlib.Path(source).parent]
        proc = run_limited([self.cc, *BASE, *flags, *self.include_flags("plain", stage_dirs, student=True), "-E",
                            str(source)], jailed=True, sees=visible)
        return proc.stdout if proc.returncode == 0 else ""

    def api_objects(self):
        """common/'s own objects (not its test support): the protocol every
        stage may call."""
        return [self.compile(self.common / s, "plain", [], werror=True).obj for s in COMMON_SOURCES]

    # -- groups of objects ------------------------------------------------

    def common_objects(self, variant):
        """common/ and its test support, plus the stand-in runner where the
        lane uses it."""
        code = CODE_VARIANT[variant]
        srcs = [self.common / s for s in COMMON_SOURCES]
        srcs += [self.testing / s for s in TESTING_SOURCES if (self.testing / s).exists()]
        objs = [c.obj for c in each(lambda s: self.compile(s, code, [], werror=True), srcs)]
        if variant != "plain":
            objs.append(self.compile(self.testing / "standin" / "runner.c", code, [], werror=True).obj)
        return objs

    def test_objects(self, tests_dir, variant, stage_dirs, extra_dirs=()):
        """The grader's tests for a stage, plus any hidden tests (extra_dirs);
        the test directories are on the quote path, so hidden tests may use
        the public tests' shared header."""
        extra = [f"-DLAB_TIMEOUT_SCALE={VG_TIMEOUT_SCALE}"] if variant == "vg" else []
        extra.append("-ffunction-sections")   # each function a section of its own, for layout.py
        srcs = sorted(pathlib.Path(tests_dir).glob("*.c"))
        for d in extra_dirs:
            srcs += sorted(pathlib.Path(d).glob("*.c"))
        if extra_dirs:
            stage_dirs = [*stage_dirs, pathlib.Path(tests_dir)]
        if not srcs:
            raise BuildError(f"no tests in {tests_dir}", "", kind="grader")
        return [c.obj for c in each(lambda s: self.compile(s, variant, stage_dirs, werror=True, extra=extra), srcs)]

    def link(self, objects, output, variant, system_libs=(), shuffle=()):
        """system_libs: names from rubric.LIBS ("uring": -luring), the stage's
        and those of the stages it uses (Assembler.system_libs). shuffle: the
        objects among `objects` (the tests) whose functions are laid out in
        an order and with gaps drawn for this link alone (layout.py)."""
        output = pathlib.Path(output)
        output.parent.mkdir(parents=True, exist_ok=True)
        libs = [f"-l{name}" for name in system_libs] + (["-lcriterion"] if variant == "plain" else [])
        flags = BASE + OPT[variant] + LINK.get(variant, []) + BIND + ["-rdynamic", WRAP]
        sees = [pathlib.Path(o).parent for o in objects]
        if shuffle:
            try:
                drawn = layout.draw(shuffle, output.parent / f".layout-{output.name}.ld")
            except (layout.LayoutError, OSError) as e:
                raise BuildError(f"the grader could not lay out the tests: {e}", "", kind="grader")
            flags += [f"-Wl,-T,{drawn}"]
            sees.append(drawn.parent)
        proc = run_limited([self.cc, *flags, *map(str, objects), "-o", str(output), *libs], output=output, jailed=True,
                           sees=sees)
        if proc.returncode != 0:
            out = proc.stdout + proc.stderr
            m = UNDEFINED.search(out)
            first = (f"did not link: `{m.group(1)}` is used but never defined" if m
                     else (out.strip().splitlines() or ["the linker failed"])[-1])
            raise BuildError(first, out, kind="link")
        return output


def clean(build_dir):
    shutil.rmtree(build_dir, ignore_errors=True)
