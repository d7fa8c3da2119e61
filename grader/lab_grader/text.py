"""Student text made safe to show: every string that comes from a student's
code or output (assertion messages, compiler errors, logs, file names) goes
through clean() before it reaches a report, results.json or JUnit XML.

Student output is hostile: a terminal escape can clear the screen and print a
fake "21/21", a carriage return or backspaces can overwrite a line, a
bidirectional override can reorder what a reader sees, and a NUL or a lone
surrogate makes XML invalid. clean() removes all of these and keeps the text
readable: letters, digits, punctuation, any other Unicode, tabs and newlines.
"""
import re

# ESC-introduced sequences (ECMA-48), and their 8-bit C1 forms:
#   CSI  ESC [ or 0x9b, parameters 0x30-0x3f, intermediates 0x20-0x2f, a final 0x40-0x7e
#   OSC, DCS, SOS, PM, APC  ESC ] P X ^ _ (or 0x9d 0x90 0x98 0x9e 0x9f), a string ended
#        by BEL or ST (ESC \ or 0x9c); an unended one is cut at the end of its line
#   anything else  ESC, intermediates 0x20-0x2f, one final 0x30-0x7e (ESC c, ESC ( B, ESC 7)
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"
)
# what is left after the sequences: C0 controls but tab and newline, DEL, C1
# controls, bidirectional embeddings, overrides and isolates, lone surrogates
# and the two non-characters XML forbids
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")


def clean(s):
    """s (str, bytes or None) without escape sequences and control
    characters; tab and newline stay. A carriage return becomes a newline (a
    CR LF pair one newline), so text that tried to overwrite a line shows
    both versions. Bytes are read as UTF-8, bad bytes shown as U+FFFD."""
    if s is None:
        return ""
    if isinstance(s, (bytes, bytearray)):
        s = bytes(s).decode("utf-8", errors="replace")
    elif not isinstance(s, str):
        s = str(s)
    s = _ESCAPES.sub("", s)
    s = s.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROLS.sub("", s)


def one_line(s, limit=300):
    """clean(s) on a single line (newlines and tabs become spaces, runs of
    spaces one), cut to limit characters with an ellipsis: for an XML
    attribute, a test name or a summary."""
    s = " ".join(clean(s).split())
    return s if len(s) <= limit else s[:limit - 1] + "\u2026"


def tail(s, limit=4000):
    """The end of clean(s), at most limit characters, starting at a line
    boundary when one is near, and saying that the start was cut."""
    s = clean(s)
    if len(s) <= limit:
        return s
    cut = s[-limit:]
    nl = cut.find("\n")
    if 0 <= nl < limit // 4:
        cut = cut[nl + 1:]
    return f"[... the first {len(s) - len(cut)} characters are left out ...]\n" + cut
