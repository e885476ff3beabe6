"""The Python front (docs/python.md): scopemeter.enable_system_metrics() through
MLflow's own client, its guard rails, stop order, exit paths and plan().

Each test runs real training processes (tests/py/pyfront_worker.py or a short
script) against a real tracking store: a sqlite file (MLflow's embedded
default kind of store) or the real `mlflow server` of conftest; container_*
series come from a real cgroup with limits (pyfront_util.Pod).
"""
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from runread import read_line
from pyfront_util import (Pod, assert_limits, cgroups_usable, expected_keys, new_run,
                          python_env, read_run, staged_package, system_keys, worker_cmd)


def sqlite_uri(tmp_path):
    return f"sqlite:///{tmp_path}/mlflow.db"


def run_worker(args, env, wrap=None, timeout=240):
    cmd = worker_cmd(*args)
    if wrap:
        cmd = wrap(cmd)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    return p


def report_of(stdout):
    for line in stdout.splitlines():
        if line.startswith("REPORT "):
            return json.loads(line[len("REPORT "):])
    raise AssertionError(f"worker printed no REPORT line:\n{stdout}")


def sm_lines(stderr):
    return [ln for ln in stderr.splitlines() if ln.startswith("scopemeter:")]


@pytest.fixture
def pod():
    why = cgroups_usable()
    if why:
        pytest.skip(why)
    p = Pod("front", mem_bytes=2 << 30, cpu_cores=1.5)
    yield p
    p.cleanup()


