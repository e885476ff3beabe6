"""The picture of `scopemeter report --plot FILE.png` (docs/report.md).

Why a separate file: matplotlib is an optional extra (`pip install
'scopemeter[report]'`); only this module imports it, and only when a picture
is asked for.  It draws with matplotlib's object API and the Agg canvas, never
pyplot, so it neither changes the backend of a program that already uses
matplotlib nor needs a display.

More than 8 ranks: heatmaps of ranks x time instead (container memory % of
its limit; GPU busy, else CPU), ranks in order, the outliers marked.  Up to 8:
one row pair per rank, on one time axis (seconds since the run started):
above, the container's working set against its limit line -- stacked into
what filled it (anonymous, shared memory, page cache, kernel) where the run
has the composition series (docs/design.md §9) -- with the node's memory (% of
the node) on the right axis, the contrast the charts exist for; below, CPU:
the container's (% of its limit) and the node's, and the share of time stalled
on memory and CPU (PSI).  16 inches at 100 dpi: 1600 px wide; the legends sit
right of the axes, inside the figure.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple, Union

from .model import RankData, RankReport, Report, Series
from .values import printable
from .scale import ordered

MAX_RANKS = 8      # more rows stop being readable; the most severe ranks are drawn
WIDTH_IN, DPI = 16.0, 100
FEW_POINTS = 12    # a series with this many points or fewer gets markers: one point
                   # (a job shorter than a window) is no line at all
TOP_IN, BOTTOM_IN = 0.9, 0.6   # margins in inches, whatever the number of rows

# the composition, bottom to top: what the process holds, then what it shares,
# then what the kernel could give back, then the kernel's own
STACK = (("container_memory_anon_megabytes", "anonymous (heaps, tensors)", "#92c5de"),
         ("container_memory_shmem_megabytes", "shared memory (/dev/shm)", "#f4a582"),
         ("container_memory_file_active_megabytes", "page cache (active files)", "#b8e186"),
         ("container_memory_kernel_megabytes", "kernel (slab, sockets, ...)", "#c2a5cf"))


def require() -> None:
    import matplotlib  # noqa: F401  (ImportError is the caller's one line)


class _Axis:
    """The time axis all rows share: seconds since t0, and the latest x drawn."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.xmax = 0.0

    def xy(self, series: Series, name: str) -> Tuple[List[float], List[float]]:
        pts = series.get(name, ())
        return [(ts - self.t0) / 1000.0 for ts, _, _ in pts], [v for _, _, v in pts]

    def line(self, ax: Any, x: List[float], y: List[float], **kw: Any) -> Any:
        if x:
            self.xmax = max(self.xmax, max(x))
        if len(x) <= FEW_POINTS and "marker" not in kw:
            kw.update(marker="o", ms=5 if len(x) > 1 else 7)
        return ax.plot(x, y, **kw)


