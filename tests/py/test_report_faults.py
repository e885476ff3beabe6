"""`scopemeter report` where a user met it wrong (issue 21, items 9-15; docs/report.md).

Each test runs the command (the C CLI, which execs Python) or
scopemeter.report() in a real process, against runs in a real store: a
`scopemeter run` against the session's MLflow server, or runs written into a
sqlite store through MLflow's own client with the engine's key and tag
formats (docs/design.md §1-§3), where another program's non-finite points or
nine ranks on one node are the point.

- an empty RUN_ID (an unset $RUN) is a usage error, not "the most recent run";
- a deleted run says so, in the table and the JSON;
- a run shorter than one window: its span is the run's, never before it;
- `| head -1` and a reader that closed its end: no traceback, SIGPIPE's death;
- the bundle layout (`pip install --target DIR`) reports with its own package,
  with no scopemeter installed and with another one first on PYTHONPATH;
- a missing file: store is not created, an unknown MLFLOW_EXPERIMENT_ID is
  named, an mlflow.py in the working directory is not imported (3.9 too);
- the picture of one-point series, of 8 ranks, its legends; no container
  limit: the node's numbers in the table and one verdict per node; NaN and
  infinities written by another program;
- mlflow-skinny alone (the wheel's dependency) on the default sqlite store:
  one line saying what to install (tier `wheel`: a venv from the index).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import clean_env
from pyfront_util import staged_package
from test_report import assert_fits, cli_report, rank_of, report_env
from test_wheel import PYTHONS  # {"3.9": pyenv's python3.9, ...}

START_MS = 1_800_000_000_000
RUN_TAGS = {"scopemeter.interval_s": "10", "scopemeter.samples": "1"}


def write_points(uri, series, tags, end_ms, status="FINISHED", experiment="report-faults"):
    """A run in the store at uri: series {key: [(ms after the start, step, value)]}
    (a point's timestamp is its window's end, every key of a window on one
    timestamp, as the engine logs them), tags {key: value}.  Returns its id."""
    from mlflow.entities import Metric, RunTag
    from mlflow.tracking import MlflowClient
    c = MlflowClient(tracking_uri=uri)
    exp = c.get_experiment_by_name(experiment)
    exp_id = exp.experiment_id if exp else c.create_experiment(experiment)
    run_id = c.create_run(exp_id, start_time=START_MS).info.run_id
    metrics = [Metric(key, float(v), START_MS + off, step)
               for key, pts in series.items() for off, step, v in pts]
    c.log_batch(run_id, metrics=metrics)
    c.log_batch(run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])
    c.set_terminated(run_id, status, end_time=START_MS + end_ms)
    return run_id


def nine_ranks_run(uri):
    """torchrun's 9 ranks on one node without a container limit, a job of
    3.1 s at the default 10 s window: one point per series, logged at stop."""
    series, tags = {}, dict(RUN_TAGS, **{"scopemeter.collectors": "9"})
    for r in range(9):
        off = 3100 + 40 * r  # each rank stops a little later
        series[f"system/node_memory_usage_megabytes/n1/rank{r}"] = [(off, 0, 4000.0 + r)]
        series[f"system/node_memory_usage_percentage/n1/rank{r}"] = [(off, 0, 40.0 + r)]
        series[f"system/node_cpu_utilization_percentage/n1/rank{r}"] = [(off, 0, 20.0 + r)]
        tags[f"scopemeter.rank{r}.node"] = "n1"
        tags[f"scopemeter.rank{r}.cgroup"] = "none: no limit"
    return write_points(uri, series, tags, end_ms=3500)


def non_finite_run(uri):
    """A limited container whose keys another program also wrote NaN, +-inf
    (MLflow's SQL store keeps them as +-float max) and 1e300 into."""
    nan, inf = float("nan"), float("inf")
    ws = [100.0, nan, inf, -inf, 1e300, 200.0]
    series = {
        "system/container_memory_usage_megabytes/rank0":
            [(10_000 * (i + 1), i, v) for i, v in enumerate(ws)],
        "system/container_cpu_utilization_percentage/rank0":
            [(10_000 * (i + 1), i, nan) for i in range(6)],
        "system/node_memory_usage_percentage/n1/rank0":
            [(10_000 * (i + 1), i, v) for i, v in enumerate([inf, 10, 12, 10, 10, 10])],
    }
    tags = dict(RUN_TAGS, **{"scopemeter.collectors": "1", "scopemeter.rank0.node": "n1",
                             "scopemeter.rank0.cgroup": "v1 /x mem=512MiB cpu=1.0",
                             "scopemeter.rank0.mem_peak_sampled_mb": "nan",
                             "scopemeter.rank0.memory_peak_mb": "inf",
                             "scopemeter.rank0.oom_kill": "0"})
    return write_points(uri, series, tags, end_ms=70_000)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A sqlite store with the runs above; {"uri", "dir", name: run id}."""
    d = tmp_path_factory.mktemp("faults-store")
    uri = f"sqlite:///{d}/mlflow.db"
    out = {"uri": uri, "dir": d, "nine": nine_ranks_run(uri), "nonfinite": non_finite_run(uri)}
    out["deleted"] = non_finite_run(uri)
    from mlflow.tracking import MlflowClient
    MlflowClient(tracking_uri=uri).delete_run(out["deleted"])
    return out


def at_once(*calls):
    """Each call (a function of no argument) in its own thread, all at once;
    their results in the order given.  The reports of a test are independent
    processes that only read the store (each its own output, its own picture
    file): most of each one's time is its interpreter importing MLflow, on
    one core, so two cores run two of them in the time of one."""
    with ThreadPoolExecutor(len(calls)) as ex:
        futures = [ex.submit(c) for c in calls]
        return [f.result() for f in futures]


def strict_json(text):
    """json.loads that refuses NaN and Infinity, as every other JSON parser does."""
    def refuse(c):
        raise ValueError(f"not JSON: {c}")
    return json.loads(text, parse_constant=refuse)


def png_rgb(path):
    """The picture as drawn: an array of height x width x (r, g, b)."""
    import numpy
    from PIL import Image
    return numpy.asarray(Image.open(path).convert("RGB")).astype(int)


def count_near(px, ref, tol):
    """How many pixels of px are within tol of the colour ref in every channel."""
    import numpy
    return int(numpy.all(numpy.abs(px - numpy.array(ref)) <= tol, axis=-1).sum())


TAB_BLUE, TAB_ORANGE, GREY = (31, 119, 180), (255, 127, 14), (128, 128, 128)


# ---- 9: an empty run id --------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_empty_run_id_is_a_usage_error(scopemeter_bin, store):
    env = report_env(MLFLOW_TRACKING_URI=store["uri"])
    for args in ([""], ["  ", "--json"]):
        p = cli_report(scopemeter_bin, *args, env=env)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert p.stdout == ""
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and "RUN_ID is empty" in lines[0], p.stderr
    # the API: an empty id is not "no id" either
    code = ("import sys, scopemeter\n"
            "try:\n"
            "    scopemeter.report(run_id='', tracking_uri=sys.argv[1])\n"
            "except scopemeter.ReportError as e:\n"
            "    print('ReportError', e)\n")
    p = subprocess.run([sys.executable, "-c", code, store["uri"]], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.startswith("ReportError the run id is empty"), \
        p.stdout + p.stderr


# ---- 10: a deleted run ---------------------------------------------------------------------


@pytest.mark.timeout(200)
def test_deleted_run_says_it_is_deleted(scopemeter_bin, store):
    env = report_env(MLFLOW_TRACKING_URI=store["uri"])
    table, active, deleted = at_once(
        lambda: cli_report(scopemeter_bin, store["deleted"], env=env),
        lambda: cli_report(scopemeter_bin, store["nonfinite"], "--json", env=env),
        lambda: cli_report(scopemeter_bin, store["deleted"], "--json", env=env))
    p = table
    assert p.returncode == 0, p.stderr
    head = p.stdout.splitlines()[0]
    assert head.startswith(f"run {store['deleted']} ") and head.endswith("FINISHED  (deleted)")
    p = active
    assert p.returncode == 0, p.stderr
    assert strict_json(p.stdout)["lifecycle_stage"] == "active"
    p = deleted
    assert strict_json(p.stdout)["lifecycle_stage"] == "deleted"


# ---- 11 and 15: a run shorter than one window, under `scopemeter run` -------------------------


@pytest.mark.timeout(300)
def test_run_shorter_than_one_window(scopemeter_bin, mlflow_server, tmp_path):
    """`scopemeter run -- sleep 3` at the default 10 s window: one point per
    series, at the stop.  The recording began with the run, not one window
    before its point; the picture draws the points (markers); on this host's
    unlimited cgroup the table shows the node's memory and CPU."""
    p = subprocess.run([scopemeter_bin, "run", "--", "sleep", "3"],
                       env=clean_env(MLFLOW_TRACKING_URI=mlflow_server), capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    run_id = [ln.split("created run ")[1].split()[0] for ln in p.stderr.splitlines()
              if "created run " in ln][0]
    env = report_env(MLFLOW_TRACKING_URI=mlflow_server)
    png = tmp_path / "short.png"
    # the table too, at the same time (read below where the runner has no limit)
    t, table = at_once(
        lambda: cli_report(scopemeter_bin, run_id, "--json", "--plot", str(png), env=env),
        lambda: cli_report(scopemeter_bin, run_id, env=env))
    assert t.returncode == 0, t.stderr
    rep = strict_json(t.stdout)
    assert rep["period_s"] == 10
    run_s = (rep["end_time_ms"] - rep["start_time_ms"]) / 1000
    r = rank_of(rep, 0)
    assert r["points"] == 1
    # at least the command's 3 s, at most the run's own life (rounded to 0.1)
    assert 3.0 <= r["recording_span_s"] <= run_s + 0.05, (r, run_s)
    assert r["started_after_run_s"] >= 0
    assert r["recording_start_ms"] >= rep["start_time_ms"]
    assert "started_late" not in r["verdict_codes"]

    # the picture: every one-point series is drawn (a marker), in the axes
    # (left of the legends: the axes end at 76 % of the width at most)
    px = png_rgb(png)
    plot_area = px[:, 100:int(0.74 * px.shape[1])]
    for color in (TAB_ORANGE,) + ((TAB_BLUE,) if r["container_memory_limit_megabytes"] is None
                                  else ()):
        assert count_near(plot_area, color, 10) >= 20, color

    if r["container_memory_limit_megabytes"] is None:  # this host: no limit on the runner
        t = table
        assert t.returncode == 0, t.stderr
        assert_fits(t.stdout)
        lines = t.stdout.splitlines()
        i = lines.index("node (no container memory limit: the node's memory is the limit that "
                        "counts)")
        row = next(ln for ln in lines[i:] if ln.startswith("  rank 0"))
        assert row.split()[2:] == [f"{r['node_memory_peak_megabytes']:.1f}",
                                   f"{r['node_memory_peak_percentage']:.1f}",
                                   f"{r['node_cpu_mean_percentage']:.1f}",
                                   f"{r['node_cpu_peak_percentage']:.1f}"], row
        assert not any(ln.startswith("memory (MB") for ln in lines)  # no table of dashes


# ---- 15: nine ranks without a limit, one point each; non-finite points -----------------------


@pytest.mark.timeout(300)
def test_nine_ranks_without_a_limit(scopemeter_bin, store, tmp_path):
    env = report_env(MLFLOW_TRACKING_URI=store["uri"])
    png = tmp_path / "nine.png"
    t, table = at_once(
        lambda: cli_report(scopemeter_bin, store["nine"], "--json", "--plot", str(png), env=env),
        lambda: cli_report(scopemeter_bin, store["nine"], env=env))
    assert t.returncode == 0, t.stderr
    rep = strict_json(t.stdout)
    for r in rep["ranks"]:
        # one window of a 3.1 s job: the span is the run's, not the window's
        assert r["recording_span_s"] == pytest.approx(3.1 + 0.04 * r["rank"], abs=0.051)
        assert r["started_after_run_s"] == 0.0
        assert r["verdict_codes"] == ["no_limit"]  # per rank, as before
    # the run's list: one verdict for the node, naming its ranks
    assert len(rep["verdicts"]) == 1, rep["verdicts"]
    v = rep["verdicts"][0]
    assert v["code"] == "no_limit" and v["ranks"] == list(range(9)) and v["node"] == "n1"
    assert "node memory peak 48.0 %" in v["text"]

    t = table
    assert t.returncode == 0, t.stderr
    assert_fits(t.stdout)
    lines = t.stdout.splitlines()
    verdicts = lines[lines.index("verdicts (most severe first)") + 1:]
    assert verdicts[0].startswith("ranks 0-8: no container memory limit on node n1")
    assert not any(ln.startswith("rank ") for ln in verdicts), verdicts
    rows = [ln.split() for ln in lines if ln.startswith("  rank 4 ")]
    assert ["4004.0", "44.0", "24.0", "24.0"] in [x[2:] for x in rows], rows

    # the picture of 9 ranks, heatmaps (more than 8): the title right above
    # the first map, no band of white between them; nothing cut at the
    # picture's edge; each rank's one point drawn (the node's memory and CPU:
    # no rank has a limit)
    px = png_rgb(png)
    w = px.shape[1]
    assert w == 1600
    ink = (px.sum(axis=-1) < 720).sum(axis=1)  # per row: pixels not (near) white
    title = int((ink > 0).argmax())
    frame = int((ink > 0.5 * w).argmax())  # the first panel's top spine
    assert frame - title < 120, (title, frame)
    assert (px[:, -4:] == 255).all(), "a legend is cut at the picture's edge"
    plot_area = px[:, 100:int(0.74 * w)]
    coloured = (plot_area.max(axis=-1) - plot_area.min(axis=-1)) > 40  # not white, grey, black
    assert coloured.sum() >= 9 * 20 * 100, coloured.sum()


@pytest.mark.timeout(200)
def test_non_finite_points_of_another_program(scopemeter_bin, store):
    env = report_env(MLFLOW_TRACKING_URI=store["uri"])
    t, table = at_once(lambda: cli_report(scopemeter_bin, store["nonfinite"], "--json", env=env),
                       lambda: cli_report(scopemeter_bin, store["nonfinite"], env=env))
    assert t.returncode == 0, t.stderr
    rep = strict_json(t.stdout)  # no NaN, no Infinity
    r = rank_of(rep, 0)
    assert r["container_memory_peak_megabytes"] == 200.0   # the measured points only
    assert r["container_cpu_mean_percentage"] is None       # every point NaN
    assert r["node_memory_peak_percentage"] == 12.0
    assert r["container_memory_kernel_peak_megabytes"] is None
    t = table
    assert t.returncode == 0, t.stderr
    assert_fits(t.stdout)
    for word in t.stdout.split():
        assert len(word) < 40 and word.lower() not in ("nan", "inf", "-inf"), word


# ---- 12: a reader that stops reading ----------------------------------------------------------


@pytest.mark.timeout(200)
def test_closed_pipe_ends_quietly(scopemeter_bin, store):
    """A reader gone before the report is written (deterministic: the read
    end is closed at once) ends the command by SIGPIPE, as `git log | head`,
    with nothing on stderr; `| head -1` prints the first line, no traceback."""
    env = report_env(MLFLOW_TRACKING_URI=store["uri"])

    def closed(extra):
        p = subprocess.Popen([scopemeter_bin, "report", store["nine"], *extra], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.close()
        err = p.stderr.read()
        return p.wait(timeout=120), err

    sh = (f'"$0" report {store["nine"]} | head -1; echo "status ${{PIPESTATUS[0]}}"; '
          f'"$0" report {store["nine"]} --json | head -c 20; echo; '
          'echo "status ${PIPESTATUS[0]}"')
    *ends, p = at_once(lambda: closed([]), lambda: closed(["--json"]),
                       lambda: subprocess.run(["bash", "-c", sh, scopemeter_bin], env=env,
                                              capture_output=True, text=True, timeout=200))
    for status, err in ends:
        assert status == -signal.SIGPIPE, err
        assert err == b"", err
    lines = p.stdout.splitlines()
    assert lines[0].startswith(f"run {store['nine']} ")
    assert lines[2:5] == ["{", '  "schema": 1,', '  "'], lines  # 20 bytes
    assert lines[1] in ("status 0", "status 141") and lines[5] in ("status 0", "status 141")
    assert p.stderr == "", p.stderr


# ---- 14: the store, the experiment, the working directory ---------------------------------


@pytest.mark.timeout(300)
def test_store_experiment_and_working_directory(scopemeter_bin, store, tmp_path):
    missing = tmp_path / "nostore"
    # an mlflow.py where the user stands is not MLflow
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / "mlflow.py").write_text("raise SystemExit('the mlflow.py of the working directory')\n")
    env = report_env(MLFLOW_TRACKING_URI=store["uri"])
    # Python 3.9 (no -P there): the same through the CLI; 3.9 here has no
    # MLflow, so the report says that, not the working directory's module
    py39 = PYTHONS.get("3.9") or shutil.which("python3.9")
    on39 = bool(py39) and subprocess.run(
        [py39, "-c", "import sys; assert sys.version_info[:2] == (3, 9)"],
        capture_output=True).returncode == 0
    # every report of the test at once (at_once), then each checked as before
    calls = [
        lambda: cli_report(scopemeter_bin, env=report_env(MLFLOW_ALLOW_FILE_STORE="true",
                                                          MLFLOW_TRACKING_URI=f"file://{missing}")),
        lambda: cli_report(scopemeter_bin, env=report_env(MLFLOW_TRACKING_URI=store["uri"],
                                                          MLFLOW_EXPERIMENT_ID="999")),
        lambda: cli_report(scopemeter_bin, store["nine"], "--json", env=env, cwd=cwd),
        lambda: subprocess.run([sys.executable, "-m", "scopemeter", "report", store["nine"],
                                "--json"], env=env, capture_output=True, text=True, timeout=120,
                               cwd=cwd)]
    if on39:
        calls += [
            lambda: cli_report(scopemeter_bin, store["nine"], cwd=cwd,
                               env=dict(env, SCOPEMETER_PYTHON=py39)),
            lambda: subprocess.run([py39, "-m", "scopemeter", "report", store["nine"]], env=env,
                                   capture_output=True, text=True, timeout=120, cwd=cwd)]
    nostore, noexp, cli_cwd, module_cwd, *runs39 = at_once(*calls)

    p = nostore
    assert p.returncode == 1
    assert len(p.stderr.strip().splitlines()) == 1 and "no MLflow store" in p.stderr, p.stderr
    assert not missing.exists()

    p = noexp
    assert p.returncode == 1
    assert p.stderr.strip() == "scopemeter: no such experiment '999' (MLFLOW_EXPERIMENT_ID)"

    for p in (cli_cwd, module_cwd):
        assert p.returncode == 0, p.stderr
        assert strict_json(p.stdout)["run_id"] == store["nine"]

    for p in runs39:
        assert "working directory" not in p.stderr, p.stderr
        assert p.returncode == 0 or "No module named 'mlflow'" in p.stderr, p.stderr


# ---- 13: the bundle layout ----------------------------------------------------------------


def stage_bundle(scopemeter_bin, root):
    """DIR as `pip install --target DIR` lays out the wheel: DIR/bin/scopemeter
    and DIR/scopemeter/ (this tree's .py files and the extension just built)."""
    pkg_src = staged_package()
    if not pkg_src:
        pytest.skip("needs SCOPEMETER_BUILD (the extension built from this tree)")
    (root / "bin").mkdir(parents=True)
    shutil.copy(scopemeter_bin, root / "bin" / "scopemeter")
    shutil.copytree(os.path.join(pkg_src, "scopemeter"), root / "scopemeter",
                    ignore=shutil.ignore_patterns("__pycache__"), symlinks=False)
    return root


@pytest.mark.timeout(300)
def test_bundle_reports_with_its_own_package(scopemeter_bin, store, tmp_path):
    """The bundle's CLI, with python3 (MLflow's) from PATH: where the
    interpreter cannot import any scopemeter (the one it may have installed
    hidden by a scopemeter.py that fails to import, as a missing one does),
    and where another scopemeter comes first on sys.path (PYTHONPATH), with
    and without SCOPEMETER_PYTHON.  Each of those two would end the report if
    it were imported."""
    bundle = stage_bundle(scopemeter_bin, tmp_path / "bundle")
    missing = tmp_path / "missing"
    missing.mkdir()
    (missing / "scopemeter.py").write_text("raise ImportError('No module named scopemeter')\n")
    other = tmp_path / "other" / "scopemeter"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("raise SystemExit('the other scopemeter')\n")
    (other / "_report").mkdir()
    (other / "_report" / "__init__.py").write_text("")
    exe = str(bundle / "bin" / "scopemeter")
    base = clean_env(MLFLOW_TRACKING_URI=store["uri"],
                     PATH=os.pathsep.join([os.path.dirname(sys.executable), "/usr/bin", "/bin"]))
    base.pop("PYTHONPATH", None)
    base.pop("SCOPEMETER_PYTHON", None)
    cases = [{"PYTHONPATH": str(missing)}, {"PYTHONPATH": str(other.parent)},
             {"PYTHONPATH": str(other.parent), "SCOPEMETER_PYTHON": sys.executable}]
    bare = subprocess.run([sys.executable, "-c", "import scopemeter"], env=base,
                          capture_output=True, cwd=tmp_path).returncode != 0
    if bare:  # this interpreter has none installed: the plain case too
        cases.append({})

    def report(extra):
        return subprocess.run([exe, "report", store["nine"], "--json"], env=dict(base, **extra),
                              capture_output=True, text=True, timeout=180, cwd=tmp_path)
    done = at_once(*[lambda extra=extra: report(extra) for extra in cases])
    for extra, p in zip(cases, done):
        assert p.returncode == 0, (extra, p.stderr)
        assert strict_json(p.stdout)["run_id"] == store["nine"]


# ---- issue 33 item 7: a Python without MLflow ------------------------------------------------

# Installed before anything else is imported: this interpreter has no MLflow
# (the import fails as it does where MLflow was never installed).
NO_MLFLOW = r"""
import sys
class _NoMlflow:
    def find_spec(self, name, path=None, target=None):
        if name == "mlflow" or name.startswith("mlflow."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _NoMlflow())
"""


@pytest.mark.timeout(120)
def test_report_without_mlflow_is_a_report_error(store, tmp_path):
    """scopemeter.report() where MLflow cannot be imported raises ReportError
    (docs/python.md: the function's own errors are ReportError) with one
    line saying what is missing; the command says the same line, exit 1."""
    code = NO_MLFLOW + (
        "import scopemeter\n"
        "try:\n"
        "    scopemeter.report(sys.argv[1], tracking_uri=sys.argv[2])\n"
        "except scopemeter.ReportError as e:\n"
        "    print('ReportError:', e)\n")
    env = report_env()
    p = subprocess.run([sys.executable, "-c", code, store["nine"], store["uri"]], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    line = p.stdout.strip()
    assert line.startswith("ReportError: cannot read the run: this Python ("), p.stdout
    assert "cannot import MLflow (No module named 'mlflow')" in line and \
        line.endswith("pip install mlflow"), line
    assert len(p.stdout.splitlines()) == 1, p.stdout
    # the command: the same blocker as a sitecustomize of this interpreter
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_MLFLOW)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    p = subprocess.run([sys.executable, "-m", "scopemeter", "report", store["nine"]],
                       env=dict(env, MLFLOW_TRACKING_URI=store["uri"]), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 1, p.stdout + p.stderr
    assert p.stderr.startswith("scopemeter: cannot read the run: this Python ("), p.stderr
    assert len(p.stderr.splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr


# ---- issue 46 item 11: the wheel's own dependency, mlflow-skinny, on a sqlite store ---------

SKINNY = os.environ.get("SCOPEMETER_SKINNY_VENV",
                        "/var/cache/scopemeter/venv-mlflow-skinny-py%d.%d" % sys.version_info[:2])


@pytest.fixture(scope="session")
def skinny_python():
    """A venv of this Python with mlflow-skinny alone from the index (what
    `pip install scopemeter` brings: no SQLAlchemy, no alembic), cached
    across sessions in SKINNY; made in SKINNY.tmp and renamed when whole."""
    py = os.path.join(SKINNY, "bin", "python")
    if not os.path.exists(os.path.join(SKINNY, ".complete")):
        tmp = SKINNY + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(os.path.dirname(SKINNY), exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", tmp], check=True, timeout=300)
        p = subprocess.run([os.path.join(tmp, "bin", "pip"), "install", "-q",
                            "--disable-pip-version-check", "mlflow-skinny"],
                           capture_output=True, text=True, timeout=1800)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        open(os.path.join(tmp, ".complete"), "w").close()
        shutil.rmtree(SKINNY, ignore_errors=True)
        os.rename(tmp, SKINNY)
    q = subprocess.run([py, "-c", "import importlib.util as u, mlflow; "
                        "print(u.find_spec('sqlalchemy') is None, u.find_spec('alembic') is None)"],
                       capture_output=True, text=True, timeout=120)
    assert q.stdout.split() == ["True", "True"], (q.stdout, q.stderr)  # skinny, as the wheel's
    return py


@pytest.mark.wheel
@pytest.mark.timeout(2400)
def test_report_with_mlflow_skinny_on_sqlite_says_what_to_install(scopemeter_bin, store,
                                                                   skinny_python, tmp_path):
    """`scopemeter report` where the wheel's dependency (mlflow-skinny) is all
    the Python has, on the default sqlite store (./mlflow.db, no
    MLFLOW_TRACKING_URI): MLflow's UnsupportedModelRegistryStoreURIException
    named no fix (exit 1).  Now one line: what to install (SQLAlchemy and
    alembic, or mlflow), exit 1, no traceback; the same for
    scopemeter.report() as a ReportError."""
    shutil.copy(os.path.join(store["dir"], "mlflow.db"), tmp_path / "mlflow.db")
    env = report_env()
    env.pop("MLFLOW_TRACKING_URI", None)
    env["SCOPEMETER_PYTHON"] = skinny_python
    p = cli_report(scopemeter_bin, store["nine"], env=env, cwd=str(tmp_path))
    want = (f"scopemeter: cannot read the run: the sqlite store sqlite:///{tmp_path}/mlflow.db "
            f"needs SQLAlchemy and alembic, and this Python ({skinny_python}) has no sqlalchemy "
            f"or alembic (mlflow-skinny has neither): pip install sqlalchemy alembic, or pip "
            f"install mlflow")
    assert (p.returncode, p.stderr.strip()) == (1, want), (p.returncode, p.stderr)
    code = ("import sys, scopemeter\n"
            "try:\n"
            "    scopemeter.report(sys.argv[1])\n"
            "except scopemeter.ReportError as e:\n"
            "    print('ReportError:', e)\n")
    p = subprocess.run([skinny_python, "-c", code, store["nine"]], env=env, cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=120)
    assert p.stdout.strip() == "ReportError: " + want[len("scopemeter: "):], (p.stdout,
                                                                               p.stderr)


# ---- issue 33 item 5: late against what the job did -------------------------------------------


def ranks_starting_at(uri, starts_s, interval_s=0.5, windows=6):
    """A run whose rank r records from starts_s[r] s after the run's start
    (its first point one window later, as the engine logs them), each rank
    in its own 1 GiB container, with its end tags (a complete recording)."""
    step_ms = int(interval_s * 1000)
    series, tags = {}, {"scopemeter.interval_s": str(interval_s), "scopemeter.samples": "1",
                        "scopemeter.collectors": str(len(starts_s))}
    for r, start in enumerate(starts_s):
        pts = [(int(start * 1000) + (i + 1) * step_ms, i, 200.0 + i) for i in range(windows)]
        series[f"system/container_memory_usage_megabytes/rank{r}"] = pts
        tags.update({f"scopemeter.rank{r}.node": "n1",
                     f"scopemeter.rank{r}.cgroup": "v1 /pod mem=1024MiB cpu=1.0",
                     f"scopemeter.rank{r}.oom_kill": "0"})
    end_ms = int(max(starts_s) * 1000) + (windows + 1) * step_ms
    return write_points(uri, series, tags, end_ms=end_ms, experiment="report-late")


@pytest.mark.timeout(240)
def test_started_late_is_against_the_job(scopemeter_bin, mlflow_server):
    """The recommended launch (docs/cli.md): the launching script creates the
    run and exports MLFLOW_RUN_ID, then torchrun starts 3 ranks that record
    from 11 s after the run's creation: no rank is late.  One rank starting
    30 s after the others is; so is a job whose ranks all start 95 s after
    the run (docs/report.md, "The late rule").  Runs written through MLflow's
    client into a real server, read by the command."""
    uri = mlflow_server
    clean = ranks_starting_at(uri, [11.0, 11.1, 11.3])
    one_late = ranks_starting_at(uri, [11.0, 11.2, 41.0])
    all_late = ranks_starting_at(uri, [95.0, 95.2, 95.4])
    env = report_env(MLFLOW_TRACKING_URI=uri)
    reps = at_once(*(lambda run=run: cli_report(scopemeter_bin, run, "--json", env=env)
                     for run in (clean, one_late, all_late)),
                   lambda: cli_report(scopemeter_bin, one_late, env=env))
    for p in reps:
        assert p.returncode == 0, p.stderr
    clean_rep, one_rep, all_rep = (json.loads(p.stdout) for p in reps[:3])
    assert [r["started_after_run_s"] for r in clean_rep["ranks"]] == [11.0, 11.1, 11.3]
    assert not [v for v in clean_rep["verdicts"] if v["code"] == "started_late"], \
        clean_rep["verdicts"]
    late = [v for v in one_rep["verdicts"] if v["code"] == "started_late"]
    assert [v["rank"] for v in late] == [2], one_rep["verdicts"]
    assert rank_of(one_rep, 2)["started_after_first_rank_s"] == 30.0
    assert late[0]["text"].startswith("recording started late: 30 s after the job's first rank "
                                      "to record (one window is 0.5 s)"), late[0]["text"]
    assert "rank 2: recording started late: 30 s after the job's first rank" in reps[3].stdout, \
        reps[3].stdout
    late = [v for v in all_rep["verdicts"] if v["code"] == "started_late"]
    assert [v["rank"] for v in late] == [0, 1, 2], all_rep["verdicts"]
    assert late[0]["text"].startswith("recording started late: 95 s after the run"), late[0]


# ---- issue 33 item 8, the report's part: a name holding control characters ------------------

EVIL_NODE = "../../ evil/node\nx"  # NODE_NAME=$'../../ evil/node\nx'


@pytest.mark.timeout(180)
def test_node_name_with_a_newline_stays_on_its_line(scopemeter_bin, tmp_path):
    """Two ranks on a node whose name holds a newline (the tag keeps the
    name; the key's tier is sanitised): the table's node line and the
    verdict print it escaped, on one line, so the table is not split and no
    line reads as a row of its own; the JSON keeps the name as it is."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    series, tags = {}, dict(RUN_TAGS, **{"scopemeter.collectors": "2"})
    for r in range(2):
        series[f"system/node_memory_usage_megabytes/.._..__evil_node_x-ef96e526/rank{r}"] = \
            [(10_000, 0, 4000.0 + r)]
        series[f"system/node_memory_usage_percentage/.._..__evil_node_x-ef96e526/rank{r}"] = \
            [(10_000, 0, 40.0 + r)]
        tags[f"scopemeter.rank{r}.node"] = EVIL_NODE
        tags[f"scopemeter.rank{r}.cgroup"] = "none: no limit"
    run_id = write_points(uri, series, tags, end_ms=11_000)
    env = report_env(MLFLOW_TRACKING_URI=uri)
    t, j = at_once(lambda: cli_report(scopemeter_bin, run_id, env=env),
                   lambda: cli_report(scopemeter_bin, run_id, "--json", env=env))
    assert t.returncode == 0 and j.returncode == 0, t.stderr + j.stderr
    shown = "../../ evil/node\\nx"  # the newline as its escape, backslash and n
    lines = t.stdout.splitlines()
    assert lines.count(shown) == 2, t.stdout  # the node line of the node and the cpu tables
    assert not [ln for ln in lines if ln == "x" or ln.startswith("x ")], t.stdout
    assert f"ranks 0, 1: no container memory limit on node {shown}: only node values" in \
        t.stdout, t.stdout
    assert_fits(t.stdout)
    rep = json.loads(j.stdout)
    assert list(rep["nodes"]) == [EVIL_NODE] and rank_of(rep, 0)["node"] == EVIL_NODE
