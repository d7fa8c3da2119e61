#!/usr/bin/env python3
"""Build a stage's example with tracing on, run it, keep its trace (`make trace`).

    trace_build.py --stage 3 [--example three_tasks] [--target labs] [--out trace.json]
             [--render trace.png] [--build-only] [--load "4 400 64"] [-- example arguments]

The example is examples/NN-name/<example>.c. It is compiled with -DLAB_TRACE
together with the target tree's files of that stage and of the stages it
stands on (the rubric's `uses`, as the grader does), common/ and
common/tracing/trace.c, then run with LAB_TRACE_FILE pointing at --out. Open the file
at https://ui.perfetto.dev (or chrome://tracing), or draw it with
grader/tracing/trace_render.py (--render does both in one go). docs/tracing.md.

A serving example (stage 06's echo server) is started on a free port to
serve a few connections, loaded by examples/06-reactor/load_client (built
plain, without the runtime), and traced until it exits.

An earlier stage of the target tree that make grade would not use (it does
not build, or fails one of its own tests, or stands on such a stage: the
grader's own decision, cached under build/grade) is replaced by the
reference, as make grade does, and one line says which and why: from
solutions/ in the instructors' repository, from the traced reference
objects in grader/reference/NN-name/trace/ in the handout
(ship_traced_reference writes them). --no-fallback traces the tree as it is.

Only the Python standard library; the binary goes to build/trace/.
"""
import argparse
import hashlib
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "grader"))

from lab_grader import arguments, rubric  # noqa: E402

COMMON = ["waker.c", "wake_obj.c", "driver.c", "coop.c", "lab_todo.c", "tracing/trace.c"]
CC = arguments.read_environment(ROOT).cc


def find_stage(spec):
    stages = {s.name: s for s in rubric.load_all(ROOT / "grader" / "rubric")}
    spec = str(spec).strip()
    for name in stages:
        num = name.split("-", 1)[0]
        if spec in (name, num) or (spec.isdigit() and int(spec) == int(num)):
            return stages[name]
    sys.exit(f"trace: no stage {spec!r} (stages: {', '.join(sorted(stages))})")


# Programs in an examples folder that are not examples of the runtime: the
# load client is plain C and epoll, built without it (run_served uses it).
HELPERS = {"load_client"}

# Examples that serve: make trace starts the server (serving CONNECTIONS
# connections, then exiting, so that the trace is written), loads it with
# examples/06-reactor/load_client (--load "CONNECTIONS ROUND_TRIPS SIZE"),
# and waits for it to exit.
SERVED = {("06-reactor", "echo_server"), ("07-work-stealing", "echo_server_mt")}

# Examples that stand on a stage beyond the rubric's `uses` of theirs: the
# stage 06 echo server on the work-stealing runtime needs the reactor.
EXTRA_STAGES = {("07-work-stealing", "echo_server_mt"): ["06-reactor"]}
DEFAULT_LOAD = "4 400 64"


def examples_of(stage):
    return sorted(p for p in (ROOT / "examples" / stage).glob("*.c") if p.stem not in HELPERS)


