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
import json
import math
import os
import re
import sys
import time

# JSON schema version: raised only when a field changes meaning or goes away
# (adding a field keeps it).  docs/report.md documents every field.
SCHEMA = 1

# system/<key>[/NODE]/rankN (docs/design.md §2)
_KEY = re.compile(r"^system/([a-z][a-z0-9_]*)(?:/([^/]+))?/rank(\d+)$")
_RANK_TAG = re.compile(r"^scopemeter\.rank(\d+)\.(.+)$")
_GPU = re.compile(r"^gpu_(\d+)_(.+)$")

# End tags the container collector writes at stop (docs/design.md §3).
_END_TAGS = ("oom_kill", "mem_peak_sampled_mb", "memory_peak_mb", "cpu_throttled_periods",
             "cpu_throttled_s")

# Thresholds of the verdicts (docs/report.md, "Verdicts").
MEMORY_HIGH_PCT = 90.0        # working-set peak as % of the memory limit
THROTTLED_PCT = 10.0          # share of CFS periods throttled ...
THROTTLED_MIN = 10            # ... and at least this many (a second of periods)
NODE_HIGH_PCT = 90.0          # node memory peak, for the neighbours verdict ...
CONTAINER_LOW_PCT = 50.0      # ... while the container stayed below this share of its limit
LATE_FLOOR_S = 10.0           # late: later than one logging window and than this
QUIET_S = 60.0                # a RUNNING run without a point for this long is not recording
CFS_PERIOD_S = 0.1            # the kernel's default CFS period (the engine does not tag it)

# Verdict codes, most severe first: the order of docs/report.md.
CODES = ("oom_killed", "memory_high", "cpu_throttled", "node_neighbours", "no_limit",
         "started_late", "stopped_early")


class ReportError(Exception):
    """A run that cannot be reported: not found, no scopemeter series, no store."""


# ---- reading the run ----------------------------------------------------------------


def _client(tracking_uri):
    from mlflow.tracking import MlflowClient
    from mlflow.tracking import get_tracking_uri
    # MLflow's own resolution: mlflow.set_tracking_uri() in this process, else
    # MLFLOW_TRACKING_URI, else its local default (sqlite:///mlflow.db)
    uri = tracking_uri or get_tracking_uri()
    _refuse_missing_sqlite(uri)
    return MlflowClient(tracking_uri=uri)


def _refuse_missing_sqlite(uri):
    """A report only reads: opening a sqlite store that is not there would
    create an empty database (MLflow's store creates and migrates it) in
    whatever directory the user happens to be in."""
    if not uri.startswith("sqlite:///"):
        return
    path = uri[len("sqlite:///"):].split("?", 1)[0]
    if path and path != ":memory:" and not os.path.exists(path):
        raise ReportError(f"no MLflow store at {uri} (file {os.path.abspath(path)} does not "
                          "exist): set MLFLOW_TRACKING_URI to the store the run was logged to")


def _holds_series(run):
    return any(_KEY.match(k) for k in run.data.metrics)


def _current_experiments(client):
    """The experiment(s) "the most recent run" is looked for in: the one the
    environment names, else the one this process set with mlflow.set_experiment,
    else every active experiment (a shell has no current experiment, and a
    script's set_experiment does not outlive it)."""
    exp_id = os.environ.get("MLFLOW_EXPERIMENT_ID")
    if exp_id:
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


def _latest_run_with_series(client):
    exps = _current_experiments(client)
    token, seen = None, 0
    while seen < 5000:
        page = client.search_runs(exps, order_by=["attributes.start_time DESC"],
                                  max_results=500, page_token=token)
        for run in page:
            if _holds_series(run):
                return run.info.run_id
        seen += len(page)
        token = page.token
        if not token:
            break
    raise ReportError("no run with scopemeter series in experiment(s) "
                      f"{', '.join(exps) or '(none)'}: pass a run id")


def _resolve_run_id(client, run_id):
    if run_id:
        return run_id, "argument"
    mlflow = sys.modules.get("mlflow")
    if mlflow is not None:  # only when the caller already uses MLflow in this process
        active = mlflow.active_run()
        if active is not None:
            return active.info.run_id, "active run"
    if os.environ.get("MLFLOW_RUN_ID"):
        return os.environ["MLFLOW_RUN_ID"], "MLFLOW_RUN_ID"
    return _latest_run_with_series(client), "most recent run with scopemeter series"


