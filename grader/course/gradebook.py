"""The gradebook's data: student names as data, the roster, and the files an
instructor uploads (Canvas's gradebook import, Gradescope's score upload),
with a checker for each written from the platform's documentation.

Names are data. A submission's name is whatever the student (or the LMS's
bulk download) called the folder or zip: it can hold a newline, an escape
sequence, a `..`, a `=cmd|...`, bytes that are not UTF-8. So:

  key(name)     the name of the student's files (reports/<key>/, trees/<key>/):
                the name's letters and digits, then 10 hex digits of the
                SHA-256 of its bytes; no two names share a key (checked),
                and no key is a prefix or suffix trick of another, since the
                files live in one folder per key
  shown(name)   the name for a terminal or a CSV cell: printable characters
                kept, everything else (escape, newline, bidi override, a byte
                that is not UTF-8) as a visible \\xNN / \\uNNNN escape
  cell(text)    a text cell neutralised against formula injection (OWASP,
                "CSV Injection"): a cell whose first character is = + - @
                tab or carriage return (or whose first non-blank one is one
                of = + - @) is written with a leading single quote

The checkers (check_canvas, check_gradescope) return the rules a file
breaks, each a (rule id, line) pair; RULES says where each rule comes from.
"""
import csv
import dataclasses
import hashlib
import io
import os
import re

# ---------------------------------------------------------------- names

_SLUG = re.compile(r"[^A-Za-z0-9_+-]+")


def name_bytes(name):
    """The name's bytes as the file system has them (a str from os.listdir
    carries undecodable bytes as surrogate escapes)."""
    return os.fsencode(name)


def key(name):
    slug = _SLUG.sub("_", name).strip("_")[:40] or "student"
    return f"{slug}-{hashlib.sha256(name_bytes(name)).hexdigest()[:10]}"


def shown(name):
    out = []
    for ch in name:
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif 0xDC80 <= o <= 0xDCFF:            # a byte that is not UTF-8 (surrogateescape)
            out.append(f"\\x{o - 0xDC00:02x}")
        elif ch.isprintable():
            out.append(ch)
        elif o <= 0xFF:
            out.append(f"\\x{o:02x}")
        else:
            out.append(f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}")
    return "".join(out)


FORMULA_FIRST = ("=", "+", "-", "@", "\t", "\r")


def cell(text):
    """A text cell a spreadsheet shows as text (OWASP CSV Injection)."""
    text = "" if text is None else str(text)
    stripped = text.lstrip(" \u00a0\n")
    if text.startswith(FORMULA_FIRST) or stripped.startswith(FORMULA_FIRST[:4]):
        return "'" + text
    return text


def number(x):
    """A score as a CSV cell: a plain decimal number, never text."""
    return f"{float(x):g}"


# ---------------------------------------------------------------- the roster

class RosterError(Exception):
    """The roster cannot be used: one line that says why."""


ROSTER_REQUIRED = ("id", "email", "folder")
ROSTER_OPTIONAL = ("name", "login", "section", "canvas_id")


@dataclasses.dataclass
class Enrolled:
    id: str
    email: str
    folder: str
    name: str = ""
    login: str = ""
    section: str = ""
    canvas_id: str = ""


def load_roster(path):
    """[Enrolled] from a CSV with a header row: id, email, folder (required:
    the student's id in your LMS or SIS, their email, and the name of their
    folder or zip in SUBMISSIONS), and optionally name, login, section and
    canvas_id. Header names are case-insensitive; other columns are ignored."""
    try:
        raw = open(path, encoding="utf-8-sig", newline="").read()
    except (OSError, UnicodeDecodeError) as e:
        raise RosterError(f"ROSTER={path}: cannot read it as UTF-8 text ({e})") from None
    rows = list(csv.reader(io.StringIO(raw)))
    if not rows:
        raise RosterError(f"ROSTER={path}: empty (expected a header row: id,email,folder)")
    header = [h.strip().lower() for h in rows[0]]
    missing = [c for c in ROSTER_REQUIRED if c not in header]
    if missing:
        raise RosterError(f"ROSTER={path}: no {', '.join(missing)} column (its header row: "
                          f"{', '.join(rows[0]) or 'empty'}; expected id,email,folder)")
    col = {c: header.index(c) for c in ROSTER_REQUIRED + ROSTER_OPTIONAL if c in header}
    out, ids, folders = [], {}, {}
    for n, row in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in row):
            continue
        get = {c: (row[i].strip() if i < len(row) else "") for c, i in col.items()}
        if not get["id"] or not get["folder"]:
            raise RosterError(f"ROSTER={path}, line {n}: id and folder must not be empty")
        for what, seen in (("id", ids), ("folder", folders)):
            if get[what] in seen:
                raise RosterError(f"ROSTER={path}, line {n}: {what} {shown(get[what])} is also on line "
                                  f"{seen[get[what]]}")
            seen[get[what]] = n
        out.append(Enrolled(**get))
    return out


