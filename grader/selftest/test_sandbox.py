"""Hostile submissions against the sandbox (grader/lab_grader/sandbox.py).

Each test plants code at the top of stage 01's signal_new, so it runs in every
test that makes a signal, and grades one item. What the sandbox cannot do on
this machine (no root, no cgroup, no namespaces) is skipped with the reason,
never reported as passed.
"""
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from conftest import ROOT, grade, solutions_copy

from lab_grader import sandbox


@pytest.fixture(autouse=True)
def _past_the_gate(monkeypatch):
    """These attacks call fork, open and connect, which the static gate
    refuses before anything runs (test_redteam.py); here the gate's call
    allowlist is off, to test the jail behind it."""
    monkeypatch.setenv("LAB_GATE_CALLS", "0")

ITEM = "pending-registers"        # one plain test that calls signal_new
ANCHOR = "    /* BEGIN STUDENT: allocate one shared state"


@pytest.fixture(scope="module")
def caps():
    sb = sandbox.Sandbox()
    try:
        yield {"root": sb.root, "netns": sb.netns != "none", "pids": sb.root or sb.pids_root is not None,
               "private_dirs": sb.private_dirs}
    finally:
        sb.close()


def hostile_tree(tmp_path, code, includes=()):
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "solutions" / "01-signal", tree / "01-signal")
    src = tree / "01-signal" / "signal.c"
    text = src.read_text()
    assert ANCHOR in text, "signal_new's student region moved: update ANCHOR"
    head = "".join(f"#include <{h}>\n" for h in includes)
    i = text.index(ANCHOR)
    j = text.index("\n", i) + 1
    src.write_text(head + text[:j] + code + text[j:])
    return tree


def removing_tree(tmp_path, target):
    """A tree whose signal_new removes the file target, and carries on as if
    nothing happened when it cannot. With unlink(2): the harness's seal
    refuses every open for writing and truncate(2) once a test begins
    (harness.c), so the change the fingerprint must see comes by a call on
    the file's folder. (The path is written into the source: a run gets none
    of the grader's environment.)"""
    return hostile_tree(tmp_path, f'    (void)unlink("{target}");\n', includes=("unistd.h",))


def test_fork_bomb_costs_its_test_only(tmp_path, caps):
    if not caps["pids"]:
        pytest.skip("no process limit on this machine (not root, no writable pids cgroup): "
                    "a fork bomb here would take the machine down")
    tree = hostile_tree(tmp_path, '    prctl(PR_SET_NAME, "lab-fork-bomb");\n'
                                  '    for (;;)\n        (void)fork();\n',
                        includes=("sys/prctl.h", "unistd.h"))
    g = grade(tmp_path, tree, stage="01-signal", items=[ITEM], timeout=300)
    assert g.returncode == 2, g.output[-3000:]
    assert g.item(f"01-signal/{ITEM}")["score"] == 0
    assert "processes and threads" in g.output, g.output[-3000:]
    ps = subprocess.run(["ps", "-eo", "stat=,comm="], capture_output=True, text=True).stdout.splitlines()
    alive = [p for p in ps if p.split()[-1] == "lab-fork-bomb" and not p.startswith("Z")]  # zombies are dead
    assert not alive, f"{len(alive)} fork-bomb processes outlived the grading"


def test_cannot_write_the_graders_files(tmp_path, caps):
    if not caps["root"]:
        pytest.skip("not root: test processes run as your own user and could write your files "
                    "(the grader runs them in a private directory, but cannot take the right away)")
    victim_dir = pathlib.Path(tempfile.mkdtemp(prefix="lab-victim-"))
    try:
        os.chmod(victim_dir, 0o755)
        victim = victim_dir / "rubric.toml"
        shutil.copyfile(ROOT / "grader" / "rubric" / "01-signal.toml", victim)
        os.chmod(victim, 0o644)
        before = victim.read_bytes()
        tree = removing_tree(tmp_path, victim)
        g = grade(tmp_path, tree, stage="01-signal", items=[ITEM], timeout=300)
        assert victim.read_bytes() == before, "a test process wrote to a file of the grader's"
        assert g.returncode == 0, g.output[-3000:]   # the failed write cost nothing else
    finally:
        shutil.rmtree(victim_dir, ignore_errors=True)


