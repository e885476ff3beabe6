"""torchrun, one pod (docs/python.md): `torchrun --nproc_per_node=2` inside a real
memory + CPU limited cgroup, each rank training a DDP model (gloo, CPU) and
calling scopemeter.enable_system_metrics() right after opening the run.

- all_workers=True: the pod's local rank 0 collects for it, the second local
  rank collects nothing -> exactly the 11 non-GPU series of rank 0 (22 -> 11);
- default: rank 0 only -> the same 11 keys, rank 0's, and no rank 1 tag.
Names are checked key by key against docs/design.md §2 (pyfront_util).
"""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from pyfront_util import (CONTAINER, Pod, assert_limits, cgroups_usable, expected_keys, new_run,
                          process_keys, python_env, read_run, system_keys, worker_cmd)

# torchrun's own bound (300 s) and the session's mlflow server
pytestmark = [pytest.mark.launchers, pytest.mark.timeout(480)]

# Looked up, never imported into the suite's process: torch's pages in this
# process would be shared with the trees test_proctree_cow measures.
if importlib.util.find_spec("torch") is None:
    pytest.skip("torch not installed (pip install torch==2.13.0)", allow_module_level=True)


def torchrun_cmd(*worker_args):
    runner = shutil.which("torchrun")
    head = [runner] if runner else [sys.executable, "-m", "torch.distributed.run"]
    return head + ["--standalone", "--nproc_per_node=2"] + worker_cmd(*worker_args)[1:]


@pytest.fixture
def pod():
    why = cgroups_usable()
    if why:
        pytest.skip(why)
    p = Pod("torchrun", mem_bytes=4 << 30, cpu_cores=2)
    yield p
    p.cleanup()


@pytest.mark.parametrize("all_workers", [True, False], ids=["all_workers", "default"])
def test_torchrun_one_pod_records_rank0_only(mlflow_server, pod, all_workers):
    run_id = new_run(mlflow_server)
    env = python_env(MLFLOW_TRACKING_URI=mlflow_server, MLFLOW_RUN_ID=run_id,
                     OMP_NUM_THREADS=1)
    args = ["--torch-ddp", "--interval", "0.5", "--seconds", "2"]
    if all_workers:
        args.append("--all-workers")
    p = subprocess.run(pod.wrap(torchrun_cmd(*args)), env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-5000:]

    metrics, tags = read_run(mlflow_server, run_id)
    keys = system_keys(metrics)
    # with all_workers the pod's collector also logs rank 1's process tree
    # (docs/design.md §9): rank 1's only keys
    want = expected_keys(0) | (process_keys(1) if all_workers else set())
    assert keys == want, sorted(keys ^ want)
    assert len(keys) == len(expected_keys(0)) + (3 if all_workers else 0)
    assert {f"system/{k}/rank0" for k in CONTAINER} <= keys
    assert {k for k in metrics if k.endswith("/rank1")} == (process_keys(1) if all_workers
                                                            else set())
    if all_workers:  # rank 1 and nothing below it: DDP's gloo spawns no process
        assert max(v for _, v, _ in metrics["system/process_count/rank1"]) >= 1
    assert "scopemeter.rank0.node" in tags and "scopemeter.rank1.node" not in tags
    assert tags["scopemeter.collectors"] == "1"
    assert_limits(tags["scopemeter.rank0.cgroup"], 4 << 30, 2)
    # the non-collecting rank said why, in one line
    why = "pod's local rank 0 collects" if all_workers else "only rank 0 does"
    assert sum(why in ln for ln in p.stderr.splitlines()) == 1, p.stderr[-3000:]
    for key, hist in metrics.items():
        if key.startswith("system/"):
            steps = [s for s, _, _ in hist]
            # a sibling's tree starts when the pod's collector finds it, and
            # its CPU one sample later (a rate needs two): contiguous from there
            first = steps[0] if key.endswith("/rank1") and steps else 0
            assert steps == list(range(first, first + len(steps))) and len(steps) >= 2, \
                (key, steps)


