"""Finding the student's work wherever it is, and copying it into a tree
shaped like labs/ that the grader can grade.

Students submit what they have: the labs/ folder, their repository as
GitHub's "Download ZIP" makes it (everything under async-lab-main/), the
stage folders, or two files dragged into Gradescope. find() recognises each
shape, in this order, and says which it took:

    labs          labs/01-signal/signal.c ...
    labs-nested   async-lab-main/labs/01-signal/signal.c ... (one folder down)
    stages        01-signal/signal.c ... (also one folder down)
    loose         signal.c, signal.h, quiz.toml ... mapped to their stages by
                  the rubric's source lists (also one folder down)
    zip+SHAPE     a .zip of any of these (or a folder holding only that zip)

The submission is hostile until proven otherwise: only regular files with
plain names are copied (never a symlink, which could point at the reference
solution or at /etc/shadow); listing.py reads the folder or zip, refuses a
zip whose members have absolute or `..` paths, and caps entries and sizes so
that a zip bomb is a one-line problem. Notes and problems are passed through
text.one_line(): file names are student text too.
"""
import dataclasses
import os
import pathlib
import re
import zipfile

from . import listing, text
from .listing import NotTaken, children

MAX_TOTAL = 32 << 20         # bytes copied in all
SUFFIXES = (".c", ".h", ".toml", ".md", ".txt")   # what a stage folder's copy keeps
SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")   # names a copied file may have


@dataclasses.dataclass
class Found:
    tree: pathlib.Path = None     # the labs-shaped tree (dest), None when problem is set
    shape: str = ""               # labs, labs-nested, stages, loose, zip+<shape>
    notes: list = dataclasses.field(default_factory=list)   # one line each, for the report
    problem: str = None           # one line: what was expected, what was found
    stages: list = dataclasses.field(default_factory=list)  # names of the stages written


def stage_files(stage):
    """The names of a stage's files: its sources, the header of each source,
    and quiz.toml when the stage has a quiz."""
    names = list(stage.sources)
    names += [n[:-2] + ".h" for n in stage.sources if n.endswith(".c") and n[:-2] + ".h" not in names]
    if any(i.lane == "quiz" for i in stage.items):
        names.append("quiz.toml")
    return names


def near_miss(name, stages):
    """The stage file a misnamed upload most likely is ("signal (1).c" as a
    browser saves a second download, "timer-wheel.c", "Signal.c"), or None."""
    import difflib
    base = pathlib.PurePosixPath(name).name
    plain = re.sub(r"\s*[(\[]\d+[)\]]|[- ]copy\b|-\d+(?=\.)", "", base, flags=re.I).lower().replace("-", "_")
    plain = plain.replace(" ", "_")
    names = sorted({n for st in stages for n in stage_files(st)})
    if plain in names and plain != base:
        return plain
    close = difflib.get_close_matches(plain, names, n=1, cutoff=0.85)
    return close[0] if close and close[0] != base else None


def _visible(name):
    return not name.startswith(".") and name not in listing.SKIP_DIRS


def _shape(entries, dirs, stages, prefix=""):
    """(shape, {stage name: its folder}, notes, prefix of loose files), or None."""
    def folders(p):
        return {s.name: p + s.name + "/" for s in stages if p + s.name in dirs}
    if folders(prefix + "labs/"):
        return "labs", folders(prefix + "labs/"), [], prefix
    tops = [d for d in children(dirs, prefix) if _visible(d)]
    nested = [t for t in tops if folders(f"{prefix}{t}/labs/")]
    if len(nested) > 1:
        raise NotTaken(f"more than one labs/ folder one level down ({', '.join(t + '/labs/' for t in nested)}): "
                       "submit one")
    if nested:
        return ("labs-nested", folders(f"{prefix}{nested[0]}/labs/"),
                [f"found labs/ one folder down, in {nested[0]}/"], prefix)
    if folders(prefix):
        return "stages", folders(prefix), [], prefix
    here = children(entries, prefix)
    if any(n in stage_files(s) for s in stages for n in here):
        return "loose", {}, [], prefix
    if not prefix and len(tops) == 1 and not any(_visible(n) and n.endswith((".c", ".h")) for n in here):
        inner = _shape(entries, dirs, stages, tops[0] + "/")
        if inner and inner[0] in ("stages", "loose"):
            what = "stage folders" if inner[0] == "stages" else "the stage files"
            return inner[0], inner[1], [f"found {what} one folder down, in {tops[0]}/"] + inner[2], inner[3]
    return None


