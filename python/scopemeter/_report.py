"""scopemeter report: how close did a run come to OOM, and where (docs/report.md).

Why this file exists: the charts of a run say the right thing, but a person
still has to open a dozen charts per rank and read tags to answer the one
question the project exists for.  This module turns one MLflow run's
scopemeter series and tags (docs/design.md §1-§3) into per-rank numbers and
plain verdicts: ``report()`` (a dict with a stable schema), ``format_report()``
(the terminal table, at most 100 columns) and ``main()`` (``python -m
scopemeter report``, which the C CLI's ``scopemeter report`` execs).

It is the only implementation: it reads runs through MLflow's own client, so
every store MLflow supports (the local default sqlite:///mlflow.db, file:,
http(s) servers) and MLflow's auth variables and plugins work as they do for
MLflow.  MLflow is imported when a report is made, never at `import
scopemeter`.
"""
from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from typing import (TYPE_CHECKING, Any, BinaryIO, Callable, Dict, Iterator, List, NoReturn,
                    Optional, Sequence, Tuple, TypeVar, Union, overload)

from . import _native

if TYPE_CHECKING:
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient

# One series: its points (timestamp_ms, step, value), oldest first; a rank's
# series by name (without node tier and rank); a run's or a rank's tags.
Point = Tuple[int, int, float]
Series = Dict[str, List[Point]]
Tags = Dict[str, str]
# One rank's series and node tier, as _read gives them; the report's dicts
# (their schema is docs/report.md's, checked by tests/py/test_report.py)
RankData = Dict[str, Any]
Rep = Dict[str, Any]
_N = TypeVar("_N", int, float)

# JSON schema version: raised only when a field changes meaning or goes away
# (adding a field keeps it).  docs/report.md documents every field.
SCHEMA = 1

# Logged keys, system/<key>[/NODE]/rankN (docs/design.md §2), are read with
# the engine's own inverse of its naming rule (_native.series_parse), never a
# grammar of the report's: a key the rule cannot have written is not ours.
_RANK_TAG = re.compile(r"^scopemeter\.rank(\d+)\.(.+)$")
_GPU = re.compile(r"^gpu_(\d+)_(.+)$")

# End tags the container collector writes at stop (docs/design.md §3).
_END_TAGS = ("oom_kill", "mem_peak_sampled_mb", "memory_peak_mb", "cpu_throttled_periods",
             "cpu_throttled_s")

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
PROCESS_SERIES = ("process_count", "process_memory_megabytes",
                  "process_cpu_utilization_percentage")

# Thresholds of the verdicts (docs/report.md, "Verdicts").
MEMORY_HIGH_PCT = 90.0        # working-set peak as % of the memory limit
MEMORY_PRESSURE_PCT = 10.0    # memory stalled this share of the time (PSI "some") ...
PRESSURE_WINDOW_S = 60.0      # ... over the last minute of points, or over the whole run
THROTTLED_PCT = 10.0          # share of CFS periods throttled ...
THROTTLED_MIN = 10            # ... and at least this many (a second of periods)
NODE_HIGH_PCT = 90.0          # node memory peak, for the neighbours verdict ...
CONTAINER_LOW_PCT = 50.0      # ... while the container stayed below this share of its limit
LATE_FLOOR_S = 10.0           # late: later than one logging window and than this
QUIET_S = 60.0                # a RUNNING run without a point for this long is not recording
CFS_PERIOD_S = 0.1            # the kernel's default CFS period, for runs without cpu_period_us

# Verdict codes, most severe first: the order of docs/report.md.
CODES = ("oom_killed", "memory_high", "memory_cause", "memory_events", "memory_pressure",
         "cpu_throttled", "node_neighbours", "no_limit", "started_late", "stopped_early")


class ReportError(Exception):
    """A run that cannot be reported: not found, no scopemeter series, no store."""


# ---- reading the run ----------------------------------------------------------------


def _client(tracking_uri: Optional[str]) -> "MlflowClient":
    from mlflow.tracking import MlflowClient
    from mlflow.tracking import get_tracking_uri
    # MLflow's own resolution: mlflow.set_tracking_uri() in this process, else
    # MLFLOW_TRACKING_URI, else its local default (sqlite:///mlflow.db)
    uri = tracking_uri or get_tracking_uri()
    _refuse_missing_store(uri)
    return MlflowClient(tracking_uri=uri)


def _local_store_path(uri: str) -> Optional[Tuple[str, str]]:
    """(kind, path) of a store MLflow would create when missing: a sqlite
    file, or a file store's directory (file:///x, file:/x, or a plain path,
    which MLflow takes as a file store); None for every other store."""
    from urllib.parse import unquote, urlparse
    if uri.startswith("sqlite:///"):
        path = uri[len("sqlite:///"):].split("?", 1)[0]
        return ("file", path) if path and path != ":memory:" else None
    parsed = urlparse(uri)
    if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
        return "directory", unquote(parsed.path)
    if parsed.scheme == "" and uri:
        return "directory", uri
    return None


def _refuse_missing_store(uri: str) -> None:
    """A report only reads: opening a local store that is not there would
    create it (MLflow's sqlite store creates and migrates an empty database,
    its file store makes the directory and a default experiment) in whatever
    directory the user happens to be in."""
    local = _local_store_path(uri)
    if local and not os.path.exists(local[1]):
        raise ReportError(f"no MLflow store at {uri} ({local[0]} {os.path.abspath(local[1])} "
                          "does not exist): set MLFLOW_TRACKING_URI to the store the run was "
                          "logged to")


def _holds_series(run: "Run") -> bool:
    return any(_native.series_parse(k) is not None for k in run.data.metrics)


def _current_experiments(client: "MlflowClient") -> List[str]:
    """The experiment(s) "the most recent run" is looked for in: the one the
    environment names, else the one this process set with mlflow.set_experiment,
    else every active experiment (a shell has no current experiment, and a
    script's set_experiment does not outlive it)."""
    exp_id = os.environ.get("MLFLOW_EXPERIMENT_ID")
    if exp_id:
        _require_experiment(client, exp_id)
        return [exp_id]
    name = os.environ.get("MLFLOW_EXPERIMENT_NAME")
    if name:
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise ReportError(f"no experiment named {name!r} (MLFLOW_EXPERIMENT_NAME)")
        return [exp.experiment_id]
    try:  # set by mlflow.set_experiment() in this process; private, so guarded
        from mlflow.tracking import fluent
        active = getattr(fluent, "_active_experiment_id", None)
        if active:
            return [active]
    except Exception:
        pass
    return [e.experiment_id for e in client.search_experiments()]


