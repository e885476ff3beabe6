"""Strict inputs, honest lines (docs/design.md §4, §6; docs/cli.md): bad input
gets one line naming it and never a silent default that writes someone
else's keys or leaves a junk run behind.

- a malformed launcher variable (RANK=abc, RANK=-1, WORLD_SIZE=0, RANK=5 with
  WORLD_SIZE=2, ...) is not rank 0 of 1, whether or not RANK is set: one line
  naming the variable and its value; the process records nothing (the CLI still runs CMD; the Python front
  returns False); `probe` shows the same verdict;
- a mistyped command makes no run: one line, exit 127;
- every subcommand parses options the same way: `--opt value` and
  `--opt=value`, plain decimal numbers, one line and exit 2 per usage error.
"""
import json
import subprocess
import sys

import pytest

from conftest import clean_env
from pyfront_util import python_env
from runread import histories, new_run, rest, run_cli, sm_lines

BAD_LAUNCHER_ENVS = [
    ({"RANK": "abc"}, "RANK='abc'"),
    ({"RANK": "-1"}, "RANK='-1'"),
    ({"RANK": "1", "WORLD_SIZE": "0"}, "WORLD_SIZE='0'"),
    ({"RANK": "0", "LOCAL_RANK": "abc"}, "LOCAL_RANK='abc'"),
    ({"RANK": "5", "WORLD_SIZE": "2"}, "RANK=5 is not below WORLD_SIZE=2"),
    ({"SLURM_PROCID": "x"}, "SLURM_PROCID='x'"),
    # one rule whatever else is set (issue 46 item 9): without RANK these
    # passed as rank 0 of 1 with no line
    ({"WORLD_SIZE": "0"}, "WORLD_SIZE='0'"),
    ({"WORLD_SIZE": "abc"}, "WORLD_SIZE='abc'"),
    ({"LOCAL_RANK": "abc"}, "LOCAL_RANK='abc'"),
    ({"LOCAL_RANK": "-1"}, "LOCAL_RANK='-1'"),
]
RANKLESS = BAD_LAUNCHER_ENVS[-4:]


def experiment_runs(uri, name):
    exp = rest(uri, "experiments/get-by-name", params={"experiment_name": name})
    r = rest(uri, "runs/search", {"experiment_ids": [exp["experiment"]["experiment_id"]]})
    return r.get("runs", [])


@pytest.mark.parametrize("env,said", BAD_LAUNCHER_ENVS)
def test_cli_malformed_launcher_variable_records_nothing(scopemeter_bin, mlflow_server,
                                                         tmp_path, env, said):
    name = f"strict-{tmp_path.name}"
    rest(mlflow_server, "experiments/create", {"name": name})
    p = run_cli(scopemeter_bin, ["--interval", "0.2", "--experiment", name, "--",
                                 "sh", "-c", "echo ran; exit 3"],
                env={"MLFLOW_TRACKING_URI": mlflow_server, **env}, cwd=tmp_path)
    assert p.returncode == 3, p.stderr          # CMD ran, its status is ours
    assert "ran" in p.stdout
    lines = sm_lines(p.stderr)
    assert len([l for l in lines if said in l]) == 1, lines
    assert any("records nothing" in l for l in lines), lines
    assert experiment_runs(mlflow_server, name) == []  # no run created
    assert not list(tmp_path.glob("*.jsonl"))           # and no local file


