"""The report's verdicts: what a rank's numbers mean, in plain lines
(docs/report.md, "Verdicts").

Why this file exists: a verdict is a rule with a threshold and a sentence,
and the rules are what a reader of the report checks first.  Each is one
function of a rank's report (RankReport, model.py) returning its
text or None, and RULES lists them most severe first: that order is the
order of docs/report.md, of each rank's verdict_codes and of CODES.  A new
verdict is one function and one row of RULES (and its line in
docs/report.md).  Reads numbers only from the rank's report, never from
the run or MLflow; prints nothing.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .._late import ATTACH_GRACE_S, OWN_RUN_GRACE_S
from .model import AtPeak, GpuAtPeak, RankReport, RunVerdict
from .values import max_of, printable, r2

# Thresholds of the verdicts (docs/report.md, "Verdicts").
MEMORY_HIGH_PCT = 90.0        # working-set peak as % of the memory limit
MEMORY_PRESSURE_PCT = 10.0    # memory stalled this share of the time (PSI "some") ...
PRESSURE_WINDOW_S = 60.0      # ... over the last minute of points, or over the whole run
THROTTLED_PCT = 10.0          # share of CFS periods throttled ...
THROTTLED_MIN = 10            # ... and at least this many (a second of periods)
NODE_HIGH_PCT = 90.0          # node memory peak, for the neighbours verdict ...
CONTAINER_LOW_PCT = 50.0      # ... while the container stayed below this share of its limit
# started_late: later than one logging window and than the front's graces
# for a late call (_late.OWN_RUN_GRACE_S, ATTACH_GRACE_S; docs/python.md)

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


def _process_died(r: RankReport, period_s: Optional[float]) -> Optional[str]:
    if r.get("ended_by") != "companion":
        return None
    why = r.get("end_reason") or "unknown"
    return (f"the recording process died without stopping ({why}): its companion wrote the "
            "end the cgroup kept (OOM kills, the kernel's peak); the window being filled and "
            "the sampled peaks' end values died with it")


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


# ---- the GPUs' verdicts (issue 34; docs/gpu.md) -----------------------------------------

GPU_THROTTLED_PCT = 10.0      # clocks held down more than this share of the run

# The common Xid codes: (what the driver's error says, whose fault it usually
# is).  The one source of these words: docs/gpu.md's table ("Common Xid
# codes", after NVIDIA's Xid catalogue) is checked against it
# (tests/py/test_report_gpu.py).
XID: Mapping[int, Tuple[str, str]] = {
    13: ("graphics engine exception: a kernel faulted (an out-of-bounds access, an illegal "
         "instruction)", "your code"),
    31: ("GPU memory page fault: a kernel touched an address it does not own (an illegal "
         "address)", "your code"),
    43: ("the GPU stopped processing: a channel was reset after a fault of the application",
         "your code"),
    48: ("double-bit ECC error: memory the GPU could not correct", "hardware"),
    63: ("a page retirement or row remap was recorded after ECC errors (the memory is being "
         "repaired)", "hardware, informational"),
    64: ("recording a page retirement or row remap failed", "hardware"),
    74: ("NVLink error: a link between GPUs failed", "hardware/fabric"),
    79: ("the GPU fell off the bus: it no longer answers over PCIe",
         "hardware or driver, not your code"),
    92: ("a high rate of single-bit (corrected) ECC errors", "hardware, watch"),
    94: ("contained ECC error: uncorrectable, but only the applications using that memory "
         "were hit; the GPU goes on after they restart", "hardware"),
    95: ("uncontained ECC error: every application on the GPU is affected; the GPU needs a "
         "reset", "hardware"),
    119: ("GSP RPC timeout: the GPU's system processor (its firmware) did not answer the "
          "driver", "driver/firmware"),
}


def xid_text(code: int) -> str:
    """An Xid code in words, with whose fault it usually is."""
    if code in XID:
        what, usually = XID[code]
        return f"{what} (usually: {usually})"
    if code == 999:
        return "NVML could not say which error (999: unknown)"
    return "not one of the common codes: NVIDIA's Xid catalogue says what it means"


def _clock_utc(at: Optional[str]) -> str:
    """"2026-12-03T12:03:11Z" -> " at 12:03:11 UTC"; nothing when not that shape."""
    if at and len(at) == 20 and at[10] == "T" and at.endswith("Z"):
        return f" at {at[11:19]} UTC"
    return ""


def _gpu_xid(r: RankReport, period_s: Optional[float]) -> Optional[str]:
    """Xid errors the driver raised (tag gpu_events): the last one in words,
    the other codes seen after it."""
    out: List[str] = []
    for g in r["gpus"]:
        ev = g["events"]
        if ev is None or ev["xid"] is None:
            continue
        text = f"GPU {g['index']}: Xid {ev['xid']}{_clock_utc(ev['xid_at'])} — {xid_text(ev['xid'])}"
        others = [c for c in ev["xid_codes"] if c != ev["xid"]]
        if ev["xids"] > 1:
            text += f"; {ev['xids']} Xid errors since recording started"
        if others:
            text += ", also " + ", ".join(f"Xid {c} ({xid_text(c)})" for c in others)
        out.append(text)
    return "; ".join(out) or None


def _gpu_ecc(r: RankReport, period_s: Optional[float]) -> Optional[str]:
    """Uncorrected ECC errors since recording started: memory the GPU could
    not correct (corrected ones alone are not a finding: Xid 92 says when
    their rate is high)."""
    out: List[str] = []
    for g in r["gpus"]:
        n = g["ecc_errors_uncorrected"]
        if not n:
            continue
        corrected = g["ecc_errors_corrected"]
        also = f" and {corrected} corrected" if corrected else ""
        out.append(f"GPU {g['index']}: {n} uncorrected ECC error{'s' * (n != 1)}{also} since "
                   "recording started — memory the GPU could not correct: a hardware fault, "
                   "not your code")
    return "; ".join(out) or None


def _gpu_memory_repair(r: RankReport, period_s: Optional[float]) -> Optional[str]:
    """A row remap pending or failed, pages retired (tag gpu_events; the
    board's lifetime facts)."""
    out: List[str] = []
    for g in r["gpus"]:
        ev = g["events"]
        if ev is None:
            continue
        said: List[str] = []
        if ev["remap_failure"]:
            said.append("a row remap failed: the board is out of spare rows (hardware: the "
                        "GPU needs replacing)")
        if ev["remap_pending"]:
            said.append("a row remap waits for the next GPU reset (reset the GPU to repair "
                        "its memory)")
        pages = [f"{n} for {why}" for n, why in ((ev["retired_pages_dbe"], "double-bit errors"),
                                                (ev["retired_pages_sbe"],
                                                 "repeated single-bit errors")) if n]
        if pages:
            said.append("pages retired: " + ", ".join(pages))
        if not said:
            continue
        rows = [f"{n} for {why}" for n, why in ((ev["remapped_uncorrected"], "uncorrectable"),
                                               (ev["remapped_corrected"], "correctable")) if n]
        tail = f"; rows remapped: {', '.join(rows)} errors" if rows else ""
        out.append(f"GPU {g['index']}: " + "; ".join(said) + tail + " (the board's lifetime)")
    return "; ".join(out) or None


def gpu_owner(at: GpuAtPeak) -> Optional[str]:
    """Whose GPU it is: the rank whose processes held the most of it at its
    peak ("own" for the recording rank, else the rank's number); None when
    no rank held any."""
    holders = {"own": at["own"], **at["ranks"]}
    best = max(holders.items(), key=lambda kv: kv[1])
    return best[0] if best[1] > 0 else None


def _who(holder: str, rank: int) -> str:
    return f"rank {rank if holder == 'own' else holder}"


def _gpu_stray_context(r: RankReport, period_s: Optional[float]) -> Optional[str]:
    """Memory on a GPU held by a rank that is not the GPU's own (tag
    gpu_memory_at_peak): a rank held at most half of what the GPU's own rank
    held -- a context created before its device was set."""
    out: List[str] = []
    for g in r["gpus"]:
        at = g["memory_at_peak_megabytes"]
        owner = gpu_owner(at) if at else None
        if at is None or owner is None:
            continue
        holders = {"own": at["own"], **at["ranks"]}
        for who, mb in sorted(holders.items(), key=lambda kv: (-kv[1], kv[0])):
            if who == owner or mb <= 0 or mb > 0.5 * holders[owner]:
                continue
            out.append(f"GPU {g['index']} ({_who(owner, r['rank'])}'s): "
                       f"{_who(who, r['rank'])}'s process holds {size(mb, mb)} — a CUDA "
                       "context on the wrong device (set the device before the first CUDA "
                       "call)")
    return "; ".join(out) or None


def _gpu_foreign_memory(r: RankReport, period_s: Optional[float]) -> Optional[str]:
    """Memory on the container's GPU held by processes outside its pid
    namespace (docs/gpu.md, "Who holds the GPU's memory")."""
    out: List[str] = []
    for g in r["gpus"]:
        at = g["memory_at_peak_megabytes"]
        if at is None or at["foreign"] <= 0:
            continue
        text = f"another container holds {size(at['foreign'], at['foreign'])} of GPU {g['index']}"
        if at["own"] + sum(at["ranks"].values()) + at["other_ranks"] + at["unranked"] <= 0:
            text += (" (nothing on it was counted as this container's: where the driver gives "
                     "host pids inside a container, every process reads foreign; docs/gpu.md)")
        out.append(text)
    return "; ".join(out) or None


def _gpu_throttled(r: RankReport, period_s: Optional[float]) -> Optional[str]:
    """Clocks held down more than GPU_THROTTLED_PCT of the run, and why
    (the per-reason series; docs/gpu.md, "Throttled")."""
    out: List[str] = []
    for g in r["gpus"]:
        total = g["throttled_percentage"]
        if total is None or total <= GPU_THROTTLED_PCT:
            continue
        power = g["throttled_power_percentage"] or 0.0
        thermal = g["throttled_thermal_percentage"] or 0.0
        other = total - power - thermal  # reasons overlap: a lower bound of the others
        why = [f"{name} {v:.0f} %" for name, v in (("power cap", power), ("thermal", thermal),
                                                    ("other", other)) if v >= 0.5]
        out.append(f"GPU {g['index']}: clocks held down {total:.0f} % of the run"
                   + (f" ({', '.join(why)})" if why else "")
                   + ": a slowed GPU holds the whole job back")
    return "; ".join(out) or None


def _slow_rank(r: RankReport, period_s: Optional[float]) -> Optional[str]:
    """A rank that holds the job back, and why, is said against the job's
    other ranks (scale.slow_ranks, after every rank's report): a rank's own
    numbers cannot say it.  Its row here is its place in the order."""
    return None


# Most severe first: the order of docs/report.md.
RULES: Tuple[Tuple[str, Rule], ...] = (
    ("oom_killed", _oom_killed),
    ("process_died", _process_died),
    ("memory_high", _memory_high),
    ("memory_cause", _memory_cause),
    ("memory_events", _memory_events),
    ("memory_pressure", _memory_pressure),
    # the GPUs' (issue 34)
    ("gpu_xid", _gpu_xid),
    ("gpu_ecc", _gpu_ecc),
    ("gpu_memory_repair", _gpu_memory_repair),
    ("gpu_stray_context", _gpu_stray_context),
    ("gpu_foreign_memory", _gpu_foreign_memory),
    ("gpu_throttled", _gpu_throttled),
    ("slow_rank", _slow_rank),
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


def add_verdict(r: RankReport, code: str, text: str) -> None:
    """A verdict made after the rank's own (slow_rank), at its place in CODES' order."""
    at = sum(CODES.index(c) < CODES.index(code) for c in r["verdict_codes"])
    r["verdict_codes"].insert(at, code)
    r["verdicts"].insert(at, text)


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
