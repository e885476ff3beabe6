"""The report's numbers: a run's series and tags (as fetch.py reads
them) turned into the report (model.Report; docs/report.md).

Why this file exists: each field of the JSON has one rule for where it
comes from (docs/report.md's tables, "source" and "meaning"); those rules
live here, one function per group of fields (the limits, the memory peak,
the recording's span, the GPUs, what filled the pod, the end), and
rank_report assembles a rank's fields in the schema's order.  A new field
is one line of rank_report (and of RankReport) fed by a function here.
No MLflow calls (the run object is only read), no output; the verdicts are
verdicts.py's.
"""
from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Dict, List, NamedTuple, Optional, Tuple, Union

from . import values as nums
from .fetch import rank_tags
from .model import (SCHEMA, AtPeak, Gpu, GpuAtPeak, GpuEvents, GpuHealth, RankData,
                    RankReport, RankWork, Report, Series, Tags, TreePeak)
from .scale import outliers, slow_ranks, summary
from .values import r1
from .verdicts import PARTS, PRESSURE_WINDOW_S, add_verdict, rank_verdicts, run_verdicts

if TYPE_CHECKING:
    from mlflow.entities import Run

_GPU = re.compile(r"^gpu_(\d+)_(.+)$")
_GPU_UTIL = re.compile(r"^gpu_\d+_utilization_percentage$")
_GPU_SM_CLOCK = re.compile(r"^gpu_\d+_sm_clock_megahertz$")
_GPU_TEMP = re.compile(r"^gpu_\d+_temperature_celsius$")
_GPU_SM_ACTIVE = re.compile(r"^gpu_\d+_sm_active_percentage$")
_GPU_TENSOR = re.compile(r"^gpu_\d+_tensor_active_percentage$")

# End tags the container collector writes at stop (docs/design.md §3).
END_TAGS = ("oom_kill", "mem_peak_sampled_mb", "memory_peak_mb", "cpu_throttled_periods",
            "cpu_throttled_s")
PROCESS_SERIES = ("process_count", "process_memory_megabytes",
                  "process_cpu_utilization_percentage")
STOPPED_PERIODS = 2          # a RUNNING run whose last point is older than this many periods
QUIET_S = 60.0                # a RUNNING run without a point for this long is not recording
CFS_PERIOD_S = 0.1            # the kernel's default CFS period, for runs without cpu_period_us


# ---- limits and peaks ----------------------------------------------------------------


def memory_limit_mb(tag: Optional[str], series: Series, limit_bytes: Optional[int] = None
                    ) -> Optional[float]:
    """The memory limit in MB: exact from the tag memory_limit_bytes (engines
    since docs/design.md §9), else from the display tag cgroup as below.

    The tag rounds (0.1 GiB, 1 MiB); every logged
    point pairs the working set (MB) with its share of the limit (%), both
    rounded to 0.1, so each point bounds the limit too.  Limits are mostly
    round numbers (512 MiB, 56 GiB): the tag's value when every point allows
    it, else the middle of what the tag and the points allow; should they
    disagree (a limit changed during the run) the tag wins."""
    if limit_bytes is not None and limit_bytes > 0:
        return limit_bytes / 1e6
    limit, half, _ = nums.cgroup_limits(tag)
    if limit is None or half is None:
        return None
    lo, hi = (limit - half) / 1e6, (limit + half) / 1e6
    mbs = series.get("container_memory_usage_megabytes", ())
    pcts = {step: v for _, step, v in series.get("container_memory_usage_percentage", ())}
    for _, step, mb in mbs:
        pct = pcts.get(step)
        if pct is None or pct <= 0.5 or mb <= 0.5:
            continue
        lo = max(lo, (mb - 0.05) * 100.0 / (pct + 0.05))
        hi = min(hi, (mb + 0.05) * 100.0 / (pct - 0.05))
    if lo > hi or lo <= limit / 1e6 <= hi:
        return limit / 1e6
    return (lo + hi) / 2


