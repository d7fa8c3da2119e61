"""layout.py: the tests' functions land somewhere new at every link, and
the binary still runs and still says where each check stands."""
import subprocess
import sys

from conftest import GRADER

sys.path.insert(0, str(GRADER))
from lab_grader import layout  # noqa: E402

SOURCE = """
#include <stdio.h>
__attribute__((noinline)) int one(int x) { return x + 1; }
__attribute__((noinline)) int two(int x) { return one(x) * 2; }
__attribute__((noinline)) int three(int x) { return two(x) - 3; }
int main(void) { printf("%d\\n", three(20)); return 0; }
"""


def _addresses(binary):
    out = subprocess.run(["nm", str(binary)], capture_output=True, text=True, check=True).stdout
    return {line.split()[2]: int(line.split()[0], 16) for line in out.splitlines()
            if len(line.split()) == 3 and line.split()[2] in ("one", "two", "three")}


def test_each_link_draws_its_own_order_and_gaps(tmp_path):
    src = tmp_path / "t.c"
    src.write_text(SOURCE)
    obj = tmp_path / "t.o"
    subprocess.run(["gcc", "-O2", "-g", "-ffunction-sections", "-c", str(src), "-o", str(obj)], check=True)
    assert {".text.one", ".text.two", ".text.three", ".text.startup.main"} <= set(layout.text_sections(obj))
    layouts = []
    for n in range(4):
        ld = layout.draw([obj], tmp_path / f"layout{n}.ld")
        prog = tmp_path / f"prog{n}"
        subprocess.run(["gcc", str(obj), f"-Wl,-T,{ld}", "-o", str(prog)], check=True, capture_output=True)
        assert subprocess.run([str(prog)], capture_output=True, text=True).stdout == "39\n"
        stack = subprocess.run(["readelf", "-lW", str(prog)], capture_output=True, text=True).stdout
        assert "RWE" not in next(line for line in stack.splitlines() if "GNU_STACK" in line)
        a = _addresses(prog)
        layouts.append((a["two"] - a["one"], a["three"] - a["one"]))
        # addr2line still finds each function's line in the laid-out binary
        where = subprocess.run(["addr2line", "-e", str(prog), hex(a["two"])], capture_output=True,
                               text=True).stdout
        assert where.strip().endswith("t.c:4"), where
    assert len(set(layouts)) == len(layouts), f"two links laid the functions out alike: {layouts}"


def test_a_foreign_object_is_refused(tmp_path):
    bad = tmp_path / "x.o"
    bad.write_bytes(b"not an object at all")
    try:
        layout.text_sections(bad)
    except layout.LayoutError as e:
        assert "not a little-endian ELF64 object" in str(e)
    else:
        raise AssertionError("a file that is not an object was read as one")