def _require_experiment(client: "MlflowClient", exp_id: str) -> None:
    """MLFLOW_EXPERIMENT_ID names an experiment that exists: searching one
    that does not finds no run, which would blame the runs, not the id."""
    try:
        client.get_experiment(exp_id)
    except Exception as e:
        code = getattr(e, "error_code", "")
        if code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
            raise ReportError(f"no such experiment {exp_id!r} (MLFLOW_EXPERIMENT_ID)") from None
        raise


def _latest_run_with_series(client: "MlflowClient") -> str:
    exps = _current_experiments(client)
    token: Optional[str] = None
    seen = 0
    while seen < 5000:
        page = client.search_runs(exps, order_by=["attributes.start_time DESC"],
                                  max_results=500, page_token=token)
        for run in page:
            if _holds_series(run):
                found: str = run.info.run_id
                return found
        seen += len(page)
        token = page.token
        if not token:
            break
    raise ReportError("no run with scopemeter series in experiment(s) "
                      f"{', '.join(exps) or '(none)'}: pass a run id")


def _check_run_id(run_id: Optional[str]) -> None:
    """An empty id is a mistake (an unset shell variable), never "any run"."""
    if run_id is not None and not str(run_id).strip():
        raise ReportError("the run id is empty (an unset variable?): pass a run id, or none "
                          "for the most recent run")


def _resolve_run_id(client: "MlflowClient", run_id: Optional[str]) -> Tuple[str, str]:
    _check_run_id(run_id)
    if run_id is not None:
        return run_id, "argument"
    mlflow = sys.modules.get("mlflow")
    if mlflow is not None:  # only when the caller already uses MLflow in this process
        active = mlflow.active_run()
        if active is not None:
            return active.info.run_id, "active run"
    if os.environ.get("MLFLOW_RUN_ID"):
        return os.environ["MLFLOW_RUN_ID"], "MLFLOW_RUN_ID"
    return _latest_run_with_series(client), "most recent run with scopemeter series"


def _read(client: "MlflowClient", run_id: str) -> Tuple["Run", Dict[int, RankData]]:
    """(run, {rank: {"series": {name: [(ts_ms, step, value)]}, "node_tier": str|None}}),
    name without the node tier and the rank (container_memory_usage_megabytes)."""
    try:
        run = client.get_run(run_id)
    except Exception as e:
        raise ReportError(f"cannot read run {run_id}: {_first_line(e)}") from None
    ranks: Dict[int, RankData] = {}
    for key in sorted(run.data.metrics):
        p = _native.series_parse(key)
        if p is None:
            continue
        name, tier, rank = p["scoped"], p["node"] or None, p["rank"]
        r = ranks.setdefault(rank, {"series": {}, "node_tier": None})
        if tier and r["node_tier"] is None:
            r["node_tier"] = tier
        hist = client.get_metric_history(run_id, key)
        r["series"][name] = sorted((h.timestamp, h.step, h.value) for h in hist
                                   if _finite(h.value))
    if ranks:
        # a rank that started (its start tag) but logged no point is part of
        # the run too: killed before its first window, it is what to look at
        for key in run.data.tags:
            m = _RANK_TAG.match(key)
            if m and m.group(2) == "node":
                ranks.setdefault(int(m.group(1)), {"series": {}, "node_tier": None})
    return run, ranks


# No series or tag of scopemeter can hold a magnitude this large (MB, %, W,
# seconds, counts): 10^15 MB is 10^21 bytes.
ABSURD = 1e15