class Limits(NamedTuple):
    memory_mb: Optional[float]
    memory_bytes: Optional[int]
    cpu_exact: Optional[float]
    cpu_cores: Optional[float]
    cpu_period_us: Optional[int]


def _limits(t: Tags, s: Series, tree_only: bool) -> Limits:
    cgroup = t.get("cgroup")
    limit_bytes = nums.num(t, "memory_limit_bytes", int)
    limit_mb = memory_limit_mb(cgroup, s, limit_bytes)
    if limit_mb is None and not tree_only:
        at_peak = nums.kv(t.get("memory_at_peak")) or {}
        limit_mb = at_peak.get("limit_mb") or None
    # the exact limit (start tag since issue 22), else the display tag's rounding
    cpu_exact = nums.num(t, "cpu_limit_cores")
    cpu_cores = (cpu_exact if cpu_exact is not None and cpu_exact > 0
                 else nums.cgroup_limits(cgroup)[2])
    return Limits(limit_mb, limit_bytes, cpu_exact, cpu_cores,
                  nums.num(t, "cpu_period_us", int))


def _memory_peak(t: Tags, s: Series) -> Optional[float]:
    """The working-set peak: the highest point, or the highest single sample
    (end tag) when the engine lived to write it; a point is a window's mean."""
    peak = nums.peak(s, "container_memory_usage_megabytes")
    sampled = nums.num(t, "mem_peak_sampled_mb")
    if sampled is not None and (peak is None or sampled > peak):
        peak = sampled
    # the same sample, in the tag that is shipped with the points and so
    # survives a kill of the recorder (docs/design.md §9)
    at_peak_ws = (nums.kv(t.get("memory_at_peak")) or {}).get("working_set_mb")
    if at_peak_ws is not None and (peak is None or at_peak_ws > peak):
        peak = at_peak_ws
    return peak


class Recording(NamedTuple):
    points: int
    start_ms: Optional[float]
    end_ms: Optional[int]
    span_s: Optional[float]
    late_s: Optional[float]


def _recording(s: Series, run_start: Optional[int], period_s: Optional[float]) -> Recording:
    stamps = sorted({ts for ser in s.values() for ts, _, _ in ser})
    points = max((len(ser) for ser in s.values()), default=0)
    first = stamps[0] if stamps else None
    last = stamps[-1] if stamps else None
    # A point's timestamp is its window's end, and the first window starts at
    # the baseline sample: recording began one window before the first point.
    # Not earlier than the run itself, though: a recording shorter than one
    # window logs a single point, at its stop, and so does the last window of
    # every recording; a 3 s run at 10 s windows began with the run, not 7 s
    # before it.  (A point before the run's start is another node's clock:
    # left as it is.)
    rec_start: Optional[float] = (first - period_s * 1000 if first is not None and period_s
                                  else first)
    if rec_start is not None and first is not None and run_start and \
            rec_start < run_start <= first:
        rec_start = run_start
    span = (last - rec_start) / 1000 if last is not None and rec_start is not None else None
    late = (rec_start - run_start) / 1000 if rec_start and run_start else None
    return Recording(points, rec_start, last, span, late)


def _throttled_pct(thr: Optional[int], span: Optional[float], cpu_period_us: Optional[int]
                   ) -> Optional[float]:
    if thr is None or not span:
        return None
    cfs_s = cpu_period_us / 1e6 if cpu_period_us else CFS_PERIOD_S
    return min(100.0, 100.0 * thr / max(1.0, span / cfs_s))


def _gpus(s: Series, t: Tags) -> List[Gpu]:
    """Every GPU the rank's series or its GPU tags name, by NVML index."""
    gpus: Dict[int, Series] = {}
    for name, ser in s.items():
        m = _GPU.match(name)
        if m:
            gpus.setdefault(int(m.group(1)), {})[m.group(2)] = ser
    at_peak = nums.gpu_clauses(t.get("gpu_memory_at_peak"))
    events = nums.gpu_clauses(t.get("gpu_events"))
    energy = nums.gpu_clauses(t.get("gpu_energy"))
    for i in list(at_peak) + list(events) + list(energy):
        gpus.setdefault(i, {})
    return [{"index": i,
             "memory_peak_percentage": r1(nums.peak(gpus[i], "memory_usage_percentage")),
             "memory_peak_megabytes": r1(nums.peak(gpus[i], "memory_usage_megabytes")),
             "utilization_mean_percentage": r1(nums.mean(gpus[i], "utilization_percentage")),
             "power_mean_watts": r1(nums.mean(gpus[i], "power_usage_watts")),
             **gpu_health(gpus[i], at_peak.get(i), events.get(i), energy.get(i))}
            for i in sorted(gpus)]


