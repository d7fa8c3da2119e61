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
so each function is a section of its own. For one link, a copy of each test
object has every `.text.*` section renamed `.text.lab.<random>`, and a pad
object adds sections of random size with random names of the same kind; a
linker script (INSERT AFTER .text, so the default script stays) places all
of them in one output section sorted by name, which is to say in an order
drawn for this link. The functions of the tests, and the gaps between them,
move as a whole deck: what a stale table names is some other place. The
grader turns a record's addresses into file:line with its own unstripped
copy of this binary, so nothing else changes.

What this does not do: it does not hide the code. A forger who finds each
test function by its bytes at run time, in a stripped binary, and lists the
checks each one reaches, has read the tests as a disassembler does, test by
test; the threat model (docs/instructors.md) counts that as costing more
than the stage.
"""
import dataclasses
import os
import pathlib
import secrets
import shutil
import struct
import subprocess

PADS = 64              # gaps among the tests' functions
PAD_MOST = 4096        # bytes a gap may take
PREFIX = ".text.lab."  # the renamed sections; nothing else in a binary is called so

SCRIPT = f"""SECTIONS
{{
  .text.lab : {{ *(SORT_BY_NAME({PREFIX}*)) }}
}}
INSERT AFTER .text;
"""


@dataclasses.dataclass(frozen=True)
class Drawn:
    folder: pathlib.Path
    objects: dict      # original object -> its renamed copy
    pad: pathlib.Path  # the gaps
    script: pathlib.Path


class LayoutError(Exception):
    pass


def text_sections(obj):
    """The names of an ELF64 object's `.text.*` sections (read from its
    section header table: the object is the grader's own, compiled here)."""
    data = pathlib.Path(obj).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise LayoutError(f"{obj}: not a little-endian ELF64 object")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    def header(i):
        return struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
    strtab = header(shstrndx)
    names = data[strtab[4]:strtab[4] + strtab[5]]
    found = []
    for i in range(shnum):
        name_at, kind = header(i)[:2]
        name = names[name_at:names.index(b"\0", name_at)].decode()
        if kind == 1 and name.startswith(".text.") and not name.startswith(PREFIX):   # SHT_PROGBITS
            found.append(name)
    return found


def _name():
    return PREFIX + secrets.token_hex(8)


def draw(objects, folder, cc="gcc"):
    """A layout for one link: renamed copies of `objects`, a pad object and
    the script, in `folder` (made anew). Raises LayoutError."""
    folder = pathlib.Path(folder)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    copies = {}
    for i, obj in enumerate(objects):
        obj = pathlib.Path(obj)
        renames = []
        for name in text_sections(obj):
            renames += ["--rename-section", f"{name}={_name()}"]
        copy = folder / f"{i:03d}-{obj.name}"
        proc = subprocess.run(["objcopy", *renames, str(obj), str(copy)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise LayoutError(f"objcopy {obj.name}: {proc.stderr.strip()}")
        copies[obj] = copy
    asm = "".join(f'\t.section {_name()},"ax",@progbits\n\t.skip {secrets.randbelow(PAD_MOST) + 16}, 0xcc\n'
                  for _ in range(PADS))
    asm += '\t.section .note.GNU-stack,"",@progbits\n'   # else the linker makes every stack executable
    pad_src = folder / "pad.s"
    pad_src.write_text(asm)
    pad = folder / "pad.o"
    proc = subprocess.run([cc, "-c", str(pad_src), "-o", str(pad)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise LayoutError(f"the pad object: {proc.stderr.strip()}")
    script = folder / "layout.ld"
    script.write_text(SCRIPT)
    os.chmod(folder, 0o755)
    return Drawn(folder, copies, pad, script)
