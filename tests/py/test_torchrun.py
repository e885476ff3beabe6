"""torchrun, one pod (docs/python.md): `torchrun --nproc_per_node=2` inside a real
memory + CPU limited cgroup, each rank training a DDP model (gloo, CPU) and
calling scopemeter.enable_system_metrics() right after opening the run.

- all_workers=True: the pod's local rank 0 collects for it, the second local
  rank collects nothing -> exactly the 11 non-GPU series of rank 0 (22 -> 11);
- default: rank 0 only -> the same 11 keys, rank 0's, and no rank 1 tag.
Names are checked key by key against docs/design.md §2 (pyfront_util).
"""
import shutil
import subprocess
import sys

import pytest

from pyfront_util import (CONTAINER, Pod, assert_limits, cgroups_usable, expected_keys, new_run,
                          process_keys, python_env, read_run, system_keys, worker_cmd)

# torchrun's own bound (300 s) and the session's mlflow server
pytestmark = [pytest.mark.launchers, pytest.mark.timeout(480)]

torch = pytest.importorskip("torch", reason="torch not installed (pip install torch==2.13.0)")


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
