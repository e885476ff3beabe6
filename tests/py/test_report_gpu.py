"""The report's GPU verdicts (issue 34, items 2-4; docs/report.md, "Verdicts";
docs/gpu.md).

The runs are written through MLflow's own client into the session's real
`mlflow server`, with the GPU series and tags exactly as src/collect/coll_gpu.c
writes them (docs/series.md: `gpu_i_throttled_*`, `gpu_i_ecc_errors_*`,
`gpu_i_process_memory_megabytes/rankN`, `scopemeter.rankN.gpu_events`,
`scopemeter.rankN.gpu_memory_at_peak`):

- one pod whose collector (rank 0, all workers) saw every GPU finding: GPU 0
  throttled by its power cap, Xid 79 on it, a stray context of rank 3 on it;
  GPU 1 with uncorrected ECC errors and another container's 30 GB; GPU 3 with
  a row remap pending; rank 3, the sibling whose processes rank 0's collector
  recorded, listed as such;
- a clean GPU run: the same series and tags with nothing to say, and none of
  the GPU verdicts;
- the words for Xid codes: docs/gpu.md's table and the report's one source
  (_report/verdicts.py, XID) agree.
"""
import json
import os
import re
import subprocess
import sys

import pytest

from pyfront_util import python_env
from test_report import (RUN_TAGS, assert_fits, cli_report, py_report, rank_of, report_env,
                         write_run)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPU_CODES = ("gpu_xid", "gpu_ecc", "gpu_memory_repair", "gpu_stray_context",
             "gpu_foreign_memory", "gpu_throttled")
STEPS = range(6)  # 6 windows of 10 s


def pts(vals):
    return list(zip(STEPS, vals))


def gpu_run(uri, sick, level="full"):
    """Rank 0 (node gpu-node, cgroup v2, 8 GB, all workers: local world of 4)
    with GPUs 0, 1 and 3; rank 3 its sibling.  sick: every finding, else
    the same GPUs healthy.  level "default": no ECC series, their counts in
    the gpu_events tag (docs/series.md "Levels")."""
    series = {
        "system/container_memory_usage_megabytes/rank0": pts([2000] * 6),
        "system/container_memory_usage_percentage/rank0": pts([25] * 6),
        "system/process_count/rank3": pts([1] * 6),
        "system/process_memory_megabytes/rank3": pts([900] * 6),
    }
    for i in (0, 1, 3):
        series.update({
            f"system/gpu_{i}_memory_usage_megabytes/rank0": pts([20000] * 6),
            f"system/gpu_{i}_memory_usage_percentage/rank0": pts([25] * 6),
            f"system/gpu_{i}_utilization_percentage/rank0": pts([90] * 6),
            f"system/gpu_{i}_power_usage_watts/rank0": pts([300] * 6),
            f"system/gpu_{i}_ecc_errors_corrected/rank0": pts([0] * 6),
            f"system/gpu_{i}_ecc_errors_uncorrected/rank0": pts([0] * 6),
            f"system/gpu_{i}_throttled_percentage/rank0": pts([0] * 6),
            f"system/gpu_{i}_throttled_power_percentage/rank0": pts([0] * 6),
            f"system/gpu_{i}_throttled_thermal_percentage/rank0": pts([0] * 6),
            f"system/gpu_{i}_process_memory_megabytes/rank0": pts([15000] * 6),
            f"system/gpu_{i}_process_memory_megabytes/rank3": pts([0] * 6),
        })
    tags = dict(RUN_TAGS)
    tags.update({
        "scopemeter.rank0.node": "gpu-node",
        "scopemeter.rank0.gpu": "nvml 550.54.15, 3 devices",
        "scopemeter.rank0.cgroup": "v2 /kubepods/pod/ctr mem=7.5GiB cpu=8.0",
        "scopemeter.rank0.memory_limit_bytes": "8000000000",
        "scopemeter.rank0.oom_kill": "0",      # the end tags: the recorder lived to stop
        "scopemeter.rank0.mem_peak_sampled_mb": "2010.0",
        "scopemeter.rank0.gpu_memory_at_peak":
            "gpu0 used_mb=20000.0 own_mb=15000.0; gpu1 used_mb=20000.0 own_mb=15000.0; "
            "gpu3 used_mb=20000.0 own_mb=15000.0",
    })
    if sick:
        # GPU 0: its power cap holds the clocks down in 4 of 6 windows (67 % of
        # the run), the thermal slowdown in one of them too
        series["system/gpu_0_throttled_percentage/rank0"] = pts([0, 100, 100, 100, 100, 0])
        series["system/gpu_0_throttled_power_percentage/rank0"] = pts([0, 100, 100, 100, 100, 0])
        series["system/gpu_0_throttled_thermal_percentage/rank0"] = pts([0, 0, 0, 0, 60, 0])
        # GPU 1: uncorrected ECC errors from the fourth window; another container's 30 GB
        series["system/gpu_1_memory_usage_megabytes/rank0"] = pts([46000] * 6)
        series["system/gpu_1_ecc_errors_uncorrected/rank0"] = pts([0, 0, 0, 2, 3, 3])
        series["system/gpu_1_ecc_errors_corrected/rank0"] = pts([0, 1, 4, 9, 9, 12])
        # rank 3's process holds 512 MB on GPU 0 (its series, and the tag)
        series["system/gpu_0_process_memory_megabytes/rank3"] = pts([0, 512, 512, 512, 512, 512])
        tags["scopemeter.rank0.gpu_memory_at_peak"] = (
            "gpu0 used_mb=20000.0 own_mb=15000.0 rank3_mb=512.0; "
            "gpu1 used_mb=46000.0 own_mb=15000.0 foreign_mb=30000.0; "
            "gpu3 used_mb=20000.0 own_mb=15000.0")
        tags["scopemeter.rank0.gpu_events"] = (
            "gpu0 xid=79 at=2026-12-03T12:03:11Z xids=1 codes=79; "
            "gpu3 remapped_uncorrected=2 remap_pending=1")
    if level == "default":
        series = {k: v for k, v in series.items() if "_ecc_errors_" not in k}
        if sick:
            tags["scopemeter.rank0.gpu_events"] = (
                "gpu0 xid=79 at=2026-12-03T12:03:11Z xids=1 codes=79; "
                "gpu1 ecc_corrected=12 ecc_uncorrected=3; "
                "gpu3 remapped_uncorrected=2 remap_pending=1")
    return write_run(uri, series, tags)


