"""Zero flakes: the race and stress items of every stage pass on solutions/,
run after run, while both cores are busy with something else."""
import os
import subprocess
import sys
import time

from conftest import grade, judged_in_the_end, solutions_copy, stages

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
            tree = solutions_copy(tmp_path)
            g = grade(tmp_path, tree, items=race)
            assert g.returncode == 0, f"a race item failed on solutions/ under load:\n{g.output[-4000:]}"
            # an item the machine could not judge (starved beside the hogs)
            # is no failure: it is graded again on its own
            assert all(t["status"] == "passed" or g.left_to_the_machine(t["number"]) for t in g.results["tests"]), \
                g.output[-4000:]
            judged_in_the_end(tmp_path, tree, g)
            done += sum(i.runs for s in stages() for i in s.items if i.lane == "race")
        print(f"flake check: {RUNS} gradings, {done} race-item runs under load, 0 failures, "
              f"{time.monotonic() - start:.0f} s")
    finally:
        for h in hogs:
            h.kill()
            h.wait()
