"""Shared fixtures of the Python-driven tests.

- ``scopemeter_bin``: the CLI built by meson (``SCOPEMETER_BIN`` or build/cli/scopemeter).
- ``mlflow_server``: a real ``mlflow server`` on loopback with a sqlite backend,
  started once per session on a free port; yields its http:// URI.  A test
  marked ``backends`` runs twice: against that server and against
  ``postgres_server`` (the ``postgres`` tier).
- ``postgres``: Debian's PostgreSQL run by the harness itself (``initdb`` into
  a temporary directory as the ``postgres`` user, ``pg_ctl start`` on
  127.0.0.1, stopped at the end of the session); ``postgres_server``: ``mlflow
  server --workers 4`` on a database of it.
- ``probe_json(sysroot=None, env=None)``: runs ``scopemeter probe --json`` and parses it.
"""
import atexit
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
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
    "SCOPEMETER_SYSROOT", "SCOPEMETER_NVML_LIBRARY", "SCOPEMETER_SPOOL_DIR", "SCOPEMETER_SPOOL_MAX_MB", "SCOPEMETER_INTERVAL", "SCOPEMETER_SAMPLES",
    "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "MLFLOW_RUN_ID", "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME",
    "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", "MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL",
    "MLFLOW_SYSTEM_METRICS_SAMPLES_BEFORE_LOGGING", "MLFLOW_TRACKING_TOKEN", "SCOPEMETER_HTTP_HEADERS",
    "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD",
    # `scopemeter run` (job ids name a shared run; TLS and proxies change requests)
    "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "SLURM_JOB_ID", "SLURM_STEP_ID",
    "MLFLOW_EXPERIMENT_ID",
    "MLFLOW_TRACKING_INSECURE_TLS", "MLFLOW_TRACKING_SERVER_CERT_PATH",
    "MLFLOW_TRACKING_CLIENT_CERT_PATH", "MLFLOW_HTTP_REQUEST_TIMEOUT", "http_proxy", "https_proxy",
    "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
)


# The spool past the ring (docs/design.md §6) of every recorder a test starts
# goes to one directory of the session, never the machine's /var/tmp/scopemeter;
# a test that looks at the spool names its own.
_SPOOL_DIR = tempfile.mkdtemp(prefix="scopemeter-spool-")
atexit.register(shutil.rmtree, _SPOOL_DIR, True)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in _LEAKY}
    env["SCOPEMETER_SPOOL_DIR"] = _SPOOL_DIR
    env.update({k: str(v) for k, v in extra.items() if v is not None})
    return env


def free_port():
    """A loopback port that no other bind(0) nor outgoing connect gets for
    the next minute.  A port merely bound and released is anyone's (another
    test's free_port, a client's ephemeral port) until the server binds it,
    which then exits with "address already in use" (seen: main's free_port
    handed out the same port twice in 200 calls on the loaded machine).  So
    the port is left in TIME_WAIT: a connection to it is accepted and the
    accepted end closed first (the end that closes first keeps TIME_WAIT, 60 s:
    TCP_TIMEWAIT_LEN, include/net/tcp.h).  The kernel's search for a free port
    skips one held in TIME_WAIT (net/ipv4/inet_connection_sock.c,
    inet_csk_find_open_port; inet_hashtables.c, __inet_hash_connect), while a
    server that sets SO_REUSEADDR (uvicorn, PostgreSQL) binds it at once.  A
    server that binds later than that minute may still lose it:
    start_mlflow_server then starts again on a fresh port."""
    with socket.socket() as srv:
        # the TIME_WAIT end inherits it: without, the server's bind conflicts too
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=10) as cli:
            conn, _ = srv.accept()
            conn.close()  # first: this end, 127.0.0.1:port, goes to TIME_WAIT
            cli.recv(1)   # its FIN has arrived: the client's close is the passive one
        return port


def c_test_program(scopemeter_bin, name):
    """A C test program of the build (build/tests/NAME; a tool is
    "tools/NAME") that a Python test drives; a missing one fails the test
    (never skipped)."""
    build = os.environ.get("SCOPEMETER_BUILD") or os.path.dirname(os.path.dirname(scopemeter_bin))
    path = os.path.join(build, "tests", name)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not built")
    return path


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