@pytest.mark.timeout(300)
def test_gpu_ecc_verdict_at_the_default_level(mlflow_server):
    """At the default level the ECC counts are in the gpu_events tag, not in
    series (docs/series.md "Levels"): the same verdict and counts as from
    the series; a GPU whose clause says none has no count (null)."""
    r0 = rank_of(py_report(gpu_run(mlflow_server, sick=True, level="default"), mlflow_server), 0)
    verdicts = dict(zip(r0["verdict_codes"], r0["verdicts"]))
    assert verdicts.get("gpu_ecc") == (
        "GPU 1: 3 uncorrected ECC errors and 12 corrected since recording started — memory "
        "the GPU could not correct: a hardware fault, not your code"), r0["verdicts"]
    g1 = gpu_of(r0, 1)
    assert (g1["ecc_errors_uncorrected"], g1["ecc_errors_corrected"]) == (3, 12)
    assert gpu_of(r0, 0)["ecc_errors_uncorrected"] is None


def gpu_of(rank, index):
    return next(g for g in rank["gpus"] if g["index"] == index)


@pytest.mark.timeout(300)
def test_gpu_verdicts_say_what_happened(scopemeter_bin, mlflow_server):
    run_id = gpu_run(mlflow_server, sick=True)
    rep = py_report(run_id, mlflow_server)
    r0 = rank_of(rep, 0)
    gpu_verdicts = {c: t for c, t in zip(r0["verdict_codes"], r0["verdicts"])
                    if c in GPU_CODES}
    assert list(gpu_verdicts) == list(GPU_CODES), r0["verdicts"]

    # Xid 79 in words, with the time of the tag
    assert gpu_verdicts["gpu_xid"] == (
        "GPU 0: Xid 79 at 12:03:11 UTC — the GPU fell off the bus: it no longer answers over "
        "PCIe (usually: hardware or driver, not your code)")
    # ECC: memory the GPU could not correct
    assert gpu_verdicts["gpu_ecc"] == (
        "GPU 1: 3 uncorrected ECC errors and 12 corrected since recording started — memory "
        "the GPU could not correct: a hardware fault, not your code")
    # the remap waiting for a reset, from the same tag
    assert gpu_verdicts["gpu_memory_repair"] == (
        "GPU 3: a row remap waits for the next GPU reset (reset the GPU to repair its memory); "
        "rows remapped: 2 for uncorrectable errors (the board's lifetime)")
    # the stray context: rank 3's process on rank 0's GPU
    assert gpu_verdicts["gpu_stray_context"] == (
        "GPU 0 (rank 0's): rank 3's process holds 512 MB — a CUDA context on the wrong device "
        "(set the device before the first CUDA call)")
    assert gpu_verdicts["gpu_foreign_memory"] == "another container holds 30.0 GB of GPU 1"
    # throttled 67 % of the run: the power cap in all of it, thermal 10 %
    assert gpu_verdicts["gpu_throttled"] == (
        "GPU 0: clocks held down 67 % of the run (power cap 67 %, thermal 10 %): a slowed GPU "
        "holds the whole job back")

    # the JSON's new fields (docs/report.md, "Per rank")
    g0, g1, g3 = gpu_of(r0, 0), gpu_of(r0, 1), gpu_of(r0, 3)
    assert g0["throttled_percentage"] == 66.7
    assert g0["throttled_power_percentage"] == 66.7
    assert g0["throttled_thermal_percentage"] == 10.0
    assert g0["events"] == {
        "xid": 79, "xid_at": "2026-12-03T12:03:11Z", "xids": 1, "xid_codes": [79],
        "remapped_corrected": 0, "remapped_uncorrected": 0, "remap_pending": False,
        "remap_failure": False, "retired_pages_sbe": 0, "retired_pages_dbe": 0}
    assert g0["memory_at_peak_megabytes"] == {
        "used": 20000.0, "own": 15000.0, "ranks": {"3": 512.0}, "other_ranks": 0.0,
        "unranked": 0.0, "foreign": 0.0, "unattributed": 4488.0}
    assert g0["process_memory_peak_megabytes"] == 15000.0
    assert g1["ecc_errors_uncorrected"] == 3 and g1["ecc_errors_corrected"] == 12
    assert g1["memory_at_peak_megabytes"]["foreign"] == 30000.0
    assert g1["memory_at_peak_megabytes"]["unattributed"] == 1000.0
    assert g3["events"]["remap_pending"] is True and g3["events"]["remapped_uncorrected"] == 2

    # rank 3: the sibling whose processes rank 0's collector recorded, GPU
    # series included; its peak on GPU 0 is its own series'
    r3 = rank_of(rep, 3)
    assert r3["process_tree_only"] is True and r3["recorded_by_rank"] == 0
    assert r3["node"] == "gpu-node" and r3["verdict_codes"] == []
    assert gpu_of(r3, 0)["process_memory_peak_megabytes"] == 512.0

    # the run's list, and the terminal's table (within 100 columns)
    assert [v["code"] for v in rep["verdicts"] if v["code"] in GPU_CODES] == list(GPU_CODES)
    p = cli_report(scopemeter_bin, run_id, env=report_env(MLFLOW_TRACKING_URI=mlflow_server))
    assert p.returncode == 0, p.stderr
    assert_fits(p.stdout)
    assert "gpu at its memory peak" in p.stdout, p.stdout
    row = next(line for line in p.stdout.splitlines()
               if line.startswith("  rank 0") and line.split()[2:4] == ["0", "20000.0"])
    assert row.split()[2:] == ["0", "20000.0", "15000.0", "512.0", "0.0",
                               "0.0", "4488.0", "67", "0", "79"], row
    assert "rank 0: GPU 0: Xid 79 at 12:03:11 UTC" in p.stdout, p.stdout
    # rank 3's GPU has only its processes' memory: no row of dashes in the gpu table
    assert not re.search(r"^  rank 3 +0 +- +- +- +-$", p.stdout, re.M), p.stdout


