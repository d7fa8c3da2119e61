"""The progress line on a terminal: which item, how many done and left, how
long so far, and which items failed so far.

On a terminal the line rewrites itself in place of pytest's dots, and its
clock ticks while an item waits; it is erased before the report prints. In
a log (CI, grade-class, Gradescope) there is no line (write is None) and
the dots stay, one per item.
"""
import threading
import time


class Progress:
    def __init__(self, write, total, began):
        """write(text) puts text on the terminal at once (None: not a
        terminal, no line); total: the items to grade; began: the
        grading's time.monotonic() at its start."""
        self._write = write
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.total, self.began = total, began
        self.done, self.failed, self.current = 0, [], ""
        if write is not None:
            threading.Thread(target=self._tick, daemon=True).start()

    @property
    def shown(self):
        """Is the line on the terminal (until end())?"""
        return self._write is not None

    def started(self, key):
        """An item is being graded (its key, stage/id)."""
        if self._write is None:
            return
        self.current = key
        self._show(self._line())

    def judged(self, key, failed):
        self.done += 1
        if failed:
            self.failed.append(key.split("/")[-1])

    def end(self):
        """Erases the line, for good: before pytest's own newline."""
        self._stop.set()
        self._show("")
        with self._lock:
            self._write = None

    def _show(self, text):
        with self._lock:
            if self._write is not None:
                self._write("\r\033[K" + text)

    def _line(self):
        secs = int(time.monotonic() - self.began)
        failed = self.failed
        # a failure shows as soon as it is judged: a stage whose other lanes take
        # minutes (Valgrind on a stalling runtime) names its broken item at once
        shown = ", ".join(failed[:3]) + (f" and {len(failed) - 3} more" if len(failed) > 3 else "")
        return (f"grading {self.current}   ({self.done} of {self.total} items done, {self.total - self.done} left, "
                f"{secs // 60}:{secs % 60:02d} so far" + (f"; failed so far: {shown}" if failed else "") + ")")

    def _tick(self):
        while not self._stop.wait(1.0):
            if self._write is not None and self.current:
                self._show(self._line())
