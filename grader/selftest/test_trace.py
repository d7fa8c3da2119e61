"""The trace facility (docs/tracing.md): common/tracing/trace.{h,c}, the hooks in
stages 03 and 05, make trace's builder (grader/tracing/trace_build.py) and the renderer
(grader/tracing/trace_render.py).

  - the files are valid Chrome Trace Event JSON (what Perfetto loads);
  - three yielding tasks on the reference give exactly the expected events;
  - the timer storm's wakes come from the timer source;
  - the echo server under load: readiness events, wakes from I/O (stage 06);
  - a work-stealing run: two worker lanes, steals, injector pulls (stage 07);
  - the stall lamp fires on a 20 ms poll and not on short ones;
  - built without -DLAB_TRACE, no trace symbol is left in the objects;
  - the hooks survive skeleton generation (labs/ builds traced);
  - the renderer draws a PNG.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "grader"))
sys.path.insert(0, str(ROOT / "grader" / "tracing"))
import trace_build as lab_trace  # noqa: E402

CC = os.environ.get("CC", "gcc")


def run_example(binary, out, args=(), env=None):
    e = dict(os.environ, LAB_TRACE_FILE=str(out))
    e.pop("LAB_TRACE", None)
    e.pop("LAB_TRACE_STALL_MS", None)
    e.update(env or {})
    proc = subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True, env=e, timeout=60)
    return proc


@pytest.fixture(scope="module")
def three_tasks():
    stage = lab_trace.find_stage("3")
    return lab_trace.build(stage, ROOT / "examples/03-executor/three_tasks.c", "solutions")


@pytest.fixture(scope="module")
def busy_and_thief():
    stage = lab_trace.find_stage("7")
    return lab_trace.build(stage, ROOT / "examples/07-work-stealing/busy_and_thief.c", "solutions")


@pytest.fixture(scope="module")
def echo_server():
    stage = lab_trace.find_stage("6")
    return lab_trace.build(stage, ROOT / "examples/06-reactor/echo_server.c", "solutions")


@pytest.fixture(scope="module")
def timer_storm():
    stage = lab_trace.find_stage("5")
    return lab_trace.build(stage, ROOT / "examples/05-timer/timer_storm.c", "solutions")


@pytest.fixture(scope="module")
def ring_readers():
    stage = lab_trace.find_stage("8")
    return lab_trace.build(stage, ROOT / "examples/08-uring/ring_readers.c", "solutions")


# ---- the trace-event format --------------------------------------------------------

REQUIRED = {
    "B": {"name", "ts", "pid", "tid"},
    "E": {"ts", "pid", "tid"},
    "X": {"name", "ts", "dur", "pid", "tid"},
    "i": {"name", "ts", "pid", "tid", "s"},
    "s": {"name", "cat", "id", "ts", "pid", "tid"},
    "f": {"name", "cat", "id", "ts", "pid", "tid"},
    "M": {"name", "pid", "args"},
}


def validate(path):
    """Checks a file against the Chrome Trace Event format as Perfetto reads
    it; returns the events. Raises AssertionError with the first problem."""
    data = json.loads(pathlib.Path(path).read_text())
    assert isinstance(data, dict) and isinstance(data.get("traceEvents"), list), \
        "the file is not {\"traceEvents\": [...]}"
    events = data["traceEvents"]
    depth, last_ts, flows = {}, {}, {}
    for n, e in enumerate(events):
        ph = e.get("ph")
        assert ph in REQUIRED, f"event {n}: unknown phase {ph!r}"
        missing = REQUIRED[ph] - e.keys()
        assert not missing, f"event {n} ({ph}): missing {sorted(missing)}"
        if ph == "M":
            assert e["name"] in ("process_name", "thread_name", "thread_sort_index"), e
            continue
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, f"event {n}: bad ts {e['ts']!r}"
        key = (e["pid"], e["tid"])
        assert e["ts"] >= last_ts.get(key, 0), \
            f"event {n}: time goes backwards on thread {e['tid']} ({last_ts[key]} -> {e['ts']})"
        last_ts[key] = e["ts"]
        if ph == "B":
            depth[key] = depth.get(key, 0) + 1
        elif ph == "E":
            depth[key] = depth.get(key, 0) - 1
            assert depth[key] >= 0, f"event {n}: E without a B on thread {e['tid']}"
        elif ph == "i":
            assert e["s"] in ("t", "p", "g"), f"event {n}: instant scope {e['s']!r}"
        elif ph in ("s", "f"):
            assert ph not in flows.setdefault(e["id"], {}), f"flow {e['id']}: two '{ph}' events"
            flows[e["id"]][ph] = e
    for key, d in depth.items():
        assert d == 0, f"thread {key[1]}: {d} B event(s) never ended"
    for fid, pair in flows.items():
        assert set(pair) == {"s", "f"}, f"flow {fid}: only {sorted(pair)}"
        assert pair["s"]["ts"] <= pair["f"]["ts"], f"flow {fid}: ends before it starts"
    return events


def test_validator_rejects_broken_traces(tmp_path):
    bad = {
        "unbalanced": [{"ph": "B", "name": "x", "ts": 1, "pid": 1, "tid": 1}],
        "backwards": [{"ph": "i", "name": "a", "s": "t", "ts": 5, "pid": 1, "tid": 1},
                      {"ph": "i", "name": "b", "s": "t", "ts": 4, "pid": 1, "tid": 1}],
        "unpaired flow": [{"ph": "s", "name": "w", "cat": "wake", "id": 3, "ts": 1, "pid": 1, "tid": 1}],
        "missing key": [{"ph": "B", "name": "x", "pid": 1, "tid": 1}],
    }
    for what, events in bad.items():
        p = tmp_path / f"{what.replace(' ', '_')}.json"
        p.write_text(json.dumps({"traceEvents": events}))
        with pytest.raises(AssertionError):
            validate(p)


def test_three_tasks_trace_is_valid(three_tasks, tmp_path):
    out = tmp_path / "t.json"
    proc = run_example(three_tasks, out, [0])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    validate(out)


def test_three_tasks_exact_event_sequence(three_tasks, tmp_path):
    """Spawn 1 2 3; polls 1 2 3 1 2 3 1 2 3 1 2 3 on one thread; every poll
    but each task's last holds exactly one wake of that task by itself, whose
    arrow ends at the task's next poll; each last poll completes its task."""
    out = tmp_path / "t.json"
    proc = run_example(three_tasks, out, [0])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    events = [e for e in validate(out) if e["ph"] != "M"]
    assert {e["tid"] for e in events} == {events[0]["tid"]}, "everything happens on the executor's thread"
    spawns = [e["args"]["task"] for e in events if e["name"].startswith("spawn")]
    assert spawns == [1, 2, 3]
    first_poll = next(i for i, e in enumerate(events) if e["ph"] == "B" and e["cat"] == "poll")
    assert all(not e["name"].startswith("spawn") for e in events[first_poll:]), "spawns come first"

    # walk the polls: what happens inside each
    polls, cur = [], None
    for e in events[first_poll:]:
        if e["ph"] == "B" and e["cat"] == "poll":
            assert cur is None, "polls do not nest"
            cur = {"task": e["args"]["task"], "wakes": [], "flow_in": None, "flow_out": [],
                   "complete": False}
        elif e["ph"] == "E" and e["cat"] == "poll":
            polls.append(cur)
            cur = None
        elif cur is None:
            pytest.fail(f"an event outside any poll: {e}")
        elif e["ph"] == "B" and e["cat"] == "wake":
            cur["wakes"].append((e["args"]["task"], e["args"]["source"], e["args"].get("by")))
        elif e["ph"] == "f":
            cur["flow_in"] = e["id"]
        elif e["ph"] == "s":
            cur["flow_out"].append(e["id"])
        elif e["name"].startswith("complete"):
            cur["complete"] = e["args"]["task"]
    assert [p["task"] for p in polls] == [1, 2, 3] * 4
    arrows = {}
    for n, p in enumerate(polls):
        k, last = p["task"], n >= 9
        if last:
            assert p["wakes"] == [] and p["complete"] == k, f"poll {n}: the last poll of task {k} completes it"
        else:
            assert p["wakes"] == [(k, "task", k)], f"poll {n}: one wake of task {k}, by itself: {p['wakes']}"
            assert len(p["flow_out"]) == 1 and not p["complete"]
            arrows[p["flow_out"][0]] = (k, n)
        if n < 3:
            assert p["flow_in"] is None, "a first poll has no wake arrow in"
        else:
            src_task, src_n = arrows.pop(p["flow_in"])
            assert (src_task, src_n) == (k, n - 3), f"poll {n}: the arrow comes from task {k}'s previous poll"
    assert not arrows