@pytest.mark.timeout(300)
def test_a_clean_gpu_run_has_no_gpu_verdict(mlflow_server):
    run_id = gpu_run(mlflow_server, sick=False)
    rep = py_report(run_id, mlflow_server)
    r0 = rank_of(rep, 0)
    assert not set(r0["verdict_codes"]) & set(GPU_CODES), r0["verdicts"]
    assert not [v for v in rep["verdicts"] if v["code"] in GPU_CODES]
    g0 = gpu_of(r0, 0)
    assert g0["throttled_percentage"] == 0.0 and g0["ecc_errors_uncorrected"] == 0
    assert g0["events"] is None
    assert g0["memory_at_peak_megabytes"]["ranks"] == {}


@pytest.mark.timeout(300)
def test_several_xids_a_failed_remap_and_only_foreign_holders(mlflow_server):
    """The other branches of the texts: several Xid codes (the last one
    first, then the others), a code outside the table, a failed remap and
    retired pages, and a GPU on which nothing counted as this container's
    (where the driver gives host pids, every process reads foreign)."""
    series = {f"system/gpu_0_{name}/rank0": pts([v] * 6) for name, v in (
        ("memory_usage_megabytes", 9000), ("utilization_percentage", 50),
        ("throttled_percentage", 5), ("throttled_power_percentage", 5),
        ("throttled_thermal_percentage", 0))}
    tags = dict(RUN_TAGS)
    tags.update({
        "scopemeter.rank0.node": "n1", "scopemeter.rank0.cgroup": "none: no limit",
        "scopemeter.rank0.gpu_memory_at_peak": "gpu0 used_mb=9000.0 foreign_mb=8000.0",
        "scopemeter.rank0.gpu_events": "gpu0 xid=13 at=2026-12-03T09:15:02Z xids=4 "
                                       "codes=79,13,62 remap_failure=1 retired_pages_dbe=2",
    })
    rep = py_report(write_run(mlflow_server, series, tags), mlflow_server)
    r0 = rank_of(rep, 0)
    said = dict(zip(r0["verdict_codes"], r0["verdicts"]))
    assert said["gpu_xid"] == (
        "GPU 0: Xid 13 at 09:15:02 UTC — graphics engine exception: a kernel faulted (an "
        "out-of-bounds access, an illegal instruction) (usually: your code); 4 Xid errors since "
        "recording started, also Xid 79 (the GPU fell off the bus: it no longer answers over "
        "PCIe (usually: hardware or driver, not your code)), Xid 62 (not one of the common "
        "codes: NVIDIA's Xid catalogue says what it means)")
    assert said["gpu_memory_repair"] == (
        "GPU 0: a row remap failed: the board is out of spare rows (hardware: the GPU needs "
        "replacing); pages retired: 2 for double-bit errors (the board's lifetime)")
    assert said["gpu_foreign_memory"].startswith(
        "another container holds 8.0 GB of GPU 0 (nothing on it was counted as this "
        "container's: where the driver gives host pids"), said
    # 5 % of the run throttled: under the 10 % of the verdict; no owner, no stray context
    assert "gpu_throttled" not in said and "gpu_stray_context" not in said
    assert gpu_of(r0, 0)["events"]["xid_codes"] == [79, 13, 62]


