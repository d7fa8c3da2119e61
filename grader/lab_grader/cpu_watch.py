"""What CPU one run got, read from the kernel while it runs, so that a test
that timed out because other work held the machine is told apart from a test
that hung.

Every SAMPLE_EVERY seconds the watch reads /proc/<tid>/schedstat for every
task in the run's cgroup: the first field is the nanoseconds the task ran,
the second the nanoseconds it sat runnable on a run queue, waiting for a CPU
(Documentation/scheduler/sched-stats.rst in the Linux source). The totals are
summed over the last value seen of each task (a task that lived less than one
sample between two reads is missed; that only makes the totals smaller).

A run was starved when the machine, not the run, kept its tasks from a CPU:
its tasks waited for one at least STARVED_WAIT of its wall time, got no
more than half of the CPU time they were ready to use, and were on average no
more runnable tasks than the machine has CPUs. The last clause is what keeps
the numbers honest: a run that starts 500 busy threads (a fork bomb, a
student making their own tasks wait) has hundreds runnable at once and waits
because of itself, on any machine: not starved, its test fails. A test that
hangs in a deadlock sleeps (no wait, no CPU): not starved. A test that spins
on a free machine gets its CPU: not starved. The numbers come from the
kernel, outside the run, so its code cannot forge them; at worst a run
shaped to look starved on a busy machine is not judged and regraded, never
given a point. Without a pids cgroup (not root) there is no list of the
run's tasks, and no test is ever called starved.
"""
import threading
import time

from . import machine

SAMPLE_EVERY = 0.25
STARVED_WAIT = 0.5   # of the wall time, summed over the run's tasks
STARVED_SHARE = 0.5  # of the CPU time the run's tasks were ready to use


def _schedstat(tid):
    try:
        with open(f"/proc/{tid}/schedstat") as f:
            ran, waited = f.read().split()[:2]
        return int(ran), int(waited)
    except (OSError, ValueError):
        return None


def _cpus():
    """CPUs the machine gives this grading: its affinity, or a cgroup quota
    below it (0.5 on Gradescope's default: there a run with one busy task is
    not starved by getting half a CPU, that is the machine)."""
    return machine.share()


class Watch:
    """Samples a jail's tasks on a thread of its own between start() and stop()."""

    def __init__(self, jail):
        self.jail = jail
        self.seen = {}      # tid: (ns ran, ns waited), the last reading
        self.wall = 0.0
        self._stop = threading.Event()
        self._thread = None
        self._began = 0.0

    def start(self):
        self._began = time.monotonic()
        if self.jail.cgroup is not None:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def _loop(self):
        while not self._stop.wait(SAMPLE_EVERY):
            self.sample()

    def sample(self):
        for tid in self.jail.tasks():
            stat = _schedstat(tid)
            if stat is not None:
                self.seen[tid] = stat

    def stop(self):
        """Ends the watch (call it before the run's tasks are killed)."""
        self.sample()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.wall = time.monotonic() - self._began
        return self

    @property
    def cpu(self):
        return sum(r for r, _ in self.seen.values()) / 1e9

    @property
    def waited(self):
        return sum(w for _, w in self.seen.values()) / 1e9

    def starved(self, cpus=None):
        if self.wall <= 0:
            return False
        cpus = cpus or _cpus()
        runnable = (self.cpu + self.waited) / self.wall   # tasks ready to run, on average
        return (self.waited >= STARVED_WAIT * self.wall and runnable <= cpus
                and self.cpu <= STARVED_SHARE * runnable * self.wall)

    def describe(self):
        return (f"in {self.wall:.1f} s the run's tasks got {self.cpu:.1f} s of CPU and waited "
                f"{self.waited:.1f} s for one; the machine has {_cpus():g} CPUs")