def test_torchrun_worker_oom_under_all_workers_the_companion_records_it(mlflow_server):
    """Issue 32 (docs/design.md §7): the pod's collector is local rank 0's
    own process (all_workers); the kernel OOM-kills exactly that process in a
    real memory-limited cgroup, torchrun stops the other worker and fails.
    Rank 0's companion, in the same cgroup, delivers the windows up to the
    kill and writes its end: `oom_kill` from the cgroup's counter, the
    kernel's peak at the limit; rank 0 resumed the run as its active run
    (mlflow.start_run with MLFLOW_RUN_ID, whose atexit would have ended it),
    so its companion ends it KILLED with the OOM reason (design §7, "The end").
    Nothing of the job is left: the companion is gone with it.  Fails with
    SCOPEMETER_COMPANION=0 (no companion, no end tags)."""
    from test_companion import alive, wait_gone
    why = cgroups_usable()
    if why:
        pytest.skip(why)
    limit = 1536 << 20          # torchrun's agent and two workers with torch imported: ~0.8 GB
    pod = Pod("torchrun-oom", mem_bytes=limit, cpu_cores=2)
    try:
        if pod.version == 1:
            try:
                with open(os.path.join(pod.dirs[0], "memory.swappiness"), "w") as f:
                    f.write("0")
            except OSError:
                pass
        run_id = new_run(mlflow_server)
        env = python_env(MLFLOW_TRACKING_URI=mlflow_server, MLFLOW_RUN_ID=run_id,
                         OMP_NUM_THREADS=1)
        p = subprocess.Popen(pod.wrap(torchrun_cmd("--all-workers", "--interval", "0.5",
                                                   "--seconds", "3", "--oom-rank", "0")),
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = p.communicate(timeout=300)
        assert p.returncode != 0, out[-2000:] + err[-3000:]
        reports = {}
        for ln in out.splitlines():
            if "REPORT " in ln:
                r = json.loads(ln.split("REPORT ", 1)[1])
                reports[r["rank"]] = r
        assert set(reports) == {0, 1}, out[-3000:]
        comp = reports[0]["companion"]
        assert comp, "rank 0, the pod's collector, started no companion"
        assert reports[1]["companion"] == 0, reports  # it collects nothing: no companion
        assert "exitcode  : -9" in err or "Signals.SIGKILL" in err, err[-3000:]
        assert wait_gone(comp), "the companion outlived its job"
        deadline = time.time() + 60
        while time.time() < deadline:
            metrics, tags = read_run(mlflow_server, run_id)
            if "scopemeter.rank0.end_reason" in tags and "scopemeter.end_reason" in tags:
                break
            time.sleep(0.5)
        assert tags.get("scopemeter.rank0.end_reason") == "oom_kill", tags
        assert tags["scopemeter.rank0.ended_by"] == "companion", tags
        assert tags["scopemeter.rank0.oom_kill"] == "1", tags
        assert float(tags["scopemeter.rank0.memory_peak_mb"]) >= 0.95 * limit / 1e6, tags
        from mlflow.tracking import MlflowClient
        run = MlflowClient(tracking_uri=mlflow_server).get_run(run_id)
        assert run.info.status == "KILLED", run.info
        assert tags["scopemeter.end_reason"] == \
            "KILLED by scopemeter companion of rank 0: oom_kill", tags
        # the windows up to the kill: every series of rank 0 contiguous.  That
        # the limit was reached is the kernel's peak above, not a sample: the
        # last allocation takes the worker from ~0.4 GB to the limit faster than
        # a 0.5 s interval (CI, 2026-12-04: the last window read 1238 MB of 1611)
        ws = metrics["system/container_memory_usage_megabytes/rank0"]
        steps = [s for s, _, _ in ws]
        assert steps == list(range(len(steps))) and len(steps) >= 4, steps
        assert all(not alive(int(x)) for d in pod.procs_files()
                   for x in open(d).read().split()), "a process of the job is left"
    finally:
        pod.cleanup()
