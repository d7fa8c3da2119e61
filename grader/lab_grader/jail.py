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
import subprocess
import threading

from . import kernel

PIDS_MAX = 512          # tasks (processes and threads) in one run
COPY_BACK_FILES = 20000  # at most this many files come back from a run's directory


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
            kernel.unshare(kernel.CLONE_NEWNET | pid)
            kernel.loopback_up()
        elif sb.netns == "user":
            uid, gid = os.getuid(), os.getgid()
            kernel.unshare(kernel.CLONE_NEWUSER | kernel.CLONE_NEWNET | pid)
            kernel.write("/proc/self/setgroups", "deny")
            kernel.write("/proc/self/uid_map", f"{uid} {uid} 1")
            kernel.write("/proc/self/gid_map", f"{gid} {gid} 1")
            kernel.loopback_up()
        if sb.private_dirs and self.private:
            kernel.private_dirs(self.home)
        if self.uid >= 0:
            if self.cgroup is None:
                import resource
                resource.setrlimit(resource.RLIMIT_NPROC, (PIDS_MAX, PIDS_MAX))
            os.setgroups([])
            os.setgid(self.uid)
            os.setuid(self.uid)

    def command(self, cmd):
        """cmd as the run starts it: where the machine allows, in a PID
        namespace of its own (sandbox.py, "processes")."""
        return [*self.sandbox.pidns, *cmd] if getattr(self.sandbox, "pidns", None) else list(cmd)

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


def copy_back(src, dst):
    """Copies the regular files of a run's directory (never a link, never
    more than COPY_BACK_FILES of them) into the grader's own run directory."""
    n = 0
    for dirpath, dirnames, filenames in os.walk(src, followlinks=False):
        rel = pathlib.Path(dirpath).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for f in filenames:
            p = pathlib.Path(dirpath) / f
            if p.is_symlink() or not p.is_file():
                continue
            n += 1
            if n > COPY_BACK_FILES:
                return
            shutil.copyfile(p, dst / rel / f, follow_symlinks=False)
