"""Did the test's body run its checks? The transcript of a passed test
against the reference's.

Every assertion of a test first records the code address it stands at
(lab_site in common/testing/harness.c), and the completion record lists
them (SITES lines before END). Code under test shares the test's process,
so it could write END itself and skip the body; the nonce makes that take a
memory search, and this check makes it take more: the record must also
name, by address in this very binary, the checks this test's body reaches,
which only a run of the body (or a disassembly of the hidden test code,
test by test) can tell.

The grader turns each offset into file:line with addr2line on its own copy
of the binary (the one the test ran has no symbol table and no line table)
and compares with the stage's table, grader/tests/NN-name/sites.json,
written by `python3 grader/authoring/sites.py` from runs of the reference
and checked by make test:

  required  the checks reached in every reference run, in every lane
  allowed   those, and the checks reached in some reference run (or in an
            honest tree's, with sites.py --honest)

A passed test fails here when its record names fewer than all but
MISSING_SLACK of the required checks, or more than EXTRA_SLACK checks
outside the allowed ones: a transcript made by listing every check in the
binary names other tests' checks; one made of the checks inside the test's
own function misses those of the helpers it calls. The slack is for honest code that takes
a path the reference never took (a future that is ready one poll earlier
skips a check inside a loop); the lab's own choice, measured in
docs/instructors.md (the threat model).

A test the table does not know (an instructor's hidden test, until its
sites are written) is not checked.
"""
import dataclasses
import json
import pathlib
import subprocess
import threading

from . import records
from .outcomes import Verdict

TABLE = "sites.json"
MISSING_SLACK = 1   # required checks an honest run may skip
EXTRA_SLACK = 3     # checks outside the allowed ones an honest run may reach
MOST = 2048         # checks one record can name: the harness's set holds no more (SITE_SLOTS)
BATCH = 500         # addresses per addr2line call


@dataclasses.dataclass(frozen=True)
class Expected:
    required: frozenset
    allowed: frozenset


def load(*dirs):
    """{suite::test: Expected} from the sites.json of each directory that
    has one (the stage's tests, an instructor's hidden tests)."""
    table = {}
    for d in dirs:
        f = pathlib.Path(d) / TABLE if d else None
        if f is None or not f.is_file():
            continue
        data = json.loads(f.read_text())
        for test, e in data.get("tests", {}).items():
            table[test] = Expected(frozenset(e["required"]), frozenset(e["required"]) | frozenset(e.get("also", [])))
    return table


# ---- offsets to file:line ----------------------------------------------------

_cache = {}          # (binary, mtime_ns, size) -> {offset: "path:line" or None}; ("lines", ...) -> bool
_cache_lock = threading.Lock()


def _key(binary):
    st = pathlib.Path(binary).stat()
    return (str(binary), st.st_mtime_ns, st.st_size)


def _start(binary):
    """The link address of __executable_start (0 in a PIE)."""
    out = subprocess.run(["nm", "--defined-only", str(binary)], capture_output=True, text=True, timeout=60).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[2] == "__executable_start":
            return int(f[0], 16)
    return 0


def has_lines(binary):
    """Does the binary have a line table? The grader's own builds do (-g);
    a handout's shipped reference binaries do not (a timed-out test's rerun
    on the reference is not checked: it is the grader's code)."""
    try:
        key = _key(binary)
    except OSError:
        return False
    with _cache_lock:
        if ("lines",) + key in _cache:
            return _cache[("lines",) + key]
    out = subprocess.run(["readelf", "-S", "-W", str(binary)], capture_output=True, text=True, timeout=60).stdout
    found = ".debug_line" in out
    with _cache_lock:
        _cache[("lines",) + key] = found
    return found


def locate(binary, offsets):
    """{offset: "grader/tests/01-signal/poll_test.c:41"} for the offsets (from
    the executable's first byte) of the calls to lab_site, each named by
    the line of the innermost inlined frame: the assertion's own line."""
    key = _key(binary)
    with _cache_lock:
        known = _cache.setdefault(key, {})
        todo = sorted(o for o in offsets if o not in known)
    if todo:
        base = _start(binary)
        found = {}
        for k in range(0, len(todo), BATCH):
            # a return address: the call is the byte before it
            out = subprocess.run(["addr2line", "-e", str(binary), "-a"] + [hex(base + o - 1) for o in todo[k:k + BATCH]],
                                 capture_output=True, text=True, timeout=120).stdout.splitlines()
            for i in range(0, len(out) - 1, 2):
                where = out[i + 1].split(" (discriminator")[0]
                found[int(out[i], 16) - base + 1] = None if where.startswith("??") else records.short_path(where)
        with _cache_lock:
            for o in todo:
                known[o] = found.get(o)
    return {o: known[o] for o in offsets}


def reached(run, binary):
    """The checks a run's record names, as file:line (an offset with no line
    is kept as its hexadecimal: it is outside every allowed set)."""
    located = locate(binary, run.sites)
    return {loc or f"0x{o:x}" for o, loc in located.items()}


# ---- the check -------------------------------------------------------------------


def mismatch(test, got, expected):
    """None when the transcript `got` fits `expected`, else the message."""
    missing = expected.required - got
    extra = got - expected.allowed
    if len(missing) <= MISSING_SLACK and len(extra) <= EXTRA_SLACK:
        return None
    n = len(expected.required)
    said = [f"it names {n - len(missing)} of the {n} checks every run of the reference reaches"]
    if len(extra) > EXTRA_SLACK:
        said.append(f"and {len(extra)} that no correct run reaches")
    return ("the test's completion record does not match its body: " + " ".join(said) +
            "; the record was written without the body running its checks (by code under test?)")


def check(outs, recs, binary, table, dump=None):
    """Fails, in place, every passed outcome whose record's checks do not fit
    the table. dump: a path to write {test: [file:line, ...]} of the passed
    tests to (the table's generator reads those)."""
    seen = {}
    try:
        if not has_lines(binary):
            return outs
    except (OSError, subprocess.SubprocessError):
        return outs   # the grader's own tools failed: nothing to compare with (a grading without binutils)
    for test, o in outs.items():
        if o.verdict != Verdict.PASS:
            continue
        runs = recs.get(test, [])
        if not runs:
            continue
        run = runs[-1]
        e = table.get(test)
        if len(run.sites) > MOST or run.sites_over:
            # no test of the lab has a tenth of that many checks: a record
            # that says so (or says the set filled) is not the harness's
            why = (f"the test's completion record names more checks than the harness can keep "
                   f"({len(run.sites)}{' and more' if run.sites_over else ''}): it was not written by the "
                   "harness (by code under test?)")
        else:
            try:
                got = reached(run, binary)
            except (OSError, subprocess.SubprocessError):
                continue   # addr2line failed on the grader's own copy: the record stands as it is
            seen[test] = sorted(got)
            if e is None:
                continue
            why = mismatch(test, got, e)
        if why:
            o.verdict = Verdict.EXITED_EARLY
            o.message = why
            o.details.append("for the grader's authors: a test edited since its stage's sites.json was written "
                             "fails the same way; python3 grader/authoring/sites.py --stage N writes it again")
    if dump is not None and seen:
        pathlib.Path(dump).write_text(json.dumps(seen, indent=0, sort_keys=True))
    return outs