def test_timer_storm_wakes_come_from_timers(timer_storm, tmp_path):
    out = tmp_path / "t.json"
    proc = run_example(timer_storm, out, [6, 2])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    events = validate(out)
    wakes = [e for e in events if e["ph"] == "B" and e.get("cat") == "wake"]
    assert len(wakes) == 12 and {w["args"]["source"] for w in wakes} == {"timer"}
    assert sum(e["args"]["count"] for e in events if e["name"] == "timer fire") == 12
    assert sum(1 for e in events if e["ph"] == "f") == 12, "each timer wake has its arrow"
    assert any(e["name"] == "park" and e["ph"] == "B" for e in events)
    assert any(e["name"] == "time driver" and e["ph"] == "B" for e in events)


def test_echo_server_under_load_wakes_come_from_io(echo_server, tmp_path):
    """make trace STAGE=6's run (the echo server serving 2 connections of 50
    round trips, then exiting): readiness events inside reactor turns, and
    every wake comes from I/O (no timer is armed, no task wakes another)."""
    out = tmp_path / "t.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAB_TRACE")}
    env["LAB_TRACE_FILE"] = str(out)
    rc = lab_trace.run_served(echo_server, lab_trace.find_stage("6"), "2 50 64", env)
    assert rc == 0
    events = validate(out)
    ready = [e for e in events if e["name"] == "readiness"]
    turns = [e for e in events if e["name"] == "reactor" and e["ph"] == "B"]
    wakes = [e for e in events if e["ph"] == "B" and e.get("cat") == "wake"]
    assert turns and len(ready) >= 50, f"{len(turns)} reactor turns, {len(ready)} readiness events"
    assert all(e["args"]["token"] > 0 and e["args"]["events"] > 0 for e in ready)
    assert len(wakes) >= 50 and {w["args"]["source"] for w in wakes} == {"io"}, \
        {w["args"]["source"] for w in wakes}
    polls = sum(1 for e in events if e["ph"] == "B" and e.get("cat") == "poll")
    assert polls >= 50 and sum(1 for e in events if e["name"].startswith("complete")) == 3, \
        "the acceptor and the two connections complete"


