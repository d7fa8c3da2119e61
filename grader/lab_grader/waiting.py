"""Work done once, in a thread of its own, and waited for by whoever needs
it: how the pipeline runs its stages and lanes side by side (pipeline.py)."""
import concurrent.futures
import threading


def spawn(fn, *args):
    """fn(*args) in a thread of its own; its result (or exception) in a Future."""
    fut = concurrent.futures.Future()

    def go():
        try:
            fut.set_result(fn(*args))
        except BaseException as e:  # noqa: BLE001 - handed to whoever waits
            fut.set_exception(e)
    threading.Thread(target=go, daemon=True).start()
    return fut


class Memo:
    """Runs each keyed computation once; other callers wait for its result."""

    def __init__(self):
        self._lock = threading.Lock()
        self._futures = {}

    def get(self, key, fn):
        with self._lock:
            fut = self._futures.get(key)
            owner = fut is None
            if owner:
                fut = self._futures[key] = concurrent.futures.Future()
        if owner:
            try:
                fut.set_result(fn())
            except BaseException as e:  # noqa: BLE001 - handed to every waiter
                fut.set_exception(e)
        return fut.result()
