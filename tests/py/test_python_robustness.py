"""The Python front where the outside world is odd: tracking URIs that are
not paths, bytes that are not UTF-8, a sampling thread that does not answer,
a tracking server that never answers, a fake machine under SCOPEMETER_SYSROOT,
and the errors of series_name().

Each test was written against a reviewer's finding and fails without its fix:
the URI table (databricks turned into a local path), the non-UTF-8 node name
(the logging thread died and the run got nothing), the engine's stop bound
(always 30 s whatever disable_system_metrics(timeout=...) said), the sysroot
of the late-call check, and series_name()'s one message for three errors.
"""
import ctypes
import errno
import os
import re
import pathlib
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from runread import read_bytes, read_line

from pyfront_util import (expected_keys, new_run, python_env, read_run, staged_package,
                          system_keys, worker_cmd)


def sm_lines(stderr):
    return [ln for ln in stderr.splitlines() if ln.startswith("scopemeter:")]


def front(module="_front"):
    """scopemeter._front (or another module of the front: _route,
    _session) of the working tree (staged with the built extension when
    SCOPEMETER_BUILD is set), imported in this process."""
    root = staged_package()
    if root and root not in sys.path:
        sys.path.insert(0, root)
    import importlib
    return importlib.import_module(f"scopemeter.{module}")


# ---- 1. tracking URIs: only relative local stores are pinned -------------------------


def test_absolute_uri_pins_only_relative_local_stores(tmp_path, monkeypatch):
    f = front("_route")
    monkeypatch.chdir(tmp_path)
    cwd = os.getcwd()
    unchanged = [
        "databricks", "databricks-uc", "uc",            # bare: MLflow's remote stores
        "databricks://my-profile", "databricks-uc://my-profile", "uc:http://127.0.0.1:8080",
        "http://127.0.0.1:5000", "https://user:secret@mlflow.example.com/prefix",
        "postgresql://u:p@db.example.com:5432/mlflow", "mysql+pymysql://u@h/mlflow",
        "mssql+pyodbc://h/mlflow",
        "sqlite:////var/lib/mlflow.db", "sqlite:///:memory:", "sqlite://",
        "file:///var/lib/mlruns", "file://./mlruns",
    ]
    for uri in unchanged:
        assert f._absolute_uri(uri) == uri, uri
    pinned = {
        "sqlite:///mlflow.db": f"sqlite:///{cwd}/mlflow.db",
        "sqlite:///sub/x.db": f"sqlite:///{cwd}/sub/x.db",
        "mlruns": f"{cwd}/mlruns",
        "./a/../mlruns": f"{cwd}/mlruns",
        "/var/lib/mlruns": "/var/lib/mlruns",
        "file:mlruns": pathlib.Path(cwd, "mlruns").as_uri(),
        "file:my%20runs": pathlib.Path(cwd, "my runs").as_uri(),
    }
    for uri, want in pinned.items():
        assert f._absolute_uri(uri) == want, uri


def test_pinned_file_uri_is_the_store_mlflow_would_have_used(tmp_path, monkeypatch):
    """file:relative pinned to file:///abs names the same directory for
    MLflow's own resolver."""
    from mlflow.utils.file_utils import local_file_uri_to_path
    f = front("_route")
    monkeypatch.chdir(tmp_path)
    for uri in ("file:mlruns", "file:my%20runs/x"):
        assert local_file_uri_to_path(f._absolute_uri(uri)) == \
            os.path.abspath(local_file_uri_to_path(uri)), uri


# ---- 2. bytes that are not UTF-8 ---------------------------------------------------------


