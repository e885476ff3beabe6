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
from runread import histories, new_run, sm_lines
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


def test_the_tls_modules_hot_functions_are_linked_together(scopemeter_bin):
    """The functions an https session runs (src/mlflow/tls-hot.txt) lie
    together in each TLS module's text, so the kernel's fault-around maps
    them and not the code between them (meson.build: gold's
    --section-ordering-file; bench/README.md "The CLI over https").  Linked
    without gold (no ld.gold) the order is not made: skipped, and said."""
    import os
    import re
    build = os.environ.get("SCOPEMETER_BUILD") or os.path.dirname(os.path.dirname(scopemeter_bin))
    hot = {ln.strip()[len(".text."):] for ln in open(
        os.path.join(os.path.dirname(__file__), "..", "..", "src", "mlflow", "tls-hot.txt"))
        if ln.startswith(".text.")}
    assert len(hot) > 1000  # scripts/tls-hot found the session's functions
    for name in MODULE.values():
        path = os.path.join(build, "cli" if name == MODULE["bundled"] else "python",
                            name)
        if not os.path.exists(path):
            pytest.skip(f"{path} not built (no bundled dependencies)")
        notes = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True).stdout
        if ".note.gnu.gold-version" not in notes:
            pytest.skip(f"{name} was not linked by gold: its text is in link order")
        syms = subprocess.run(["nm", "-S", "--defined-only", path], capture_output=True,
                              text=True, check=True).stdout
        at = sorted((int(a, 16), int(s, 16)) for a, s, t, n in
                    (ln.split() for ln in syms.splitlines() if len(ln.split()) == 4)
                    if t in "tT" and re.sub(r"\.(localalias|part\.\d+|constprop\.\d+|isra\.\d+)$",
                                            "", n) in hot)
        assert len(at) > 300, (name, len(at))
        # The smallest stretch of text that holds 3/4 of their bytes holds
        # little else: ~1.0x in order of use, ~2.1x in link order.  (Not all
        # of them: the assembly's functions share one section per file,
        # which no ordering moves.)
        need = 0.75 * sum(s for _, s in at)
        best, j, acc = None, 0, 0
        for i in range(len(at)):
            while j < len(at) and acc < need:
                acc += at[j][1]
                j += 1
            if acc < need:
                break
            span = at[j - 1][0] + at[j - 1][1] - at[i][0]
            best = span if best is None else min(best, span)
            acc -= at[i][1]
        assert best < 1.3 * need, (name, best, need)
