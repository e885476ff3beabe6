"""The report's verdicts: what a rank's numbers mean, in plain lines
(docs/report.md, "Verdicts").

Why this file exists: a verdict is a rule with a threshold and a sentence,
and the rules are what a reader of the report checks first.  Each is one
function of a rank's report (RankReport, _report_model.py) returning its
text or None, and RULES lists them most severe first: that order is the
order of docs/report.md, of each rank's verdict_codes and of CODES.  A new
verdict is one function and one row of RULES (and its line in
docs/report.md).  Reads numbers only from the rank's report, never from
the run or MLflow; prints nothing.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ._front import ATTACH_GRACE_S, OWN_RUN_GRACE_S
from ._report_model import AtPeak, RankReport, RunVerdict
from ._report_values import max_of, printable, r2

# Thresholds of the verdicts (docs/report.md, "Verdicts").
MEMORY_HIGH_PCT = 90.0        # working-set peak as % of the memory limit
MEMORY_PRESSURE_PCT = 10.0    # memory stalled this share of the time (PSI "some") ...
PRESSURE_WINDOW_S = 60.0      # ... over the last minute of points, or over the whole run
THROTTLED_PCT = 10.0          # share of CFS periods throttled ...
THROTTLED_MIN = 10            # ... and at least this many (a second of periods)
NODE_HIGH_PCT = 90.0          # node memory peak, for the neighbours verdict ...
CONTAINER_LOW_PCT = 50.0      # ... while the container stayed below this share of its limit
# started_late: later than one logging window and than the front's graces
# for a late call (_front.OWN_RUN_GRACE_S, ATTACH_GRACE_S; docs/python.md)

# The composition of the working set (docs/design.md §9): the series'
# names, the key of each part in the tag memory_at_peak and in the JSON, and
# what the part typically is, for the verdict that names the cause.
PARTS = (  # (JSON key, series, memory_at_peak key, name, what it typically is)
    ("anon", "container_memory_anon_megabytes", "anon_mb", "anonymous",
     "heaps: tensors, arrays, Python objects"),
    ("shmem", "container_memory_shmem_megabytes", "shmem_mb", "shared memory",
     "/dev/shm, typically DataLoader workers"),
    ("file_active", "container_memory_file_active_megabytes", "file_active_mb", "page cache",
     "files in use: datasets, checkpoints"),
    ("kernel", "container_memory_kernel_megabytes", "kernel_mb", "kernel",
     "slab, sockets, page tables"),
)

# A rule: (the rank's report, the run's logging period in s) -> the verdict's text, or None.
Rule = Callable[[RankReport, Optional[float]], Optional[str]]


def _oom_killed(r: RankReport, period_s: Optional[float]) -> Optional[str]:
    n = r["oom_kill"]
    if not n:
        return None
    lim, pct = r["container_memory_limit_megabytes"], r["container_memory_peak_percentage"]
    kp = r["container_memory_kernel_peak_megabytes"]
    seen = f"; kernel peak {kp:.1f} MB" if kp is not None else ""
    if pct is not None and pct < MEMORY_HIGH_PCT:
        seen += (f"; the samples saw at most {pct:.1f} %: the climb was faster than "
                 "one sample")
    limit_text = f"its {lim:.1f} MB memory limit" if lim is not None else "its memory limit"
    return (f"OOM-killed: the kernel killed {n} process{'es' if n > 1 else ''} of this "
            f"container at {limit_text}{seen}")


def _high(r: RankReport) -> bool:
    pct = r["container_memory_peak_percentage"]
    return pct is not None and pct >= MEMORY_HIGH_PCT


def _memory_high(r: RankReport, period_s: Optional[float]) -> Optional[str]:
    lim, peak, pct = (r["container_memory_limit_megabytes"], r["container_memory_peak_megabytes"],
                      r["container_memory_peak_percentage"])
    if not _high(r) or lim is None or peak is None or pct is None:
        return None
    return (f"memory peak {pct:.1f} % of the limit: {peak:.1f} of {lim:.1f} MB, "
            f"{lim - peak:.1f} MB of headroom")


def _memory_cause(r: RankReport, period_s: Optional[float]) -> Optional[str]:
    comp, ev = r["container_memory_at_peak_megabytes"], r["memory_events"] or {}
    hit = any(ev.get(k, 0) > 0 for k in ("high", "max", "oom", "oom_kill"))
    if comp and (r["oom_kill"] or _high(r) or hit):
        return cause_text(comp)
    return None


def _memory_events(r: RankReport, period_s: Optional[float]) -> Optional[str]:
    return events_text(r["memory_events"] or {}, r["cgroup"], skip_kills=bool(r["oom_kill"]))


def _memory_pressure(r: RankReport, period_s: Optional[float]) -> Optional[str]:
    """Memory stalls (PSI "some": some task waited for memory, the kernel
    reclaiming or reading back what it evicted) near the end, else over the
    whole recording."""
    last = r["memory_pressure_last_minute_percentage"]
    span = r["recording_span_s"]
    if last is not None and last >= MEMORY_PRESSURE_PCT:
        where = ("in the last minute before the end" if span is None or span >= PRESSURE_WINDOW_S
                 else f"in the {span:.0f} s recorded")
        return f"memory stalls {last:.0f} % of the time {where}: the kernel was reclaiming"
    stalled = r["memory_pressure_stalled_s"]
    if stalled is not None and span:
        share = min(100.0, 100.0 * stalled / span)
        if share >= MEMORY_PRESSURE_PCT:
            return (f"memory stalls {share:.0f} % of the recorded time ({stalled:.1f} s of "
                    f"{span:.0f} s): the kernel was reclaiming")
    return None


def _cpu_throttled(r: RankReport, period_s: Optional[float]) -> Optional[str]:
    tp, periods = r["cpu_throttled_percentage"], r["cpu_throttled_periods"]
    if tp is None or periods is None or tp < THROTTLED_PCT or periods < THROTTLED_MIN:
        return None
    return (f"CPU throttled in {tp:.0f} % of periods ({periods} periods,"
            f" {r['cpu_throttled_s'] or 0:.1f} s) at a limit of "
            f"{cores(r['container_cpu_limit_cores'])} cores")


def _node_neighbours(r: RankReport, period_s: Optional[float]) -> Optional[str]:
    node_pct, pct = r["node_memory_peak_percentage"], r["container_memory_peak_percentage"]
    if (node_pct is None or node_pct < NODE_HIGH_PCT or pct is None
            or pct >= CONTAINER_LOW_PCT):
        return None
    return (f"node memory peaked at {node_pct:.1f} % while this container stayed at "
            f"{pct:.1f} % of its limit: neighbours on node {printable(r['node'])} use the memory")


def _no_limit(r: RankReport, period_s: Optional[float]) -> Optional[str]:
    if r["container_memory_limit_megabytes"] is not None or r["process_tree_only"]:
        return None
    node_pct = r["node_memory_peak_percentage"]
    what = f"node memory peak {node_pct:.1f} %" if node_pct is not None else "no node values"
    return (f"no container memory limit: only node values exist ({what}); the node's "
            "memory is the limit that counts")


def _started_late(r: RankReport, period_s: Optional[float]) -> Optional[str]:
    """Late against what the job did (docs/report.md, "The late rule"): this
    rank against the job's first rank to record, with the grace of the
    process that opened the run; the job against the run's start, with the
    grace of a worker attaching to a run its launcher opened before it."""
    window = f" (one window is {period_s:g} s)" if period_s else ""
    behind = r["started_after_first_rank_s"]
    if behind is not None and behind > max(period_s or 0.0, OWN_RUN_GRACE_S):
        return (f"recording started late: {behind:.0f} s after the job's first rank to record"
                f"{window}; the start of this rank's work, where memory spikes, is missing")
    late = r["started_after_run_s"]
    if late is not None and late > max(period_s or 0.0, ATTACH_GRACE_S):
        return (f"recording started late: {late:.0f} s after the run{window}; the start of "
                "the run, where memory spikes, is missing")
    return None


def _stopped_early(r: RankReport, period_s: Optional[float]) -> Optional[str]:
    if not r["stopped_early"]:
        return None
    comp = r["container_memory_at_peak_megabytes"]
    if (comp is not None and r["container_memory_at_peak_source"] == "tag") or \
            r["memory_events"]:
        # the tags of docs/design.md §9 travel with the points
        return ("recording stopped early: no end tags (killed before it could write "
                "them); the memory at the peak and the kernel's memory events are "
                "known up to the last window shipped, the kernel's peak is unknown")
    return ("recording stopped early: no end tags (killed before it could write "
            "them); the end of the run, its kernel peak and OOM kills are unknown")


# Most severe first: the order of docs/report.md.
RULES: Tuple[Tuple[str, Rule], ...] = (
    ("oom_killed", _oom_killed),
    ("memory_high", _memory_high),
    ("memory_cause", _memory_cause),
    ("memory_events", _memory_events),
    ("memory_pressure", _memory_pressure),
    ("cpu_throttled", _cpu_throttled),
    ("node_neighbours", _node_neighbours),
    ("no_limit", _no_limit),
    ("started_late", _started_late),
    ("stopped_early", _stopped_early),
)
CODES = tuple(code for code, _ in RULES)


def rank_verdicts(r: RankReport, period_s: Optional[float]) -> Tuple[List[str], List[str]]:
    """(codes, texts): the findings of one rank, most severe first."""
    out = [(code, text) for code, rule in RULES if (text := rule(r, period_s))]
    return [c for c, _ in out], [t for _, t in out]


# ---- the texts ---------------------------------------------------------------------


def size(mb: float, ref_mb: Optional[float]) -> str:
    """GB (10^9 bytes) against a reference (the limit) of 1 GB or more, MB
    below it and for what would read 0.0 GB."""
    if ref_mb is not None and ref_mb >= 1000 and mb >= 100:
        return f"{mb / 1000:.1f} GB"
    return f"{mb:.0f} MB"


def cause_text(comp: AtPeak) -> str:
    """What filled the container at its peak: the parts, largest first, each
    with what it typically is."""
    ws, lim = comp["working_set"], comp["limit"]
    ref = lim if lim is not None else ws
    if ws is not None and lim:
        head = f"peaked at {100.0 * ws / lim:.0f} % of its {size(lim, ref)} limit"
    else:
        head = f"peaked at {size(ws or 0.0, ref)}"
    by_key: Mapping[str, object] = comp
    parts: List[Tuple[float, str, str, str]] = []
    for key, _, _, name, what in PARTS:
        v = by_key.get(key)
        if isinstance(v, (int, float)) and v > 0:
            parts.append((v, key, name, what))
    parts.sort(key=lambda p: (-p[0], p[1]))
    if not parts:
        return head
    return head + ": " + ", ".join(f"{name} {size(v, ref)} ({what})"
                                   for v, _, name, what in parts)


def times(n: int) -> str:
    return f"{n} time{'s' * (n != 1)}"


def events_text(ev: Dict[str, int], cgroup: Optional[str], skip_kills: bool
                ) -> Optional[str]:
    """The memory events since the start (tag memory_events): v2 memory.events,
    v1 memory.failcnt as max.  The OOM kills have their own verdict."""
    if not ev:
        return None
    v1 = (cgroup or "").startswith("v1 ") or ("high" not in ev and "oom" not in ev)
    hits: List[str] = []
    if ev.get("high", 0) > 0:
        hits.append(f"memory.high {times(ev['high'])}")
    if ev.get("max", 0) > 0:
        hits.append(f"the limit {times(ev['max'])}" if v1 else f"max {times(ev['max'])}")
    tail: List[str] = []
    if ev.get("oom", 0) > 0:
        tail.append(f"an allocation failed at the limit {times(ev['oom'])}")
    if ev.get("oom_kill", 0) > 0 and not skip_kills:
        tail.append(f"the OOM killer killed {ev['oom_kill']} "
                    f"process{'es' * (ev['oom_kill'] != 1)}")
    if not hits and not tail:
        return None
    text = "the kernel hit " + ", ".join(hits) if hits else ""
    text = "; ".join([x for x in [text] + tail if x])
    source = "memory.failcnt" if v1 else "memory.events"
    return f"{text} ({source}, since recording started)"


def cores(c: Optional[float]) -> str:
    return "?" if c is None else f"{r2(c):g}"


# ---- the run's list ----------------------------------------------------------------


def span_text(ranks: Sequence[int]) -> str:
    """"0-8", "0, 2, 5": the ranks of one grouped verdict."""
    ranks = sorted(ranks)
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}"
    return ", ".join(map(str, ranks))


def _node_no_limit(node: str, rs: List[RankReport]) -> str:
    """The one no_limit text of a node's ranks."""
    if len(rs) == 1:
        r = rs[0]
        return r["verdicts"][r["verdict_codes"].index("no_limit")]
    pct = max_of(*(x["node_memory_peak_percentage"] for x in rs))
    what = (f"node memory peak {pct:.1f} %, the highest its {len(rs)} ranks saw"
            if pct is not None else "no node values")
    return (f"no container memory limit on node {printable(node)}: only node values exist "
            f"({what}); the node's memory is the limit that counts")


def run_verdicts(rank_reports: List[RankReport]) -> List[RunVerdict]:
    """Every rank's verdicts, most severe first, then by rank; each names its
    rank(s) and node.  `no_limit` is a fact of the node, not of a rank: the
    ranks of one node without a limit share one entry (the node's highest
    memory peak), instead of one identical line per rank."""
    findings: List[Tuple[int, int, str, str, List[int], str]] = []
    no_limit: Dict[str, List[RankReport]] = {}
    for r in rank_reports:
        for c, t in zip(r["verdict_codes"], r["verdicts"]):
            if c == "no_limit":
                no_limit.setdefault(r["node"], []).append(r)
            else:
                findings.append((CODES.index(c), r["rank"], c, t, [r["rank"]], r["node"]))
    for node, rs in no_limit.items():
        findings.append((CODES.index("no_limit"), rs[0]["rank"], "no_limit",
                         _node_no_limit(node, rs), [x["rank"] for x in rs], node))
    findings.sort(key=lambda f: (f[0], f[1]))
    return [{"rank": rk, "ranks": rks, "node": node, "code": c, "text": t}
            for _, rk, c, t, rks, node in findings]