def test_non_utf8_node_name_loses_nothing(tmp_path):
    """SCOPEMETER_NODE_NAME=$'node\\xff1': the node tag holds U+FFFD where
    the byte was, the key tier '_' (names.c), and every series still lands."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    run_id = new_run(uri)
    # the environment takes bytes: surrogateescape turns \udcff into byte 0xff
    env = python_env(MLFLOW_TRACKING_URI=uri, MLFLOW_RUN_ID=run_id,
                     SCOPEMETER_NODE_NAME="node\udcff1")
    p = subprocess.run(worker_cmd("--attach", "env", "--interval", "0.5", "--seconds", "2"),
                       env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr
    assert not [ln for ln in sm_lines(p.stderr) if "thread" in ln and "ended" in ln], p.stderr
    assert "UnicodeDecodeError" not in p.stderr, p.stderr
    metrics, tags = read_run(uri, run_id)
    assert tags["scopemeter.rank0.node"] == "node\ufffd1", tags
    have_limit = tags.get("scopemeter.rank0.cgroup", "").startswith("v")
    # the tier lost a byte to '_', so it ends in '-' + the FNV-1a hash of the
    # name's bytes (docs/design.md §2): two such nodes never share a section
    h = 2166136261
    for byte in b"node\xff1":
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    tier = f"node_1-{h:08x}"
    assert system_keys(metrics) == expected_keys(0, node=tier, container=have_limit)
    for key in system_keys(metrics):
        steps = [s for s, _, _ in metrics[key]]
        assert steps == list(range(len(steps))) and len(steps) >= 2, (key, steps)
    if have_limit:  # the end tags come from the container collector
        assert "scopemeter.rank0.mem_peak_sampled_mb" in tags, sorted(tags)


def test_logging_thread_outlives_a_failing_drain(tmp_path, caplog):
    """A drain() that raises costs that drain, not the run: the logging thread
    says so once and goes on, and stop() still ends it within its bound.  The
    failure is a real one: drain() on a monitor that was never started is an
    OSError (EINVAL) from the engine, every time it is called.  In-process,
    pytest has configured logging, so the front's line reaches its handlers
    through logging.getLogger("scopemeter") (docs/python.md)."""
    f = front("_session")
    from scopemeter import _native
    s = f._Session("0" * 32, f"sqlite:///{tmp_path}/mlflow.db", _native.Monitor(), "collecting")
    s.start_pump()
    deadline = time.time() + 60     # MLflow's client opens its store first
    while time.time() < deadline and s.thread.is_alive() and getattr(s, "drain_errors", 0) < 3:
        time.sleep(0.1)
    lines = [r.getMessage() for r in caplog.records if r.name == "scopemeter"]
    assert s.thread.is_alive(), lines
    assert s.drain_errors >= 3
    s.stop(2.0)
    s.thread.join(10)
    assert not s.thread.is_alive()
    lines = [r.getMessage() for r in caplog.records if r.name == "scopemeter"]
    assert len(lines) == 1 and "from the queue failed" in lines[0], lines
    assert [r.levelname for r in caplog.records if r.name == "scopemeter"] == ["WARNING"]


# ---- 3. the stop bound reaches the engine ------------------------------------------------

_PTRACE_SEIZE, _PTRACE_INTERRUPT, _PTRACE_DETACH = 0x4206, 0x4207, 17
_WALL = 0x40000000


class _ThreadStop:
    """Stops one thread of another process and only that one: ptrace
    attaches to a thread (PTRACE_SEIZE + PTRACE_INTERRUPT, ptrace(2)), so the
    rest of the process runs on.  The thread stands for a sampling thread
    stuck in a read (a hung NFS statvfs, a wedged driver).  If this process
    dies first, the kernel detaches and the thread runs on."""

    def __init__(self, tid):
        self.tid = tid
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.ptrace.restype = ctypes.c_long
        self.libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p,
                                     ctypes.c_void_p]
        self.attached = False

    def _ptrace(self, req, data=None):
        if self.libc.ptrace(req, self.tid, None, data) < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))

    def stop(self):
        self._ptrace(_PTRACE_SEIZE)
        self.attached = True
        self._ptrace(_PTRACE_INTERRUPT)
        os.waitpid(self.tid, _WALL)  # the thread is in its ptrace stop now

    def release(self):
        if self.attached:
            self.attached = False
            try:
                self._ptrace(_PTRACE_DETACH)
            except OSError:
                pass


def _sampling_thread(pid, deadline):
    """The tid of the engine's sampling thread (pthread_setname_np "scopemeter")."""
    while time.time() < deadline:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    if f.read().strip() == "scopemeter":
                        return int(tid)
            except OSError:
                pass
        time.sleep(0.1)
    raise AssertionError("no thread named scopemeter")