def _map_loose(entries, stages, prefix, notes):
    """{stage name: [file names]} for the loose files at prefix. A name that
    several stages share goes to those whose other sources are all here (or,
    when none is complete, those with any of them here), with a note."""
    here = set(children(entries, prefix))
    out = {}
    for name in sorted(here):
        owners = [s for s in stages if name in stage_files(s)]
        if len(owners) > 1:
            others = {s.name: [src for src in s.sources if src != name] for s in owners}
            complete = [s for s in owners if others[s.name] and all(src in here for src in others[s.name])]
            started = [s for s in owners if any(src in here for src in others[s.name])]
            names = ", ".join(s.name for s in owners)
            if complete or started:
                why = "whose sources are all here" if complete else "which have some of their sources here"
                chosen = ", ".join(s.name for s in complete or started)
                notes.append(f"{name} belongs to {names}: put in {chosen}, {why}")
            else:
                notes.append(f"{name} belongs to {names}, and none of their sources is here: left out")
            owners = complete or started
        for s in owners:
            out.setdefault(s.name, []).append(name)
        if not owners and name.endswith((".c", ".h")):
            meant = near_miss(name, stages)
            notes.append(f"{prefix}{name} is not a file of any stage graded here: left out" +
                         (f" (is it {meant}? upload it under that name)" if meant else ""))
    return out


def _plan_folder(entries, dirs, folder, notes):
    """[(path in the submission, file name)] for a stage folder: its files
    (never those in its subfolders) whose suffix is one of SUFFIXES."""
    # the stage folder's Makefile is the handout's (make labs writes it, for
    # `make grade` typed there): expected, never taken in, not worth a note
    names = [n for n in children(entries, folder) if n != "Makefile"]
    kept = [n for n in names if n.endswith(SUFFIXES) or entries[folder + n].kind == "link"]
    if len(kept) < len(names):
        notes.append(f"left out {len(names) - len(kept)} file(s) of {folder} that are not "
                     f"{', '.join(SUFFIXES)} (e.g. {sorted(set(names) - set(kept))[0]})")
    for sub in children(dirs, folder):
        notes.append(f"left out the folder {folder}{sub}/: only the files directly in a stage folder are graded")
    return [(folder + n, n) for n in kept]


def _expected(stages, found_names):
    s = stages[0] if stages else None
    first = s.sources[0] if s else "the stage's files"
    which = f" (or the same for {', '.join(x.name for x in stages[1:])})" if len(stages) > 1 else ""
    shown = ", ".join(found_names[:12]) + (f" and {len(found_names) - 12} more" if len(found_names) > 12 else "")
    meant = [(n, near_miss(n, stages)) for n in found_names[:40]]
    hints = "; ".join(f"{n} looks like {m}: upload it as {m}" for n, m in meant if m)
    return (f"expected labs/{s.name if s else 'NN-name'}/{first} or {first}{which}; "
            f"found: {shown or 'nothing, the submission is empty'}" + (f" ({hints})" if hints else ""))


def _found_names(entries, dirs, prefix=""):
    """What the submission holds at its top, or inside its one top folder."""
    names = [prefix + d + "/" for d in children(dirs, prefix)] + [prefix + n for n in children(entries, prefix)]
    if not prefix and len(names) == 1 and names[0].endswith("/"):
        return _found_names(entries, dirs, names[0]) or names
    return sorted(n + (" (symlink)" if n in entries and entries[n].kind == "link" else "") for n in names)