def test_network_is_loopback_only(tmp_path, caps):
    if not caps["netns"]:
        pytest.skip("network namespaces are refused on this machine: tests share its network")
    outside = socket.socket()
    outside.bind(("127.0.0.1", 0))
    outside.listen(8)
    outside.settimeout(0.2)
    port = outside.getsockname()[1]
    reached = []
    stop = threading.Event()

    def listen():
        while not stop.is_set():
            try:
                c, _ = outside.accept()
                reached.append(c.recv(64))
                c.close()
            except (socket.timeout, OSError):
                continue
    t = threading.Thread(target=listen, daemon=True)
    t.start()
    # Inside the jail: the grader's listener (another namespace) must be out
    # of reach, and the jail's own loopback must work (or the test aborts).
    code = ('    {\n'
            '        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};\n'
            '        int c = socket(AF_INET, SOCK_STREAM, 0);\n'
            f'        a.sin_port = htons({port});\n'
            '        if (c >= 0 && connect(c, (struct sockaddr *)&a, sizeof a) == 0)\n'
            '            (void)!write(c, "escaped", 7);\n'
            '        if (c >= 0)\n'
            '            close(c);\n'
            '        int l = socket(AF_INET, SOCK_STREAM, 0);\n'
            '        socklen_t n = sizeof a;\n'
            '        a.sin_port = 0;\n'
            '        if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1) ||\n'
            '            getsockname(l, (struct sockaddr *)&a, &n))\n'
            '            abort();\n'
            '        c = socket(AF_INET, SOCK_STREAM, 0);\n'
            '        if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a))\n'
            '            abort(); /* loopback is down in the jail */\n'
            '        close(c);\n'
            '        close(l);\n'
            '    }\n')
    tree = hostile_tree(tmp_path, code, includes=("arpa/inet.h", "netinet/in.h", "sys/socket.h", "unistd.h"))
    try:
        g = grade(tmp_path, tree, stage="01-signal", items=[ITEM], timeout=300)
    finally:
        time.sleep(0.3)
        stop.set()
        t.join()
        outside.close()
    assert not reached, f"a test process reached the grader's network: {reached}"
    assert g.returncode == 0, "the jail's own loopback did not work:\n" + g.output[-3000:]


