"""`scopemeter plan`: the preflight (docs/design.md §8, docs/plan.md) for a
table of jobs, docs/plan.md's two reference jobs among them (8 GPU workers
on 4 nodes -> 272 series and charts, 52 sections at the default level;
16 workers on 4 nodes -> 544 series), the process trees counted per recorded rank (docs/design.md §9), through both --json and the text output; bad input exits 2
with one line.  The last test checks the bytes-per-row assumption against
MLflow's own sqlite store.
"""
import json
import math
import os
import re
import subprocess
import time

import pytest

from conftest import clean_env


def plan(scopemeter_bin, *args, check=True):
    p = subprocess.run([scopemeter_bin, "plan", *args], env=clean_env(),
                       capture_output=True, text=True, timeout=30)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def plan_json(scopemeter_bin, *args):
    return json.loads(plan(scopemeter_bin, *args, "--json").stdout)


FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures")


def per_collector(gpus, limits):
    """Series one collector logs: from `plan` itself (the collectors' own
    counts); test_plan_counts_what_probe_emits ties these to what probe
    really emits, so no copy of the formula lives here."""
    import scopemeter
    p = scopemeter.plan(workers=1, gpus_per_worker=gpus, container_limits=limits)
    return p["series_per_collector"], p["node_series_per_collector"]


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(FIXTURES) if n.startswith("cg-")))
def test_plan_counts_what_probe_emits(probe_json, name):
    """On every fixture machine, the series probe lists (what the monitor
    would log) are exactly what `plan` counts for one collector without
    GPUs, container_* included exactly when the machine has a limit."""
    out = probe_json(sysroot=os.path.join(FIXTURES, name), check=False)
    if out is None:
        pytest.skip(f"{name}: probe cannot run on it (a fixture for a failure)")
    # the process tree is per recorded rank, not per collector: counted apart
    procs = [s for s in out["series"] if s["scope"] == "process"]
    scopes = [s["scope"] for s in out["series"] if s["scope"] != "process"]
    cg = out["cgroup"]
    both = bool(cg["memory_limit_bytes"]) and bool(cg["cpu_limit_cores"])
    per, node_tier = per_collector(0, both)
    bare, _ = per_collector(0, False)
    # plan's "container limits" are a memory and a CPU limit (docs/plan.md):
    # all three container_* series; with one of them, fewer (cpu-only: 1); a
    # fixture whose file is bad drops that part's series (docs/design.md §6)
    # and a CPU limit whose usage no counter measures (v1 cpu and cpuacct
    # apart, docs/cgroup.md §2) drops the CPU's series
    part_dropped = any("container_memory_* dropped" in n or "container_cpu_* dropped" in n or
                       "CPU limit but no CPU usage" in n for n in out["notes"])
    # plan counts the upper bound (docs/plan.md): the parts of the working set
    # and the two v2 PSI series; where a kernel lacks them, one line says so
    absent = 0
    for n in out["notes"]:
        absent += 4 * ("memory.stat has no " in n and "_megabytes absent" in n)
        absent += 2 * ("container_*_pressure_percentage absent" in n)
        absent += ("container_memory_pressure_percentage absent" in n)
        absent += ("container_cpu_pressure_percentage absent" in n)
    if (both and not part_dropped) or "container" not in scopes:
        assert len(scopes) == per - absent, (name, scopes)
    else:
        assert bare < len(scopes) < per_collector(0, True)[0], (name, scopes)
    assert sum(sc not in ("container",) for sc in scopes) == bare
    assert sum(sc in ("node", "rootfs") for sc in scopes) == node_tier
    got = plan_json(os.environ.get("SCOPEMETER_BIN"), "--workers", "1",
                    *([] if both else ["--no-container-limits"]))
    assert got["series_per_collector"] == per
    # a fake /proc with a proc/self link has the tree; the older fixtures' own
    # proc/self directory has none (absent, one line)
    assert len(procs) in (0, got["process_series"]), procs
    assert got["process_series"] == 3 and got["ranks_recorded"] == 1