class GpuMeans(NamedTuple):
    """A rank's GPU fields over all its GPUs: utilization, SM clock and
    temperature the mean of every GPU's points, the most throttled GPU's share."""
    utilization_pct: Optional[float]
    throttled_max_pct: Optional[float]
    sm_clock_mhz: Optional[float]
    temperature_c: Optional[float]
    sm_active_pct: Optional[float]
    tensor_active_pct: Optional[float]


def _gpu_means(s: Series, gpus: List[Gpu]) -> GpuMeans:
    def over_all(pattern: "re.Pattern[str]") -> Optional[float]:
        return r1(nums.mean(
            {"x": [p for name, ser in s.items() if pattern.match(name) for p in ser]}, "x"))
    thr_known = [g["throttled_percentage"] for g in gpus if g["throttled_percentage"] is not None]
    return GpuMeans(over_all(_GPU_UTIL), max(thr_known) if thr_known else None,
                    over_all(_GPU_SM_CLOCK), over_all(_GPU_TEMP), over_all(_GPU_SM_ACTIVE),
                    over_all(_GPU_TENSOR))


# ---- what the rank's GPUs, tree and RDMA ports did and cost (issue 47) -----------------


def _per_second(mb: Optional[float], span_s: Optional[float]) -> Optional[float]:
    """A counter since recording started over the recording's span: its mean
    throughput (MB/s)."""
    return mb / span_s if mb is not None and span_s else None


def _link_errors(t: Tags, s: Series, ports: Dict[str, Dict[str, Union[int, str]]]
                 ) -> Optional[int]:
    """Every count of the tag rdma_events (link_downed, the PMA's error
    counters, the driver's retransmissions and timeouts); 0 for a rank with
    RDMA ports and no tag (the tag is absent while there is nothing to say),
    None for a rank without RDMA."""
    tag = t.get("rdma", "")  # the ports recorded, or "none: …"
    has_rdma = any(n.startswith("rdma_") for n in s) or (bool(tag) and
                                                          not tag.startswith("none"))
    if not ports and not has_rdma:
        return None
    return sum(v for items in ports.values() for v in items.values() if isinstance(v, int))


def _work(t: Tags, s: Series, gpus: List[Gpu], gm: GpuMeans, cpu_cores: Optional[float],
          span_s: Optional[float]) -> RankWork:
    """What the rank's GPUs, tree and RDMA ports did and cost: the fields the
    slow-rank rules read (docs/report.md, "Slow ranks")."""
    energies = [g["energy_kwh"] for g in gpus if g["energy_kwh"] is not None]
    tree_cpu = nums.mean(s, "process_cpu_utilization_percentage")  # 100 = one core
    rx, tx = nums.last(s, "rdma_receive_megabytes"), nums.last(s, "rdma_transmit_megabytes")
    ports = nums.rdma_ports(t.get("rdma_events"))
    return {
        "gpu_sm_active_mean_percentage": gm.sm_active_pct,
        "gpu_tensor_active_mean_percentage": gm.tensor_active_pct,
        "gpu_energy_kwh_per_hour": round(sum(energies) * 3600.0 / span_s, 6)
        if energies and span_s else None,
        "process_cpu_mean_limit_percentage": r1(tree_cpu / cpu_cores)
        if tree_cpu is not None and cpu_cores else None,
        "rdma_receive_megabytes": r1(rx),
        "rdma_transmit_megabytes": r1(tx),
        "rdma_receive_megabytes_per_second": r1(_per_second(rx, span_s)),
        "rdma_transmit_megabytes_per_second": r1(_per_second(tx, span_s)),
        "rdma_link_errors": _link_errors(t, s, ports),
        "rdma_events": ports or None,
        "node_cpu_energy_kwh": nums.package_energy(t.get("node_cpu_energy")),
    }


