"""`scopemeter run -- CMD` against a real `mlflow server` (docs/cli.md,
docs/design.md §4-§8): the run it creates or attaches to, the exact keys,
steps, tags and point counts read back through MLflow's REST API, CMD's exit
status and signals, the environment CMD sees, ranks sharing one run, and what
happens without a tracking server."""
import importlib.util
import json
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import clean_env
from faultproxy import FaultProxy
from runread import (RATE_KEY, assert_steps_contiguous, assert_steps_continue, every_window,
                     get_run, histories, new_experiment, new_run, probe_keys, read_line, rest,
                     run_cli, sm_lines, start_cli, tags_of)

START_TAGS = {"node", "gpu", "cgroup", "build"}


def expected_keys(probe_json):
    keys = probe_keys(probe_json)
    assert keys and all(k.endswith("/rank0") for k in keys)
    return keys


def test_sleep5_interval1_exact_keys_steps_tags(scopemeter_bin, mlflow_server, probe_json):
    exp = new_experiment()
    p = run_cli(scopemeter_bin, ["--interval", "1", "--", "sleep", "5"],
                env={"MLFLOW_TRACKING_URI": mlflow_server, "MLFLOW_EXPERIMENT_NAME": exp})
    assert p.returncode == 0, p.stderr
    assert p.run_id, p.stderr
    run = get_run(mlflow_server, p.run_id)
    assert run["info"]["status"] == "FINISHED"
    assert run["info"]["end_time"] >= run["info"]["start_time"]

    hist = histories(mlflow_server, p.run_id)
    assert set(hist) == expected_keys(probe_json)
    counts = assert_steps_contiguous(hist)
    # 5 whole windows in 5 s, plus the last partial one at stop: every key
    # has the same number of points, one per step (a rate may lack the last:
    # runread.every_window)
    n = every_window(counts)
    assert 5 <= n <= 7, counts
    # one timestamp per step, shared by every key of that window
    by_step = {}
    for pts in hist.values():
        for step, ts, _ in pts:
            by_step.setdefault(step, set()).add(ts)
    assert all(len(v) == 1 for v in by_step.values()), by_step

    tags = tags_of(run)
    for t in START_TAGS:
        assert f"scopemeter.rank0.{t}" in tags
    assert tags["scopemeter.rank0.node"] == "unknown"
    assert tags["scopemeter.interval_s"] == "1"
    assert tags["scopemeter.samples"] == "1"
    assert tags["scopemeter.collectors"] == "1"
    assert tags["mlflow.source.name"] == "sleep"
    assert "scopemeter.skipped" not in tags
    assert not any(k.startswith("scopemeter.rank1") for k in tags)
    # the run is in the experiment named by MLFLOW_EXPERIMENT_NAME
    assert run["info"]["experiment_id"] != "0"


def test_child_exit_status_propagates_and_run_failed(scopemeter_bin, mlflow_server):
    p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sh", "-c", "sleep 1; exit 3"],
                env={"MLFLOW_TRACKING_URI": mlflow_server})
    assert p.returncode == 3, p.stderr
    run = get_run(mlflow_server, p.run_id)
    assert run["info"]["status"] == "FAILED"
    hist = histories(mlflow_server, p.run_id)
    assert hist and min(len(v) for v in hist.values()) >= 1


def test_two_second_command_logs_the_partial_window(scopemeter_bin, mlflow_server, probe_json):
    p = run_cli(scopemeter_bin, ["--interval", "10", "--", "sleep", "2"],
                env={"MLFLOW_TRACKING_URI": mlflow_server})
    assert p.returncode == 0, p.stderr
    hist = histories(mlflow_server, p.run_id)
    assert set(hist) == expected_keys(probe_json)
    assert all([s for s, _, _ in pts] == [0] for pts in hist.values()), hist
    assert get_run(mlflow_server, p.run_id)["info"]["status"] == "FINISHED"


