"""Which contract clauses a rubric item cites, and whether a failure's
"what happened" text names one of them.

A rubric clause ends with its citations in parentheses: "(contract 3)",
"(parker.h contracts 3 and 4)", "(timer_wheel.h, contract 1, 6;
time_driver.h, contract 5)", "(join.h rule 4)", "(join.h)". A failing item's own evidence (the
test's assertion message, or the item's hang hint when the test timed out)
must name the clause it shows broken, so a student reading the report knows
which rule of which header to reread; the self-tests check it for every
mutant's intended items (test_mutants.py)."""
import re

# Evidence that is the clause itself: a checker's finding on an item whose
# clause is "no leak" or "no data race", a written answer, a refusal by the
# static gate (the hostile mutants check their own texts with Expect: lines).
SELF_EVIDENT = ("memory error", "data race")


def cited(clause):
    """{(header or None, number or None)}: every contract the clause cites."""
    out = set()
    for group in re.findall(r"\(([^()]*)\)", clause):
        header = None
        for part in group.split(";"):
            h = re.search(r"\b(\w+\.h)\b", part)
            if h:
                header = h.group(1)
            word = re.search(r"\b(contract|rule)s?\b", part)
            if word:
                tail = part[word.end():]
                for a, b in re.findall(r"\b(\d+)(?:-(\d+))?\b", tail):   # "rules 1-4": 1, 2, 3 and 4
                    out |= {(header, str(n)) for n in range(int(a), int(b or a) + 1)}
            elif h:
                out.add((header, None))
    return out


def names(text, refs):
    """True if `text` names one of `refs`: 'contract N' or 'rule N' (in a
    list such as 'contracts 3 and 4' too) for a numbered one, the header for
    the others."""
    for header, n in refs:
        if n and re.search(rf"\b(?:contract|rule)s? (?:\d+(?:, | and |, and |-))*{n}\b", text):
            return True
        if header and not n and header in text:
            return True
    return False


def what_happened(output):
    """The report's 'what happened' text of one item's block."""
    return output.split("what happened:", 1)[-1].split("\n  contract:", 1)[0].strip()


def status(output):
    """The verdict word of an item's block: its first line ends in it."""
    return output.split("\n", 1)[0].rsplit(": ", 1)[-1]