def expected(workers, per_pod=1, nodes=None, gpus=0, all_workers=False, interval=10.0,
             samples=1, limits=True):
    """The rules of docs/design.md §4 and §5 written out independently of plan.c
    (the series per collector come from per_collector, tied to probe)."""
    pods = math.ceil(workers / per_pod)
    nodes = nodes or pods
    n = pods if all_workers else 1
    period = interval * samples
    if n > 4 and period < 10 * math.ceil(n / 4):
        period = 10 * math.ceil(n / 4)
        interval = period / samples
    # the pod's local rank 0 logs every GPU of the pod: per_pod x gpus
    per, tier = per_collector(gpus * per_pod, limits)
    # with all_workers the pod's collector also records, per GPU, the memory
    # each other local rank holds on it (docs/gpu.md); in the own's sections
    sib = gpus * per_pod * (per_pod - 1) if all_workers else 0
    # docs/design.md §9: 3 process_* series per recorded rank (every worker
    # with all_workers, by its pod's collector), one UI section per key
    ranks = workers if all_workers else 1
    series = n * (per + sib) + 3 * ranks
    sections = tier * min(nodes, n) + (per - tier) + 3
    rows_h = series * 3600 / period
    return dict(collectors=n, interval_s=interval, samples=samples, period_s=period,
                series_per_collector=per + sib, series=series, charts=series, sections=sections,
                rows_per_hour=rows_h, bytes_per_day=rows_h * 24 * 433, ranks_recorded=ranks,
                process_series=3 * ranks)


# (args, expected(**kw), a few literal numbers where docs/plan.md gives them)
CASES = [
    # the reference run of docs/plan.md: 8 GPU workers, 2 per node on 4 nodes, all workers
    (["--workers", "8", "--nodes", "4", "--gpus-per-worker", "1", "--all-workers"],
     dict(workers=8, nodes=4, gpus=1, all_workers=True),
     dict(series=272, charts=272, sections=52, interval_s=20.0, collectors=8)),
    # 16 workers on 4 nodes (docs/plan.md): 544 series (and charts); 12 a GPU at
    # the default level (docs/series.md "Levels": 16 before the clocks and ECC
    # counts went to full)
    (["--workers", "16", "--nodes", "4", "--gpus-per-worker", "1", "--all-workers"],
     dict(workers=16, nodes=4, gpus=1, all_workers=True),
     dict(series=544, charts=544, sections=52, interval_s=40.0, collectors=16)),
    # same job, default: rank 0 only
    (["--workers", "8", "--nodes", "4", "--gpus-per-worker", "1"],
     dict(workers=8, nodes=4, gpus=1),
     dict(series=34, sections=34, collectors=1, interval_s=10.0, rows_per_hour=12240)),
    # CPU workers, 2 ranks in one pod: the pod's local rank 0 collects 19 pod
    # series (not 38), and both ranks' process trees (6)
    (["--workers", "2", "--workers-per-pod", "2", "--all-workers"],
     dict(workers=2, per_pod=2, all_workers=True),
     dict(series=25, collectors=1, sections=22, ranks_recorded=2, process_series=6)),
    # CPU workers, 2 pods on one node: 38 + 6 series; node sections (6) on one node
    (["--workers", "2", "--nodes", "1", "--all-workers"],
     dict(workers=2, nodes=1, all_workers=True),
     dict(series=44, sections=22)),
    # uneven spread: 8 pods on 3 nodes (3/2/3): 6 x 3 + 25 + 3
    (["--workers", "8", "--nodes", "3", "--gpus-per-worker", "1", "--all-workers"],
     dict(workers=8, nodes=3, gpus=1, all_workers=True),
     dict(sections=46)),
    # nodes unknown: one per pod assumed (the most sections)
    (["--workers", "8", "--gpus-per-worker", "1", "--all-workers"],
     dict(workers=8, gpus=1, all_workers=True),
     dict(sections=6 * 8 + 25 + 3)),
    # 32 pods: period >= 80 s, samples kept, interval raised
    (["--workers", "32", "--all-workers", "--samples", "2", "--interval", "5"],
     dict(workers=32, all_workers=True, samples=2, interval=5.0),
     dict(interval_s=40.0, period_s=80.0, samples=2)),
    # a longer user period is kept
    (["--workers", "8", "--all-workers", "--interval", "30"],
     dict(workers=8, all_workers=True, interval=30.0),
     dict(interval_s=30.0)),
    # 3 samples per point under the cap: the interval becomes 20 s / 3
    (["--workers", "8", "--all-workers", "--samples", "3", "--interval", "2"],
     dict(workers=8, all_workers=True, samples=3, interval=2.0),
     dict(period_s=20.0, interval_s=20.0 / 3)),
    # 3 samples at the default interval: 30 s is already above the cap's 20 s
    (["--workers", "8", "--all-workers", "--samples", "3"],
     dict(workers=8, all_workers=True, samples=3),
     dict(period_s=30.0, interval_s=10.0)),
    # 4 collectors: no cap
    (["--workers", "16", "--workers-per-pod", "4", "--all-workers", "--interval", "1"],
     dict(workers=16, per_pod=4, all_workers=True, interval=1.0),
     dict(collectors=4, interval_s=1.0)),
    # no container limits, 8 workers of 1 GPU in one pod: its collector logs 8 GPUs,
    # 12 series each and the 7 other ranks' process memory on each
    (["--workers", "8", "--workers-per-pod", "8", "--gpus-per-worker", "1",
      "--no-container-limits", "--all-workers"],
     dict(workers=8, per_pod=8, gpus=1, limits=False, all_workers=True),
     dict(series_per_collector=8 + 8 * 12 + 8 * 7, series=160 + 24, gpus_per_collector=8)),
]