def test_ring_readers_wakes_come_from_the_ring_and_the_timers(ring_readers, tmp_path):
    """make trace STAGE=8's run, as docs/08-uring.md#seeing-it-run describes
    it: each reader but reader 0 (task 1) woken once, from I/O (a CQE
    dispatched inside the ring driver's turn); the sender (the last task)
    and reader 0 only by timers; and reader 0's dropped read costs one park
    that ends with no task polled (its cancel and its last CQE)."""
    out = tmp_path / "t.json"
    proc = run_example(ring_readers, out, [8])
    if proc.returncode != 0 and "not available" in proc.stderr:
        pytest.skip("io_uring is not available here")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    events = validate(out)
    wakes = [e for e in events if e["ph"] == "B" and e.get("cat") == "wake"]
    sources = {}
    for w in wakes:
        sources.setdefault(w["args"]["task"], []).append(w["args"]["source"])
    assert sources.get(1) == ["timer"], sources.get(1)
    for t in range(2, 9):
        assert sources.get(t) == ["io"], (t, sources.get(t))
    assert set(sources.get(9, [])) == {"timer"} and len(sources[9]) >= 8, sources.get(9)
    assert any(e["name"] == "reactor" and e["ph"] == "B" for e in events), "the ring's turns are drawn"
    # after reader 0 completes: a park, then at once another park, no poll between them
    tid = next(e["tid"] for e in events if e["name"] == "complete task 1")
    lane = [e for e in events if e.get("tid") == tid and e["ph"] in ("B", "E", "i")]
    at = next(i for i, e in enumerate(lane) if e["name"] == "complete task 1")
    # (each executor park is two "park" slices: the time driver's park of the ring driver nests in it)
    # The sender's polls are left out: its timers fire when the machine lets
    # them (seen in CI: its poll came first, on a loaded machine)
    outer = [e for e in lane[at:] if e["ph"] == "B" and (e["name"] == "park" or e.get("cat") == "poll")
             and e["name"] != "task 9"]
    names = [e["name"] for e in outer[:4]]
    if names != ["park"] * 4 and "park" in names[:2]:
        # A reader polled right after the first park: its byte was reaped in
        # the same turn as reader 0's cancel. That is the machine's timing
        # only if the sender sent it after reader 0 completed (seen once in
        # CI, beside other work); with no send in between, the dropped read
        # cost no park of its own, and that fails.
        first_poll = next(e for e in outer if e["name"] != "park")
        sent = [e for e in lane[at:] if e["ph"] == "B" and e["name"] == "task 9" and e["ts"] < first_poll["ts"]]
        if sent:
            pytest.skip(f"the sender sent again {len(sent)} time(s) between reader 0's end and the first park's "
                        f"end (a loaded machine): that park reaped a reader's byte with the cancel")
    assert names == ["park"] * 4, [e["name"] for e in outer[:6]]


