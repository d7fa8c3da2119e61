"""Compiling a stage: the student's files, the earlier stages it uses, common/
and the grader's own tests, into one test binary per lane variant.

  plain  Criterion, -O2            (plain, race and perf lanes)
  vg     Criterion, timeouts x10   (Valgrind lane)
  tsan   stand-in runner, -fsanitize=thread -O1  (TSan lane)

Objects are cached by the hash of their source, flags and the headers they
can see, so grading many trees (a class, the mutants) compiles common/ and the
tests once.
"""
import dataclasses
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import threading

CC = os.environ.get("CC", "gcc")
BASE = ["-std=c11", "-g", "-pthread"]
WARN = ["-Wall", "-Wextra"]
OPT = {"plain": ["-O2"], "vg": ["-O2"], "tsan": ["-O1", "-fsanitize=thread"]}
WRAP = "-Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free,--wrap=aligned_alloc,--wrap=posix_memalign"
VARIANTS = ("plain", "vg", "tsan")
# the variant whose objects a lane variant links (student code is the same for plain and vg)
CODE_VARIANT = {"plain": "plain", "vg": "plain", "tsan": "tsan"}
VG_TIMEOUT_SCALE = 10

COMMON_SOURCES = ["waker.c", "wake_obj.c", "driver.c", "coop.c", "lab_todo.c"]
TESTING_SOURCES = ["harness.c", "wakers.c", "measure.c", "alloc_count.c", "futures.c"]

ERROR = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:(?P<col>\d+):)? (?:fatal )?error: (?P<msg>.*)$", re.M)
UNDEFINED = re.compile(r"undefined reference to `([^']+)'")


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


def _digest(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


class Builder:
    def __init__(self, root, build_dir):
        self.root = pathlib.Path(root)
        self.common = self.root / "common"
        self.testing = self.common / "testing"
        self.obj_dir = pathlib.Path(build_dir) / "obj"
        self.obj_dir.mkdir(parents=True, exist_ok=True)
        self._locks = {}
        self._guard = threading.Lock()

    # -- single objects ---------------------------------------------------

    def _lock(self, key):
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def include_flags(self, variant, stage_dirs):
        flags = []
        if variant == "tsan":
            flags.append(f"-I{self.testing / 'standin'}")
        flags += [f"-I{self.common}", f"-I{self.testing}"]
        flags += [f"-I{d}" for d in stage_dirs]
        return flags

    def _headers_digest(self, dirs):
        parts = []
        for d in dirs:
            d = pathlib.Path(d)
            if d.is_dir():
                for h in sorted(d.glob("*.h")):
                    parts += [str(h), h.read_bytes()]
        return _digest(*parts)

    def compile(self, source, variant, stage_dirs, werror=False, extra=()):
        """One object file; raises BuildError with the first error."""
        source = pathlib.Path(source)
        if not source.is_file():
            raise BuildError(f"{source.name} is missing", "", kind="missing")
        flags = BASE + WARN + OPT[variant] + (["-Werror"] if werror else []) + list(extra)
        incs = self.include_flags(variant, stage_dirs)
        visible = [self.common, self.testing, self.testing / "standin" / "criterion"] + list(stage_dirs)
        key = _digest(source.read_bytes(), " ".join(flags), self._headers_digest(visible),
                      " ".join(str(d) for d in stage_dirs), variant)
        obj = self.obj_dir / f"{source.stem}-{key}.o"
        log = obj.with_suffix(".log")
        with self._lock(str(obj)):
            if obj.exists():
                return Compiled(obj, log.read_text() if log.exists() else "")
            tmp = obj.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}.o")
            proc = subprocess.run([CC, *flags, *incs, "-c", str(source), "-o", str(tmp)],
                                  capture_output=True, text=True, timeout=300)
            out = proc.stdout + proc.stderr
            if proc.returncode != 0:
                tmp.unlink(missing_ok=True)
                m = ERROR.search(out)
                first = (f"{m.group('file')}:{m.group('line')}: {m.group('msg')}" if m
                         else (out.strip().splitlines() or ["the compiler failed"])[0])
                raise BuildError(first, out)
            log.write_text(out)
            os.replace(tmp, obj)
            return Compiled(obj, out)

    # -- groups of objects ------------------------------------------------

    def common_objects(self, variant):
        srcs = [self.common / s for s in COMMON_SOURCES]
        srcs += [self.testing / s for s in TESTING_SOURCES if (self.testing / s).exists()]
        if variant == "tsan":
            srcs.append(self.testing / "standin" / "runner.c")
        return [self.compile(s, variant, [], werror=True).obj for s in srcs]

    def test_objects(self, tests_dir, variant, stage_dirs):
        extra = [f"-DLAB_TIMEOUT_SCALE={VG_TIMEOUT_SCALE}"] if variant == "vg" else []
        code = CODE_VARIANT[variant]
        srcs = sorted(pathlib.Path(tests_dir).glob("*.c"))
        if not srcs:
            raise BuildError(f"no tests in {tests_dir}", "", kind="grader")
        return [self.compile(s, code if variant != "vg" else "plain", stage_dirs, werror=True, extra=extra).obj
                for s in srcs]

    def link(self, objects, output, variant):
        output = pathlib.Path(output)
        output.parent.mkdir(parents=True, exist_ok=True)
        libs = ["-lcriterion"] if variant != "tsan" else []
        flags = BASE + OPT[variant] + ["-rdynamic", WRAP]
        proc = subprocess.run([CC, *flags, *map(str, objects), "-o", str(output), *libs],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            out = proc.stdout + proc.stderr
            m = UNDEFINED.search(out)
            first = (f"did not link: `{m.group(1)}` is used but never defined" if m
                     else (out.strip().splitlines() or ["the linker failed"])[-1])
            raise BuildError(first, out, kind="link")
        return output


def clean(build_dir):
    shutil.rmtree(build_dir, ignore_errors=True)
