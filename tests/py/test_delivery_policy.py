"""One delivery policy (docs/design.md § Shipping, src/mlflow/deliver.c): the
REST path (the engine's libcurl sink) and the MlflowClient path (the Python
front's thread, taken here for an http server because MLFLOW_TRACKING_AUTH
names an MLflow auth plugin, which C cannot apply) meet the same faults and
say the same lines with the same counts.

The faults, in order, each waited out before the next: a burst of three
503s, a 429 with Retry-After, a connection reset, the server down and back
up.  A real `mlflow server` sits behind tests/py/faultproxy.py;
the auth plugin is a real entry point (group mlflow.request_auth_provider)
installed for the child's interpreter only.  Numbers are normalised only
where they measure time: seconds, and the points that happened to be waiting
when a fault began (how many windows had queued); the closing line's windows
and points follow the run's length.  Dropped, refused and undelivered counts
are compared exactly."""
import os
import re
import subprocess
import sys
import time

import pytest

from faultproxy import FaultProxy
from pyfront_util import python_env
from runread import new_run, read_line

pytestmark = pytest.mark.timeout(600)

PLUGIN = "scopemeter_test_auth"

WORKER = r"""
import os, sys, time
import scopemeter
ok = scopemeter.enable_system_metrics(interval=1)
print("enabled" if ok else "not enabled", file=sys.stderr, flush=True)
while not os.path.exists(os.environ["SM_TEST_DONE"]):
    time.sleep(0.05)
scopemeter.disable_system_metrics()
"""

# the lines of the delivery policy (deliver.c), in the order said
POLICY = ("cannot deliver to MLflow", "reachable again", "MLflow refused", "stop deadline",
          "logged ")


def install_plugin(root):
    """An MLflow request-auth plugin as an installed distribution: a module
    and a dist-info whose entry point MLflow's registry loads at import."""
    (root / f"{PLUGIN}.py").write_text(
        "from mlflow.tracking.request_auth.abstract_request_auth_provider import "
        "RequestAuthProvider\n\n\n"
        "class Provider(RequestAuthProvider):\n"
        f"    def get_name(self):\n        return {PLUGIN!r}\n\n"
        "    def get_auth(self):\n        return None\n")
    info = root / f"{PLUGIN}-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PLUGIN}\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text(
        f"[mlflow.request_auth_provider]\n{PLUGIN} = {PLUGIN}:Provider\n")


class Child:
    def __init__(self, env, done):
        self.done = done
        self.lines = []
        self.p = subprocess.Popen([sys.executable, "-c", WORKER], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def wait_line(self, text, after=0, timeout=120):
        """The first line containing text, from line number `after` on."""
        deadline = time.monotonic() + timeout
        while True:
            for i in range(after, len(self.lines)):
                if text in self.lines[i]:
                    return i + 1
            left = deadline - time.monotonic()
            assert left > 0, (text, self.lines)
            try:
                ln = read_line(self.p.stderr, timeout=left)
            except AssertionError as e:
                raise AssertionError(f"{e}; waiting for {text!r} after {self.lines}") from None
            assert ln, (text, self.lines)  # end of file before the line
            self.lines.append(ln.rstrip("\n"))

    def finish(self):
        self.done.touch()
        rest = self.p.communicate(timeout=120)[1]
        self.lines += rest.splitlines()
        return self.p.returncode


def scenario(proxy, child):
    """The faults, each after the previous one was recovered from."""
    n = child.wait_line("enabled")
    n = child.wait_line("collecting", after=0)
    proxy.set_fault("status", match="runs/log-batch", code=503, count=3)
    n = child.wait_line("reachable again", after=child.wait_line("cannot deliver", after=n))
    proxy.set_fault("status", match="runs/log-batch", code=429, count=1, retry_after=1)
    n = child.wait_line("reachable again", after=child.wait_line("cannot deliver", after=n))
    # two: libcurl retries a request whose kept-alive connection was reset
    # once on a fresh one by itself (the second reset is the one it reports)
    proxy.set_fault("reset", match="runs/log-batch", count=2)
    n = child.wait_line("reachable again", after=child.wait_line("cannot deliver", after=n))
    # down between two windows' posts, so that no request is in flight (one
    # would be cut, a reset, where the next one meets a refusal)
    posts = len(proxy.log("runs/log-batch"))
    assert proxy.wait_for(lambda: len(proxy.log("runs/log-batch")) > posts)
    time.sleep(0.3)
    proxy.down()
    n = child.wait_line("cannot deliver", after=n)
    time.sleep(1.0)
    proxy.up()
    child.wait_line("reachable again", after=n)


CLOSING = re.compile(r"logged (\d+) windows? \((\d+) points?, (\d+) tags?\): (\d+) delivered, "
                     r"(\d+) dropped \(buffer full\), (\d+) refused, (\d+) undelivered at stop")


def normalised(lines):
    """The policy's lines; time-measured numbers replaced, counts kept."""
    out = []
    for ln in lines:
        if not any(k in ln for k in POLICY):
            continue
        ln = re.sub(r"after \d+ s\b", "after N s", ln)
        ln = re.sub(r"; \d+ points wait in the buffer", "; N points wait in the buffer", ln)
        m = CLOSING.search(ln)
        if m:
            w, p, t, delivered, dropped, refused, undelivered = (int(g) for g in m.groups())
            # every record accounted for, whatever the run's length
            assert delivered + dropped + refused + undelivered == p + t, ln
            ln = CLOSING.sub(f"logged W windows (P points, T tags): D delivered, {dropped} "
                             f"dropped (buffer full), {refused} refused, {undelivered} "
                             "undelivered at stop", ln)
        out.append(ln)
    return out


def run_path(proxy, tmp_path, uri, auth):
    run_id = new_run(uri)
    done = tmp_path / f"done-{auth or 'rest'}"
    extra = {"MLFLOW_TRACKING_URI": proxy.uri, "MLFLOW_RUN_ID": run_id,
             "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
             "SM_TEST_DONE": str(done)}
    if auth:
        extra.update(MLFLOW_TRACKING_AUTH=auth, PYTHONPATH=str(tmp_path / "plugin"))
    child = Child(python_env(**extra), done)
    try:
        scenario(proxy, child)
        assert child.finish() == 0, child.lines
    finally:
        done.touch()
        if child.p.poll() is None:
            child.p.kill()
        proxy.set_fault("pass")
        proxy.up()
    return child.lines


def test_rest_and_mlflowclient_paths_say_the_same(mlflow_server, tmp_path):
    (tmp_path / "plugin").mkdir()
    install_plugin(tmp_path / "plugin")
    proxy = FaultProxy(mlflow_server)
    try:
        rest = run_path(proxy, tmp_path, mlflow_server, None)
        client = run_path(proxy, tmp_path, mlflow_server, PLUGIN)
    finally:
        proxy.close()
    # the client path was taken, and said so; the REST path was not
    assert any("MLFLOW_TRACKING_AUTH" in ln for ln in client), client
    assert not any("MLFLOW_TRACKING_AUTH" in ln for ln in rest), rest
    a, b = normalised(rest), normalised(client)
    assert a == b, "\n".join(["REST:", *a, "MlflowClient:", *b])
    # the scenario's shape: four outages, four recoveries, the closing line
    assert sum("cannot deliver to MLflow" in ln for ln in a) == 4, a
    assert sum("reachable again" in ln and "no point lost" in ln for ln in a) == 4, a
    assert "Connection reset by peer" in a[4] and "Connection refused" in a[6], a
    assert a[-1].endswith("0 dropped (buffer full), 0 refused, 0 undelivered at stop"), a
