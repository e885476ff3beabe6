"""`scopemeter report` and `scopemeter.report()` on real runs (docs/report.md).

Every run here is recorded for real: `scopemeter run` against the session's
MLflow server, or the Python front into a sqlite store; pods are real cgroups
with limits (v1 here) and real network namespaces.  The numbers of the report
are checked against the kernel's own counters, read by the test from the
cgroup's files:

- a job that climbs to ~91 % of its memory limit and holds there: verdict
  "memory peak", limit, peak, headroom and kernel peak against
  memory.limit_in_bytes, the working set the job read at its top and
  memory.max_usage_in_bytes; the CLI's JSON equals scopemeter.report()'s;
  the table fits 100 columns; --plot writes a 1600 px wide PNG;
- a job OOM-killed under `scopemeter run`: verdict "OOM-killed" first, the
  count equal to memory.oom_control's oom_kill;
- a run without limits, found without a run id in the local default store
  (./mlflow.db) beside a newer run that holds no series; a missing store is
  one line, and no database is created;
- two pods (two netns + two cgroups) with two ranks on one node: grouped under
  the node, each against its own limit, each pod's own traffic;
- a late call and a process killed before its end tags;
- the command's plumbing: --plot without matplotlib, `python -m scopemeter
  --version`, the C CLI finding (or not finding) a Python that imports
  scopemeter;
- what filled the pod (docs/design.md §9): runs written through MLflow's
  client into a real sqlite store with §9's series and tags in its exact
  formats (verdicts, JSON values, the table, the picture), and a run of an
  older engine without them, which reports as before;
- the exact limits (docs/design.md §3: memory_limit_bytes, cpu_limit_cores,
  cpu_quota_us, cpu_period_us) used where the rounded display tag cannot give
  them, and keys read with the engine's own parse (a metric the naming rule
  cannot have written is not a series, nor a rank).
"""
import json
import os
import shutil
import signal
import struct
import subprocess
import sys

import pytest

from conftest import ROOT, clean_env, free_port
from test_gpu import TOTAL as GPU_TOTAL, lib, machine, used as gpu_used  # noqa: F401 (fixtures)
from pyfront_util import (Pod, _v1_mounts, cgroups_usable, netns_usable, new_run, python_env,
                          read_run, run_pods_on_one_node, staged_package)

NODE = "report-node-a"
WIDTH = 100


# ---- helpers -----------------------------------------------------------------------------


def report_env(**extra):
    """The environment of a report: the working tree's package (python_env),
    and the C CLI pointed at this interpreter."""
    env = python_env(**extra)
    env["SCOPEMETER_PYTHON"] = sys.executable
    return env


def cli_report(scopemeter_bin, *args, env=None, cwd=None, timeout=180):
    return subprocess.run([scopemeter_bin, "report", *args], env=env or report_env(),
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)


def cli_json(scopemeter_bin, run_id, **kw):
    p = cli_report(scopemeter_bin, run_id, "--json", **kw)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def py_report(run_id, tracking_uri, cwd=None):
    """scopemeter.report() in a fresh interpreter (the package of this tree)."""
    code = ("import json, sys, scopemeter\n"
            "print(json.dumps(scopemeter.report(sys.argv[1], tracking_uri=sys.argv[2])))\n")
    p = subprocess.run([sys.executable, "-c", code, run_id, tracking_uri], env=report_env(),
                       capture_output=True, text=True, timeout=180, cwd=cwd)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def memory_dir(pod):
    return next(d for d in pod.dirs if os.path.exists(os.path.join(d, "memory.limit_in_bytes")))


def read_int(path):
    with open(path) as f:
        return int(f.read())


def oom_control_kills(memdir):
    with open(os.path.join(memdir, "memory.oom_control")) as f:
        fields = dict(line.split() for line in f)
    return int(fields["oom_kill"])


def png_size(path):
    """(width, height) from the PNG signature and its IHDR chunk."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", head[:8]
    assert head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def assert_fits(text):
    for line in text.splitlines():
        assert len(line) <= WIDTH, line


def rank_of(rep, rank):
    return next(r for r in rep["ranks"] if r["rank"] == rank)


def need_v1_pods():
    why = cgroups_usable()
    if why:
        pytest.skip(why)
    if "memory" not in _v1_mounts():
        pytest.skip("the kernel-counter checks read cgroup v1 files (memory.max_usage_in_bytes, "
                    "memory.oom_control); this host has no v1 memory hierarchy")


# A job that climbs to ~91 % of its cgroup's memory limit in 4 MB steps,
# reading the working set as the kernel counts it (usage - inactive file, as
# docs/design.md §1 defines it) after each step, then holds the top for a few
# windows and writes what it read there.
CLIMB = r"""
import json, sys, time
memdir, out, target = sys.argv[1], sys.argv[2], float(sys.argv[3])
def ws():
    u = int(open(memdir + "/memory.usage_in_bytes").read())
    st = dict(l.split() for l in open(memdir + "/memory.stat"))
    return max(0, u - int(st["total_inactive_file"]))
limit = int(open(memdir + "/memory.limit_in_bytes").read())
held = []
while ws() < target * limit:
    b = bytearray(4 << 20)
    b[::4096] = b"x" * len(b[::4096])
    held.append(b)
    time.sleep(0.02)
tops = []
for _ in range(12):              # hold the top for ~2.4 s (about 5 windows of 0.5 s)
    tops.append(ws())
    time.sleep(0.2)
json.dump({"top_min": min(tops), "top_max": max(tops), "limit": limit}, open(out, "w"))
"""

# A job that allocates until the kernel kills it.
HOG = r"""
import time
held = []
while True:
    b = bytearray(8 << 20)
    b[::4096] = b"x" * len(b[::4096])
    held.append(b)
    time.sleep(0.02)
