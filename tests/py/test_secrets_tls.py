"""Secrets, TLS and hostile replies (docs/rest.md) — what
tests/py/test_rest_faults.py does not already cover.

Already there (not repeated): Bearer / Basic / credentials file / userinfo
sent and never in `scopemeter run`'s stdout, stderr or the run with the
server up, failing and down; TLS with a CA-signed server certificate (CA
bundle, none, insecure, both, client certificate).  Added here:

- the secrets in CMD's arguments too, and everything greppable: stdout,
  stderr, the run's tags, params and metrics, `scopemeter probe`'s output,
  and the JSONL file written when no run can be created;
- the Python front (scopemeter.enable_system_metrics() through MLflow's
  client) with a password in the tracking URI and a token, while the server
  goes away: its lines must not carry them (MLflow's own exception text
  names the URL, userinfo included);
- TLS against a self-signed certificate: verification is on by default (no
  request reaches the server, so no token is sent to it; one clear line;
  attaching to a run, the shipping thread says it too), and
  MLFLOW_TRACKING_SERVER_CERT_PATH / MLFLOW_TRACKING_INSECURE_TLS turn it off;
- replies: 50 MB answers to runs/create and to runs/log-batch (read at most
  4 MiB: the process's peak RSS stays far below the reply, said in one line,
  log-batch retried and nothing lost), truncated JSON, a JSON nesting bomb, a
  proxy's multi-line HTML error page.
"""
import base64
import datetime
import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from faultproxy import FaultProxy
from pyfront_util import python_env
from runread import (assert_steps_contiguous, every_window, get_run, histories, new_run, run_cli,
                     sm_lines)
from test_faults_recording import Lines, landed_steps, run_bg, until_file, wait_for

TOKEN = "tok-SECRET-b81c5e"
USER, PASSWORD = "bob", "pw-SECRET-9e07aa"
LOG_BATCH = "runs/log-batch"
MiB = 1 << 20


def assert_clean(*texts):
    for t in texts:
        assert TOKEN not in t and PASSWORD not in t, t[:2000]


def run_text(uri, run_id):
    """Everything MLflow holds for the run: info, tags, params, metrics."""
    return json.dumps(get_run(uri, run_id)) + json.dumps(histories(uri, run_id))


@pytest.fixture
def proxy(mlflow_server):
    p = FaultProxy(mlflow_server)
    yield p
    p.close()


# ---- secrets ----------------------------------------------------------------------------

def test_secrets_in_env_and_cmd_args_never_in_output_tags_or_params(scopemeter_bin,
                                                                     mlflow_server, proxy,
                                                                     tmp_path, probe_json):
    env = {"MLFLOW_TRACKING_URI": proxy.uri.replace("http://", f"http://{USER}:{PASSWORD}@"),
           "MLFLOW_TRACKING_TOKEN": TOKEN, "HOME": str(tmp_path)}
    # a training command whose arguments carry the secrets (people do that)
    p = run_cli(scopemeter_bin, ["--interval", "0.3", "--", "sh", "-c", "sleep 1", "train",
                                 f"--token={TOKEN}", f"--password={PASSWORD}"], env=env)
    assert p.returncode == 0, p.stderr
    assert p.run_id
    run = get_run(mlflow_server, p.run_id)
    tags = {t["key"]: t["value"] for t in run["data"]["tags"]}
    assert tags["mlflow.source.name"] == "sh"  # the program, never its arguments
    assert_clean(p.stdout, p.stderr, run_text(mlflow_server, p.run_id))
    assert any("***@" in line for line in sm_lines(p.stderr)), p.stderr  # redacted, not absent
    # probe never talks to MLflow; it must not print the environment either
    out = probe_json(env=env)
    assert_clean(json.dumps(out), out["_stderr"])


def test_jsonl_fallback_holds_no_secret(scopemeter_bin, mlflow_server, tmp_path):
    """No run can be created (the server refuses every request): the points
    go to the JSONL file — which must not carry the credentials."""
    px = FaultProxy(mlflow_server)
    try:
        px.set_fault("status", code=403, count=1000)
        uri = px.uri.replace("http://", f"http://{USER}:{PASSWORD}@")
        p = run_cli(scopemeter_bin, ["--interval", "0.3", "--startup-timeout", "2", "--",
                                     "sh", "-c", "sleep 1", "x", TOKEN],
                    env={"MLFLOW_TRACKING_URI": uri, "MLFLOW_TRACKING_TOKEN": TOKEN},
                    cwd=tmp_path)
    finally:
        px.close()
    assert p.returncode == 0, p.stderr
    files = list(tmp_path.glob("scopemeter-rank0-*.jsonl"))
    assert len(files) == 1, p.stderr
    text = files[0].read_text()
    assert '"kind":"metric"' in text
    assert_clean(text, p.stdout, p.stderr)
    assert any("cannot create an MLflow run at http://***@" in line
               for line in sm_lines(p.stderr)), p.stderr