def test_work_stealing_trace_has_steals_on_two_workers(busy_and_thief, tmp_path):
    """make trace STAGE=7 EXAMPLE=busy_and_thief: a valid file, two worker
    lanes that both poll, at least one steal by one worker from the other
    (the root keeps its worker busy until a child has started), the root
    pulled from the injector, every task spawned at the example's lines."""
    out = tmp_path / "t.json"
    proc = run_example(busy_and_thief, out, [8, 100, 2])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    events = validate(out)
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    workers = {t for t, n in names.items() if n.startswith("worker ")}
    polled_on = {e["tid"] for e in events if e["ph"] == "B" and e.get("cat") == "poll"}
    assert len(workers) == 2 and workers <= polled_on, (names, polled_on)
    steals = [e for e in events if e["name"] == "steal"]
    assert steals, "no steal in the trace"
    for st in steals:
        thief = int(names[st["tid"]].split()[1])
        assert st["args"]["victim"] in (0, 1) and st["args"]["victim"] != thief and st["args"]["count"] >= 1
    pulls = [e for e in events if e["name"] == "injector pull"]
    assert pulls and all(names[e["tid"]].startswith("worker ") for e in pulls)
    spawns = [e for e in events if e["name"].startswith("spawn")]
    assert len(spawns) == 9 and all(e["args"]["site"].startswith("busy_and_thief.c:") for e in spawns)
    assert sum(1 for e in events if e["name"].startswith("complete")) == 9


# ---- the stall lamp ----------------------------------------------------------------------

def test_stall_lamp_fires_on_a_long_poll(three_tasks, tmp_path):
    out = tmp_path / "t.json"
    proc = run_example(three_tasks, out, [0, 20])
    assert proc.returncode == 0, proc.stderr
    lamps = [line for line in proc.stderr.splitlines() if line.startswith("trace: stall:")]
    assert len(lamps) == 1, proc.stderr
    assert "task 2" in lamps[0] and "three_tasks.c:" in lamps[0], lamps[0]
    stalls = [e for e in validate(out) if e.get("cat") == "stall"]
    assert len(stalls) == 1 and stalls[0]["args"]["task"] == 2 and stalls[0]["args"]["ms"] >= 19.9