@pytest.mark.parametrize("args,kw,literal", CASES)
def test_plan_json(scopemeter_bin, args, kw, literal):
    got = plan_json(scopemeter_bin, *args)
    want = expected(**kw)
    for k, v in want.items():
        assert got[k] == pytest.approx(v), (k, got)
    for k, v in literal.items():
        assert got[k] == pytest.approx(v), (k, got)
    assert got["bytes_per_row"] == 433
    assert got["charts"] == got["series"]
    assert got["capped"] == (got["interval_s"] > kw.get("interval", 10.0))


def test_plan_text_reference_example(scopemeter_bin):
    out = plan(scopemeter_bin, "--workers", "8", "--nodes", "4", "--gpus-per-worker", "1",
               "--all-workers").stdout
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "8 (all workers" in lines["collectors"]
    assert "20 s x 1 sample" in lines["interval"] and "write-load cap" in lines["interval"]
    assert "31 per collector (6 with the node tier" in lines["series"]
    assert "+ 24 process tree series (3 per rank, 8 ranks" in out
    assert "272 in total" in out
    assert lines["charts"].split()[1] == "272"
    assert lines["sections"].split()[1] == "52"
    assert "6 x 4 nodes = 24; other series: 28" in lines["sections"]
    assert lines["rows/hour"].split()[1] == "48960"
    # 48960 rows/h x 24 x 433 bytes = 508.8 MB
    assert "508.8 MB" in lines["bytes/day"] and "433 bytes per row" in lines["bytes/day"]


def test_plan_text_one_worker_shows_all_workers_cost(scopemeter_bin):
    out = plan(scopemeter_bin, "--workers", "16", "--nodes", "4", "--gpus-per-worker", "1").stdout
    assert "rank 0 only" in out
    assert "with --all-workers: 16 collectors, 544 series and charts, 52 sections" in out


def test_plan_assumed_nodes_said(scopemeter_bin):
    out = plan(scopemeter_bin, "--workers", "4", "--all-workers").stdout
    assert "assumed one per pod" in out
    got = plan_json(scopemeter_bin, "--workers", "4", "--all-workers")
    assert got["nodes_assumed"] is True and got["nodes"] == 4


@pytest.mark.parametrize("args,msg", [
    ([], "--workers is required"),
    (["--workers", "0"], "--workers"),
    (["--workers", "x"], "--workers"),
    (["--workers", "4", "--nodes", "5"], "every node hosts at least one pod"),
    (["--workers", "4", "--workers-per-pod", "2", "--nodes", "3"], "the pods (2)"),
    (["--workers", "2", "--workers-per-pod", "3"], "workers per pod"),
    (["--workers", "4", "--interval", "0"], "--interval"),
    (["--workers", "4", "--interval", "0.001"], "interval"),
    (["--workers", "4", "--gpus-per-worker", "65"], "--gpus-per-worker must be a whole number between 0 and 64"),
    (["--workers", "4", "--bogus"], "unknown option"),
    # one parser, plain decimal, bounds and exclusive pairs (cli/opts.c)
    (["--workers", "0x10"], "--workers must be a whole number between 1 and"),
    (["--workers", "4", "--interval", "1e9"], "--interval must be a number of seconds between"),
    (["--workers", "4", "--interval", "0x10"], "got '0x10'"),
    (["--workers", "4", "--gpus-per-worker", "-1"], "between 0 and 64"),
    (["--workers", "8", "--all-workers", "--one-worker"], "exclude each other"),
    (["--workers"], "--workers needs a value"),
    (["--workers", "4", "--samples", "0"], "--samples must be a whole number between 1 and"),
])
def test_plan_bad_input(scopemeter_bin, args, msg):
    p = plan(scopemeter_bin, *args, check=False)
    assert p.returncode == 2
    assert msg in p.stderr
    assert p.stdout == ""


def test_plan_help(scopemeter_bin):
    p = plan(scopemeter_bin, "--help")
    assert "--workers-per-pod" in p.stdout and "docs/plan.md" in p.stdout


