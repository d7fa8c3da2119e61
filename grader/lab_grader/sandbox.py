"""Where a test binary runs: as whom, on which network, under which process limit.

Student code runs inside the test binaries, so every run of one is jailed as
far as the machine allows, and the grader says how far that was:

  user      As root, each run gets a user id of its own (an unused number,
            no /etc/passwd entry needed) and a private directory owned by
            it, with a copy of the binary. The grader's files (root's, mode
            644) cannot be written, and one run cannot touch another's
            records. Not root: the run keeps the grader's user, and the
            private directory is still where it writes.
  network   A new network namespace with only its loopback, brought up, so a
            test can talk to 127.0.0.1 and nothing else. As root directly;
            otherwise inside a new user namespace (the same user id mapped to
            itself). Where the kernel refuses, the run has the machine's
            network and the report says so.
  processes A pids cgroup per run (cgroup v1's pids hierarchy, or v2 where its
            pids controller is enabled), so a fork bomb stops at PIDS_MAX
            tasks, and every process of the run is killed at its end, even
            one that left the runner's session. Without a cgroup, as root,
            RLIMIT_NPROC does the counting (it counts the tasks of a user id,
            and each run has its own) and `kill -9 -1` as that user does the
            killing; otherwise there is no process limit, and the report says
            so. LAB_SANDBOX_CGROUP=0 leaves the cgroup out (to test that path).
            A PID namespace of its own, as root or, not root, inside the
            user namespace (made between fork and exec, where the run still
            holds that namespace's capabilities, which an exec as a non-zero
            user id drops); util-linux's `unshare --fork --kill-child` starts
            the runner as its first process. A test's kill(-1) then reaches
            the run's other processes but never its runner (pid_namespaces(7)):
            its tests fail as killed, where before, as root, the runner died
            and they went unjudged, and, not root, every process of the user
            who grades died. Every process of the run dies with the runner, a
            daemon that left its session included.
  cpu       A cpu cgroup per run, all of equal weight: a run that starts 500
            busy threads gets one run's share of the machine, not 500 tasks'
            worth, and the runs beside it keep theirs. What a run's tasks got
            and how long they waited for a CPU is read from the kernel
            (/proc/<tid>/schedstat) while it runs, so a test that timed out
            because others held the CPU is told from one that hung (binary_run.py).
  disk      The run's private directory is a tmpfs of RUN_DISK bytes, and the
            private /tmp and /dev/shm are tmpfs of kernel.PRIVATE_DIR_SIZE: a
            test that fills the disk meets ENOSPC there, the machine's disk
            never fills.
  files     A new mount namespace with an empty /tmp and /dev/shm of its own
            (tmpfs), the run's private directory bound back in at its place.
            Criterion names its socket /tmp/criterion_<pid>.sock and its
            shared memory /dev/shm/bxfi_<pid>: with pids recycled (pid_max
            is often 32768) and runs killed before they clean up, a stale one
            owned by another run's user id made the runner abort with
            "Address already in use". Where the kernel refuses, the run sees
            the machine's /tmp, and the report says so.

Every step that runs in the child (between fork and exec) is plain system
calls (kernel.py), with no allocation-heavy Python in between. The groups
below which each run gets its own are made by cgroups.py.
"""
import atexit
import os
import pathlib
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time

from . import arguments, cgroups, kernel
from .jail import PIDS_MAX, Jail

MEMORY_MAX = 3 << 30    # bytes of memory one run may hold (the lanes say their own; see binary_run.py)
RUN_DISK = 512 << 20    # bytes a run's private directory may hold (a tmpfs)
UID_BASE = 1 << 20      # private user ids are drawn from [UID_BASE, UID_BASE + 2^30)