def join(entries, roster):
    """{entry name: Enrolled} for the submissions the roster names: a roster
    folder matches the entry of that exact name, or else a zip whose name
    without .zip it is (bob matches bob.zip when there is no folder bob)."""
    by_folder = {e.folder: e for e in roster}
    out = {}
    for name in entries:
        if name in by_folder:
            out[name] = by_folder[name]
    for name in entries:
        if name not in out and name.lower().endswith(".zip"):
            e = by_folder.get(name[:-4])
            if e is not None and e not in out.values():
                out[name] = e
    return out


# ---------------------------------------------------------------- the exports

CANVAS_STUDENT_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
GRADESCOPE_COLUMNS = ["Name", "SID", "Email", "Total Score"]


def _write_csv(path, rows):
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerows(rows)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
        fh.write(buf.getvalue())
    os.chmod(path, 0o600)


def write_canvas(path, title, points_possible, scored):
    """Canvas's gradebook import: the student columns of Canvas's own export,
    a Points Possible row, one assignment column. scored: [(Enrolled, score)].
    The roster's id goes in SIS User ID (Canvas looks a student up by ID, then
    SIS User ID, then SIS Login ID, then name); canvas_id, login and section
    where the roster has them."""
    rows = [CANVAS_STUDENT_COLUMNS + [cell(title)],
            ["Points Possible", "", "", "", "", number(points_possible)]]
    for e, score in scored:
        rows.append([cell(e.name or e.email or e.id), cell(e.canvas_id), cell(e.id), cell(e.login),
                     cell(e.section), number(score)])
    _write_csv(path, rows)


def write_gradescope(path, scored):
    """Gradescope's score upload: one row per student, matched by Email
    (or SID), the assignment's total in Total Score."""
    rows = [GRADESCOPE_COLUMNS]
    for e, score in scored:
        rows.append([cell(e.name), cell(e.id), cell(e.email), number(score)])
    _write_csv(path, rows)


# ---------------------------------------------------------------- the checkers

CANVAS_GUIDE = "Canvas Instructor Guide, 'How do I import grades in the Gradebook?'"
CANVAS_CODE = "instructure/canvas-lms app/models/gradebook_importer.rb"
GS_GUIDE = "Gradescope guide 'Adding Students and Staff' (roster CSV)"
OWASP = "OWASP, 'CSV Injection'"

RULES = {
    # rule id: (what it says, where it comes from)
    "csv": ("UTF-8 text that parses as CSV (RFC 4180 quoting)",
            f"{CANVAS_CODE} (parses with Ruby's CSV; a malformed file fails the import); {GS_GUIDE} (save as UTF-8)"),
    "canvas-header": ("the first row is the header: its first cell names Student, its second ID, and it "
                      "has more than 3 cells", f"{CANVAS_CODE}: row_has_student_headers?"),
    "canvas-student-columns": ("the student columns are Student, ID, then SIS Login ID or SIS User ID "
                               "and SIS Login ID, and end with Section",
                               f"{CANVAS_CODE}: update_column_count, last_student_info_column; "
                               "the column order of Canvas's own export"),
    "canvas-assignment": ("at least one assignment column after the student columns, each named once",
                          f"{CANVAS_GUIDE} (an assignment column; a new title makes a new assignment); "
                          f"{CANVAS_CODE}: parse_assignments"),
    "canvas-points-possible": ("a row whose first cell holds Points Possible is not a student: its "
                               "assignment cells are the points, numbers",
                               f"{CANVAS_CODE}: check_for_non_student_row, process_pp"),
    "canvas-identifies": ("every student row has an ID, SIS User ID, SIS Login ID or name, and no "
                          "student is on two rows", f"{CANVAS_CODE}: process_student (the lookup order)"),
    "canvas-score": ("each score is a number (blank or - would mean no score, EX excused: this lab "
                     "writes numbers only)", f"{CANVAS_CODE}: the decimal converter and no_score?"),
    "gradescope-header": ("a header row, a header on every column, Email (or SID) among them",
                          f"{GS_GUIDE}: each column has a header; students are matched by email"),
    "gradescope-email": ("every row has an email, and no email is on two rows",
                         f"{GS_GUIDE}: use unique email addresses for each course member"),
    "gradescope-score": ("a Total Score column, a number on every row",
                         "the column name of Gradescope's own grade export (see docs/citations.md)"),
    "no-formula": ("no text cell begins with = + - @, tab or carriage return",
                   f"{OWASP}: ensure no cell begins with these characters; prefix a single quote"),
}