def test_import_loads_no_psutil_pynvml_or_mlflow():
    code = ("import sys, scopemeter; "
            "bad = [m for m in ('psutil', 'pynvml', 'mlflow') if m in sys.modules]; "
            "print(bad); assert not bad, bad; "
            "assert callable(scopemeter.enable_system_metrics)")
    p = subprocess.run([sys.executable, "-c", code], env=python_env(), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr


def test_extension_uses_the_limited_api():
    code = "import scopemeter._native as n; print(n.__file__)"
    p = subprocess.run([sys.executable, "-c", code], env=python_env(), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().endswith(".abi3.so"), p.stdout


def test_no_run_is_one_line_and_no_exception(tmp_path):
    code = textwrap.dedent("""
        import scopemeter
        r = scopemeter.enable_system_metrics()
        print("RESULT", r)
        scopemeter.disable_system_metrics()
    """)
    env = python_env(MLFLOW_TRACKING_URI=sqlite_uri(tmp_path))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "RESULT False" in p.stdout
    lines = sm_lines(p.stderr)
    assert len(lines) == 1, p.stderr
    assert "no active MLflow run" in lines[0]
    assert "Traceback" not in p.stderr


def test_records_into_a_sqlite_store_and_ignores_a_second_call(tmp_path):
    uri = sqlite_uri(tmp_path)
    run_id = new_run(uri)
    env = python_env(MLFLOW_TRACKING_URI=uri, MLFLOW_RUN_ID=run_id)
    p = run_worker(["--interval", "0.5", "--seconds", "2.2", "--enable-twice"], env)
    assert p.returncode == 0, p.stderr
    rep = report_of(p.stdout)
    assert rep["enabled"] is True and rep["enabled_again"] is True
    again = [ln for ln in sm_lines(p.stderr) if "already being recorded" in ln]
    assert len(again) == 1, p.stderr

    metrics, tags = read_run(uri, run_id)
    have_limit = tags.get("scopemeter.rank0.cgroup", "").startswith("v")
    assert system_keys(metrics) == expected_keys(0, container=have_limit)
    for key, hist in metrics.items():
        steps = [s for s, _, _ in hist]
        # one thread wrote each key: steps 0, 1, 2, ... without duplicates;
        # 2.2 s at 0.5 s gives 4 full windows and the partial one of the stop
        assert steps == list(range(len(steps))), (key, steps)
        assert len(steps) >= 4, (key, steps)
        for _, v, ts in hist:
            assert round(v, 1) == v and ts > 1e12
    assert tags["scopemeter.interval_s"] == "0.5"
    assert tags["scopemeter.samples"] == "1"
    assert tags["scopemeter.collectors"] == "1"
    assert tags["scopemeter.rank0.node"] == "unknown"


def test_records_through_a_tracking_server(mlflow_server):
    run_id = new_run(mlflow_server)
    env = python_env(MLFLOW_TRACKING_URI=mlflow_server, MLFLOW_RUN_ID=run_id)
    p = run_worker(["--interval", "0.5", "--seconds", "1.5"], env)
    assert p.returncode == 0, p.stderr
    metrics, tags = read_run(mlflow_server, run_id)
    assert expected_keys(0, container=False) <= system_keys(metrics)
    assert all(len(h) >= 2 for h in metrics.values())
    assert tags["scopemeter.rank0.node"] == "unknown"


def test_mlflow_env_var_is_removed_and_mlflow_monitor_never_writes(tmp_path):
    uri = sqlite_uri(tmp_path)
    # MLflow's own monitor samples every second here, so within the 4 s of
    # training it would write its first unprefixed window.
    base = dict(MLFLOW_TRACKING_URI=uri, MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING="true",
                MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL="1")

    # Control: without scopemeter the variable really starts MLflow's monitor
    # here (otherwise the assertion below would prove nothing).
    control = new_run(uri)
    code = textwrap.dedent("""
        import time, mlflow
        with mlflow.start_run(run_id=%r):
            time.sleep(4)
    """ % control)
    p = subprocess.run([sys.executable, "-c", code], env=python_env(**base),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    metrics, _ = read_run(uri, control)
    assert "system/cpu_utilization_percentage" in metrics, sorted(metrics)

    run_id = new_run(uri)
    env = python_env(MLFLOW_RUN_ID=run_id, **base)
    p = run_worker(["--interval", "1", "--seconds", "4", "--child-env-check"], env)
    assert p.returncode == 0, p.stderr
    rep = report_of(p.stdout)
    assert rep["env_var_left"] is False
    assert rep["child_env"] == "None"
    lines = sm_lines(p.stderr)
    assert sum("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING" in ln for ln in lines) == 1, p.stderr
    metrics, _ = read_run(uri, run_id)
    assert "system/cpu_utilization_percentage" not in metrics
    unprefixed = [k for k in metrics if k.startswith("system/") and "/rank" not in k]
    assert unprefixed == [], unprefixed
    assert expected_keys(0, container=False) <= system_keys(metrics)


def test_variable_set_but_run_opened_after_the_call(tmp_path):
    """enable() with MLFLOW_RUN_ID before start_run(run_id=...): the variable
    is gone by the time MLflow looks, so its monitor never starts."""
    uri = sqlite_uri(tmp_path)
    run_id = new_run(uri)
    code = textwrap.dedent("""
        import time, mlflow, scopemeter
        scopemeter.enable_system_metrics(interval=1)
        with mlflow.start_run(run_id=%r):
            time.sleep(3)
    """ % run_id)
    env = python_env(MLFLOW_TRACKING_URI=uri, MLFLOW_RUN_ID=run_id,
                     MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING="true",
                     MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL="1")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    metrics, _ = read_run(uri, run_id)
    assert [k for k in metrics if "/rank" not in k] == []
    assert expected_keys(0, container=False) <= system_keys(metrics)


def test_late_call_warns_that_the_beginning_was_not_recorded(tmp_path):
    uri = sqlite_uri(tmp_path)
    code = textwrap.dedent("""
        import time, mlflow, scopemeter
        with mlflow.start_run():
            time.sleep(%s)
            scopemeter.enable_system_metrics(interval=0.5)
            time.sleep(0.6)
    """)
    env = python_env(MLFLOW_TRACKING_URI=uri)
    # late: past the grace after the run's start (max(window, 10 s), docs/python.md);
    # 1 s at a 0.5 s window is not late: nothing worth a warning was lost
    late = subprocess.run([sys.executable, "-c", code % "11.0"], env=env, capture_output=True,
                          text=True, timeout=120)
    early = subprocess.run([sys.executable, "-c", code % "1.0"], env=env, capture_output=True,
                           text=True, timeout=120)
    assert late.returncode == 0 and early.returncode == 0, late.stderr + early.stderr
    assert sum("was not recorded" in ln for ln in sm_lines(late.stderr)) == 1, late.stderr
    assert not any("was not recorded" in ln for ln in sm_lines(early.stderr)), early.stderr


def test_attaching_worker_is_not_late_for_its_imports(tmp_path):
    """A worker attaching to a run opened earlier (MLFLOW_RUN_ID from a
    launcher) spends its first seconds importing and joining the rendezvous:
    not late.  The reference is its own start, with a longer grace."""
    uri = sqlite_uri(tmp_path)
    opener = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import mlflow
        print(mlflow.start_run().info.run_id)
        mlflow.end_run()
    """)], env=python_env(MLFLOW_TRACKING_URI=uri), capture_output=True, text=True,
        timeout=120)
    run_id = opener.stdout.strip().splitlines()[-1]
    worker = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import time, scopemeter
        time.sleep(3)   # torch's import, init_process_group
        print("ENABLED", scopemeter.enable_system_metrics(interval=0.5))
        time.sleep(0.6)
    """)], env=python_env(MLFLOW_TRACKING_URI=uri, MLFLOW_RUN_ID=run_id), capture_output=True,
        text=True, timeout=120)
    assert "ENABLED True" in worker.stdout, worker.stderr
    assert not any("was not recorded" in ln for ln in sm_lines(worker.stderr)), worker.stderr


