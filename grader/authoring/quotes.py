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

The check fails on a block that differs from its region (with a diff), on a
quote of a region that does not exist, and on a region named twice in a file.
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


def doc_files(root):
    for d in DOCS:
        p = root / d
        yield from (sorted(p.rglob("*.md")) if p.is_dir() else [p] if p.exists() else [])


def run(root, write):
    """Returns the problems found (after rewriting, with write)."""
    problems, cache, count = [], {}, 0
    for doc in doc_files(root):
        text = doc.read_text()
        pieces, last = [], 0
        for m in QUOTE.finditer(text):
            count += 1
            where = f"{doc.relative_to(root)}:{text[:m.start()].count(chr(10)) + 1}"
            src = root / m.group("path")
            try:
                if src not in cache:
                    if not src.is_file():
                        raise QuoteError(f"{m.group('path')} does not exist")
                    cache[src] = regions(src)
                want = cache[src].get(m.group("name"))
                if want is None:
                    raise QuoteError(f"no region '{m.group('name')}' in {m.group('path')}")
            except QuoteError as e:
                problems.append(f"{where}: {e}")
                continue
            if m.group("body") != want:
                if write:
                    pieces.append(text[last:m.start("body")] + want)
                    last = m.end("body")
                else:
                    diff = difflib.unified_diff(want.splitlines(), m.group("body").splitlines(),
                                                f"{m.group('path')}#{m.group('name')}", where, lineterm="", n=1)
                    problems.append(f"{where}: the quote of {m.group('path')}#{m.group('name')} no longer "
                                    f"matches its source (make quotes rewrites it):\n  " + "\n  ".join(diff))
        if write and pieces:
            doc.write_text("".join(pieces) + text[last:])
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
