"""Ray Train (docs/python.md): a TorchTrainer with 2 CPU workers on one local Ray
node, inside a real memory + CPU limited cgroup (the pod); the training
function calls scopemeter.enable_system_metrics(all_workers=True) first
thing.  Ray Train sets RANK / LOCAL_RANK / WORLD_SIZE / LOCAL_WORLD_SIZE for
its workers, so the result is the same as torchrun in one pod: exactly the 11
non-GPU series of rank 0.
"""
import importlib.util
import subprocess
import sys
import textwrap

import pytest

from pyfront_util import (CONTAINER, Pod, assert_limits, cgroups_usable, expected_keys, new_run,
                          process_keys, python_env, read_run, system_keys)

# the driver's own bound (420 s) and the session's mlflow server
pytestmark = [pytest.mark.launchers, pytest.mark.timeout(600)]

# Looked up, never imported into the suite's process: torch's pages in this
# process would be shared with the trees test_proctree_cow measures.
if importlib.util.find_spec("torch") is None:
    pytest.skip("torch not installed (pip install torch==2.13.0)", allow_module_level=True)
if importlib.util.find_spec("ray.train.torch") is None:
    pytest.skip('Ray Train not installed (pip install "ray[train]")', allow_module_level=True)

DRIVER = textwrap.dedent("""
    import os, sys, tempfile
    import ray
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    URI, RUN_ID, STORAGE = sys.argv[1], sys.argv[2], sys.argv[3]

    def train_fn(config):
        import time
        import mlflow
        import scopemeter
        import torch
        import ray.train.torch

        mlflow.set_tracking_uri(config["uri"])
        with mlflow.start_run(run_id=config["run_id"]):
            scopemeter.enable_system_metrics(all_workers=True, interval=0.5)   # first thing
            print("RAYENV", {k: os.environ.get(k) for k in
                             ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")},
                  flush=True)
            model = ray.train.torch.prepare_model(torch.nn.Linear(32, 1))
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            x, y = torch.randn(256, 32), torch.randn(256, 1)
            for _ in range(40):
                opt.zero_grad()
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                opt.step()
                time.sleep(0.05)
            ray.train.report({"loss": float(loss.item())})

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=True,
             runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}})
    trainer = TorchTrainer(
        train_fn,
        train_loop_config={"uri": URI, "run_id": RUN_ID},
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False,
                                     resources_per_worker={"CPU": 1}),
        run_config=RunConfig(storage_path=STORAGE, name="scopemeter-ray"),
    )
    result = trainer.fit()
    print("FIT_OK", result.error, flush=True)
    ray.shutdown()
""")


def test_ray_train_two_cpu_workers_like_torchrun_in_one_pod(mlflow_server, tmp_path):
    why = cgroups_usable()
    if why:
        pytest.skip(why)
    run_id = new_run(mlflow_server)
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    storage = tmp_path / "ray-results"
    storage.mkdir()
    env = python_env(RAY_USAGE_STATS_ENABLED=0, RAY_DISABLE_DOCKER_CPU_WARNING=1)
    pod = Pod("ray", mem_bytes=8 << 30, cpu_cores=2)
    try:
        p = subprocess.run(pod.wrap([sys.executable, str(driver), mlflow_server, run_id,
                                     str(storage)]),
                           env=env, capture_output=True, text=True, timeout=420)
    finally:
        pod.cleanup()
    out = p.stdout + p.stderr
    assert p.returncode == 0 and "FIT_OK" in p.stdout, out[-6000:]
    # Ray Train gave its workers the launcher variables scopemeter reads
    assert "'LOCAL_WORLD_SIZE': '2'" in out, out[-4000:]

    metrics, tags = read_run(mlflow_server, run_id)
    keys = system_keys(metrics)
    # rank 1 (the other worker of the pod) holds its recorder lock; the pod's
    # collector may log its process tree, and nothing else of it (§9)
    assert expected_keys(0) <= keys and keys - expected_keys(0) <= process_keys(1), \
        sorted(keys ^ expected_keys(0))
    assert len(keys & expected_keys(0)) == len(expected_keys(0))
    assert {f"system/{k}/rank0" for k in CONTAINER} <= keys
    assert "scopemeter.rank1.node" not in tags
    assert tags["scopemeter.collectors"] == "1"
    assert_limits(tags["scopemeter.rank0.cgroup"], 8 << 30, 2)
    # the end tags: the worker's stop ran (process exit under Ray)
    assert "scopemeter.rank0.mem_peak_sampled_mb" in tags, sorted(tags)
    for key, hist in metrics.items():
        if key.startswith("system/"):
            steps = [s for s, _, _ in hist]
            # a sibling's tree starts when the pod's collector finds it, and
            # its CPU one sample later (a rate needs two): contiguous from there
            first = steps[0] if key.endswith("/rank1") and steps else 0
            assert steps == list(range(first, first + len(steps))) and len(steps) >= 2, \
                (key, steps)
