"""grade-class past one machine (issue 13): the same class graded through a
one-node Slurm started here (slurmctld, slurmd and munged on localhost, a
job array of one student per task) and through GNU parallel over ssh to
localhost (an sshd of the test's own on a loopback port), each giving the
gradebook the threads give. Two students, one item, so it stays short."""
import csv
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time

import pytest

from conftest import ROOT

ITEM = "pending-registers"
NEEDS = {"slurm": ("slurmctld", "slurmd", "sbatch", "sinfo", "munged", "munge", "unmunge"), "parallel": ("parallel", "ssh", "ssh-keygen")}


def _missing(kind):
    tools = NEEDS[kind] + (("/usr/sbin/sshd",) if kind == "parallel" else ())
    gone = [t for t in tools if shutil.which(t) is None and not os.path.exists(t)]
    if gone or os.geteuid() != 0:
        pytest.skip(f"needs root and {', '.join(gone) or 'its daemons'} (make deps-test installs them)")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# a name with a newline before bob's (issue 25: one name a line in
# students.txt shifted every later student, and bob was never graded)
NEWLINE = "carol\nx"


def _class(tmp_path):
    subs = tmp_path / "subs"
    shutil.copytree(ROOT / "solutions" / "01-signal", subs / "alice" / "01-signal")
    shutil.copytree(ROOT / "labs" / "01-signal", subs / "bob" / "01-signal")
    shutil.copytree(ROOT / "solutions" / "01-signal", subs / NEWLINE / "01-signal")
    return subs


def _grade_class(tmp_path, subs, *extra, env=None):
    out = tmp_path / "book.csv"
    proc = subprocess.run([sys.executable, str(ROOT / "grader" / "course" / "grade_class.py"), str(subs), "--out", str(out),
                           "--stage=1", f"--items={ITEM}", *extra], capture_output=True, text=True, timeout=600,
                          env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {r["student"]: r for r in csv.DictReader(out.open(newline=""))}
    assert rows["alice"][f"01-signal/{ITEM}"] == "1" and rows["bob"][f"01-signal/{ITEM}"] == "0", rows
    assert rows["carol\\x0ax"][f"01-signal/{ITEM}"] == "1", rows    # graded, under its own name
    assert len(rows) == 4 and all(r["status"] == "graded" for k, r in rows.items() if k != "points possible"), rows
    return proc


def _wait_for(check, what, seconds=30, logs=()):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.3)
    tails = "".join(f"\n--- {log.name}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:])
                    for log in logs if log.exists())
    raise AssertionError(f"{what} did not come up within {seconds} s{tails}")


def _munge_works():
    try:
        cred = subprocess.run(["munge", "-n"], capture_output=True, timeout=10)
        return cred.returncode == 0 and subprocess.run(["unmunge"], input=cred.stdout, capture_output=True,
                                                       timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def test_slurm_job_array(tmp_path):
    _missing("slurm")
    d = tmp_path / "slurm"
    (d / "state").mkdir(parents=True)
    (d / "spool").mkdir()
    # slurmd names its node by the short hostname unless told; a CI machine
    # called runner.example.internal would never match NodeName, so the node
    # gets a fixed name and slurmctld the name this machine answers to.
    host, node_name = socket.gethostname().split(".")[0], "lab1"
    ctl, node = _free_port(), _free_port()
    conf = d / "slurm.conf"
    conf.write_text(f"""ClusterName=lab
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmctldPort={ctl}
SlurmdPort={node}
AuthType=auth/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
NodeName={node_name} NodeAddr=127.0.0.1 NodeHostname=127.0.0.1 CPUs={os.cpu_count()} State=UNKNOWN
PartitionName=lab Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
    env = dict(os.environ, SLURM_CONF=str(conf))
    daemons = []
    try:
        if not _munge_works():
            # a socket left by a munged that is gone (a session that ended)
            # would make every credential fail; start a munged of our own
            for stale in ("munge.socket.2", "munge.socket.2.lock", "munged.pid"):
                pathlib.Path("/run/munge", stale).unlink(missing_ok=True)
            os.makedirs("/run/munge", exist_ok=True)
            shutil.chown("/run/munge", "munge", "munge")
            daemons.append(subprocess.Popen(["munged", "--foreground", "--force"], stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL))
            _wait_for(_munge_works, "munged")
        daemons.append(subprocess.Popen(["slurmctld", "-D", "-c", "-f", str(conf)], env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        daemons.append(subprocess.Popen(["slurmd", "-D", "-N", node_name, "-f", str(conf)], env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_for(lambda: "idle" in subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True,
                                                   text=True).stdout, "the Slurm node", seconds=90,
                  logs=(d / "slurmctld.log", d / "slurmd.log"))
        proc = _grade_class(tmp_path, _class(tmp_path), "--dispatch=slurm", env=env)
        assert "Slurm job array" in proc.stdout, proc.stdout
        assert len(list((tmp_path / "reports").glob("slurm-*_*.out"))) == 3, "one task per student"
    finally:
        for p in reversed(daemons):
            p.terminate()
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()


def test_parallel_over_ssh(tmp_path):
    _missing("parallel")
    d = tmp_path / "ssh"
    d.mkdir()
    for name in ("hostkey", "key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True)
    shutil.copyfile(d / "key.pub", d / "authorized_keys")
    port = _free_port()
    (d / "sshd_config").write_text(f"""Port {port}
ListenAddress 127.0.0.1
HostKey {d}/hostkey
AuthorizedKeysFile {d}/authorized_keys
PidFile {d}/sshd.pid
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
""")
    os.makedirs("/run/sshd", exist_ok=True)
    sshd = subprocess.Popen(["/usr/sbin/sshd", "-D", "-f", str(d / "sshd_config"), "-E", str(d / "log")])
    ssh = (f"ssh -p {port} -i {d}/key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
           "-o BatchMode=yes -o LogLevel=ERROR")
    try:
        _wait_for(lambda: subprocess.run([*ssh.split(), "127.0.0.1", "true"], capture_output=True).returncode == 0,
                  "sshd")
        _grade_class(tmp_path, _class(tmp_path), "--dispatch=parallel", "--hosts=127.0.0.1", f"--ssh={ssh}")
    finally:
        sshd.terminate()
        sshd.wait()


def test_a_missing_engine_is_one_line(tmp_path):
    subs = _class(tmp_path)
    env = dict(os.environ, PATH="/nonexistent")
    proc = subprocess.run([sys.executable, str(ROOT / "grader" / "course" / "grade_class.py"), str(subs),
                           "--dispatch=slurm"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "`sbatch` is not installed" in proc.stderr
