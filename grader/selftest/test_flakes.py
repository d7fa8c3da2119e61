"""Zero flakes: the race and stress items of every stage pass on solutions/,
run after run, while both cores are busy with something else."""
import os
import subprocess
import sys
import time

from conftest import ROOT, grade, stages

RUNS = 2


def test_race_items_do_not_flake_under_load(tmp_path):
    race = [i.key for s in stages() for i in s.items if i.lane == "race"]
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        start = time.monotonic()
        done = 0
        for _ in range(RUNS):
            g = grade(tmp_path, ROOT / "solutions", items=race)
            assert g.returncode == 0, f"a race item failed on solutions/ under load:\n{g.output[-4000:]}"
            assert all(t["status"] == "passed" for t in g.results["tests"])
            done += sum(i.runs for s in stages() for i in s.items if i.lane == "race")
        print(f"flake check: {RUNS} gradings, {done} race-item runs under load, 0 failures, "
              f"{time.monotonic() - start:.0f} s")
    finally:
        for h in hogs:
            h.kill()
            h.wait()
