"""A table that a self-test renders from the repository's own files and
keeps in docs/instructors.md between two marker comments: read it back,
write it again (test_rules_table.py, test_clause_table.py)."""
import pathlib
import re

try:
    import tomllib  # noqa: F401 - for the tables' own files
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # noqa: F401

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
DOC = ROOT / "docs" / "instructors.md"


def block(begin, end, text=None):
    """What docs/instructors.md holds between the markers, or None."""
    text = DOC.read_text() if text is None else text
    m = re.search(re.escape(begin) + r"\n(.*?)" + re.escape(end), text, re.S)
    return m.group(1) if m else None


def write(begin, end, body):
    """Puts body between the markers in docs/instructors.md."""
    text = DOC.read_text()
    assert block(begin, end, text) is not None, f"{DOC} has no {begin} ... {end} block"
    DOC.write_text(re.sub(re.escape(begin) + r"\n.*?" + re.escape(end), lambda _: begin + "\n" + body + end, text,
                          flags=re.S))


def check(begin, end, body, how):
    """Fails unless docs/instructors.md holds body between the markers."""
    got = block(begin, end)
    assert got is not None, f"docs/instructors.md has no {begin} ... {end} block"
    assert got == body, f"the table in docs/instructors.md between {begin} and {end} is out of date: {how}"