def start_mlflow_server(tmpdir, port=None, db=None, backend=None, workers=1, app_name=None,
                        env=None, uvicorn_opts=None, startup_timeout=120):
    """Starts `mlflow server` on loopback; returns (process, uri).  db: the
    sqlite file (default tmpdir/mlflow.db; elsewhere, e.g. on a small
    filesystem that fills up, while the log stays in tmpdir).  backend: a
    backend store URI instead (postgresql://...); app_name: e.g. basic-auth;
    env: extra variables of the server (MLFLOW_AUTH_CONFIG_PATH), over
    SERVER_ENV (every server's); uvicorn_opts: its --uvicorn-opts;
    startup_timeout: how long /health may take (bench/ starts servers beside
    others on a loaded machine)."""
    db = db or os.path.join(tmpdir, "mlflow.db")
    art = os.path.join(tmpdir, "artifacts")
    os.makedirs(art, exist_ok=True)
    # a port of our own choosing can be taken by another process before the
    # server binds it (free_port): then the server exits with "address
    # already in use" and starts again on a fresh port.  A port the caller
    # names (a restart on the same URI) is tried once.
    for attempt in range(3):
        try:
            return _start_mlflow_server_on(tmpdir, port or free_port(), db, art, backend,
                                           workers, app_name, env, uvicorn_opts,
                                           startup_timeout)
        except PortTaken:
            if port or attempt == 2:
                raise


class PortTaken(RuntimeError):
    pass


def _start_mlflow_server_on(tmpdir, port, db, art, backend, workers, app_name, env,
                            uvicorn_opts, startup_timeout):
    log = open(os.path.join(tmpdir, "server.log"), "ab")
    start = log.tell()
    cmd = [sys.executable, "-m", "mlflow", "server",
           "--backend-store-uri", backend or f"sqlite:///{db}",
           "--default-artifact-root", art, "--host", "127.0.0.1", "--port", str(port),
           "--workers", str(workers)]
    if app_name:
        cmd += ["--app-name", app_name]
    if uvicorn_opts:
        cmd += ["--uvicorn-opts", uvicorn_opts]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                            env=clean_env(**{**SERVER_ENV, **(env or {})}),
                            start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    deadline = time.time() + startup_timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            log.close()
            with open(log.name, "rb") as f:
                f.seek(start)
                said = f.read().decode(errors="replace")
            why = PortTaken if "address already in use" in said.lower() else RuntimeError
            # (uvicorn's "[Errno 98] ... address already in use"; mlflow exits 0)
            raise why(f"mlflow server on port {port} exited with {proc.returncode}; "
                      f"see {log.name}")
        try:
            with urllib.request.urlopen(uri + "/health", timeout=2) as r:
                if r.status == 200:
                    return proc, uri
        except OSError:
            time.sleep(0.3)
    stop_mlflow_server(proc)
    raise RuntimeError(f"mlflow server did not answer /health within {startup_timeout} s")


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
def sqlite_server(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("mlflow"))
    proc, uri = start_mlflow_server(tmp)
    yield uri
    stop_mlflow_server(proc)


# ---- PostgreSQL ----------------------------------------------------------------------

def pg_bindir():
    """Debian's server binaries (initdb, pg_ctl, createdb are not on PATH:
    /usr/lib/postgresql/VERSION/bin), the newest version installed."""
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                  key=lambda d: int(d.split("/")[-2]) if d.split("/")[-2].isdigit() else 0)
    return dirs[-1] if dirs and os.access(os.path.join(dirs[-1], "initdb"), os.X_OK) else None


