"""Reading a submission safely: the names in a folder or a zip, and a way
to read each regular file, with caps that turn a zip bomb, a huge tree or a
member that escapes the zip into a one-line refusal (NotTaken).

Nothing here follows a symbolic link or unpacks anything to disk: a link is
listed as kind "link", a device or FIFO as "other", and a file is read only
when discover.py copies it, at most MAX_FILE + 1 bytes of it.
"""
import dataclasses
import os
import pathlib
import re
import stat
import zipfile

MAX_ENTRIES = 20000          # directory entries or zip members looked at
MAX_DEPTH = 4                # path components looked at: top/labs/01-signal/signal.c
MAX_FILE = 1 << 20           # bytes read from one file
MAX_ZIP = 64 << 20           # bytes of the zip file itself
MAX_UNPACKED = 512 << 20     # declared unpacked size of all members of a zip
SKIP_DIRS = ("__MACOSX",)    # not walked, nor is any folder whose name starts with a dot


class NotTaken(Exception):
    """The submission cannot be taken; the message is one line for the student."""


@dataclasses.dataclass
class Entry:
    kind: str                 # "file", "link" or "other"
    read: object = None       # for a file: () -> its first MAX_FILE + 1 bytes


def _read_file(path):
    """The first MAX_FILE + 1 bytes of a regular file, never through a link."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise NotTaken(f"{path.name} is not a regular file")
        return f.read(MAX_FILE + 1)


def list_dir(root):
    """({path: Entry}, {folder paths}) of the folder root, paths relative to
    it with "/", MAX_DEPTH components deep at most."""
    entries, dirs = {}, set()

    def walk(d, rel, depth):
        with os.scandir(d) as it:
            for e in it:
                if len(entries) + len(dirs) >= MAX_ENTRIES:
                    raise NotTaken(f"the submission has more than {MAX_ENTRIES} files and folders")
                name = rel + e.name
                if e.is_symlink():
                    entries[name] = Entry("link")
                elif e.is_dir(follow_symlinks=False):
                    dirs.add(name)
                    if depth + 1 < MAX_DEPTH and not e.name.startswith(".") and e.name not in SKIP_DIRS:
                        walk(e.path, name + "/", depth + 1)
                elif e.is_file(follow_symlinks=False):
                    entries[name] = Entry("file", lambda p=pathlib.Path(e.path): _read_file(p))
                else:
                    entries[name] = Entry("other")
    walk(root, "", 0)
    return entries, dirs


def list_zip(path, opened):
    """The same for the zip file at path; the ZipFile is appended to opened
    for the caller to close once it has read what it needs."""
    if path.stat().st_size > MAX_ZIP:
        raise NotTaken(f"refused {path.name}: larger than {MAX_ZIP >> 20} MiB")
    try:
        zf = zipfile.ZipFile(path)
        infos = zf.infolist()
        opened.append(zf)
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise NotTaken(f"{path.name} is not a zip file that can be read ({e})")
    if len(infos) > MAX_ENTRIES:
        raise NotTaken(f"refused {path.name}: more than {MAX_ENTRIES} members")
    if sum(i.file_size for i in infos) > MAX_UNPACKED:
        raise NotTaken(f"refused {path.name}: its members would unpack to more than {MAX_UNPACKED >> 20} MiB")
    entries, dirs = {}, set()
    for info in infos:
        name = info.filename.replace("\\", "/")
        parts = [p for p in name.split("/") if p not in ("", ".")]
        if name.startswith("/") or re.match(r"[A-Za-z]:", name) or ".." in parts:
            raise NotTaken(f"refused {path.name}: member '{info.filename}' points outside the zip")
        if not parts:
            continue
        for i in range(1, len(parts)):
            dirs.add("/".join(parts[:i]))
        rel = "/".join(parts)
        mode = info.external_attr >> 16
        if name.endswith("/") or stat.S_ISDIR(mode):
            dirs.add(rel)
        elif rel in entries:
            raise NotTaken(f"refused {path.name}: it holds {rel} twice")
        elif stat.S_ISLNK(mode):
            entries[rel] = Entry("link")
        elif stat.S_IFMT(mode) not in (0, stat.S_IFREG) or info.flag_bits & 0x1:
            entries[rel] = Entry("other")
        else:
            def read(info=info, rel=rel):
                try:
                    with zf.open(info) as f:
                        return f.read(MAX_FILE + 1)
                except Exception as e:  # bad CRC, a truncated or corrupt stream, an unknown method
                    raise NotTaken(f"refused {path.name}: {rel} cannot be unpacked ({e})") from None
            entries[rel] = Entry("file", read)
    return entries, dirs


def children(names, prefix):
    """Names directly in the folder prefix ("" for the top, else "a/b/")."""
    return sorted(n[len(prefix):] for n in names if n.startswith(prefix) and "/" not in n[len(prefix):])