class Sandbox:
    """What this machine allows, decided once per grader process."""

    def __init__(self, enabled=True, use_cgroups=True):
        """enabled, use_cgroups: LAB_SANDBOX and LAB_SANDBOX_CGROUP (arguments.Environment)."""
        self.root = os.geteuid() == 0
        self.enabled = enabled
        cgroups_allowed = enabled and self.root and use_cgroups
        self.pids_root = cgroups.controller_root("pids") if cgroups_allowed else None
        self.netns = "none"
        self.private_dirs = False  # own /tmp and /dev/shm (a mount namespace)
        self.pidns = None          # not root: the command that starts a run in a PID namespace of its own
        self.minimal_root = False  # each run in a root of its own (kernel.minimal_root)
        self.protected = ()        # folders bound read-only in a run's mount namespace (protect)
        self.why_not = []   # what could not be had, in plain words
        self.base = None
        self._group = None
        self._mem_group = None
        self._cpu_group = None
        self.disk_quota = False   # the run's directory is a tmpfs of RUN_DISK bytes
        if not enabled:
            self.why_not.append("sandbox turned off (LAB_SANDBOX=0)")
            return
        self.base = pathlib.Path(tempfile.gettempdir()) / f"lab-grader-{os.getuid()}"
        self.base.mkdir(mode=0o711, exist_ok=True)
        os.chmod(self.base, 0o711)
        if self.pids_root is not None:
            cgroups.remove_stale_groups(self.pids_root)
            self._group = self.pids_root / f"lab-grader-{os.getpid()}-{secrets.token_hex(3)}"
            try:
                self._group.mkdir()
            except OSError as e:
                self.why_not.append(f"no pids cgroup ({e.strerror})")
                self.pids_root = self._group = None
        self._mem_group = self._grader_group("memory", "memory limit per run, beyond the process limits",
                                             cgroups_allowed)
        self._cpu_group = self._grader_group("cpu", "CPU share per run: a run's threads compete one by one",
                                             cgroups_allowed)
        if self.root:
            self.disk_quota = _tmpfs_works(self.base)
        if not self.disk_quota:
            self.why_not.append("no disk quota per run (a tmpfs could not be mounted): "
                                "only the 32-MiB limit on each file")
        if self.pids_root is None and not self.root:
            self.why_not.append("no process limit (neither a writable pids cgroup nor a user id of its own)")
        for mode in (("root",) if self.root else ("user",)):
            self.netns = mode
            err = self._probe()
            if err is None:
                break
            self.netns = "none"
            self.why_not.append(f"the machine's network is shared: a network namespace was refused ({err})")
        self.private_dirs = True
        err = self._probe()
        if err is not None:
            self.private_dirs = False
            self.why_not.append(f"the machine's /tmp and /dev/shm are shared: a mount namespace was refused ({err})")
        err = self._probe_pidns()
        if err is not None:
            reach = "can stop its own test runner" if self.root else "reaches every process of yours"
            self.why_not.append(f"a test's kill(-1) {reach}: no PID namespace ({err})")
        self.minimal_root = True   # a root of its own per run: the machine's files out of sight (probed)
        err = self._probe_root()
        if err is not None:
            self.minimal_root = False
            self.why_not.append(f"a run sees the machine's files (the grader's included): no root of its own ({err})")

    def protect(self, paths):
        """Folders a run must not write (the grader's checkout, the hidden
        tests): where a run keeps the grader's user (not root) and has a
        mount namespace, each is bound read-only in it. (As root a run has a
        root of its own, where they are not there at all.)"""
        self.protected = tuple(sorted({str(pathlib.Path(p).resolve()) for p in paths if p}))

    def _grader_group(self, controller, what, allowed):
        group, why_not = cgroups.grader_group(controller, what, allowed)
        if why_not:
            self.why_not.append(why_not)
        return group

    def _probe(self):
        """Tries a jail in a forked child: the steps every run's preexec
        takes between fork and exec, then an exit. None when it worked, else
        why not (the error of the step that failed, in the kernel's words).
        A fork of the grader, as subprocess makes for every run, rather than
        a new Python each time: Sandbox() with its two probes took 0.27 s
        per grading that way, 0.08 s this way."""
        jail = self.jail()
        r, w = os.pipe()
        try:
            pid = os.fork()
            if pid == 0:   # the child never returns into the grader
                _probe_child(self, jail, r, w)
            os.close(w)
            w = -1
            deadline = time.monotonic() + 30
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    return "the jail's set-up did not finish in 30 s"
                time.sleep(0.002)
            why = os.read(r, 4096).decode(errors="replace").strip()
            return None if os.waitstatus_to_exitcode(status) == 0 else (why or "refused")
        except OSError as e:
            return e.strerror or str(e)
        finally:
            os.close(r)
            if w >= 0:
                os.close(w)
            jail.close()

    def _probe_pidns(self):
        """Can a run start in a PID namespace of its own? Sets self.pidns to
        the command prefix when it can; else says why not. Made where the
        network namespace is (Jail.preexec): as root, or not root inside the
        user namespace, which is where the run has the capability."""
        if self.netns == "none":
            return "no network or user namespace either"
        unshare = shutil.which("unshare")
        if unshare is None:
            return "util-linux's unshare is not installed"
        self.pidns = [unshare, "--fork", "--kill-child", "--"]
        jail = self.jail()
        try:
            p = subprocess.run(jail.command(["sh", "-c", "test $$ = 1"]), preexec_fn=jail.preexec,
                               capture_output=True, text=True, timeout=30)
            if p.returncode == 0:
                return None
            err = (p.stderr.strip().splitlines() or [f"status {p.returncode}"])[-1]
        except (OSError, subprocess.SubprocessError) as e:
            err = str(e)
        finally:
            jail.close()
        self.pidns = None
        return err

    def _probe_root(self):
        """Can a run have a root of its own (kernel.minimal_root), with its
        PID namespace's own /proc? None when it can; else why not. As root
        only: not root, the run has lost the capabilities to mount /proc by
        the time its PID namespace has a first process."""
        if not self.root:
            return "not root"
        if not self.pidns:
            return "no PID namespace"
        jail = self.jail(binds=[])
        try:
            if jail.uid >= 0:
                os.chown(jail.home, jail.uid, jail.uid)
            p = subprocess.run(jail.command(["sh", "-c", "test -d /usr/include && test ! -e /root/. && "
                                             "test \"$(ls /proc | grep -c '^[0-9]')\" -lt 5 && "
                                             "echo x > /tmp/x && echo x > " + str(jail.home) + "/x"]),
                               preexec_fn=jail.preexec, capture_output=True, text=True, timeout=30)
            if p.returncode == 0:
                return None
            return (p.stderr.strip().splitlines() or [f"status {p.returncode}"])[-1]
        except (OSError, subprocess.SubprocessError) as e:
            return str(e)
        finally:
            jail.close()

    def jail(self, memory=MEMORY_MAX, private=True, quota=None, own_user=True, binds=None):
        """One run's Jail. private=False: no mount namespace of its own;
        own_user=False: the grader's user id; quota: CPUs the run may use
        (LAB_RUN_CPU_QUOTA; only the grader's own tests set it); binds: the
        run sees only a root of its own (kernel.minimal_root, where the
        machine allows it) with its private directory and these (path,
        writable) in it."""
        if not self.enabled:
            return Jail(self)
        j = Jail(self, private=private)
        if self.root and own_user:
            j.uid = UID_BASE + secrets.randbelow(1 << 30)
        j.home = pathlib.Path(tempfile.mkdtemp(prefix="run-", dir=self.base))
        os.chmod(j.home, 0o711)
        if binds is not None and self.minimal_root and self.pidns:
            j.binds = [(str(j.home), True), *((str(p), w) for p, w in binds)]
            j.newroot = pathlib.Path(tempfile.mkdtemp(prefix="root-", dir=self.base))
        if self.disk_quota:
            try:
                kernel.tmpfs(j.home, RUN_DISK, 0o711)
                j.mounted = True
            except OSError:
                pass   # this run without a quota; the probe said the machine allows it
        if self._cpu_group is not None:
            j.cpucg = self._cpu_group / secrets.token_hex(6)
            j.cpucg.mkdir()
            if quota is not None:   # a run held to `quota` CPUs (tests of the starvation check)
                cgroups.set_cpu_quota(j.cpucg, quota)
        if self._group is not None:
            j.cgroup = self._group / secrets.token_hex(6)
            j.cgroup.mkdir()
            kernel.write(j.cgroup / "pids.max", str(PIDS_MAX))
        if self._mem_group is not None:
            j.memcg = self._mem_group / secrets.token_hex(6)
            j.memcg.mkdir()
            for name in ("memory.limit_in_bytes", "memory.max"):   # v1, v2
                if (j.memcg / name).exists():
                    kernel.write(j.memcg / name, str(memory))
            if (j.memcg / "memory.swap.max").exists():
                kernel.write(j.memcg / "memory.swap.max", "0")
        return j

    def unsealed(self, why):
        """A test process said it ran without the seal (harness.c,
        seal_code): the report's header says so, once."""
        note = (f"a test process ran without the seal ({why[:120]}): a failed check still reaches the "
                "grader, but the code could change its own image")
        if note not in self.why_not:
            self.why_not.append(note)

    def describe(self):
        """One line for the report's header."""
        if not self.enabled:
            return "sandbox: off (LAB_SANDBOX=0)"
        parts = []
        parts.append("each run as a user id of its own" if self.root else "as your own user")
        parts.append("own network namespace (loopback only)" if self.netns != "none" else "shared network")
        if self.pidns:
            parts.append("own PID namespace")
        if self.minimal_root:
            parts.append("a root of its own (/usr and its own folders only; its own /proc, /tmp, /var/tmp, "
                         "/dev/shm; own IPC namespace)")
        elif self.private_dirs:
            parts.append("own /tmp, /var/tmp and /dev/shm")
        if self._group is not None:
            parts.append(f"at most {PIDS_MAX} tasks (pids cgroup)")
        elif self.root:
            parts.append(f"at most {PIDS_MAX} tasks (RLIMIT_NPROC)")
        if self._mem_group is not None:
            parts.append("a memory limit per run (memory cgroup)")
        if self._cpu_group is not None:
            parts.append("an equal CPU share per run (cpu cgroup)")
        if self.disk_quota:
            parts.append(f"{RUN_DISK >> 20} MiB of disk per run (tmpfs)")
        line = "sandbox: " + ", ".join(parts)
        if self.why_not:
            line += "\n  (" + "; ".join(self.why_not) + ")"
        return line

    def close(self):
        for g in (self._group, self._mem_group, self._cpu_group):
            if g is not None:
                try:
                    g.rmdir()
                except OSError:
                    pass