def test_bytes_per_row_against_mlflow_sqlite(tmp_path):
    """The plan assumes 433 bytes per row (a measured backend, docs/plan.md).  MLflow's own
    sqlite store, measured here with keys of scopemeter's length, must be of
    the same order, or the assumption needs a new look."""
    mlflow = pytest.importorskip("mlflow")
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    db = tmp_path / "m.db"
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    run = client.create_run(client.create_experiment("plan-bytes"))
    keys = [f"system/node_memory_usage_percentage/gpu-node-{i % 4 + 1}/rank{i}" for i in range(8)]
    keys += [f"system/gpu_0_utilization_percentage/rank{i}" for i in range(8)]

    def log(steps, start):
        for s0 in range(start, start + steps, 50):
            batch = [Metric(k, 12.3 + s, 1700000000000 + s * 10000, s)
                     for s in range(s0, s0 + 50) for k in keys]
            client.log_batch(run.info.run_id, metrics=batch)

    log(50, 0)  # tables and indexes exist, the file has its first pages
    before = os.path.getsize(db)
    log(500, 50)
    rows = 500 * len(keys)
    per_row = (os.path.getsize(db) - before) / rows
    print(f"MLflow {mlflow.__version__} sqlite: {per_row:.0f} bytes per metric row")
    assert 100 < per_row < 1500, per_row


@pytest.mark.parametrize("kw,msg", [
    (dict(interval=0), "interval must be between 0.01 and 86400 s"),
    (dict(samples=0), "samples must be between 1 and 100000"),
    (dict(nodes=0), "nodes must be between 1 and the pods"),
    (dict(nodes=-1), "nodes must be between 1 and the pods"),
    (dict(workers=8.5), "workers must be a whole number"),
    (dict(workers=10**12), "workers must be between 1 and"),
    (dict(workers=0), "workers must be between 1 and"),
    (dict(gpus_per_worker=65), "GPUs per worker must be between 0 and 64"),
])
def test_python_plan_validates_as_the_cli(kw, msg):
    """scopemeter.plan() and `scopemeter plan` share one validation
    (sm_plan_estimate): no silent default, no truncation, ValueError only."""
    import scopemeter
    with pytest.raises(ValueError) as e:
        scopemeter.plan(**kw)
    assert msg in str(e.value)


def test_python_plan_matches_cli(scopemeter_bin):
    import scopemeter
    got = scopemeter.plan(workers=8, nodes=4, gpus_per_worker=1, all_workers=True)
    cli = plan_json(scopemeter_bin, "--workers", "8", "--nodes", "4", "--gpus-per-worker", "1",
                    "--all-workers")
    for k in ("series", "sections", "interval_s", "series_per_collector", "collectors",
              "ranks_recorded", "process_series"):
        assert got[k] == cli[k], k



def ui_charts_warn():
    """SM_PLAN_UI_CHARTS_WARN from the public header: the one place the threshold lives."""
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "include",
                           "scopemeter.h")) as f:
        return int(re.search(r"#define SM_PLAN_UI_CHARTS_WARN (\d+)", f.read()).group(1))


