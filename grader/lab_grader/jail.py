"""One run's confinement (a Jail): what runs in the child between fork and
exec (cgroups, namespaces, the private /tmp, the user id), and what happens
at the end of the run (counting refused forks and OOM kills, killing every
process, bringing back the files it left). sandbox.py decides, once per
grader, what the machine allows; a Jail carries that out for one run.
"""
import dataclasses
import os
import pathlib
import shutil
import signal
import stat
import subprocess
import threading

from . import kernel

PIDS_MAX = 512          # tasks (processes and threads) in one run
COPY_BACK_FILES = 20000  # at most this many files come back from a run's directory
COPY_BACK_BYTES = 64 << 20   # and at most this many bytes in all (the records, logs and reports)
COPY_BACK_FILE_BYTES = 16 << 20   # of one file: the first this many bytes


def _counter(path, key):
    """The value of `key` in a cgroup file of "key value" lines; 0 if none."""
    try:
        for line in pathlib.Path(path).read_text().splitlines():
            k, _, value = line.partition(" ")
            if k == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


@dataclasses.dataclass
class Jail:
    """One run's confinement. preexec() runs in the child before exec, and
    the child execs command(cmd), never cmd itself: where preexec made a PID
    namespace, the command's first fork is that namespace's first process."""
    sandbox: object           # the Sandbox whose choices it carries out
    uid: int = -1              # -1: keep the grader's user
    cgroup: pathlib.Path = None
    home: pathlib.Path = None  # the private directory (removed by close())
    memcg: pathlib.Path = None  # the run's memory cgroup, when the machine has one
    cpucg: pathlib.Path = None  # the run's cpu cgroup (its share of the machine)
    private: bool = True       # own /tmp and /dev/shm, where the machine allows
    mounted: bool = False      # home is a tmpfs of its own (the run's disk quota)
    binds: list = None         # a minimal root of its own (kernel.minimal_root) holding these (path, writable)
    newroot: pathlib.Path = None  # the empty folder that root is mounted on
    cwd: str = None            # where the command starts inside that root

    def preexec(self):
        sb = self.sandbox
        if self.cgroup is not None:
            kernel.write(self.cgroup / "cgroup.procs", str(os.getpid()))
        if self.memcg is not None:
            kernel.write(self.memcg / "cgroup.procs", str(os.getpid()))
        if self.cpucg is not None:
            kernel.write(self.cpucg / "cgroup.procs", str(os.getpid()))
        # CLONE_NEWPID takes effect for this process's children: the command
        # (self.command) is unshare(1), whose forked child is the namespace's
        # first process and execs the runner
        pid = kernel.CLONE_NEWPID if getattr(sb, "pidns", None) else 0
        if sb.netns == "root":
            kernel.unshare(kernel.CLONE_NEWNET | kernel.CLONE_NEWIPC | pid)
            kernel.loopback_up()
        elif sb.netns == "user":
            uid, gid = os.getuid(), os.getgid()
            kernel.unshare(kernel.CLONE_NEWUSER | kernel.CLONE_NEWNET | kernel.CLONE_NEWIPC | pid)
            kernel.write("/proc/self/setgroups", "deny")
            kernel.write("/proc/self/uid_map", f"{uid} {uid} 1")
            kernel.write("/proc/self/gid_map", f"{gid} {gid} 1")
            kernel.loopback_up()
        if self.binds is not None:
            kernel.minimal_root(str(self.newroot), self.binds, self.cwd)
        elif sb.private_dirs and self.private:
            kernel.private_dirs(self.home, getattr(sb, "protected", ()))
        if self.uid >= 0:
            if self.cgroup is None:
                import resource
                resource.setrlimit(resource.RLIMIT_NPROC, (PIDS_MAX, PIDS_MAX))
            os.setgroups([])
            os.setgid(self.uid)
            if not self._unshare_sets_user():
                os.setuid(self.uid)

    def _unshare_sets_user(self):
        """As root in a PID namespace, unshare(1) mounts that namespace's own
        /proc and only then becomes the run's user (a user id of its own
        could not mount it)."""
        return bool(getattr(self.sandbox, "pidns", None)) and getattr(self.sandbox, "root", False) and self.uid >= 0

    def command(self, cmd):
        """cmd as the run starts it: where the machine allows, in a PID
        namespace of its own (sandbox.py, "processes"), with a /proc that
        shows that namespace's processes alone, as the run's own user."""
        pidns = getattr(self.sandbox, "pidns", None)
        if not pidns:
            return list(cmd)
        if not getattr(self.sandbox, "root", False):
            return [*pidns, *cmd]
        user = ["--setgid", str(self.uid), "--setuid", str(self.uid)] if self.uid >= 0 else []
        return [*pidns[:-1], "--mount-proc", *user, "--", *cmd]

    def fork_failures(self):
        """How many forks the process limit refused in this run; -1 when it
        was reached but the refusals cannot be counted (RLIMIT_NPROC: the run's
        user holds nearly PIDS_MAX tasks at the end)."""
        if self.cgroup is None:
            if self.uid < 0:
                return 0
            tasks = 0
            for status in pathlib.Path("/proc").glob("[0-9]*/status"):
                try:
                    fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
                except OSError:
                    continue
                if fields.get("Uid", "").split()[:1] == [str(self.uid)]:
                    tasks += int(fields.get("Threads", "1").strip() or 1)
            return -1 if tasks >= PIDS_MAX - 8 else 0
        return _counter(self.cgroup / "pids.events", "max")

    def tasks(self):
        """The thread ids of every task in the run now (its pids cgroup's
        `tasks`, v1, or `cgroup.threads`, v2); [] without a cgroup."""
        if self.cgroup is None:
            return []
        for name in ("tasks", "cgroup.threads"):
            try:
                return (self.cgroup / name).read_text().split()
            except OSError:
                continue
        return []

    def oom_kills(self):
        """How many processes of this run the kernel killed for going over
        the run's memory limit."""
        if self.memcg is None:
            return 0
        return max(_counter(self.memcg / "memory.events", "oom_kill"),          # v2
                   _counter(self.memcg / "memory.oom_control", "oom_kill"))     # v1

    @staticmethod
    def _remove_group(group):
        for _ in range(100):   # a task that just exited may hold the cgroup for a moment
            try:
                group.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                threading.Event().wait(0.01)

    def kill_all(self):
        """Kills every process left in the run's cgroup, then removes it.
        Without a cgroup but with a user id of its own, every process of that
        user: `kill -9 -1` run as that user reaches all of them and nothing
        else, a fork bomb's children that left the session included."""
        if self.cgroup is None:
            if self.uid >= 0:
                def as_jail_user():
                    os.setgroups([])
                    os.setgid(self.uid)
                    os.setuid(self.uid)
                for _ in range(5):
                    subprocess.run(["kill", "-9", "-1"], preexec_fn=as_jail_user,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            return
        try:
            kernel.write(self.cgroup / "pids.max", "0")  # no more forks: a fork bomb cannot outrun the kills
        except OSError:
            pass
        for _ in range(250):
            try:
                pids = [int(p) for p in (self.cgroup / "cgroup.procs").read_text().split()]
            except OSError:
                break
            if not pids:
                break
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            threading.Event().wait(0.02)
        self._remove_group(self.cgroup)

    def close(self):
        self.kill_all()
        for group in (self.memcg, self.cpucg):
            if group is not None:
                self._remove_group(group)
        if self.mounted:
            try:
                kernel.umount(self.home)
            except OSError:
                pass
        if self.home is not None:
            shutil.rmtree(self.home, ignore_errors=True)
        if self.newroot is not None:
            try:
                self.newroot.rmdir()   # only ever mounted on inside the run's own mount namespace
            except OSError:
                pass


# What the grader reads of a run (binary_run.py, lanes.py): the runner's report,
# the tests' records, the tools' logs. Nothing else a test left comes back.
KEPT = ("report.xml", "rec", "vg", "tsan")


def copy_back(src, dst, kept=KEPT):
    """Copies what the grader reads of a run's directory (kept: files and
    folders at its top) into the grader's own run directory: regular files
    only, never a link, never more than COPY_BACK_FILES files or
    COPY_BACK_BYTES bytes in all, the smallest first, a file that does not
    fit cut; so a run that filled its disk quota, or left thousands of files
    (the third red-team pass: 103 MB in 70,104 files per stage-01 grading,
    kept in build/grade/runs), leaves the grader's disk as it was and its
    records intact."""
    found, seen = [], 0   # seen: directories and files looked at, in all
    src = pathlib.Path(src)
    for top in kept:
        if (src / top).is_symlink() or seen >= COPY_BACK_FILES:
            continue   # a link the test put in the place of a folder leads nowhere of the grader's
        walk = [(str(src), [], [top])] if (src / top).is_file() else os.walk(src / top, followlinks=False)
        for dirpath, dirnames, filenames in walk:
            rel = pathlib.Path(dirpath).relative_to(src)
            seen += 1 + len(filenames)
            for f in filenames:
                p = pathlib.Path(dirpath) / f
                try:
                    st = p.lstat()
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    found.append((st.st_size, str(rel / f)))
            if seen >= COPY_BACK_FILES:
                break   # the whole walk: a run that made a million folders costs no more than this
    left = COPY_BACK_BYTES
    for n, (size, rel) in enumerate(sorted(found)):
        if left <= 0 or n >= COPY_BACK_FILES:
            return
        left -= 64   # an empty file costs something too: its folder and its entry
        try:
            fd = os.open(pathlib.Path(src) / rel, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)   # only the folders of a file copied
        with os.fdopen(fd, "rb") as fin, open(dst / rel, "wb") as fout:
            data = fin.read(min(left, COPY_BACK_FILE_BYTES))
            fout.write(data)
            left -= len(data)