def test_two_malformed_ranks_never_share_rank0_keys(scopemeter_bin, mlflow_server, tmp_path):
    """The collision scopemeter exists to prevent: two processes with a
    malformed RANK on one MLFLOW_RUN_ID used to both write /rank0 keys."""
    run_id = new_run(mlflow_server)
    env = {"MLFLOW_TRACKING_URI": mlflow_server, "MLFLOW_RUN_ID": run_id, "RANK": "abc"}
    procs = [subprocess.Popen([scopemeter_bin, "run", "--interval", "0.2", "--", "sleep", "1"],
                              env=clean_env(**env), stderr=subprocess.PIPE, text=True,
                              cwd=tmp_path) for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert "RANK='abc'" in err
    assert histories(mlflow_server, run_id) == {}


@pytest.mark.parametrize("env,said", BAD_LAUNCHER_ENVS[:3] + RANKLESS)
def test_probe_shows_the_same_verdict(probe_json, env, said):
    out = probe_json(env=env)
    assert out["collect_mode"] == "none"
    assert said in out["identity_invalid"]


def test_probe_text_says_why(scopemeter_bin):
    p = subprocess.run([scopemeter_bin, "probe", "--interval", "0"],
                       env=clean_env(RANK="abc"), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "collects: no — RANK='abc' is not a rank" in p.stdout


@pytest.mark.parametrize("env,launcher", [({"RANK": "abc"}, "torchrun"),
                                          ({"RANK": "5", "WORLD_SIZE": "2"}, "torchrun"),
                                          ({"SLURM_PROCID": "x"}, "slurm")])
def test_probe_never_shows_a_refused_rank_as_rank_0(scopemeter_bin, probe_json, env, launcher):
    """`probe` with RANK=abc printed `rank 0 (local rank 0, world 1, ...
    launcher torchrun)` (issue 33 item 11): a refused rank is no rank of the
    launcher, as `run` and the front treat it (docs/design.md §4).  The
    header says so, the JSON's rank fields are null and it has no tags."""
    p = subprocess.run([scopemeter_bin, "probe", "--interval", "0"], env=clean_env(**env),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    head = p.stdout.splitlines()[0]
    assert head.startswith(f"rank refused (launcher {launcher}: the line below says why), node "), \
        p.stdout
    assert "rank 0 (" not in p.stdout and "world 1" not in p.stdout, p.stdout
    assert "not recorded by this process (its rank is refused)" in p.stdout, p.stdout
    out = probe_json(env=env)
    assert [out[k] for k in ("rank", "local_rank", "world_size", "local_world_size")] == \
        [None] * 4, out
    assert out["launcher"] == launcher and out["tags"] == {}, out
    assert out["identity_invalid"] and out["collect_mode"] == "none", out


@pytest.mark.parametrize("env,said", BAD_LAUNCHER_ENVS[:2])
def test_front_malformed_launcher_variable_returns_false(tmp_path, env, said):
    code = (
        "import mlflow, scopemeter\n"
        f"mlflow.set_tracking_uri('sqlite:///{tmp_path}/m.db')\n"
        "with mlflow.start_run() as r:\n"
        "    print('ENABLED', scopemeter.enable_system_metrics(interval=0.2))\n"
        "c = mlflow.tracking.MlflowClient()\n"
        "print('METRICS', sorted(c.get_run(r.info.run_id).data.metrics))\n")
    p = subprocess.run([sys.executable, "-c", code], env=python_env(**env), cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "ENABLED False" in p.stdout
    assert "METRICS []" in p.stdout
    assert len([l for l in sm_lines(p.stderr) if said in l]) == 1, p.stderr


def test_mistyped_command_makes_no_run(scopemeter_bin, mlflow_server, tmp_path):
    name = f"strict-cmd-{tmp_path.name}"
    rest(mlflow_server, "experiments/create", {"name": name})
    for cmd, code in (["nonexistent_cmd_sm"], 127), (["/nonexistent/dir/cmd"], 127):
        p = run_cli(scopemeter_bin, ["--experiment", name, "--", *cmd],
                    env={"MLFLOW_TRACKING_URI": mlflow_server}, cwd=tmp_path)
        assert p.returncode == code, p.stderr
        lines = sm_lines(p.stderr)
        assert len(lines) == 1 and f"cannot run {cmd[0]}" in lines[0], lines
        assert "no run created" in lines[0]
    # found but not executable: 126, as a shell says
    f = tmp_path / "notexec.sh"
    f.write_text("#!/bin/sh\n")
    f.chmod(0o644)
    p = run_cli(scopemeter_bin, ["--experiment", name, "--", str(f)],
                env={"MLFLOW_TRACKING_URI": mlflow_server}, cwd=tmp_path)
    assert p.returncode == 126, p.stderr
    assert experiment_runs(mlflow_server, name) == []


@pytest.mark.parametrize("args,said", [
    (["probe", "--interval"], "scopemeter probe: --interval needs a value"),
    (["probe", "--interval", "0x10"], "--interval must be a number of seconds between 0 and 3600"),
    (["probe", "--bogus"], "scopemeter probe: unknown option '--bogus'"),
    (["run", "--interval", "0x10", "--", "true"], "got '0x10'"),
    (["run", "--interval", "1e9", "--", "true"], "got '1e9'"),
    (["run", "--interval", "-1", "--", "true"], "got '-1'"),
    (["run", "--experiment", "", "--", "true"], "--experiment needs a non-empty value"),
    (["run", "--startup-timeout", "0", "--", "true"], "--startup-timeout must be"),
    (["run", "--interval=abc", "--", "true"], "got 'abc'"),
    (["run", "--all-workers=1", "--", "true"], "--all-workers takes no value"),
    # one bound in the parser, the docs and the message (issue 33 item 9)
    (["run", "--buffer-points", "10", "--", "true"],
     "--buffer-points must be a whole number between 256 and 100000000, got '10'"),
    (["run", "--buffer-points", "0", "--", "true"], "between 256 and 100000000, got '0'"),
    (["plan", "--workers", "2", "--all-workers", "--one-worker"], "exclude each other"),
    (["plan", "--workers", "2", "--gpus-per-worker", "-1"], "between 0 and 64"),
    (["plan", "--workers=2", "--workers=3"], "--workers given twice"),
])
def test_usage_errors_one_line_exit_2(scopemeter_bin, args, said):
    p = subprocess.run([scopemeter_bin, *args], env=clean_env(), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2, (args, p.stderr)
    assert p.stderr.count("\n") == 1 and said in p.stderr, p.stderr
    assert p.stderr.startswith(f"scopemeter {args[0]}: "), p.stderr  # docs/cli.md
    assert p.stdout == ""


@pytest.mark.parametrize("var,value,said", [
    ("MLFLOW_HTTP_REQUEST_TIMEOUT", "abc", "MLFLOW_HTTP_REQUEST_TIMEOUT must be a whole number of "
     "seconds between 1 and 86400 s, got 'abc'; using the default 120 s"),
    ("MLFLOW_HTTP_REQUEST_TIMEOUT", "0", "got '0'; using the default 120 s"),
    ("SCOPEMETER_INTERVAL", "0x10", "SCOPEMETER_INTERVAL must be a number of seconds between "
     "0.01 and 86400 s, got '0x10'; ignored"),
    ("SCOPEMETER_INTERVAL", " 1", "got ' 1'; ignored"),
])
def test_bad_environment_number_is_one_line(scopemeter_bin, mlflow_server, tmp_path, var, value,
                                            said):
    """A number in the environment goes through the one number parser
    (docs/design.md §8, "Numbers"): a bad one is one warning naming the
    variable, its value and what is used instead — once, though every MLflow
    request reads MLFLOW_HTTP_REQUEST_TIMEOUT — and recording goes on."""
    from runread import get_run, tags_of
    p = run_cli(scopemeter_bin, ["--", "sleep", "0.5"],
                env={"MLFLOW_TRACKING_URI": mlflow_server, var: value}, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    lines = sm_lines(p.stderr)
    assert len([l for l in lines if said in l]) == 1, lines
    assert p.run_id and histories(mlflow_server, p.run_id), p.stderr
    # SCOPEMETER_INTERVAL ignored: the default 10 s (no other source is set)
    assert float(tags_of(get_run(mlflow_server, p.run_id))["scopemeter.interval_s"]) == 10


def test_opt_equals_value_everywhere(scopemeter_bin):
    p = subprocess.run([scopemeter_bin, "probe", "--interval=0", "--json"], env=clean_env(),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["series"]
    p = subprocess.run([scopemeter_bin, "plan", "--workers=4", "--interval=5", "--json"],
                       env=clean_env(), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and json.loads(p.stdout)["interval_s"] == 5


@pytest.mark.parametrize("length", [220, 253])
def test_long_node_name_keeps_every_series(scopemeter_bin, mlflow_server, probe_json, tmp_path,
                                           length):
    """MLflow takes keys of at most 250 characters: a long node name used to
    drop every node_* and rootfs_* series.  Now the node tier is shortened
    (docs/design.md §2), probe lists the very keys run logs, and the node tag
    keeps the full name."""
    node = ("n" * (length - 1)) + "z"
    env = {"NODE_NAME": node}
    want = {s["key"] for s in probe_json(env=env)["series"]}
    assert want and all(len(k) <= 250 for k in want), sorted(want)
    assert any(k.startswith("system/node_memory_usage_percentage/") for k in want)
    p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sleep", "1.5"],
                env={"MLFLOW_TRACKING_URI": mlflow_server, **env}, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert not any("naming rule" in l or "appeared" in l for l in sm_lines(p.stderr)), p.stderr
    got = set(histories(mlflow_server, p.run_id))
    assert got == want
    from runread import get_run, tags_of
    assert tags_of(get_run(mlflow_server, p.run_id))["scopemeter.rank0.node"] == node


# ---- attaching says what it attaches to; steps continue ------------------------------

def end_run(uri, run_id, status="FINISHED"):
    rest(uri, "runs/update", {"run_id": run_id, "status": status,
                              "end_time": int(__import__("time").time() * 1000)})


def test_cli_reattach_to_finished_run_continues_steps(scopemeter_bin, mlflow_server, tmp_path):
    from runread import assert_steps_continue
    run_id = new_run(mlflow_server)
    env = {"MLFLOW_TRACKING_URI": mlflow_server}
    p1 = run_cli(scopemeter_bin, ["--run-id", run_id, "--interval", "0.3", "--", "sleep", "1"],
                 env=env, cwd=tmp_path)
    assert p1.returncode == 0, p1.stderr
    assert any(f"recording into run {run_id} (--run-id, RUNNING)" in l
               for l in sm_lines(p1.stderr)), p1.stderr
    first = histories(mlflow_server, run_id)
    last = max(s for h in first.values() for s, _, _ in h)
    end_run(mlflow_server, run_id, "FAILED")
    p2 = run_cli(scopemeter_bin, ["--interval", "0.3", "--", "sleep", "1"],
                 env={**env, "MLFLOW_RUN_ID": run_id}, cwd=tmp_path)
    assert p2.returncode == 0, p2.stderr
    lines = sm_lines(p2.stderr)
    assert any(f"recording into run {run_id} (MLFLOW_RUN_ID, FAILED)" in l for l in lines), lines
    assert any(f"run {run_id} is FAILED; recording into it anyway" in l for l in lines), lines
    assert any(f"steps continue at {last + 1}" in l for l in lines), lines
    both = histories(mlflow_server, run_id)
    assert set(both) == set(first)
    # from 0, once each: no restart, no interleaving (a rate may lack the first
    # recording's final window: runread.steps_ok_across_recordings)
    counts = assert_steps_continue(both)
    from runread import RATE_KEY
    assert all(n > last + (0 if RATE_KEY.search(k) else 1) for k, n in counts.items()), counts


def test_cli_experiment_beats_a_stale_run_id(scopemeter_bin, mlflow_server, tmp_path):
    stale = new_run(mlflow_server)
    name = f"strict-exp-{tmp_path.name}"
    p = run_cli(scopemeter_bin, ["--experiment", name, "--interval", "0.3", "--", "sleep", "0.5"],
                env={"MLFLOW_TRACKING_URI": mlflow_server, "MLFLOW_RUN_ID": stale},
                cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    lines = sm_lines(p.stderr)
    assert any(f"MLFLOW_RUN_ID={stale} is ignored: --experiment {name} asks for a new run" in l
               for l in lines), lines
    assert p.run_id and p.run_id != stale
    assert [r["info"]["run_id"] for r in experiment_runs(mlflow_server, name)] == [p.run_id]
    assert histories(mlflow_server, stale) == {}


@pytest.mark.parametrize("store", ["sqlite", "server"])
def test_front_resumed_run_continues_steps(tmp_path, mlflow_server, store):
    """mlflow.start_run(run_id=...) resumes an ended run: the front's steps go
    on after the earlier ones (REST sink and MlflowClient path alike)."""
    uri = f"sqlite:///{tmp_path}/m.db" if store == "sqlite" else mlflow_server
    code = (
        "import time, mlflow, scopemeter\n"
        f"mlflow.set_tracking_uri({uri!r})\n"
        "with mlflow.start_run() as r:\n"
        "    assert scopemeter.enable_system_metrics(interval=0.3)\n"
        "    time.sleep(1)\n"
        "    scopemeter.disable_system_metrics()\n"
        "with mlflow.start_run(run_id=r.info.run_id):\n"
        "    assert scopemeter.enable_system_metrics(interval=0.3)\n"
        "    time.sleep(1)\n"
        "    scopemeter.disable_system_metrics()\n"
        "c = mlflow.tracking.MlflowClient()\n"
        "for k in c.get_run(r.info.run_id).data.metrics:\n"
        "    print('STEPS', k, sorted(m.step for m in c.get_metric_history(r.info.run_id, k)))\n")
    p = subprocess.run([sys.executable, "-c", code], env=python_env(), cwd=tmp_path,
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    from runread import steps_ok_across_recordings
    steps = [(l.split(" ", 2)[1][len("system/"):], json.loads(l.split(" ", 2)[2]))
             for l in p.stdout.splitlines() if l.startswith("STEPS system/")]
    assert steps
    for s in steps:  # from 0, no step written twice (a rate may lack a recording's last window)
        assert steps_ok_across_recordings("system/" + s[0], s[1]) is None, s
    assert any("steps continue at" in l for l in sm_lines(p.stderr)), p.stderr


def test_capi_monitors_check_the_run_without_reading_it_and_continue_steps(mlflow_server):
    """The sink's own run check (C API monitors, tests/tools/many_collectors; no
    resolution's runs/get given): the rank's node tag written first
    (runs/set-tag) and the histories of the rank's own keys, never runs/get
    or runs/update, which read every latest metric of the run (docs/rest.md
    "The run check").  Monitors started again on the same run continue
    their steps after their last."""
    import os
    from faultproxy import FaultProxy
    from runread import assert_steps_continue
    drv = os.path.join(os.environ["SCOPEMETER_BUILD"], "tests", "tools", "many_collectors")
    run_id = new_run(mlflow_server)
    proxy = FaultProxy(mlflow_server)
    n = 3
    try:
        outs = []
        for _ in range(2):
            p = subprocess.run([drv, proxy.uri, run_id, str(n), "1e6", "0.3", "1.2", "30"],
                               capture_output=True, text=True, timeout=120)
            assert p.returncode == 0, p.stderr[-3000:]
            outs.append(p.stderr)
        paths = [r.path for r in proxy.log()]
        tagged = sorted(r.json()["key"] for r in proxy.log("/runs/set-tag"))
    finally:
        proxy.close()
    assert not [q for q in paths if "/runs/get?" in q or q.endswith("/runs/update")], paths
    assert tagged == sorted(f"scopemeter.rank{r}.node" for r in range(n) for _ in range(2))
    looked = [q for q in paths if "/metrics/get-history?" in q]
    assert 2 * n <= len(looked) <= 2 * n * 3, looked  # up to 3 keys a rank
    first = [ln for ln in sm_lines(outs[0]) if "steps continue at" in ln]
    again = [ln for ln in sm_lines(outs[1]) if "steps continue at" in ln]
    assert first == [] and len(again) == n, outs[1]
    counts = assert_steps_continue(histories(mlflow_server, run_id))
    assert all(c >= 3 for c in counts.values()), counts  # two recordings, no restart at 0


# ---- wrong server, the right message ----------------------------------------------

def test_wrong_path_prefix_is_said_as_such(scopemeter_bin, mlflow_server, tmp_path):
    """The server answers 404 with an HTML page: no MLflow API under that
    path.  Neither "run X does not exist" nor the raw HTML body."""
    uri = mlflow_server + "/wrong-prefix"
    run_id = new_run(mlflow_server)
    for extra in (["--run-id", run_id], []):
        p = run_cli(scopemeter_bin, [*extra, "--interval", "1", "--", "true"],
                    env={"MLFLOW_TRACKING_URI": uri}, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        text = "\n".join(sm_lines(p.stderr))
        assert "no MLflow REST API at this tracking URI (a wrong path prefix?" in text, text
        assert "does not exist" not in text and "<!" not in text.lower(), text
        assert p.run_id is None


def test_uri_without_host_is_said(scopemeter_bin, tmp_path):
    p = run_cli(scopemeter_bin, ["--interval", "1", "--", "true"],
                env={"MLFLOW_TRACKING_URI": "http://"}, cwd=tmp_path)
    assert p.returncode == 0
    text = "\n".join(sm_lines(p.stderr))
    assert "tracking URI 'http://' has no host" in text, text
    assert "resolve host" not in text


def test_https_to_plain_http_port_is_said(scopemeter_bin, mlflow_server, tmp_path):
    uri = mlflow_server.replace("http://", "https://")
    p = run_cli(scopemeter_bin, ["--interval", "1", "--startup-timeout", "20", "--", "true"],
                env={"MLFLOW_TRACKING_URI": uri}, cwd=tmp_path)
    assert p.returncode == 0
    text = "\n".join(sm_lines(p.stderr))
    assert "the server answers plain HTTP there? (use http://)" in text, text
    assert p.took < 15, p.took  # refused at once, not retried until the startup bound


def test_front_wrong_prefix_returns_false(tmp_path, mlflow_server):
    code = ("import mlflow, scopemeter\n"
            f"mlflow.set_tracking_uri({mlflow_server!r})\n"
            "with mlflow.start_run() as r:\n"
            "    pass\n"
            f"mlflow.set_tracking_uri({mlflow_server + '/wrong-prefix'!r})\n"
            "import os; os.environ['MLFLOW_RUN_ID'] = r.info.run_id\n"
            "print('ENABLED', scopemeter.enable_system_metrics(interval=0.5))\n")
    p = subprocess.run([sys.executable, "-c", code], env=python_env(), cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert "ENABLED False" in p.stdout, (p.stdout, p.stderr)
    assert "a wrong path prefix?" in p.stderr, p.stderr


def test_sysroot_is_said_where_a_file_cannot_be_opened(probe_json, tmp_path):
    (tmp_path / "proc").mkdir()
    out = probe_json(sysroot=tmp_path)
    notes = [n for n in out["notes"] if "/proc/stat" in n]
    assert notes and f"(paths under SCOPEMETER_SYSROOT={tmp_path})" in notes[0], out["notes"]



@pytest.mark.parametrize("bad", ["../x", "a/b", "x" * 300, "x?y=1"])
@pytest.mark.parametrize("store", ["local", "server"])
def test_front_bad_run_id_is_named(mlflow_server, tmp_path, bad, store):
    """MLFLOW_RUN_ID that is not a run id: one line naming it (not an
    'invalid monitor setting' with unfilled %g placeholders), False, and
    nothing recorded into a store that would refuse it anyway."""
    uri = mlflow_server if store == "server" else f"sqlite:///{tmp_path}/mlflow.db"
    code = ("import scopemeter; print('RESULT', scopemeter.enable_system_metrics(interval=1)); "
            "scopemeter.disable_system_metrics()")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path, env=python_env(MLFLOW_RUN_ID=bad, MLFLOW_TRACKING_URI=uri))
    assert "RESULT False" in p.stdout, p.stdout + p.stderr
    lines = sm_lines(p.stderr)
    assert len([l for l in lines if "not an MLflow run id" in l]) == 1, lines
    assert not any("%g" in l or "invalid monitor setting" in l for l in lines), lines
    assert not any("collecting" in l for l in lines), lines


# ---- names holding control characters are escaped (issue 33 item 8) ------------------

EVIL_NODE = "../../ evil/node\nx"
EVIL_SHOWN = "../../ evil/node\\nx"   # docs/design.md §2: \n, \r, \t, \xHH, \\


def test_a_node_name_with_a_newline_is_escaped_in_probe_and_the_tag(scopemeter_bin,
                                                                   mlflow_server, probe_json,
                                                                   tmp_path):
    """NODE_NAME=$'../../ evil/node\\nx': the key was sanitised, but the node
    tag kept the newline and probe's header printed it raw, splitting it in
    two lines.  Now probe's header, probe's tags and the tag `run` writes all
    carry the name escaped; the keys are unchanged."""
    env = {"NODE_NAME": EVIL_NODE}
    p = subprocess.run([scopemeter_bin, "probe", "--interval", "0"], env=clean_env(**env),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].endswith(f", node {EVIL_SHOWN}"), lines[:3]
    assert lines[1].startswith("collects"), lines[:3]
    out = probe_json(env=env)
    assert out["tags"]["scopemeter.rank0.node"] == EVIL_SHOWN
    assert out["node"] == EVIL_NODE  # the name as read: JSON escapes it itself
    want = {s["key"] for s in out["series"]}
    assert "system/node_memory_usage_percentage/.._..__evil_node_x-ef96e526/rank0" in want

    r = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sleep", "1"],
                env={"MLFLOW_TRACKING_URI": mlflow_server, **env}, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert all(l.startswith("scopemeter") for l in r.stderr.splitlines()), r.stderr
    from runread import get_run, tags_of
    assert tags_of(get_run(mlflow_server, r.run_id))["scopemeter.rank0.node"] == EVIL_SHOWN
    assert set(histories(mlflow_server, r.run_id)) == want


@pytest.mark.parametrize("env,said", [
    ({"RANK": "a\nb"}, "RANK='a\\nb' is not a rank"),
    ({"RANK": "0", "WORLD_SIZE": "\x1b[2J"}, "WORLD_SIZE='\\x1b[2J' is not a world size"),
    ({"MLFLOW_RUN_ID": "ab\ncd"}, "not an MLflow run id: ab\\ncd (MLFLOW_RUN_ID)"),
])
def test_identity_strings_with_control_characters_stay_on_one_line(scopemeter_bin,
                                                                   mlflow_server, tmp_path,
                                                                   env, said):
    """A launcher's value or a run id holding a newline (or a terminal's
    escape) is said escaped, in one line."""
    p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "true"],
                env={"MLFLOW_TRACKING_URI": mlflow_server, **env}, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert all(l.startswith("scopemeter") for l in p.stderr.splitlines()), p.stderr
    assert "\x1b" not in p.stderr
    assert any(said in l for l in sm_lines(p.stderr)), p.stderr


def test_python_surfaces_escape_with_the_engines_function(tmp_path):
    """_native.shown is sm__shown: the Python tables escape a name as the
    engine tags it, with one rule."""
    code = ("from scopemeter import _native\n"
            f"print(ascii(_native.shown({EVIL_NODE!r})), ascii(_native.shown('a\\x00b\\\\c\\x7f')),\n"
            "      sep='|')\n")
    p = subprocess.run([sys.executable, "-c", code], env=python_env(), cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().split("|") == [ascii(EVIL_SHOWN), ascii("a\\x00b\\\\c\\x7f")], \
        p.stdout


def test_a_job_id_with_a_newline_tags_no_raw_newline(scopemeter_bin, mlflow_server, tmp_path):
    """TORCHELASTIC_RUN_ID=$'j\\nx' on rank 0 of 2: the job tag used to keep
    the newline.  Escaped (docs/design.md §2) it holds a backslash, which the
    run search cannot quote, so the job shares no run (docs/cli.md): no job
    tag, and no tag of the run holds a control character."""
    env = {"MLFLOW_TRACKING_URI": mlflow_server, "RANK": "0", "WORLD_SIZE": "2",
           "TORCHELASTIC_RUN_ID": "j\nx"}
    p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "true"], env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.run_id, p.stderr
    assert all(l.startswith("scopemeter") for l in p.stderr.splitlines()), p.stderr
    from runread import get_run, tags_of
    tags = tags_of(get_run(mlflow_server, p.run_id))
    assert "scopemeter.job_id" not in tags, tags
    assert not [v for v in tags.values() if any(ord(c) < 0x20 for c in v)], tags