# ---- a GPU's health and who held its memory (issue 34; docs/gpu.md) --------------------


def _count(s: Series, name: str) -> Optional[int]:
    v = nums.last(s, name)  # a count since recording started: its last value
    return int(round(v)) if v is not None else None


def _ecc(s: Series, events: Optional[Dict[str, str]], kind: str) -> Optional[int]:
    """An ECC count since recording started: the series' last value (level
    full), else the gpu_events tag's ecc_<kind> item, which every level
    records when the count is not 0 (docs/series.md "Levels"); None when
    neither says."""
    v = _count(s, f"ecc_errors_{kind}")
    if v is None and events:
        v = nums.as_number(events.get(f"ecc_{kind}"), int)
    return v


def gpu_health(s: Series, at_peak: Optional[Dict[str, str]],
               events: Optional[Dict[str, str]],
               energy: Optional[Dict[str, str]] = None) -> GpuHealth:
    """One GPU's throttled shares over the run (the mean of the windows'
    shares: windows are equally long), ECC counts, this rank's processes'
    peak on it, and the two tags' items."""
    return {
        "throttled_percentage": r1(nums.mean(s, "throttled_percentage")),
        "throttled_power_percentage": r1(nums.mean(s, "throttled_power_percentage")),
        "throttled_thermal_percentage": r1(nums.mean(s, "throttled_thermal_percentage")),
        "ecc_errors_corrected": _ecc(s, events, "corrected"),
        "ecc_errors_uncorrected": _ecc(s, events, "uncorrected"),
        "process_memory_peak_megabytes": r1(nums.peak(s, "process_memory_megabytes")),
        "memory_at_peak_megabytes": gpu_at_peak(at_peak) if at_peak else None,
        "events": gpu_events(events) if events else None,
        # the gpu_energy end tag: kWh since recording started (docs/series.md)
        "energy_kwh": nums.as_number((energy or {}).get("kwh"), float),
    }


_RANK_MB = re.compile(r"^rank(\d+)_mb$")


def gpu_at_peak(items: Dict[str, str]) -> GpuAtPeak:
    """A clause of gpu_memory_at_peak: an absent holder held 0 MB."""
    def mb(key: str) -> float:
        return nums.as_number(items.get(key), float) or 0.0
    ranks = {m.group(1): r1(v) or 0.0 for k, v in
             ((k, nums.as_number(v, float)) for k, v in items.items())
             if (m := _RANK_MB.match(k)) and v is not None}
    used = nums.as_number(items.get("used_mb"), float)
    held = mb("own_mb") + sum(ranks.values()) + mb("other_ranks_mb") + mb("unranked_mb") + \
        mb("foreign_mb")
    return {"used": r1(used), "own": r1(mb("own_mb")) or 0.0, "ranks": ranks,
            "other_ranks": r1(mb("other_ranks_mb")) or 0.0,
            "unranked": r1(mb("unranked_mb")) or 0.0, "foreign": r1(mb("foreign_mb")) or 0.0,
            "unattributed": r1(max(0.0, used - held)) if used is not None else None}


def gpu_events(items: Dict[str, str]) -> GpuEvents:
    """A clause of gpu_events: absent items are 0 (the tag writes only non-zero ones)."""
    def n(key: str) -> int:
        return nums.as_number(items.get(key), int) or 0
    codes = [c for c in (nums.as_number(x, int) for x in items.get("codes", "").split(","))
             if c is not None]
    return {"xid": nums.as_number(items.get("xid"), int), "xid_at": items.get("at"),
            "xids": n("xids"), "xid_codes": codes,
            "remapped_corrected": n("remapped_corrected"),
            "remapped_uncorrected": n("remapped_uncorrected"),
            "remap_pending": n("remap_pending") > 0, "remap_failure": n("remap_failure") > 0,
            "retired_pages_sbe": n("retired_pages_sbe"),
            "retired_pages_dbe": n("retired_pages_dbe")}


