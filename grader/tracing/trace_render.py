#!/usr/bin/env python3
"""Draw a runtime trace (Chrome Trace Event JSON, from `make trace`) as a picture.

    trace_render.py trace.json -o trace.png [--title T] [--from MS --to MS] [--max-tasks N]

The picture (docs/tracing.md#reading-the-pictures) has two panels:
  - swimlanes, time running left to right in milliseconds: one lane per
    thread (its polls, coloured by task; its parks in grey; its driver turns
    as a thin band; readiness events, injector pulls and steals as marks
    over it, a steal with a dashed arrow from its victim's lane), then one
    lane per task (its polls; a thin line from
    spawn to completion). Wake arrows go from where the wake was made (the
    waking task's lane, or the lane of the thread that woke it from a timer,
    I/O or outside) to the woken task's next poll, coloured by source;
  - the poll-duration histogram (log scale), with the stall threshold.
The output format follows the file name: .png or .svg.

Needs matplotlib from the distribution (python3-matplotlib; grader/deps.sh
installs it for `make test`). Reads any trace-event file with B/E poll
slices whose args carry "task", as grader/trace.py's runs write them.
"""
import argparse
import json
import math
import pathlib
import sys

SOURCE_COLOURS = {"task": "#1f77b4", "timer": "#ff7f0e", "io": "#2ca02c", "outside": "#9467bd"}
STEAL_COLOURS = {"steal": "#d62728", "injector": "#6a3d9a"}


def load(path):
    data = json.loads(pathlib.Path(path).read_text())
    events = data["traceEvents"] if isinstance(data, dict) else data
    other = data.get("otherData", {}) if isinstance(data, dict) else {}
    return events, other


def parse(events):
    """Slices per thread (B/E matched), instants, flows, thread names."""
    names, order = {}, {}
    stacks, slices, instants = {}, [], []
    flows = {}
    for e in events:
        ph, tid = e.get("ph"), e.get("tid", 0)
        if ph == "M":
            if e.get("name") == "thread_name":
                names[tid] = e["args"]["name"]
            elif e.get("name") == "thread_sort_index":
                order[tid] = e["args"]["sort_index"]
        elif ph == "B":
            stacks.setdefault(tid, []).append(e)
        elif ph == "E":
            st = stacks.get(tid)
            if st:
                b = st.pop()
                args = dict(b.get("args", {}))
                args.update(e.get("args", {}))
                slices.append({"tid": tid, "name": b.get("name", ""), "cat": b.get("cat", ""),
                               "ts": b["ts"] / 1000.0, "end": e["ts"] / 1000.0, "args": args})
        elif ph == "X":
            slices.append({"tid": tid, "name": e.get("name", ""), "cat": e.get("cat", ""),
                           "ts": e["ts"] / 1000.0, "end": (e["ts"] + e.get("dur", 0)) / 1000.0,
                           "args": e.get("args", {})})
        elif ph in ("i", "I"):
            instants.append({"tid": tid, "name": e.get("name", ""), "cat": e.get("cat", ""),
                             "ts": e["ts"] / 1000.0, "args": e.get("args", {})})
        elif ph in ("s", "f"):
            flows.setdefault(e["id"], {})[ph] = {"tid": tid, "ts": e["ts"] / 1000.0}
    def lane_key(t):  # workers in their own order ("worker 0", "worker 1"), after the other threads
        nm = names.get(t, "")
        if nm.startswith("worker ") and nm[7:].isdigit():
            return (1, int(nm[7:]), t)
        return (0, order.get(t, t), t)
    tids = sorted({s["tid"] for s in slices} | {i["tid"] for i in instants} | set(names), key=lane_key)
    return names, tids, slices, instants, flows