def test_system_metrics_variable_removed_and_run_exported(scopemeter_bin, mlflow_server):
    script = ("import os, json; print(json.dumps({k: os.environ.get(k) for k in "
              "('MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING', 'MLFLOW_RUN_ID', 'MLFLOW_TRACKING_URI')}))")
    p = run_cli(scopemeter_bin, ["--interval", "5", "--", sys.executable, "-c", script],
                env={"MLFLOW_TRACKING_URI": mlflow_server,
                     "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING": "true"})
    assert p.returncode == 0, p.stderr
    seen = json.loads(p.stdout.strip().splitlines()[-1])
    assert seen["MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING"] is None
    assert seen["MLFLOW_RUN_ID"] == p.run_id
    assert seen["MLFLOW_TRACKING_URI"] == mlflow_server
    removed = [l for l in sm_lines(p.stderr) if "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING" in l]
    assert len(removed) == 1, p.stderr


def test_cmd_own_mlflow_logging_lands_in_the_same_run(scopemeter_bin, mlflow_server):
    script = ("import mlflow\n"
              "with mlflow.start_run() as r:\n"
              "    mlflow.log_metric('loss', 0.5, step=0)\n"
              "    print('RUN', r.info.run_id)\n")
    p = run_cli(scopemeter_bin, ["--interval", "1", "--", sys.executable, "-c", script],
                env={"MLFLOW_TRACKING_URI": mlflow_server}, timeout=180)
    assert p.returncode == 0, p.stderr
    assert re.findall(r"RUN ([0-9a-f]+)", p.stdout) == [p.run_id], p.stdout
    hist = histories(mlflow_server, p.run_id)
    assert "loss" in hist and any(k.startswith("system/") for k in hist)


def test_sigterm_is_forwarded_and_run_killed(scopemeter_bin, mlflow_server):
    script = ("import signal, sys, time\n"
              "def h(s, f):\n"
              "    print('child got SIGTERM', flush=True); sys.exit(7)\n"
              "signal.signal(signal.SIGTERM, h)\n"
              "print('ready', flush=True)\n"
              "time.sleep(60)\n")
    proc = start_cli(scopemeter_bin, ["--interval", "0.5", "--", sys.executable, "-c", script],
                     env={"MLFLOW_TRACKING_URI": mlflow_server})
    assert read_line(proc.stdout).strip() == "ready"
    time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert "child got SIGTERM" in out, err
    assert proc.returncode == 7, err
    run_id = [l for l in err.splitlines() if "created run" in l][0].split()[3]
    assert get_run(mlflow_server, run_id)["info"]["status"] == "KILLED"
    assert histories(mlflow_server, run_id)


def test_child_killed_by_signal_exits_128_plus_n(scopemeter_bin, mlflow_server):
    p = run_cli(scopemeter_bin, ["--interval", "5", "--", "sh", "-c", "kill -KILL $$"],
                env={"MLFLOW_TRACKING_URI": mlflow_server})
    assert p.returncode == 128 + signal.SIGKILL, p.stderr
    assert get_run(mlflow_server, p.run_id)["info"]["status"] == "KILLED"


def test_attach_to_a_given_run_which_it_does_not_end(scopemeter_bin, mlflow_server):
    run_id = new_run(mlflow_server)
    # MLFLOW_RUN_ID from the environment
    p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sleep", "1"],
                env={"MLFLOW_TRACKING_URI": mlflow_server, "MLFLOW_RUN_ID": run_id})
    assert p.returncode == 0 and p.run_id is None, p.stderr
    assert get_run(mlflow_server, run_id)["info"]["status"] == "RUNNING"
    assert histories(mlflow_server, run_id)
    # --run-id wins over the environment
    other = new_run(mlflow_server)
    p = run_cli(scopemeter_bin, ["--run-id", other, "--interval", "5", "--", "true"],
                env={"MLFLOW_TRACKING_URI": mlflow_server, "MLFLOW_RUN_ID": run_id})
    assert p.returncode == 0, p.stderr
    assert histories(mlflow_server, other)


def test_unknown_run_id_still_runs_cmd_and_keeps_points(scopemeter_bin, mlflow_server, tmp_path):
    jsonl = tmp_path / "points.jsonl"
    p = run_cli(scopemeter_bin, ["--run-id", "0" * 32, "--interval", "0.5", "--jsonl",
                                 str(jsonl), "--", "sh", "-c", "sleep 1; exit 4"],
                env={"MLFLOW_TRACKING_URI": mlflow_server})
    assert p.returncode == 4
    assert any("does not exist" in l for l in sm_lines(p.stderr)), p.stderr
    recs = [json.loads(l) for l in jsonl.read_text().splitlines()]
    assert any(r["kind"] == "metric" for r in recs)