def _copy(entries, rel, dest, budget, notes):
    """Copies entry rel to dest; returns the bytes written, None when refused."""
    e = entries[rel]
    why = {"link": "a symbolic link (only regular files are graded)", "other": "not a regular file"}.get(e.kind)
    if not SAFE_NAME.fullmatch(dest.name):
        why = "its name has characters other than letters, digits and . _ + -"
    data = e.read() if not why else b""
    if not why and len(data) > listing.MAX_FILE:
        why = f"larger than {listing.MAX_FILE >> 10} KiB"
    if why:
        notes.append(f"refused {rel}: {why}; left out")
        return None
    if budget + len(data) > MAX_TOTAL:
        raise NotTaken(f"refused the submission: its stage files add up to more than {MAX_TOTAL >> 20} MiB")
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return len(data)


def _listing(source, found, stages, opened):
    """(entries, dirs, "zip+" or "") of the submission at source."""
    source = pathlib.Path(source)
    if source.is_symlink():
        raise NotTaken(f"refused {source.name}: the submission itself is a symbolic link")
    if source.is_dir():
        entries, dirs = listing.list_dir(source)
        zips = [n for n in children(entries, "") if n.lower().endswith(".zip") and entries[n].kind == "file"]
        if len(zips) != 1 or _shape(entries, dirs, stages) is not None:
            return entries, dirs, ""
        found.notes.append(f"found only {zips[0]}: graded what it holds")
        source = source / zips[0]
    if source.is_file() and source.suffix.lower() == ".zip":
        return listing.list_zip(source, opened) + ("zip+",)
    if source.exists():
        raise NotTaken(f"{source.name} is neither a folder nor a .zip file")
    raise NotTaken(f"nothing was submitted: {source} does not exist")


def _discover(source, stages, dest, found, opened):
    entries, dirs, zipped = _listing(source, found, stages, opened)
    shape = _shape(entries, dirs, stages)
    if shape is None:
        raise NotTaken("no stage folder and no file of any stage: " + _expected(stages, _found_names(entries, dirs)))
    name, folders, notes, prefix = shape
    found.shape = zipped + name
    found.notes += notes
    if name == "loose":
        loose = _map_loose(entries, stages, prefix, found.notes)
        plan = {st: [(prefix + f, f) for f in files] for st, files in loose.items()}
    else:
        plan = {st: _plan_folder(entries, dirs, folder, found.notes) for st, folder in folders.items()}
        base = next(iter(folders.values()))[:-len(next(iter(folders))) - 1]
        found.notes += [f"refused {base}{s.name}: a symbolic link (only regular files are graded); left out"
                        for s in stages if base + s.name in entries and entries[base + s.name].kind == "link"]
    budget, refused = 0, []
    for s in stages:
        written = []
        for rel, fname in plan.get(s.name, []):
            size = _copy(entries, rel, dest / s.name / fname, budget, found.notes)
            if size is None:
                refused.append(rel)
            else:
                budget += size
                written.append(fname)
        lacking = [src for src in s.sources if src not in written]
        if lacking and written:
            found.notes.append(f"{s.name}: {', '.join(lacking)} not found")
        if written:
            found.stages.append(s.name)
    if not found.stages:
        why = f"every file of a stage was refused ({', '.join(refused[:5])})" if refused else \
            "no file could be given a stage"
        raise NotTaken(f"nothing to grade: {why}, see the notes; " + _expected(stages, _found_names(entries, dirs)))


def find(source, stages, dest):
    """Finds the student's work in source (a folder or a .zip) for the given
    rubric stages and copies it into dest (an empty folder, made if missing)
    as dest/NN-name/files. Returns a Found; when problem is set, tree is None
    and dest is left empty."""
    dest = pathlib.Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise ValueError(f"{dest} is not empty")
    found, opened = Found(), []
    try:
        _discover(source, stages, dest, found, opened)
        found.tree = dest
    except (NotTaken, OSError, zipfile.BadZipFile) as e:
        found.problem = str(e) if isinstance(e, NotTaken) else f"cannot read the submission: {e}"
        found.tree, found.stages = None, []
        for p in sorted(dest.rglob("*"), reverse=True):
            p.rmdir() if p.is_dir() and not p.is_symlink() else p.unlink()
    finally:
        for zf in opened:
            zf.close()
    # file names are the student's text too: no escape sequence reaches a report
    found.notes = [text.one_line(n, limit=500) for n in found.notes]
    found.problem = found.problem and text.one_line(found.problem, limit=1000)
    return found
