"""Where io_uring is refused (a seccomp filter, as Docker's default profile
since 25.0; a kernel without it; io_uring_disabled), stage 08's items are
"not judged" in one line each, never failed: every test probes
io_uring_setup first and ends with lab_cannot_judge (grader/tests/08-uring/
support.c). Here the reference is graded under a seccomp filter that
refuses io_uring_setup with EPERM (data/no_io_uring.c), on one item of each
lane the stage has."""
import json
import os
import platform
import subprocess
import sys
import time

import pytest

from conftest import ROOT, every_lane, stages

STAGE = next((s for s in stages() if "uring" in s.libs), None)


@pytest.mark.skipif(STAGE is None, reason="no stage links liburing")
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the filter names x86-64's system call number")
def test_refused_io_uring_is_not_judged(tmp_path):
    wrapper = tmp_path / "no_io_uring"
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", str(ROOT / "grader/selftest/data/no_io_uring.c"),
                    "-o", str(wrapper)], check=True)
    results = tmp_path / f"results-{time.monotonic_ns()}.json"
    items = [i.id for i in every_lane(STAGE)]
    cmd = [str(wrapper), "make", "-s", "--no-print-directory", "-C", str(ROOT), "grade", "TARGET=solutions",
           f"STAGE={STAGE.name}", f"ITEMS={','.join(items)}", f"RESULTS={results}", f"PY={sys.executable}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, env=dict(os.environ, NO_COLOR="1"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"a grading where nothing can be judged must not fail (make said {proc.returncode})\n{out[-3000:]}"
    assert "Total: 0/0" in out, f"unjudged items must be left out of the total\n{out[-3000:]}"
    for item in items:
        lines = [l for l in out.splitlines() if l.startswith(f"Not judged here: {STAGE.name}/{item}:")]
        assert len(lines) == 1, f"item {item}: expected one 'Not judged here' line\n{out[-3000:]}"
        assert "io_uring is not available here (io_uring_setup: Operation not permitted)" in lines[0], lines[0]
    data = json.loads(results.read_text())
    assert data["tests"], "no results written"