def test_a_given_run_is_asked_for_once(scopemeter_bin, mlflow_server, tmp_path):
    """--run-id / MLFLOW_RUN_ID: the resolution's runs/get also answers the
    sink's check at start (the run's status, this rank's last step), so the
    server sees one runs/get per `scopemeter run`, with every line and outcome
    as before: the status said, an ended run said, steps continued after the
    run's earlier system steps; a missing run one line, CMD runs, the points
    in the JSONL file.  A server that does not answer runs/get is asked
    within one bound, not two (the sink takes the unanswered check too: CMD
    is held back once, a SIGTERM meanwhile is not kept waiting), said once,
    and the points still land when it answers log-batch."""
    run_id = new_run(mlflow_server)
    proxy = FaultProxy(mlflow_server)  # passes everything; logs every request

    def gets(since):
        return [r for r in proxy.requests[since:] if "/runs/get?" in r.path]

    try:
        env = {"MLFLOW_TRACKING_URI": proxy.uri}
        p = run_cli(scopemeter_bin, ["--run-id", run_id, "--interval", "0.3", "--", "sleep", "1"],
                    env=env, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        assert len(gets(0)) == 1, (gets(0), p.stderr)
        lines = sm_lines(p.stderr)
        assert any(f"recording into run {run_id} (--run-id, RUNNING)" in l for l in lines), lines
        assert not any("steps continue" in l for l in lines), lines
        first = histories(mlflow_server, run_id)
        last = max(s for h in first.values() for s, _, _ in h)

        rest(mlflow_server, "runs/update", {"run_id": run_id, "status": "FINISHED",
                                            "end_time": int(time.time() * 1000)})
        n = len(proxy.requests)
        p = run_cli(scopemeter_bin, ["--interval", "0.3", "--", "sleep", "1"],
                    env={**env, "MLFLOW_RUN_ID": run_id}, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        assert len(gets(n)) == 1, (gets(n), p.stderr)
        lines = sm_lines(p.stderr)
        assert any(f"recording into run {run_id} (MLFLOW_RUN_ID, FINISHED)" in l
                   for l in lines), lines
        assert any(f"run {run_id} is FINISHED; recording into it anyway, its system steps "
                   "continue after its last one" in l for l in lines), lines
        assert any(f"up to step {last}: steps continue at {last + 1}" in l for l in lines), lines
        both = histories(mlflow_server, run_id)
        counts = assert_steps_continue(both)  # no restart at 0, no interleaving
        assert all(c > last + (0 if RATE_KEY.search(k) else 1) for k, c in counts.items()), counts
        # the write check at start is still made, once, and reads no whole run
        # (the rank's node tag first, docs/rest.md "The run check")
        checks = [r for r in proxy.requests[n:] if r.path.endswith("/runs/set-tag")]
        assert [r.json()["key"] for r in checks] == ["scopemeter.rank0.node"], checks
        assert not [r for r in proxy.requests[n:] if r.path.endswith("/runs/update")]

        n = len(proxy.requests)
        jsonl = tmp_path / "points.jsonl"
        p = run_cli(scopemeter_bin, ["--run-id", "0" * 32, "--interval", "0.5", "--jsonl",
                                     str(jsonl), "--", "sh", "-c", "sleep 1; exit 4"],
                    env=env, cwd=tmp_path)
        assert p.returncode == 4, p.stderr
        assert len(gets(n)) == 1, (gets(n), p.stderr)
        said = [l for l in sm_lines(p.stderr) if "does not exist" in l]
        assert len(said) == 1 and "not recording into it" in said[0], p.stderr
        assert any(json.loads(l)["kind"] == "metric" for l in jsonl.read_text().splitlines())

        n = len(proxy.requests)
        proxy.set_fault("status", match="/runs/get?", code=503, count=10**6)
        p = run_cli(scopemeter_bin, ["--run-id", run_id, "--interval", "0.3", "--", "sleep", "1"],
                    env=env, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        said = [l for l in sm_lines(p.stderr) if "cannot check run" in l]
        assert len(said) == 1 and "recording into it anyway" in said[0], p.stderr
        tries = re.findall(r"gave up after (\d+) attempts", p.stderr)
        assert len(tries) == 1 and len(gets(n)) == int(tries[0]), (tries, gets(n), p.stderr)
        assert any(f"recording into run {run_id} (--run-id, not checked: no answer)" in l
                   for l in sm_lines(p.stderr)), p.stderr
        assert any(r.path.endswith("/runs/log-batch") and r.status == 200
                   for r in proxy.requests[n:]), p.stderr
    finally:
        proxy.close()


def test_experiment_flag_creates_the_experiment(scopemeter_bin, mlflow_server):
    exp = new_experiment()
    p = run_cli(scopemeter_bin, ["--experiment", exp, "--interval", "5", "--", "true"],
                env={"MLFLOW_TRACKING_URI": mlflow_server,
                     "MLFLOW_EXPERIMENT_NAME": "not-this-one"})
    assert p.returncode == 0, p.stderr
    run = get_run(mlflow_server, p.run_id)
    e = rest(mlflow_server, "experiments/get",
             params={"experiment_id": run["info"]["experiment_id"]})
    assert e["experiment"]["name"] == exp


def test_tracking_uri_with_a_path_prefix(scopemeter_bin, mlflow_server):
    proxy = FaultProxy(mlflow_server, prefix="/mlflow")
    try:
        for uri in (proxy.uri, proxy.uri + "/"):
            p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sleep", "1"],
                        env={"MLFLOW_TRACKING_URI": uri})
            assert p.returncode == 0, p.stderr
            assert p.run_id, p.stderr
            assert histories(mlflow_server, p.run_id)
        paths = {r.path.split("?")[0] for r in proxy.log()}
        assert "/mlflow/api/2.0/mlflow/runs/log-batch" in paths, paths
        assert all(r.status != 404 for r in proxy.log())
    finally:
        proxy.close()


def test_no_tracking_uri_says_so_and_writes_jsonl(scopemeter_bin, tmp_path):
    p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sh", "-c", "sleep 1; exit 2"],
                cwd=tmp_path)
    assert p.returncode == 2
    lines = sm_lines(p.stderr)
    assert any("MLFLOW_TRACKING_URI is not set" in l for l in lines), p.stderr
    files = list(tmp_path.glob("scopemeter-rank0-*.jsonl"))
    assert len(files) == 1, lines
    assert any(files[0].name in l for l in lines)
    recs = [json.loads(l) for l in files[0].read_text().splitlines()]
    metrics = [r for r in recs if r["kind"] == "metric"]
    tags = {r["key"] for r in recs if r["kind"] == "tag"}
    assert metrics and {"scopemeter.rank0.node", "scopemeter.interval_s"} <= tags
    assert any(f"{len(recs)} records written" in l for l in lines), lines


def test_non_http_tracking_uri_says_so(scopemeter_bin, tmp_path):
    p = run_cli(scopemeter_bin, ["--interval", "5", "--jsonl", str(tmp_path / "x.jsonl"), "--",
                                 "true"], env={"MLFLOW_TRACKING_URI": "sqlite:///mlflow.db"},
                cwd=tmp_path)
    assert p.returncode == 0
    assert any("not an http(s) tracking server" in l for l in sm_lines(p.stderr)), p.stderr
    assert (tmp_path / "x.jsonl").stat().st_size > 0


def test_cmd_not_found_is_127(scopemeter_bin, tmp_path):
    p = run_cli(scopemeter_bin, ["--interval", "5", "--", "/nonexistent/cmd"], cwd=tmp_path)
    assert p.returncode == 127
    assert any("cannot run /nonexistent/cmd" in l for l in sm_lines(p.stderr))


def test_a_directory_as_cmd_is_126_and_creates_no_run(scopemeter_bin, mlflow_server, tmp_path):
    exp = new_experiment()
    p = run_cli(scopemeter_bin, ["--experiment", exp, "--", str(tmp_path)],
                env={"MLFLOW_TRACKING_URI": mlflow_server}, cwd=tmp_path)
    assert p.returncode == 126, p.stderr  # as a shell: "Is a directory"
    assert any("Is a directory; no run created" in l for l in sm_lines(p.stderr)), p.stderr
    assert p.run_id is None
    # nothing reached the server: not even the experiment
    r = rest(mlflow_server, "experiments/search", {"max_results": 1000})
    assert exp not in [e["name"] for e in r.get("experiments", [])]
    assert not list(tmp_path.glob("scopemeter-rank*.jsonl"))


@pytest.mark.parametrize("port,said", [
    ("closed", "Connection refused"),
    ("99999", "port 99999 is not a TCP port (1-65535)"),
    ("-1", "port -1 is not a TCP port (1-65535)"),
])
def test_network_errors_name_their_cause(scopemeter_bin, tmp_path, port, said):
    """libcurl's own words were 'Error' in the bundled build (no verbose
    strings): a refused connection and a bad port are said as such."""
    if port == "closed":
        from conftest import free_port
        port = str(free_port())  # nothing listens there
    p = run_cli(scopemeter_bin, ["--startup-timeout", "1", "--", "true"],
                env={"MLFLOW_TRACKING_URI": f"http://127.0.0.1:{port}"}, cwd=tmp_path)
    assert p.returncode == 0, p.stderr  # CMD still ran
    first = sm_lines(p.stderr)[0]
    assert said in first and not first.endswith(": Error"), p.stderr


@pytest.mark.parametrize("uri,said", [
    ("http://[::1", "the IPv6 address after '[' has no closing ']'"),
    ("http://[::1:5000/x", "the IPv6 address after '[' has no closing ']'"),
    ("http://[::1]:99999", "port 99999 is not a TCP port (1-65535)"),
])
def test_an_unclosed_ipv6_bracket_is_said_as_such(scopemeter_bin, tmp_path, uri, said):
    """Issue 46 item 13: 'http://[::1' was said as "port :1 is not a TCP
    port"; the fault is the bracket that is never closed."""
    p = run_cli(scopemeter_bin, ["--startup-timeout", "1", "--", "true"],
                env={"MLFLOW_TRACKING_URI": uri}, cwd=tmp_path)
    assert p.returncode == 0, p.stderr  # CMD still ran
    first = sm_lines(p.stderr)[0]
    assert said in first and "not a TCP port" not in first.replace(said, ""), p.stderr


def test_usage_errors_are_2(scopemeter_bin):
    for args in ([], ["--interval", "0", "--", "true"], ["--run-id", "x", "--experiment", "y",
                                                         "--", "true"], ["--bogus", "--", "true"]):
        p = run_cli(scopemeter_bin, args)
        assert p.returncode == 2, (args, p.stderr)


# ---- several ranks, one run ------------------------------------------------------

def rank_env(uri, rank, local_rank, world, local_world, job):
    e = {"MLFLOW_TRACKING_URI": uri, "RANK": rank, "LOCAL_RANK": local_rank,
         "WORLD_SIZE": world, "LOCAL_WORLD_SIZE": local_world}
    if job:
        e["TORCHELASTIC_RUN_ID"] = job
    return e


PRINT_RUN = "import os; print(os.environ.get('MLFLOW_RUN_ID'))"


def launch_ranks(binary, uri, local_world, job, cwd, extra=()):
    procs = [start_cli(binary, ["--all-workers", "--interval", "0.5", *extra, "--",
                                sys.executable, "-c", "import time; time.sleep(1.5); " + PRINT_RUN],
                       env=rank_env(uri, r, r % local_world, 2, local_world, job), cwd=cwd)
             for r in range(2)]
    return [(p,) + p.communicate(timeout=120) for p in procs]


def test_all_workers_two_local_ranks_share_one_run(scopemeter_bin, mlflow_server, tmp_path):
    res = launch_ranks(scopemeter_bin, mlflow_server, 2, uuid.uuid4().hex, tmp_path)
    for p, out, err in res:
        assert p.returncode == 0, err
    run_ids = [out.strip().splitlines()[-1] for _, out, _ in res]
    assert run_ids[0] == run_ids[1] != "None", res
    # LOCAL_RANK=1 collects nothing, and says why; it holds its rank's lock,
    # so rank 0's collector may log its process tree (docs/design.md §9) —
    # that, and only that, under rank 1
    assert any("does not collect" in l and "its process tree included (process_*/rank1)" in l
               for l in sm_lines(res[1][2])), res[1][2]
    hist = histories(mlflow_server, run_ids[0])
    rank1 = {k for k in hist if not k.endswith("/rank0")}
    assert hist and rank1 <= {f"system/{k}/rank1" for k in
                              ("process_count", "process_memory_megabytes",
                               "process_cpu_utilization_percentage")}, sorted(hist)
    assert not list(tmp_path.glob("*.jsonl"))
    tags = tags_of(get_run(mlflow_server, run_ids[0]))
    assert "scopemeter.rank0.node" in tags
    assert not any(k.startswith("scopemeter.rank1.") for k in tags)
    assert tags["scopemeter.collectors"] == "1"
    assert get_run(mlflow_server, run_ids[0])["info"]["status"] == "FINISHED"


def test_all_workers_two_pods_both_collect_into_one_run(scopemeter_bin, mlflow_server, tmp_path):
    res = launch_ranks(scopemeter_bin, mlflow_server, 1, uuid.uuid4().hex, tmp_path)
    for p, out, err in res:
        assert p.returncode == 0, err
    run_ids = {out.strip().splitlines()[-1] for _, out, _ in res}
    assert len(run_ids) == 1, res
    run_id = run_ids.pop()
    hist = histories(mlflow_server, run_id)
    r0 = {k[:-len("/rank0")] for k in hist if k.endswith("/rank0")}
    r1 = {k[:-len("/rank1")] for k in hist if k.endswith("/rank1")}
    assert r0 and r0 == r1, sorted(hist)
    tags = tags_of(get_run(mlflow_server, run_id))
    assert "scopemeter.rank0.node" in tags and "scopemeter.rank1.node" in tags
    assert tags["scopemeter.collectors"] == "2"


def test_rank_without_a_job_id_or_run_id_says_so_and_runs_cmd(scopemeter_bin, mlflow_server,
                                                               tmp_path):
    p = run_cli(scopemeter_bin, ["--all-workers", "--interval", "5", "--", sys.executable, "-c",
                                 PRINT_RUN],
                env=rank_env(mlflow_server, 1, 0, 2, 1, None), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "None"
    assert any("set MLFLOW_RUN_ID" in l for l in sm_lines(p.stderr)), p.stderr
    # it collects (its pod's local rank 0) into a local file: nothing lost silently
    assert list(tmp_path.glob("scopemeter-rank1-*.jsonl"))


@pytest.mark.launchers
@pytest.mark.timeout(480)  # torchrun's own bound (300 s) and the session's mlflow server
def test_torchrun_no_python_ranks_share_one_run(scopemeter_bin, mlflow_server, tmp_path):
    runner = shutil.which("torchrun")
    if not runner:
        if importlib.util.find_spec("torch") is None:  # not imported here: see test_proctree_cow.drive
            pytest.skip("torch not installed (pip install torch==2.13.0)")
        head = [sys.executable, "-m", "torch.distributed.run"]
    else:
        head = [runner]
    cmd = head + ["--nproc-per-node", "2", "--no-python", scopemeter_bin, "run", "--all-workers",
                  "--interval", "0.5", "--", sys.executable, "-c",
                  "import os, time; time.sleep(1); print('RUN', os.environ['RANK'], "
                  "os.environ['MLFLOW_RUN_ID'])"]
    p = subprocess.run(cmd, env=clean_env(MLFLOW_TRACKING_URI=mlflow_server, OMP_NUM_THREADS=1),
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]
    runs = dict(re.findall(r"RUN (\d+) ([0-9a-f]+)", p.stdout))
    assert set(runs) == {"0", "1"} and len(set(runs.values())) == 1, p.stdout
    run_id = runs["0"]
    hist = histories(mlflow_server, run_id)
    # rank 1's only keys, if any: its process tree, logged by the pod's
    # collector (docs/design.md §9)
    assert hist and {k for k in hist if not k.endswith("/rank0")} <= {
        f"system/{k}/rank1" for k in ("process_count", "process_memory_megabytes",
                                      "process_cpu_utilization_percentage")}, sorted(hist)
    assert get_run(mlflow_server, run_id)["info"]["status"] == "FINISHED"