class Postgres:
    """A throwaway PostgreSQL cluster: initdb into a fresh directory, one
    postmaster on 127.0.0.1:port (its unix socket in the same directory, so no
    system-wide /run/postgresql is touched), trust authentication (loopback
    only, a test), no fsync (nothing here must survive a power cut; it is what
    makes initdb and MLflow's migrations take seconds on a loaded machine)."""

    def __init__(self):
        self.bindir = pg_bindir()
        if not self.bindir:
            pytest.fail("PostgreSQL is not installed (scripts/install-deps: Debian's postgresql)")
        # initdb and postgres refuse to run as root: as root, Debian's
        # `postgres` user (the package creates it) runs them
        self.user = "postgres" if is_root() else None
        self.dir = tempfile.mkdtemp(prefix="scopemeter-pg-")  # /tmp: reachable by that user
        self.data = os.path.join(self.dir, "data")
        self.port = free_port()
        try:
            if self.user:
                shutil.chown(self.dir, self.user)
            self._pg("initdb", "-D", self.data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
                     "--locale=C", "--no-sync")
            # max_connections: 4 workers x MLflow's pool (5 + 10 overflow) per server, two
            # servers (the auth tier's shares the store), with room
            opts = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} "
                    "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                    "-c max_connections=200")
            self._pg("pg_ctl", "-D", self.data, "-l", os.path.join(self.dir, "postgres.log"),
                     "-o", opts, "-w", "-t", "60", "start")
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def _pg(self, tool, *args, timeout=120):
        cmd = [os.path.join(self.bindir, tool), *args]
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=self.dir,
                           env=clean_env(LC_ALL="C"))
        if p.returncode != 0:
            raise RuntimeError(f"{tool} failed ({p.returncode}): {p.stderr or p.stdout}")
        return p.stdout

    def createdb(self, name):
        """A new database; returns its SQLAlchemy URI.  The driver is named:
        SQLAlchemy 2.1's default for a bare postgresql:// is psycopg (3), and
        psycopg2-binary is what requirements-test.txt installs."""
        self._pg("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name)
        return self.uri(name)

    def uri(self, name):
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self):
        try:
            self._pg("pg_ctl", "-D", self.data, "-m", "fast", "-w", "-t", "60", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres():
    pg = Postgres()
    yield pg
    pg.stop()


# Every server's settings (start_mlflow_server).  The job runner (huey
# consumers, periodic tasks) is not part of tracking, costs the two shared
# cores and outlives SIGTERM by the 20 s stop_mlflow_server waits
# (bench/README.md): with it, each stop of a sqlite server (the session's,
# test_faults_recording's restart and disk-full ones, the UI's, test_python_front's
# restart one, tests/soak/soak.py's when run alone) took 20 s.
SERVER_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
# uvicorn's supervisor restarts a worker that does not answer its health
# check in 5 s, which a worker still importing MLflow on a loaded 2-core
# machine does not: each restart costs the import again.
LOADED_MACHINE = "--timeout-worker-healthcheck 60"


def start_postgres_server(tmp_path_factory, postgres, db, name, **env):
    """`mlflow server` on PostgreSQL with four workers, as a deployment runs
    it (MLflow's default SQLAlchemy pool per worker, unless env sets another;
    docs/rest.md), on a new database db of the session's PostgreSQL, in a
    directory name[N]; returns (process, uri, its log)."""
    tmp = str(tmp_path_factory.mktemp(name))
    proc, uri = start_mlflow_server(tmp, backend=postgres.createdb(db), workers=4,
                                    env=dict(SERVER_ENV, **env), uvicorn_opts=LOADED_MACHINE)
    return proc, uri, os.path.join(tmp, "server.log")


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory, postgres):
    """The postgres tier's server (start_postgres_server), database mlflow."""
    proc, uri, _ = start_postgres_server(tmp_path_factory, postgres, "mlflow", "mlflow-pg")
    yield uri
    stop_mlflow_server(proc)


class ServerURI(str):
    """The server's http:// URI, which also says its backend (.backend)."""

    def __new__(cls, uri, backend):
        s = super().__new__(cls, uri)
        s.backend = backend
        return s


@pytest.fixture
def mlflow_server(request):
    """The session's server: sqlite unless the test is marked `backends`, which
    runs it once per backend (pytest_generate_tests)."""
    backend = getattr(request, "param", "sqlite")
    return ServerURI(request.getfixturevalue(f"{backend}_server"), backend)


