"""The records a test leaves in $LAB_RUN_DIR (common/testing/harness.c):

    BEGIN pid suite::test          END pid suite::test nonce
    SEED pid n                     NOTE pid text
    UNJUDGED pid nonce text        the test could not measure on this machine
    SITES pid off off ...          the checks the body reached, before END:
                                   hex offsets from the executable's start
                                   (SITES pid over n: n checks found no room)
    TODO pid file:line func() hint
    FAIL pid                       a check failed (written right after its
                                   FAIL on the grader's channel, which is
                                   the evidence that counts: channel.py)
    CRASH pid SIGNAME              followed by a BT-BEGIN ... BT-END block
    HANG pid text                  THREAD pid tid name state, each followed by
                                   a BT block; HANG-END pid

One file per test (suite.test.log); a test that ran several times (race lane)
has several runs in it, told apart by pid.
"""
import dataclasses
import pathlib
import re
import subprocess


@dataclasses.dataclass
class Thread:
    tid: str
    name: str
    state: str
    frames: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class ProcessRecord:
    """What one test process wrote in its record file (one run of one test)."""
    pid: str
    test: str = ""
    ended: bool = False
    nonce: str = ""
    sites: set = dataclasses.field(default_factory=set)   # offsets of the checks reached (SITES)
    sites_over: int = 0
    seed: str = ""
    notes: list = dataclasses.field(default_factory=list)
    unjudged: str = ""        # the text of an UNJUDGED record
    unjudged_nonce: str = ""  # and the nonce it carried
    todo: str = ""
    check_failed: bool = False  # a FAIL record: a check of the body failed
    crash: str = ""
    crash_frames: list = dataclasses.field(default_factory=list)
    leak_frames: list = dataclasses.field(default_factory=list)   # where blocks still live were allocated
    leak_counts: list = dataclasses.field(default_factory=list)   # how many blocks, per frame
    hang: str = ""
    threads: list = dataclasses.field(default_factory=list)


LINE_CAP = 2000     # characters of one record line kept: the rest is the student's to fill, not ours to show
TODO_CAP = 240      # characters of a TODO record's hint (code under test can call lab_todo with any text)
FILE_CAP = 4 << 20  # bytes of one record file read
SITES_CAP = 200     # offsets read from one SITES line (the harness writes at most about 60)
SITES_MOST = 4096   # offsets kept of one run (the harness's set holds 2048)
HEX = re.compile(r"[0-9a-f]{1,16}")


def parse(text):
    """All runs in one record file, in order of their BEGIN lines."""
    runs, order = {}, []

    def run(pid):
        if pid not in runs:
            runs[pid] = ProcessRecord(pid=pid)
            order.append(pid)
        return runs[pid]

    bt = None  # the frame list being filled
    for line in text.splitlines():
        if line.startswith("FAIL "):
            # wherever it stands, inside a backtrace block too: code under
            # test can write to the record, and a block it opened before a
            # check failed must not swallow the check's FAIL line
            pid = line[5:].strip()
            if pid.isdigit():
                run(pid).check_failed = True
            continue
        if bt is not None:
            if line.startswith("BT-END"):
                bt = None
            else:
                bt.append(line.strip())
            continue
        parts = line[:LINE_CAP].split(" ", 2)
        if len(parts) < 2:
            continue
        tag, pid, rest = parts[0], parts[1], parts[2] if len(parts) > 2 else ""
        if tag == "BEGIN":
            run(pid).test = rest
        elif tag == "END":
            r = run(pid)
            r.ended = True
            r.nonce = rest.split(" ")[-1] if rest else ""
        elif tag == "SITES":
            r = run(pid)
            words = rest.split()
            if words[:1] == ["over"] and len(words) == 2 and words[1].isdigit():
                r.sites_over += int(words[1])
            elif len(r.sites) <= SITES_MOST:   # past that, transcript.py fails the test whatever follows
                r.sites.update(int(w, 16) for w in words[:SITES_CAP] if HEX.fullmatch(w))
        elif tag == "SEED":
            if rest.isdigit() and len(rest) <= 20:   # a number: it goes into a command the report prints
                run(pid).seed = rest
        elif tag == "NOTE":
            run(pid).notes.append(rest)
        elif tag == "UNJUDGED":
            r = run(pid)
            r.unjudged_nonce, _, r.unjudged = rest.partition(" ")
        elif tag == "TODO":
            r = run(pid)
            r.todo = r.todo or (rest if len(rest) <= TODO_CAP else rest[:TODO_CAP - 1] + "\u2026")
        elif tag == "COUNTS" and rest.startswith("leak"):
            run(pid).leak_counts = [int(c) for c in rest.split()[1:] if c.isdigit()]
        elif tag == "CRASH":
            run(pid).crash = rest
        elif tag == "HANG":
            run(pid).hang = rest
        elif tag == "THREAD":
            f = rest.split(" ")
            run(pid).threads.append(Thread(tid=f[0], name=f[1] if len(f) > 1 else "?",
                                           state=f[2] if len(f) > 2 else "?"))
        elif tag == "BT-BEGIN":
            r = run(pid)
            why = rest.split(" ")[-1]
            if why == "crash":
                bt = r.crash_frames
            elif why == "leak":
                r.leak_frames, r.leak_counts = [], []
                bt = r.leak_frames
            elif r.threads:
                bt = r.threads[-1].frames
            else:
                bt = []
    return [runs[p] for p in order]