def _node(t: Tags, data: RankData, tree_only: bool, recorder_node: Optional[str]) -> str:
    node_key = t.get("node")
    node = node_key if node_key and node_key != "unknown" else (data["node_tier"] or "unknown")
    if node == "unknown" and tree_only and recorder_node:
        node = recorder_node
    return node


# ---- what filled it (docs/design.md §9) ------------------------------------------------


def composition(t: Tags, series: Series, limit_mb: Optional[float]
                ) -> Tuple[Optional[AtPeak], Optional[str]]:
    """(the working set's parts at its peak in MB, where they come from).
    The tag memory_at_peak is exact (the sample with the highest working set,
    shipped when it changes, so it survives an OOM kill); without it (an
    older engine) the composition series at the step of the working set's
    highest point, a window's mean like every point."""
    tag = nums.kv(t.get("memory_at_peak"))
    if tag and "working_set_mb" in tag:
        parts = {key: tag.get(tkey) for key, _, tkey, _, _ in PARTS}
        return _at_peak(tag["working_set_mb"], parts, tag.get("limit_mb", limit_mb)), "tag"
    peak = nums.peak_point(series, "container_memory_usage_megabytes")
    if peak is None:
        return None, None
    parts = {key: nums.at_step(series, name, peak[0]) for key, name, _, _, _ in PARTS}
    if all(v is None for v in parts.values()):
        return None, None
    return _at_peak(peak[1], parts, limit_mb), "series"


def _at_peak(ws: float, parts: Dict[str, Optional[float]], limit: Optional[float]) -> AtPeak:
    return {"working_set": r1(ws), "anon": r1(parts["anon"]), "shmem": r1(parts["shmem"]),
            "file_active": r1(parts["file_active"]), "kernel": r1(parts["kernel"]),
            "limit": r1(limit)}


def process_tree_peak(t: Tags, series: Series) -> Optional[TreePeak]:
    """{"processes", "memory_megabytes"} at the tree's highest memory: the tag
    process_tree_peak (a single sample), else the series' highest point."""
    tag = nums.kv(t.get("process_tree_peak"))
    if tag and "memory_mb" in tag:
        n = tag.get("processes")
        return {"processes": int(n) if n is not None else None,
                "memory_megabytes": r1(tag["memory_mb"])}
    peak = nums.peak_point(series, "process_memory_megabytes")
    if peak is None:
        return None
    count = nums.at_step(series, "process_count", peak[0])
    return {"processes": int(round(count)) if count is not None else None,
            "memory_megabytes": r1(peak[1])}


def _oom_kill(t: Tags, events: Optional[Dict[str, int]]) -> Optional[int]:
    oom_kill = nums.num(t, "oom_kill", int)
    if oom_kill is None and events and "oom_kill" in events:
        oom_kill = events["oom_kill"]  # shipped with the points: it survives the kill
    return oom_kill


def _stopped_early(t: Tags, run: "Run", last: Optional[int], period_s: Optional[float],
                   limited: bool, tree_only: bool) -> Optional[bool]:
    """True, False, or None for unknown.  The end tags come at stop, and only
    with a memory limit.  A run still RUNNING may be recording now; one whose
    last point is long past (a killed process never ends its run) is not."""
    if any(k in t for k in END_TAGS):
        return False
    quiet_s = (time.time() * 1000 - last) / 1000 if last is not None else None
    recording = run.info.status == "RUNNING" and (
        quiet_s is None or quiet_s < max(3 * (period_s or 10.0), QUIET_S))
    if recording or not limited or tree_only:
        return None
    return True


# ---- a rank, a run -------------------------------------------------------------------


_GPU_PROC = re.compile(r"^gpu_\d+_process_memory_megabytes$")


