"""https from the Python front through either OpenSSL (src/mlflow/curl_api.c,
issue 25 #4).

A training process that imported mlflow holds the system's libssl.so.3
(Python's ssl module).  There the front loads scopemeter-https-sys.so, a
libcurl whose OpenSSL symbols resolve against that copy, instead of
scopemeter-https.so and its own static OpenSSL; SCOPEMETER_OPENSSL=bundled
(and a process without libssl.so.3) keeps the static module.  Both paths
must behave the same: verification on with the server's CA, a wrong CA
refused with one line and nothing shipped, a client certificate accepted by
a server that requires one, MLFLOW_TRACKING_INSECURE_TLS.  /proc/self/maps
says which module and which OpenSSL the process used.
"""
import json
import subprocess
import sys
import textwrap

import pytest

from faultproxy import FaultProxy
from pyfront_util import python_env
from runread import get_run, histories, new_run, sm_lines, tags_of
from test_rest_faults import pki  # noqa: F401  (fixture)
from test_secrets_tls import self_signed  # noqa: F401  (fixture: another CA)

pytestmark = pytest.mark.timeout(300)

SCRIPT = textwrap.dedent("""
    import json, time
    import mlflow, scopemeter  # mlflow imports ssl: libssl.so.3 is loaded
    ok = scopemeter.enable_system_metrics(interval=0.3)
    time.sleep(1.5)
    with open("/proc/self/maps") as f:
        mapped = sorted({ln.split()[-1] for ln in f
                         if "scopemeter-https" in ln or "libssl" in ln})
    scopemeter.disable_system_metrics()
    print("RESULT " + json.dumps({"ok": ok, "mapped": mapped}), flush=True)
""")

MODULE = {"system": "scopemeter-https-sys.so", "bundled": "scopemeter-https.so"}
TLS_TAG = {"system": "system-openssl", "bundled": "bundled"}


def front(tmp_path, uri, run_id, path, **env):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    e = python_env(MLFLOW_TRACKING_URI=uri, MLFLOW_RUN_ID=run_id,
                   MLFLOW_HTTP_REQUEST_MAX_RETRIES=0, **env)
    if path == "bundled":
        e["SCOPEMETER_OPENSSL"] = "bundled"
    p = subprocess.run([sys.executable, str(script)], env=e, capture_output=True, text=True,
                       timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    res = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert res, p.stdout + p.stderr
    return json.loads(res[-1][7:]), sm_lines(p.stderr)


def check_module(res, path):
    mods = [m for m in res["mapped"] if "scopemeter-https" in m]
    assert mods and all(m.endswith("/" + MODULE[path]) for m in mods), res
    ssl = [m for m in res["mapped"] if "libssl" in m]
    # Python's ssl module loaded the system's libssl.so.3 in both cases; on
    # the system path it is the only OpenSSL scopemeter uses
    assert any(m.endswith("/libssl.so.3") for m in ssl), res


@pytest.mark.parametrize("path", ["system", "bundled"])
def test_front_https_through_each_openssl(mlflow_server, pki, self_signed, tmp_path,  # noqa: F811
                                          path):
    px = FaultProxy(mlflow_server, tls=(str(pki / "server.pem"), str(pki / "server.key"), None))
    try:
        # 1. verification on, the server's CA given: shipped
        run = new_run(mlflow_server)
        res, lines = front(tmp_path, px.uri, run, path,
                           MLFLOW_TRACKING_SERVER_CERT_PATH=str(pki / "ca.pem"))
        assert res["ok"] is True, lines
        check_module(res, path)
        assert histories(mlflow_server, run), lines
        assert px.log("runs/log-batch"), "nothing reached the https server"
        # the build tag says the module the start used (docs/series.md)
        build = tags_of(get_run(mlflow_server, run))["scopemeter.rank0.build"]
        assert " tls=%s " % TLS_TAG[path] in build, build
        # 2. a CA that did not sign the server's certificate: refused, one
        # line that says so, nothing shipped
        run = new_run(mlflow_server)
        n = len(px.log("runs/log-batch"))
        res, lines = front(tmp_path, px.uri, run, path,
                           MLFLOW_TRACKING_SERVER_CERT_PATH=str(self_signed / "cert.pem"))
        said = [ln for ln in lines if "certificate" in ln.lower()]
        assert len(said) == 1, lines
        assert histories(mlflow_server, run) == {}
        assert len(px.log("runs/log-batch")) == n
        # 3. MLFLOW_TRACKING_INSECURE_TLS: not verified, shipped
        run = new_run(mlflow_server)
        res, lines = front(tmp_path, px.uri, run, path, MLFLOW_TRACKING_INSECURE_TLS="true")
        assert res["ok"] is True, lines
        check_module(res, path)
        assert histories(mlflow_server, run), lines
    finally:
        px.close()
    # 4. a server that requires a client certificate: accepted with one
    px = FaultProxy(mlflow_server, tls=(str(pki / "server.pem"), str(pki / "server.key"),
                                        str(pki / "ca.pem")))
    try:
        run = new_run(mlflow_server)
        res, lines = front(tmp_path, px.uri, run, path,
                           MLFLOW_TRACKING_SERVER_CERT_PATH=str(pki / "ca.pem"),
                           MLFLOW_TRACKING_CLIENT_CERT_PATH=str(pki / "client-bundle.pem"))
        assert res["ok"] is True, lines
        check_module(res, path)
        assert histories(mlflow_server, run), lines
    finally:
        px.close()
