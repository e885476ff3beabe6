"""The picture of `scopemeter report --plot FILE.png` (docs/report.md).

Why a separate file: matplotlib is an optional extra (`pip install
'scopemeter[report]'`); only this module imports it, and only when a picture
is asked for.  It draws with matplotlib's object API and the Agg canvas, never
pyplot, so it neither changes the backend of a program that already uses
matplotlib nor needs a display.

One row pair per rank, on one time axis (seconds since the run started):
above, the container's working set against its limit line -- stacked into
what filled it (anonymous, shared memory, page cache, kernel) where the run
has the composition series (docs/design.md §9) -- with the node's memory (% of
the node) on the right axis, the contrast the charts exist for; below, CPU:
the container's (% of its limit) and the node's, and the share of time stalled
on memory and CPU (PSI).  16 inches at 100 dpi: 1600 px wide; the legends sit
right of the axes, inside the figure.
"""
MAX_RANKS = 8      # more rows stop being readable; the most severe ranks are drawn
WIDTH_IN, DPI = 16.0, 100

# the composition, bottom to top: what the process holds, then what it shares,
# then what the kernel could give back, then the kernel's own
STACK = (("container_memory_anon_megabytes", "anonymous (heaps, tensors)", "#92c5de"),
         ("container_memory_shmem_megabytes", "shared memory (/dev/shm)", "#f4a582"),
         ("container_memory_file_active_megabytes", "page cache (active files)", "#b8e186"),
         ("container_memory_kernel_megabytes", "kernel (slab, sockets, ...)", "#c2a5cf"))


def require():
    import matplotlib  # noqa: F401  (ImportError is the caller's one line)


def _ordered(rep):
    """Ranks by their most severe verdict, then by memory peak %, then rank."""
    from ._report import CODES

    def key(r):
        sev = min((CODES.index(c) for c in r["verdict_codes"]), default=len(CODES))
        return (sev, -(r["container_memory_peak_percentage"] or -1.0), r["rank"])
    return sorted(rep["ranks"], key=key)