def sibling_series(name: str) -> bool:
    """A series a pod's collector records under a sibling rank's own rank
    (docs/design.md §9): its process tree, and its processes' memory on
    each GPU of the pod (gpu_i_process_memory_megabytes, docs/gpu.md)."""
    return name in PROCESS_SERIES or bool(_GPU_PROC.match(name))


def is_tree_only(t: Tags, s: Series) -> bool:
    """Only process series: a sibling rank whose tree its pod's collector
    recorded; the container is the collector's, reported under its rank."""
    return bool(s) and all(sibling_series(n) for n in s) and "cgroup" not in t


class Pressure(NamedTuple):
    """A rank's pressure fields (PSI, docs/design.md §9): the peak of the end
    tag and of the series, the last minute's memory share, the stalled seconds."""
    memory_peak_pct: Optional[float]
    memory_last_minute_pct: Optional[float]
    memory_stalled_s: Optional[float]
    cpu_peak_pct: Optional[float]
    cpu_stalled_s: Optional[float]


def _pressure(t: Tags, s: Series, end_ms: Optional[int]) -> Pressure:
    pressure = nums.kv(t.get("pressure")) or {}
    mem_psi_last = (nums.last_window_mean(s, "container_memory_pressure_percentage", end_ms,
                                          PRESSURE_WINDOW_S) if end_ms is not None else None)
    return Pressure(
        r1(nums.max_of(pressure.get("memory_peak_pct"),
                       nums.peak(s, "container_memory_pressure_percentage"))),
        r1(mem_psi_last), r1(pressure.get("memory_some_s")),
        r1(nums.max_of(pressure.get("cpu_peak_pct"),
                       nums.peak(s, "container_cpu_pressure_percentage"))),
        r1(pressure.get("cpu_some_s")))


