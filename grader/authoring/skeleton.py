#!/usr/bin/env python3
"""Write labs/ from solutions/: the student handout's skeletons.

solutions/ is the source of truth. In each solution file, the student's part
sits between marker lines:

    /* BEGIN STUDENT: hint */ ... /* END STUDENT */          -> LAB_TODO("hint");
    /* BEGIN STUDENT FIELDS: hint */ ... /* END STUDENT */   -> a placeholder field
    /* BEGIN STUDENT HIDDEN */ ... /* END STUDENT */          -> removed
    answer = "false"  # STUDENT-ANSWER   (in .toml files)       -> answer = ""

Everything outside the markers is copied as it is, comments and hints
included. Files named ANSWERS* and directories named answers/ never reach
labs/ (answer keys stay with the solutions).

Every stage folder, in labs/ and in solutions/, gets the same small Makefile
(STAGE_MAKEFILE below, written by --write, checked by --check): `make grade`,
`make check`, `make watch`, `make debug TEST=..`, `make hint ITEM=..`, `make
trace` typed there work on that stage of that tree through the lab's own Makefile, which
infers STAGE and TARGET from the folder. The grader never takes it in (it
compiles a stage's .c and .h files only).

    skeleton.py --write          regenerate labs/
    skeleton.py --check          exit 1 (and say which files) when labs/ is stale
    skeleton.py --out DIR        write the skeletons somewhere else
    skeleton.py --write --stage 03   regenerate one stage only
"""
import argparse
import filecmp
import pathlib
import re
import shutil
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
BEGIN = re.compile(r"^(?P<indent>[ \t]*)/\* BEGIN STUDENT(?P<kind> FIELDS| HIDDEN)?(?::\s*(?P<hint>.*?))?\s*\*/\s*$")
END = re.compile(r"^[ \t]*/\* END STUDENT \*/\s*$")


STAGE_MAKEFILE = """\
# make grade, check, watch, debug TEST=suite/name, hint ITEM=id, trace: typed here, they
# work on this stage of this tree, through the lab's Makefile (written by make labs)
LAB_ROOT := $(or $(LAB_ROOT),$(dir $(lastword $(MAKEFILE_LIST)))../..)
$(if $(wildcard $(LAB_ROOT)/grader/grade),,$(error no lab in $(abspath $(LAB_ROOT)), two folders up: make grade LAB_ROOT=/path/to/the/lab))
include $(LAB_ROOT)/Makefile
"""


class MarkerError(Exception):
    pass


def c_string(text):
    return text.replace("\\", "\\\\").replace('"', '\\"')


def param_names(params):
    """The parameter names of a C parameter list ("void" and "..." give none)."""
    names = []
    for p in params:
        p = p.strip()
        if not p or p == "void" or p == "...":
            continue
        m = re.search(r"\(\s*\*\s*([A-Za-z_]\w*)\s*\)", p)  # function pointer
        if m:
            names.append(m.group(1))
            continue
        m = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\]\s*)*$", p)
        if m:
            names.append(m.group(1))
    return names


