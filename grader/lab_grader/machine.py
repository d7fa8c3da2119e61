"""How many CPUs this grading really has: the fewest of what the kernel lets
this process run on (its affinity) and what its cgroup's CPU quota allows
(cgroup v2's cpu.max, v1's cpu.cfs_quota_us over cpu.cfs_period_us).
os.cpu_count() sees neither: Gradescope's default container has a quota of
half a CPU on a many-core host."""
import math
import os
import pathlib


def own_cgroups():
    """[(controllers, path)] of this process, from /proc/self/cgroup: one
    entry per hierarchy ("" is cgroup v2's), the path without its leading /."""
    try:
        lines = pathlib.Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        out.append((controllers, path.lstrip("/")))
    return out


def _own_cgroup_dirs():
    """The cgroup folders of this process, v2 first, then v1's cpu ones."""
    out = []
    for controllers, path in own_cgroups():
        if controllers == "":
            out += [pathlib.Path("/sys/fs/cgroup") / path, pathlib.Path("/sys/fs/cgroup/unified") / path]
        elif "cpu" in controllers.split(","):
            for mount in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
                out.append(pathlib.Path("/sys/fs/cgroup") / mount / path)
    return out


def quota():
    """The CPU quota in CPUs (a float), or None when there is none."""
    best = None
    for d in _own_cgroup_dirs():
        # the quota of a folder and of every folder above it applies
        for p in [d, *d.parents]:
            if p == pathlib.Path("/sys/fs") or len(p.parts) < 4:
                break
            q = None
            try:
                text = (p / "cpu.max").read_text().split()
                if text and text[0] != "max":
                    q = int(text[0]) / int(text[1])
            except (OSError, ValueError, IndexError):
                try:
                    us = int((p / "cpu.cfs_quota_us").read_text())
                    period = int((p / "cpu.cfs_period_us").read_text())
                    if us > 0 and period > 0:
                        q = us / period
                except (OSError, ValueError):
                    pass
            if q is not None and (best is None or q < best):
                best = q
    return best


def share():
    """The CPUs this grading can use, as a fraction: its affinity's CPUs, or
    the cgroup quota when that is less (0.5 on Gradescope's default)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    q = quota()
    return min(n, q) if q is not None else n


def cpus():
    """Whole CPUs this grading can use at once (at least 1)."""
    return max(1, math.floor(share() + 1e-9))


def describe():
    q = quota()
    return f"{cpus()} CPU(s) usable" + (f" (a cgroup quota of {q:g} CPUs)" if q is not None else "")