def test_plan_warns_above_the_ui_threshold(scopemeter_bin):
    """The System metrics tab (docs/plan.md): one warning line on stderr when the run
    holds more charts than bench/ui_render.py saw drawn to the end, none at or below."""
    limit = ui_charts_warn()
    seen = set()
    for workers in (1, 2, 4, 6, 7, 8, 64):
        args = ["--workers", str(workers), "--nodes", str(max(1, workers // 2)),
                "--gpus-per-worker", "1", "--all-workers"]
        charts = plan_json(scopemeter_bin, *args)["charts"]
        for extra in ([], ["--json"]):
            err = plan(scopemeter_bin, *args, *extra).stderr
            warned = [ln for ln in err.splitlines() if "System metrics tab" in ln]
            assert len(warned) == (charts > limit), (workers, charts, err)
            if warned:
                assert warned[0].startswith(f"scopemeter plan: warning: {charts} charts")
                assert f"more than {limit}" in warned[0]
        seen.add(charts > limit)
    assert seen == {True, False}   # both sides of the threshold were asked


def test_python_plan_warns_as_the_cli_does(scopemeter_bin, caplog):
    """scopemeter.plan(): the same threshold decided in C (ui_charts_over, as the CLI's
    JSON), one warning line through the "scopemeter" logger above it, none below."""
    import logging
    import scopemeter
    limit = ui_charts_warn()
    seen = set()
    for workers in (1, 8, 64):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="scopemeter"):
            got = scopemeter.plan(workers=workers, nodes=max(1, workers // 2),
                                  gpus_per_worker=1, all_workers=True)
        cli = plan_json(scopemeter_bin, "--workers", str(workers), "--nodes",
                        str(max(1, workers // 2)), "--gpus-per-worker", "1", "--all-workers")
        over = got["charts"] > limit
        assert got["ui_charts_over"] is over and cli["ui_charts_over"] is over, (got, cli)
        assert got["ui_charts_warn"] == cli["ui_charts_warn"] == limit
        warned = [r.getMessage() for r in caplog.records if "System metrics tab" in r.getMessage()]
        assert len(warned) == over, warned
        if warned:
            assert warned[0].startswith(f"plan: warning: {got['charts']} charts")
        seen.add(over)
    assert seen == {True, False}


def test_plan_counts_the_companions_memory_and_it_holds(scopemeter_bin):
    """Issue 32: the recorder's memory in each collecting pod is counted by plan, the
    companion's included, and the companion stays within what plan counts for it: its
    own VmRSS while it waits for its parent (what it does for the whole job), over http
    and https (the TLS module loads only when it writes an end)."""
    got = plan_json(scopemeter_bin, "--workers", "8")
    out = plan(scopemeter_bin, "--workers", "8").stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("memory"))
    front = got["pod_memory_front_mb"] + got["pod_memory_companion_mb"]
    assert f"the Python front {front:.1f} MB" in line, line
    assert f"+ {got['pod_memory_companion_mb']:.1f} its companion" in line, line
    assert f"scopemeter run {got['pod_memory_cli_mb']:.1f} MB" in line, line
    parent = subprocess.Popen(["sleep", "60"])
    try:
        for uri in ("http://127.0.0.1:9", "https://127.0.0.1:9"):
            comp = subprocess.Popen([scopemeter_bin, "companion", "--pid", str(parent.pid),
                                     "--run-id", "0123456789abcdef0123456789abcdef",
                                     "--tracking-uri", uri, "--rank", "0"],
                                    stdin=subprocess.DEVNULL, env=clean_env())
            try:
                rss = 0
                for _ in range(40):  # its start: the cgroup opened, then the wait
                    time.sleep(0.05)
                    with open(f"/proc/{comp.pid}/status") as f:
                        rss = int(next(ln for ln in f if ln.startswith("VmRSS:")).split()[1])
                print(f"companion over {uri.split(':')[0]}: VmRSS {rss} kB")
                assert comp.poll() is None, "the companion left while its parent lives"
                assert rss * 1024 <= got["pod_memory_companion_mb"] * 1e6, (uri, rss)
            finally:
                comp.kill()
                comp.wait()
    finally:
        parent.kill()
        parent.wait()


def test_plan_counts_each_detail_level(scopemeter_bin):
    """docs/series.md "Levels": the default level counts 12 series per
    NVIDIA GPU; full adds ten per GPU (GPM 4, NVLink 2, the clocks 2, the
    ECC counts 2), said in the text and in the JSON (detail, series_full) at
    either level.  8 ranks of 1 GPU in one pod with all workers: 8 GPUs x 10
    = 80 more."""
    d = plan_json(scopemeter_bin, "--workers", "8", "--workers-per-pod", "8",
                  "--gpus-per-worker", "1", "--all-workers")
    f = plan_json(scopemeter_bin, "--workers", "8", "--workers-per-pod", "8",
                  "--gpus-per-worker", "1", "--all-workers", "--detail", "full")
    z = plan_json(scopemeter_bin, "--workers", "8", "--workers-per-pod", "8",
                  "--all-workers", "--detail", "full")
    assert (d["detail"], f["detail"]) == ("default", "full")
    assert f["gpu_series_per_collector"] - d["gpu_series_per_collector"] == 8 * 10, (d, f)
    assert d["gpu_series_per_collector"] == 8 * 12 + 8 * 7, d  # + the 7 siblings' memory
    assert d["series_full"] == f["series"] == f["series_full"] == d["series"] + 80, (d, f)
    assert f["charts"] == f["series"]
    assert f["container_series_per_collector"] == d["container_series_per_collector"]
    assert z["series"] == z["series_full"]  # no GPU, nothing to add
    text = plan(scopemeter_bin, "--workers", "8", "--workers-per-pod", "8",
                "--gpus-per-worker", "1", "--all-workers").stdout
    assert (f"detail       default; --detail full adds 80 (GPM, NVLink, clocks and ECC per "
            f"GPU): {d['series'] + 80} series and charts") in text, text
    bad = plan(scopemeter_bin, "--workers", "8", "--detail", "most", check=False)
    assert bad.returncode == 2 and \
        "scopemeter plan: --detail must be default or full, got 'most'" in bad.stderr