def test_a_changed_grader_file_means_no_score(tmp_path, caps):
    """Without a user id of their own, tests could write the grader's files.
    The grader fingerprints its files when grading begins and compares at the
    end: any change and the run gives no score ("NOT TRUSTED", status 3). On a
    copy of the lab, with the sandbox turned off to play the unprivileged
    case; then with it on, where the write must fail and cost nothing."""
    lab = tmp_path / "lab"
    lab.mkdir()
    shutil.copyfile(ROOT / "Makefile", lab / "Makefile")
    for d in ("common", "solutions"):
        shutil.copytree(ROOT / d, lab / d, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "grader", lab / "grader", ignore=shutil.ignore_patterns("__pycache__", "mutants", "selftest"))
    os.chmod(tmp_path, 0o755)   # the jail's user must reach the test source to write it (or be refused)
    for p in (lab, lab / "grader", lab / "grader" / "tests", lab / "grader" / "tests" / "01-signal"):
        os.chmod(p, 0o755)
    victim = lab / "grader" / "tests" / "01-signal" / "poll_test.c"
    original = victim.read_bytes()
    tree = removing_tree(tmp_path, victim)
    env = dict(os.environ, NO_COLOR="1")
    cmd = ["make", "-s", "-C", str(lab), "grade", f"TARGET={tree}", "STAGE=1", f"ITEMS={ITEM}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=dict(env, LAB_SANDBOX="0"))
    out = p.stdout + p.stderr
    assert not victim.exists(), "the hostile change should succeed without a sandbox"
    assert "NOT TRUSTED" in out and str(victim) in out, out[-3000:]
    assert p.returncode == 2, out[-3000:]          # make's status for the grader's 3
    if not caps["root"]:
        return
    victim.write_bytes(original)
    before = victim.read_bytes()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    out = p.stdout + p.stderr
    assert victim.read_bytes() == before, "a jailed test wrote to the grader's test source"
    assert p.returncode == 0 and "NOT TRUSTED" not in out, out[-3000:]


def test_stale_criterion_sockets_of_other_users(tmp_path, caps):
    """Criterion's runner binds /tmp/criterion_<its pid>.sock. A stale one left
    by a killed run of another user id (pids recycle: pid_max is often 32768)
    cannot be removed by this run's user id in the sticky /tmp, and the runner
    aborted with "Could not initialize the message server: Address already in
    use" (seen in make test as "the test did not run"). Each run has its own
    /tmp now: plant such sockets for the next few thousand pids and grade."""
    if not caps["root"] or not caps["private_dirs"]:
        pytest.skip("needs root (a user id per run) and mount namespaces (a /tmp per run)")
    pid_max = int(pathlib.Path("/proc/sys/kernel/pid_max").read_text())
    last = int(pathlib.Path("/proc/sys/kernel/ns_last_pid").read_text())
    planted = []
    try:
        for k in range(1, 6000):
            path = f"/tmp/criterion_{(last + k) % pid_max}.sock"
            s = socket.socket(socket.AF_UNIX)
            try:
                s.bind(path)  # fails if the path exists (a live runner's): leave that one alone
            except OSError:
                continue
            finally:
                s.close()
            os.chown(path, 4242, 4242)
            planted.append(path)
        g = grade(tmp_path, solutions_copy(tmp_path), stage="01-signal", timeout=300)
    finally:
        for path in planted:
            try:
                os.unlink(path)
            except OSError:
                pass
    assert len(planted) > 1000
    assert g.returncode == 0, "a stale socket of another user id stopped a run:\n" + g.output[-3000:]
    assert "own /tmp" in g.output or "a root of its own" in g.output


def test_a_disk_filler_meets_the_runs_quota(tmp_path, caps):
    """signal_new fills its run's directory and /tmp with 32-MiB files until
    the disk says no, then goes on as the reference does: the test passes
    when the quota stopped it (and aborts, failing, when it wrote past it);
    nothing is left on the machine's disk."""
    if not (caps["root"] and sandbox.shared().disk_quota):
        pytest.skip("no disk quota on this machine (not root, or a tmpfs could not be mounted)")
    base = sandbox.shared().base
    tree = hostile_tree(tmp_path, '    {\n'
                                  '        static char chunk[1 << 20];\n'
                                  '        static int filled;\n'
                                  '        long long total = 0;\n'
                                  '        const char *dirs[] = { ".", "/tmp", "/dev/shm" };\n'
                                  '        for (int d = 0; d < 3 && !filled; d++)\n'
                                  '            for (int n = 0;; n++) {\n'
                                  '                char name[64];\n'
                                  '                snprintf(name, sizeof name, "%s/fill-%d", dirs[d], n);\n'
                                  '                FILE *f = fopen(name, "w");\n'
                                  '                int mib = 0;\n'
                                  '                while (f && mib < 32 && fwrite(chunk, 1, sizeof chunk, f) == sizeof chunk)\n'
                                  '                    mib++, total += sizeof chunk;\n'
                                  '                if (!f || fclose(f) != 0 || mib < 32)\n'
                                  '                    break;\n'
                                  '            }\n'
                                  '        filled = 1;\n'
                                  '        if (total > (1LL << 30) + (1LL << 29))\n'
                                  '            abort();   /* wrote past every quota */\n'
                                  '    }\n', includes=("stdio.h", "stdlib.h"))
    g = grade(tmp_path, tree, stage="01-signal", items=[ITEM], timeout=300)
    assert g.item(f"01-signal/{ITEM}")["score"] == 1, g.output[-3000:]
    left = [p for p in base.rglob("fill-*")]
    assert not left, f"the filler's files outlived its run: {left[:3]}"


def _spin_or_sleep(tmp_path, spin):
    body = "    for (volatile unsigned long i = 0;; i++)\n        ;\n" if spin else "    for (;;)\n        pause();\n"
    return hostile_tree(tmp_path, body, includes=("unistd.h",))


def test_a_starved_test_is_not_judged_and_a_deadlock_still_fails(tmp_path, caps, monkeypatch):
    """Each run held to 2 % of a CPU (LAB_RUN_CPU_QUOTA): a test that spins
    until its limit got almost no CPU while it waited for one, so the kernel's
    numbers say the machine starved it: not judged, regrade. A test that
    sleeps forever waits for no CPU: a hang, failed, under the same quota."""
    if not (caps["root"] and caps["pids"]):
        pytest.skip("the run's tasks are found through its pids cgroup (root)")
    monkeypatch.setenv("LAB_RUN_CPU_QUOTA", "0.02")
    spin = grade(tmp_path, _spin_or_sleep(tmp_path / "spin", True), stage="01-signal", items=[ITEM], timeout=300)
    r = spin.item(f"01-signal/{ITEM}")
    assert r["score"] == 0 and r.get("extra_data", {}).get("judged") is False, spin.output[-3000:]
    assert "not judged, regrade: the machine was too busy" in spin.output, spin.output[-3000:]
    # A sleeper waits for no CPU, but its runner's start-up does: on a machine
    # already loaded past its CPUs, the kernel's numbers may honestly say the
    # machine starved even that run. Then the grader's "not judged" is right,
    # and this half of the test cannot be checked here: once more, then skip.
    for attempt in range(2):
        sleep = grade(tmp_path, _spin_or_sleep(tmp_path / f"sleep{attempt}", False),
                      stage="01-signal", items=[ITEM], timeout=300)
        if "too busy" not in sleep.output:
            break
    else:
        pytest.skip("the machine was too busy to tell a deadlock from starvation (twice): " +
                    sleep.output.splitlines()[-1][:200])
    assert sleep.item(f"01-signal/{ITEM}")["status"] == "failed", sleep.output[-3000:]


def test_a_deadlock_is_stopped_when_it_stalls_not_at_the_limit(tmp_path):
    """A test whose every thread waits for ever (here signal_new locks a
    mutex it already holds: a futex wait with no timeout, and nothing left to
    run) is ended by the watchdog once nothing has run for 2 s: failed as a
    hang, 'stopped after' about 2 s of its limit, with each thread's place;
    and no reference run is spent on it. A sleeper (pause(): no futex) is
    not a stall: it waits for the limit, as before."""
    tree = hostile_tree(tmp_path / "dead", "    {\n        static pthread_mutex_t twice = PTHREAD_MUTEX_INITIALIZER;\n"
                                           "        pthread_mutex_lock(&twice);\n        pthread_mutex_lock(&twice);\n    }\n")
    g = grade(tmp_path, tree, stage="01-signal", items=[ITEM], timeout=300)
    r = g.item(f"01-signal/{ITEM}")
    assert r["status"] == "failed" and r["score"] == 0, g.output[-3000:]
    m = re.search(r"stopped after ([\d.]+) s, every thread asleep with nothing left to wake it", g.output)
    assert m and 2.0 <= float(m.group(1)) < 4.0, g.output[-3000:]
    assert "signal_new" in g.output and "reference solution" not in g.output, g.output[-3000:]
    sleep = grade(tmp_path, _spin_or_sleep(tmp_path / "sleep", False), stage="01-signal", items=[ITEM], timeout=300)
    assert "stopped after" not in sleep.output, sleep.output[-3000:]


def test_not_root_a_kill_of_every_process_reaches_the_run_only(tmp_path, caps):
    """The grader run by a user who is not root (a student on their own
    machine; here root drops to nobody with setpriv, on a copy of the lab
    that user owns): a test that calls kill(-1, SIGKILL) took the grader
    with it (make's status 137, no report), since every process of that
    user was in reach. In the run's own PID namespace it reaches only the
    run: the grading ends with its report. A daemon a test leaves (a fork
    that leaves the session) dies with the runner."""
    if not caps["root"]:
        pytest.skip("needs root to drop to another user (setpriv) for the not-root grader")
    if shutil.which("setpriv") is None:
        pytest.skip("util-linux's setpriv is not installed")
    nobody = 65534
    drop = ["setpriv", f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups"]
    if subprocess.run([*drop, "unshare", "--user", "--map-current-user", "--pid", "--fork", "true"],
                      capture_output=True).returncode != 0:
        pytest.skip("this kernel gives a user who is not root no user and PID namespace")
    lab = tmp_path / "lab"
    shutil.copytree(ROOT, lab, ignore=shutil.ignore_patterns(".git", "build", "__pycache__"))
    trees = {
        "kill": ('    kill(-1, SIGKILL);\n', ("signal.h",)),
        "daemon": ('    if (fork() == 0) {\n        setsid();\n        prctl(PR_SET_NAME, "lab-nr-daemon");\n'
                   '        for (;;)\n            pause();\n    }\n', ("signal.h", "sys/prctl.h", "unistd.h")),
    }
    for name, (code, includes) in trees.items():
        hostile_tree(tmp_path / name, code, includes=includes)
    for dirpath, dirnames, filenames in os.walk(tmp_path):
        for n in [*dirnames, *filenames]:
            os.lchown(os.path.join(dirpath, n), nobody, nobody)
    os.chmod(tmp_path, 0o755)
    for parent in tmp_path.parents:     # pytest's folders are root's alone: let nobody pass through
        if parent == pathlib.Path("/tmp"):
            break
        os.chmod(parent, os.stat(parent).st_mode | 0o711)
    for name in trees:
        proc = subprocess.run([*drop, "make", "-s", "-C", str(lab), "grade", f"TARGET={tmp_path / name / 'tree'}",
                               "STAGE=1", f"ITEMS={ITEM}"], capture_output=True, text=True, timeout=600,
                              env=dict(os.environ, HOME=str(lab), NO_COLOR="1"))
        out = proc.stdout + proc.stderr
        assert "own PID namespace" in out, out[-3000:]
        assert proc.returncode == 0 and "Total: 1/1" in out, (name, proc.returncode, out[-3000:])
    ps = subprocess.run(["ps", "-eo", "stat=,comm="], capture_output=True, text=True).stdout.splitlines()
    alive = [p for p in ps if p.split()[-1] == "lab-nr-daemon" and not p.startswith("Z")]
    assert not alive, f"{len(alive)} daemons of a test outlived the grading"


def test_a_kill_of_every_process_fails_its_tests_and_is_never_a_regrade(tmp_path, caps):
    """signal_new calls kill(-1, SIGKILL). As root each run has a user id of
    its own, so that reached only the run, but all of it: Criterion's runner
    and its helpers died, the tests after it did not start in two runs, and
    18 of 23 points were "not judged, regrade" (a grade-class batch) -- a
    way to turn any failure into a regrade. In the run's PID namespace the
    runner survives (kill(-1) never reaches the namespace's first process);
    what it cannot start is run on the reference, which starts it: a failure."""
    if not caps["netns"]:
        pytest.skip("no network namespace here, so no PID namespace either")
    tree = hostile_tree(tmp_path, '    kill(-1, SIGKILL);\n', includes=("signal.h",))
    g = grade(tmp_path, tree, stage="01-signal", timeout=600)
    assert "own PID namespace" in g.output, g.output[-3000:]
    # (the kernel may still say a loaded machine starved a run: that regrade is honest)
    dodged = [t["number"] for t in g.results["tests"] if t.get("extra_data", {}).get("judged") is False
              and "did not start or end in two runs" in t["output"]]
    assert not dodged, f"items a kill(-1) turned into a regrade: {dodged}\n{g.output[-3000:]}"
    assert g.returncode == 2 and g.score < sum(t["max_score"] for t in g.results["tests"]), g.output[-3000:]


def test_a_run_sees_nothing_of_the_machine(tmp_path, caps):
    """From inside a test, as root: no other process in /proc (a grader's
    --target= would name another student's tree), no System V segment of
    the machine's, nothing in /var/tmp, not the grader's checkout, not the
    grader's environment (make's MAKEFLAGS carries HIDDEN=). The code aborts,
    failing its test, on the first thing it sees."""
    if not (caps["root"] and sandbox.shared().minimal_root):
        pytest.skip("no root of its own per run on this machine (not root, or no PID namespace)")
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x1ab5eed
    shmid = libc.shmget(key, 4096, 0o1666)   # IPC_CREAT | 0666
    assert shmid >= 0, "could not make the System V segment to look for"
    marker = pathlib.Path("/var/tmp") / f"lab-redteam-{os.getpid()}"
    marker.write_text("left by the grader's self-test\n")
    code = ('    {\n'
            '        DIR *d = opendir("/proc");\n'
            '        int pids = 0;\n'
            '        struct dirent *e;\n'
            '        while (d && (e = readdir(d)))\n'
            '            pids += e->d_name[0] >= \'0\' && e->d_name[0] <= \'9\';\n'
            '        if (!d || pids > 16)\n'
            '            abort(); /* the machine\'s processes, or no /proc at all */\n'
            '        closedir(d);\n'
            f'        if (shmget({key}, 0, 0) >= 0)\n'
            '            abort(); /* a segment of the machine\'s */\n'
            f'        if (access("{marker}", F_OK) == 0)\n'
            '            abort(); /* the machine\'s /var/tmp */\n'
            f'        if (access("{ROOT / "Makefile"}", F_OK) == 0)\n'
            '            abort(); /* the grader\'s checkout */\n'
            '        if (getenv("MAKEFLAGS") || getenv("LAB_GRADER_SECRET"))\n'
            '            abort(); /* the grader\'s environment */\n'
            '    }\n')
    tree = hostile_tree(tmp_path, code, includes=("dirent.h", "stdlib.h", "sys/shm.h", "unistd.h"))
    try:
        g = grade(tmp_path, tree, stage="01-signal", items=[ITEM], timeout=300,
                  env={"LAB_GRADER_SECRET": "/somewhere/secret"})   # make sets MAKEFLAGS itself
    finally:
        libc.shmctl(shmid, 0, None)   # IPC_RMID
        marker.unlink()
    assert g.item(f"01-signal/{ITEM}")["score"] == 1, g.output[-3000:]


FORGE = r'''
    {
        /* find the harness's completion record by name, as a student who
         * reads the binary would: the dynamic symbols, then the file's own
         * symbol table; call it and leave before the test can fail */
        void (*end)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "lab_test_end");
        if (!end) {
            Dl_info info;
            int fd = open("/proc/self/exe", O_RDONLY);
            struct stat st;
            if (fd >= 0 && fstat(fd, &st) == 0 && dladdr((void *)signal_new, &info)) {
                unsigned char *f = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
                Elf64_Ehdr *eh = (Elf64_Ehdr *)f;
                Elf64_Shdr *sh = (Elf64_Shdr *)(f + eh->e_shoff);
                for (int i = 0; f != MAP_FAILED && i < eh->e_shnum && !end; i++) {
                    if (sh[i].sh_type != SHT_SYMTAB)
                        continue;
                    Elf64_Sym *sym = (Elf64_Sym *)(f + sh[i].sh_offset);
                    const char *names = (const char *)(f + sh[sh[i].sh_link].sh_offset);
                    for (size_t k = 0; k < sh[i].sh_size / sizeof *sym; k++)
                        if (strcmp(names + sym[k].st_name, "lab_test_end") == 0)
                            end = (void (*)(void))((char *)info.dli_fbase + sym[k].st_value);
                }
            }
        }
        if (end) {
            end();
            _exit(0);
        }
    }
'''


def test_a_forged_completion_record_earns_nothing(tmp_path):
    """Code under test that looks up the harness's completion function by
    name and calls it, then exits: the skeleton's state earns nothing. The
    function is hidden from the dynamic symbols and the plain lanes run a
    copy without .symtab, so neither lookup finds it. (A deterrent: the
    threat model in docs/instructors.md says what it does not stop.)"""
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "labs" / "01-signal", tree / "01-signal")
    src = tree / "01-signal" / "signal.c"
    text = src.read_text()
    i = text.index("int signal_new(")
    j = text.index("{", i) + 1
    head = "".join(f"#include <{h}>\n" for h in ("dlfcn.h", "elf.h", "fcntl.h", "string.h", "sys/mman.h",
                                                    "sys/stat.h", "unistd.h"))
    src.write_text("#define _GNU_SOURCE\n" + head + text[:j] + FORGE + text[j:])
    g = grade(tmp_path, tree, stage="01-signal", items=[ITEM, "first-poll-ready", "completion-terminal"],
              timeout=300)
    assert g.score == 0, g.output[-3000:]


def test_not_root_the_checkout_is_read_only(tmp_path, caps):
    """Graded as an ordinary user (nobody, through setpriv), a test that
    appends to the lab's Makefile and to a test source finds them
    read-only: the run's mount namespace binds the checkout on itself
    read-only, the grade stands and the files are as they were. (Without
    that bind the write lands, and the fingerprint, which now covers the
    Makefile, makes the grading NOT TRUSTED: see the test above.)"""
    import pwd
    import tempfile
    if not caps["root"] or shutil.which("setpriv") is None:
        pytest.skip("needs root to become another user (setpriv from util-linux)")
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody on this machine")
    # not under /tmp or /var/tmp: a run has its own of those, and would not see it
    base = pathlib.Path(tempfile.mkdtemp(prefix="notroot-", dir=ROOT / "build"))
    try:
        lab = base / "lab"
        lab.mkdir()
        shutil.copyfile(ROOT / "Makefile", lab / "Makefile")
        for d in ("common", "solutions"):
            shutil.copytree(ROOT / d, lab / d, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(ROOT / "grader", lab / "grader",
                        ignore=shutil.ignore_patterns("__pycache__", "mutants", "selftest"))
        victims = [lab / "Makefile", lab / "grader" / "tests" / "01-signal" / "poll_test.c"]
        code = "".join(f'    {{ FILE *f = fopen("{v}", "a"); if (f) {{ fputs("/* here */\\n", f); fclose(f); }} }}\n'
                       for v in victims)
        tree = hostile_tree(tmp_path, code, includes=("stdio.h",))
        shutil.copytree(tree, base / "tree")
        for dirpath, dirnames, filenames in os.walk(base):
            for n in [dirpath, *(os.path.join(dirpath, f) for f in filenames)]:
                os.chown(n, nobody.pw_uid, nobody.pw_gid)
        os.chmod(base, 0o755)
        before = [v.read_bytes() for v in victims]
        cmd = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups",
               "env", f"HOME={base}", "PATH=/usr/bin:/bin", "LAB_GATE_CALLS=0", "NO_COLOR=1",
               "make", "-s", "-C", str(lab), "grade", f"TARGET={base / 'tree'}", "STAGE=1", f"ITEMS={ITEM}",
               f"PY={sys.executable}"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        out = p.stdout + p.stderr
        if "own /tmp" not in out:
            pytest.skip("an ordinary user gets no mount namespace on this machine: " + out[-300:])
        assert [v.read_bytes() for v in victims] == before, "a test wrote to the checkout:\n" + out[-3000:]
        assert p.returncode == 0 and "NOT TRUSTED" not in out and "Total: 1/1" in out, out[-3000:]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_public_tests_process_holds_nothing_of_the_hidden_ones(tmp_path):
    """With an instructor's hidden tests, the public tests run in a binary
    without them (assemble.StageBuild.public_binaries, pipeline._lane_run):
    code under test that searched its own executable for a hidden test's
    name, to pass its strings out through a visible test's numbers, finds
    nothing there. The tree aborts where it finds the name (which it holds
    with each byte's low bit flipped, not to find itself): the visible item
    passes, the hidden one (whose run has the name) fails."""
    hidden = ROOT / "grader" / "selftest" / "data" / "hidden"
    tree = hostile_tree(tmp_path, '    int exe = open("/proc/self/exe", O_RDONLY);\n'
                                  '    static char seen[65536 + 16];\n'
                                  '    size_t have = 0;\n'
                                  '    ssize_t got;\n'
                                  '    while (exe >= 0 && (got = read(exe, seen + have, 65536)) > 0) {\n'
                                  '        size_t len = have + (size_t)got;\n'
                                  '        for (size_t i = 0; i + 12 <= len; i++) {\n'
                                  '            size_t k = 0;\n'
                                  '            while (k < 12 && (seen[i + k] ^ 1) == "uisdd^v`jdsr"[k])\n'
                                  '                k++;\n'
                                  '            if (k == 12)\n'
                                  '                abort();\n'
                                  '        }\n'
                                  '        memmove(seen, seen + len - 11, 11);\n'
                                  '        have = 11;\n'
                                  '    }\n'
                                  '    if (exe >= 0)\n'
                                  '        close(exe);\n',
                        includes=("fcntl.h", "stdlib.h", "string.h", "unistd.h"))
    g = grade(tmp_path, tree, stage="01-signal", items=[ITEM, "hidden-latest-waker-thrice"],
              extra=[f"HIDDEN={hidden}"], timeout=300)
    assert g.item(f"01-signal/{ITEM}")["score"] == 1, g.output[-3000:]
    assert g.item("01-signal/hidden-latest-waker-thrice")["score"] == 0, g.output[-3000:]