def _read(client, run_id):
    """(run, {rank: {"series": {name: [(ts_ms, step, value)]}, "node_tier": str|None}}),
    name without the node tier and the rank (container_memory_usage_megabytes)."""
    try:
        run = client.get_run(run_id)
    except Exception as e:
        raise ReportError(f"cannot read run {run_id}: {_first_line(e)}") from None
    ranks = {}
    for key in sorted(run.data.metrics):
        m = _KEY.match(key)
        if not m:
            continue
        name, tier, rank = m.group(1), m.group(2), int(m.group(3))
        if name.startswith("process_"):
            # the process trees (docs/design.md §9) are not part of the report
            # yet; under all_workers a rank that only has its tree (logged by
            # its pod's collector) is not a collecting rank to judge
            continue
        r = ranks.setdefault(rank, {"series": {}, "node_tier": None})
        if tier and r["node_tier"] is None:
            r["node_tier"] = tier
        hist = client.get_metric_history(run_id, key)
        r["series"][name] = sorted((h.timestamp, h.step, h.value) for h in hist)
    if ranks:
        # a rank that started (its start tag) but logged no point is part of
        # the run too: killed before its first window, it is what to look at
        for key in run.data.tags:
            m = _RANK_TAG.match(key)
            if m and m.group(2) == "node":
                ranks.setdefault(int(m.group(1)), {"series": {}, "node_tier": None})
    return run, ranks


def _first_line(e):
    s = str(e).strip().splitlines()
    return s[0] if s else type(e).__name__


# ---- numbers ----------------------------------------------------------------------


def _r1(x):
    return None if x is None else round(float(x), 1)


def _num(tags, key, kind=float):
    v = tags.get(key)
    if v is None:
        return None
    try:
        x = kind(v)
    except ValueError:
        return None
    return x if kind is int or math.isfinite(x) else None


def _values(series, name):
    return [v for _, _, v in series.get(name, ())]


def _max(series, name):
    v = _values(series, name)
    return max(v) if v else None


def _mean(series, name):
    v = _values(series, name)
    return sum(v) / len(v) if v else None


def _last(series, name):
    v = _values(series, name)
    return v[-1] if v else None


_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def _cgroup_limits(tag):
    """(memory limit bytes, half-width of the tag's rounding in bytes, CPU cores)
    from "v1 /path mem=512MiB cpu=0.5" / "v2 /x mem=56.0GiB cpu=16.0"."""
    mem = re.search(r"\bmem=([0-9.]+)(B|KiB|MiB|GiB|TiB)\b", tag or "")
    cpu = re.search(r"\bcpu=([0-9.]+)\b", tag or "")
    limit = half = None
    if mem:
        text, unit = mem.group(1), _UNITS[mem.group(2)]
        limit = float(text) * unit
        decimals = len(text.split(".", 1)[1]) if "." in text else 0
        half = 0.5 * 10 ** -decimals * unit
    return limit, half, (float(cpu.group(1)) if cpu else None)


def _memory_limit_mb(tag, series):
    """The memory limit in MB.  The tag rounds (0.1 GiB, 1 MiB); every logged
    point pairs the working set (MB) with its share of the limit (%), both
    rounded to 0.1, so each point bounds the limit too.  Limits are mostly
    round numbers (512 MiB, 56 GiB): the tag's value when every point allows
    it, else the middle of what the tag and the points allow; should they
    disagree (a limit changed during the run) the tag wins."""
    limit, half, _ = _cgroup_limits(tag)
    if limit is None:
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


