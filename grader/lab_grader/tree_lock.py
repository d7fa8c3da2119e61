"""One grading of a tree at a time: two would share (and delete) each
other's run directories and binaries. A second one waits."""
import fcntl


class TreeLock:
    """Held from acquire() to release(), on a file beside the tree's run
    directory `work`."""

    def __init__(self, work, target):
        self.work = work
        self.target = target
        self._file = None

    def acquire(self):
        self.work.mkdir(parents=True, exist_ok=True)
        self._file = open(self.work.with_suffix(".lock"), "w")
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"another grading of {self.target} is running; waiting for it", flush=True)
            fcntl.flock(self._file, fcntl.LOCK_EX)

    def release(self):
        if self._file:
            self._file.close()  # releases the lock
            self._file = None