def draw(rep, ranks, path):
    """rep: report(); ranks: {rank: {"series": {name: [(ts_ms, step, value)]}}}."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    chosen = _ordered(rep)[:MAX_RANKS]
    chosen.sort(key=lambda r: r["rank"])
    t0 = rep["start_time_ms"] or min(
        (r["recording_start_ms"] for r in chosen if r["recording_start_ms"]), default=0)
    heights = []
    for _ in chosen:
        heights += [3.0, 1.7]
    fig = Figure(figsize=(WIDTH_IN, sum(heights) + 1.2), dpi=DPI)
    FigureCanvasAgg(fig)
    # legends right of the axes: they never cover a line
    gs = fig.add_gridspec(len(heights), 1, height_ratios=heights, hspace=0.55, left=0.06,
                          right=0.76)
    title = f"run {rep['run_id']}"
    if rep.get("run_name"):
        title += f" ({rep['run_name']})"
    if len(rep["ranks"]) > len(chosen):
        title += f": {len(chosen)} of {len(rep['ranks'])} ranks, the most severe first"
    fig.suptitle(title, fontsize=14)

    first_mem = cpu = None
    for i, r in enumerate(chosen):
        s = ranks[r["rank"]]["series"]

        def xs_ys(name):
            pts = s.get(name, ())
            return [(ts - t0) / 1000.0 for ts, _, _ in pts], [v for _, _, v in pts]

        mem = fig.add_subplot(gs[2 * i], sharex=first_mem)
        first_mem = first_mem or mem
        cpu = fig.add_subplot(gs[2 * i + 1], sharex=first_mem)
        limit = r["container_memory_limit_megabytes"]
        x, y = xs_ys("container_memory_usage_megabytes")
        stacked = _stack(s, t0) if limit is not None else None
        if stacked:
            sx, sys_, labels, colors = stacked
            mem.stackplot(sx, *sys_, labels=labels, colors=colors, alpha=0.85, lw=0)
        if y:
            mem.plot(x, y, color="black" if stacked else "tab:blue", lw=2, marker=".",
                     label="container working set (MB)")
        elif not r.get("process_tree_only"):
            x, y = xs_ys("node_memory_usage_megabytes")
            mem.plot(x, y, color="tab:blue", lw=2, label="node memory used (MB, no container)")
        tx, ty = xs_ys("process_memory_megabytes")
        if ty:
            mem.plot(tx, ty, color="tab:purple", lw=1.5, ls="-.",
                     label="the rank's process tree (PSS, MB)")
            if not y:
                x, y = tx, ty
        if limit is not None:
            mem.axhline(limit, color="tab:red", ls="--", lw=1.5,
                        label=f"memory limit {limit:.1f} MB")
        if r["oom_kill"] and x and limit is not None:
            # the kill's moment is not recorded: the marker sits on the last
            # point, the recording of this rank ended with the killed job
            mem.plot([x[-1]], [limit], "X", color="tab:red", ms=13,
                     label=f"OOM kill x{r['oom_kill']} (after the last point)")
        kp = r["container_memory_kernel_peak_megabytes"]
        if kp is not None:
            mem.axhline(kp, color="0.4", ls=":", lw=1.2, label=f"kernel peak {kp:.1f} MB")
        top = max([v for v in (limit, kp) if v is not None] + list(y) + list(ty) + [1.0]
                  + ([sum(col) for col in zip(*stacked[1])] if stacked else []))
        mem.set_ylim(0, top * 1.1)
        mem.set_ylabel("MB")
        handles = mem.get_legend_handles_labels()
        nx, ny = xs_ys("node_memory_usage_percentage")
        if ny:
            node_ax = mem.twinx()
            node_ax.plot(nx, ny, color="tab:orange", lw=1.5, label="node memory (% of node)")
            node_ax.set_ylim(0, 105)
            node_ax.set_ylabel("node %")
            nh = node_ax.get_legend_handles_labels()
            handles = (handles[0] + nh[0], handles[1] + nh[1])
        # the stack's entries make the legend taller than the row: smaller type
        mem.legend(handles[0], handles[1], loc="upper left", fontsize=9 if stacked else 10,
                   bbox_to_anchor=(1.06, 1.0), borderaxespad=0)
        head = f"rank {r['rank']} on {r['node']}"
        if r.get("process_tree_only"):
            by = r.get("recorded_by_rank")
            head += (f": process tree, recorded by rank {by}" if by is not None
                     else ": process tree")
        elif r["container_memory_peak_percentage"] is not None:
            head += (f": peak {r['container_memory_peak_percentage']:.1f} % of the limit, "
                     f"{r['container_memory_headroom_megabytes']:.1f} MB headroom")
        elif limit is None:
            head += ": no container memory limit"
        if r["oom_kill"]:
            head += f", OOM-killed x{r['oom_kill']}"
        mem.set_title(head, loc="left", fontsize=12,
                      color="tab:red" if r["verdict_codes"][:1] in (["oom_killed"],
                                                                    ["memory_high"]) else "black")
        mem.grid(alpha=0.3)

        cx, cy = xs_ys("container_cpu_utilization_percentage")
        if cy:
            cpu.plot(cx, cy, color="tab:green", lw=1.5,
                     label=f"container CPU (% of {r['container_cpu_limit_cores']:g} cores)")
        ncx, ncy = xs_ys("node_cpu_utilization_percentage")
        if ncy:
            cpu.plot(ncx, ncy, color="0.5", lw=1, label="node CPU (%)")
        pcx, pcy = xs_ys("process_cpu_utilization_percentage")
        if pcy:
            cpu.plot(pcx, pcy, color="tab:purple", lw=1, ls="-.",
                     label="process tree CPU (% of one core)")
        mpx, mpy = xs_ys("container_memory_pressure_percentage")
        if mpy:
            cpu.plot(mpx, mpy, color="tab:red", lw=1.2, ls=":",
                     label="stalled on memory (% of time)")
        cpx, cpy = xs_ys("container_cpu_pressure_percentage")
        if cpy:
            cpu.plot(cpx, cpy, color="tab:brown", lw=1.2, ls=":",
                     label="stalled on CPU (% of time)")
        cpu.set_ylim(0, max([100.0] + list(cy) + list(ncy) + list(pcy)) * 1.1)
        cpu.set_ylabel("CPU %")
        if cpu.get_legend_handles_labels()[0]:
            cpu.legend(loc="upper left", fontsize=10, bbox_to_anchor=(1.06, 1.0),
                       borderaxespad=0)
        cpu.grid(alpha=0.3)
    if cpu is not None:
        cpu.set_xlabel("seconds since the run started")
        first_mem.set_xlim(left=0)
    fig.savefig(path, format="png", dpi=DPI)


def _stack(series, t0):
    """(x, [y per part], labels, colors) of the composition on the timestamps
    every present part has (a window's keys share one timestamp), or None."""
    present = [(name, label, color) for name, label, color in STACK if series.get(name)]
    if not present:
        return None
    by_part = [{ts: v for ts, _, v in series[name]} for name, _, _ in present]
    stamps = sorted(set.intersection(*(set(d) for d in by_part)))
    if not stamps:
        return None
    return ([(ts - t0) / 1000.0 for ts in stamps],
            [[d[ts] for ts in stamps] for d in by_part],
            [label for _, label, _ in present], [color for _, _, color in present])