def _rank_report(rank, data, tags, run, period_s):
    s = data["series"]
    t = {m.group(2): v for k, v in tags.items()
         if (m := _RANK_TAG.match(k)) and int(m.group(1)) == rank}
    cgroup = t.get("cgroup")
    limit_mb = _memory_limit_mb(cgroup, s)
    _, _, cpu_cores = _cgroup_limits(cgroup)

    # the working-set peak: the highest point, or the highest single sample
    # (end tag) when the engine lived to write it; a point is a window's mean
    peak = _max(s, "container_memory_usage_megabytes")
    sampled = _num(t, "mem_peak_sampled_mb")
    if sampled is not None and (peak is None or sampled > peak):
        peak = sampled
    peak_pct = 100.0 * peak / limit_mb if peak is not None and limit_mb else None
    kernel_peak = _num(t, "memory_peak_mb")

    stamps = sorted({ts for ser in s.values() for ts, _, _ in ser})
    points = max((len(ser) for ser in s.values()), default=0)
    first = stamps[0] if stamps else None
    last = stamps[-1] if stamps else None
    rec_start = first - period_s * 1000 if first is not None and period_s else first
    span = (last - rec_start) / 1000 if first is not None else None
    late = (rec_start - run.info.start_time) / 1000 if rec_start and run.info.start_time else None

    thr = _num(t, "cpu_throttled_periods", int)
    thr_pct = None
    if thr is not None and span:
        thr_pct = min(100.0, 100.0 * thr / max(1.0, span / CFS_PERIOD_S))

    gpus = {}
    for name, ser in s.items():
        m = _GPU.match(name)
        if m:
            gpus.setdefault(int(m.group(1)), {})[m.group(2)] = ser
    gpu_list = []
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
    # The end tags come at stop, and only with a memory limit.  A run still
    # RUNNING may be recording now; one whose last point is long past (a
    # killed process never ends its run) is not.
    has_end = any(k in t for k in _END_TAGS)
    quiet_s = (time.time() * 1000 - last) / 1000 if last is not None else None
    recording = run.info.status == "RUNNING" and (
        quiet_s is None or quiet_s < max(3 * (period_s or 10.0), QUIET_S))
    if has_end:
        stopped_early = False
    elif recording or limit_mb is None:
        stopped_early = None
    else:
        stopped_early = True

    r = {
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
        "oom_kill": _num(t, "oom_kill", int),
        "container_cpu_limit_cores": cpu_cores,
        "container_cpu_mean_percentage": _r1(_mean(s, "container_cpu_utilization_percentage")),
        "container_cpu_peak_percentage": _r1(_max(s, "container_cpu_utilization_percentage")),
        "cpu_throttled_periods": thr,
        "cpu_throttled_s": _num(t, "cpu_throttled_s"),
        "cpu_throttled_percentage": _r1(thr_pct),
        "node_cpu_mean_percentage": _r1(_mean(s, "node_cpu_utilization_percentage")),
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
    }
    codes, texts = _verdicts(r, period_s)
    r["verdict_codes"], r["verdicts"] = codes, texts
    return r


def _verdicts(r, period_s):
    """The findings of one rank, most severe first (docs/report.md)."""
    out = []
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
    if lim is None:
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
        out.append(("stopped_early",
                    "recording stopped early: no end tags (killed before it could write them); "
                    "the end of the run, its kernel peak and OOM kills are unknown"))
    return [c for c, _ in out], [t for _, t in out]


def _cores(c):
    return "?" if c is None else f"{c:g}"


def _build(client, run_id, how):
    run, ranks = _read(client, run_id)
    tags = dict(run.data.tags)
    if not ranks:
        skipped = tags.get("scopemeter.skipped")
        why = f" (scopemeter.skipped: {skipped})" if skipped else ""
        raise ReportError(f"run {run_id} holds no scopemeter series{why}")
    interval = _num(tags, "scopemeter.interval_s")
    samples = _num(tags, "scopemeter.samples", int)
    period = interval * (samples or 1) if interval else None
    rank_reports = [_rank_report(k, ranks[k], tags, run, period) for k in sorted(ranks)]
    nodes = {}
    for r in rank_reports:
        nodes.setdefault(r["node"], []).append(r["rank"])
    findings = []
    for r in rank_reports:
        for c, t in zip(r["verdict_codes"], r["verdicts"]):
            findings.append((CODES.index(c), r["rank"], c, t))
    findings.sort(key=lambda f: (f[0], f[1]))
    rep = {
        "schema": SCHEMA,
        "run_id": run.info.run_id,
        "run_name": run.info.run_name,
        "experiment_id": run.info.experiment_id,
        "status": run.info.status,
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
        "verdicts": [{"rank": rk, "code": c, "text": t} for _, rk, c, t in findings],
    }
    return rep, ranks


def _collect(run_id=None, tracking_uri=None):
    client = _client(tracking_uri)
    run_id, how = _resolve_run_id(client, run_id)
    return _build(client, run_id, how)


def report(run_id=None, tracking_uri=None, plot=None):
    """How close the run came to OOM, and where: per rank, the container's
    memory limit, peaks, headroom, node memory beside it, OOM kills, CPU and
    throttling, GPUs, network, the recording's span, and verdicts (most severe
    first).  Returns a dict whose schema docs/report.md documents.

    run_id: the run; default the active run of this process, else
    MLFLOW_RUN_ID, else the most recent run holding scopemeter series in the
    current experiment (MLFLOW_EXPERIMENT_ID / _NAME, mlflow.set_experiment),
    or in every experiment when none is set.  tracking_uri: default MLflow's
    own (mlflow.set_tracking_uri(), MLFLOW_TRACKING_URI, else
    sqlite:///mlflow.db).  plot: a PNG path to also draw the picture into
    (needs matplotlib: ImportError saying how to get it).

    Unlike enable_system_metrics() this raises (ReportError) when the run
    cannot be reported: it is a reading tool, not part of training."""
    if plot:
        _require_plot()
    rep, ranks = _collect(run_id, tracking_uri)
    if plot:
        from . import _report_plot
        _report_plot.draw(rep, ranks, plot)
    return rep


