"""Shared fixtures of the Python-driven tests.

- ``scopemeter_bin``: the CLI built by meson (``SCOPEMETER_BIN`` or build/cli/scopemeter).
- ``mlflow_server``: a real ``mlflow server`` on loopback with a sqlite backend,
  started once per session on a free port; yields its http:// URI.
- ``probe_json(sysroot=None, env=None)``: runs ``scopemeter probe --json`` and parses it.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")

# Variables of the launchers and of MLflow that must not leak from the
# developer's shell into a test's subprocess.
_LEAKY = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "SLURM_PROCID", "SLURM_LOCALID",
    "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE",
    "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "SCOPEMETER_NODE_NAME", "NODE_NAME", "SLURMD_NODENAME",
    "SCOPEMETER_SYSROOT", "SCOPEMETER_NVML_LIBRARY", "SCOPEMETER_INTERVAL", "SCOPEMETER_SAMPLES",
    "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "MLFLOW_RUN_ID", "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME",
    "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", "MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL",
    "MLFLOW_SYSTEM_METRICS_SAMPLES_BEFORE_LOGGING", "MLFLOW_TRACKING_TOKEN",
    "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD",
    # `scopemeter run` (job ids name a shared run; TLS and proxies change requests)
    "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "SLURM_JOB_ID", "SLURM_STEP_ID",
    "MLFLOW_EXPERIMENT_ID",
    "MLFLOW_TRACKING_INSECURE_TLS", "MLFLOW_TRACKING_SERVER_CERT_PATH",
    "MLFLOW_TRACKING_CLIENT_CERT_PATH", "MLFLOW_HTTP_REQUEST_TIMEOUT", "http_proxy", "https_proxy",
    "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in _LEAKY}
    env.update({k: str(v) for k, v in extra.items() if v is not None})
    return env


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def scopemeter_bin():
    path = os.environ.get("SCOPEMETER_BIN") or os.path.join(ROOT, "build", "cli", "scopemeter")
    if not os.access(path, os.X_OK):
        pytest.fail(f"scopemeter CLI not built at {path}: run `meson compile -C build` first")
    return path


@pytest.fixture
def probe_json(scopemeter_bin):
    def run(sysroot=None, env=None, interval="0", check=True):
        e = clean_env(**(env or {}))
        if sysroot:
            e["SCOPEMETER_SYSROOT"] = str(sysroot)
        p = subprocess.run([scopemeter_bin, "probe", "--json", "--interval", str(interval)],
                           env=e, capture_output=True, text=True, timeout=60)
        if check:
            assert p.returncode == 0, p.stderr
        out = json.loads(p.stdout) if p.returncode == 0 else None
        if out is not None:
            out["_stderr"] = p.stderr
        return out
    return run


def start_mlflow_server(tmpdir, port=None, db=None):
    """Starts `mlflow server` on loopback; returns (process, uri).  db: the
    sqlite file (default tmpdir/mlflow.db; elsewhere, e.g. on a small
    filesystem that fills up, while the log stays in tmpdir)."""
    port = port or free_port()
    db = db or os.path.join(tmpdir, "mlflow.db")
    art = os.path.join(tmpdir, "artifacts")
    os.makedirs(art, exist_ok=True)
    log = open(os.path.join(tmpdir, "server.log"), "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{db}",
         "--default-artifact-root", art, "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"],
        stdout=log, stderr=subprocess.STDOUT, env=clean_env(), start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mlflow server exited with {proc.returncode}; see {log.name}")
        try:
            with urllib.request.urlopen(uri + "/health", timeout=2) as r:
                if r.status == 200:
                    return proc, uri
        except OSError:
            time.sleep(0.3)
    stop_mlflow_server(proc)
    raise RuntimeError("mlflow server did not answer /health within 120 s")


def stop_mlflow_server(proc):
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("mlflow"))
    proc, uri = start_mlflow_server(tmp)
    yield uri
    stop_mlflow_server(proc)


def is_root():
    return os.geteuid() == 0


def have(cmd):
    return shutil.which(cmd) is not None
