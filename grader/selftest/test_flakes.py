"""Zero flakes: the race and stress items of every stage pass on solutions/,
run after run, while both cores are busy with something else."""
import os
import subprocess
import sys
import time

from conftest import grade, solutions_copy, stages

# One grading: every race item already makes its own 2-20 runs in it (and
# make test's other worker is load on top of the hogs).
RUNS = 1


def test_race_items_do_not_flake_under_load(tmp_path):
    race = [i.key for s in stages() for i in s.items if i.lane == "race"]
    # one hog fewer than cores: make test runs two workers, and the other one is load already
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(max(1, (os.cpu_count() or 2) - 1))]
    try:
        start = time.monotonic()
        done = 0
        for _ in range(RUNS):
            g = grade(tmp_path, solutions_copy(tmp_path), items=race)
            assert g.returncode == 0, f"a race item failed on solutions/ under load:\n{g.output[-4000:]}"
            assert all(t["status"] == "passed" for t in g.results["tests"])
            done += sum(i.runs for s in stages() for i in s.items if i.lane == "race")
        print(f"flake check: {RUNS} gradings, {done} race-item runs under load, 0 failures, "
              f"{time.monotonic() - start:.0f} s")
    finally:
        for h in hogs:
            h.kill()
            h.wait()
