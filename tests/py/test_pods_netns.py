"""Pods on one node (docs/design.md §2, §4), with real kernel isolation:

- two pods = two network namespaces (ip netns, entered with nsenter) and two
  memory + CPU cgroups with different limits; one rank in each (RANK 0/1,
  WORLD_SIZE=2, LOCAL_RANK=0, LOCAL_WORLD_SIZE=1), both all_workers=True,
  NODE_NAME set -> 22 series: node_*/rootfs_* carry the node tier, network_*
  differ between the pods (each sends a different amount over its own
  loopback), container_* follow each cgroup's own limit;
- without a node name: no tier in any key, tag `unknown`;
- the write-load cap: eight simulated pods (RANK 0..7, LOCAL_WORLD_SIZE=1) on
  loopback -> interval 10 x ceil(8/4) = 20 s, tagged; stopped early, the
  partial window still lands.

The pods cannot reach a server on the root namespace's loopback, so they log
into one sqlite store (MLflow's embedded kind of store) on the shared disk.
"""
import subprocess
import time

import pytest

from pyfront_util import (assert_limits, cgroups_usable, disk_here, expected_keys,
                          netns_usable, new_run, psi_here, python_env, read_run, run_pods_on_one_node, system_keys,
                          wait_all, worker_cmd)

NODE = "test-node-a"


def last(metrics, key):
    return metrics[key][-1][1]


def test_two_pods_on_one_node(tmp_path):
    for why in (cgroups_usable(), netns_usable()):
        if why:
            pytest.skip(why)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    run_id = new_run(uri)
    spec = [  # (rank, memory limit, CPU cores, MB sent over the pod's loopback)
        (0, 512 << 20, 0.5, 4),
        (1, 1 << 30, 1.0, 24),
    ]
    results = run_pods_on_one_node(uri, run_id, spec, NODE)
    for rc, out, err in results:
        assert rc == 0, err[-3000:]

    metrics, tags = read_run(uri, run_id)
    want = expected_keys(0, node=NODE) | expected_keys(1, node=NODE)
    keys = system_keys(metrics)
    assert keys == want, sorted(keys ^ want)
    # per rank: node 3, rootfs 3, network 2, container 3 + the 4 parts of the
    # working set (+ 2 pressure with PSI, docs/design.md §9; + 2 disk I/O where
    # blkio/io can be read), its process tree 3
    assert len(keys) == 2 * (15 + 2 * psi_here() + 2 * disk_here() + 3)
    assert f"system/node_memory_usage_percentage/{NODE}/rank1" in keys
    assert "system/network_receive_megabytes/rank0" in keys  # never a tier here

    # network_* is each pod's own namespace: what that pod sent over its lo
    for rank, _, _, mb in spec:
        rx = last(metrics, f"system/network_receive_megabytes/rank{rank}")
        tx = last(metrics, f"system/network_transmit_megabytes/rank{rank}")
        assert mb <= rx < mb * 1.3 + 1, (rank, rx)
        assert mb <= tx < mb * 1.3 + 1, (rank, tx)

    # container_* against each cgroup's own limit
    for rank, mem, cpu, _ in spec:
        assert_limits(tags[f"scopemeter.rank{rank}.cgroup"], mem, cpu)
        used = metrics[f"system/container_memory_usage_megabytes/rank{rank}"]
        pct = metrics[f"system/container_memory_usage_percentage/rank{rank}"]
        for (s1, mb_used, _), (s2, p, _) in zip(used, pct):
            assert s1 == s2
            assert p == pytest.approx(100 * mb_used * 1e6 / mem, abs=0.2), (rank, mb_used, p)
    # the same working set is a bigger share of the smaller limit
    assert tags["scopemeter.rank0.node"] == NODE and tags["scopemeter.rank1.node"] == NODE
    assert tags["scopemeter.collectors"] == "2"


def test_without_a_node_name_no_tier_and_tag_unknown(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    run_id = new_run(uri)
    env = python_env(MLFLOW_TRACKING_URI=uri, MLFLOW_RUN_ID=run_id, RANK=1, WORLD_SIZE=2,
                     LOCAL_RANK=0, LOCAL_WORLD_SIZE=1)
    p = subprocess.run(worker_cmd("--attach", "env", "--all-workers", "--interval", "0.5",
                                  "--seconds", "1.2"),
                       env=env, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    metrics, tags = read_run(uri, run_id)
    have_limit = tags["scopemeter.rank1.cgroup"].startswith("v")
    assert system_keys(metrics) == expected_keys(1, container=have_limit)
    assert not any("unknown" in k for k in metrics)
    assert tags["scopemeter.rank1.node"] == "unknown"
    assert "scopemeter.rank0.node" not in tags


def test_write_load_cap_eight_pods(mlflow_server):
    run_id = new_run(mlflow_server)
    procs = []
    for rank in range(8):
        env = python_env(MLFLOW_TRACKING_URI=mlflow_server, MLFLOW_RUN_ID=run_id, RANK=rank,
                         WORLD_SIZE=8, LOCAL_RANK=0, LOCAL_WORLD_SIZE=1)
        # default interval (10 s): the cap raises it to 20 s; the worker
        # stops after ~1 s of training, long before the first full window
        procs.append(subprocess.Popen(
            worker_cmd("--attach", "env", "--all-workers", "--seconds", "1",
                       "--disable-after", "0"),
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = wait_all(procs)
    for rc, out, err in results:
        assert rc == 0, err[-3000:]
        assert any("write-load cap" in ln for ln in err.splitlines()), err
    metrics, tags = read_run(mlflow_server, run_id)
    assert tags["scopemeter.interval_s"] == "20"
    assert tags["scopemeter.samples"] == "1"
    assert tags["scopemeter.collectors"] == "8"
    have_limit = tags["scopemeter.rank0.cgroup"].startswith("v")
    want = set()
    for rank in range(8):
        want |= expected_keys(rank, container=have_limit)
        assert tags[f"scopemeter.rank{rank}.node"] == "unknown"
    assert system_keys(metrics) == want
    # one partial window per rank, logged at stop
    assert all(len(h) == 1 and h[0][0] == 0 for k, h in metrics.items() if k.startswith("system/"))