FRONT_SCRIPT = textwrap.dedent("""
    import os, sys, time
    import mlflow, scopemeter
    gate = sys.argv[1]
    with mlflow.start_run() as run:
        print("RUN", run.info.run_id, flush=True)
        scopemeter.enable_system_metrics(interval=0.3)
        while not os.path.exists(gate):
            time.sleep(0.05)
        scopemeter.disable_system_metrics()
""")


# MLflow itself prints the tracking URI as given when a run ends ("View run
# ... at: http://user:password@host/#/..."); those lines are MLflow's, not
# scopemeter's.  With the credentials in MLFLOW_TRACKING_USERNAME/PASSWORD
# nothing anywhere shows them.
MLFLOW_OWN = ("\U0001f3c3 View run", "\U0001f9ea View experiment")


@pytest.mark.parametrize("how", ["userinfo", "environment"])
def test_python_front_lines_never_show_the_secret(mlflow_server, proxy, tmp_path, how):
    script = tmp_path / "train.py"
    script.write_text(FRONT_SCRIPT)
    gate = tmp_path / "done"
    if how == "userinfo":
        creds = {"MLFLOW_TRACKING_URI": proxy.uri.replace("http://", f"http://{USER}:{PASSWORD}@"),
                 "MLFLOW_TRACKING_TOKEN": TOKEN}
    else:
        creds = {"MLFLOW_TRACKING_URI": proxy.uri, "MLFLOW_TRACKING_USERNAME": USER,
                 "MLFLOW_TRACKING_PASSWORD": PASSWORD}
    env = python_env(**creds, HOME=str(tmp_path),
                     # fail fast: MLflow's client would otherwise retry for minutes
                     MLFLOW_HTTP_REQUEST_MAX_RETRIES=0, MLFLOW_HTTP_REQUEST_TIMEOUT=5)
    proc = Lines([sys.executable, str(script), str(gate)], env)
    try:
        run_id = proc.wait_line(r"^RUN ", timeout=120, stdout=True).split()[1]
        wait_for(lambda: landed_steps(mlflow_server, run_id) >= 2, what="two windows")
        proxy.down()  # the server goes away: the front's REST sink fails and says so
        proc.wait_line("cannot deliver to MLflow", timeout=60)
        proxy.up()
        proc.wait_line("reachable again", timeout=120)
        gate.touch()
        assert proc.finish(timeout=120) == 0, proc.lines
    finally:
        gate.touch()
        proc.kill()
    failed = [ln for ln in proc.lines if "cannot deliver to MLflow" in ln]
    assert len(failed) == 1, proc.lines
    if how == "userinfo":
        assert "http://***@127.0.0.1" in failed[0], failed  # the URL, redacted
    # the front's C path carries the credentials as MLflow's client does:
    # Bearer MLFLOW_TRACKING_TOKEN (it wins over userinfo), else Basic from
    # the environment; MLflow's request-header providers' headers ride along
    batches = proxy.log("runs/log-batch")
    assert batches, "nothing reached the proxy"
    want = f"Bearer {TOKEN}" if how == "userinfo" else \
        "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert {r.auth for r in batches} == {want}, {r.auth for r in batches}
    assert_clean(run_text(mlflow_server, run_id),
                 "\n".join(ln for ln in proc.lines + proc.out
                           if not ln.lstrip().startswith(MLFLOW_OWN)))
    if how == "environment":
        assert_clean("\n".join(proc.lines + proc.out))
    assert histories(mlflow_server, run_id)


# ---- TLS against a self-signed certificate ---------------------------------------------