"""


# ---- a job near its limit, and an OOM kill, under `scopemeter run` (server) ------------------


@pytest.mark.backends
def test_climb_to_90_percent_of_the_limit(scopemeter_bin, mlflow_server, tmp_path):
    need_v1_pods()
    out = tmp_path / "top.json"
    with Pod("climb", 256 << 20, 1.0) as pod:
        memdir = memory_dir(pod)
        p = subprocess.run(
            pod.wrap([scopemeter_bin, "run", "--interval", "0.5", "--", sys.executable, "-c",
                      CLIMB, memdir, str(out), "0.91"]),
            env=clean_env(MLFLOW_TRACKING_URI=mlflow_server), capture_output=True, text=True,
            timeout=180)
        assert p.returncode == 0, p.stderr
        # the kernel's own counters, read after the job (watermarks stay)
        kernel_limit = read_int(os.path.join(memdir, "memory.limit_in_bytes"))
        kernel_max = read_int(os.path.join(memdir, "memory.max_usage_in_bytes"))
        kernel_ooms = oom_control_kills(memdir)
    top = json.loads(out.read_text())
    run_id = [ln.split("created run ")[1].split()[0] for ln in p.stderr.splitlines()
              if "created run " in ln][0]

    rep = cli_json(scopemeter_bin, run_id, env=report_env(MLFLOW_TRACKING_URI=mlflow_server))
    assert rep["run_id"] == run_id and rep["found_by"] == "argument"
    assert rep["period_s"] == 0.5 and rep["collectors"] == 1
    r = rank_of(rep, 0)
    limit_mb = kernel_limit / 1e6
    assert r["container_memory_limit_megabytes"] == pytest.approx(limit_mb, abs=0.06)
    # the peak working set: what the job read at its top, within the sampling
    # (the engine samples between the job's reads; scopemeter itself is in the
    # cgroup for both)
    assert top["top_min"] >= 0.9 * kernel_limit
    assert top["top_min"] / 1e6 - 1.0 <= r["container_memory_peak_megabytes"]
    assert r["container_memory_peak_megabytes"] <= kernel_max / 1e6 + 0.05  # rounded to 0.1
    assert r["container_memory_peak_megabytes"] <= top["top_max"] / 1e6 + 0.01 * limit_mb
    assert r["container_memory_peak_percentage"] == pytest.approx(
        100 * r["container_memory_peak_megabytes"] / r["container_memory_limit_megabytes"],
        abs=0.06)
    assert r["container_memory_headroom_megabytes"] == pytest.approx(
        r["container_memory_limit_megabytes"] - r["container_memory_peak_megabytes"], abs=0.11)
    # the kernel's peak is memory.max_usage_in_bytes, as the end tag read it
    assert r["container_memory_kernel_peak_megabytes"] == pytest.approx(kernel_max / 1e6,
                                                                        abs=0.051)
    assert r["oom_kill"] == kernel_ooms == 0
    assert r["end_tags"] is True and r["stopped_early"] is False
    # the verdict: peak >= 90 % with the headroom, and nothing worse
    assert r["verdict_codes"][0] == "memory_high", r["verdicts"]
    assert "oom_killed" not in r["verdict_codes"]
    text = r["verdicts"][0]
    assert f"{r['container_memory_peak_percentage']:.1f} %" in text
    assert f"{r['container_memory_headroom_megabytes']:.1f} MB of headroom" in text
    # the node's view beside it: the contrast the charts exist for
    assert r["node_memory_peak_percentage"] < r["container_memory_peak_percentage"]
    assert r["points"] >= 3 and r["recording_span_s"] > 0

    # one implementation: the Python API says the same
    assert py_report(run_id, mlflow_server) == rep

    # the table: 100 columns, the numbers and the verdict in it
    t = cli_report(scopemeter_bin, run_id, env=report_env(MLFLOW_TRACKING_URI=mlflow_server))
    assert t.returncode == 0, t.stderr
    assert_fits(t.stdout)
    assert f"{r['container_memory_peak_megabytes']:.1f}" in t.stdout
    assert "rank 0: memory peak" in t.stdout

    # the picture
    png = tmp_path / "climb.png"
    t = cli_report(scopemeter_bin, run_id, "--plot", str(png),
                   env=report_env(MLFLOW_TRACKING_URI=mlflow_server))
    assert t.returncode == 0, t.stderr
    w, h = png_size(png)
    assert w == 1600 and h > 300
    assert png.stat().st_size > 10_000


def test_oom_killed_under_scopemeter_run(scopemeter_bin, mlflow_server):
    need_v1_pods()
    with Pod("oom", 128 << 20, 1.0) as pod:
        memdir = memory_dir(pod)
        p = subprocess.run(
            pod.wrap([scopemeter_bin, "run", "--interval", "0.5", "--", sys.executable, "-c",
                      HOG]),
            env=clean_env(MLFLOW_TRACKING_URI=mlflow_server), capture_output=True, text=True,
            timeout=180)
        kernel_ooms = oom_control_kills(memdir)
        kernel_max = read_int(os.path.join(memdir, "memory.max_usage_in_bytes"))
    assert p.returncode == 128 + signal.SIGKILL, p.stderr  # the job died of the OOM killer
    assert kernel_ooms >= 1
    run_id = [ln.split("created run ")[1].split()[0] for ln in p.stderr.splitlines()
              if "created run " in ln][0]

    rep = cli_json(scopemeter_bin, run_id, env=report_env(MLFLOW_TRACKING_URI=mlflow_server))
    r = rank_of(rep, 0)
    assert r["oom_kill"] == kernel_ooms
    assert r["verdict_codes"][0] == "oom_killed"
    assert r["verdicts"][0].startswith("OOM-killed")
    assert rep["verdicts"][0]["code"] == "oom_killed" and rep["verdicts"][0]["rank"] == 0
    assert r["container_memory_kernel_peak_megabytes"] == pytest.approx(kernel_max / 1e6,
                                                                        abs=0.051)
    t = cli_report(scopemeter_bin, run_id, env=report_env(MLFLOW_TRACKING_URI=mlflow_server))
    assert t.returncode == 0, t.stderr
    assert "rank 0: OOM-killed" in t.stdout
    assert_fits(t.stdout)


# ---- no limits, the local default store, no run id ----------------------------------------


FRONT_RUN = r"""
import sys, time, mlflow, scopemeter
with mlflow.start_run() as run:
    assert scopemeter.enable_system_metrics(interval=0.5)
    time.sleep(2.0)
