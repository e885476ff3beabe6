"""The report as text for a terminal (docs/report.md, "What it says, per rank").

Why this file exists: the report's tables share one shape -- a title, a
header of right-aligned columns after "node / rank", and per node a line
with the node's name and one line per rank (or per GPU of a rank) -- so
they are data here: each table is a Table of Columns (a head, a width, a
cell function), drawn by one renderer.  A new table is one Table in
TABLES; a new column is one Column.  Every line is at most 100 columns.
Reads only the report (model.Report); never MLflow.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import (AbstractSet, Any, Callable, Generic, Iterator, List, Mapping, Optional,
                    Sequence, Tuple, TypeVar)

from .model import Build, Gpu, RankReport, Report, Summary, TreePeak
from .scale import OUTLIER_DEVIATIONS, ordered, outlier_line
from .values import printable, r2
from .verdicts import span_text

T = TypeVar("T")
WIDTH = 100
RANK_COL = 22   # "node / rank", the first column of every table
SUMMARY_ABOVE = 8   # more ranks than this: the job's summary and its outliers come first
ROWS = 8            # more ranks than this: the tables list the worst and the outliers
OUTLIERS_SHOWN = 10  # the outliers the text lists without --all (the farthest apart)


def cell(x: Optional[float], fmt: str = "{:.1f}", none: str = "-") -> str:
    """A cell: a value wider than a column (a node of 20 TB) in 2
    significant digits, never spilling into the next column."""
    if x is None:
        return none
    text = fmt.format(x)
    return text if len(text) <= 9 else f"{x:.2g}"


def _clock(ms: Optional[int]) -> str:
    return "-" if ms is None else time.strftime("%H:%M:%S", time.localtime(ms / 1000))


@dataclass(frozen=True)
class Column(Generic[T]):
    head: str
    width: int
    cell: Callable[[T], str]


@dataclass(frozen=True)
class Table(Generic[T]):
    """title: its lines; rows: what one rank contributes (itself, or its GPUs);
    shown: whether the report gets the table; tree_only_line: a rank with
    only a process tree gets one line saying so instead of its cells."""
    title: Tuple[str, ...]
    columns: Tuple[Column[T], ...]
    rows: Callable[[RankReport], Sequence[T]]
    shown: Callable[[Report], bool]
    tree_only_line: bool = False


def _col(head: str, width: int, fn: Callable[[RankReport], str]) -> Column[RankReport]:
    return Column(head, width, fn)


def _gcol(head: str, width: int, fn: Callable[[Gpu], str]) -> Column[Gpu]:
    return Column(head, width, fn)


def _itself(r: RankReport) -> Sequence[RankReport]:
    return [r]


def _tree_only(r: RankReport) -> str:
    by = r["recorded_by_rank"]
    return (f"process tree only, recorded by rank {by} (its pod's container)" if by is not None
            else "process tree only")


def _contained(rep: Report) -> bool:
    return any(r["container_memory_limit_megabytes"] is not None
               or r["container_memory_peak_megabytes"] is not None for r in rep["ranks"])


def _unlimited(rep: Report) -> bool:
    return any(r["container_memory_limit_megabytes"] is None and not r["process_tree_only"]
               for r in rep["ranks"])


def _filled(r: RankReport) -> bool:
    """Whether a rank has any of the series or tags of docs/design.md §9: the
    table of an older run stays as it was."""
    return any(x is not None for x in (
        r["container_memory_at_peak_megabytes"], r["process_tree_peak"],
        r["memory_pressure_peak_percentage"], r["cpu_pressure_peak_percentage"]))


def _throttled(r: RankReport) -> str:
    thr = r["cpu_throttled_periods"]
    pct = r["cpu_throttled_percentage"]
    text = "-" if thr is None else (f"{thr} ({pct:.0f}%)" if pct is not None else str(thr))
    return text[:10]


def _part(r: RankReport, key: str) -> Optional[float]:
    c: Mapping[str, object] = r["container_memory_at_peak_megabytes"] or {}
    value = c.get(key)
    return value if isinstance(value, (int, float)) else None


def _tree(r: RankReport) -> TreePeak:
    return r["process_tree_peak"] or {"processes": None, "memory_megabytes": None}


# Without any container limit the container's columns would be dashes: the
# node's memory and CPU are what count, in a table of their own.
MEMORY = Table(
    ("memory (MB = 10^6 bytes; peak: highest working set; kernel: the kernel's peak, "
     "page cache too)",),
    (_col("limit", 9, lambda r: cell(r["container_memory_limit_megabytes"], none="none")),
     _col("peak", 9, lambda r: cell(r["container_memory_peak_megabytes"])),
     _col("peak %", 8, lambda r: cell(r["container_memory_peak_percentage"])),
     _col("headroom", 10, lambda r: cell(r["container_memory_headroom_megabytes"])),
     _col("kernel", 9, lambda r: cell(r["container_memory_kernel_peak_megabytes"])),
     _col("node peak %", 13, lambda r: cell(r["node_memory_peak_percentage"])),
     _col("OOM kills", 11, lambda r: cell(r["oom_kill"], "{:d}"))),
    _itself, lambda rep: _contained(rep) or not _unlimited(rep), tree_only_line=True)

NODE = Table(
    ("node (no container memory limit: the node's memory is the limit that counts)",),
    (_col("mem peak MB", 13, lambda r: cell(r["node_memory_peak_megabytes"])),
     _col("mem peak %", 12, lambda r: cell(r["node_memory_peak_percentage"])),
     _col("cpu mean %", 12, lambda r: cell(r["node_cpu_mean_percentage"])),
     _col("cpu peak %", 12, lambda r: cell(r["node_cpu_peak_percentage"]))),
    _itself, _unlimited, tree_only_line=True)

FILLED = Table(
    ("what filled it (MB at the working-set peak; processes: the rank's tree at its peak, PSS;",
     "psi: peak % of time stalled on memory / CPU)"),
    (_col("anon", 9, lambda r: cell(_part(r, "anon"))),
     _col("shmem", 9, lambda r: cell(_part(r, "shmem"))),
     _col("file", 9, lambda r: cell(_part(r, "file_active"))),
     _col("kernel", 9, lambda r: cell(_part(r, "kernel"))),
     _col("procs", 7, lambda r: cell(_tree(r)["processes"], "{:d}")),
     _col("tree MB", 10, lambda r: cell(_tree(r)["memory_megabytes"])),
     _col("mem psi %", 11, lambda r: cell(r["memory_pressure_peak_percentage"])),
     _col("cpu psi %", 11, lambda r: cell(r["cpu_pressure_peak_percentage"]))),
    _itself, lambda rep: any(_filled(r) for r in rep["ranks"]))

CPU = Table(
    ("cpu (% of the container's CPU limit), network (MB since recording started), recording",),
    (_col("limit", 7, lambda r: cell(r2(r["container_cpu_limit_cores"]), "{:g}",
                                     "-" if r["process_tree_only"] else "none")),
     _col("mean %", 8, lambda r: cell(r["container_cpu_mean_percentage"])),
     _col("peak %", 8, lambda r: cell(r["container_cpu_peak_percentage"])),
     _col("throttled", 11, _throttled),
     _col("rx MB", 9, lambda r: cell(r["network_receive_megabytes"])),
     _col("tx MB", 9, lambda r: cell(r["network_transmit_megabytes"])),
     _col("from", 10, lambda r: _clock(r["recording_start_ms"])),
     _col("span s", 8, lambda r: cell(r["recording_span_s"])),
     _col("points", 8, lambda r: str(r["points"]))),
    _itself, lambda rep: True)

def _gpu_measured(g: Gpu) -> bool:
    """A GPU with any of the five series (a sibling rank's GPU has only its
    processes' memory; a GPU only the tags name has none)."""
    return any(g[k] is not None for k in ("memory_peak_percentage", "memory_peak_megabytes",
                                          "utilization_mean_percentage", "power_mean_watts"))


GPU = Table(
    ("gpu (NVML index)",),
    (_gcol("gpu", 5, lambda g: str(g["index"])),
     _gcol("memory peak %", 15, lambda g: cell(g["memory_peak_percentage"])),
     _gcol("memory peak MB", 16, lambda g: cell(g["memory_peak_megabytes"])),
     _gcol("util mean %", 13, lambda g: cell(g["utilization_mean_percentage"])),
     _gcol("power mean W", 14, lambda g: cell(g["power_mean_watts"]))),
    lambda r: [g for g in r["gpus"] if _gpu_measured(g)],
    lambda rep: any(_gpu_measured(g) for r in rep["ranks"] for g in r["gpus"]))



# ---- the GPU's health and who held its memory (issue 34; docs/gpu.md) ----------------------


def _gpu_held(g: Gpu) -> bool:
    return any(g[k] is not None for k in ("memory_at_peak_megabytes", "throttled_percentage",
                                          "ecc_errors_uncorrected", "events"))


def _held(g: Gpu, what: str) -> Optional[float]:
    at = g["memory_at_peak_megabytes"]
    if at is None:
        return None
    if what == "ranks":
        return at["other_ranks"] + sum(at["ranks"].values())
    value: Mapping[str, object] = at
    v = value.get(what)
    return v if isinstance(v, (int, float)) else None


def _xids(g: Gpu) -> str:
    ev = g["events"]
    return ",".join(map(str, ev["xid_codes"]))[:7] or "-" if ev else "-"


GPU_HELD = Table(
    ("gpu at its memory peak (MB held by the rank's own processes, other ranks', unranked, "
     "foreign: not", "this container's; unattributed: the rest), thr: clocks held down (% of "
     "the run), ECC: uncorrected"),
    (_gcol("gpu", 5, lambda g: str(g["index"])),
     _gcol("used", 9, lambda g: cell(_held(g, "used"))),
     _gcol("own", 9, lambda g: cell(_held(g, "own"))),
     _gcol("ranks", 9, lambda g: cell(_held(g, "ranks"))),
     _gcol("unranked", 9, lambda g: cell(_held(g, "unranked"))),
     _gcol("foreign", 9, lambda g: cell(_held(g, "foreign"))),
     _gcol("unattr.", 9, lambda g: cell(_held(g, "unattributed"))),
     _gcol("thr %", 6, lambda g: cell(g["throttled_percentage"], "{:.0f}")),
     _gcol("ecc", 5, lambda g: cell(g["ecc_errors_uncorrected"], "{:d}")),
     _gcol("xid", 8, _xids)),
    lambda r: [g for g in r["gpus"] if _gpu_held(g)],
    lambda rep: any(_gpu_held(g) for r in rep["ranks"] for g in r["gpus"]))

# ---- what the GPUs, tree and RDMA ports did (issue 47; docs/report.md, "Slow ranks") ----


def _rdma(r: RankReport) -> bool:
    return r["rdma_link_errors"] is not None or r["rdma_receive_megabytes"] is not None


RDMA = Table(
    ("rdma (the pod's RDMA ports: MB since recording started, MB/s over the recording; link "
     "errors:", "every count of rdma_events since recording started)"),
    (_col("rx MB", 12, lambda r: cell(r["rdma_receive_megabytes"])),
     _col("tx MB", 12, lambda r: cell(r["rdma_transmit_megabytes"])),
     _col("rx MB/s", 10, lambda r: cell(r["rdma_receive_megabytes_per_second"])),
     _col("tx MB/s", 10, lambda r: cell(r["rdma_transmit_megabytes_per_second"])),
     _col("link errors", 13, lambda r: cell(r["rdma_link_errors"], "{:d}"))),
    _itself, lambda rep: any(_rdma(r) for r in rep["ranks"]))


def _worked(r: RankReport) -> bool:
    return any(r[k] is not None for k in ("gpu_sm_active_mean_percentage",
                                          "gpu_tensor_active_mean_percentage",
                                          "gpu_energy_kwh_per_hour"))


WORK = Table(
    ("work (SM and tensor active: mean %, all the rank's GPUs, detail level full; tree cpu: the "
     "tree's", "mean CPU, % of the CPU limit; kWh/h: the GPUs' energy an hour recorded)"),
    (_col("SM active %", 13, lambda r: cell(r["gpu_sm_active_mean_percentage"])),
     _col("tensor active %", 17, lambda r: cell(r["gpu_tensor_active_mean_percentage"])),
     _col("tree cpu %", 12, lambda r: cell(r["process_cpu_mean_limit_percentage"])),
     _col("kWh/h", 9, lambda r: cell(r["gpu_energy_kwh_per_hour"], "{:.3f}"))),
    _itself, lambda rep: any(_worked(r) for r in rep["ranks"]))

# In the order printed.
TABLES: Tuple[Table[Any], ...] = (MEMORY, NODE, FILLED, CPU, RDMA, GPU, GPU_HELD, WORK)


def _grouped(rep: Report, shown: Optional[AbstractSet[int]] = None
             ) -> Iterator[Tuple[str, List[RankReport]]]:
    for node, ranks in sorted(rep["nodes"].items()):
        rs = [r for r in rep["ranks"] if r["rank"] in ranks
              and (shown is None or r["rank"] in shown)]
        if rs:
            yield node, rs


def render(table: Table[T], rep: Report, shown: Optional[AbstractSet[int]] = None
           ) -> List[str]:
    """The table's lines, a blank line first; none when the report does not get
    it; shown: the ranks it lists (None: every rank)."""
    if not table.shown(rep):
        return []
    lines = ["", *table.title,
             f"{'node / rank':<{RANK_COL}}" + "".join(f"{c.head:>{c.width}}"
                                                      for c in table.columns)]
    for node, rs in _grouped(rep, shown):
        # a capped table (the outliers and the worst of a large job) lists
        # ranks of many nodes, one each: the node goes on the rank's line
        # when it fits, so a shown rank costs one line, not two
        inline = f"  rank {rs[0]['rank']} ({printable(node)})"
        one_line = shown is not None and len(rs) == 1 and len(inline) < RANK_COL
        if not one_line:
            lines.append(printable(node)[:98])
        for r in rs:
            who = f"{inline if one_line else '  rank ' + str(r['rank']):<{RANK_COL}}"
            if table.tree_only_line and r["process_tree_only"]:
                lines.append(who + _tree_only(r))
                continue
            for item in table.rows(r):
                lines.append(who + "".join(f"{c.cell(item):>{c.width}}" for c in table.columns))
    return lines


def _head(rep: Report) -> List[str]:
    name = f' "{printable(rep["run_name"])}"' if rep["run_name"] else ""
    deleted = "  (deleted)" if rep.get("lifecycle_stage") == "deleted" else ""
    period = f"every {rep['period_s']:g} s" if rep["period_s"] else "period unknown"
    n, nodes = len(rep["ranks"]), len(rep["nodes"])
    lines = [f"run {rep['run_id']}{name}  {rep['status']}{deleted}",
             f"{n} rank{'s' * (n != 1)} on {nodes} node{'s' * (nodes != 1)}, one point "
             f"{period}, {rep['collectors'] or '?'} collector{'s' * (rep['collectors'] != 1)}"]
    lines.extend(_build_lines(rep))
    if rep["skipped"]:
        lines.append(f"scopemeter.skipped: {printable(rep['skipped'])}")
    if rep.get("end_reason"):
        lines.extend(_wrap(f"ended by scopemeter: {printable(str(rep['end_reason']))}", WIDTH,
                           "    "))
    if rep.get("recording") == "stopped":
        age = rep.get("last_point_age_s")
        when = f" (RUNNING, the last point {age:.0f} s ago)" if age is not None else \
            " (RUNNING, no point)"
        lines.extend(_wrap("recording stopped: the recorder or the job died, or the job is "
                           f"still running without a recorder{when}", WIDTH, "    "))
    return lines


TLS_WORDS = {"system-openssl": "TLS system OpenSSL", "bundled": "TLS bundled OpenSSL",
             "none-yet": "TLS none yet"}


def _build_text(b: Build) -> str:
    where = f" ({printable(b['path'])})" if b["path"] else ""
    parts = [f"scopemeter {b['version'] or '?'}, {b['install'] or '?'}{where}"]
    if b["tls"]:
        parts.append(TLS_WORDS.get(b["tls"], f"TLS {printable(b['tls'])}"))
    if b["nvml"]:
        parts.append(f"NVML driver {printable(b['nvml'])}")
    return ", ".join(parts)


def _build_lines(rep: Report) -> List[str]:
    """Which build recorded (the tag scopemeter.rankN.build): one line when
    every rank's is the same, else one a rank."""
    builds = rep.get("build") or {}
    if not builds:
        return ["build: not tagged (recorded before the build tag)"]
    texts = {rank: _build_text(b) for rank, b in builds.items()}
    if len(set(texts.values())) == 1:
        return _wrap(f"build: {next(iter(texts.values()))}", WIDTH, "    ")
    lines: List[str] = []
    for rank, t in sorted(texts.items(), key=lambda kv: int(kv[0][4:])):
        lines.extend(_wrap(f"build of {rank}: {t}", WIDTH, "    "))
    return lines


def _count(n: Optional[int]) -> str:
    return "-" if n is None else str(n)


def _ranks_text(ranks: List[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {span_text(ranks)}"


def _energy_text(s: Summary) -> Optional[str]:
    """The job's energy: the GPUs' alone as before, or the total with its parts."""
    # .get: a report of an older scopemeter (a saved --json) lacks the CPU's keys
    gpu, cpu, nodes = s["gpu_energy_kwh"], s.get("node_cpu_energy_kwh"), \
        s.get("node_cpu_energy_nodes", 0)
    if cpu is None:
        return (None if gpu is None else
                f"GPU energy: {gpu:.6f} kWh (every rank's GPUs since recording started)")
    return (f"energy: {s['energy_kwh']:.6f} kWh since recording started: " +
            (f"GPUs {gpu:.6f} kWh (every rank's), " if gpu is not None else "no GPU energy, ")
            + f"CPU packages {cpu:.6f} kWh ({nodes} node{'s' * (nodes != 1)}, each once)")


def _slow_lines(s: Summary) -> List[str]:
    lines: List[str] = []
    for sr in s.get("slow_ranks", []):
        lines += _wrap(f"  slow rank {sr['rank']} ({printable(sr['node'])}): {sr['text']}",
                       WIDTH, "    ")
    return lines


def _summary_lines(rep: Report, all_ranks: bool = False) -> List[str]:
    """The job at a glance (docs/report.md, "The job at scale"); a count no
    rank holds the counter of is "-", never 0."""
    s = rep["summary"]
    kills = _count(s["oom_kills"])
    if s["oom_killed_ranks"]:
        kills += f" ({_ranks_text(s['oom_killed_ranks'])})"
    ev = s["memory_events"]
    events = ("-" if ev is None else
              ", ".join(f"{k} {v}" for k, v in sorted(ev.items()) if v > 0) or "none")
    if s["memory_event_ranks"]:
        events += f" ({_ranks_text(s['memory_event_ranks'])})"
    worst = ", ".join(f"{w['rank']} ({printable(w['node'])})" +
                      (f" {w['container_memory_peak_percentage']:.1f} %"
                       if w["container_memory_peak_percentage"] is not None else "")
                      for w in s["worst"])
    lines = [""]
    lines += _wrap(f"job: {s['ranks']} ranks, {s['ranks_with_memory_limit']} with a container "
                   "memory limit; memory peak >= 80 % of it: "
                   f"{_count(s['ranks_peak_at_least_80_percentage'])}, >= 90 %: "
                   f"{_count(s['ranks_peak_at_least_90_percentage'])}", WIDTH, "    ")
    lines += _wrap(f"  OOM kills: {kills}; memory events: {events}", WIDTH, "    ")
    energy = _energy_text(s)
    if energy is not None:
        lines += _wrap("  " + energy, WIDTH, "    ")
    lines += _wrap(f"  worst ranks (most severe verdict, then memory peak %): {worst}", WIDTH,
                   "    ")
    slow = {(sr["rank"], sr["text"]) for sr in s.get("slow_ranks", [])}
    for w in s["worst"]:
        if w["code"] is not None and w["cause"] and (w["rank"], w["cause"]) not in slow:
            lines += _wrap(f"    rank {w['rank']}: {w['cause']}", WIDTH, "        ")
    lines += _slow_lines(s)
    lines += ["", f"outliers (more than {OUTLIER_DEVIATIONS:g} robust deviations from the median "
                  "of the job's ranks)" if rep["outliers"] else
              "outliers: none (no rank stands apart from the others)"]
    listed = rep["outliers"]
    if not all_ranks and len(listed) > OUTLIERS_SHOWN:
        # the farthest apart, in the list's order (by rank): the text stays
        # readable however many ranks stand apart; the JSON holds every one
        far = sorted(range(len(listed)), key=lambda i: (-abs(listed[i]["deviations"]), i))
        listed = [listed[i] for i in sorted(far[:OUTLIERS_SHOWN])]
    for o in listed:
        lines.extend(_wrap(outlier_line(o), WIDTH, "    "))
    if len(listed) < len(rep["outliers"]):
        lines.append(f"... and {len(rep['outliers']) - len(listed)} more, less far apart "
                     "(--all prints them)")
    return lines


def shown_ranks(rep: Report) -> Optional[AbstractSet[int]]:
    """The ranks the tables list without --all: every rank up to ROWS of
    them, else the outliers and the worst ranks with a finding (most severe
    first; the worst by memory peak when no rank has one), ROWS at most."""
    if len(rep["ranks"]) <= ROWS:
        return None
    flagged = {o["rank"] for o in rep["outliers"]}
    worst = rep["summary"]["worst"]
    chosen = [r["rank"] for r in ordered(rep["ranks"]) if r["rank"] in flagged]
    chosen += [w["rank"] for w in worst if w["code"] is not None and w["rank"] not in chosen]
    if not chosen:
        chosen = [w["rank"] for w in worst]
    return set(chosen[:ROWS])


def _verdict_lines(rep: Report, shown: Optional[AbstractSet[int]] = None,
                   said: AbstractSet[Tuple[int, str]] = frozenset()) -> List[str]:
    """said: (rank, text) the job's summary already printed (a worst rank's
    cause), not printed twice."""
    if not rep["verdicts"]:
        stopped = rep.get("recording") == "stopped"
        return ["", "verdicts: none (no OOM kill, no limit near, no throttling" +
                ("; but the recording stopped: see above)" if stopped else
                 ", complete recording)")]
    lines = ["", "verdicts (most severe first)"]
    left = 0
    for v in rep["verdicts"]:
        ranks = v.get("ranks") or [v["rank"]]
        if shown is not None and not any(k in shown for k in ranks):
            left += 1
            continue
        if len(ranks) == 1 and (ranks[0], v["text"]) in said:
            continue
        who = (f"ranks {span_text(ranks)}" if len(ranks) > 1 else f"rank {ranks[0]}")
        lines.extend(_wrap(f"{who}: {v['text']}", WIDTH, "    "))
    if left:
        lines.append(f"... and {left} more about the other ranks (--all prints them)")
    if len(lines) == 2:
        return ["", "verdicts: each said above"]
    return lines


def _wrap(text: str, width: int, indent: str) -> List[str]:
    import textwrap
    return textwrap.wrap(text, width=width, subsequent_indent=indent, break_long_words=True,
                         break_on_hyphens=False)


def format_report(rep: Report, all_ranks: bool = False) -> str:
    """The report as text for a terminal: every line at most 100 columns; ranks
    grouped under their node, so the rank -> node placement reads at a glance.
    More than 8 ranks: the job's summary and its outliers first, and
    the tables list the outliers and the worst ranks only, unless all_ranks
    (`--all`)."""
    if not isinstance(all_ranks, bool):
        raise TypeError(f"format_report(): all_ranks must be a bool, not "
                        f"{type(all_ranks).__name__}")
    lines = _head(rep)
    n = len(rep["ranks"])
    said: AbstractSet[Tuple[int, str]] = frozenset()
    if n > SUMMARY_ABOVE and "summary" in rep:
        lines += _summary_lines(rep, all_ranks)
        said = {(w["rank"], w["cause"]) for w in rep["summary"]["worst"]
                if w["code"] is not None and w["cause"]}
        said |= {(sr["rank"], sr["text"]) for sr in rep["summary"].get("slow_ranks", [])}
    elif "summary" in rep and (energy := _energy_text(rep["summary"])) is not None:
        lines += [""] + _wrap(energy, WIDTH, "    ")  # the job's, at any size
    shown = None if all_ranks else shown_ranks(rep)
    for table in TABLES:
        lines += render(table, rep, shown)
    if shown is not None:
        lines += ["", f"the tables show {len(shown)} of {n} ranks: the outliers and the worst; "
                      "--all prints every rank"]
    return "\n".join(lines + _verdict_lines(rep, shown, said))
