#!/usr/bin/env python3
"""Grade a submission as Gradescope would, at Gradescope's resources, several
times, and say whether it kept full marks and how long each grading took.

    gradescope_sim.py --stage 5                       the reference's stage 05, 10 runs at
                                                      0.5 CPU and 768 MB (Gradescope's default)
    gradescope_sim.py --stage 5 --cpus 1 --runs 5     at one CPU
    gradescope_sim.py --stage 1 --mode warm           one image, each run after the last
    gradescope_sim.py --zip build/autograder-stage-1.zip --submission mywork/

What one run is (--mode cold, the default, and what every Gradescope
submission is): the autograder image built once (the zip unpacked into a
folder laid out like /autograder, source/ and submission/ and results/,
then its setup.sh run as root), and for each run a fresh copy of that image
(the build cache setup.sh left, nothing from the runs before), the upload
in submission/ (default: the reference's files of the stage, loose, as a
student drags them in), run_autograder as root with AUTOGRADER_ROOT there,
inside a cgroup holding it to --cpus and --memory (v2's cpu.max and
memory.max, or v1's cfs quota and memory limit, below this process's own
group). --mode warm grades every run in the same copy (a second
submission in one container); --mode bare skips setup.sh (no warm-up).

Each run prints its time, its score of the points the results.json
offers, the items not judged (0 of 0, each with its one line) and the
items that lost points. Every results.json is checked against the schema
written from Gradescope's specification (grader/schemas). Exits 0 when
every run had full marks (score equal to the total of its max_score) and
a valid results.json, 1 otherwise, 2 on bad input.

--lock FILE takes that file's lock (flock) around each grading and
setup.sh, so the machine is otherwise quiet while one is timed. Run as
root (Gradescope runs the autograder as root; the CPU and memory limits
need a cgroup). --json FILE writes every run's figures.
"""
import argparse
import contextlib
import fcntl
import json
import os
import pathlib
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "grader"))

from lab_grader import cgroups, results_json, rubric  # noqa: E402

GRADESCOPE_CPUS = 0.5        # Gradescope's default autograder resources
GRADESCOPE_MEMORY = "768M"


class SimError(Exception):
    pass


def parse_bytes(text):
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().removesuffix("B")
    unit = t[-1:] if t[-1:] in "KMG" else ""
    try:
        n = float(t[:len(t) - len(unit)])
    except ValueError:
        raise SimError(f"--memory={text}: not a size (768M, 1G, 805306368)") from None
    if n <= 0:
        raise SimError(f"--memory={text}: must be more than 0")
    return int(n * units[unit])


