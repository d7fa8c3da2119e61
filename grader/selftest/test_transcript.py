"""A completion record must name the checks its body reached (transcript.py):
the tables agree with the tests' sources, and the records a forger can
write (END alone; every check in the binary; every check of the test's own
function) fail, on a real build of the reference."""
import json
import re
import shutil
import subprocess

from conftest import ROOT, grade, stages

from lab_grader import records, transcript
from lab_grader.outcomes import Outcome, Verdict

ASSERTION = re.compile(r"\bcr_assert\w*\s*\(|\blab_cannot_judge\s*\(|\bLAB_STANDIN_CHECK\b")


def test_every_stage_has_a_table_whose_sites_are_assertions():
    """Each site of each table is a line of a test source that makes a check
    (a stale table after an edit names lines that moved), and each test of
    the stage is in its table."""
    for s in stages():
        table = ROOT / "grader" / "tests" / s.name / transcript.TABLE
        assert table.is_file(), f"{s.name} has no {transcript.TABLE}: python3 grader/authoring/sites.py --stage {s.name}"
        data = json.loads(table.read_text())["tests"]
        lines = {}
        for test, e in data.items():
            assert e["required"], f"{s.name} {test}: no check every run reaches"
            for site in e["required"] + e["also"]:
                path, _, line = site.rpartition(":")
                if path not in lines:
                    f = ROOT / path
                    assert f.is_file(), f"{table}: {site}: no such file"
                    lines[path] = f.read_text().splitlines()
                text = lines[path][int(line) - 1]
                assert ASSERTION.search(text) or _continues_a_check(lines[path], int(line)), \
                    f"{table}: {site} is not a check ({text.strip()!r}): regenerate the table"


def _continues_a_check(lines, n):
    """A check written over several lines: gcc gives the call the line of
    the macro's name, or of the macro's last argument; look up to 4 lines back."""
    return any(ASSERTION.search(lines[k]) for k in range(max(0, n - 5), n))


def _lab_site_calls(binary):
    """Every return address of a call to lab_site in the binary (offsets from
    its start, a PIE's 0), by the function they stand in."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(binary)], capture_output=True, text=True,
                         check=True).stdout
    calls, func, take = {}, "", False
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if m:
            func = m.group(1)
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
        if not m:
            continue
        if take:
            calls.setdefault(func, set()).add(int(m.group(1), 16))
            take = False
        if m.group(2).startswith("call") and "<lab_site>" in m.group(3):
            take = True
    return calls


def test_forged_records_fail_and_true_ones_pass(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "solutions", tree)
    g = grade(tmp_path, tree, stage="1", timeout=600)
    assert g.returncode == 0, g.output[-3000:]
    slug = "".join(c if c.isalnum() else "_" for c in str(tree.resolve()))[-80:]
    work = ROOT / "build" / "grade" / "runs" / slug / "01-signal"
    binary = work / "tests-plain"
    recs = records.read_dir(work / "plain" / "rec")
    table = transcript.load(ROOT / "grader" / "tests" / "01-signal")
    assert len(recs) > 20 and set(recs) <= set(table), sorted(set(recs) - set(table))

    def verdicts(sites_of):
        outs = {t: Outcome(test=t, verdict=Verdict.PASS) for t in recs}
        for t, runs in recs.items():
            runs[-1].sites = sites_of(t, runs[-1])
        transcript.check(outs, recs, binary, table)
        return {t: o for t, o in outs.items() if o.verdict != Verdict.PASS}

    honest = {t: set(runs[-1].sites) for t, runs in recs.items()}
    assert not verdicts(lambda t, r: honest[t]), "the reference's own records fail"
    # END alone: what thirty lines of C once wrote
    failed = verdicts(lambda t, r: set())
    assert set(failed) == {t for t in recs if len(table[t].required) > transcript.MISSING_SLACK}
    assert all("does not match its body" in o.message for o in failed.values())
    # every check in the binary: names other tests' checks
    calls = _lab_site_calls(binary)
    everything = set().union(*calls.values())
    assert set(verdicts(lambda t, r: everything)) == set(recs)
    # every check of the test's own function (the body, with what the
    # compiler put inline in it): misses the checks of the helpers it
    # calls, or names its failure branches
    own = {t: calls.get("lab_body_" + t.replace("::", "_"), set()) for t in recs}
    caught = verdicts(lambda t, r: own[t])
    print(f"a forge that names its body's own checks passes {len(recs) - len(caught)} of {len(recs)} tests")
    assert set(caught) == set(recs), sorted(set(recs) - set(caught))   # docs/instructors.md says every test


def test_the_margins_are_what_the_docs_say():
    """One required check may be missing and three unknown ones may be
    named (docs/instructors.md, the threat model); one more of either fails."""
    e = transcript.Expected(frozenset({"a:1", "a:2", "a:3"}), frozenset({"a:1", "a:2", "a:3", "a:4"}))
    assert transcript.mismatch("t", {"a:1", "a:2", "a:3"}, e) is None
    assert transcript.mismatch("t", {"a:1", "a:2", "a:4"}, e) is None
    assert transcript.mismatch("t", {"a:1"}, e) is not None
    assert transcript.mismatch("t", {"a:1", "a:2", "a:3", "b:1", "b:2", "b:3"}, e) is None
    assert "no correct run reaches" in transcript.mismatch("t", {"a:1", "a:2", "a:3", "b:1", "b:2", "b:3", "b:4"}, e)
