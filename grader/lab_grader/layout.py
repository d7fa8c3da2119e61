"""Where the tests' code lands in a student's binary: drawn anew for every
link, so that no binary made before (the handout's reference binaries, a
friend's build, the student's own last grading) tells where anything is.

Why: a passed test's completion record lists the checks its body reached,
by address in the binary that ran (transcript.py). Code under test shares
that process. With a fixed layout, the addresses could be read once from
any binary of the same tests (running the handout's reference binaries
prints them) and written back from a table: a forged record that passed
the transcript check (issue 25, red-team pass 7: 23 of 23 for a stub).

How: the tests are compiled with -ffunction-sections (build.test_objects),
so each function is a section of its own. For one link, a linker script
(INSERT AFTER .text, so the default script stays) names every `.text.*`
section of the test objects, object by object, in an order drawn for this
link, with a gap of random size before each: the functions of the tests,
and the gaps between them, are shuffled as a whole deck. What a stale
table names is some other place. The grader turns a record's addresses
into file:line with its own unstripped copy of this binary, so nothing
else changes. The objects themselves are not touched: the script is all
that is drawn, in a few milliseconds.

What this does not do: it does not hide the code. A forger who finds each
test function by its bytes at run time, in a stripped binary, and lists the
checks each one reaches, has read the tests as a disassembler does, test by
test; the threat model (docs/instructors.md) counts that as costing more
than the stage.
"""
import pathlib
import re
import secrets
import struct

GAP_MOST = 512    # bytes a gap before a function may take (plus 16)
FILL = "0xcccccccc"


class LayoutError(Exception):
    pass


def text_sections(obj):
    """The names of an ELF64 object's `.text.*` sections that hold code
    (read from its section header table: the object is the grader's own,
    compiled here)."""
    data = pathlib.Path(obj).read_bytes()
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise LayoutError(f"{pathlib.Path(obj).name}: not a little-endian ELF64 object")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def header(i):
        return struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
    strtab = header(shstrndx)
    names = data[strtab[4]:strtab[4] + strtab[5]]
    found = []
    for i in range(shnum):
        name_at, kind, _flags, _addr, _off, size = header(i)
        name = names[name_at:names.index(b"\0", name_at)].decode()
        if kind == 1 and size and name.startswith(".text."):   # SHT_PROGBITS
            found.append(name)
    return found


def _pattern(path):
    """The object as the script names it: any folder, then its own name
    (the linker matches the name as the command line gives it; a quoted
    name would turn the wildcard off, so the name must need no quotes)."""
    name = pathlib.Path(path).name
    if not re.fullmatch(r"[A-Za-z0-9_.+-]+", name):
        raise LayoutError(f"{name}: a file name the linker script cannot match")
    return f"*{name}"


def script(objects):
    """The text of a linker script that lays out the `.text.*` sections of
    `objects` in an order, and with gaps, drawn now."""
    pieces = [(obj, name) for obj in objects for name in text_sections(obj)]
    rng = secrets.SystemRandom()
    rng.shuffle(pieces)
    lines = ["SECTIONS", "{", "  .text.lab :", "  {"]
    for obj, name in pieces:
        lines.append(f"    . += {16 + secrets.randbelow(GAP_MOST)};")
        lines.append(f"    {_pattern(obj)}({name})")
    lines += [f"  }} ={FILL}", "}", "INSERT AFTER .text;", ""]
    return "\n".join(lines)


def draw(objects, path):
    """Writes a layout script for one link to `path`; returns the path.
    Raises LayoutError."""
    path = pathlib.Path(path)
    path.write_text(script(objects))
    return path