class Limits:
    """A cgroup (v2) or a pair of them (v1's cpu and memory hierarchies)
    with a CPU quota and a memory limit; a child joins it by pid."""

    def __init__(self, cpus, memory):
        self.groups = []
        name = f"lab-gs-sim-{os.getpid()}-{secrets.token_hex(3)}"
        made = {}
        for controller in ("cpu", "memory"):
            root = cgroups.controller_root(controller)
            if root is None:
                self.close()
                raise SimError(f"no writable {controller} cgroup here (run as root; on cgroup v2 the "
                               f"{controller} controller must be enabled in the parent's subtree_control)")
            group = made.get(root)
            if group is None:
                group = root / name
                group.mkdir()
                made[root] = group
                self.groups.append(group)
            if controller == "cpu":
                cgroups.set_cpu_quota(group, cpus)
            elif (group / "memory.max").exists():
                (group / "memory.max").write_text(str(memory))
                if (group / "memory.swap.max").exists():
                    (group / "memory.swap.max").write_text("0")
            else:
                (group / "memory.limit_in_bytes").write_text(str(memory))
            if (group / "cgroup.subtree_control").exists():   # v2: the grader's own groups below get them too
                with contextlib.suppress(OSError):
                    (group / "cgroup.subtree_control").write_text(f"+{controller}")

    def join(self):
        """In the child, before exec: this process into every group."""
        for g in self.groups:
            with open(g / "cgroup.procs", "w") as f:
                f.write(str(os.getpid()))

    def peak_memory(self):
        for g in self.groups:
            for f in ("memory.peak", "memory.max_usage_in_bytes"):
                with contextlib.suppress(OSError, ValueError):
                    return int((g / f).read_text())
        return None

    def close(self):
        for g in self.groups:
            for d in sorted((p for p in g.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                with contextlib.suppress(OSError):
                    d.rmdir()
            with contextlib.suppress(OSError):
                g.rmdir()
        self.groups = []


@contextlib.contextmanager
def locked(path):
    if not path:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def reference_upload(stage, dest):
    """The reference's files of the stage, loose, as a student drags them
    into Gradescope's upload box: the stage's .c and .h files, and stage
    04's written answers (quiz.toml)."""
    src = ROOT / "solutions" / stage.name
    if not src.is_dir():
        raise SimError(f"{src}: no reference for {stage.name} (this needs the instructors' repository)")
    dest.mkdir(parents=True)
    for p in sorted(src.iterdir()):
        if p.is_file() and (p.suffix in (".c", ".h") or p.name == "quiz.toml"):
            shutil.copyfile(p, dest / p.name)


def unpack(zip_path, ag):
    (ag / "source").mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(ag / "source")
    for n in ("run_autograder", "setup.sh"):
        (ag / "source" / n).chmod(0o755)
    (ag / "submission").mkdir()
    (ag / "results").mkdir()


def run_limited(argv, env, limits, log, timeout):
    """Runs argv inside the limits, its output to log; (seconds, status)."""
    began = time.monotonic()
    with open(log, "wb") as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                             preexec_fn=limits.join if limits else None)
        try:
            status = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            status = "timeout"
    return time.monotonic() - began, status


def read_results(path):
    """(score, total, not judged [(number, line)], lost [(number, score, max, line)], schema errors)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return None, None, [], [], [f"no results.json: {e}"]
    errors = results_json.validate(data)
    tests = data.get("tests", [])
    total = sum(t.get("max_score", 0) for t in tests)
    first = lambda t: ((t.get("output") or "").strip().splitlines() or [""])[0][:200]   # noqa: E731
    unjudged = [(t.get("number"), first(t)) for t in tests if (t.get("extra_data") or {}).get("judged") is False]
    lost = [(t.get("number"), t.get("score"), t.get("max_score"), first(t)) for t in tests
            if t.get("score", 0) < t.get("max_score", 0)]
    if not tests and data.get("output"):
        lost.append(("-", 0, 0, data["output"].splitlines()[0][:200]))
    return data.get("score"), total, unjudged, lost, errors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stage", default="", help="the assignment's stage (1, 05, 05-timer); with no --zip, "
                    "its zip is made by autograder.py")
    ap.add_argument("--zip", type=pathlib.Path, help="an autograder zip (make autograder STAGE=n)")
    ap.add_argument("--submission", type=pathlib.Path,
                    help="the upload, a folder (or a .zip) copied into submission/; default the reference's "
                         "files of the stage")
    ap.add_argument("--cpus", type=float, default=GRADESCOPE_CPUS, help=f"CPU quota (default {GRADESCOPE_CPUS:g})")
    ap.add_argument("--memory", default=GRADESCOPE_MEMORY, help=f"memory limit (default {GRADESCOPE_MEMORY})")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--mode", choices=("cold", "warm", "bare"), default="cold",
                    help="cold: a fresh copy of the image after setup.sh for each run (Gradescope); warm: every "
                         "run in one copy; bare: no setup.sh at all")
    ap.add_argument("--setup-limited", action="store_true",
                    help="run setup.sh inside the limits too (default: unlimited, as an image build)")
    ap.add_argument("--lock", default="", help="flock this file around each grading (a quiet machine)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds before a run is killed")
    ap.add_argument("--keep", action="store_true", help="keep the folders (printed) instead of removing them")
    ap.add_argument("--json", type=pathlib.Path, help="write every run's figures here")
    args = ap.parse_args()
    try:
        if args.runs < 1:
            raise SimError("--runs must be at least 1")
        if not 0 < args.cpus <= 64:
            raise SimError(f"--cpus={args.cpus:g}: between 0 and 64")
        memory = parse_bytes(args.memory)
        if os.geteuid() != 0:
            raise SimError("run as root: Gradescope runs the autograder as root, and the limits need a cgroup")
        if not args.zip and not args.stage:
            raise SimError("give --stage (and optionally --zip)")
        if args.zip and not args.zip.is_file():
            raise SimError(f"--zip={args.zip}: no such file")
        if args.submission and not args.submission.exists():
            raise SimError(f"--submission={args.submission}: no such file or folder")
        stages = rubric.select(rubric.load_all(ROOT / "grader" / "rubric"), args.stage) if args.stage else []
        if args.stage and len(stages) != 1 and not args.submission:
            raise SimError(f"--stage={args.stage}: one stage, or give --submission")
    except (SimError, rubric.RubricError) as e:
        print(f"gradescope_sim.py: {e}", file=sys.stderr)
        return 2

    work = pathlib.Path(tempfile.mkdtemp(prefix="gs-sim-"))
    rows = []
    try:
        zip_path = args.zip
        if zip_path is None:
            zip_path = work / "autograder.zip"
            proc = subprocess.run([sys.executable, str(ROOT / "grader" / "course" / "autograder.py"), "--stage",
                                   args.stage, "--out", str(zip_path)], capture_output=True, text=True)
            if proc.returncode != 0:
                raise SimError(f"autograder.py failed: {(proc.stderr or proc.stdout).strip()[-500:]}")
        upload = work / "upload"
        if args.submission is None:
            reference_upload(stages[0], upload)
        elif args.submission.is_dir():
            shutil.copytree(args.submission, upload, symlinks=True)
        else:
            upload.mkdir()
            shutil.copyfile(args.submission, upload / args.submission.name)

        image = work / "image"
        unpack(zip_path.resolve(), image)
        # Gradescope's python3 is the distribution's (/usr/bin), with the packages setup.sh installed
        env = dict(os.environ, NO_COLOR="1", PATH="/usr/bin:/bin:" + os.environ.get("PATH", ""))
        env.pop("MAKEFLAGS", None)
        label = f"{args.stage or zip_path.name} at {args.cpus:g} CPU, {args.memory}"
        setup_s = None
        if args.mode != "bare":
            with locked(args.lock):
                lim = Limits(args.cpus, memory) if args.setup_limited else None
                try:
                    setup_s, status = run_limited(["sh", str(image / "source" / "setup.sh")],
                                                  dict(env, AUTOGRADER_ROOT=str(image)), lim, work / "setup.log",
                                                  args.timeout)
                finally:
                    if lim:
                        lim.close()
            print(f"setup.sh: {setup_s:.1f} s (status {status}; log {work / 'setup.log'})", flush=True)
            if status != 0:
                raise SimError(f"setup.sh failed (status {status}): {(work / 'setup.log').read_text()[-800:]}")
        print(f"{label}, {args.runs} {args.mode} run(s):", flush=True)
        for k in range(1, args.runs + 1):
            ag = image if args.mode == "warm" else work / f"run-{k}"
            if ag != image:
                shutil.copytree(image, ag, symlinks=True)
            shutil.rmtree(ag / "submission")
            shutil.copytree(upload, ag / "submission", symlinks=True)
            shutil.rmtree(ag / "results")
            (ag / "results").mkdir()
            with locked(args.lock):
                lim = Limits(args.cpus, memory)
                try:
                    secs, status = run_limited(["sh", str(ag / "source" / "run_autograder")],
                                               dict(env, AUTOGRADER_ROOT=str(ag)), lim, ag / "stdout.txt",
                                               args.timeout)
                    peak = lim.peak_memory()
                finally:
                    lim.close()
            score, total, unjudged, lost, errors = read_results(ag / "results" / "results.json")
            full = not errors and status == 0 and score is not None and score == total and total > 0 and not lost
            row = {"run": k, "seconds": round(secs, 1), "status": status, "score": score, "total": total,
                   "full": full, "not_judged": unjudged, "lost": lost, "schema_errors": errors,
                   "peak_memory_mb": round(peak / 2**20) if peak else None, "folder": str(ag)}
            rows.append(row)
            mem = f", peak {row['peak_memory_mb']} MB" if peak else ""
            print(f"  run {k}: {secs:6.1f} s  {score}/{total}{'' if full else '  NOT FULL MARKS'}{mem}", flush=True)
            for number, line in unjudged:
                print(f"      not judged (0 of 0): {number}: {line}")
            for number, got, of, line in lost:
                print(f"      lost {number} ({got}/{of}): {line}")
            for e in errors[:5]:
                print(f"      results.json: {e}")
            if status != 0:
                print(f"      run_autograder exited {status} (its output: {ag / 'stdout.txt'})")
            if ag != image and not args.keep and full:
                shutil.rmtree(ag, ignore_errors=True)
        secs = [r["seconds"] for r in rows]
        fulls = sum(r["full"] for r in rows)
        print(f"{label}: full marks in {fulls} of {len(rows)} {args.mode} run(s); "
              f"{min(secs):.1f}–{max(secs):.1f} s, median {statistics.median(secs):.1f} s"
              + (f"; setup.sh {setup_s:.1f} s" if setup_s is not None else ""))
        if args.json:
            args.json.write_text(json.dumps({"stage": args.stage, "zip": str(zip_path), "cpus": args.cpus,
                                             "memory": args.memory, "mode": args.mode, "setup_seconds": setup_s,
                                             "runs": rows}, indent=2) + "\n")
        return 0 if fulls == len(rows) else 1
    except SimError as e:
        print(f"gradescope_sim.py: {e}", file=sys.stderr)
        return 1
    finally:
        kept = [r["folder"] for r in rows if not r["full"]]
        if args.keep or kept:
            print(f"kept: {work}" + (" (runs without full marks: " + ", ".join(kept) + ")" if kept else ""))
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
