"""Writing a report file whole or not at all: a grading killed mid-write
(Gradescope's time limit, a timeout) must never leave half a results.json."""
import os
import pathlib
import tempfile


def write_atomic(path, data):
    """data (bytes) into path: a temporary file in the same folder, renamed."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise
    return path