def rank_report(rank: int, data: RankData, tags: Tags, run: "Run", period_s: Optional[float],
                recorder: Optional[int] = None, recorder_node: Optional[str] = None,
                job_start_ms: Optional[float] = None) -> RankReport:
    """One rank's fields in the schema's order (docs/report.md, "Per rank"),
    and its verdicts; job_start_ms: the first recording start of the run's ranks."""
    s, t = data["series"], rank_tags(tags, rank)
    tree_only = is_tree_only(t, s)
    lim = _limits(t, s, tree_only)
    peak = _memory_peak(t, s)
    rec = _recording(s, run.info.start_time, period_s)
    behind = (rec.start_ms - job_start_ms) / 1000 if rec.start_ms is not None and \
        job_start_ms is not None else None
    thr = nums.num(t, "cpu_throttled_periods", int)
    comp, comp_source = composition(t, s, lim.memory_mb)
    events = nums.kv(t.get("memory_events"), int)
    psi = _pressure(t, s, rec.end_ms)
    gpus = _gpus(s, t)
    gm = _gpu_means(s, gpus)
    r: RankReport = {
        "rank": rank,
        "node": _node(t, data, tree_only, recorder_node),
        "cgroup": t.get("cgroup"),
        "gpu_status": t.get("gpu"),
        "container_memory_limit_megabytes": r1(lim.memory_mb),
        "container_memory_peak_megabytes": r1(peak),
        "container_memory_peak_percentage": r1(100.0 * peak / lim.memory_mb)
        if peak is not None and lim.memory_mb else None,
        "container_memory_headroom_megabytes": r1(lim.memory_mb - peak)
        if lim.memory_mb is not None and peak is not None else None,
        "container_memory_kernel_peak_megabytes": r1(nums.num(t, "memory_peak_mb")),
        "node_memory_peak_percentage": r1(nums.peak(s, "node_memory_usage_percentage")),
        "node_memory_peak_megabytes": r1(nums.peak(s, "node_memory_usage_megabytes")),
        "oom_kill": _oom_kill(t, events),
        "container_cpu_limit_cores": lim.cpu_cores,
        "container_cpu_mean_percentage": r1(nums.mean(s, "container_cpu_utilization_percentage")),
        "container_cpu_peak_percentage": r1(nums.peak(s, "container_cpu_utilization_percentage")),
        "cpu_throttled_periods": thr,
        "cpu_throttled_s": nums.num(t, "cpu_throttled_s"),
        "cpu_throttled_percentage": r1(_throttled_pct(thr, rec.span_s, lim.cpu_period_us)),
        "node_cpu_mean_percentage": r1(nums.mean(s, "node_cpu_utilization_percentage")),
        "node_cpu_peak_percentage": r1(nums.peak(s, "node_cpu_utilization_percentage")),
        "gpus": gpus,
        "network_receive_megabytes": r1(nums.last(s, "network_receive_megabytes")),
        "network_transmit_megabytes": r1(nums.last(s, "network_transmit_megabytes")),
        "points": rec.points,
        "recording_start_ms": int(rec.start_ms) if rec.start_ms is not None else None,
        "recording_end_ms": rec.end_ms,
        "recording_span_s": r1(rec.span_s),
        "started_after_run_s": r1(rec.late_s),
        "started_after_first_rank_s": r1(behind),
        "end_tags": any(k in t for k in END_TAGS),
        "stopped_early": _stopped_early(t, run, rec.end_ms, period_s, lim.memory_mb is not None,
                                        tree_only),
        # the companion's (docs/design.md §7): the recording process died without its stop
        "ended_by": t.get("ended_by"),
        "end_reason": t.get("end_reason"),
        "container_memory_limit_exact": "memory_limit_bytes" in t and lim.memory_mb is not None,
        "container_memory_limit_bytes": lim.memory_bytes
        if lim.memory_bytes and lim.memory_bytes > 0 else None,
        "container_cpu_limit_exact": lim.cpu_exact is not None and lim.cpu_exact > 0,
        "cpu_quota_us": nums.num(t, "cpu_quota_us", int),
        "cpu_period_us": lim.cpu_period_us,
        "container_memory_at_peak_megabytes": comp,
        "container_memory_at_peak_source": comp_source,
        "memory_events": events,
        "memory_pressure_peak_percentage": psi.memory_peak_pct,
        "memory_pressure_last_minute_percentage": psi.memory_last_minute_pct,
        "memory_pressure_stalled_s": psi.memory_stalled_s,
        "cpu_pressure_peak_percentage": psi.cpu_peak_pct,
        "cpu_pressure_stalled_s": psi.cpu_stalled_s,
        "process_tree_peak": process_tree_peak(t, s),
        "process_cpu_mean_percentage": r1(nums.mean(s, "process_cpu_utilization_percentage")),
        "container_memory_growth_megabytes_per_hour": r1(nums.slope_per_hour(
            s, "container_memory_usage_megabytes")),
        "process_memory_growth_megabytes_per_hour": r1(nums.slope_per_hour(
            s, "process_memory_megabytes")),
        "gpu_utilization_mean_percentage": gm.utilization_pct,
        "gpu_throttled_max_percentage": gm.throttled_max_pct,
        "gpu_sm_clock_mean_megahertz": gm.sm_clock_mhz,
        "gpu_temperature_mean_celsius": gm.temperature_c,
        **_work(t, s, gpus, gm, lim.cpu_cores, rec.span_s),
        "recorded_by_rank": recorder,
        "process_tree_only": tree_only,
        "verdict_codes": [],
        "verdicts": [],
    }
    r["verdict_codes"], r["verdicts"] = rank_verdicts(r, period_s)
    return r


def recorders(ranks: Dict[int, RankData]) -> Dict[int, Optional[int]]:
    """{rank: the rank whose windows carried its points}.  A rank with only
    process series is a sibling whose tree its pod's collector recorded
    (docs/design.md §9); every key of one window carries the same timestamp
    (§1), so the collector is the rank sharing the most of its timestamps."""
    stamps = {k: {ts for ser in d["series"].values() for ts, _, _ in ser}
              for k, d in ranks.items()}
    collectors = [k for k, d in ranks.items()
                  if any(not sibling_series(n) for n in d["series"])]
    out: Dict[int, Optional[int]] = {}
    for k, d in ranks.items():
        if k in collectors or not d["series"]:
            out[k] = k
            continue
        best = max(collectors, key=lambda c: (len(stamps[k] & stamps[c]), -c), default=None)
        out[k] = best if best is not None and stamps[k] & stamps[best] else None
    return out