def rel(path):
    try:
        return str(pathlib.Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


FLAGS = ["-std=c11", "-O2", "-g", "-pthread", "-Wall", "-Wextra", "-DLAB_TRACE"]
SOLUTIONS = ROOT / "solutions"
SHIPPED = ROOT / "grader" / "reference"     # the handout's reference objects (grader/course/handout.py)


def tree_of(target):
    return (ROOT / target) if not pathlib.Path(target).is_absolute() else pathlib.Path(target)


def stages_of(stage, example):
    """The stages the example links, deepest first, the traced one last."""
    return [*stage.uses, *EXTRA_STAGES.get((stage.name, example.stem), []), stage.name]


def reference_stage(name):
    """Where the reference of one stage comes from for a traced build:
    ("source", dir) in the instructors' repository, ("objects", (headers
    dir, objects dir)) in a handout that ships them, or None."""
    if (SOLUTIONS / name).is_dir():
        return "source", SOLUTIONS / name
    objs = SHIPPED / name / "trace"
    if objs.is_dir() and any(objs.glob("*.o")):
        return "objects", (SHIPPED / name / "handout", objs)
    return None


def build(stage, example, target, extra_flags=(), reference=()):
    """Compiles the traced example; returns the binary's path. reference:
    the names of earlier stages to take from the reference instead of the
    target tree (fallback() decides which)."""
    tree = tree_of(target)
    if not tree.is_dir() and tree.name == "solutions" and not SOLUTIONS.is_dir():
        sys.exit("trace: there is no solutions/ here (the handout has none): "
                 "make trace traces your tree, labs/ by default, or TARGET=path")
    names = stages_of(stage, example)
    dirs, prebuilt = [], []
    for n in names:
        ref = reference_stage(n) if n in reference else None
        if n in reference and ref is None:
            sys.exit(f"trace: your {n} cannot be used and there is no traced reference of it here (neither "
                     f"solutions/{n} nor {rel(SHIPPED / n / 'trace')}): make grade STAGE={n[:2]} says what to finish")
        if ref and ref[0] == "objects":
            dirs.append(ref[1][0])
            prebuilt += sorted(ref[1][1].glob("*.o"))
        else:
            dirs.append(ref[1] if ref else tree / n)
    for d in dirs:
        if not d.is_dir():
            sys.exit(f"trace: {d} is missing")
    srcs = [ROOT / "common" / c for c in COMMON]
    for n, d in zip(names, dirs):
        if not (n in reference and reference_stage(n)[0] == "objects"):
            srcs += sorted(d.glob("*.c"))
    srcs.append(example)
    out_dir = ROOT / "build" / "trace"
    out_dir.mkdir(parents=True, exist_ok=True)
    # the tree's own folder in the name: two trees of the same name (two
    # users' "mine", or two self-tests side by side) never share objects
    where = hashlib.sha256(str(tree.resolve()).encode()).hexdigest()[:8]
    binary = out_dir / f"{tree.name}-{where}-{stage.name}-{example.stem}"
    if reference:
        binary = binary.with_name(binary.name + "-on-reference-" + "-".join(n.split("-", 1)[0] for n in reference))
    flags = [*FLAGS, *extra_flags]
    if tree.resolve() == SOLUTIONS.resolve():
        flags.append("-Werror")  # the reference builds without a warning, traced or not
    incs = ["-iquote", str(ROOT / "common"), "-iquote", str(ROOT / "common" / "tracing")]
    for d in dirs:
        incs += ["-iquote", str(d)]
    # paths relative to the top where they can be: __FILE__, and so the
    # spawn sites in the trace, read examples/03-executor/three_tasks.c.
    # One compiler per file, all at once, then the link.
    obj_dir = out_dir / f"obj-{binary.name}"
    obj_dir.mkdir(exist_ok=True)
    objs = [obj_dir / f"{i:02d}-{s.stem}.o" for i, s in enumerate(srcs)]
    procs = [subprocess.Popen([CC, *flags, *incs, "-c", rel(s), "-o", str(o)], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for s, o in zip(srcs, objs)]
    logs = [(p.communicate()[0], p.returncode) for p in procs]
    said = "".join(out for out, _ in logs)
    if said.strip():
        sys.stderr.write(said)
    if any(rc != 0 for _, rc in logs):
        sys.exit(f"trace: {example.name} did not build against {tree}")
    libs = [f"-l{lib}" for lib in stage.libs]   # the rubric's libs: stage 08's -luring
    proc = subprocess.run([CC, *flags, *map(str, objs), *map(str, prebuilt), "-o", str(binary), *libs],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        sys.exit(f"trace: {example.name} did not link against {tree}")
    return binary


def fallback(stage, example, target):
    """The earlier stages of target that make grade would replace by the
    reference, as {name: why}: the grader's own decision (pipeline.py: the
    stage builds and passes its plain tests; kept under build/grade, so a
    second trace does not run them again). The example's extra stages (the
    echo server's 06 under stage 07) and a grader that cannot decide fall back
    to a cheaper rule: a stage that still calls LAB_TODO is a skeleton."""
    tree = tree_of(target)
    if tree.resolve() == SOLUTIONS.resolve():
        return {}
    earlier = stages_of(stage, example)[:-1]
    out = {}
    try:
        from lab_grader import pipeline
        p = pipeline.Pipeline(root=ROOT, target=tree, stages=rubric.load_all(ROOT / "grader" / "rubric"),
                              selected=[stage], build_dir=ROOT / "build" / "grade")
        try:
            p.start(lanes=False)
            for n in stage.uses:
                ok, why = p.usable[n].result()
                if not ok:   # a skeleton says so more plainly than its failed tests
                    todo = skeleton_todo(tree / n)
                    out[n] = (f"still has a LAB_TODO ({todo})" if todo else
                              why.replace("was itself graded with reference code", "stands on a reference stage"))
        finally:
            p.close()
    except Exception as e:  # noqa: BLE001 - the grader could not decide: the cheaper rule
        print(f"trace: the grader could not check your earlier stages ({type(e).__name__}: {e}); "
              "a stage that still has a LAB_TODO is taken from the reference", file=sys.stderr)
        earlier_checked = []
    else:
        earlier_checked = list(stage.uses)
    for n in earlier:
        if n in earlier_checked or n in out:
            continue
        todo = skeleton_todo(tree / n)
        if todo:
            out[n] = f"still has a LAB_TODO ({todo})"
    return out


def skeleton_todo(d):
    """The first LAB_TODO call left in a stage folder, as file:line, or None."""
    for f in sorted(pathlib.Path(d).glob("*.c")):
        for i, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            if "LAB_TODO(" in line and not line.lstrip().startswith(("#", "//", "*", "/*")):
                return f"{f.name}:{i}"
    return None


def fallback_line(decided):
    """The one line that says which stages the reference stands in for."""
    names = list(decided)
    which = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    whys = "; ".join(f"your {n} {why}" for n, why in decided.items())
    return (f"trace: the reference's {which} stand{'s' if len(names) == 1 else ''} in for yours, "
            f"as in make grade ({whys})")


def ship_traced_reference(out_root, names=None):
    """Writes every stage's reference objects, built as make trace builds
    them (-DLAB_TRACE), into out_root/grader/reference/NN-name/trace/, with
    the headers beside them in .../handout/ (the handout writes those too):
    what a handout's make trace links in place of an unfinished earlier
    stage. For grader/course/handout.py."""
    out_root = pathlib.Path(out_root)
    for st in rubric.load_all(ROOT / "grader" / "rubric"):
        if names is not None and st.name not in names:
            continue
        dirs = [SOLUTIONS / n for n in [*st.uses, st.name]]
        dest = out_root / "grader" / "reference" / st.name / "trace"
        dest.mkdir(parents=True, exist_ok=True)
        incs = ["-iquote", str(ROOT / "common"), "-iquote", str(ROOT / "common" / "tracing")]
        for d in dirs:
            incs += ["-iquote", str(d)]
        for src in st.sources:
            obj = dest / (pathlib.Path(src).stem + ".o")
            subprocess.run([CC, *FLAGS, "-Werror", *incs, "-c", rel(SOLUTIONS / st.name / src),
                            "-o", str(obj)], cwd=ROOT, check=True)
            # no DWARF in the handout: it would print the reference's private
            # structs and lines (handout.py's reference objects are shipped so too)
            subprocess.run(["strip", "--strip-debug", str(obj)], check=True)


def run_served(binary, stage, load, env):
    """Starts a serving example on a free port, loads it, waits for it to
    exit; returns its exit status."""
    conns, rounds, size = (int(x) for x in load.split())
    out_dir = ROOT / "build" / "trace"
    client = out_dir / "load_client"
    src = ROOT / "examples" / "06-reactor" / "load_client.c"  # plain C and epoll: serves every stage
    if not client.exists() or client.stat().st_mtime < src.stat().st_mtime:
        subprocess.run([CC, "-std=c11", "-O2", "-Wall", "-Wextra", str(src), "-o", str(client)], check=True)
    server = subprocess.Popen([str(binary), "0", str(conns)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()  # "listening on 127.0.0.1:PORT" (runtime.h)
        if "listening on" not in line:
            server.kill()
            server.wait()
            sys.exit(f"trace: {binary.name} did not start listening: {line.strip()!r}")
        port = line.rsplit(":", 1)[1].strip()
        print(f"trace: {binary.name} on port {port}, loaded by load_client "
              f"({conns} connections x {rounds} round trips of {size} bytes)")
        load_run = subprocess.run([str(client), "127.0.0.1", port, str(conns), str(rounds), str(size)],
                                  capture_output=True, text=True, timeout=60)
        said = " ".join(load_run.stdout.split())
        print(f"       load_client: {said}" if load_run.returncode == 0 else
              f"trace: load_client failed ({load_run.returncode}): {load_run.stderr.strip()}")
        return server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
        sys.exit(f"trace: {binary.name} did not finish its {conns} connections: killed, no trace")
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stage", required=True)
    ap.add_argument("--example", default="")
    ap.add_argument("--target", default="labs")
    ap.add_argument("--out", default="trace.json")
    ap.add_argument("--render", default="", help="also draw the trace to this PNG/SVG")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--load", default=DEFAULT_LOAD,
                    help="a serving example's load: CONNECTIONS ROUND_TRIPS SIZE (default %(default)s)")
    ap.add_argument("--no-fallback", action="store_true",
                    help="trace the target's earlier stages as they are, finished or not")
    ap.add_argument("args", nargs="*", help="arguments for the example")
    a = ap.parse_args(argv)
    stage = find_stage(a.stage)
    found = examples_of(stage.name)
    if not found:
        sys.exit(f"trace: stage {stage.name} has no example yet (examples/{stage.name}/)")
    if a.example:
        match = [e for e in found if e.stem == a.example.removesuffix(".c")]
        if not match:
            sys.exit(f"trace: no example {a.example!r} in examples/{stage.name}/ "
                     f"(there: {', '.join(e.stem for e in found)})")
        example = match[0]
    else:
        example = found[0]
    tree = tree_of(a.target)
    if not tree.is_dir() and tree.name == "solutions" and not SOLUTIONS.is_dir():
        sys.exit("trace: there is no solutions/ here (the handout has none): "
                 "make trace traces your tree, labs/ by default, or TARGET=path")
    decided = {} if a.no_fallback else fallback(stage, example, a.target)
    missing = [n for n in decided if reference_stage(n) is None]
    if missing:   # a handout without traced reference objects: nothing can stand in
        n = missing[0]
        sys.exit(f"trace: your {n} {decided[n]}, and there is no traced reference of it here (neither "
                 f"solutions/{n} nor {rel(SHIPPED / n / 'trace')}): finish it first (make grade STAGE={n[:2]} "
                 f"says what fails), or trace with --no-fallback")
    if decided:
        print(fallback_line(decided))
    binary = build(stage, example, a.target, reference=tuple(decided))
    if a.build_only:
        print(binary)
        return 0
    out = pathlib.Path(a.out).resolve()
    env = dict(os.environ, LAB_TRACE_FILE=str(out))
    if (stage.name, example.stem) in SERVED and not a.args:
        rc = run_served(binary, stage, a.load, env)
    else:
        rc = subprocess.run([str(binary), *a.args], env=env).returncode
    if rc == 86:
        print(f"trace: {example.stem} stopped at a TODO in {a.target} (above): "
              f"tracing needs a stage that runs", file=sys.stderr)
    if not out.exists():
        sys.exit(f"trace: {example.stem} exited with {rc} and wrote no trace")
    print(f"trace: wrote {out} ({example.stem} on {a.target}, exit status {rc})")
    render = os.path.relpath(ROOT / "grader" / "tracing" / "trace_render.py")   # from where make was typed
    print(f"       open it at https://ui.perfetto.dev, or draw it: python3 {render} {a.out} -o trace.png")
    if a.render:
        r = subprocess.run([sys.executable, str(ROOT / "grader" / "tracing" / "trace_render.py"), str(out),
                            "-o", a.render])
        if r.returncode != 0:
            return r.returncode
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