_shared = None
_shared_lock = threading.Lock()


def shared(environment=None):
    """The grader process's one Sandbox, made at the first call, from
    `environment` (arguments.Environment: LAB_SANDBOX=0 turns it off), or,
    when the first caller has none at hand, from arguments.read_environment."""
    global _shared
    with _shared_lock:
        if _shared is None:
            env = environment or arguments.read_environment()
            _shared = Sandbox(enabled=env.sandbox, use_cgroups=env.sandbox_cgroups)
            atexit.register(_shared.close)
        return _shared


def _tmpfs_works(base):
    """Can this process mount (and unmount) a tmpfs below base?"""
    probe = pathlib.Path(tempfile.mkdtemp(prefix="probe-", dir=base))
    try:
        kernel.tmpfs(probe, 1 << 20, 0o700)
        kernel.umount(probe)
        return True
    except OSError:
        return False
    finally:
        probe.rmdir()


def _probe_child(sb, jail, r, w):
    """Sandbox._probe's forked child: one jail's steps, in the order a run's
    (the directory first, as subprocess's cwd=, then preexec); exits 0, or 1
    with why not written to w. Never returns."""
    status = 1
    try:
        os.close(r)
        os.chdir(jail.home)
        jail.preexec()
        if sb.private_dirs and not os.path.isdir(jail.home):
            os.write(w, f"the run's directory {jail.home} is missing inside the new /tmp".encode())
        else:
            status = 0
    except OSError as e:
        os.write(w, (e.strerror or str(e)).encode())
    except BaseException as e:   # anything at all: the child must reach _exit
        os.write(w, (str(e) or type(e).__name__).encode())
    finally:
        os._exit(status)