def _rank_reports(run: "Run", ranks: Dict[int, RankData], tags: Tags,
                  period: Optional[float]) -> List[RankReport]:
    rec = recorders(ranks)
    # the job's start, as its recording saw it: the first rank to record
    job_start = min((st for d in ranks.values()
                     if (st := _recording(d["series"], run.info.start_time, period).start_ms)
                     is not None), default=None)
    out: List[RankReport] = []
    for k in sorted(ranks):
        by = rec.get(k)
        by_node: Optional[str] = None
        if by is not None and by != k:
            by_node = rank_tags(tags, by).get("node") or ranks[by]["node_tier"]
        out.append(rank_report(k, ranks[k], tags, run, period, by, by_node, job_start))
    return out


def recording_state(status: str, ranks: List[RankReport], period_s: Optional[float],
                    now_ms: Optional[float] = None) -> Tuple[str, Optional[float]]:
    """(state, age of the last point in s, None for an ended run): "ended"
    (the run is over), "running" (RUNNING, the last point at most STOPPED_PERIODS periods old) or
    "stopped" (RUNNING, no point for longer: the recorder or the job died, or
    the job runs on without a recorder -- never a complete recording)."""
    last = max((r["recording_end_ms"] for r in ranks if r["recording_end_ms"] is not None),
               default=None)
    age = ((now_ms if now_ms is not None else time.time() * 1000) - last) / 1000 \
        if last is not None else None
    if status != "RUNNING":
        return "ended", None  # the report of an ended run is the same at any time
    if age is None or age > STOPPED_PERIODS * (period_s or 10.0):
        return "stopped", age
    return "running", age


def run_report(run: "Run", ranks: Dict[int, RankData], how: str) -> Report:
    """The report of a run read by fetch.read (ranks not empty),
    found by the rule `how` (found_by); every non-finite float as None."""
    tags = dict(run.data.tags)
    interval = nums.num(tags, "scopemeter.interval_s")
    samples = nums.num(tags, "scopemeter.samples", int)
    period = interval * (samples or 1) if interval else None
    rank_reports = _rank_reports(run, ranks, tags, period)
    nodes: Dict[str, List[int]] = {}
    for r in rank_reports:
        nodes.setdefault(r["node"], []).append(r["rank"])
    state, age = recording_state(run.info.status, rank_reports, period)
    outs = outliers(rank_reports)
    slow = slow_ranks(rank_reports, outs)  # against the job: after every rank's own verdicts
    for sr in slow:
        add_verdict(next(r for r in rank_reports if r["rank"] == sr["rank"]), "slow_rank",
                    sr["text"])
    rep: Report = {
        "schema": SCHEMA,
        "run_id": run.info.run_id,
        "run_name": run.info.run_name,
        "experiment_id": run.info.experiment_id,
        "status": run.info.status,
        "lifecycle_stage": getattr(run.info, "lifecycle_stage", None),
        "start_time_ms": run.info.start_time,
        "end_time_ms": run.info.end_time,
        "found_by": how,
        "interval_s": interval,
        "samples": samples,
        "period_s": period,
        "collectors": nums.num(tags, "scopemeter.collectors", int),
        "skipped": tags.get("scopemeter.skipped"),
        "nodes": nodes,
        "recording": state,
        "end_reason": tags.get("scopemeter.end_reason"),
        "last_point_age_s": r1(age),
        "ranks": rank_reports,
        "verdicts": run_verdicts(rank_reports),
        "summary": summary(rank_reports, len(nodes), slow),
        "outliers": outs,
        "build": {f"rank{r['rank']}": nums.build_of(tags[f"scopemeter.rank{r['rank']}.build"])
                  for r in rank_reports if f"scopemeter.rank{r['rank']}.build" in tags},
    }
    safe: Report = nums.json_safe(rep)
    return safe