def _read(path):
    """(rows, problems): the CSV's rows, or the csv rule broken."""
    try:
        data = open(path, "rb").read()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return None, [("csv", f"not UTF-8 text: {e}")]
    try:
        return list(csv.reader(io.StringIO(text[1:] if text.startswith("\ufeff") else text), strict=True)), []
    except csv.Error as e:
        return None, [("csv", f"does not parse as CSV: {e}")]


def _is_number(s):
    try:
        float(s.strip().replace(",", "."))
        return s.strip() != ""
    except ValueError:
        return False


def _formula_cells(rows, text_columns):
    for n, row in enumerate(rows, start=1):
        for i in text_columns:
            if i < len(row) and row[i].startswith(FORMULA_FIRST):
                yield ("no-formula", f"line {n}, column {i + 1}: {shown(row[i][:30])!s} begins with "
                                     f"{shown(row[i][0])}")


def check_canvas(path):
    rows, problems = _read(path)
    if rows is None:
        return problems
    if not rows:
        return [("canvas-header", "the file is empty")]
    head = rows[0]
    if not (len(head) > 3 and "Student" in head[0] and "ID" in head[1]):
        return [("canvas-header", f"line 1 is {shown(','.join(head[:4]))}: not Student, ID, ...")]
    n_student = None
    if head[2:4] == ["SIS User ID", "SIS Login ID"] and len(head) > 4 and "Section" in head[4]:
        n_student = 5
    elif head[2] == "SIS Login ID" and len(head) > 3 and "Section" in head[3]:
        n_student = 4
    elif "Section" in head[2]:
        n_student = 3
    if n_student is None:
        problems.append(("canvas-student-columns", f"line 1: {shown(','.join(head[:5]))}"))
        n_student = 5
    assignments = head[n_student:]
    if not assignments or any(not a.strip() for a in assignments) or len(set(assignments)) != len(assignments):
        problems.append(("canvas-assignment", f"line 1: assignment columns {shown(','.join(assignments))}"))
    seen = {}
    for n, row in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in row):
            continue
        if len(row) != len(head):
            problems.append(("csv", f"line {n}: {len(row)} cells, the header has {len(head)}"))
            continue
        if "Points Possible" in row[0]:
            bad = [c for c in row[n_student:] if not _is_number(c)]
            if bad:
                problems.append(("canvas-points-possible", f"line {n}: {shown(bad[0])} is not a number"))
            continue
        ident = tuple(c.strip() for c in row[:n_student - 1])
        if not any(ident):
            problems.append(("canvas-identifies", f"line {n}: no name, ID, SIS User ID or SIS Login ID"))
        for i, v in enumerate(ident):
            if v and i > 0:
                if (i, v) in seen:
                    problems.append(("canvas-identifies", f"line {n}: {head[i]} {shown(v)} is also on line "
                                                          f"{seen[(i, v)]}"))
                seen[(i, v)] = n
        for c in row[n_student:]:
            if not _is_number(c):
                problems.append(("canvas-score", f"line {n}: {shown(c) or 'an empty cell'} is not a number"))
    problems += _formula_cells(rows, range(n_student))
    problems += _formula_cells(rows[:1], range(len(head)))
    return problems


def check_gradescope(path):
    rows, problems = _read(path)
    if rows is None:
        return problems
    if not rows:
        return [("gradescope-header", "the file is empty")]
    head = [h.strip() for h in rows[0]]
    if any(not h for h in head) or not ({"Email", "SID"} & set(head)):
        return [("gradescope-header", f"line 1 is {shown(','.join(head))}")]
    if "Total Score" not in head:
        problems.append(("gradescope-score", "no Total Score column"))
    seen = {}
    for n, row in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in row):
            continue
        if len(row) != len(head):
            problems.append(("csv", f"line {n}: {len(row)} cells, the header has {len(head)}"))
            continue
        r = dict(zip(head, row))
        email = r.get("Email", "").strip().lower()
        if "Email" in head:
            if not email:
                problems.append(("gradescope-email", f"line {n}: no email"))
            elif email in seen:
                problems.append(("gradescope-email", f"line {n}: {shown(email)} is also on line {seen[email]}"))
            seen[email] = n
        if "Total Score" in head and not _is_number(r["Total Score"]):
            problems.append(("gradescope-score", f"line {n}: {shown(r['Total Score']) or 'an empty cell'} "
                                                 "is not a number"))
    text_cols = [i for i, h in enumerate(head) if h != "Total Score"]
    problems += _formula_cells(rows, text_cols)
    return problems