def render(path, out, title=None, t_from=None, t_to=None, max_tasks=40):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, Patch
    from matplotlib.lines import Line2D

    events, other = load(path)
    names, tids, slices, instants, flows = parse(events)
    polls = [s for s in slices if s["cat"] in ("poll", "cancel") and "task" in s["args"]]
    wakes = [s for s in slices if s["cat"] == "wake"]
    parks = [s for s in slices if s["cat"] == "park"]
    turns = [s for s in slices if s["cat"] == "driver"]
    spawns = {i["args"]["task"]: i for i in instants if i["cat"] == "task" and i["name"].startswith("spawn")}
    completes = {i["args"]["task"]: i for i in instants if i["name"].startswith("complete")}
    stalls = [i for i in instants if i["cat"] == "stall"]
    ready = [i for i in instants if i["name"] == "readiness"]
    steals = [i for i in instants if i["name"] == "steal"]
    pulls = [i for i in instants if i["name"] == "injector pull"]
    tasks = sorted({p["args"]["task"] for p in polls} | set(spawns))
    shown = tasks[:max_tasks]
    tids = [t for t in tids if any(s["tid"] == t for s in slices) or t in names and t != 0]
    tids = [t for t in tids if t != 0]

    # lanes top to bottom: threads, then tasks
    lane = {}
    labels = []
    for t in tids:
        lane[("thread", t)] = len(labels)
        labels.append(names.get(t, f"thread {t}"))
    for k in shown:
        lane[("task", k)] = len(labels)
        site = spawns.get(k, {}).get("args", {}).get("site")
        labels.append(f"task {k}" + (f"  {site}" if site and len(shown) <= 8 else ""))
    n = max(len(labels), 1)

    times = [s["ts"] for s in slices] + [s["end"] for s in slices] + [i["ts"] for i in instants]
    lo = t_from if t_from is not None else (min(times) if times else 0.0)
    hi = t_to if t_to is not None else (max(times) if times else 1.0)
    if hi <= lo:
        hi = lo + 1.0

    cmap = plt.get_cmap("tab10" if len(shown) <= 10 else "tab20")
    colour = {k: cmap(i % cmap.N) for i, k in enumerate(shown)}

    top_h, bottom_h = max(0.32 * n + 0.8, 1.6), 2.2
    fig = plt.figure(figsize=(12, top_h + bottom_h + 1.2))
    gs = fig.add_gridspec(2, 1, height_ratios=[top_h, bottom_h],
                          hspace=1.0 / ((top_h + bottom_h) / 2))  # about an inch between panels
    ax = fig.add_subplot(gs[0])
    hx = fig.add_subplot(gs[1])

    def y(key):
        return n - 1 - lane[key]

    # a poll of a microsecond on a 50 ms axis would be invisible: bars are at
    # least 1/500 of the window wide (docs/tracing.md says so)
    min_w = (hi - lo) / 500.0

    # thread lanes: parks, driver turns, polls
    for p in parks:
        if ("thread", p["tid"]) in lane:
            ax.broken_barh([(p["ts"], p["end"] - p["ts"])], (y(("thread", p["tid"])) - 0.3, 0.6),
                           facecolors="#d9d9d9", edgecolors="#999999", linewidth=0.4, hatch="///")
    for d in turns:  # a time driver's turn under the lane, a reactor's (inside it) over it
        if ("thread", d["tid"]) in lane:
            timer = d["name"] == "time driver"
            ax.broken_barh([(d["ts"], d["end"] - d["ts"])],
                           (y(("thread", d["tid"])) + (-0.42 if timer else 0.32), 0.1),
                           facecolors=SOURCE_COLOURS["timer"] if timer else SOURCE_COLOURS["io"])
    # instants of the scheduler and the reactor, over the thread's lane:
    # readiness (stage 06) a green tick; injector pull (stage 07) a purple
    # diamond; steal (stage 07) a red triangle with a dashed arrow from the
    # victim's lane (the worker named "worker V") and "+N" stolen
    worker_tid = {}
    for t in tids:
        nm = names.get(t, "")
        if nm.startswith("worker ") and nm[7:].isdigit():
            worker_tid[int(nm[7:])] = t
    for i in ready:
        if ("thread", i["tid"]) in lane and lo <= i["ts"] <= hi:
            ax.plot([i["ts"]], [y(("thread", i["tid"])) + 0.44], marker="|", markersize=5,
                    color=SOURCE_COLOURS["io"], zorder=4)
    for i in pulls:
        if ("thread", i["tid"]) in lane and lo <= i["ts"] <= hi:
            ax.plot([i["ts"]], [y(("thread", i["tid"])) + 0.44], marker="D", markersize=3.5,
                    color=STEAL_COLOURS["injector"], zorder=4)
    for i in steals:
        if ("thread", i["tid"]) not in lane or not lo <= i["ts"] <= hi:
            continue
        yt = y(("thread", i["tid"]))
        ax.plot([i["ts"]], [yt + 0.44], marker="v", markersize=6, color=STEAL_COLOURS["steal"], zorder=5)
        ax.annotate(f"+{i['args'].get('count', '?')}", (i["ts"], yt + 0.5), color=STEAL_COLOURS["steal"],
                    fontsize=7, ha="left", va="bottom")
        v = worker_tid.get(i["args"].get("victim"))
        if v is not None and ("thread", v) in lane:
            ax.add_patch(FancyArrowPatch((i["ts"], y(("thread", v))), (i["ts"], yt + 0.35),
                                         arrowstyle="-|>", mutation_scale=8, color=STEAL_COLOURS["steal"],
                                         linewidth=0.9, linestyle="--", shrinkA=0, shrinkB=0, zorder=5))
    for p in polls:
        k = p["args"]["task"]
        c = colour.get(k, "#7f7f7f")
        if ("thread", p["tid"]) in lane:
            ax.broken_barh([(p["ts"], max(p["end"] - p["ts"], min_w))], (y(("thread", p["tid"])) - 0.3, 0.6),
                           facecolors=c, edgecolors="black", linewidth=0.3)
        if ("task", k) in lane:
            ax.broken_barh([(p["ts"], max(p["end"] - p["ts"], min_w))], (y(("task", k)) - 0.3, 0.6),
                           facecolors=c, edgecolors="black", linewidth=0.3,
                           hatch="xx" if p["cat"] == "cancel" else None)
    # task lifetimes: spawn to completion
    for k in shown:
        s = spawns.get(k)
        start = s["ts"] if s else min((p["ts"] for p in polls if p["args"]["task"] == k), default=lo)
        c = completes.get(k)
        end = c["ts"] if c else hi
        ax.plot([start, end], [y(("task", k))] * 2, color=colour[k], linewidth=0.8, alpha=0.6, zorder=0)
        if s:
            ax.plot([start], [y(("task", k))], marker="o", markersize=3, color=colour[k])
        if c:
            ax.plot([end], [y(("task", k))], marker="|", markersize=8, color="black")
    for st in stalls:
        k = st["args"].get("task")
        if ("task", k) in lane:
            ax.annotate("stall", (st["ts"], y(("task", k)) + 0.35), color="red", fontsize=8,
                        ha="right", va="bottom")

    # wake arrows: a flow's start sits in a wake slice; its end at a poll's begin
    wake_at = {}
    for w in wakes:
        wake_at[(w["tid"], round(w["ts"], 6))] = w
    poll_at = {}
    for p in polls:
        poll_at[(p["tid"], round(p["ts"], 6))] = p
    arrows = 0
    for fid, fl in flows.items():
        if "s" not in fl or "f" not in fl:
            continue
        w = wake_at.get((fl["s"]["tid"], round(fl["s"]["ts"], 6)))
        p = poll_at.get((fl["f"]["tid"], round(fl["f"]["ts"], 6)))
        if not w or not p:
            continue
        src = w["args"].get("source", "outside")
        by = w["args"].get("by")
        start_key = ("task", by) if src == "task" and ("task", by) in lane else ("thread", w["tid"])
        end_key = ("task", p["args"]["task"])
        if start_key not in lane or end_key not in lane:
            continue
        x0, y0, x1, y1 = w["ts"], y(start_key), p["ts"], y(end_key)
        if x1 < lo or x0 > hi:
            continue
        rad = -0.35 if y0 == y1 else 0.0
        ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle="-|>", mutation_scale=7,
                                     color=SOURCE_COLOURS.get(src, "black"), linewidth=0.7, alpha=0.8,
                                     connectionstyle=f"arc3,rad={rad}", shrinkA=0, shrinkB=0, zorder=3))
        arrows += 1

    ax.set_yticks([n - 1 - i for i in range(n)])
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlim(lo, hi)
    ax.set_xlabel("time since start (ms)")
    ax.grid(axis="x", linestyle=":", linewidth=0.5)
    if tids:
        ax.axhline(n - len(tids) - 0.5, color="black", linewidth=0.6)
    more = f" (first {len(shown)} of {len(tasks)} tasks)" if len(tasks) > len(shown) else ""
    ax.set_title((title or pathlib.Path(path).name) + f": {len(polls)} polls, {arrows} wake arrows" + more,
                 fontsize=10)
    handles = [Patch(facecolor="#d9d9d9", edgecolor="#999999", hatch="///", label="park")]
    handles += [Line2D([0], [0], color=c, label=f"wake from {s}") for s, c in SOURCE_COLOURS.items()
                if any(w["args"].get("source") == s for w in wakes)]
    if any(d["name"] == "time driver" for d in turns):
        handles.append(Patch(facecolor=SOURCE_COLOURS["timer"], label="time driver turn"))
    if any(d["name"] == "reactor" for d in turns):
        handles.append(Patch(facecolor=SOURCE_COLOURS["io"], label="reactor turn"))
    if ready:
        handles.append(Line2D([0], [0], marker="|", linestyle="none", color=SOURCE_COLOURS["io"],
                              label="readiness event"))
    if steals:
        handles.append(Line2D([0], [0], marker="v", linestyle="--", color=STEAL_COLOURS["steal"],
                              label="steal (+tasks, from victim)"))
    if pulls:
        handles.append(Line2D([0], [0], marker="D", markersize=4, linestyle="none",
                              color=STEAL_COLOURS["injector"], label="injector pull"))
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), framealpha=0.9)

    # poll-duration histogram
    durs = [max((p["end"] - p["ts"]) * 1000.0, 0.01) for p in polls]  # µs
    if durs:
        lo_b = 10 ** math.floor(math.log10(min(durs)))
        hi_b = 10 ** math.ceil(math.log10(max(durs) * 1.01))
        bins = [lo_b * (10 ** (i / 8)) for i in range(int(round(8 * math.log10(hi_b / lo_b))) + 1)]
        hx.hist(durs, bins=bins, color="#4c72b0", edgecolor="black", linewidth=0.3)
        hx.set_xscale("log")
        stall_ms = other.get("stall_ms")
        if stall_ms:
            hx.axvline(stall_ms * 1000.0, color="red", linestyle="--", linewidth=1)
            hx.annotate(f"stall lamp {stall_ms:g} ms", (stall_ms * 1000.0, hx.get_ylim()[1] * 0.9),
                        color="red", fontsize=8, ha="right")
        med = sorted(durs)[len(durs) // 2]
        hx.set_title(f"poll durations: {len(durs)} polls, median {med:.1f} µs, max {max(durs):.1f} µs",
                     fontsize=10)
    else:
        hx.set_title("poll durations: no polls in this trace", fontsize=10)
    hx.set_xlabel("poll duration (µs, log scale)")
    hx.set_ylabel("polls")
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return {"polls": len(polls), "arrows": arrows, "tasks": len(tasks), "threads": len(tids),
            "steals": len(steals), "pulls": len(pulls), "ready": len(ready)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("-o", "--out", default="trace.png")
    ap.add_argument("--title")
    ap.add_argument("--from", dest="t_from", type=float, help="start of the window (ms)")
    ap.add_argument("--to", dest="t_to", type=float, help="end of the window (ms)")
    ap.add_argument("--max-tasks", type=int, default=40)
    a = ap.parse_args(argv)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.exit("trace_render: needs matplotlib: sudo apt-get install python3-matplotlib "
                 "(or open the trace at https://ui.perfetto.dev)")
    info = render(a.trace, a.out, a.title, a.t_from, a.t_to, a.max_tasks)
    print(f"trace_render: wrote {a.out} ({info['threads']} threads, {info['tasks']} tasks, "
          f"{info['polls']} polls, {info['arrows']} wake arrows"
          + (f", {info['steals']} steals, {info['pulls']} injector pulls" if info["steals"] or info["pulls"] else "")
          + (f", {info['ready']} readiness events" if info["ready"] else "") + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
