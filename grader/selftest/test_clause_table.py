"""The clause-coverage table: every numbered clause of every stage header's
contract (and join.h's rules) against the rubric items that cite it, the
tests those items run and the mutants those items catch (the hostile-*
mutants, which test the grader's own defences, left out); docs/instructors.md
carries the table as rendered.

Read at item level: an item that cites three clauses credits all its tests
and mutants to each, so a count is what could break the clause, an upper
bound on what does. A glob in an item's tests counts the tests it names. Issue 26 asks two tests and two mutants per clause;
the clauses below that are listed in grader/clauses.toml (`thin`, and
`uncited` for a clause no item cites): the table fails make test when a
clause falls below without being listed, or is listed and no longer is
(the list only shrinks as tests and mutants are added).

python3 grader/selftest/test_clause_table.py --write refreshes the table in
docs/instructors.md."""
import fnmatch
import re
import sys

import clauses
from doc_tables import ROOT, check, tomllib, write as write_block

LISTED = ROOT / "grader" / "clauses.toml"
BEGIN, END = "<!-- clause table: generated -->", "<!-- end clause table -->"
ENOUGH = 2


def header_lists():
    """{header: (stage, kind, {number: text})}: the numbered list that
    follows "The contract" (or "The rules") in a header's first comment,
    each clause's lines joined."""
    from conftest import stages
    out = {}
    for st in stages():
        for h in sorted((ROOT / "solutions" / st.name).glob("*.h")):
            kind, nums, last = None, {}, None
            for line in h.read_text().split("*/", 1)[0].splitlines():
                m = re.search(r"The (contract|rules)\b", line)
                if m and not kind:
                    kind = m.group(1)
                    continue
                m = re.match(r"^ \*\s+(\d+)\.\s+(.*)", line)
                if kind and m and m.group(1) not in nums:
                    last = m.group(1)
                    nums[last] = m.group(2).strip()
                elif last and re.match(r"^ \*\s{3,}\S", line):
                    nums[last] += " " + line[2:].strip()
                else:
                    last = None
            if nums:
                out[h.name] = (st.name, kind, nums)
    return out


def title(text):
    """A clause's name: its text up to the first colon or full stop, 90
    characters at the most."""
    t = re.split(r"(?<=[\w\)]):\s|(?<=[\w\)])\.(?:\s|$)", text, 1)[0]
    return t if len(t) <= 90 else t[:87].rsplit(" ", 1)[0] + " ..."


def stage_tests(stage):
    """Every suite/name a stage's test sources define."""
    found = []
    for src in sorted((ROOT / "grader" / "tests" / stage).glob("*.c")):
        found += [f"{a}/{b}" for a, b in re.findall(r"^LAB_TEST\((\w+), (\w+),", src.read_text(), flags=re.M)]
    return found


def item_tests(patterns, defined):
    """An item's tests, a glob expanded to the tests it names (each test
    counts once: "ops/*" over two tests is two)."""
    out = []
    for pat in patterns:
        hits = [t for t in defined if fnmatch.fnmatchcase(t, pat)] or [pat]
        out += [h for h in hits if h not in out]
    return out


def coverage():
    """{(header, number): {"items", "tests", "mutants"}} and the cites that
    name no clause of any header (should be none)."""
    from conftest import mutants, stages
    lists = header_lists()
    muts = mutants()
    cov = {(h, n): {"items": set(), "tests": set(), "mutants": set()}
           for h, (_, _, nums) in lists.items() for n in nums}
    unknown = []
    for st in stages():
        own = [h for h, (s, _, _) in lists.items() if s == st.name]
        defined = stage_tests(st.name)
        for it in st.items:
            for h, n in clauses.cited(it.clause):
                if n is None:
                    continue
                if h is None:  # "(contract 3)": the stage's header with that clause; "(rule 2)": its rules
                    cands = [x for x in own if n in lists[x][2]]
                    if len(cands) > 1:
                        kind = "rules" if re.search(r"\brules?\b", it.clause) else "contract"
                        cands = [x for x in cands if lists[x][1] == kind] or cands
                    h = cands[0] if len(cands) == 1 else None
                if (h, n) not in cov:
                    unknown.append(f"{st.name}/{it.id}: {h or '(no header)'} {n}")
                    continue
                c = cov[(h, n)]
                c["items"].add(f"{st.name[:2]}/{it.id}")
                c["tests"] |= {f"{st.name[:2]}:{t}" for t in item_tests(it.tests, defined)}
                c["mutants"] |= {m.name for m in muts if m.stage == st.name and it.id in m.catches
                                 and not m.name.startswith("hostile-")}
    return cov, unknown


def below(cov):
    """(thin, uncited): clause keys "header N" under ENOUGH tests or mutants,
    and those no item cites."""
    thin = sorted(f"{h} {n}" for (h, n), c in cov.items()
                  if c["items"] and (len(c["tests"]) < ENOUGH or len(c["mutants"]) < ENOUGH))
    uncited = sorted(f"{h} {n}" for (h, n), c in cov.items() if not c["items"])
    return thin, uncited


def render():
    cov, _ = coverage()
    lists = header_lists()
    out = ["| clause | items citing it | tests | mutants |", "| --- | --- | --- | --- |"]
    for h, (stage, kind, nums) in lists.items():
        for n, text in nums.items():
            c = cov[(h, n)]
            flag = "" if len(c["tests"]) >= ENOUGH and len(c["mutants"]) >= ENOUGH else " ⚠"
            out.append(f"| {stage[:2]} {h} {'rule' if kind == 'rules' else 'contract'} {n}: {title(text)}{flag} | "
                       f"{', '.join(sorted(c['items'])) or '—'} | {len(c['tests'])} | "
                       f"{len(c['mutants'])}: {', '.join(sorted(c['mutants'])) or '—'} |")
    return "\n".join(out) + "\n"


def write():
    write_block(BEGIN, END, render())


def test_every_cited_clause_exists():
    _, unknown = coverage()
    assert not unknown, "rubric clauses cite contract clauses no header has: " + "; ".join(unknown)


def test_clauses_below_two_are_listed():
    cov, _ = coverage()
    thin, uncited = below(cov)
    listed = tomllib.loads(LISTED.read_text())
    new_thin = sorted(set(thin) - set(listed["thin"]))
    new_uncited = sorted(set(uncited) - set(listed["uncited"]))
    assert not new_thin and not new_uncited, (
        f"clauses with fewer than {ENOUGH} tests or mutants, not listed in grader/clauses.toml: "
        f"{new_thin + new_uncited}: add a test and a mutant that break each (or list it, with a reason)")
    stale = sorted(set(listed["thin"]) - set(thin)) + sorted(set(listed["uncited"]) - set(uncited))
    assert not stale, f"grader/clauses.toml lists clauses that are covered now: {stale}: take them off"


def test_instructors_md_shows_the_table():
    check(BEGIN, END, render(), "python3 grader/selftest/test_clause_table.py --write")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    elif sys.argv[1:] == ["--below"]:
        for name, keys in zip(("thin", "uncited"), below(coverage()[0])):
            print(f"{name} = [\n" + "".join(f'    "{k}",\n' for k in keys) + "]")
    else:
        sys.stdout.write(render())
