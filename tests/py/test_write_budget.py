"""The write budget (docs/design.md §5) on the three surfaces: `scopemeter run
--write-budget` / SCOPEMETER_WRITE_BUDGET, `scopemeter plan --write-budget`
and `enable_system_metrics(write_budget=)` / `plan(write_budget=)`.

Unset, the seed's rule holds exactly: the receipt line, the plan's lines and
the tags are those of 10 x ceil(n/4) s.  Set, the period a collector takes is
the rule's over n and its own series (the receipt says both), equal to what
`plan` prints for the same job, and its rows/s within the budget.  A bad
budget is refused in one line by the one number parser.  (The rule itself,
for every n from 1 to 1024: tests/c/test_budget.c.)"""
import json
import math
import os
import re
import subprocess
import sys

import pytest

from conftest import clean_env
from pyfront_util import new_run, python_env, read_run, staged_package
from runread import get_run, new_experiment, run_cli, tags_of

RECEIPT = re.compile(r"collecting (\d+) series every ([0-9.]+) s \((\d+) collectors?"
                     r"(?:, write budget ([0-9.]+) rows/s)?\)")


def seed_period(n, interval=1.0):
    """docs/design.md §5 before the budget: with n > 4, at least 10 x ceil(n/4) s."""
    return max(interval, 10.0 * math.ceil(n / 4)) if n > 4 else interval


def rule_period(n, series, budget, interval=1.0):
    """The budget's rule: ceil(n x series x 100 / budget) / 100 s, at most an hour,
    never below the user's period."""
    need = math.ceil(n * series * 100.0 / budget) / 100.0
    return max(interval, min(need, 3600.0))


def pod(n):
    return dict(RANK=0, LOCAL_RANK=0, WORLD_SIZE=n, LOCAL_WORLD_SIZE=1)