def draw(rep: Report, ranks: Dict[int, RankData], path: Union[str, "os.PathLike[str]", Any]
         ) -> None:
    """rep: report(); ranks: {rank: {"series": {name: [(ts_ms, step, value)]}}}."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if len(rep["ranks"]) > MAX_RANKS:
        _heatmaps(rep, ranks, path)
        return
    chosen = ordered(rep["ranks"])[:MAX_RANKS]
    chosen.sort(key=lambda r: r["rank"])
    t0 = rep["start_time_ms"] or min(
        (r["recording_start_ms"] for r in chosen if r["recording_start_ms"]), default=0)
    heights: List[float] = []
    for _ in chosen:
        heights += [3.0, 1.7]
    height = sum(heights) + 1.2
    fig = Figure(figsize=(WIDTH_IN, height), dpi=DPI)
    canvas = FigureCanvasAgg(fig)
    # legends right of the axes: they never cover a line.  Margins in inches,
    # not fractions: 12 % of a picture of 8 ranks is a band of 4 inches
    gs = fig.add_gridspec(len(heights), 1, height_ratios=heights, hspace=0.55, left=0.06,
                          right=0.76, top=1 - TOP_IN / height, bottom=BOTTOM_IN / height)
    fig.suptitle(_title(rep, len(chosen)), fontsize=14, y=1 - 0.15 / height, va="top")
    axis = _Axis(t0)
    first_mem = cpu = None
    for i, r in enumerate(chosen):
        s = ranks[r["rank"]]["series"]
        mem = fig.add_subplot(gs[2 * i], sharex=first_mem)
        first_mem = first_mem or mem
        cpu = fig.add_subplot(gs[2 * i + 1], sharex=first_mem)
        _memory_row(mem, axis, r, s, rep["period_s"])
        _cpu_row(cpu, axis, r, s)
    if cpu is not None and first_mem is not None:
        cpu.set_xlabel("seconds since the run started")
        # a single point sits inside the axes, not on their edge
        first_mem.set_xlim(0, axis.xmax * 1.08 if axis.xmax > 0 else 1.0)
        _fit_legends(fig, canvas, gs)
    fig.savefig(path, format="png", dpi=DPI)


HEAT_COLUMNS = 400   # time bins at most: finer than a 1600 px picture shows nothing more


def _heat_rows(rep: Report, ranks: Dict[int, RankData], t0: float
               ) -> Tuple[List[Tuple[str, str, List[List[float]]]], float, int]:
    """The heatmaps' matrices (title, colorbar label, rows of bins, NaN where
    nothing was recorded), the time span in s and the number of bins: container
    memory % of its limit, then GPU busy where any rank has a GPU, else CPU."""
    nan = float("nan")
    t_end = max((ts for d in ranks.values() for ser in d["series"].values() for ts, _, _ in ser),
                default=t0)
    span = max((t_end - t0) / 1000.0, 1e-3)
    period = rep["period_s"] or span / HEAT_COLUMNS
    n = max(1, min(HEAT_COLUMNS, int(span / period) + 1))

    def binned(pts: List[Tuple[int, float]]) -> List[float]:
        sums, counts = [0.0] * n, [0] * n
        for ts, v in pts:
            i = min(n - 1, max(0, int((ts - t0) / 1000.0 / span * n)))
            sums[i] += v
            counts[i] += 1
        return [sums[i] / counts[i] if counts[i] else nan for i in range(n)]

    def rows(values: Any) -> List[List[float]]:
        return [binned(values(r, ranks[r["rank"]]["series"])) for r in rep["ranks"]]

    def memory(r: RankReport, s: Series) -> List[Tuple[int, float]]:
        pct = s.get("container_memory_usage_percentage")
        if pct:
            return [(ts, v) for ts, _, v in pct]
        lim = r["container_memory_limit_megabytes"]
        return [(ts, 100.0 * v / lim) for ts, _, v in s.get("container_memory_usage_megabytes", ())
                ] if lim else []

    def gpu(r: RankReport, s: Series) -> List[Tuple[int, float]]:
        return [(ts, v) for name, ser in s.items()
                if name.startswith("gpu_") and name.endswith("_utilization_percentage")
                for ts, _, v in ser]

    def cpu(r: RankReport, s: Series) -> List[Tuple[int, float]]:
        return [(ts, v) for ts, _, v in s.get("container_cpu_utilization_percentage", ())]

    def node_memory(r: RankReport, s: Series) -> List[Tuple[int, float]]:
        return [(ts, v) for ts, _, v in s.get("node_memory_usage_percentage", ())]

    def node_cpu(r: RankReport, s: Series) -> List[Tuple[int, float]]:
        return [(ts, v) for ts, _, v in s.get("node_cpu_utilization_percentage", ())]

    has_gpu = any(r["gpus"] for r in rep["ranks"])
    # no rank in a container with a limit (bare metal, a laptop): the node's
    # memory and CPU are what count, as in the text's node table
    contained = any(r["container_memory_limit_megabytes"] is not None for r in rep["ranks"])
    out = [("container memory, % of its limit", "% of the limit", rows(memory)) if contained
           else ("node memory, % of the node", "% of the node", rows(node_memory)),
           ("GPU busy, %", "%", rows(gpu)) if has_gpu else
           ("container CPU, % of its limit", "%", rows(cpu)) if contained else
           ("node CPU, % of the node", "%", rows(node_cpu))]
    return out, span, n


def _heatmaps(rep: Report, ranks: Dict[int, RankData], path: Union[str, "os.PathLike[str]", Any]
              ) -> None:
    """More than 8 ranks: ranks x time, one heatmap per measure, ranks in
    order top to bottom, the outliers' ranks marked in red on both sides."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    t0 = float(rep["start_time_ms"] or min(
        (r["recording_start_ms"] for r in rep["ranks"] if r["recording_start_ms"]), default=0))
    maps, span, _ = _heat_rows(rep, ranks, t0)
    height = 2 * 4.5 + 1.5
    fig = Figure(figsize=(WIDTH_IN, height), dpi=DPI)
    FigureCanvasAgg(fig)
    gs = fig.add_gridspec(len(maps), 1, hspace=0.35, left=0.07, right=0.9,
                          top=1 - TOP_IN / height, bottom=BOTTOM_IN / height)
    fig.suptitle(f"run {rep['run_id']}" + (f" ({printable(rep['run_name'])})"
                                           if rep["run_name"] else "") +
                 f": {len(rep['ranks'])} ranks x time; outliers in red", fontsize=14,
                 y=1 - 0.15 / height, va="top")
    flagged = {o["rank"] for o in rep["outliers"]}
    order = [r["rank"] for r in rep["ranks"]]
    n = len(order)
    step = max(1, n // 16)
    marked = {i for i, k in enumerate(order) if k in flagged}
    # the regular ticks, but none so close to a marked one that the labels overlap
    ticks = sorted(marked | {i for i in range(0, n, step)
                             if all(abs(i - m) * 2 >= step for m in marked)})
    for i, (title, label, rows) in enumerate(maps):
        ax = fig.add_subplot(gs[i])
        img = ax.imshow(np.ma.masked_invalid(np.array(rows, dtype=float)), aspect="auto",
                        interpolation="nearest", cmap="viridis", vmin=0,
                        # a container's CPU is % of its limit, which it may pass
                        vmax=None if title.startswith("container CPU") else 100,
                        extent=(0, span, n - 0.5, -0.5))
        ax.set_title(title, fontsize=11, loc="left")
        ax.set_ylabel("rank")
        ax.set_yticks(ticks)
        ax.set_yticklabels([str(order[t]) for t in ticks], fontsize=7)
        for t, lab in zip(ticks, ax.get_yticklabels()):
            if order[t] in flagged:
                lab.set_color("red")
                lab.set_fontweight("bold")
                ax.annotate("\u25c0", (1.0, t), xycoords=("axes fraction", "data"),
                            xytext=(3, 0), textcoords="offset points", color="red",
                            va="center", fontsize=8, annotation_clip=False)
        fig.colorbar(img, ax=ax, label=label, pad=0.03)
        if i == len(maps) - 1:
            ax.set_xlabel("seconds since the run started")
    fig.savefig(path, format="png", dpi=DPI)


def _title(rep: Report, drawn: int) -> str:
    title = f"run {rep['run_id']}"
    if rep["run_name"]:
        title += f" ({printable(rep['run_name'])})"
    if len(rep["ranks"]) > drawn:
        title += f": {drawn} of {len(rep['ranks'])} ranks, the most severe first"
    return title


def _draw_stack(mem: Any, axis: _Axis, s: Series, period_s: Optional[float]
                ) -> Optional[List[List[float]]]:
    """The composition stacked under the working set; its parts' values (for
    the axis' top), or None when the run has no composition series."""
    stacked = _stack(s, axis.t0)
    if not stacked:
        return None
    sx, sys_, labels, colors = stacked
    axis.xmax = max([axis.xmax] + sx)
    if len(sx) > 1:
        mem.stackplot(sx, *sys_, labels=labels, colors=colors, alpha=0.85, lw=0)
    else:
        # one window: a stackplot of one x is no area; its parts as a
        # stacked bar over the window the point stands for
        w = min(sx[0], period_s or sx[0]) or 1.0
        bottom = 0.0
        for ys, label, color in zip(sys_, labels, colors):
            mem.bar(sx, ys, width=-w, align="edge", bottom=bottom, color=color,
                    alpha=0.85, label=label)
            bottom += ys[0]
    return sys_


def _memory_lines(mem: Any, axis: _Axis, r: RankReport, s: Series, stacked: bool
                  ) -> Tuple[List[float], List[float], List[float]]:
    """The working set (or the node's memory), the process tree: (x, y, tree y)."""
    x, y = axis.xy(s, "container_memory_usage_megabytes")
    if y:
        axis.line(mem, x, y, color="black" if stacked else "tab:blue", lw=2,
                  marker="." if len(x) > FEW_POINTS else "o", label="container working set (MB)")
    elif not r.get("process_tree_only"):
        x, y = axis.xy(s, "node_memory_usage_megabytes")
        axis.line(mem, x, y, color="tab:blue", lw=2, label="node memory used (MB, no container)")
    tx, ty = axis.xy(s, "process_memory_megabytes")
    if ty:
        axis.line(mem, tx, ty, color="tab:purple", lw=1.5, ls="-.",
                  label="the rank's process tree (PSS, MB)")
        if not y:
            x, y = tx, ty
    return x, y, ty


def _memory_row(mem: Any, axis: _Axis, r: RankReport, s: Series, period_s: Optional[float]
                ) -> None:
    limit = r["container_memory_limit_megabytes"]
    parts = _draw_stack(mem, axis, s, period_s) if limit is not None else None
    x, y, ty = _memory_lines(mem, axis, r, s, bool(parts))
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
              + ([sum(col) for col in zip(*parts)] if parts else []))
    mem.set_ylim(0, top * 1.1)
    mem.set_ylabel("MB")
    handles = mem.get_legend_handles_labels()
    nx, ny = axis.xy(s, "node_memory_usage_percentage")
    if ny:
        node_ax = mem.twinx()
        axis.line(node_ax, nx, ny, color="tab:orange", lw=1.5, label="node memory (% of node)")
        node_ax.set_ylim(0, 105)
        node_ax.set_ylabel("node %")
        nh = node_ax.get_legend_handles_labels()
        handles = (handles[0] + nh[0], handles[1] + nh[1])
    # the stack's entries make the legend taller than the row: smaller type
    mem.legend(handles[0], handles[1], loc="upper left", fontsize=9 if parts else 10,
               bbox_to_anchor=(1.06, 1.0), borderaxespad=0)
    mem.set_title(_row_head(r), loc="left", fontsize=12,
                  color="tab:red" if r["verdict_codes"][:1] in (["oom_killed"],
                                                                ["memory_high"]) else "black")
    mem.grid(alpha=0.3)


