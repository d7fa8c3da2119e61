"""Where grade_class.py's gradings run: threads on this machine, a Slurm job
array, or GNU parallel over ssh. Each grading is one command,
`grade_class.py one ... --index K` (the K-th student of reports/students.json,
where each name is the hex of its bytes: no name, newline or not, shifts
another; the engines see only the index), that writes its results into the
reports folder; the gradebook is made from that
folder afterwards, the same way whichever engine ran them. A cluster needs the
lab, the submissions and the reports folder at the same paths on every node
(a shared file system: NFS, Lustre, a home directory mounted everywhere);
docs/instructors.md says how to set one up.
"""
import concurrent.futures
import shlex
import shutil
import subprocess


class DispatchError(Exception):
    """The engine is missing, or refused the job: one line for the instructor."""


def _need(tool, package):
    if shutil.which(tool) is None:
        raise DispatchError(f"`{tool}` is not installed (the distribution's package {package})")


def threads(count, one, jobs, on_done):
    """one(k) grades student k here; on_done(k) is called as each finishes."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(one, k): k for k in range(count)}
        for f in concurrent.futures.as_completed(futures):
            f.result()
            on_done(futures[f])


def slurm(count, command, jobs, reports, extra=()):
    """A job array of `count` tasks, at most `jobs` at once, one student per
    task (SLURM_ARRAY_TASK_ID is the index); waits for the whole array
    (sbatch --wait). command: the argument list of `grade_class.py one`
    without --index."""
    _need("sbatch", "slurm-client or slurm-wlm")
    script = reports / "grade-array.sh"
    script.write_text("#!/bin/sh\n"
                      "# one student per array task; written by grade_class.py --dispatch slurm\n"
                      f"exec {shlex.join(command)} --index \"$SLURM_ARRAY_TASK_ID\"\n")
    script.chmod(0o755)
    cmd = ["sbatch", "--wait", "--parsable", "--job-name=lab-grade", f"--array=0-{count - 1}%{max(1, jobs)}",
           f"--output={reports}/slurm-%A_%a.out", "--cpus-per-task=2", *extra, str(script)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 and not proc.stdout.strip():
        raise DispatchError("sbatch refused the job array: " + (proc.stderr.strip().splitlines() or ["no reason"])[-1])
    return proc.stdout.strip()   # the job id (a task that failed shows as a missing result, not here)


def parallel(count, command, jobs, hosts, ssh=None):
    """GNU parallel, `jobs` gradings at once per host, over ssh to each of
    `hosts` (a comma-separated --sshlogin list; ":" is this machine)."""
    _need("parallel", "parallel")
    cmd = ["parallel", "--will-cite", "--jobs", str(max(1, jobs)), "--sshlogin", hosts]
    if ssh:
        cmd += ["--ssh", ssh]
    cmd += [shlex.join(command) + " --index {}", ":::", *map(str, range(count))]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:   # `one` itself exits 0 once it has written its results
        raise DispatchError("parallel could not run every grading: " +
                            (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1])