PLOT_HINT = "pip install 'scopemeter[report]'"


def _require_plot():
    try:
        from . import _report_plot
        _report_plot.require()
    except ImportError as e:
        raise ImportError(f"the report's picture needs matplotlib ({_first_line(e)}): "
                          f"{PLOT_HINT}") from None


# ---- the terminal table ----------------------------------------------------------


def _f(x, fmt="{:.1f}", none="-"):
    return none if x is None else fmt.format(x)


def _clock(ms):
    return "-" if ms is None else time.strftime("%H:%M:%S", time.localtime(ms / 1000))


def format_report(rep):
    """The report as text for a terminal: every line at most 100 columns; ranks
    grouped under their node, so the rank -> node placement reads at a glance."""
    L = []
    name = f' "{rep["run_name"]}"' if rep.get("run_name") else ""
    L.append(f"run {rep['run_id']}{name}  {rep['status']}")
    period = f"every {rep['period_s']:g} s" if rep["period_s"] else "period unknown"
    n = len(rep["ranks"])
    L.append(f"{n} rank{'s' * (n != 1)} on {len(rep['nodes'])} node"
             f"{'s' * (len(rep['nodes']) != 1)}, one point {period}, "
             f"{rep['collectors'] or '?'} collector{'s' * (rep['collectors'] != 1)}")
    if rep.get("skipped"):
        L.append(f"scopemeter.skipped: {rep['skipped']}")

    def grouped():
        for node, ranks in sorted(rep["nodes"].items()):
            yield node, [r for r in rep["ranks"] if r["rank"] in ranks]

    L.append("")
    L.append("memory (MB = 10^6 bytes; peak: highest working set; kernel: the kernel's peak, "
             "page cache too)")
    L.append(f"{'node / rank':<22}{'limit':>9}{'peak':>9}{'peak %':>8}{'headroom':>10}"
             f"{'kernel':>9}{'node peak %':>13}{'OOM kills':>11}")
    for node, rs in grouped():
        L.append(f"{node[:98]}")
        for r in rs:
            L.append(f"{'  rank ' + str(r['rank']):<22}"
                     f"{_f(r['container_memory_limit_megabytes'], none='none'):>9}"
                     f"{_f(r['container_memory_peak_megabytes']):>9}"
                     f"{_f(r['container_memory_peak_percentage']):>8}"
                     f"{_f(r['container_memory_headroom_megabytes']):>10}"
                     f"{_f(r['container_memory_kernel_peak_megabytes']):>9}"
                     f"{_f(r['node_memory_peak_percentage']):>13}"
                     f"{_f(r['oom_kill'], '{:d}'):>11}")

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
            L.append(f"{'  rank ' + str(r['rank']):<22}"
                     f"{_f(r['container_cpu_limit_cores'], '{:g}', 'none'):>7}"
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
            L.extend(_wrap(f"rank {v['rank']}: {v['text']}", 100, "    "))
    else:
        L.append("verdicts: none (no OOM kill, no limit near, no throttling, complete recording)")
    return "\n".join(L)


def _wrap(text, width, indent):
    import textwrap
    return textwrap.wrap(text, width=width, subsequent_indent=indent, break_long_words=True,
                         break_on_hyphens=False)


# ---- the command -------------------------------------------------------------------


USAGE = "usage: scopemeter report [RUN_ID] [--json] [--plot FILE.png]"


def main(argv=None, prog="scopemeter report"):
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
    args = p.parse_args(argv)
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
    if args.json:
        print(json.dumps(rep, indent=2))
    else:
        print(format_report(rep))
    if args.plot:
        from . import _report_plot
        try:
            _report_plot.draw(rep, ranks, args.plot)
        except Exception as e:
            _say(f"cannot draw {args.plot}: {type(e).__name__}: {_first_line(e)}")
            return 1
        _say(f"picture written to {args.plot}")
    return 0


def _redact(s):
    """MLflow's error texts name the request URL, user-info included."""
    return re.sub(r"(//)[^/@\s]+@", r"\1***@", s)


def _say(line):
    sys.stderr.write(f"scopemeter: {_redact(line)}\n")
    sys.stderr.flush()