def run_jsonl(bin_, tmp_path, args, **env):
    path = tmp_path / "points.jsonl"
    if path.exists():
        path.unlink()
    p = subprocess.run([os.path.abspath(bin_), "run", "--all-workers", "--interval", "1",
                        *args, "--jsonl", str(path), "--", "true"],
                       env=clean_env(**env), capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    tags = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r["kind"] == "tag":
            tags[r["key"]] = r["value"]
    return p.stderr, tags


def receipt(err):
    m = RECEIPT.search(err)
    assert m, err
    return int(m.group(1)), float(m.group(2)), int(m.group(3)), m.group(4)


def plan(bin_, *args, check=True):
    return subprocess.run([bin_, "plan", *args], capture_output=True, text=True, timeout=30,
                          check=check)


def plan_json(bin_, *args):
    return json.loads(plan(bin_, *args, "--json").stdout)


@pytest.mark.parametrize("n", [1, 4, 5, 8, 64, 1024])
def test_unset_is_the_seed_rule_in_receipt_tags_and_plan(scopemeter_bin, tmp_path, n):
    err, tags = run_jsonl(scopemeter_bin, tmp_path, [], **pod(n))
    series, period, collectors, budget = receipt(err)
    assert (period, collectors, budget) == (seed_period(n), n, None), err
    assert "write budget" not in err
    assert ("write-load cap: %d collectors > 4" % n in err) == (n > 4), err
    assert tags["scopemeter.interval_s"] == "%g" % seed_period(n)
    assert tags["scopemeter.collectors"] == str(n)
    assert not any("budget" in k for k in tags), tags

    out = plan(scopemeter_bin, "--workers", str(n), "--all-workers", "--interval", "1").stdout
    want = "interval     %g s x 1 sample = one point per series every %g s" % (
        seed_period(n), seed_period(n))
    if n > 4:
        want += " (write-load cap: %d collectors > 4, raised from 1 s)" % n
    assert want in out.splitlines(), out
    assert "budget" not in out and "server" not in out
    got = plan_json(scopemeter_bin, "--workers", str(n), "--all-workers", "--interval", "1")
    assert got["period_s"] == seed_period(n) and got["write_budget"] is None


@pytest.mark.parametrize("n,budget", [(1, 0.5), (8, 100), (64, 50), (256, 7.5), (1024, 3)])
def test_set_period_is_the_rule_and_what_plan_prints(scopemeter_bin, tmp_path, n, budget):
    err, tags = run_jsonl(scopemeter_bin, tmp_path, ["--write-budget", str(budget)], **pod(n))
    series, period, collectors, said = receipt(err)
    assert collectors == n and float(said) == budget, err
    assert period == rule_period(n, series, budget), (err, series)
    assert n * series / period <= budget or period == 3600.0
    assert tags["scopemeter.interval_s"] == "%g" % period
    assert tags["scopemeter.write_budget_rows_per_s"] == "%g" % budget

    # the plan of the same job (no container limit, no GPU: this machine's
    # collectors) names the same period and the rows/s it gives
    got = plan_json(scopemeter_bin, "--workers", str(n), "--all-workers", "--interval", "1",
                    "--no-container-limits", "--write-budget", str(budget))
    assert got["write_budget"] == budget
    assert got["period_s"] == rule_period(n, got["series_per_collector_recorded"], budget)
    assert got["rows_per_s"] == pytest.approx(got["series"] / got["period_s"])
    assert got["rows_per_hour"] == pytest.approx(got["rows_per_s"] * 3600)
    if got["series_per_collector_recorded"] == series:
        assert got["period_s"] == period
    text = plan(scopemeter_bin, "--workers", str(n), "--all-workers", "--interval", "1",
                "--no-container-limits", "--write-budget", str(budget)).stdout
    assert "write budget %g rows/s; the job writes %.4g rows/s" % (
        budget, got["rows_per_s"]) in text, text
    assert "server       %d core" % got["server_cores"] in text
    assert "measured: 352 rows/s a core" in text
    # docs/rest.md, "Sizing": 352 rows/s a core measured, sized at half load
    need = max(budget, got["rows_per_s"])
    assert got["server_cores"] == max(1, math.ceil(need / 176 - 1e-9)), (need, got)


def test_the_plan_of_a_gpu_job_meets_the_budget(scopemeter_bin):
    """1024 one-GPU pods (34 series each with their process tree: 12 of the
    GPU at the default level, docs/series.md "Levels") at 700 rows/s: a point
    every 49.74 s, under the minute, within 700 rows/s."""
    got = plan_json(scopemeter_bin, "--workers", "1024", "--all-workers", "--gpus-per-worker",
                    "1", "--write-budget", "700")
    assert got["series_per_collector_recorded"] == 34
    assert got["period_s"] == 49.74 == rule_period(1024, 34, 700, 10)
    assert got["rows_per_s"] <= 700 and got["budget_met"] is True
    # unmet: the longest period, said in the text and the JSON
    low = plan_json(scopemeter_bin, "--workers", "1024", "--all-workers", "--gpus-per-worker",
                    "1", "--write-budget", "1")
    assert low["period_s"] == 3600 and low["budget_met"] is False
    assert low["budget_period_s"] == 34816
    text = plan(scopemeter_bin, "--workers", "1024", "--all-workers", "--gpus-per-worker", "1",
                "--write-budget", "1").stdout
    assert "not met: the budget asks a period of 34816 s" in text


def test_unmet_budget_is_one_warning_and_a_point_an_hour(scopemeter_bin, tmp_path):
    err, tags = run_jsonl(scopemeter_bin, tmp_path, ["--write-budget", "0.01"], **pod(1024))
    series, period, _, _ = receipt(err)
    assert period == 3600.0
    lines = [ln for ln in err.splitlines() if "cannot be met" in ln]
    assert len(lines) == 1 and lines[0].startswith("scopemeter: warning: write budget 0.01"), err
    assert "need a period of %g s" % (math.ceil(1024 * series * 100 / 0.01) / 100) in lines[0]


@pytest.mark.parametrize("value", ["0", "-1", "nan", "abc", "10/s", "5rows", "1e3", "0x10",
                                   "", "100000000"])
def test_bad_budget_refused_in_one_line(scopemeter_bin, tmp_path, value):
    for cmd in (["plan", "--workers", "8"], ["run", "--jsonl", str(tmp_path / "x.jsonl")]):
        args = [scopemeter_bin, *cmd, "--write-budget", value]
        if cmd[0] == "run":
            args += ["--", "true"]
        p = subprocess.run(args, env=clean_env(), capture_output=True, text=True, timeout=30,
                           cwd=tmp_path)
        assert p.returncode == 2, p.stderr
        if value:
            assert p.stderr == ("scopemeter %s: --write-budget must be a number between 0.01 "
                                "and 10000000, got '%s'\n" % (cmd[0], value)), p.stderr
        else:
            assert p.stderr.count("\n") == 1 and "--write-budget" in p.stderr


@pytest.mark.parametrize("value", ["0", "abc", "5/s"])
def test_bad_budget_in_the_environment_is_ignored_in_one_line(scopemeter_bin, tmp_path, value):
    err, tags = run_jsonl(scopemeter_bin, tmp_path, [], SCOPEMETER_WRITE_BUDGET=value, **pod(64))
    lines = [ln for ln in err.splitlines() if "SCOPEMETER_WRITE_BUDGET" in ln]
    assert lines == ["scopemeter: warning: SCOPEMETER_WRITE_BUDGET must be a number between "
                     "0.01 and 10000000, got '%s'; ignored (no write budget: the default rule)"
                     % value], err
    assert receipt(err)[1] == seed_period(64)
    assert "scopemeter.write_budget_rows_per_s" not in tags


def test_budget_from_the_environment_and_the_option_beats_it(scopemeter_bin, tmp_path):
    err, tags = run_jsonl(scopemeter_bin, tmp_path, [], SCOPEMETER_WRITE_BUDGET="20", **pod(64))
    series, period, _, said = receipt(err)
    assert float(said) == 20 and period == rule_period(64, series, 20)
    err, tags = run_jsonl(scopemeter_bin, tmp_path, ["--write-budget", "40"],
                          SCOPEMETER_WRITE_BUDGET="20", **pod(64))
    series, period, _, said = receipt(err)
    assert float(said) == 40 and period == rule_period(64, series, 40)
    assert tags["scopemeter.write_budget_rows_per_s"] == "40"


def test_run_tags_on_a_tracking_server(scopemeter_bin, mlflow_server):
    """Through the REST sink into a real server: the budget and the period it
    set are run tags, the receipt says them."""
    p = run_cli(scopemeter_bin, ["--all-workers", "--interval", "1", "--write-budget", "12.5",
                                 "--", "true"],
                env={"MLFLOW_TRACKING_URI": mlflow_server,
                     "MLFLOW_EXPERIMENT_NAME": new_experiment(), **pod(64)})
    assert p.returncode == 0 and p.run_id, p.stderr
    series, period, _, said = receipt(p.stderr)
    assert float(said) == 12.5 and period == rule_period(64, series, 12.5)
    tags = tags_of(get_run(mlflow_server, p.run_id))
    assert tags["scopemeter.write_budget_rows_per_s"] == "12.5"
    assert tags["scopemeter.interval_s"] == "%g" % period
    assert tags["scopemeter.collectors"] == "64"


def test_python_front_write_budget(mlflow_server):
    run_id = new_run(mlflow_server)
    code = ("import scopemeter, sys\n"
            "ok = scopemeter.enable_system_metrics(all_workers=True, interval=1, "
            "write_budget=12.5)\n"
            "scopemeter.disable_system_metrics()\n"
            "bad = [scopemeter.enable_system_metrics(write_budget=v) for v in (0, -1, "
            "float('nan'))]\n"
            "try:\n"
            "    scopemeter.enable_system_metrics(write_budget='12')\n"
            "except TypeError as e:\n"
            "    print('TypeError', e)\n"
            "print('RESULT', ok, bad)\n")
    env = python_env(MLFLOW_TRACKING_URI=mlflow_server, MLFLOW_RUN_ID=run_id, **pod(64))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert "RESULT True [False, False, False]" in p.stdout, (p.stdout, p.stderr)
    assert "TypeError enable_system_metrics(): write_budget must be a number or None" in p.stdout
    series, period, _, said = receipt(p.stderr)
    assert float(said) == 12.5 and period == rule_period(64, series, 12.5)
    refused = [ln for ln in p.stderr.splitlines() if "write_budget must be" in ln]
    assert refused == [
        "scopemeter: warning: enable_system_metrics(): write_budget must be between 0.01 and "
        "10000000, got 0; system metrics not recorded",
        "scopemeter: warning: enable_system_metrics(): write_budget must be between 0.01 and "
        "10000000, got -1; system metrics not recorded",
        # one message for 0, -1 and nan (issue 46 item 13)
        "scopemeter: warning: enable_system_metrics(): write_budget must be between 0.01 and "
        "10000000, got nan; system metrics not recorded"], p.stderr
    _, tags = read_run(mlflow_server, run_id)
    assert tags["scopemeter.write_budget_rows_per_s"] == "12.5"
    assert tags["scopemeter.interval_s"] == "%g" % period


def test_python_plan_write_budget_matches_the_cli(scopemeter_bin):
    root = staged_package()
    if root and root not in sys.path:
        sys.path.insert(0, root)
    import scopemeter
    py = scopemeter.plan(workers=256, all_workers=True, gpus_per_worker=1, write_budget=100)
    cli = plan_json(scopemeter_bin, "--workers", "256", "--all-workers", "--gpus-per-worker",
                    "1", "--write-budget", "100")
    for k, v in py.items():
        assert cli[k] == pytest.approx(v), (k, cli[k], v)
    assert py["period_s"] == rule_period(256, 34, 100, 10)  # 34: 31 of a 1-GPU pod + 3 of its tree
    assert scopemeter.plan(workers=256, all_workers=True)["write_budget"] is None
    for bad in (0, -3, float("nan")):
        with pytest.raises(ValueError, match="write"):
            scopemeter.plan(workers=8, write_budget=bad)
    with pytest.raises(TypeError):
        scopemeter.plan(workers=8, write_budget="100")
