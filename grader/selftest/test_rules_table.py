"""The rules x stages table (grader/rules.toml): every stage a rule lists
as checked has a test some rubric item runs and a mutant whose items run
that test; known gaps are listed apart and never double as checks; and
docs/instructors.md carries the table as rendered from the file.

python3 grader/selftest/test_rules_table.py --write refreshes the table in
docs/instructors.md."""
import fnmatch
import sys

from doc_tables import ROOT, check, tomllib, write as write_block

RULES = ROOT / "grader" / "rules.toml"
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


def write():
    write_block(BEGIN, END, render(load()))


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
    check(BEGIN, END, render(load()), "python3 grader/selftest/test_rules_table.py --write")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        sys.stdout.write(render(load()))