def function_call(header):
    """(name, parameter list) when `header` ends with "name(params)", else None."""
    if not header.endswith(")"):
        return None
    depth = 0
    for k in range(len(header) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(header[k], 0)
        if depth == 0:
            m = re.search(r"([A-Za-z_]\w*)\s*$", header[:k])
            if not m or m.group(1) in ("if", "while", "for", "switch", "return", "sizeof"):
                return None
            return m.group(1), header[k + 1:-1]
    return None


def function_params(header):
    """Parameter names when `header` ends with "name(params)", else []."""
    call = function_call(header)
    return param_names(split_top_level(call[1])) if call else []


def split_top_level(params):
    """Splits a parameter list at commas outside parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in params:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += {"(": 1, ")": -1}.get(ch, 0)
        cur += ch
    parts.append(cur)
    return parts


def enclosing_header(lines, index):
    """The text before the "{" of the block around lines[index] ("" at the
    top level of the file)."""
    depth = 0
    for j in range(index - 1, -1, -1):
        line = lines[j]
        depth += line.count("}") - line.count("{")
        if depth < 0:
            # the "{" that opens the block around the region
            header = " ".join(l.strip() for l in lines[max(0, j - 6): j + 1])
            return header.rsplit("{", 1)[0].strip()
    return ""


def enclosing_params(lines, index):
    """Parameters of the function whose body contains lines[index], if the
    region starts right inside a function body."""
    return function_params(enclosing_header(lines, index))


def owner_name(header):
    """What a region belongs to, by name: the function ("park_until") or the
    struct ("struct parker") whose braces hold it; "" at the top level."""
    call = function_call(header)
    if call:
        return call[0]
    m = re.search(r"\b(struct|union)\s+([A-Za-z_]\w*)\s*$", header)
    return f"{m.group(1)} {m.group(2)}" if m else ""


def regions(text, origin):
    """The student regions of one file, in order: (first line index, last
    line index, kind ("", "FIELDS" or "HIDDEN"), hint, owner (owner_name))."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = BEGIN.match(lines[i])
        if not m:
            if END.match(lines[i]):
                raise MarkerError(f"{origin}:{i + 1}: END STUDENT without BEGIN")
            i += 1
            continue
        start = i
        j = i + 1
        while j < len(lines) and not END.match(lines[j]):
            if BEGIN.match(lines[j]):
                raise MarkerError(f"{origin}:{j + 1}: nested BEGIN STUDENT (region opened at line {start + 1})")
            j += 1
        if j == len(lines):
            raise MarkerError(f"{origin}:{start + 1}: BEGIN STUDENT without END")
        kind, hint = (m.group("kind") or "").strip(), (m.group("hint") or "").strip()
        if not kind and not hint:
            raise MarkerError(f"{origin}:{start + 1}: a code region needs a hint: /* BEGIN STUDENT: hint */")
        out.append((start, j, kind, hint, owner_name(enclosing_header(lines, start))))
        i = j + 1
    return out


def studentize(text, origin, written=None):
    """The skeleton of one solution file. written: the owners (owner_name)
    whose regions keep the reference code, for a tree of a student part way
    through a stage; a file with one of them keeps its HIDDEN helpers too,
    for that code to call."""
    lines = text.split("\n")
    out = []
    i = 0
    found = regions(text, origin)
    helpers = any(kind != "HIDDEN" and owner in (written or ()) for _, _, kind, _, owner in found)
    for start, end, kind, hint, owner in found:
        out += lines[i:start]
        i = end + 1
        indent = BEGIN.match(lines[start]).group("indent")
        if (kind == "HIDDEN" and helpers) or (kind != "HIDDEN" and owner in (written or ())):
            out += lines[start + 1:end]
        elif kind == "HIDDEN":
            pass
        elif kind == "FIELDS":
            out.append(f"{indent}int todo_your_fields_here; /* TODO: {hint or 'your fields'} */")
        else:
            for name in enclosing_params(lines, start):
                out.append(f"{indent}(void){name};")
            out.append(f'{indent}LAB_TODO("{c_string(hint)}");')
    out += lines[i:]
    return "\n".join(out)


ANSWER = re.compile(r'^(?P<lead>\s*\w[\w-]*\s*=\s*)"[^"]*"\s*# STUDENT-ANSWER\s*$')


def blank_answers(text):
    """In a quiz file: `answer = "false"  # STUDENT-ANSWER` -> `answer = ""`."""
    return "\n".join(ANSWER.sub(lambda m: m.group("lead") + '""', line) for line in text.split("\n"))


def needs_todo_include(text):
    return "LAB_TODO(" in text and '#include "lab_todo.h"' not in text


def add_todo_include(text):
    """Put #include "lab_todo.h" after the last #include line."""
    lines = text.split("\n")
    last = max((k for k, l in enumerate(lines) if l.startswith("#include")), default=-1)
    lines.insert(last + 1, '#include "lab_todo.h"')
    return "\n".join(lines)


def skip(path):
    return (path.name.startswith("ANSWERS") or "answers" in path.parts or path.name.startswith(".")
            or path == pathlib.Path(path.parts[0], "Makefile"))   # the stage's Makefile is STAGE_MAKEFILE


def stage_dirs(root):
    return sorted(p for p in root.iterdir() if p.is_dir())


def generate(src_root, dst_root, only=None, written=None):
    """Writes every stage of src_root (or those named in `only`) into
    dst_root; written: as for studentize."""
    for stage in stage_dirs(src_root):
        if only and not any(stage.name == o or stage.name.startswith(o + "-") for o in only):
            continue
        (dst_root / stage.name).mkdir(parents=True, exist_ok=True)
        (dst_root / stage.name / "Makefile").write_text(STAGE_MAKEFILE)
        for f in sorted(stage.rglob("*")):
            rel = f.relative_to(src_root)
            if f.is_dir() or skip(rel):
                continue
            target = dst_root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if f.suffix in (".c", ".h"):
                text = studentize(f.read_text(), str(rel), written)
                if needs_todo_include(text):
                    text = add_todo_include(text)
                target.write_text(text)
            elif f.suffix == ".toml":
                target.write_text(blank_answers(f.read_text()))
            else:
                shutil.copyfile(f, target)


def differences(a, b):
    """Relative paths that differ between trees a and b."""
    diffs = []
    files_a = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    files_b = {p.relative_to(b) for p in b.rglob("*") if p.is_file()} if b.exists() else set()
    for rel in sorted(files_a | files_b):
        if rel not in files_a:
            diffs.append(f"labs/{rel} exists but solutions/ would not produce it")
        elif rel not in files_b:
            diffs.append(f"labs/{rel} is missing")
        elif not filecmp.cmp(a / rel, b / rel, shallow=False):
            diffs.append(f"labs/{rel} differs from what solutions/ generates")
    return diffs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true")
    g.add_argument("--check", action="store_true")
    g.add_argument("--out", type=pathlib.Path)
    ap.add_argument("--stage", action="append", help="only this stage (03 or 03-executor); repeatable")
    args = ap.parse_args()
    if args.stage and not args.write:
        ap.error("--stage goes with --write")
    solutions, labs = ROOT / "solutions", ROOT / "labs"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            fresh = pathlib.Path(tmp) / "labs"
            fresh.mkdir()
            generate(solutions, fresh, args.stage)
            if args.stage and args.write:
                for d in fresh.iterdir():  # only the named stages are replaced
                    if (labs / d.name).exists():
                        shutil.rmtree(labs / d.name)
                    shutil.copytree(d, labs / d.name)
                print(f"wrote {', '.join('labs/' + d.name for d in sorted(fresh.iterdir()))}")
                return 0
            for stage in stage_dirs(solutions):   # solutions/ gets the stage Makefile too
                made = stage / "Makefile"
                if args.write and (not made.is_file() or made.read_text() != STAGE_MAKEFILE):
                    if not args.stage or stage.name in {d.name for d in fresh.iterdir()}:
                        made.write_text(STAGE_MAKEFILE)
            if args.check:
                diffs = differences(fresh, labs) + [
                    f"solutions/{s.name}/Makefile is not the stage Makefile (skeleton.py's STAGE_MAKEFILE)"
                    for s in stage_dirs(solutions)
                    if not (s / "Makefile").is_file() or (s / "Makefile").read_text() != STAGE_MAKEFILE]
                if diffs:
                    print("labs/ is out of date with solutions/:", *diffs, sep="\n  ", file=sys.stderr)
                    print("run: make labs", file=sys.stderr)
                    return 1
                print("labs/ matches solutions/")
                return 0
            dest = args.out or labs
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(fresh, dest)
            print(f"wrote {dest}")
            return 0
    except MarkerError as e:
        print(f"skeleton.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