def read_dir(run_dir):
    """{ "suite::test": [ProcessRecord, ...] } for every record file in run_dir."""
    out = {}
    d = pathlib.Path(run_dir)
    if not d.is_dir():
        return out
    for f in sorted(d.glob("*.log")):
        with open(f, "rb") as fin:
            text = fin.read(FILE_CAP).decode(errors="replace")
        for r in parse(text):
            if r.test:
                out.setdefault(r.test, []).append(r)
    return out


# ---- backtraces -------------------------------------------------------------

FRAME = re.compile(r"^(?P<module>[^(\[]*)\((?P<sym>[^)+]*)(?:\+(?P<off>0x[0-9a-f]+))?\)\s*\[(?P<addr>0x[0-9a-f]+)\]")
# frames that belong to the harness's own dump machinery
NOISE = ("write_backtrace", "dump_handler", "crash_handler", "__restore_rt", "killpg", "raise")


class Symbolizer:
    """Turns backtrace_symbols lines of the test binary into
    'function at file:line', with addr2line and nm from binutils."""

    def __init__(self, binary):
        self.binary = str(binary)
        self._syms = None

    def symbols(self):
        if self._syms is None:
            self._syms = {}
            try:
                out = subprocess.run(["nm", "--defined-only", self.binary], capture_output=True,
                                     text=True, timeout=30).stdout
                for line in out.splitlines():
                    f = line.split()
                    if len(f) == 3:
                        self._syms[f[2]] = int(f[0], 16)
            except (OSError, subprocess.TimeoutExpired):
                pass
        return self._syms

    def locate(self, offsets):
        if not offsets:
            return []
        try:
            out = subprocess.run(["addr2line", "-e", self.binary, "-f", "-C", "-i", "-a"] +
                                 [hex(o) for o in offsets], capture_output=True, text=True,
                                 timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            return [None] * len(offsets)
        # -a prints the address, then (function, file:line) pairs, inlined ones first
        results, cur = [], None
        lines = out.splitlines()
        i = 0
        while i < len(lines):
            if lines[i].startswith("0x"):
                if cur is not None:
                    results.append(cur)
                cur = []
                i += 1
                continue
            func = lines[i]
            loc = lines[i + 1] if i + 1 < len(lines) else "??:0"
            cur.append((func, loc))
            i += 2
        if cur is not None:
            results.append(cur)
        while len(results) < len(offsets):
            results.append(None)
        return results

    SITE = re.compile(r"\b([A-Za-z_]\w*)\+0x([0-9a-f]+)\b")

    def sites(self, text):
        """Code addresses a test named in its message as "function+0x3e"
        (explore.h's lab_sync_site: where a lock was taken, where a waker was
        woken) put as "function at file:line" when the function is the test
        binary's own."""
        found = [(m.group(0), self.symbols().get(m.group(1)), int(m.group(2), 16))
                 for m in self.SITE.finditer(text or "")]
        found = [(s, base + off) for s, base, off in found if base is not None]
        if not found:
            return text
        for (s, _), loc in zip(found, self.locate([a for _, a in found])):
            if loc:
                func, where = loc[-1]   # the outermost of the inlined frames: the function named
                where = where.split(" (discriminator")[0]
                if not where.startswith("??"):
                    text = text.replace(s, f"{func} at {short_path(where)}", 1)
        return text

    def frames(self, raw_frames, limit=14):
        """Readable frames, innermost first, the harness's own removed."""
        parsed = []
        for raw in raw_frames:
            m = FRAME.match(raw)
            if not m:
                parsed.append((raw, None))
                continue
            module = m.group("module").strip()
            sym, off = m.group("sym"), m.group("off")
            mine = "/" not in module or module.endswith(pathlib.Path(self.binary).name)
            if mine:
                base = self.symbols().get(sym, 0) if sym else 0
                offset = base + int(off, 16) if off else None
                # a return address points after the call: step back one byte
                parsed.append((raw, offset - 1 if offset else None))
            else:
                lib = pathlib.Path(module).name.split(".so")[0]
                parsed.append((f"{sym or '??'} ({lib})", None))
        located = self.locate([o for _, o in parsed if o is not None])
        out, k = [], 0
        for text, off in parsed:
            if off is not None:
                loc = located[k]
                k += 1
                if loc:
                    for func, where in loc:
                        where = where.split(" (discriminator")[0]
                        out.append(f"{func} at {short_path(where)}" if not where.startswith("??") else func)
                    continue
            out.append(text)
        out = [f for f in out if not any(f.startswith(n) for n in NOISE)]
        # consecutive frames inside a library without symbols: one line
        merged = []
        for f in out:
            if f.startswith("?? (") and merged and merged[-1] == f:
                continue
            merged.append(f)
        out = ["(inside " + f[4:] if f.startswith("?? (") else f for f in merged]
        # drop what is below the test body: Criterion's and libc's start-up
        body = next((i for i, f in enumerate(out) if f.startswith("lab_body_")), None)
        if body is not None:
            out = out[:body + 1]
        cut = next((i for i, f in enumerate(out) if f.startswith(("criterion_internal_test_main", "lab_standin_fn_"))), None)
        if cut is not None:
            out = out[:cut]
        return out[:limit]


PATH = re.compile(r"(?:/[^/\s():]+)+?/((?:grader|common|solutions|labs)/|\d\d-[\w-]+/)")


def short_path(text):
    """Absolute paths cut to where they start meaning something:
    /x/y/grader/tests/a.c:12 -> grader/tests/a.c:12, /tmp/t/01-signal/s.c -> 01-signal/s.c"""
    return PATH.sub(r"\1", text)