@pytest.fixture(scope="module")
def self_signed(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 (what `openssl req -x509`
    makes), with `cryptography`, an MLflow dependency."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    d = tmp_path_factory.mktemp("selfsigned")
    now = datetime.datetime.now(datetime.timezone.utc)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    (d / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (d / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                  serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()))
    return d


def test_tls_self_signed_verification_on_by_default(scopemeter_bin, mlflow_server, self_signed,
                                                    tmp_path):
    px = FaultProxy(mlflow_server, tls=(str(self_signed / "cert.pem"),
                                        str(self_signed / "key.pem"), None))
    try:
        base = {"MLFLOW_TRACKING_URI": px.uri, "MLFLOW_TRACKING_TOKEN": TOKEN}
        # 1. default: refused before any request — the token never reaches it
        p = run_cli(scopemeter_bin, ["--interval", "0.3", "--startup-timeout", "3", "--", "sh",
                                     "-c", "sleep 0.5; exit 6"], env=base, cwd=tmp_path)
        assert p.returncode == 6, p.stderr
        said = [ln for ln in sm_lines(p.stderr) if "cannot create an MLflow run" in ln]
        assert len(said) == 1, p.stderr
        assert px.uri in said[0] and re.search(r"self[- ]signed certificate", said[0]), said
        assert px.log() == []  # the handshake failed: no HTTP request, no header sent
        assert list(tmp_path.glob("scopemeter-rank0-*.jsonl"))  # the points were kept
        assert_clean(p.stderr)

        # 2. attaching to a run: the REST sink's run check at start meets the
        # same refusal: one line, no recording, not retried (configuration,
        # not an outage), and nothing is sent
        run_id = new_run(mlflow_server)
        p = run_cli(scopemeter_bin, ["--run-id", run_id, "--interval", "0.3", "--stop-timeout",
                                     "5", "--", "sleep", "1.5"], env=base)
        assert p.returncode == 0, p.stderr
        lines = sm_lines(p.stderr)
        refused = [ln for ln in lines if "not recording" in ln]
        assert len(refused) == 1, lines
        assert "runs/get" in refused[0] and "certificate" in refused[0], refused
        assert not any("cannot deliver" in ln or "MLflow refused" in ln for ln in lines), lines
        assert px.log() == []
        assert histories(mlflow_server, run_id) == {}

        # 3. the certificate as CA bundle (requests' verify=PATH): accepted
        p = run_cli(scopemeter_bin, ["--interval", "0.3", "--", "sleep", "1"],
                    env={**base, "MLFLOW_TRACKING_SERVER_CERT_PATH":
                         str(self_signed / "cert.pem")})
        assert p.returncode == 0 and p.run_id, p.stderr
        assert_steps_contiguous(histories(mlflow_server, p.run_id))
        # 4. MLFLOW_TRACKING_INSECURE_TLS: not verified, accepted
        p = run_cli(scopemeter_bin, ["--interval", "0.3", "--", "sleep", "1"],
                    env={**base, "MLFLOW_TRACKING_INSECURE_TLS": "true"})
        assert p.returncode == 0 and p.run_id, p.stderr
        assert_steps_contiguous(histories(mlflow_server, p.run_id))
        assert {r.auth for r in px.log()} == {f"Bearer {TOKEN}"}
    finally:
        px.close()


# ---- https in the Python front: the TLS module, loaded for https only -------------------

TLS_SCRIPT = textwrap.dedent("""
    import sys, time
    import mlflow, scopemeter
    with mlflow.start_run() as run:
        print("RUN", run.info.run_id, flush=True)
        ok = scopemeter.enable_system_metrics(interval=0.3)
        time.sleep(1.5)
        with open("/proc/self/maps") as f:
            mapped = sorted({ln.split()[-1] for ln in f if "scopemeter-https" in ln})
        print("ENABLED", ok, flush=True)
        print("MODULE", ",".join(mapped) or "-", flush=True)
        scopemeter.disable_system_metrics()
""")


class _Redirect:
    """An http server that answers every request with 308 to the same path
    on `target` (an http tracking server put behind https, as a load
    balancer does)."""

    def __init__(self, target):
        import http.server
        import threading

        class H(http.server.BaseHTTPRequestHandler):
            def _go(self):
                self.send_response(308)
                self.send_header("Location", target + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()
            do_GET = do_POST = _go

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.uri = f"http://127.0.0.1:{self.srv.server_address[1]}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def package_copy(tmp_path, with_module):
    """The package under test copied into tmp_path: its .py files, the
    extension and, when asked, the TLS module beside it (an installed
    layout, or one that lost the module).  Returns the PYTHONPATH entry."""
    out = subprocess.run([sys.executable, "-c", "import os, scopemeter; "
                          "print(os.path.dirname(scopemeter.__file__))"],
                         env=python_env(), capture_output=True, text=True, check=True)
    src = out.stdout.strip()
    pkg = tmp_path / "pkg" / "scopemeter"
    pkg.mkdir(parents=True)
    for f in os.listdir(src):
        if f.endswith(".py") or f.startswith("_native"):
            shutil.copy(os.path.realpath(os.path.join(src, f)), pkg / f)
    if with_module:
        # beside the extension (the staged package links it from the build)
        ext = os.path.realpath(os.path.join(src, "_native.abi3.so"))
        for mod in ("scopemeter-https.so", "scopemeter-https-sys.so"):
            shutil.copy(os.path.join(os.path.dirname(ext), mod), pkg)
    return str(tmp_path / "pkg")


@pytest.mark.parametrize("how", ["http", "https", "https-installed", "redirect", "no-module"])
def test_python_front_loads_the_tls_module_for_https_only(mlflow_server, self_signed, tmp_path,
                                                          how):
    """The extension links libcurl without TLS; https goes through the module
    scopemeter-https.so beside it (src/mlflow/curl_api.c).  An http run never
    maps it; an https run (the module found beside the extension, or through
    the staged extension's symbolic link), and an http URI that redirects to
    https, ship through it; without the module, https goes through
    MlflowClient with one line."""
    px = FaultProxy(mlflow_server, tls=(str(self_signed / "cert.pem"),
                                        str(self_signed / "key.pem"), None))
    redirect = _Redirect(px.uri) if how == "redirect" else None
    uri = {"http": mlflow_server, "redirect": redirect and redirect.uri}.get(how, px.uri)
    extra = {}
    if how in ("https-installed", "no-module"):
        extra["PYTHONPATH"] = package_copy(tmp_path, with_module=how != "no-module")
    script = tmp_path / "train.py"
    script.write_text(TLS_SCRIPT)
    env = python_env(MLFLOW_TRACKING_URI=uri, MLFLOW_TRACKING_TOKEN=TOKEN,
                     MLFLOW_TRACKING_SERVER_CERT_PATH=str(self_signed / "cert.pem"),
                     MLFLOW_HTTP_REQUEST_MAX_RETRIES=0)
    env.update(extra)  # the copy, not the staged package
    try:
        p = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                           text=True, timeout=180)
    finally:
        px.close()
        if redirect:
            redirect.close()
    assert p.returncode == 0, p.stdout + p.stderr
    out = dict(ln.split(" ", 1) for ln in p.stdout.splitlines()
               if ln.startswith(("RUN ", "ENABLED ", "MODULE ")))
    assert out["ENABLED"] == "True", p.stdout + p.stderr
    lines = sm_lines(p.stderr)
    client = [ln for ln in lines if "through MlflowClient" in ln]
    if how == "http":
        assert out["MODULE"] == "-", out
    elif how == "no-module":
        assert out["MODULE"] == "-", out
        assert len(client) == 1 and "scopemeter-https.so" in client[0], lines
    else:
        where = extra.get("PYTHONPATH") if how == "https-installed" else \
            os.environ.get("SCOPEMETER_BUILD") or ""
        assert out["MODULE"] != "-" and where in out["MODULE"], (out, where)
    if how != "no-module":
        assert not client, lines
    batches = px.log("runs/log-batch")
    if how in ("https", "https-installed"):
        assert batches and {r.auth for r in batches} == {f"Bearer {TOKEN}"}, batches
    elif how == "redirect":
        # shipped over TLS after the redirect; the token is not carried to
        # another port, by libcurl as by requests (MLflow's client)
        assert batches, "nothing reached the https server"
    hist = histories(mlflow_server, out["RUN"])
    assert hist and min(assert_steps_contiguous(hist).values()) >= 2, hist
    assert_clean(p.stderr)


# ---- oversized and malformed replies -------------------------------------------------------

BIG = 50_000_000          # the reply
RSS_BOUND_KB = 40 * 1024  # far below it: the reply is read to 4 MiB at most


def vmhwm_kb(pid):
    """Peak RSS of a live process (VmHWM: this program's own, from exec on —
    unlike wait4's ru_maxrss, which carries the forking parent's)."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:"))


def test_50mb_reply_to_runs_create_is_not_read_whole(scopemeter_bin, mlflow_server, proxy,
                                                     tmp_path):
    proxy.set_fault("reply", match="runs/create", code=200, size=BIG, count=1000)
    gate = tmp_path / "done"
    cli = run_bg(scopemeter_bin, ["--interval", "0.3", "--startup-timeout", "3", "--", "sh",
                                  "-c", f'while [ ! -e "{gate}" ]; do sleep 0.05; done; exit 4'],
                 env={"MLFLOW_TRACKING_URI": proxy.uri}, cwd=tmp_path)
    try:
        cli.wait_line("cannot create an MLflow run")  # every attempt is over
        maxrss = vmhwm_kb(cli.proc.pid)
        gate.touch()
        rc = cli.finish()
    finally:
        gate.touch()
        cli.kill()
    assert rc == 4, cli.lines
    said = [ln for ln in cli.lines if "cannot create an MLflow run" in ln]
    assert len(said) == 1, cli.lines
    assert "reply not read: larger than 4 MiB" in said[0], said
    assert len(proxy.log("runs/create")) >= 2  # retried: it may be a passing proxy error
    print(f"peak RSS {maxrss} kB with {BIG} byte replies")
    assert maxrss < RSS_BOUND_KB, maxrss
    assert list(tmp_path.glob("scopemeter-rank0-*.jsonl"))


def test_50mb_reply_to_log_batch_is_retried_and_nothing_is_lost(scopemeter_bin, mlflow_server,
                                                               proxy, tmp_path):
    done = tmp_path / "done"
    cli = run_bg(scopemeter_bin, ["--interval", "0.3", "--", *until_file(done)],
                 env={"MLFLOW_TRACKING_URI": proxy.uri})
    try:
        run_id = re.search(r"created run (\w+)", cli.wait_line("created run")).group(1)
        wait_for(lambda: landed_steps(mlflow_server, run_id) >= 2, what="two windows")
        proxy.set_fault("reply", match=LOG_BATCH, code=200, size=BIG, count=3)
        cli.wait_line("cannot deliver to MLflow")
        cli.wait_line("reachable again", timeout=120)  # the three big replies are over
        maxrss = vmhwm_kb(cli.proc.pid)
        n = landed_steps(mlflow_server, run_id)
        wait_for(lambda: landed_steps(mlflow_server, run_id) >= n + 2, what="two more windows")
        done.touch()
        rc = cli.finish()
    finally:
        done.touch()
        cli.kill()
    assert rc == 0, cli.lines
    line = [ln for ln in cli.lines if "cannot deliver" in ln]
    assert len(line) == 1 and "reply not read: larger than 4 MiB" in line[0], cli.lines
    assert [r.fault for r in proxy.log(LOG_BATCH)].count("reply 200") == 3
    hist = histories(mlflow_server, run_id)
    counts = assert_steps_contiguous(hist)  # retried with the same points: none lost
    windows = int(re.search(r"logged (\d+) windows?", "\n".join(cli.lines)).group(1))
    assert every_window(counts) == windows, counts
    print(f"peak RSS {maxrss} kB with {BIG} byte replies")
    assert maxrss < RSS_BOUND_KB, maxrss


@pytest.mark.parametrize("body,why", [
    (b'{"run": {"info": {"run_id": ', "truncated JSON"),
    (b"[" * 3_000_000, "3 MB of nesting"),
    (b'{"run": {"info": {"run_id": 42}}}', "a number for the id"),
], ids=["truncated", "nesting-bomb", "wrong-type"])
def test_malformed_reply_to_runs_create_is_one_clear_line(scopemeter_bin, mlflow_server, proxy,
                                                          tmp_path, body, why):
    proxy.set_fault("reply", match="runs/create", code=200, body=body, count=1)
    p = run_cli(scopemeter_bin, ["--interval", "0.3", "--", "sh", "-c", "sleep 0.5; exit 3"],
                env={"MLFLOW_TRACKING_URI": proxy.uri}, cwd=tmp_path)
    assert p.returncode == 3, (why, p.stderr)
    lines = sm_lines(p.stderr)
    assert all(ln.startswith("scopemeter: ") for ln in p.stderr.splitlines()), p.stderr
    said = [ln for ln in lines if "cannot create an MLflow run" in ln]
    assert len(said) == 1 and said[0].endswith("the server's answer has no run_id"), (why, lines)
    assert list(tmp_path.glob("scopemeter-rank0-*.jsonl"))


def test_html_error_page_is_one_line_and_retried(scopemeter_bin, mlflow_server, proxy):
    page = (b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\n"
            b"<center><h1>502 Bad Gateway</h1></center>\n</body>\n</html>\n")
    proxy.set_fault("reply", match=LOG_BATCH, code=502, body=page, count=2)
    p = run_cli(scopemeter_bin, ["--interval", "0.3", "--", "sleep", "2"],
                env={"MLFLOW_TRACKING_URI": proxy.uri})
    assert p.returncode == 0, p.stderr
    assert all(ln.startswith("scopemeter: ") for ln in p.stderr.splitlines()), p.stderr
    said = [ln for ln in sm_lines(p.stderr) if "cannot deliver" in ln]
    assert len(said) == 1 and "HTTP 502" in said[0] and "502 Bad Gateway" in said[0], said
    statuses = [r.status for r in proxy.log(LOG_BATCH)]
    assert statuses[:2] == [502, 502] and statuses[-1] == 200, statuses
    assert_steps_contiguous(histories(mlflow_server, p.run_id))