def _read_line(stream, deadline):
    """Bounded (runread.read_line reads the descriptor itself, so select()
    never misses a line held in Python's buffer)."""
    return read_line(stream, max(0.1, deadline - time.time()))


def test_disable_timeout_bounds_the_engine_stop(tmp_path):
    """disable_system_metrics(timeout=3) while the sampling thread does not
    answer: the engine gives up after 3 s (its line says so), not after its
    default 30 s, and that line is the only one about the timeout."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    run_id = new_run(uri)
    code = textwrap.dedent("""
        import sys, time, scopemeter
        scopemeter.enable_system_metrics(interval=0.2)
        time.sleep(0.5)
        print("READY", flush=True)
        sys.stdin.readline()             # the test has stopped the sampling thread
        t0 = time.monotonic()
        scopemeter.disable_system_metrics(timeout=3)
        print("STOPPED %.3f" % (time.monotonic() - t0), flush=True)
        sys.stdin.readline()             # the test let it go again
    """)
    env = python_env(MLFLOW_TRACKING_URI=uri, MLFLOW_RUN_ID=run_id)
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stopper = None
    try:
        deadline = time.time() + 120
        line = _read_line(proc.stdout, deadline)
        assert line.strip() == "READY", (line, read_bytes(proc.stderr, 65536, timeout=5))
        stopper = _ThreadStop(_sampling_thread(proc.pid, deadline))
        try:
            stopper.stop()
        except OSError as e:
            if e.errno in (errno.EPERM, errno.ENOSYS):
                pytest.skip(f"ptrace not permitted here: {e}")
            raise
        proc.stdin.write("\n")
        proc.stdin.flush()
        # generous: the engine's default would be 30 s, the bound asked for 3 s
        line = _read_line(proc.stdout, time.time() + 60)
        assert line.startswith("STOPPED"), line
        elapsed = float(line.split()[1])
        stopper.release()
        proc.stdin.write("\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=60)
    finally:
        if stopper is not None:
            stopper.release()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert elapsed < 15, (elapsed, err)
    timeouts = [ln for ln in sm_lines(err) if "within" in ln]
    assert len(timeouts) == 1, err
    assert "did not finish within the stop timeout (3 s)" in timeouts[0], err


class _SilentServer:
    """A TCP listener on loopback that accepts connections and never answers:
    a tracking server that hangs."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.done = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.done:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)  # kept open, never read from or written to

    def close(self):
        self.done = True
        for c in self.conns:
            c.close()
        self.sock.close()


def test_disable_timeout_with_a_hung_tracking_server():
    """log_batch hangs on a server that never answers: disable_system_metrics
    (timeout=3) comes back within its bound, with one line."""
    server = _SilentServer()
    code = textwrap.dedent("""
        import time, scopemeter
        scopemeter.enable_system_metrics(interval=0.5)
        time.sleep(1.5)
        t0 = time.monotonic()
        scopemeter.disable_system_metrics(timeout=3)
        print("STOPPED %.3f" % (time.monotonic() - t0), flush=True)
    """)
    env = python_env(MLFLOW_TRACKING_URI=f"http://127.0.0.1:{server.port}",
                     MLFLOW_RUN_ID="0" * 32, MLFLOW_HTTP_REQUEST_TIMEOUT=300)
    try:
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=120)
    finally:
        server.close()
    assert p.returncode == 0, p.stderr
    assert server.conns, "the client never reached the silent server"
    elapsed = float(p.stdout.split("STOPPED", 1)[1].split()[0])
    print("disable_system_metrics(timeout=3) returned after", elapsed, "s")
    assert elapsed < 3 + 1, (elapsed, p.stderr)  # the bound, plus a second of slack
    lines = sm_lines(p.stderr)
    timeouts = [ln for ln in lines if "not delivered to MLflow" in ln]
    assert len(timeouts) == 1 and "stop deadline reached" in timeouts[0], p.stderr
    # the closing line counts them as undelivered, not as delivered or dropped
    closing = [ln for ln in lines if re.search(r"logged \d+ windows?", ln)]
    assert len(closing) == 1, p.stderr
    m = re.search(r"\((\d+) points, (\d+) tags\): 0 delivered, 0 dropped \(buffer full\), "
                  r"0 refused, (\d+) undelivered at stop", closing[0])
    assert m and int(m.group(3)) == int(m.group(1)) + int(m.group(2)) > 0, closing


