"""The checkers that read a lane's logs (Valgrind's per-process logs,
ThreadSanitizer's), and the step that turns a test's outcome into "memory
error" or "data race" when its checker reported problems for one of the
test's processes.
"""
import pathlib
import re

from . import records
from .outcomes import Verdict

VG_ERROR_START = re.compile(r"^==\d+== (Invalid (read|write|free)|Mismatched free|Conditional jump|Use of uninitialised|Syscall param|Source and destination overlap|Argument 'size'|Process terminating|\d[\d,]* (\(\d[\d,]* direct, \d[\d,]* indirect\) )?bytes in [\d,]+ blocks are (definitely|indirectly) lost)")


def valgrind_errors(log_text):
    """The error blocks of one Valgrind log (each a list of lines)."""
    blocks, cur = [], None
    for line in log_text.splitlines():
        if VG_ERROR_START.match(line):
            cur = [line]
            blocks.append(cur)
        elif cur is not None:
            if line.rstrip() in ("", ) or re.match(r"^==\d+==\s*$", line):
                cur = None
            else:
                cur.append(line)
    return blocks


def valgrind_by_pid(log_dir):
    out = {}
    for f in pathlib.Path(log_dir).glob("*.log"):
        blocks = valgrind_errors(f.read_text(errors="replace"))
        if blocks:
            out[f.stem] = blocks
    return out


def tsan_by_pid(log_dir):
    out = {}
    for f in pathlib.Path(log_dir).glob("tsan.*"):
        text = f.read_text(errors="replace")
        reports = [b for b in text.split("==================") if "ThreadSanitizer" in b]
        if reports:
            out[f.name.rsplit(".", 1)[-1]] = [r.strip().splitlines() for r in reports]
    return out


# a frame of a sanitizer's report: "#3 func file:line (module+0x1f2e)", its
# function and place "<null>" where the module has no symbols or lines
FRAME_IN = re.compile(r"^(?P<lead>\s*#\d+ )(?P<what>.*?) \((?P<module>[^()\s]+)\+0x(?P<off>[0-9a-f]+)\)\s*$")
# its last line: "SUMMARY: ThreadSanitizer: data race (module+0x1f2e) in func"
SUMMARY_IN = re.compile(r"^(?P<lead>SUMMARY: .*?)\((?P<module>[^()\s]+)\+0x(?P<off>[0-9a-f]+)\)(?P<tail> in .*)$")


def symbolize(report, binary):
    """A ThreadSanitizer report from a run of the jail's copy of `binary`
    (which has neither symbols nor a line table: transcript.py), its frames
    in that binary named from the grader's own copy."""
    name = pathlib.Path(binary).name
    hits = []
    for i, line in enumerate(report):
        m = FRAME_IN.match(line) or SUMMARY_IN.match(line.strip())
        if m and pathlib.Path(m.group("module")).name == name:
            hits.append((i, m, int(m.group("off"), 16)))
    if not hits:
        return report
    out = list(report)
    for (i, m, off), loc in zip(hits, records.Symbolizer(binary).locate([o for _, _, o in hits])):
        if not loc:
            continue
        func, where = loc[0]   # the innermost of the inlined frames: where the access is
        where = where.split(" (discriminator")[0]
        known = re.match(r"[^:?]+:\d+", where)   # none for the TSan runtime's own code (linked in, build.LINK)
        if m.re is SUMMARY_IN:
            out[i] = f"{m.group('lead')}{where if known else f'(inside {func})'}{m.group('tail')}"
        else:
            out[i] = f"{m.group('lead')}{func}{f' {where}' if known else ''} ({m.group('module')}+0x{off:x})"
    return out


# frames of the grader's own plumbing, never the student's business
PLUMBING = ("__wrap_", "lab_standin_fn_", "run_one (", "run_one common/", "main (runner.c", "main common/testing/standin",
            "criterion_internal_test_main", "(below main)")


def shorten_report(lines, limit=24):
    keep = []
    for line in lines:
        line = records.short_path(re.sub(r"^==\d+== ?", "", line))
        line = re.sub(r" \((?:tests-\w+|libtsan\.so[.\d]*)\+0x[0-9a-f]+\)$", "", line)
        if any(p in line for p in PLUMBING):
            continue
        keep.append("    " + line)
        if len(keep) >= limit:
            keep.append("    ...")
            break
    return keep


def memory_leak(report):
    """A Valgrind block about memory never freed, not about a bad access."""
    return bool(report) and re.search(r"bytes in [\d,]+ blocks are (definitely|indirectly) lost", report[0]) is not None


def thread_leak(report):
    """A ThreadSanitizer report that a thread was never joined: what a test
    that gave up on a stalled thread leaves behind."""
    return any("ThreadSanitizer: thread leak" in line for line in report[:3])


def attach(outs, result, by_pid, overrides, verdict, message, shown, limit):
    """Turns a test's outcome into `verdict` when a checker reported problems
    for one of the test's processes (their pids are in the test's records)
    and the outcome is one of `overrides`. A test that failed by itself and
    whose only reports are thread leaks, or blocks never freed, keeps its
    own failure: the thread it left, the memory a test that stopped
    part-way never got to free, are that failure's doing, not a second
    problem (Valgrind's "definitely lost" used to stand in the report where
    the failed check should have)."""
    for t, o in outs.items():
        pids = [r.pid for r in result.records.get(t, [])]
        found = [rep for p in pids for rep in by_pid.get(p, [])]
        if found and o.verdict != Verdict.PASS and all(thread_leak(rep) for rep in found):
            o.details.append("(ThreadSanitizer also saw the test leave a thread behind when it gave up: the same "
                             "failure, not a data race)")
            continue
        if found and o.verdict != Verdict.PASS and all(memory_leak(rep) for rep in found):
            o.details.append(f"(Valgrind also found {len(found)} leak report(s): memory the test never got to free "
                             "once it stopped; the failure above comes first)")
            continue
        if found and o.verdict in overrides:
            o.verdict = verdict
            o.message = message.format(n=len(found))
            o.details = []
            for rep in found[:shown]:
                o.details += shorten_report(rep, limit=limit)