def _row_head(r: RankReport) -> str:
    head = f"rank {r['rank']} on {printable(r['node'])}"
    if r.get("process_tree_only"):
        by = r.get("recorded_by_rank")
        head += (f": process tree, recorded by rank {by}" if by is not None
                 else ": process tree")
    elif r["container_memory_peak_percentage"] is not None:
        head += (f": peak {r['container_memory_peak_percentage']:.1f} % of the limit, "
                 f"{r['container_memory_headroom_megabytes']:.1f} MB headroom")
    elif r["container_memory_limit_megabytes"] is None:
        head += ": no container memory limit"
    if r["oom_kill"]:
        head += f", OOM-killed x{r['oom_kill']}"
    return head


# The CPU row's lines: (series, colour, width, style, label; None: the container's own label).
CPU_LINES = (
    ("node_cpu_utilization_percentage", "0.5", 1.0, "-", "node CPU (%)"),
    ("process_cpu_utilization_percentage", "tab:purple", 1.0, "-.",
     "process tree CPU (% of one core)"),
    ("container_memory_pressure_percentage", "tab:red", 1.2, ":",
     "stalled on memory (% of time)"),
    ("container_cpu_pressure_percentage", "tab:brown", 1.2, ":", "stalled on CPU (% of time)"),
)