def test_native_stop_takes_a_timeout():
    front()
    from scopemeter import _native
    m = _native.Monitor()
    with pytest.raises(ValueError, match="stop timeout"):
        m.stop(timeout=-1)
    with pytest.raises(ValueError, match="stop timeout"):
        m.stop(timeout=float("nan"))
    assert m.stop(timeout=2) is True   # never started: nothing to wait for
    assert m.stop() is True


# ---- 4. the late-call check reads the fake machine -----------------------------------------


def test_process_start_reads_under_the_sysroot(tmp_path, monkeypatch):
    f = front("_session")
    hz = os.sysconf("SC_CLK_TCK")
    (tmp_path / "proc" / "self").mkdir(parents=True)
    # proc(5): field 22 (starttime, clock ticks since boot) is the 20th after "(comm)"
    fields = ["S"] + ["0"] * 18 + [str(250 * hz)] + ["0"] * 20
    (tmp_path / "proc" / "self" / "stat").write_text("4242 (a (b) c) " + " ".join(fields) + "\n")
    (tmp_path / "proc" / "stat").write_text("cpu  1 2 3 4\nbtime 1700000000\nprocesses 9\n")
    for root in (str(tmp_path), str(tmp_path) + "/"):
        monkeypatch.setenv("SCOPEMETER_SYSROOT", root)
        assert f._process_start_ms() == (1700000000 + 250) * 1000
    monkeypatch.setenv("SCOPEMETER_SYSROOT", str(tmp_path / "nothing"))
    assert f._process_start_ms() == 0   # unreadable: no warning rather than a wrong one


# ---- 5. series_name(): one message per error ----------------------------------------------


def test_series_name_errors_say_what_is_wrong():
    front()
    from scopemeter import _native
    key = "cpu_utilization_percentage"
    assert _native.series_name(key, 3, "n1") == "system/node_cpu_utilization_percentage/n1/rank3"
    with pytest.raises(ValueError, match=r"rank must be >= 0, not -1"):
        _native.series_name(key, -1)
    # a node name of any length keeps the key within MLflow's 250 characters
    # (docs/design.md §2): shortened with a hash, no error
    long_key = _native.series_name(key, 0, "n" * 600)
    assert len(long_key) <= 250 and long_key.startswith("system/node_cpu_utilization_percentage/")
    with pytest.raises(ValueError, match=r"no naming rule covers 'bogus_key'"):
        _native.series_name("bogus_key", 0)


def test_series_parse_inverts_series_name():
    """_native.series_parse (sm_series_parse): the parts of every key
    series_name writes, None for a key it cannot write, TypeError for a
    non-string (tests/c/test_names.c round-trips the rule exhaustively)."""
    front()
    from scopemeter import _native
    for up, scope in (("cpu_utilization_percentage", "node"), ("disk_usage_megabytes", "rootfs"),
                      ("system_memory_usage_megabytes", "node"), ("gpu_1_power_usage_watts", "gpu"),
                      ("network_receive_megabytes", "pod"), ("process_count", "process"),
                      ("container_memory_usage_megabytes", "container")):
        for node in (None, "n1", "a/b c", "n" * 600):
            key = _native.series_name(up, 7, node)
            p = _native.series_parse(key)
            assert p is not None, key
            assert p["upstream"] == up and p["scope"] == scope and p["rank"] == 7
            assert key == "/".join(["system", p["scoped"]] + ([p["node"]] if p["node"] else [])
                                   + ["rank7"])
            assert bool(p["node"]) == (node is not None and scope in ("node", "rootfs"))
    for bad in ("system/custom_loss/rank5", "system/gpu_0_x/n9/rank0", "system/node_cpu_x/rank01",
                "cpu_utilization_percentage", ""):
        assert _native.series_parse(bad) is None, bad
    with pytest.raises(TypeError):
        _native.series_parse(5)