def _finite(v: Any) -> bool:
    """A value that can be a measurement: not NaN or infinite, nor MLflow's
    stand-in for an infinity (its SQL store keeps +-inf as
    +-sys.float_info.max), nor larger than any measurement (ABSURD).
    scopemeter never logs such points; another program writing into its keys
    may, and one such point must not turn the report into NaN or 300 digits."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        return False
    return math.isfinite(x) and abs(x) < ABSURD


def _json_safe(obj: Any) -> Any:
    """The report with every non-finite float as None: JSON has no NaN."""
    if isinstance(obj, float):
        return obj if _finite(obj) else None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def _first_line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return s[0] if s else type(e).__name__


# ---- numbers ----------------------------------------------------------------------


def _r1(x: Optional[float]) -> Optional[float]:
    return None if x is None else round(float(x), 1)


@overload
def _num(tags: Tags, key: str) -> Optional[float]: ...
@overload
def _num(tags: Tags, key: str, kind: Callable[[str], _N]) -> Optional[_N]: ...


def _num(tags: Tags, key: str, kind: Callable[[str], Any] = float) -> Any:
    v = tags.get(key)
    if v is None:
        return None
    try:
        x = kind(v)
    except ValueError:
        return None
    return x if kind is int or _finite(x) else None


def _values(series: Series, name: str) -> List[float]:
    return [v for _, _, v in series.get(name, ())]


def _max(series: Series, name: str) -> Optional[float]:
    v = _values(series, name)
    return max(v) if v else None


def _mean(series: Series, name: str) -> Optional[float]:
    v = _values(series, name)
    return sum(v) / len(v) if v else None


def _last(series: Series, name: str) -> Optional[float]:
    v = _values(series, name)
    return v[-1] if v else None


_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def _cgroup_limits(tag: Optional[str]) -> Tuple[Optional[float], Optional[float], Optional[float]]:
    """(memory limit bytes, half-width of the tag's rounding in bytes, CPU cores)
    from "v1 /path mem=512MiB cpu=0.5" / "v2 /x mem=56.0GiB cpu=16.0"."""
    mem = re.search(r"\bmem=([0-9.]+)(B|KiB|MiB|GiB|TiB)\b", tag or "")
    cpu = re.search(r"\bcpu=([0-9.]+)\b", tag or "")
    limit: Optional[float] = None
    half: Optional[float] = None
    if mem:
        text, unit = mem.group(1), _UNITS[mem.group(2)]
        limit = float(text) * unit
        decimals = len(text.split(".", 1)[1]) if "." in text else 0
        half = 0.5 * 10 ** -decimals * unit
    return limit, half, (float(cpu.group(1)) if cpu else None)


@overload
def _kv(text: Optional[str]) -> Optional[Dict[str, float]]: ...
@overload
def _kv(text: Optional[str], kind: Callable[[str], _N]) -> Optional[Dict[str, _N]]: ...


def _kv(text: Optional[str], kind: Callable[[str], Any] = float) -> Optional[Dict[str, Any]]:
    """{key: number} of a "key=value key=value" tag (docs/design.md §9);
    a malformed pair is left out, an absent or empty tag is None."""
    out: Dict[str, Any] = {}
    for word in (text or "").split():
        key, eq, val = word.partition("=")
        if not eq or not key:
            continue
        try:
            x = kind(val)
        except ValueError:
            continue
        if kind is int or _finite(x):
            out[key] = x
    return out or None


def _at_step(series: Series, name: str, step: int) -> Optional[float]:
    for _, st, v in series.get(name, ()):
        if st == step:
            return v
    return None


def _peak_point(series: Series, name: str) -> Optional[Tuple[int, float]]:
    """(step, value) of the highest point of a series (the first of equals)."""
    best: Optional[Tuple[int, float]] = None
    for _, st, v in series.get(name, ()):
        if best is None or v > best[1]:
            best = (st, v)
    return best


def _composition(t: Tags, series: Series, limit_mb: Optional[float]
                 ) -> Tuple[Optional[Dict[str, Optional[float]]], Optional[str]]:
    """(the working set's parts at its peak in MB, where they come from).
    The tag memory_at_peak is exact (the sample with the highest working set,
    shipped when it changes, so it survives an OOM kill); without it (an
    older engine) the composition series at the step of the working set's
    highest point, a window's mean like every point."""
    tag = _kv(t.get("memory_at_peak"))
    if tag and "working_set_mb" in tag:
        out = {"working_set": _r1(tag["working_set_mb"])}
        for key, _, tkey, _, _ in PARTS:
            out[key] = _r1(tag.get(tkey))
        out["limit"] = _r1(tag.get("limit_mb", limit_mb))
        return out, "tag"
    peak = _peak_point(series, "container_memory_usage_megabytes")
    if peak is None:
        return None, None
    parts = {key: _at_step(series, name, peak[0]) for key, name, _, _, _ in PARTS}
    if all(v is None for v in parts.values()):
        return None, None
    out = {"working_set": _r1(peak[1])}
    out.update({k: _r1(v) for k, v in parts.items()})
    out["limit"] = _r1(limit_mb)
    return out, "series"


def _process_tree_peak(t: Tags, series: Series) -> Optional[Dict[str, Any]]:
    """{"processes", "memory_megabytes"} at the tree's highest memory: the tag
    process_tree_peak (a single sample), else the series' highest point."""
    tag = _kv(t.get("process_tree_peak"))
    if tag and "memory_mb" in tag:
        n = tag.get("processes")
        return {"processes": int(n) if n is not None else None,
                "memory_megabytes": _r1(tag["memory_mb"])}
    peak = _peak_point(series, "process_memory_megabytes")
    if peak is None:
        return None
    count = _at_step(series, "process_count", peak[0])
    return {"processes": int(round(count)) if count is not None else None,
            "memory_megabytes": _r1(peak[1])}


def _last_window_mean(series: Series, name: str, end_ms: int, window_s: float
                      ) -> Optional[float]:
    """The mean of a series' points in the window_s before end_ms: each point
    is a window's share of time, windows are equally long, so the mean is the
    share of that whole stretch."""
    pts = [v for ts, _, v in series.get(name, ()) if ts > end_ms - window_s * 1000]
    return sum(pts) / len(pts) if pts else None


def _max_of(*xs: Optional[float]) -> Optional[float]:
    present = [x for x in xs if x is not None]
    return max(present) if present else None


def _memory_limit_mb(tag: Optional[str], series: Series, limit_bytes: Optional[int] = None
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
    limit, half, _ = _cgroup_limits(tag)
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


def _recorders(ranks: Dict[int, RankData]) -> Dict[int, Optional[int]]:
    """{rank: the rank whose windows carried its points}.  A rank with only
    process series is a sibling whose tree its pod's collector recorded
    (docs/design.md §9); every key of one window carries the same timestamp
    (§1), so the collector is the rank sharing the most of its timestamps."""
    stamps = {k: {ts for ser in d["series"].values() for ts, _, _ in ser}
              for k, d in ranks.items()}
    collectors = [k for k, d in ranks.items()
                  if any(n not in PROCESS_SERIES for n in d["series"])]
    out: Dict[int, Optional[int]] = {}
    for k, d in ranks.items():
        if k in collectors or not d["series"]:
            out[k] = k
            continue
        best = max(collectors, key=lambda c: (len(stamps[k] & stamps[c]), -c), default=None)
        out[k] = best if best is not None and stamps[k] & stamps[best] else None
    return out


def _rank_tags(tags: Tags, rank: int) -> Tags:
    return {m.group(2): v for k, v in tags.items()
            if (m := _RANK_TAG.match(k)) and int(m.group(1)) == rank}


def _rank_report(rank: int, data: RankData, tags: Tags, run: "Run", period_s: Optional[float],
                 recorder: Optional[int] = None, recorder_node: Optional[str] = None) -> Rep:
    s: Series = data["series"]
    t = _rank_tags(tags, rank)
    cgroup = t.get("cgroup")
    # only process series: a sibling rank whose tree its pod's collector
    # recorded; the container is the collector's, reported under its rank
    tree_only = bool(s) and all(n in PROCESS_SERIES for n in s) and "cgroup" not in t
    limit_bytes = _num(t, "memory_limit_bytes", int)
    limit_mb = _memory_limit_mb(cgroup, s, limit_bytes)
    if limit_mb is None and not tree_only:
        at_peak = _kv(t.get("memory_at_peak")) or {}
        limit_mb = at_peak.get("limit_mb") or None
    # the exact limit (start tag since issue 22), else the display tag's rounding
    cpu_exact = _num(t, "cpu_limit_cores")
    cpu_cores = cpu_exact if cpu_exact is not None and cpu_exact > 0 else _cgroup_limits(cgroup)[2]
    cpu_period_us = _num(t, "cpu_period_us", int)

    # the working-set peak: the highest point, or the highest single sample
    # (end tag) when the engine lived to write it; a point is a window's mean
    peak = _max(s, "container_memory_usage_megabytes")
    sampled = _num(t, "mem_peak_sampled_mb")
    if sampled is not None and (peak is None or sampled > peak):
        peak = sampled
    # the same sample, in the tag that is shipped with the points and so
    # survives a kill of the recorder (docs/design.md §9)
    at_peak_ws = (_kv(t.get("memory_at_peak")) or {}).get("working_set_mb")
    if at_peak_ws is not None and (peak is None or at_peak_ws > peak):
        peak = at_peak_ws
    peak_pct = 100.0 * peak / limit_mb if peak is not None and limit_mb else None
    kernel_peak = _num(t, "memory_peak_mb")

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
    run_start = run.info.start_time
    rec_start = first - period_s * 1000 if first is not None and period_s else first
    if rec_start is not None and run_start and rec_start < run_start <= first:
        rec_start = run_start
    span = (last - rec_start) / 1000 if last is not None and rec_start is not None else None
    late = (rec_start - run_start) / 1000 if rec_start and run_start else None

    thr = _num(t, "cpu_throttled_periods", int)
    thr_pct: Optional[float] = None
    if thr is not None and span:
        cfs_s = cpu_period_us / 1e6 if cpu_period_us else CFS_PERIOD_S
        thr_pct = min(100.0, 100.0 * thr / max(1.0, span / cfs_s))

    gpus: Dict[int, Series] = {}
    for name, ser in s.items():
        m = _GPU.match(name)
        if m:
            gpus.setdefault(int(m.group(1)), {})[m.group(2)] = ser
    gpu_list: List[Rep] = []
    for i in sorted(gpus):
        gs = gpus[i]
        g = {"index": i,
             "memory_peak_percentage": _r1(_max(gs, "memory_usage_percentage")),
             "memory_peak_megabytes": _r1(_max(gs, "memory_usage_megabytes")),
             "utilization_mean_percentage": _r1(_mean(gs, "utilization_percentage")),
             "power_mean_watts": _r1(_mean(gs, "power_usage_watts"))}
        gpu_list.append(g)

    node_key = t.get("node")
    node = node_key if node_key and node_key != "unknown" else (data["node_tier"] or "unknown")
    if node == "unknown" and tree_only and recorder_node:
        node = recorder_node

    # what filled it (docs/design.md §9)
    composition, composition_source = _composition(t, s, limit_mb)
    events = _kv(t.get("memory_events"), int)
    oom_kill = _num(t, "oom_kill", int)
    if oom_kill is None and events and "oom_kill" in events:
        oom_kill = events["oom_kill"]  # shipped with the points: it survives the kill
    pressure = _kv(t.get("pressure")) or {}
    mem_psi_last = (_last_window_mean(s, "container_memory_pressure_percentage", last,
                                      PRESSURE_WINDOW_S) if last is not None else None)
    # The end tags come at stop, and only with a memory limit.  A run still
    # RUNNING may be recording now; one whose last point is long past (a
    # killed process never ends its run) is not.
    has_end = any(k in t for k in _END_TAGS)
    quiet_s = (time.time() * 1000 - last) / 1000 if last is not None else None
    recording = run.info.status == "RUNNING" and (
        quiet_s is None or quiet_s < max(3 * (period_s or 10.0), QUIET_S))
    if has_end:
        stopped_early = False
    elif recording or limit_mb is None or tree_only:
        stopped_early = None
    else:
        stopped_early = True

    r: Rep = {
        "rank": rank,
        "node": node,
        "cgroup": cgroup,
        "gpu_status": t.get("gpu"),
        "container_memory_limit_megabytes": _r1(limit_mb),
        "container_memory_peak_megabytes": _r1(peak),
        "container_memory_peak_percentage": _r1(peak_pct),
        "container_memory_headroom_megabytes": _r1(limit_mb - peak)
        if limit_mb is not None and peak is not None else None,
        "container_memory_kernel_peak_megabytes": _r1(kernel_peak),
        "node_memory_peak_percentage": _r1(_max(s, "node_memory_usage_percentage")),
        "node_memory_peak_megabytes": _r1(_max(s, "node_memory_usage_megabytes")),
        "oom_kill": oom_kill,
        "container_cpu_limit_cores": cpu_cores,
        "container_cpu_mean_percentage": _r1(_mean(s, "container_cpu_utilization_percentage")),
        "container_cpu_peak_percentage": _r1(_max(s, "container_cpu_utilization_percentage")),
        "cpu_throttled_periods": thr,
        "cpu_throttled_s": _num(t, "cpu_throttled_s"),
        "cpu_throttled_percentage": _r1(thr_pct),
        "node_cpu_mean_percentage": _r1(_mean(s, "node_cpu_utilization_percentage")),
        "node_cpu_peak_percentage": _r1(_max(s, "node_cpu_utilization_percentage")),
        "gpus": gpu_list,
        "network_receive_megabytes": _r1(_last(s, "network_receive_megabytes")),
        "network_transmit_megabytes": _r1(_last(s, "network_transmit_megabytes")),
        "points": points,
        "recording_start_ms": int(rec_start) if rec_start is not None else None,
        "recording_end_ms": last,
        "recording_span_s": _r1(span),
        "started_after_run_s": _r1(late),
        "end_tags": has_end,
        "stopped_early": stopped_early,
        "container_memory_limit_exact": "memory_limit_bytes" in t and limit_mb is not None,
        "container_memory_limit_bytes": limit_bytes if limit_bytes and limit_bytes > 0 else None,
        "container_cpu_limit_exact": cpu_exact is not None and cpu_exact > 0,
        "cpu_quota_us": _num(t, "cpu_quota_us", int),
        "cpu_period_us": cpu_period_us,
        "container_memory_at_peak_megabytes": composition,
        "container_memory_at_peak_source": composition_source,
        "memory_events": events,
        "memory_pressure_peak_percentage": _r1(_max_of(
            pressure.get("memory_peak_pct"), _max(s, "container_memory_pressure_percentage"))),
        "memory_pressure_last_minute_percentage": _r1(mem_psi_last),
        "memory_pressure_stalled_s": _r1(pressure.get("memory_some_s")),
        "cpu_pressure_peak_percentage": _r1(_max_of(
            pressure.get("cpu_peak_pct"), _max(s, "container_cpu_pressure_percentage"))),
        "cpu_pressure_stalled_s": _r1(pressure.get("cpu_some_s")),
        "process_tree_peak": _process_tree_peak(t, s),
        "process_cpu_mean_percentage": _r1(_mean(s, "process_cpu_utilization_percentage")),
        "recorded_by_rank": recorder,
        "process_tree_only": tree_only,
    }
    codes, texts = _verdicts(r, period_s)
    r["verdict_codes"], r["verdicts"] = codes, texts
    return r


def _verdicts(r: Rep, period_s: Optional[float]) -> Tuple[List[str], List[str]]:
    """The findings of one rank, most severe first (docs/report.md)."""
    out: List[Tuple[str, str]] = []
    lim, peak, pct = (r["container_memory_limit_megabytes"], r["container_memory_peak_megabytes"],
                      r["container_memory_peak_percentage"])
    if r["oom_kill"]:
        n = r["oom_kill"]
        kp = r["container_memory_kernel_peak_megabytes"]
        seen = f"; kernel peak {kp:.1f} MB" if kp is not None else ""
        if pct is not None and pct < MEMORY_HIGH_PCT:
            seen += (f"; the samples saw at most {pct:.1f} %: the climb was faster than "
                     "one sample")
        limit_text = f"its {lim:.1f} MB memory limit" if lim is not None else "its memory limit"
        out.append(("oom_killed",
                    f"OOM-killed: the kernel killed {n} process{'es' if n > 1 else ''} of this "
                    f"container at {limit_text}{seen}"))
    if pct is not None and pct >= MEMORY_HIGH_PCT:
        out.append(("memory_high",
                    f"memory peak {pct:.1f} % of the limit: {peak:.1f} of {lim:.1f} MB, "
                    f"{lim - peak:.1f} MB of headroom"))
    comp, ev = r["container_memory_at_peak_megabytes"], r["memory_events"] or {}
    hit = any(ev.get(k, 0) > 0 for k in ("high", "max", "oom", "oom_kill"))
    if comp and (r["oom_kill"] or (pct is not None and pct >= MEMORY_HIGH_PCT) or hit):
        out.append(("memory_cause", _cause_text(comp)))
    ev_text = _events_text(ev, r["cgroup"], skip_kills=bool(r["oom_kill"]))
    if ev_text:
        out.append(("memory_events", ev_text))
    psi_text = _pressure_text(r)
    if psi_text:
        out.append(("memory_pressure", psi_text))
    tp = r["cpu_throttled_percentage"]
    if tp is not None and tp >= THROTTLED_PCT and r["cpu_throttled_periods"] >= THROTTLED_MIN:
        out.append(("cpu_throttled",
                    f"CPU throttled in {tp:.0f} % of periods ({r['cpu_throttled_periods']} periods,"
                    f" {r['cpu_throttled_s'] or 0:.1f} s) at a limit of "
                    f"{_cores(r['container_cpu_limit_cores'])} cores"))
    node_pct = r["node_memory_peak_percentage"]
    if (node_pct is not None and node_pct >= NODE_HIGH_PCT and pct is not None
            and pct < CONTAINER_LOW_PCT):
        out.append(("node_neighbours",
                    f"node memory peaked at {node_pct:.1f} % while this container stayed at "
                    f"{pct:.1f} % of its limit: neighbours on node {r['node']} use the memory"))
    if lim is None and not r["process_tree_only"]:
        what = f"node memory peak {node_pct:.1f} %" if node_pct is not None else "no node values"
        out.append(("no_limit",
                    f"no container memory limit: only node values exist ({what}); the node's "
                    "memory is the limit that counts"))
    late = r["started_after_run_s"]
    if late is not None and late > max(period_s or 0.0, LATE_FLOOR_S):
        out.append(("started_late",
                    f"recording started late: {late:.0f} s after the run (one window is "
                    f"{period_s:g} s); the start of the run, where memory spikes, is missing"))
    if r["stopped_early"]:
        if (comp is not None and r["container_memory_at_peak_source"] == "tag") or ev:
            # the tags of docs/design.md §9 travel with the points
            out.append(("stopped_early",
                        "recording stopped early: no end tags (killed before it could write "
                        "them); the memory at the peak and the kernel's memory events are "
                        "known up to the last window shipped, the kernel's peak is unknown"))
        else:
            out.append(("stopped_early",
                        "recording stopped early: no end tags (killed before it could write "
                        "them); the end of the run, its kernel peak and OOM kills are unknown"))
    return [c for c, _ in out], [t for _, t in out]


def _size(mb: float, ref_mb: Optional[float]) -> str:
    """GB (10^9 bytes) against a reference (the limit) of 1 GB or more, MB
    below it and for what would read 0.0 GB."""
    if ref_mb is not None and ref_mb >= 1000 and mb >= 100:
        return f"{mb / 1000:.1f} GB"
    return f"{mb:.0f} MB"


def _cause_text(comp: Dict[str, Any]) -> str:
    """What filled the container at its peak: the parts, largest first, each
    with what it typically is."""
    ws, lim = comp.get("working_set"), comp.get("limit")
    ref = lim if lim is not None else ws
    if ws is not None and lim:
        head = f"peaked at {100.0 * ws / lim:.0f} % of its {_size(lim, ref)} limit"
    else:
        head = f"peaked at {_size(ws or 0.0, ref)}"
    parts = sorted(((comp[key], key, name, what) for key, _, _, name, what in PARTS
                    if comp.get(key) is not None and comp[key] > 0),
                   key=lambda p: (-p[0], p[1]))
    if not parts:
        return head
    return head + ": " + ", ".join(f"{name} {_size(v, ref)} ({what})"
                                   for v, _, name, what in parts)


def _times(n: int) -> str:
    return f"{n} time{'s' * (n != 1)}"


def _events_text(ev: Dict[str, int], cgroup: Optional[str], skip_kills: bool
                 ) -> Optional[str]:
    """The memory events since the start (tag memory_events): v2 memory.events,
    v1 memory.failcnt as max.  The OOM kills have their own verdict."""
    if not ev:
        return None
    v1 = (cgroup or "").startswith("v1 ") or ("high" not in ev and "oom" not in ev)
    hits: List[str] = []
    if ev.get("high", 0) > 0:
        hits.append(f"memory.high {_times(ev['high'])}")
    if ev.get("max", 0) > 0:
        hits.append(f"the limit {_times(ev['max'])}" if v1 else f"max {_times(ev['max'])}")
    tail: List[str] = []
    if ev.get("oom", 0) > 0:
        tail.append(f"an allocation failed at the limit {_times(ev['oom'])}")
    if ev.get("oom_kill", 0) > 0 and not skip_kills:
        tail.append(f"the OOM killer killed {ev['oom_kill']} "
                    f"process{'es' * (ev['oom_kill'] != 1)}")
    if not hits and not tail:
        return None
    text = "the kernel hit " + ", ".join(hits) if hits else ""
    text = "; ".join([x for x in [text] + tail if x])
    source = "memory.failcnt" if v1 else "memory.events"
    return f"{text} ({source}, since recording started)"


def _pressure_text(r: Rep) -> Optional[str]:
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


def _r2(c: Optional[float]) -> Optional[float]:
    """Cores for people: the exact limit (1/6 core) to 0.01, as the display
    tag rounds it, so a column keeps its width."""
    return None if c is None else round(c, 2)


def _cores(c: Optional[float]) -> str:
    return "?" if c is None else f"{_r2(c):g}"


def _build(client: "MlflowClient", run_id: str, how: str) -> Tuple[Rep, Dict[int, RankData]]:
    run, ranks = _read(client, run_id)
    tags = dict(run.data.tags)
    if not ranks:
        skipped = tags.get("scopemeter.skipped")
        why = f" (scopemeter.skipped: {skipped})" if skipped else ""
        raise ReportError(f"run {run_id} holds no scopemeter series{why}")
    interval = _num(tags, "scopemeter.interval_s")
    samples = _num(tags, "scopemeter.samples", int)
    period = interval * (samples or 1) if interval else None
    rec = _recorders(ranks)
    rank_reports: List[Rep] = []
    for k in sorted(ranks):
        by = rec.get(k)
        by_node: Optional[str] = None
        if by is not None and by != k:
            by_node = _rank_tags(tags, by).get("node") or ranks[by]["node_tier"]
        rank_reports.append(_rank_report(k, ranks[k], tags, run, period, by, by_node))
    nodes: Dict[str, List[int]] = {}
    for r in rank_reports:
        nodes.setdefault(r["node"], []).append(r["rank"])
    rep = {
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
        "collectors": _num(tags, "scopemeter.collectors", int),
        "skipped": tags.get("scopemeter.skipped"),
        "nodes": nodes,
        "ranks": rank_reports,
        "verdicts": _run_verdicts(rank_reports),
    }
    safe: Rep = _json_safe(rep)
    return safe, ranks


def _span_text(ranks: Sequence[int]) -> str:
    """"0-8", "0, 2, 5": the ranks of one grouped verdict."""
    ranks = sorted(ranks)
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}"
    return ", ".join(map(str, ranks))


def _run_verdicts(rank_reports: List[Rep]) -> List[Rep]:
    """Every rank's verdicts, most severe first, then by rank; each names its
    rank(s) and node.  `no_limit` is a fact of the node, not of a rank: the
    ranks of one node without a limit share one entry (the node's highest
    memory peak), instead of one identical line per rank."""
    findings: List[Tuple[int, int, str, str, List[int], str]] = []
    no_limit: Dict[str, List[Rep]] = {}
    for r in rank_reports:
        for c, t in zip(r["verdict_codes"], r["verdicts"]):
            if c == "no_limit":
                no_limit.setdefault(r["node"], []).append(r)
            else:
                findings.append((CODES.index(c), r["rank"], c, t, [r["rank"]], r["node"]))
    for node, rs in no_limit.items():
        if len(rs) == 1:
            r = rs[0]
            t = r["verdicts"][r["verdict_codes"].index("no_limit")]
        else:
            pct = _max_of(*(x["node_memory_peak_percentage"] for x in rs))
            what = (f"node memory peak {pct:.1f} %, the highest its {len(rs)} ranks saw"
                    if pct is not None else "no node values")
            t = (f"no container memory limit on node {node}: only node values exist "
                 f"({what}); the node's memory is the limit that counts")
        findings.append((CODES.index("no_limit"), rs[0]["rank"], "no_limit", t,
                         [x["rank"] for x in rs], node))
    findings.sort(key=lambda f: (f[0], f[1]))
    return [{"rank": rk, "ranks": rks, "node": node, "code": c, "text": t}
            for _, rk, c, t, rks, node in findings]


def _collect(run_id: Optional[str] = None, tracking_uri: Optional[str] = None
             ) -> Tuple[Rep, Dict[int, RankData]]:
    client = _client(tracking_uri)
    run_id, how = _resolve_run_id(client, run_id)
    return _build(client, run_id, how)


def report(run_id: Optional[str] = None, tracking_uri: Optional[str] = None,
           plot: Union[str, "os.PathLike[str]", BinaryIO, None] = None) -> Rep:
    """How close the run came to OOM, and where: per rank, the container's
    memory limit, peaks, headroom, node memory beside it, OOM kills, CPU and
    throttling, GPUs, network, the recording's span, and verdicts (most severe
    first).  Returns a dict whose schema docs/report.md documents.

    run_id: the run; default the active run of this process, else
    MLFLOW_RUN_ID, else the most recent run holding scopemeter series in the
    current experiment (MLFLOW_EXPERIMENT_ID / _NAME, mlflow.set_experiment),
    or in every experiment when none is set; an empty run_id ("", an unset
    variable) is a ReportError, not "any run".  tracking_uri: default MLflow's
    own (mlflow.set_tracking_uri(), MLFLOW_TRACKING_URI, else
    sqlite:///mlflow.db).  plot: a PNG path to also draw the picture into
    (needs matplotlib: ImportError saying how to get it).

    Unlike enable_system_metrics() this raises (ReportError) when the run
    cannot be reported: it is a reading tool, not part of training.  An
    argument of the wrong type is a TypeError, as in every public function:
    run_id and tracking_uri a str or None, plot a path (str, os.PathLike), a
    binary file object or None."""
    for name, value in (("run_id", run_id), ("tracking_uri", tracking_uri)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"report(): {name} must be a str or None, not {type(value).__name__}")
    if plot is not None and not isinstance(plot, (str, os.PathLike)) and \
            not callable(getattr(plot, "write", None)):
        raise TypeError("report(): plot must be a path (str, os.PathLike), a binary file or "
                        f"None, not {type(plot).__name__}")
    if plot:
        _require_plot()
    rep, ranks = _collect(run_id, tracking_uri)
    if plot:
        from . import _report_plot
        _report_plot.draw(rep, ranks, plot)
    return rep


PLOT_HINT = "pip install 'scopemeter[report]'"


def _require_plot() -> None:
    try:
        from . import _report_plot
        _report_plot.require()
    except ImportError as e:
        raise ImportError(f"the report's picture needs matplotlib ({_first_line(e)}): "
                          f"{PLOT_HINT}") from None


# ---- the terminal table ----------------------------------------------------------


def _f(x: Optional[float], fmt: str = "{:.1f}", none: str = "-") -> str:
    """A cell: a value wider than a column (a node of 20 TB) in 2
    significant digits, never spilling into the next column."""
    if x is None:
        return none
    text = fmt.format(x)
    return text if len(text) <= 9 else f"{x:.2g}"


def _clock(ms: Optional[int]) -> str:
    return "-" if ms is None else time.strftime("%H:%M:%S", time.localtime(ms / 1000))


def format_report(rep: Rep) -> str:
    """The report as text for a terminal: every line at most 100 columns; ranks
    grouped under their node, so the rank -> node placement reads at a glance."""
    L: List[str] = []
    name = f' "{rep["run_name"]}"' if rep.get("run_name") else ""
    deleted = "  (deleted)" if rep.get("lifecycle_stage") == "deleted" else ""
    L.append(f"run {rep['run_id']}{name}  {rep['status']}{deleted}")
    period = f"every {rep['period_s']:g} s" if rep["period_s"] else "period unknown"
    n = len(rep["ranks"])
    L.append(f"{n} rank{'s' * (n != 1)} on {len(rep['nodes'])} node"
             f"{'s' * (len(rep['nodes']) != 1)}, one point {period}, "
             f"{rep['collectors'] or '?'} collector{'s' * (rep['collectors'] != 1)}")
    if rep.get("skipped"):
        L.append(f"scopemeter.skipped: {rep['skipped']}")

    def grouped() -> Iterator[Tuple[str, List[Rep]]]:
        for node, ranks in sorted(rep["nodes"].items()):
            yield node, [r for r in rep["ranks"] if r["rank"] in ranks]

    # Without any container limit the container's columns would be dashes:
    # the node's memory and CPU are what count, in a table of their own.
    contained = any(r["container_memory_limit_megabytes"] is not None
                    or r["container_memory_peak_megabytes"] is not None for r in rep["ranks"])
    unlimited = any(r["container_memory_limit_megabytes"] is None and not r["process_tree_only"]
                    for r in rep["ranks"])
    if contained or not unlimited:
        L.append("")
        L.append("memory (MB = 10^6 bytes; peak: highest working set; kernel: the kernel's peak, "
                 "page cache too)")
        L.append(f"{'node / rank':<22}{'limit':>9}{'peak':>9}{'peak %':>8}{'headroom':>10}"
                 f"{'kernel':>9}{'node peak %':>13}{'OOM kills':>11}")
        for node, rs in grouped():
            L.append(f"{node[:98]}")
            for r in rs:
                if r["process_tree_only"]:
                    L.append(f"{'  rank ' + str(r['rank']):<22}{_tree_only(r)}")
                    continue
                L.append(f"{'  rank ' + str(r['rank']):<22}"
                         f"{_f(r['container_memory_limit_megabytes'], none='none'):>9}"
                         f"{_f(r['container_memory_peak_megabytes']):>9}"
                         f"{_f(r['container_memory_peak_percentage']):>8}"
                         f"{_f(r['container_memory_headroom_megabytes']):>10}"
                         f"{_f(r['container_memory_kernel_peak_megabytes']):>9}"
                         f"{_f(r['node_memory_peak_percentage']):>13}"
                         f"{_f(r['oom_kill'], '{:d}'):>11}")

    if unlimited:
        L.append("")
        L.append("node (no container memory limit: the node's memory is the limit that counts)")
        L.append(f"{'node / rank':<22}{'mem peak MB':>13}{'mem peak %':>12}{'cpu mean %':>12}"
                 f"{'cpu peak %':>12}")
        for node, rs in grouped():
            L.append(f"{node[:98]}")
            for r in rs:
                if r["process_tree_only"]:
                    L.append(f"{'  rank ' + str(r['rank']):<22}{_tree_only(r)}")
                    continue
                L.append(f"{'  rank ' + str(r['rank']):<22}"
                         f"{_f(r['node_memory_peak_megabytes']):>13}"
                         f"{_f(r['node_memory_peak_percentage']):>12}"
                         f"{_f(r['node_cpu_mean_percentage']):>12}"
                         f"{_f(r['node_cpu_peak_percentage']):>12}")

    if any(_filled(r) for r in rep["ranks"]):
        L.append("")
        L.append("what filled it (MB at the working-set peak; processes: the rank's tree at its "
                 "peak, PSS;")
        L.append("psi: peak % of time stalled on memory / CPU)")
        L.append(f"{'node / rank':<22}{'anon':>9}{'shmem':>9}{'file':>9}{'kernel':>9}"
                 f"{'procs':>7}{'tree MB':>10}{'mem psi %':>11}{'cpu psi %':>11}")
        for node, rs in grouped():
            L.append(f"{node[:98]}")
            for r in rs:
                c = r["container_memory_at_peak_megabytes"] or {}
                tree = r["process_tree_peak"] or {}
                L.append(f"{'  rank ' + str(r['rank']):<22}"
                         f"{_f(c.get('anon')):>9}{_f(c.get('shmem')):>9}"
                         f"{_f(c.get('file_active')):>9}{_f(c.get('kernel')):>9}"
                         f"{_f(tree.get('processes'), '{:d}'):>7}"
                         f"{_f(tree.get('memory_megabytes')):>10}"
                         f"{_f(r['memory_pressure_peak_percentage']):>11}"
                         f"{_f(r['cpu_pressure_peak_percentage']):>11}")

    L.append("")
    L.append("cpu (% of the container's CPU limit), network (MB since recording started), "
             "recording")
    L.append(f"{'node / rank':<22}{'limit':>7}{'mean %':>8}{'peak %':>8}{'throttled':>11}"
             f"{'rx MB':>9}{'tx MB':>9}{'from':>10}{'span s':>8}{'points':>8}")
    for node, rs in grouped():
        L.append(f"{node[:98]}")
        for r in rs:
            thr = r["cpu_throttled_periods"]
            thr_s = "-" if thr is None else (
                f"{thr} ({r['cpu_throttled_percentage']:.0f}%)"
                if r["cpu_throttled_percentage"] is not None else str(thr))
            no_cpu = "-" if r["process_tree_only"] else "none"
            L.append(f"{'  rank ' + str(r['rank']):<22}"
                     f"{_f(_r2(r['container_cpu_limit_cores']), '{:g}', no_cpu):>7}"
                     f"{_f(r['container_cpu_mean_percentage']):>8}"
                     f"{_f(r['container_cpu_peak_percentage']):>8}"
                     f"{thr_s[:10]:>11}"
                     f"{_f(r['network_receive_megabytes']):>9}"
                     f"{_f(r['network_transmit_megabytes']):>9}"
                     f"{_clock(r['recording_start_ms']):>10}"
                     f"{_f(r['recording_span_s']):>8}"
                     f"{r['points']:>8}")

    if any(r["gpus"] for r in rep["ranks"]):
        L.append("")
        L.append("gpu (NVML index)")
        L.append(f"{'node / rank':<22}{'gpu':>5}{'memory peak %':>15}{'memory peak MB':>16}"
                 f"{'util mean %':>13}{'power mean W':>14}")
        for node, rs in grouped():
            L.append(f"{node[:98]}")
            for r in rs:
                for g in r["gpus"]:
                    L.append(f"{'  rank ' + str(r['rank']):<22}{g['index']:>5}"
                             f"{_f(g['memory_peak_percentage']):>15}"
                             f"{_f(g['memory_peak_megabytes']):>16}"
                             f"{_f(g['utilization_mean_percentage']):>13}"
                             f"{_f(g['power_mean_watts']):>14}")

    L.append("")
    if rep["verdicts"]:
        L.append("verdicts (most severe first)")
        for v in rep["verdicts"]:
            ranks = v.get("ranks") or [v["rank"]]
            who = (f"ranks {_span_text(ranks)}" if len(ranks) > 1 else f"rank {ranks[0]}")
            L.extend(_wrap(f"{who}: {v['text']}", 100, "    "))
    else:
        L.append("verdicts: none (no OOM kill, no limit near, no throttling, complete recording)")
    return "\n".join(L)


def _filled(r: Rep) -> bool:
    """Whether a rank has any of the series or tags of docs/design.md §9: the
    table of an older run stays as it was."""
    return any(r[k] is not None for k in (
        "container_memory_at_peak_megabytes", "process_tree_peak",
        "memory_pressure_peak_percentage", "cpu_pressure_peak_percentage"))


def _tree_only(r: Rep) -> str:
    by = r["recorded_by_rank"]
    return (f"process tree only, recorded by rank {by} (its pod's container)" if by is not None
            else "process tree only")


def _wrap(text: str, width: int, indent: str) -> List[str]:
    import textwrap
    return textwrap.wrap(text, width=width, subsequent_indent=indent, break_long_words=True,
                         break_on_hyphens=False)


# ---- the command -------------------------------------------------------------------


USAGE = "usage: scopemeter report [RUN_ID] [--json] [--plot FILE.png]"


def main(argv: Optional[Sequence[str]] = None, prog: str = "scopemeter report") -> int:
    """`scopemeter report [RUN_ID] [--json] [--plot FILE.png]`: 0 when the
    report was made, 1 when the run cannot be reported (or the picture not
    drawn), 2 for a usage error.  Every problem is one line on stderr."""
    import argparse
    p = argparse.ArgumentParser(
        prog=prog,
        description="How close a run came to OOM, and where: per rank, the container's memory "
                    "against its limit beside the node's, OOM kills, CPU throttling, GPUs, "
                    "network, and verdicts.  Reads the run through MLflow's client: "
                    "MLFLOW_TRACKING_URI (default sqlite:///mlflow.db), MLflow's auth "
                    "variables.  See docs/report.md.")
    p.add_argument("run_id", nargs="?", metavar="RUN_ID",
                   help="the run (default: MLFLOW_RUN_ID, else the most recent run with "
                        "scopemeter series in MLFLOW_EXPERIMENT_ID / MLFLOW_EXPERIMENT_NAME, "
                        "or in every experiment)")
    p.add_argument("--json", action="store_true", help="the report as JSON (docs/report.md)")
    p.add_argument("--plot", metavar="FILE.png",
                   help="also draw memory and CPU per rank over time into a PNG "
                        "(needs matplotlib: pip install 'scopemeter[report]')")
    try:
        args = p.parse_args(argv)
    except BrokenPipeError:  # `--help | head -1`
        _write_stdout("")
        _die_of_sigpipe()
    if args.run_id is not None and not args.run_id.strip():
        # `scopemeter report "$RUN"` with RUN unset: not "the most recent run"
        sys.stderr.write(f"{prog}: error: RUN_ID is empty (an unset variable?): pass a run "
                         "id, or none for the most recent run with scopemeter series\n")
        return 2
    # A person waits for this command: MLflow's client retries a dead server
    # for minutes by default (7 retries with doubling backoff).  The user's own
    # settings win; scopemeter.report() in a program leaves them alone.
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
    if args.plot:
        # before reading the run: a missing extra is said at once, in one line
        try:
            _require_plot()
        except ImportError as e:
            _say(f"--plot: {e}")
            return 1
    try:
        rep, ranks = _collect(args.run_id)
    except ReportError as e:
        _say(str(e))
        return 1
    except Exception as e:  # the store's own error (unreachable server, auth)
        _say(f"cannot read the run: {type(e).__name__}: {_first_line(e)}")
        return 1
    text = json.dumps(rep, indent=2, allow_nan=False) if args.json else format_report(rep)
    closed = not _write_stdout(text + "\n")
    if args.plot:
        from . import _report_plot
        try:
            _report_plot.draw(rep, ranks, args.plot)
        except Exception as e:
            _say(f"cannot draw {args.plot}: {type(e).__name__}: {_first_line(e)}")
            return 1
        _say(f"picture written to {args.plot}")
    if closed:
        _die_of_sigpipe()
    return 0


def _write_stdout(text: str) -> bool:
    """Write and flush stdout; False when its reader has gone (`| head -1`).
    Python ignores SIGPIPE (so a closed socket to the tracking server is an
    exception, not a silent death); a closed stdout is BrokenPipeError."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
        return True
    except BrokenPipeError:
        # nothing more can go there, and the interpreter's own flush at exit
        # must not raise again: point stdout at /dev/null
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return False


def _die_of_sigpipe() -> NoReturn:
    """End as `git log | head -1` does when its reader is gone: quietly, killed
    by SIGPIPE (the shell's status 141), which a pipeline expects of a writer
    whose reader stopped (`set -o pipefail` sees it; nothing is printed)."""
    import signal
    sys.stderr.flush()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGPIPE)
    os._exit(128 + signal.SIGPIPE)  # not reached: the signal ends the process


def _redact(s: str) -> str:
    """MLflow's error texts name the request URL, user-info included."""
    return re.sub(r"(//)[^/@\s]+@", r"\1***@", s)


def _say(line: str) -> None:
    sys.stderr.write(f"scopemeter: {_redact(line)}\n")
    sys.stderr.flush()