def _cpu_row(cpu: Any, axis: _Axis, r: RankReport, s: Series) -> None:
    cx, cy = axis.xy(s, "container_cpu_utilization_percentage")
    if cy:
        cores = r["container_cpu_limit_cores"]
        axis.line(cpu, cx, cy, color="tab:green", lw=1.5,
                  label=f"container CPU (% of {cores:g} cores)" if cores else "container CPU (%)")
    tops = list(cy)
    for name, color, lw, ls, label in CPU_LINES:
        x, y = axis.xy(s, name)
        if not y:
            continue
        kw: Dict[str, Any] = {"color": color, "lw": lw, "label": label}
        if ls != "-":
            kw["ls"] = ls
        axis.line(cpu, x, y, **kw)
        if "pressure" not in name:
            tops += y
    cpu.set_ylim(0, max([100.0] + tops) * 1.1)
    cpu.set_ylabel("CPU %")
    if cpu.get_legend_handles_labels()[0]:
        cpu.legend(loc="upper left", fontsize=10, bbox_to_anchor=(1.06, 1.0),
                   borderaxespad=0)
    cpu.grid(alpha=0.3)


def _fit_legends(fig: Any, canvas: Any, gs: Any) -> None:
    """Narrow the axes until every legend right of them ends inside the
    picture: long labels (the composition's, a process tree's) would be cut
    at its edge.  The picture keeps its width (1600 px)."""
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    for _ in range(4):
        canvas.draw()
        renderer = canvas.get_renderer()
        right = max((lg.get_window_extent(renderer).x1 for lg in legends), default=0.0)
        over = right - (fig.bbox.width - 10)
        if over <= 0:
            return
        gs.update(right=gs.right - over / fig.bbox.width)
        # GridSpec.update moves the axes of pyplot's figures only (this one
        # is not): place each axes (twins included) from its new cell
        for ax in fig.axes:
            spec = ax.get_subplotspec()
            if spec is not None:
                ax.set_position(spec.get_position(fig))


def _stack(series: Series, t0: float
           ) -> Optional[Tuple[List[float], List[List[float]], List[str], List[str]]]:
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
