"""The system calls the sandbox makes between fork and exec, through ctypes
and os with no allocation-heavy Python in between: unshare, mount, the
private /tmp and /dev/shm, the loopback interface, a write to a cgroup file.
"""
import ctypes
import os
import socket
import struct

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_RDONLY = 0x1
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MS_NOEXEC = 0x8
MS_NOATIME = 0x400
MS_NODIRATIME = 0x800
MS_RELATIME = 0x200000
# statvfs's flag bits (os.ST_*) and the mount flags that keep each: in a user
# namespace a bind's remount must repeat the flags its source is locked with
KEPT_FLAGS = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
              (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME))
PRIVATE_DIRS = ("/tmp", "/dev/shm", "/var/tmp")  # each run gets empty ones
PRIVATE_DIR_SIZE = 256 << 20  # bytes each of them may hold (a tmpfs is memory: it counts against the run's)
MNT_DETACH = 2
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1

_libc = ctypes.CDLL(None, use_errno=True)


def unshare(flags):
    if _libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def mount(source, target, fstype, flags, data):
    enc = (lambda v: None if v is None else v.encode())
    if _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def umount(target):
    """Detaches the mount at target (lazily: a file still open in it keeps
    the tmpfs alive until it is closed, and nothing else sees it)."""
    if _libc.umount2(str(target).encode(), MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"umount {target}: {os.strerror(err)}")


def tmpfs(target, size, mode):
    """A tmpfs of at most `size` bytes on target: a disk quota for whatever
    is written below it (ENOSPC past it)."""
    mount("tmpfs", str(target), "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode={mode:o}")


def private_dirs(home, readonly=()):
    """In a new mount namespace: empty tmpfs on /tmp and /dev/shm, with the
    run's private directory (home, which may live under /tmp) bound back in
    at the same path; each folder of readonly bound on itself read-only (the
    grader's checkout, for a run that keeps the grader's user)."""
    unshare(CLONE_NEWNS)
    mount(None, "/", None, MS_REC | MS_PRIVATE, None)  # nothing of ours propagates out
    for path in readonly:
        if os.path.isdir(path) and not (home is not None and str(home).startswith(path.rstrip("/") + "/")):
            try:
                _bind(path, path)
            except OSError:
                pass   # left writable here; the grader's fingerprint of its own files still stands guard
    keep = os.open(home, os.O_PATH | os.O_DIRECTORY) if home is not None else -1
    try:
        for d in PRIVATE_DIRS:
            if os.path.isdir(d):
                mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV, f"size={PRIVATE_DIR_SIZE},mode=1777")
        if keep >= 0 and any(str(home).startswith(d + "/") for d in PRIVATE_DIRS):
            os.makedirs(home, mode=0o711, exist_ok=True)
            mount(f"/proc/self/fd/{keep}", str(home), None, MS_BIND, None)
    finally:
        if keep >= 0:
            os.close(keep)


# What a minimal root holds besides /usr and the folders bound into it: the
# host's top-level links into /usr (merged /usr) or those folders read-only,
# the few files of /etc the C library reads, and harmless devices.
ROOT_TOP = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
ROOT_ETC = ("ld.so.cache", "ld.so.conf", "hosts", "host.conf", "nsswitch.conf", "gai.conf", "localtime",
            "services", "protocols", "alternatives")   # alternatives: where /usr/bin/cc and the like point
ROOT_DEVICES = ("null", "zero", "full", "random", "urandom")
ROOT_SIZE = 4 << 20   # bytes of the tmpfs that holds the root's own folders (mount points only)


def _bind(source, target, writable=False, device=False):
    mount(source, target, None, MS_BIND | MS_REC, None)
    if not writable and not device:
        have = os.statvfs(target).f_flag
        kept = 0
        for st, ms in KEPT_FLAGS:
            if have & st:
                kept |= ms
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | kept, None)


def minimal_root(root, binds, cwd):
    """In a new mount namespace: a root of its own on `root` (an empty
    folder), holding /usr and the C library's few files read-only, empty
    /tmp, /var/tmp and /dev/shm, harmless devices, an empty /proc for the
    PID namespace's own (util-linux's unshare --mount-proc mounts it), and
    each (path, writable) of binds at its own path; then chroot into it.
    Nothing else of the machine is there: not the grader's checkout, not
    another run's folder, not a file only root may read."""
    unshare(CLONE_NEWNS)
    mount(None, "/", None, MS_REC | MS_PRIVATE, None)  # nothing of ours propagates out
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, f"size={ROOT_SIZE},mode=755")
    for name in ROOT_TOP:
        host = "/" + name
        if os.path.islink(host):
            os.symlink(os.readlink(host), f"{root}/{name}")
        elif os.path.isdir(host):
            os.mkdir(f"{root}/{name}")
            _bind(host, f"{root}/{name}")
    for d in ("usr", "etc", "dev", "proc", "tmp", "var", "var/tmp", "dev/shm"):
        os.mkdir(f"{root}/{d}", 0o755)
    _bind("/usr", f"{root}/usr")
    for name in ROOT_ETC:
        if os.path.isdir(f"/etc/{name}"):
            os.mkdir(f"{root}/etc/{name}", 0o755)
            _bind(f"/etc/{name}", f"{root}/etc/{name}")
        elif os.path.isfile(f"/etc/{name}"):
            os.close(os.open(f"{root}/etc/{name}", os.O_CREAT | os.O_WRONLY, 0o644))
            _bind(os.path.realpath(f"/etc/{name}"), f"{root}/etc/{name}")
    for name in ROOT_DEVICES:
        if os.path.exists(f"/dev/{name}"):
            os.close(os.open(f"{root}/dev/{name}", os.O_CREAT | os.O_WRONLY, 0o644))
            _bind(f"/dev/{name}", f"{root}/dev/{name}", device=True)
    for d in PRIVATE_DIRS:
        mount("tmpfs", f"{root}{d}", "tmpfs", MS_NOSUID | MS_NODEV, f"size={PRIVATE_DIR_SIZE},mode=1777")
    for path, writable in binds:
        os.makedirs(f"{root}{path}", mode=0o755, exist_ok=True)
        _bind(path, f"{root}{path}", writable=writable)
    os.chroot(root)
    os.chdir(cwd or "/")


def loopback_up():
    """Brings `lo` up in the current network namespace (it starts down)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        import fcntl
        req = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


def write(path, text):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
