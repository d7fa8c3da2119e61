#!/usr/bin/env python3
"""Code quoted in the docs, kept true to its source.

    quotes.py --check      (make test) every quote matches its source; exit 1 if not
    quotes.py --write      rewrite every quote from its source

A source marks a region with two comment lines (in common/, labs/ or the
grader's tests; a region in solutions/ reaches labs/ through the skeleton
generator, outside the student's parts):

    /* quote: waker */
    ...the lines quoted...
    /* end quote: waker */

A chapter quotes it with an HTML comment right before a fenced block:

    <!-- quote: common/waker.h#waker -->
    ```c
    ...a copy of the lines...
    ```

A chapter quotes a header's numbered contract clauses the same way, by
number, between two HTML comments:

    <!-- contract: labs/05-timer/timer_wheel.h#1,2,4 -->
    - **1.** Never early: a deadline is rounded up to ...
    - **2.** ...
    <!-- end contract -->

The clauses are the first numbered list ("1. ", "2. ", ...) in the header's
leading comment: its contract, in the header's own numbers and words. Each one
becomes a Markdown bullet led by its bold number (not an ordered list, whose
numbers a renderer may replace), with the header's line breaks and nested
lines kept.

The check fails on a block that differs from its region (with a diff), on a
quote of a region that does not exist, on a region named twice in a file, and
on a contract quote of a clause number the header does not have.
"""
import argparse
import difflib
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ["docs", "README.md"]
QUOTE = re.compile(r"^<!-- quote: (?P<path>[^#\s]+)#(?P<name>[\w.-]+) -->\n(?P<fence>```\w*\n)(?P<body>.*?)^```$",
                   re.M | re.S)
BEGIN = re.compile(r"(?:/\*|//)\s*quote:\s*(?P<name>[\w.-]+)")
END = re.compile(r"(?:/\*|//)\s*end quote:\s*(?P<name>[\w.-]+)")
CONTRACT = re.compile(r"^<!-- contract: (?P<path>[^#\s]+)#(?P<name>[0-9]+(?:,[0-9]+)*) -->\n(?P<body>.*?)"
                      r"^<!-- end contract -->$", re.M | re.S)
CLAUSE = re.compile(r"^ \*( +)([0-9]+)\. (.*)$")


class QuoteError(Exception):
    pass


def regions(path):
    """{name: text} of the marked regions of a source file."""
    out, open_name, lines = {}, None, []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        end, begin = END.search(line), BEGIN.search(line)
        if end:
            if end.group("name") != open_name:
                raise QuoteError(f"{path}:{n}: 'end quote: {end.group('name')}' without its 'quote:'")
            out[open_name] = "".join(l + "\n" for l in lines)
            open_name, lines = None, []
        elif begin:
            if open_name is not None:
                raise QuoteError(f"{path}:{n}: quote '{begin.group('name')}' starts inside '{open_name}'")
            if begin.group("name") in out:
                raise QuoteError(f"{path}:{n}: quote '{begin.group('name')}' is marked twice")
            open_name = begin.group("name")
        elif open_name is not None:
            lines.append(line)
    if open_name is not None:
        raise QuoteError(f"{path}: quote '{open_name}' has no 'end quote: {open_name}'")
    return out


def clauses(path):
    """{number: Markdown text} of the first numbered list in the header's
    leading comment."""
    out, number, col, lines = {}, None, 0, []
    text = path.read_text()
    if not text.startswith("/*") or "*/" not in text:
        raise QuoteError(f"{path}: no leading comment to take the contract from")
    for line in text[:text.index("*/")].splitlines()[1:]:
        m = CLAUSE.match(line)
        # the clause's text column: " *  9. text" and " * 10. text" line up
        here = len(m.group(1)) + len(m.group(2)) + 2 if m else None
        if m and (number is None or here == col):
            if number is not None:
                out[number] = "".join(lines)
            number, col = int(m.group(2)), here
            lines = [f"- **{number}.** {m.group(3).rstrip()}\n"]
            continue
        if number is None:
            continue
        rest = line[2:] if line.startswith(" *") else line
        if not rest.strip() or len(rest) - len(rest.lstrip()) < col:
            break   # a blank comment line, or text left of the clauses' text: the list is over
        lines.append("  " + rest[col:].rstrip() + "\n")
    if number is not None:
        out[number] = "".join(lines)
    if not out:
        raise QuoteError(f"{path}: no numbered contract in its leading comment")
    return out


def doc_files(root):
    for d in DOCS:
        p = root / d
        yield from (sorted(p.rglob("*.md")) if p.is_dir() else [p] if p.exists() else [])


def region_text(root, cache, m):
    """The marked region a `<!-- quote: -->` block names."""
    src = root / m.group("path")
    if src not in cache:
        if not src.is_file():
            raise QuoteError(f"{m.group('path')} does not exist")
        cache[src] = regions(src)
    want = cache[src].get(m.group("name"))
    if want is None:
        raise QuoteError(f"no region '{m.group('name')}' in {m.group('path')}")
    return want


def contract_text(root, cache, m):
    """The header clauses a `<!-- contract: -->` block names, as Markdown."""
    src, key = root / m.group("path"), ("contract", root / m.group("path"))
    if key not in cache:
        if not src.is_file():
            raise QuoteError(f"{m.group('path')} does not exist")
        cache[key] = clauses(src)
    wanted = [int(n) for n in m.group("name").split(",")]
    missing = [n for n in wanted if n not in cache[key]]
    if missing:
        raise QuoteError(f"{m.group('path')} has no contract clause {', '.join(map(str, missing))} "
                         f"(it numbers 1 to {max(cache[key])})")
    return "".join(cache[key][n] for n in wanted)


# (block pattern, what it should hold, how a problem names it, what it copies)
KINDS = [(QUOTE, region_text, "{path}#{name}", "its source"),
         (CONTRACT, contract_text, "{path}'s contract {name}", "the header")]


def run(root, write):
    """Returns the problems found (after rewriting, with write)."""
    problems, cache, count = [], {}, 0
    for doc in doc_files(root):
        text = original = doc.read_text()
        for pattern, expected, label, origin in KINDS:
            pieces, last = [], 0
            for m in pattern.finditer(text):
                count += 1
                where = f"{doc.relative_to(root)}:{text[:m.start()].count(chr(10)) + 1}"
                name = label.format(path=m.group("path"), name=m.group("name"))
                try:
                    want = expected(root, cache, m)
                except QuoteError as e:
                    problems.append(f"{where}: {e}")
                    continue
                if m.group("body") == want:
                    continue
                if write:
                    pieces.append(text[last:m.start("body")] + want)
                    last = m.end("body")
                else:
                    diff = difflib.unified_diff(want.splitlines(), m.group("body").splitlines(), name, where,
                                                lineterm="", n=1)
                    problems.append(f"{where}: the quote of {name} no longer matches {origin} "
                                    f"(make quotes rewrites it):\n  " + "\n  ".join(diff))
            text = "".join(pieces) + text[last:]
        if write and text != original:
            doc.write_text(text)
    return problems, count


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--check", action="store_true")
    g.add_argument("--write", action="store_true")
    ap.add_argument("--root", type=pathlib.Path, default=ROOT)
    args = ap.parse_args()
    problems, count = run(args.root.resolve(), args.write)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    print(f"{count} quoted excerpts match their sources" if args.check else f"{count} quoted excerpts written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