print(run.info.run_id)
with mlflow.start_run():            # a newer run without scopemeter series
    mlflow.log_metric("loss", 1.0)
"""


class Unlimited(Pod):
    """A fresh cgroup with no memory and no CPU limit (the host's root has none)."""

    def __init__(self, name):
        super().__init__(name, 1 << 30, 1.0)
        for d in self.dirs:
            for f, v in (("memory.limit_in_bytes", "-1"), ("cpu.cfs_quota_us", "-1"),
                         ("memory.max", "max"), ("cpu.max", "max")):
                if os.path.exists(os.path.join(d, f)):
                    with open(os.path.join(d, f), "w") as fh:
                        fh.write(v)


def test_no_limits_local_default_store_without_run_id(scopemeter_bin, tmp_path):
    need_v1_pods()
    with Unlimited("nolimit") as pod:
        p = subprocess.run(pod.wrap([sys.executable, "-c", FRONT_RUN]), env=python_env(),
                           capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    run_id = p.stdout.split()[0]
    assert (tmp_path / "mlflow.db").exists()  # MLflow's local default store

    # no RUN_ID, no MLFLOW_TRACKING_URI: the newest run that holds series
    t = cli_report(scopemeter_bin, "--json", cwd=tmp_path)
    assert t.returncode == 0, t.stderr
    rep = json.loads(t.stdout)
    assert rep["run_id"] == run_id
    assert rep["found_by"] == "most recent run with scopemeter series"
    r = rank_of(rep, 0)
    assert r["cgroup"].startswith("none")
    assert r["container_memory_limit_megabytes"] is None
    assert r["container_memory_peak_percentage"] is None
    assert r["node_memory_peak_percentage"] is not None
    assert r["stopped_early"] is None  # no limit, no end tags to miss
    assert r["verdict_codes"] == ["no_limit"], r["verdicts"]
    assert f"node memory peak {r['node_memory_peak_percentage']:.1f} %" in r["verdicts"][0]

    # a directory without a store: one line, and no database made there
    empty = tmp_path / "empty"
    empty.mkdir()
    t = cli_report(scopemeter_bin, cwd=empty)
    assert t.returncode == 1
    assert len(t.stderr.strip().splitlines()) == 1 and "no MLflow store" in t.stderr, t.stderr
    assert not (empty / "mlflow.db").exists()


# ---- two pods on one node -------------------------------------------------------------


def test_two_pods_on_one_node(scopemeter_bin, tmp_path):
    for why in (cgroups_usable(), netns_usable()):
        if why:
            pytest.skip(why)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    run_id = new_run(uri)
    spec = [(0, 512 << 20, 0.5, 4), (1, 1 << 30, 1.0, 24)]  # rank, memory, cores, MB sent
    results = run_pods_on_one_node(uri, run_id, spec, NODE, name="rpod")
    for rc, _, err in results:
        assert rc == 0, err[-3000:]

    rep = py_report(run_id, uri)
    assert rep["nodes"] == {NODE: [0, 1]}
    assert rep["collectors"] == 2
    metrics, _ = read_run(uri, run_id)
    for rank, mem, cpu, mb in spec:
        r = rank_of(rep, rank)
        assert r["node"] == NODE
        assert r["container_memory_limit_megabytes"] == pytest.approx(mem / 1e6, abs=0.06)
        assert r["container_cpu_limit_cores"] == cpu
        # each pod's own network namespace: what that pod sent over its lo
        assert mb <= r["network_receive_megabytes"] < mb * 1.3 + 1
        assert mb <= r["network_transmit_megabytes"] < mb * 1.3 + 1
        # the peak is the highest point of the rank's own series, or above it
        # (the end tag keeps the highest single sample)
        own = max(v for _, v, _ in metrics[f"system/container_memory_usage_megabytes/rank{rank}"])
        assert r["container_memory_peak_megabytes"] >= own
        node = max(v for _, v, _ in
                   metrics[f"system/node_memory_usage_percentage/{NODE}/rank{rank}"])
        assert r["node_memory_peak_percentage"] == node
        assert r["stopped_early"] is False
    # one working set is a bigger share of the smaller limit, each against its own
    assert rank_of(rep, 0)["container_memory_limit_megabytes"] < \
        rank_of(rep, 1)["container_memory_limit_megabytes"]

    env = report_env(MLFLOW_TRACKING_URI=uri)
    t = cli_report(scopemeter_bin, run_id, env=env)
    assert t.returncode == 0, t.stderr
    assert_fits(t.stdout)
    lines = t.stdout.splitlines()
    # rank -> node placement at a glance: the node's line, then its ranks
    i = lines.index(NODE)
    assert lines[i + 1].split()[:2] == ["rank", "0"] and lines[i + 2].split()[:2] == ["rank", "1"]

    png = tmp_path / "pods.png"
    t = cli_report(scopemeter_bin, run_id, "--plot", str(png), "--json", env=env)
    assert t.returncode == 0, t.stderr
    assert json.loads(t.stdout)["run_id"] == run_id  # --json stays parseable with --plot
    w, h = png_size(png)
    assert w == 1600 and h > 600


# ---- GPUs (the fake NVML of tests/fakenvml, the suite's one stand-in) ----------------------


@pytest.mark.backends
def test_gpus_per_rank(scopemeter_bin, mlflow_server, machine, lib):
    root = machine.dev_nodes("nvidia0", "nvidia1")
    env = clean_env(MLFLOW_TRACKING_URI=mlflow_server, SCOPEMETER_SYSROOT=root,
                    SCOPEMETER_NVML_LIBRARY=lib["full"], FAKE_NVML_DEVICES="2")
    p = subprocess.run([scopemeter_bin, "run", "--interval", "0.5", "--", "sleep", "1.5"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    run_id = [ln.split("created run ")[1].split()[0] for ln in p.stderr.splitlines()
              if "created run " in ln][0]
    rep = cli_json(scopemeter_bin, run_id, env=report_env(MLFLOW_TRACKING_URI=mlflow_server))
    gpus = rank_of(rep, 0)["gpus"]
    assert [g["index"] for g in gpus] == [0, 1]
    for g in gpus:  # the fake's constant answers (fakenvml.c), as NVML reported them
        i = g["index"]
        assert g["memory_peak_percentage"] == round(100 * gpu_used(i) / GPU_TOTAL, 1)
        assert g["memory_peak_megabytes"] == round(gpu_used(i) / 1e6, 1)
        assert g["utilization_mean_percentage"] == 40 + i
        assert g["power_mean_watts"] == 150 + i
    t = cli_report(scopemeter_bin, run_id, env=report_env(MLFLOW_TRACKING_URI=mlflow_server))
    assert t.returncode == 0, t.stderr
    assert_fits(t.stdout)
    rows = [ln.split() for ln in t.stdout.splitlines() if ln.startswith("  rank 0 ")]
    assert [r[2] for r in rows if len(r) == 7] == ["0", "1"]  # one row per GPU


# ---- the recording's own gaps -----------------------------------------------------------


LATE = r"""
import sys, time, mlflow, scopemeter
with mlflow.start_run() as run:
    time.sleep(float(sys.argv[1]))  # data loading, unrecorded
    assert scopemeter.enable_system_metrics(interval=0.5)
    time.sleep(1.5)
print(run.info.run_id)
"""

KILLED = r"""
import os, signal, sys, time, mlflow, scopemeter
run = mlflow.start_run()
print(run.info.run_id, flush=True)
assert scopemeter.enable_system_metrics(interval=0.5)
time.sleep(2.5)                     # a few windows shipped
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.timeout(400)
def test_started_late_and_stopped_early(scopemeter_bin, tmp_path):
    need_v1_pods()
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    env = python_env(MLFLOW_TRACKING_URI=uri)
    # 12 s after the run its own process opened: the front warned at the call
    # (docs/python.md); the report measures late against what the job did,
    # and gives a job 60 s from the run's start to its first rank's recording
    # (docs/report.md, "The late rule"; test_report_faults.py covers it)
    late_s = 12.0
    p = subprocess.run([sys.executable, "-c", LATE, str(late_s)], env=env, capture_output=True,
                       text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    assert "was not recorded" in p.stderr, p.stderr
    rep = py_report(p.stdout.split()[0], uri)
    r = rank_of(rep, 0)
    assert "started_late" not in r["verdict_codes"], r["verdicts"]
    assert r["started_after_run_s"] >= late_s and r["started_after_first_rank_s"] == 0.0

    # a recorder killed with no companion to write its end: SCOPEMETER_COMPANION=0 here, as
    # for a training process that is its container's PID 1, whose death takes the companion
    # too (docs/design.md §7; test_companion.py covers the companion's end)
    with Pod("killed", 512 << 20, 1.0) as pod:
        p = subprocess.run(pod.wrap([sys.executable, "-c", KILLED]),
                           env=dict(env, SCOPEMETER_COMPANION="0"),
                           capture_output=True, text=True, timeout=180)
    assert p.returncode == -signal.SIGKILL, p.stderr
    run_id = p.stdout.split()[0]
    # the launcher marks the run its worker died in
    from mlflow.tracking import MlflowClient
    MlflowClient(uri).set_terminated(run_id, "KILLED")
    rep = py_report(run_id, uri)
    r = rank_of(rep, 0)
    assert r["points"] >= 1 and r["end_tags"] is False
    assert r["stopped_early"] is True
    assert "stopped_early" in r["verdict_codes"], r["verdicts"]
    assert r["verdict_codes"][-1] == "stopped_early"  # the least severe, listed last


# ---- the example ----------------------------------------------------------------------


def test_example_prints_the_report(tmp_path):
    example = os.path.join(ROOT, "examples", "train_cpu.py")
    png = tmp_path / "example.png"
    p = subprocess.run([sys.executable, example, "--seconds", "2", "--interval", "0.5",
                        "--rows", "20000", "--plot", str(png)],
                       env=python_env(), capture_output=True, text=True, timeout=240,
                       cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    run_id = p.stdout.split("recorded into run ")[1].split()[0]
    assert f"run {run_id} " in p.stdout       # the report's head line, after the series
    assert "node / rank" in p.stdout and "verdicts" in p.stdout
    report_part = p.stdout[p.stdout.index(f"run {run_id} "):]
    assert_fits(report_part)
    assert png_size(png)[0] == 1600


# ---- plumbing --------------------------------------------------------------------------


def test_plot_without_matplotlib_says_how_to_get_it(tmp_path):
    code = ("import sys\n"
            "sys.modules['matplotlib'] = None   # as if it were not installed\n"
            "from scopemeter.__main__ import main\n"
            "sys.exit(main(['report', 'any-run', '--plot', sys.argv[1]]))\n")
    png = tmp_path / "x.png"
    p = subprocess.run([sys.executable, "-c", code, str(png)], env=python_env(),
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert "pip install 'scopemeter[report]'" in lines[0]
    assert not png.exists()


def test_python_m_scopemeter_version():
    p = subprocess.run([sys.executable, "-m", "scopemeter", "--version"], env=python_env(),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    code = "import os, scopemeter; print(scopemeter.__version__, " \
           "os.path.dirname(os.path.abspath(scopemeter.__file__)))"
    q = subprocess.run([sys.executable, "-c", code], env=python_env(), capture_output=True,
                       text=True, timeout=60)
    version, where = q.stdout.split()
    assert p.stdout.strip() == f"scopemeter {version} ({where})"
    if staged_package():
        assert where.startswith(staged_package())  # this tree's package, not an older install


def test_unreachable_server_is_one_line_without_the_password(scopemeter_bin):
    """Nothing listens on the port: the command gives up after its few retries
    (docs/report.md) with one line, and the URL's password is not in it."""
    uri = f"http://someone:s3cret-pw@127.0.0.1:{free_port()}"
    p = cli_report(scopemeter_bin, "0123456789abcdef", env=report_env(MLFLOW_TRACKING_URI=uri),
                   timeout=150)
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot read run 0123456789abcdef" in lines[0], p.stderr
    assert "s3cret-pw" not in p.stderr


def test_cli_finds_python_or_says_it_cannot(scopemeter_bin, tmp_path):
    """The interpreter: SCOPEMETER_PYTHON, else python3 beside the program, else
    python3 on PATH; none that imports scopemeter: one line, exit 2."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    cli = bindir / "scopemeter"
    shutil.copy(scopemeter_bin, cli)
    env = python_env(PATH="/nonexistent")

    p = subprocess.run([str(cli), "report"], env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1 and "SCOPEMETER_PYTHON" in p.stderr

    p = subprocess.run([str(cli), "report"], env=dict(env, SCOPEMETER_PYTHON="/bin/false"),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "SCOPEMETER_PYTHON=/bin/false" in p.stderr

    # pip's layout: the program in the environment's bin/, beside its python
    os.symlink(sys.executable, bindir / "python3")
    p = subprocess.run([str(cli), "report", "--help"], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "usage: scopemeter report" in p.stdout


# ---- what filled the pod (docs/design.md §9), on runs written through MLflow's client ----------
#
# The engine side of §9 records these series and tags; these tests write
# runs holding them, exactly as §9 names and formats them, into a real sqlite
# store through MLflow's own client, so the report is checked on every part of
# the contract, old runs included, whatever a kernel here can produce.

PERIOD_MS = 10_000


def write_run(uri, series, tags, status="FINISHED", start_ms=1_800_000_000_000):
    """A run in the store at uri: series {key: [(step, value)]} (step s is
    logged at start + (s + 1) windows, every key of a window on one timestamp
    as the engine logs them), tags {key: value}, ended with status (None:
    left RUNNING).  Returns the run id."""
    from mlflow.entities import Metric, RunTag
    from mlflow.tracking import MlflowClient
    c = MlflowClient(tracking_uri=uri)
    exp = c.get_experiment_by_name("report-filled")
    exp_id = exp.experiment_id if exp else c.create_experiment("report-filled")
    run_id = c.create_run(exp_id, start_time=start_ms).info.run_id
    metrics = [Metric(key, float(v), start_ms + (step + 1) * PERIOD_MS, step)
               for key, pts in series.items() for step, v in pts]
    for i in range(0, len(metrics), 900):
        c.log_batch(run_id, metrics=metrics[i:i + 900])
    run_tags = [RunTag(k, str(v)) for k, v in tags.items()]
    for i in range(0, len(run_tags), 100):  # MLflow takes 100 tags a batch
        c.log_batch(run_id, tags=run_tags[i:i + 100])
    if status is not None:  # None: left RUNNING, as a killed recorder leaves it
        c.set_terminated(run_id, status, end_time=start_ms + (
            max((len(p) for p in series.values()), default=0) + 2) * PERIOD_MS)
    return run_id


RUN_TAGS = {"scopemeter.interval_s": "10", "scopemeter.samples": "1",
            "scopemeter.collectors": "2"}


def filled_pod_run(uri):
    """Two pods.  Pod A (node gpu-a, a v2 engine with every §9 series and
    tag): rank 0 fills its 8.0 GB limit with shared memory and is OOM-killed
    together with its recorder (no end tags; the kill is known from the tag
    memory_events, shipped with the points); rank 1 is its sibling, whose
    process tree rank 0's collector recorded.  Pod B (node gpu-b, v1): rank 2
    with the composition series but no memory_at_peak tag, near its limit."""
    steps = range(12)  # 12 windows of 10 s: 120 s recorded
    ws0 = [4000 + 340 * s for s in steps]                      # to 7740 MB
    shm0 = [2000 + 280 * s for s in steps]                     # to 5080
    anon0 = [1800 + 40 * s for s in steps]                     # to 2240
    file0 = [150 + 20 * s for s in steps]                      # to 370
    kern0 = [w - a - b - c for w, a, b, c in zip(ws0, shm0, anon0, file0)]
    mpsi0 = [0, 0, 1, 1, 2, 2, 6, 8, 10, 14, 16, 18]           # last minute: mean 12
    cpsi0 = [5, 5, 10, 10, 20, 20, 30, 35, 30, 25, 20, 20]
    tree1 = [300 + 150 * s for s in steps]                     # sibling tree: to 1950 MB
    n1 = [2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6]
    ws2 = [2000 + 180 * s for s in steps]                      # to 3980 MB of 4295.0
    anon2 = [1500 + 140 * s for s in steps]                    # to 3040
    shm2 = [300 + 25 * s for s in steps]                       # to 575
    file2 = [180 + 10 * s for s in steps]                      # to 290
    kern2 = [w - a - b - c for w, a, b, c in zip(ws2, anon2, shm2, file2)]

    def pts(vals):
        return list(zip(steps, vals))

    series = {
        "system/container_memory_usage_megabytes/rank0": pts(ws0),
        "system/container_memory_usage_percentage/rank0": pts([w / 80 for w in ws0]),
        "system/container_memory_anon_megabytes/rank0": pts(anon0),
        "system/container_memory_shmem_megabytes/rank0": pts(shm0),
        "system/container_memory_file_active_megabytes/rank0": pts(file0),
        "system/container_memory_kernel_megabytes/rank0": pts(kern0),
        "system/container_memory_pressure_percentage/rank0": pts(mpsi0),
        "system/container_cpu_pressure_percentage/rank0": pts(cpsi0),
        "system/container_cpu_utilization_percentage/rank0": pts([60] * 12),
        "system/node_memory_usage_percentage/gpu-a/rank0": pts([30] * 12),
        "system/process_count/rank0": pts([5] * 12),
        "system/process_memory_megabytes/rank0": pts([w - 400 for w in ws0]),
        "system/process_cpu_utilization_percentage/rank0": pts([240] * 12),
        "system/process_count/rank1": pts(n1),
        "system/process_memory_megabytes/rank1": pts(tree1),
        "system/process_cpu_utilization_percentage/rank1": pts([100] * 12),
        "system/container_memory_usage_megabytes/rank2": pts(ws2),
        "system/container_memory_usage_percentage/rank2": pts(
            [round(100 * w / 4294.967296, 1) for w in ws2]),
        "system/container_memory_anon_megabytes/rank2": pts(anon2),
        "system/container_memory_shmem_megabytes/rank2": pts(shm2),
        "system/container_memory_file_active_megabytes/rank2": pts(file2),
        "system/container_memory_kernel_megabytes/rank2": pts(kern2),
        "system/node_memory_usage_percentage/gpu-b/rank2": pts([40] * 12),
        "system/process_count/rank2": pts([2] * 12),
        "system/process_memory_megabytes/rank2": pts([w - 300 for w in ws2]),
    }
    tags = dict(RUN_TAGS)
    tags.update({
        "scopemeter.rank0.node": "gpu-a",
        # the display tag rounds (7.45 GiB reads 7.5GiB); the exact one wins
        "scopemeter.rank0.cgroup": "v2 /kubepods/pod-a/ctr mem=7.5GiB cpu=4.0",
        "scopemeter.rank0.memory_limit_bytes": "8000000000",
        # one sample, above every window's mean (the window mean peaks at 7740)
        "scopemeter.rank0.memory_at_peak": "working_set_mb=7760.0 anon_mb=2200.0 "
                                           "shmem_mb=5100.0 file_active_mb=380.0 "
                                           "kernel_mb=80.0 limit_mb=8000.0",
        "scopemeter.rank0.memory_events": "high=12 max=3 oom=1 oom_kill=1",
        "scopemeter.rank0.pressure": "memory_some_s=9.50 memory_peak_pct=21.5 "
                                     "cpu_some_s=20.10 cpu_peak_pct=40.0",
        "scopemeter.rank0.process_tree_peak": "processes=5 memory_mb=7400.5",
        "scopemeter.rank2.node": "gpu-b",
        "scopemeter.rank2.cgroup": "v1 /pod-b mem=4096MiB cpu=2.0",
        "scopemeter.rank2.memory_events": "max=3 oom_kill=0",
        "scopemeter.rank2.oom_kill": "0",
        "scopemeter.rank2.mem_peak_sampled_mb": "3980.0",
        "scopemeter.rank2.memory_peak_mb": "4100.2",
    })
    return write_run(uri, series, tags, status="KILLED")


@pytest.mark.timeout(300)
def test_names_what_filled_the_pod(scopemeter_bin, tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    run_id = filled_pod_run(uri)
    rep = py_report(run_id, uri)
    assert rep["nodes"] == {"gpu-a": [0, 1], "gpu-b": [2]}

    r0 = rank_of(rep, 0)
    # the exact limit (memory_limit_bytes), not the display tag's 7.5 GiB
    assert r0["container_memory_limit_megabytes"] == 8000.0
    assert r0["container_memory_limit_exact"] is True
    assert r0["container_memory_at_peak_megabytes"] == {
        "working_set": 7760.0, "anon": 2200.0, "shmem": 5100.0, "file_active": 380.0,
        "kernel": 80.0, "limit": 8000.0}
    assert r0["container_memory_at_peak_source"] == "tag"
    assert r0["memory_events"] == {"high": 12, "max": 3, "oom": 1, "oom_kill": 1}
    assert r0["memory_pressure_peak_percentage"] == 21.5        # the tag's single sample
    assert r0["memory_pressure_last_minute_percentage"] == 12.0  # 6 points of the last 60 s
    assert r0["memory_pressure_stalled_s"] == 9.5
    assert r0["cpu_pressure_peak_percentage"] == 40.0
    assert r0["process_tree_peak"] == {"processes": 5, "memory_megabytes": 7400.5}
    # no end tags, but the kill travelled with the points in memory_events
    assert r0["end_tags"] is False and r0["stopped_early"] is True
    assert r0["oom_kill"] == 1
    # the peak: the tag's single sample, above every window's mean (7740)
    assert r0["container_memory_peak_megabytes"] == 7760.0
    assert r0["container_memory_peak_percentage"] == 97.0
    assert r0["verdict_codes"] == ["oom_killed", "memory_high", "memory_cause", "memory_events",
                                   "memory_pressure", "stopped_early"], r0["verdicts"]
    v = dict(zip(r0["verdict_codes"], r0["verdicts"]))
    assert v["memory_cause"] == (
        "peaked at 97 % of its 8.0 GB limit: shared memory 5.1 GB (/dev/shm, typically "
        "DataLoader workers), anonymous 2.2 GB (heaps: tensors, arrays, Python objects), "
        "page cache 0.4 GB (files in use: datasets, checkpoints), kernel 80 MB (slab, "
        "sockets, page tables)")
    assert v["memory_events"] == ("the kernel hit memory.high 12 times, max 3 times; an "
                                  "allocation failed at the limit 1 time (memory.events, since "
                                  "recording started)")
    assert v["memory_pressure"] == ("memory stalls 12 % of the time in the last minute before "
                                    "the end: the kernel was reclaiming")
    assert "8000.0 MB memory limit" in v["oom_killed"]

    # the sibling: only its process tree, recorded by its pod's collector
    r1 = rank_of(rep, 1)
    assert r1["process_tree_only"] is True and r1["recorded_by_rank"] == 0
    assert r1["node"] == "gpu-a"
    # no tag: the series' highest point and the count at that step
    assert r1["process_tree_peak"] == {"processes": 6, "memory_megabytes": 1950.0}
    assert r1["process_cpu_mean_percentage"] == 100.0
    assert r1["container_memory_limit_megabytes"] is None
    assert r1["stopped_early"] is None and r1["verdict_codes"] == []

    # pod B: an engine without memory_at_peak: the series at the peak's step
    r2 = rank_of(rep, 2)
    assert r2["container_memory_limit_exact"] is False
    assert r2["container_memory_limit_megabytes"] == pytest.approx(4295.0, abs=0.06)
    assert r2["container_memory_at_peak_megabytes"] == {
        "working_set": 3980.0, "anon": 3040.0, "shmem": 575.0, "file_active": 290.0,
        "kernel": 75.0, "limit": r2["container_memory_limit_megabytes"]}
    assert r2["container_memory_at_peak_source"] == "series"
    assert r2["memory_events"] == {"max": 3, "oom_kill": 0}
    assert r2["memory_pressure_peak_percentage"] is None  # v1: no PSI, no zeros
    assert r2["cpu_pressure_peak_percentage"] is None
    assert r2["process_tree_peak"] == {"processes": 2, "memory_megabytes": 3680.0}
    assert r2["verdict_codes"] == ["memory_high", "memory_cause", "memory_events"]
    v = dict(zip(r2["verdict_codes"], r2["verdicts"]))
    assert v["memory_cause"] == (
        "peaked at 93 % of its 4.3 GB limit: anonymous 3.0 GB (heaps: tensors, arrays, "
        "Python objects), shared memory 0.6 GB (/dev/shm, typically DataLoader workers), "
        "page cache 0.3 GB (files in use: datasets, checkpoints), kernel 75 MB (slab, "
        "sockets, page tables)")
    assert v["memory_events"] == ("the kernel hit the limit 3 times (memory.failcnt, since "
                                  "recording started)")

    # the run's list: most severe first
    assert [(x["rank"], x["code"]) for x in rep["verdicts"][:5]] == [
        (0, "oom_killed"), (0, "memory_high"), (2, "memory_high"), (0, "memory_cause"),
        (2, "memory_cause")]

    # the table: the section of §9, every rank in it, 100 columns
    env = report_env(MLFLOW_TRACKING_URI=uri)
    t = cli_report(scopemeter_bin, run_id, env=env)
    assert t.returncode == 0, t.stderr
    assert_fits(t.stdout)
    lines = t.stdout.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("what filled it"))
    section = lines[i:lines.index("", i)]
    rows = {ln.split()[1]: ln.split()[2:] for ln in section if ln.startswith("  rank ")}
    assert rows["0"][:8] == ["2200.0", "5100.0", "380.0", "80.0", "5", "7400.5", "21.5", "40.0"]
    assert rows["1"][:8] == ["-", "-", "-", "-", "6", "1950.0", "-", "-"]
    assert f"{'  rank 1':<22}process tree only, recorded by rank 0 (its pod's container)" \
        in lines
    assert "rank 0: peaked at 97 % of its 8.0 GB limit: shared memory 5.1 GB (/dev/shm, " \
        "typically" in t.stdout

    # the picture: the composition stacked under the limit line
    png = tmp_path / "filled.png"
    t = cli_report(scopemeter_bin, run_id, "--plot", str(png), env=env)
    assert t.returncode == 0, t.stderr
    w, h = png_size(png)
    assert w == 1600 and h > 900


def old_run(uri):
    """A run of an engine before docs/design.md §9: none of its series or tags."""
    steps = range(8)
    ws = [100 + 60 * s for s in steps]                        # to 520 MB of 536.9
    series = {
        "system/container_memory_usage_megabytes/rank0": list(zip(steps, ws)),
        "system/container_memory_usage_percentage/rank0": list(zip(
            steps, [round(100 * w / 536.870912, 1) for w in ws])),
        "system/container_cpu_utilization_percentage/rank0": list(zip(steps, [50] * 8)),
        "system/node_memory_usage_percentage/n1/rank0": list(zip(steps, [20] * 8)),
        "system/node_cpu_utilization_percentage/n1/rank0": list(zip(steps, [30] * 8)),
    }
    tags = dict(RUN_TAGS, **{"scopemeter.collectors": "1",
                             "scopemeter.rank0.node": "n1",
                             "scopemeter.rank0.cgroup": "v1 /old mem=512MiB cpu=1.0",
                             "scopemeter.rank0.oom_kill": "0",
                             "scopemeter.rank0.mem_peak_sampled_mb": "525.0",
                             "scopemeter.rank0.memory_peak_mb": "530.1"})
    return write_run(uri, series, tags)


@pytest.mark.timeout(200)
def test_older_run_reports_as_before(scopemeter_bin, tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    run_id = old_run(uri)
    rep = py_report(run_id, uri)
    r = rank_of(rep, 0)
    # the limit from the display tag, refined by the points, as before
    assert r["container_memory_limit_megabytes"] == 536.9
    assert r["container_memory_limit_exact"] is False
    assert r["container_memory_limit_bytes"] is None  # no exact tag: none is invented
    # the CPU limit from the display tag (cpu=1.0), as before the exact tags
    assert r["container_cpu_limit_cores"] == 1.0
    assert r["container_cpu_limit_exact"] is False
    assert r["cpu_quota_us"] is None and r["cpu_period_us"] is None
    assert r["container_memory_peak_megabytes"] == 525.0
    assert r["verdict_codes"] == ["memory_high"]
    assert r["verdicts"] == ["memory peak 97.8 % of the limit: 525.0 of 536.9 MB, 11.9 MB of "
                             "headroom"]
    for key in ("container_memory_at_peak_megabytes", "container_memory_at_peak_source",
                "memory_events", "memory_pressure_peak_percentage",
                "memory_pressure_last_minute_percentage", "memory_pressure_stalled_s",
                "cpu_pressure_peak_percentage", "cpu_pressure_stalled_s", "process_tree_peak",
                "process_cpu_mean_percentage"):
        assert r[key] is None, key
    assert r["process_tree_only"] is False and r["recorded_by_rank"] == 0
    assert r["oom_kill"] == 0 and r["stopped_early"] is False
    t = cli_report(scopemeter_bin, run_id, env=report_env(MLFLOW_TRACKING_URI=uri))
    assert t.returncode == 0, t.stderr
    assert "what filled it" not in t.stdout  # the table of an older run is unchanged
    assert t.stdout.splitlines()[-1] == ("rank 0: memory peak 97.8 % of the limit: 525.0 of "
                                         "536.9 MB, 11.9 MB of headroom")
    png = tmp_path / "old.png"
    t = cli_report(scopemeter_bin, run_id, "--plot", str(png),
                   env=report_env(MLFLOW_TRACKING_URI=uri))
    assert t.returncode == 0, t.stderr
    assert png_size(png)[0] == 1600


def exact_run(uri):
    """A run of an engine with the exact start tags: a memory limit of
    1000000007 bytes (the display tag reads mem=954MiB), 1/6 core as a quota
    of 50000 us per 300000 us (cpu=0.17), throttled in 100 of its periods.
    Beside it, metrics of the user's that only look like the engine's keys."""
    steps = range(8)  # 8 windows of 10 s: 80 s recorded
    ws = [900 + 12 * s for s in steps]                        # to 984 MB
    series = {
        "system/container_memory_usage_megabytes/rank0": list(zip(steps, ws)),
        "system/container_memory_usage_percentage/rank0": list(zip(
            steps, [round(100 * w / 1000.000007, 1) for w in ws])),
        "system/container_cpu_utilization_percentage/rank0": list(zip(steps, [95] * 8)),
        "system/node_memory_usage_percentage/gpu-node-7/rank0": list(zip(steps, [20] * 8)),
        # the old regular expression took these for series: a rank 5, and
        # "n9" as rank 0's node (sorted before node_memory_...)
        "system/custom_loss/rank5": list(zip(steps, [1.0] * 8)),
        "system/gpu_0_utilization_percentage/n9/rank0": list(zip(steps, [1.0] * 8)),
    }
    tags = dict(RUN_TAGS, **{"scopemeter.collectors": "1",
                             "scopemeter.rank0.cgroup": "v2 /kubepods/x mem=954MiB cpu=0.17",
                             "scopemeter.rank0.memory_limit_bytes": "1000000007",
                             "scopemeter.rank0.cpu_limit_cores": "0.16666666666666666",
                             "scopemeter.rank0.cpu_quota_us": "50000",
                             "scopemeter.rank0.cpu_period_us": "300000",
                             "scopemeter.rank0.oom_kill": "0",
                             "scopemeter.rank0.mem_peak_sampled_mb": "984.0",
                             "scopemeter.rank0.cpu_throttled_periods": "100",
                             "scopemeter.rank0.cpu_throttled_s": "5.0"})
    return write_run(uri, series, tags)


@pytest.mark.timeout(200)
def test_exact_limit_tags_are_used(scopemeter_bin, tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    run_id = exact_run(uri)
    rep = py_report(run_id, uri)
    # no node tag: the node is the tier of rank 0's own keys, and the user's
    # look-alike metrics made neither a rank nor a node
    assert rep["nodes"] == {"gpu-node-7": [0]}
    assert [r["rank"] for r in rep["ranks"]] == [0]
    r = rank_of(rep, 0)
    assert "gpu_0_utilization_percentage" not in str(r["gpus"]) and r["gpus"] == []
    # the bytes as the engine read them, which mem=954MiB cannot give
    assert r["container_memory_limit_bytes"] == 1000000007
    assert r["container_memory_limit_exact"] is True
    assert r["container_memory_limit_megabytes"] == 1000.0
    assert r["container_memory_headroom_megabytes"] == 16.0
    # the CPU limit exactly (the display tag says 0.17), and the period the
    # kernel throttles in: 100 of 80 s / 0.3 s = 266.7 periods, not of the
    # 800 a default 0.1 s period would give
    assert r["container_cpu_limit_cores"] == 50000 / 300000
    assert r["container_cpu_limit_exact"] is True
    assert r["cpu_quota_us"] == 50000 and r["cpu_period_us"] == 300000
    assert r["cpu_throttled_percentage"] == 37.5
    v = dict(zip(r["verdict_codes"], r["verdicts"]))
    assert v["cpu_throttled"] == ("CPU throttled in 38 % of periods (100 periods, 5.0 s) at a "
                                  "limit of 0.17 cores")
    t = cli_report(scopemeter_bin, run_id, env=report_env(MLFLOW_TRACKING_URI=uri))
    assert t.returncode == 0, t.stderr
    assert_fits(t.stdout)
    row = next(ln for ln in t.stdout.splitlines()
               if ln.startswith("  rank 0") and ln.split()[2] == "0.17")  # the CPU table
    assert row.split()[3:5] == ["95.0", "95.0"]
