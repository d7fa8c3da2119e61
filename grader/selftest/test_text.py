"""Student text is data (lab_grader/text.py): every escape sequence and
control character a hostile submission can print is gone before it reaches
a report, results.json or JUnit; what a reader needs stays."""
import sys

import pytest

from conftest import GRADER

sys.path.insert(0, str(GRADER))
from lab_grader import text  # noqa: E402


@pytest.mark.parametrize("raw,clean", [
    ("\x1b[2J\x1b[Hall 21/21 passed", "all 21/21 passed"),                 # clear screen, cursor home
    ("\x1b[1;31mred\x1b[0m", "red"),                                        # colours (CSI ... m)
    ("\x1b[?25l\x1b[?1049h", ""),                                           # private modes
    ("\x9b2Jeight-bit", "eight-bit"),                                       # 8-bit CSI
    ("a\x1b]0;window title\x07b", "ab"),                                    # OSC ended by BEL
    ("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b", "alinkb"),              # OSC 8 hyperlink, ended by ST
    ("a\x1bPq#0;2;0;0;0\x1b\\b", "ab"),                                     # DCS (sixel)
    ("a\x1b_apc\x9cb", "ab"),                                               # APC ended by 8-bit ST
    ("open \x1b]0;no end\nnext line", "open \nnext line"),                  # unended OSC stops at the line
    ("\x1bc\x1b(B\x1b7\x1b8x", "x"),                                        # reset, charset, save/restore
    ("2/21\r21/21", "2/21\n21/21"),                                         # CR overwrite shows both
    ("a\r\nb", "a\nb"),
    ("ab\x08\x08OK", "abOK"),                                               # backspace overstrike
    ("\x00\x01\x07\x0b\x0c\x7f\x85\x9f", ""),                               # C0, DEL, C1
    ("tab\tand\nnewline", "tab\tand\nnewline"),                             # kept
    ("\u202eevil\u202c \u2066x\u2069", "evil x"),                           # bidi overrides and isolates
    ("lone \ud800 surrogate \ufffe", "lone  surrogate "),                   # XML-invalid code points
    ("ünïcödé → ✓ 日本", "ünïcödé → ✓ 日本"),                                  # text stays
    ("x < y && \"q\" \\ '", "x < y && \"q\" \\ '"),                          # escaping is the writer's job
])
def test_clean(raw, clean):
    assert text.clean(raw) == clean


def test_bytes_none_and_other_types():
    assert text.clean(b"bad \xff byte \x1b[31m") == "bad \ufffd byte "
    assert text.clean(None) == ""
    assert text.clean(42) == "42"


def test_nothing_dangerous_survives_any_byte():
    every = "".join(chr(c) for c in range(0x00, 0x100)) + "\u202a\u202b\u202d\u2067\u2068"
    out = text.clean(every * 3)
    assert all(c in "\t\n" or (ord(c) >= 0x20 and not 0x7f <= ord(c) <= 0x9f) for c in out)
    assert not any(c in out for c in "\u202a\u202b\u202d\u2067\u2068")


def test_one_line_and_tail():
    assert text.one_line("a\n  b\t\x1b[2Jc") == "a b c"
    assert text.one_line("x" * 50, limit=10) == "x" * 9 + "\u2026"
    log = "".join(f"line {i}\n" for i in range(1000))
    t = text.tail(log, 200)
    assert t.startswith("[... the first ") and t.endswith("line 999\n")
    assert t.splitlines()[1].startswith("line ") and len(t) < 260
    assert text.tail("short\x00", 200) == "short"