def test_sweeps_each_run_stopped_cleanly(tmp_path, pod):
    """A sweep in one process: runs in `with` blocks stop at each block's end
    (mlflow.end_run); a new run enabled while the previous one is still open
    (nested) stops the previous monitor first.  Either way the previous run
    has its end tags and no point after the next run's first."""
    uri = sqlite_uri(tmp_path)
    code = textwrap.dedent("""
        import json, time, mlflow, scopemeter
        ids = []
        for i in range(2):                       # a sweep: one run per block
            with mlflow.start_run() as run:
                ids.append(run.info.run_id)
                scopemeter.enable_system_metrics(interval=0.5)
                time.sleep(1.2)
        outer = mlflow.start_run()               # then: nested runs
        ids.append(outer.info.run_id)
        scopemeter.enable_system_metrics(interval=0.5)
        time.sleep(1.2)
        with mlflow.start_run(nested=True) as inner:
            ids.append(inner.info.run_id)
            scopemeter.enable_system_metrics(interval=0.5)
            time.sleep(1.2)
        mlflow.end_run()
        print("IDS " + json.dumps(ids))
    """)
    p = subprocess.run(pod.wrap([sys.executable, "-c", code]), env=python_env(
        MLFLOW_TRACKING_URI=uri), capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    ids = json.loads(p.stdout.split("IDS ", 1)[1])
    replaced = [ln for ln in sm_lines(p.stderr) if "replaces run" in ln]
    assert len(replaced) == 1 and ids[2] in replaced[0], p.stderr
    runs = [read_run(uri, i) for i in ids]
    for m, t in runs:
        assert system_keys(m) == expected_keys(0)
        assert "scopemeter.rank0.mem_peak_sampled_mb" in t, sorted(t)
        assert all(len(h) >= 2 for k, h in m.items() if k.startswith("system/"))
    for (ma, _), (mb, _) in zip(runs, runs[1:]):
        last_a = max(ts for k, h in ma.items() if k.startswith("system/") for _, _, ts in h)
        first_b = min(ts for k, h in mb.items() if k.startswith("system/") for _, _, ts in h)
        assert last_a <= first_b


def test_training_that_raises_still_gets_end_tags(tmp_path, pod):
    uri = sqlite_uri(tmp_path)
    run_id = new_run(uri)
    env = python_env(MLFLOW_TRACKING_URI=uri, MLFLOW_RUN_ID=run_id)
    p = run_worker(["--interval", "0.5", "--seconds", "1", "--raise-after"], env,
                   wrap=pod.wrap)
    assert p.returncode != 0 and "training failed on purpose" in p.stderr
    metrics, tags = read_run(uri, run_id)
    assert system_keys(metrics) == expected_keys(0)
    assert_limits(tags["scopemeter.rank0.cgroup"], 2 << 30, 1.5)
    assert float(tags["scopemeter.rank0.mem_peak_sampled_mb"]) > 0
    # the kernel's OOM kill counter (v1 memory.oom_control since 4.13, v2
    # memory.events): the tag is there exactly when the counter is
    oom_file = [os.path.join(d, f) for d in pod.dirs for f in ("memory.oom_control",
                                                               "memory.events")
                if os.path.exists(os.path.join(d, f))]
    if any("oom_kill " in open(f).read() for f in oom_file):
        assert tags["scopemeter.rank0.oom_kill"] == "0", sorted(tags)


def test_sigterm_still_flushes_what_it_had(tmp_path, pod):
    """A 60 s interval: no window is complete when SIGTERM comes, so every
    point in the run is the partial window that the SIGTERM path logged."""
    uri = sqlite_uri(tmp_path)
    run_id = new_run(uri)
    env = python_env(MLFLOW_TRACKING_URI=uri, MLFLOW_RUN_ID=run_id)
    proc = subprocess.Popen(pod.wrap(worker_cmd("--interval", "60", "--wait-sigterm")), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while read_line(proc.stdout, max(0.1, deadline - time.monotonic())).strip() != "READY":
            pass  # bounded: read_line fails the test at the deadline
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    # killed by SIGTERM (the default action is re-raised after the flush)
    assert proc.returncode == -signal.SIGTERM, (proc.returncode, err)
    metrics, tags = read_run(uri, run_id)
    assert system_keys(metrics) == expected_keys(0), err
    assert all(len(h) == 1 and h[0][0] == 0 for h in metrics.values())
    assert "scopemeter.rank0.mem_peak_sampled_mb" in tags


def test_the_runs_last_point_is_the_state_at_its_end(tmp_path, pod):
    """Issue 46 item 1 on the front: 100 MB written to /dev/shm just after the
    sample at 2 s, the run ended at once (within min(interval/2, 1 s) of that
    sample).  The last shmem point is the cgroup's shmem after the run, read
    here (the file stays until the test removes it), and the sampled peak sees
    it.  Before, that final sample was skipped: the run ended at 0.0 MB."""
    from test_composition_real import kernel_parts
    if pod.version != 1:
        pytest.skip("the v1 memory.stat this test reads (v2: tests/vm)")
    uri = sqlite_uri(tmp_path)
    shm = f"/dev/shm/sm-test-{os.getpid()}-front"
    code = textwrap.dedent("""
        import sys, time, mlflow, scopemeter
        with mlflow.start_run() as run:
            print("RUN", run.info.run_id, flush=True)
            scopemeter.enable_system_metrics(interval=2)
            time.sleep(2.1)
            with open(sys.argv[1], "wb") as f:
                for _ in range(100):
                    f.write(b"s" * 1_000_000)
    """)
    try:
        p = subprocess.run(pod.wrap([sys.executable, "-c", code, shm]),
                           env=python_env(MLFLOW_TRACKING_URI=uri), capture_output=True,
                           text=True, timeout=180)
        assert p.returncode == 0, p.stderr
        run_id = p.stdout.split("RUN ", 1)[1].split()[0]
        mem = next(d for d in pod.dirs if os.path.exists(f"{d}/memory.stat"))
        want = round(kernel_parts(mem)["shmem"] / 1e6, 1)
        metrics, tags = read_run(uri, run_id)
        shmem = metrics["system/container_memory_shmem_megabytes/rank0"]
        usage = metrics["system/container_memory_usage_megabytes/rank0"][-1][1]
        assert shmem[-1][1] == want, ("last shmem point", shmem, "the cgroup's after", want,
                                      p.stderr[-1500:])
        assert want >= 100.0, want
        assert float(tags["scopemeter.rank0.mem_peak_sampled_mb"]) >= usage >= want, tags
    finally:
        if os.path.exists(shm):
            os.unlink(shm)


def test_tracking_server_down_then_up_retries_and_delivers_everything(tmp_path):
    """The server is down when training starts and comes up ~3 s later: the
    engine's REST sink (the front's path for an http URI) retries with
    backoff while windows wait in its buffer, then delivers all of them —
    steps 0, 1, 2, ... with none missing — and its lines say so: one when
    delivery fails (with the points waiting), one when it recovers, and a
    closing line that accounts for every record."""
    from conftest import free_port, start_mlflow_server, stop_mlflow_server
    db_uri = sqlite_uri(tmp_path)           # the store the server will serve
    run_id = new_run(db_uri)
    port = free_port()
    env = python_env(MLFLOW_TRACKING_URI=f"http://127.0.0.1:{port}", MLFLOW_RUN_ID=run_id,
                     # MLflow's own HTTP retries off: the backoff under test is scopemeter's
                     MLFLOW_HTTP_REQUEST_MAX_RETRIES=0, MLFLOW_HTTP_REQUEST_TIMEOUT=10)
    proc = subprocess.Popen(worker_cmd("--attach", "env", "--interval", "0.5", "--seconds", "25"),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    server = None
    try:
        time.sleep(3)
        assert proc.poll() is None, proc.communicate()[1]
        server, uri = start_mlflow_server(str(tmp_path), port=port)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
        if server is not None:
            stop_mlflow_server(server)
    assert proc.returncode == 0, err
    lines = sm_lines(err)
    assert sum("cannot deliver to MLflow" in ln for ln in lines) == 1, err
    assert re.search(r"cannot deliver to MLflow .*; \d+ points wait in the buffer", err), err
    assert sum("reachable again" in ln and "no point lost" in ln for ln in lines) == 1, err
    closing = re.search(r"logged (\d+) windows? \((\d+) points?, (\d+) tags?\): (\d+) delivered, "
                        r"0 dropped \(buffer full\), 0 refused, 0 undelivered at stop", err)
    assert closing, err
    assert int(closing.group(4)) == int(closing.group(2)) + int(closing.group(3)), err
    metrics, tags = read_run(db_uri, run_id)
    assert expected_keys(0, container=False) <= system_keys(metrics)
    for key in system_keys(metrics):
        steps = [s for s, _, _ in metrics[key]]
        assert steps == list(range(len(steps))) and len(steps) >= 40, (key, steps[:5], len(steps))
    assert tags["scopemeter.rank0.node"] == "unknown"


def test_plan_matches_the_cli(scopemeter_bin):
    root = staged_package()
    if root and root not in sys.path:
        sys.path.insert(0, root)
    import scopemeter
    cases = [
        dict(workers=8, workers_per_pod=1, all_workers=True),
        dict(workers=16, workers_per_pod=2, nodes=4, gpus_per_worker=1, all_workers=True,
             interval=5, samples=2),
        dict(workers=4, workers_per_pod=4, all_workers=False, container_limits=False),
        # the level and the RDMA ports, as --detail and --rdma (docs/series.md "Levels")
        dict(workers=8, workers_per_pod=2, gpus_per_worker=1, all_workers=True,
             rdma_ports=True, detail="full"),
        dict(workers=8, workers_per_pod=2, gpus_per_worker=1, all_workers=True,
             detail="default"),
    ]
    for c in cases:
        args = [scopemeter_bin, "plan", "--json", "--workers", str(c["workers"]),
                "--workers-per-pod", str(c["workers_per_pod"])]
        if "nodes" in c:
            args += ["--nodes", str(c["nodes"])]
        if "gpus_per_worker" in c:
            args += ["--gpus-per-worker", str(c["gpus_per_worker"])]
        if "interval" in c:
            args += ["--interval", str(c["interval"]), "--samples", str(c["samples"])]
        args.append("--all-workers" if c["all_workers"] else "--one-worker")
        if c.get("container_limits") is False:
            args.append("--no-container-limits")
        if c.get("rdma_ports"):
            args.append("--rdma")
        if "detail" in c:
            args += ["--detail", c["detail"]]
        cli = json.loads(subprocess.run(args, capture_output=True, text=True, check=True,
                                        timeout=30).stdout)
        py = scopemeter.plan(**c)
        for k, v in py.items():
            assert cli[k] == (v if isinstance(v, str) else pytest.approx(v)), (c, k, cli[k], v)
    assert scopemeter.plan(workers=8, all_workers=True)["interval_s"] == 20.0
    with pytest.raises(ValueError):
        scopemeter.plan(workers=0)
    # full counts 10 more series per GPU (GPM 4, NVLink 2, clocks 2, ECC 2); --rdma the ports'
    d = scopemeter.plan(workers=1, gpus_per_worker=2)
    f = scopemeter.plan(workers=1, gpus_per_worker=2, detail="full", rdma_ports=True)
    assert (d["detail"], f["detail"]) == ("default", "full")
    assert d["rdma_series_per_collector"] == 0 < f["rdma_series_per_collector"]
    assert f["series"] == d["series"] + 2 * 10 + f["rdma_series_per_collector"], (d, f)
    assert d["series_full"] == d["series"] + 2 * 10
    with pytest.raises(ValueError, match="^detail must be default or full, got 'most'$"):
        scopemeter.plan(workers=1, detail="most")
    with pytest.raises(TypeError, match="detail must be 'default', 'full' or None"):
        scopemeter.plan(workers=1, detail=1)
    with pytest.raises(TypeError, match="rdma_ports must be True or False"):
        scopemeter.plan(workers=1, rdma_ports="yes")