def test_stall_lamp_quiet_on_short_polls_and_threshold_from_env(three_tasks, tmp_path):
    """The lamp reads wall time: a poll of microseconds that the kernel
    preempted for longer than the threshold lights it honestly (seen in
    make test beside three workers: 12.2 ms over 10). So each case is run
    three times and must be quiet at least once: a lamp lit by every short
    poll is lit every time."""
    out = tmp_path / "t.json"
    for args, env, why in (([200, 0], None, "polls of 200 us of work are under the 10 ms default"),
                           ([0, 20], {"LAB_TRACE_STALL_MS": "50"}, "a 20 ms poll is under a 50 ms threshold")):
        said = [run_example(three_tasks, out, args, env=env).stderr for _ in range(3)]
        assert any("stall" not in s for s in said), f"{why}; three runs said:\n" + "\n".join(said)


def test_switched_off_at_run_time_writes_nothing(three_tasks, tmp_path):
    out = tmp_path / "t.json"
    proc = run_example(three_tasks, out, [0, 20], env={"LAB_TRACE": "0"})
    assert proc.returncode == 0 and not out.exists() and "stall" not in proc.stderr


# ---- zero cost when off; the hooks survive generation --------------------------------------

def nm_symbols(tmp_path, tree, traced):
    dirs = [ROOT / tree / s for s in ("01-signal", "02-block-on", "03-executor", "05-timer", "06-reactor",
                                      "07-work-stealing")]
    incs = ["-iquote", str(ROOT / "common"), "-iquote", str(ROOT / "common" / "tracing")]
    for d in dirs:
        incs += ["-iquote", str(d)]
    syms = set()
    srcs = [ROOT / "common" / c for c in ("waker.c", "wake_obj.c", "driver.c", "coop.c")]
    srcs += [p for d in dirs for p in sorted(d.glob("*.c"))]
    flags = ["-std=c11", "-O2", "-pthread", "-Wall", "-Wextra"] + (["-DLAB_TRACE"] if traced else [])
    objs = [tmp_path / f"{src.parent.name}-{src.stem}-{int(traced)}.o" for src in srcs]
    procs = [subprocess.Popen([CC, *flags, *incs, "-c", str(src), "-o", str(obj)])
             for src, obj in zip(srcs, objs)]  # in parallel: a dozen compilers, a few seconds
    assert all(p.wait() == 0 for p in procs)
    out = subprocess.run(["nm", *map(str, objs)], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.strip() and not line.endswith(":"):
            syms.add(line.split()[-1])
    return syms


def test_tracing_off_leaves_no_trace_symbol(tmp_path):
    off = nm_symbols(tmp_path, "solutions", traced=False)
    assert not [s for s in off if "trace" in s], sorted(s for s in off if "trace" in s)
    on = nm_symbols(tmp_path, "solutions", traced=True)
    for s in ("trace_poll_begin_", "trace_wake_begin_", "trace_park_begin_", "trace_source_begin",
              "task_run_traced", "task_new_traced", "reactor_dispatch_traced", "trace_io_ready",
              "trace_steal", "trace_injector_pull", "trace_thread_name", "trace_task_complete_"):
        assert s in on, f"{s} is not referenced with -DLAB_TRACE"


def test_hooks_survive_skeleton_generation(tmp_path):
    """The untouched skeleton builds traced (the wrappers are outside the
    student regions), stops at its first TODO, and links the hooks."""
    syms = set()
    for stage, example in (("3", "three_tasks"), ("5", "timer_storm")):
        st = lab_trace.find_stage(stage)
        binary = lab_trace.build(st, ROOT / f"examples/{st.name}/{example}.c", "labs")
        proc = run_example(binary, tmp_path / "t.json")
        assert proc.returncode == 86, "the untouched skeleton stops at its first TODO"
        out = subprocess.run(["nm", str(binary)], check=True, capture_output=True, text=True).stdout
        syms |= {line.split()[-1] for line in out.splitlines() if line.strip()}
    assert {"task_run_traced", "task_new_traced", "task_waker_wake_traced", "td_park_traced"} <= syms


def traced_blocks(text):
    """The #ifdef LAB_TRACE ... #endif blocks of a source (not nested)."""
    blocks, cur = [], None
    for line in text.splitlines():
        if cur is None and line.strip() in ("#ifdef LAB_TRACE", "#if defined(LAB_TRACE) && !defined(LAB_REACTOR_C)",
                                            "#if defined(LAB_TRACE) && !defined(LAB_RUNTIME_C)"):
            cur = [line]
        elif cur is not None:
            cur.append(line)
            if line.startswith("#endif"):
                blocks.append("\n".join(cur))
                cur = None
    return blocks


def test_stage_06_07_hooks_survive_skeleton_generation(tmp_path):
    """Stages 06 and 07: every traced block of the reference (the dispatch
    wrapper, the steal and injector wrappers, the spawn-site macros, the
    completion and the thread names) is in the skeleton word for word; the
    untouched skeletons build traced, and their given code calls the hooks."""
    files = {"06-reactor": ["reactor.c", "reactor.h"], "07-work-stealing": ["runtime.c", "runtime.h"]}
    for stage, names in files.items():
        for name in names:
            sol = (ROOT / "solutions" / stage / name).read_text()
            lab = (ROOT / "labs" / stage / name).read_text()
            blocks = traced_blocks(sol)
            assert blocks, f"solutions/{stage}/{name} has no traced block"
            for b in blocks:
                assert b in lab, f"labs/{stage}/{name} lost a traced block:\n{b[:200]}"
    refs = {}
    for stage, example in (("6", "echo_server"), ("7", "busy_and_thief")):
        st = lab_trace.find_stage(stage)
        binary = lab_trace.build(st, ROOT / f"examples/{st.name}/{example}.c", "labs")
        for obj in (binary.parent / f"obj-{binary.name}").glob("*.o"):
            out = subprocess.run(["nm", str(obj)], check=True, capture_output=True, text=True).stdout
            refs[obj.name.split("-", 1)[1]] = {line.split()[-1] for line in out.splitlines() if line.strip()}
    assert "reactor_dispatch_traced" in refs["reactor.o"]
    # (worker_park's trace_park_begin is there too, but only park_idle, a
    # student region, calls worker_park: in the skeleton it is left out)
    assert {"trace_thread_name", "trace_unpark_", "trace_task_complete_", "task_new_traced"} <= refs["runtime.o"]


# ---- the renderer ------------------------------------------------------------------------

def test_make_trace_in_a_stage_folder(tmp_path):
    """make trace typed in a stage folder: that stage of that tree, and
    trace.json in that folder; the render command it suggests works there."""
    tree = tmp_path / "mine"
    shutil.copytree(ROOT / "solutions" / "03-executor", tree / "03-executor")
    shutil.copytree(ROOT / "solutions" / "02-block-on", tree / "02-block-on")
    shutil.copytree(ROOT / "solutions" / "01-signal", tree / "01-signal")
    folder = tree / "03-executor"
    at_root = lambda: (ROOT / "trace.json").stat().st_mtime_ns if (ROOT / "trace.json").exists() else None  # noqa: E731
    before = at_root()
    proc = subprocess.run(["make", "-s", "--no-print-directory", "trace", f"LAB_ROOT={ROOT}"], cwd=folder,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    validate(folder / "trace.json")
    assert at_root() == before, "make trace in a stage folder wrote the lab root's trace.json"
    render = next(line.split("draw it: ", 1)[1] for line in proc.stdout.splitlines() if "draw it: " in line)
    assert render.split()[1] == os.path.relpath(ROOT / "grader" / "tracing" / "trace_render.py", folder), render


def test_render_draws_a_png(three_tasks, tmp_path):
    out = tmp_path / "t.json"
    assert run_example(three_tasks, out, [50]).returncode == 0
    png = tmp_path / "t.png"
    proc = subprocess.run([sys.executable, str(ROOT / "grader/tracing/trace_render.py"), str(out), "-o", str(png)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert "12 polls, 9 wake arrows" in proc.stdout, proc.stdout


def test_recorder_is_race_free_across_threads(tmp_path):
    """Four threads record (wakes across threads, renames, parks) while the
    main thread writes the file: no report from ThreadSanitizer, and the
    file that is left is valid."""
    binary = tmp_path / "threads"
    src = ROOT / "grader/selftest/data/trace/threads.c"
    subprocess.run([CC, "-std=c11", "-O1", "-g", "-pthread", "-fsanitize=thread", "-Wall", "-Wextra",
                    "-Werror", "-DLAB_TRACE", "-iquote", str(ROOT / "common"), "-iquote", str(ROOT / "common/tracing"),
                    str(src), str(ROOT / "common/tracing/trace.c"), "-o", str(binary)], check=True)
    out = tmp_path / "t.json"
    proc = run_example(binary, out, env={"TSAN_OPTIONS": "halt_on_error=1 exitcode=66"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = validate(out)
    names = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert {"worker 0", "worker 3", "main"} <= names
    assert sum(1 for e in events if e["ph"] == "B" and e.get("cat") == "poll") == 4 * 3000


# ---- the fallback to the reference (as make grade does) --------------------------------

def fallback_tree(tmp_path):
    """01 and 03 finished (the reference's), 02 an untouched skeleton."""
    tree = tmp_path / "mine"
    for src in ("solutions/01-signal", "labs/02-block-on", "solutions/03-executor"):
        shutil.copytree(ROOT / src, tree / pathlib.Path(src).name)
    return tree


def test_make_trace_falls_back_like_make_grade(tmp_path):
    """An earlier stage that make grade would replace (02, a skeleton) is the
    reference's in the traced build too, and one line says so and why; the
    finished 01 stays the tree's. --no-fallback traces the tree as it is:
    it stops at 02's first TODO."""
    tree = fallback_tree(tmp_path)
    out = tmp_path / "t.json"
    proc = subprocess.run(["make", "-s", "--no-print-directory", "-C", str(ROOT), "trace", "STAGE=3",
                           f"TARGET={tree}", f"OUT={out}", f"PY={sys.executable}"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    said = [line for line in proc.stdout.splitlines() if "the reference's" in line]
    assert len(said) == 1, proc.stdout
    assert "02-block-on stands in for yours" in said[0] and "LAB_TODO (block_on.c:" in said[0], said[0]
    assert "01-signal" not in said[0], said[0]
    validate(out)
    stage = lab_trace.find_stage("3")
    with pytest.raises(SystemExit):   # the skeleton, linked as it is, does not run
        lab_trace.main(["--stage", "3", "--target", str(tree), "--out", str(tmp_path / "n.json"), "--no-fallback"])
    assert not (tmp_path / "n.json").exists()
    assert lab_trace.fallback(stage, ROOT / "examples/03-executor/three_tasks.c", "solutions") == {}


def test_handout_trace_links_the_shipped_traced_reference(tmp_path, monkeypatch):
    """In the handout (no solutions/), the fallback links the traced
    reference objects that ship_traced_reference writes for it, and
    TARGET=solutions says in one line that there is none."""
    shipped = tmp_path / "handout"
    lab_trace.ship_traced_reference(shipped, names=["02-block-on"])
    headers = shipped / "grader" / "reference" / "02-block-on" / "handout"
    shutil.copytree(ROOT / "labs" / "02-block-on", headers)
    monkeypatch.setattr(lab_trace, "SOLUTIONS", tmp_path / "solutions")   # none, as in the handout
    monkeypatch.setattr(lab_trace, "SHIPPED", shipped / "grader" / "reference")
    tree = fallback_tree(tmp_path)
    stage = lab_trace.find_stage("3")
    binary = lab_trace.build(stage, ROOT / "examples/03-executor/three_tasks.c", str(tree),
                             reference=("02-block-on",))
    proc = run_example(binary, tmp_path / "t.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    validate(tmp_path / "t.json")
    with pytest.raises(SystemExit, match="no solutions/ here"):
        lab_trace.main(["--stage", "3", "--target", str(tmp_path / "solutions")])
    # a handout that ships no traced reference: one line that says so, before any build
    monkeypatch.setattr(lab_trace, "SHIPPED", tmp_path / "nothing")
    with pytest.raises(SystemExit, match=r"your 02-block-on still has a LAB_TODO .* no traced reference of it here"):
        lab_trace.main(["--stage", "3", "--target", str(tree), "--out", str(tmp_path / "n.json")])