def test_xid_words_have_one_source():
    """docs/gpu.md's table of common Xid codes says what the report says."""
    code = "import json; from scopemeter._report.verdicts import XID; print(json.dumps(XID))"
    p = subprocess.run([sys.executable, "-c", code], env=python_env(), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    table = {int(k): tuple(v) for k, v in json.loads(p.stdout).items()}
    doc = open(os.path.join(ROOT, "docs", "gpu.md"), encoding="utf-8").read()
    section = doc.split("### Common Xid codes", 1)[1].split("\n## ", 1)[0]
    rows = {int(m.group(1)): (m.group(2).strip(), m.group(3).strip())
            for m in re.finditer(r"^\| (\d+) \|([^|]+)\|([^|]+)\|$", section, re.M)}
    assert len(rows) >= 12, section
    assert rows == table


@pytest.mark.timeout(300)
def test_gpu_energy_per_gpu_and_the_job(scopemeter_bin, mlflow_server):
    """The gpu_energy end tag (docs/series.md) of two ranks: each GPU's kWh
    in ranks[].gpus[].energy_kwh, the job's sum in summary.gpu_energy_kwh
    and in the text's job lines; a run without the tag says null."""
    series = {}
    for r in (0, 1):
        for i in (0, 1):
            series[f"system/gpu_{i}_utilization_percentage/rank{r}"] = pts([90] * 6)
    tags = dict(RUN_TAGS)
    tags.update({
        "scopemeter.rank0.node": "n0", "scopemeter.rank1.node": "n1",
        "scopemeter.rank0.gpu_energy": "gpu0 kwh=0.250000; gpu1 kwh=0.125000; total_kwh=0.375000",
        "scopemeter.rank1.gpu_energy": "gpu0 kwh=1.000000; gpu1 kwh=0.000001; total_kwh=1.000001",
    })
    run_id = write_run(mlflow_server, series, tags)
    rep = py_report(run_id, mlflow_server)
    got = {(r["rank"], g["index"]): g["energy_kwh"] for r in rep["ranks"] for g in r["gpus"]}
    assert got == {(0, 0): 0.25, (0, 1): 0.125, (1, 0): 1.0, (1, 1): 0.000001}, got
    assert rep["summary"]["gpu_energy_kwh"] == 1.375001, rep["summary"]
    p = cli_report(scopemeter_bin, run_id, env=report_env(MLFLOW_TRACKING_URI=mlflow_server))
    assert p.returncode == 0, p.stderr
    assert "GPU energy: 1.375001 kWh (every rank's GPUs since recording started)" in p.stdout, \
        p.stdout
    clean = gpu_run(mlflow_server, sick=False)
    rep = py_report(clean, mlflow_server)
    assert rep["summary"]["gpu_energy_kwh"] is None
    assert all(g["energy_kwh"] is None for r in rep["ranks"] for g in r["gpus"])
