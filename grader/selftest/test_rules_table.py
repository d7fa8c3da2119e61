"""The rules x stages table (grader/rules.toml): every stage a rule lists
as checked has a test some rubric item runs and a mutant whose items run
that test; known gaps are listed apart and never double as checks; and
docs/instructors.md carries the table as rendered from the file.

python3 grader/selftest/test_rules_table.py --write refreshes the table in
docs/instructors.md."""
import fnmatch
import pathlib
import re
import sys

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RULES = ROOT / "grader" / "rules.toml"
DOC = ROOT / "docs" / "instructors.md"
BEGIN, END = "<!-- rules table: grader/rules.toml -->", "<!-- end rules table -->"


def load():
    return tomllib.loads(RULES.read_text())["rule"]


def render(rules):
    out = ["| rule | taught in | checked in: test (mutant) | not checked yet in |", "| --- | --- | --- | --- |"]
    for r in rules:
        checks = "<br>".join(
            f"{c['stage'][:2]}: {', '.join('`' + t + '`' for t in c['tests'])} ({', '.join(c['mutants'])})"
            for c in r["check"])
        gaps = ", ".join(s[:2] for s in r.get("untested", [])) or "—"
        out.append(f"| **{r['id']}**: {r['rule']} | {r['taught'][:2]} | {checks} | {gaps} |")
    return "\n".join(out) + "\n"


def doc_block(text):
    m = re.search(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), text, re.S)
    return m.group(1) if m else None


def write():
    text = DOC.read_text()
    assert doc_block(text) is not None, f"{DOC} has no {BEGIN} ... {END} block"
    new = re.sub(re.escape(BEGIN) + r"\n.*?" + re.escape(END),
                 lambda _: BEGIN + "\n" + render(load()) + END, text, flags=re.S)
    DOC.write_text(new)


def runs(item_tests, test):
    return any(fnmatch.fnmatchcase(test, p) or fnmatch.fnmatchcase(p, test) or p == test for p in item_tests)


def test_every_checked_stage_has_a_test_and_a_mutant():
    from conftest import mutants, stages
    by_stage = {s.name: s for s in stages()}
    muts = {(m.stage, m.name): m for m in mutants()}
    bad = []
    for r in load():
        checked = set()
        for c in r.get("check", []):
            st, where = c["stage"], f"{r['id']} in {c['stage']}"
            checked.add(st)
            if st not in by_stage:
                bad.append(f"{where}: no such stage")
                continue
            if not c.get("tests"):
                bad.append(f"{where}: no test")
            if not c.get("mutants"):
                bad.append(f"{where}: no mutant")
            items = by_stage[st].items
            for t in c.get("tests", []):
                if not any(runs(i.tests, t) for i in items):
                    bad.append(f"{where}: no rubric item runs {t}")
            for name in c.get("mutants", []):
                m = muts.get((st, name))
                if m is None:
                    bad.append(f"{where}: no mutant grader/mutants/{st}/{name}.patch")
                    continue
                named = [i for i in items if i.id in m.catches]
                if not any(runs(i.tests, t) for i in named for t in c["tests"]):
                    bad.append(f"{where}: mutant {name} is caught by {m.catches}, none of which runs {c['tests']}")
        both = checked & set(r.get("untested", []))
        if both:
            bad.append(f"{r['id']}: {sorted(both)} listed both as checked and as not checked yet")
        for st in r.get("untested", []):
            if st not in by_stage:
                bad.append(f"{r['id']}: untested stage {st} does not exist")
    assert not bad, "rules.toml: " + "; ".join(bad)


def test_instructors_md_shows_the_table():
    got = doc_block(DOC.read_text())
    assert got is not None, f"docs/instructors.md has no {BEGIN} ... {END} block"
    assert got == render(load()), ("the rules table in docs/instructors.md is not grader/rules.toml rendered: "
                                   "python3 grader/selftest/test_rules_table.py --write")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        sys.stdout.write(render(load()))
