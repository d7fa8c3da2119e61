"""The cgroups a grader makes for its runs (sandbox.py): where a group of a
controller can be made, this grader's own group below which each run gets
one, a CPU quota, and the clean-up of groups left by graders that are gone.
Each grader's group is named lab-grader-<pid>-<random>."""
import os
import pathlib
import secrets

from . import kernel, machine


def own_v1_group(name):
    """This process's own cgroup folder in v1's hierarchy of controller
    `name`, or None: the runs' groups are made below it, so every limit the
    grader itself is under (a container's, a test's 0.5-CPU quota) holds for
    them too."""
    for controllers, path in machine.own_cgroups():
        if name in controllers.split(","):
            for mount in (controllers, name):
                d = pathlib.Path("/sys/fs/cgroup") / mount / path
                if (d / "cgroup.procs").exists():
                    return d
    return None


def controller_root(name):
    """A directory where a cgroup of controller `name` (pids, memory, cpu)
    can be made: this process's own group in cgroup v1's hierarchy of that
    name, or v2 where it is enabled."""
    v1 = own_v1_group(name)
    if v1 is not None and os.access(v1, os.W_OK):
        return v1
    for v2 in (pathlib.Path("/sys/fs/cgroup"), pathlib.Path("/sys/fs/cgroup/unified")):
        try:
            if name in (v2 / "cgroup.subtree_control").read_text().split() and os.access(v2, os.W_OK):
                return v2
        except OSError:
            continue
    return None


def grader_group(controller, what, allowed=True):
    """This grader's cgroup of `controller` (memory, cpu), below which
    each run gets one: (group, None); or (None, why not, in words naming
    `what` the group would have limited) where there is none: not
    `allowed` (not root, LAB_SANDBOX_CGROUP=0), no writable one, or
    refused."""
    root = controller_root(controller) if allowed else None
    if root is None:
        return None, f"no {what} (no writable {controller} cgroup)"
    remove_stale_groups(root)
    group = root / f"lab-grader-{os.getpid()}-{secrets.token_hex(3)}"
    try:
        group.mkdir()
        if (root / "cgroup.subtree_control").exists():   # v2: give the children the controller
            kernel.write(group / "cgroup.subtree_control", f"+{controller}")
    except OSError as e:
        return None, f"no {what} (a {controller} cgroup was refused: {e.strerror})"
    return group, None


def set_cpu_quota(group, cpus):
    period = 100000
    if (group / "cpu.max").exists():                       # v2
        kernel.write(group / "cpu.max", f"{int(cpus * period)} {period}")
    else:                                                   # v1
        kernel.write(group / "cpu.cfs_period_us", str(period))
        kernel.write(group / "cpu.cfs_quota_us", str(int(cpus * period)))


def remove_stale_groups(root):
    """Removes the empty cgroups of grader processes that are gone (killed
    before they could remove their own)."""
    for g in root.glob("lab-grader-*"):
        try:
            pid = int(g.name.split("-")[2])
        except (IndexError, ValueError):
            continue
        if pathlib.Path(f"/proc/{pid}").exists():
            continue
        for child in g.iterdir():
            if child.is_dir():
                try:
                    child.rmdir()
                except OSError:
                    pass
        try:
            g.rmdir()
        except OSError:
            pass