# The tests whose verdict involves a real process's timing (reads spaced by
# their CPU cost, holds, kill order, stop bounds, a server's answers): the
# `timing` tier, which `tests/run --stress` runs with every core kept busy
# (tests/README.md).  Each of them must pass there as here: a verdict that
# moves with the machine's load is a bug in the test or the code.
TIMING_MODULES = {
    "test_proctree", "test_proctree_cow", "test_composition_real", "test_oom_order",
    "test_run_signals", "test_run_orphans", "test_companion", "test_rest_faults",
    "test_delivery_policy", "test_faults_recording", "test_python_robustness",
    "test_spool", "test_bench_quick", "test_scale_inprocess", "test_cgroup_real", "test_oom_end",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.module.__name__.rsplit(".", 1)[-1] in TIMING_MODULES:
            item.add_marker(pytest.mark.timing)
    if os.environ.get("SM_PREBUILD_PID"):
        # tests/run's background build is running: the timing tier after the
        # rest (a stable sort: each tier keeps its own order)
        items.sort(key=lambda i: i.get_closest_marker("timing") is not None)


def _ended(pid):
    """pid has exited: reaped here when it is this process's child (tests/run
    execs pytest, so its background job is), else gone or a zombie."""
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True


def _wait_for_prebuild():
    """Blocks until tests/run's background build (SM_PREBUILD_PID) has
    ended; says how long it waited."""
    pid = int(os.environ.pop("SM_PREBUILD_PID", "0") or 0)
    t0 = time.monotonic()
    while pid > 0 and not _ended(pid):
        time.sleep(1)
    if pid > 0:
        print(f"\nconftest: waited {time.monotonic() - t0:.0f} s for tests/run's background "
              f"build (.deps/prebuild.log) before the timing tier", file=sys.stderr)


def pytest_runtest_setup(item):
    if item.get_closest_marker("timing") is not None and os.environ.get("SM_PREBUILD_PID"):
        _wait_for_prebuild()


def pytest_generate_tests(metafunc):
    if "mlflow_server" in metafunc.fixturenames and \
            metafunc.definition.get_closest_marker("backends"):
        metafunc.parametrize("mlflow_server", ["sqlite", pytest.param(
            "postgres", marks=pytest.mark.postgres)], indirect=True)


def is_root():
    return os.geteuid() == 0


def have(cmd):
    return shutil.which(cmd) is not None


# The wheels' arches (scripts/build-wheel builds one per entry).
ARCHES = ["x86_64", "aarch64"]


@pytest.fixture(scope="session")
def wheels(tmp_path_factory):
    """scripts/build-wheel, once: {arch: (wheel path, the build's stderr with
    every wheel's `auditwheel show`)}; the ones tests/run's background build
    made (_prebuilt_wheels) where it made them."""
    built = _prebuilt_wheels()
    if built is None:
        p = subprocess.run([os.path.join(ROOT, "scripts", "build-wheel")], capture_output=True,
                           text=True, timeout=2400, cwd=ROOT)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]
        built = p.stdout, p.stderr
    stdout, stderr = built
    out = {}
    top = tmp_path_factory.mktemp("wheel")
    for line in stdout.strip().splitlines():
        if not line.endswith(".whl"):
            continue
        path = os.path.join(ROOT, line)
        assert os.path.isfile(path), stdout
        arch = next(a for a in ARCHES if line.endswith(f"_{a}.whl"))
        # a copy: another session's build-wheel may replace dist/ meanwhile
        dst = top / os.path.basename(path)
        shutil.copy(path, dst)
        out[arch] = (str(dst), stderr)
    assert sorted(out) == sorted(ARCHES), stdout
    return out


def _prebuilt_wheels():
    """(stdout, stderr) of the scripts/build-wheel that tests/run's background
    build ran from this tree at the session's start (SM_PREBUILD_WHEELS: the
    files' common name), once it has ended (it holds the lock until then, from
    before pytest started); None when no such build ran or it failed (then
    the fixture builds, and a failure says why)."""
    base = os.environ.get("SM_PREBUILD_WHEELS")
    if not base:
        return None
    import fcntl
    t0 = time.monotonic()
    with open(base + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        with open(base + ".out") as f, open(base + ".err") as e:
            built = f.read(), e.read()
    except FileNotFoundError:
        return None
    print(f"\nconftest: the wheels of tests/run's background build (waited "
          f"{time.monotonic() - t0:.0f} s): {built[0].split()}", file=sys.stderr)
    return built
