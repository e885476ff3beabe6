"""The MLflow REST sink under faults (docs/design.md §6, docs/rest.md), against a real `mlflow
server` behind tests/py/faultproxy.py: a server down for a while then back,
500s, 429 with Retry-After, a server that accepts and never answers, a 400;
authentication and TLS configured as for MLflow's Python client; proxies
from the environment; secrets never in any output; and the training
command's step times with and without a long outage.

The C sink is also driven directly (tests/c/test_sink_mlflow.c) to check
MLflow's per-request limits: more metrics and tags than one log-batch
carries, a NaN, invalid UTF-8."""
import base64
import json
import re
import subprocess
import sys
import time

import pytest

from conftest import c_test_program, clean_env
from faultproxy import FaultProxy
from test_shipping_faults import closing
from runread import (RATE_KEY, assert_steps_contiguous, every_window, get_run, histories,
                     new_run, run_cli, sm_lines, start_cli, tags_of)

LOG_BATCH = "runs/log-batch"


@pytest.fixture
def proxy(mlflow_server):
    p = FaultProxy(mlflow_server)
    yield p
    p.close()


def metrics_in(body):
    """(key, step) of every metric in a log-batch body."""
    return {(m["key"], m["step"]) for m in json.loads(body or b"{}").get("metrics", [])}


def records_in(body):
    """Metrics as ("metric", key, step) and tags as ("tag", key, value)."""
    b = json.loads(body or b"{}")
    return ({("metric", m["key"], m["step"]) for m in b.get("metrics", [])} |
            {("tag", t["key"], t["value"]) for t in b.get("tags", [])})


def records_of_run(uri, run_id):
    hist = histories(uri, run_id)
    tags = tags_of(get_run(uri, run_id))
    return ({("metric", k, s) for k, pts in hist.items() for s, _, _ in pts} |
            {("tag", k, v) for k, v in tags.items()})


# ---- the sink alone ----------------------------------------------------------------

@pytest.mark.backends
def test_c_sink_batches_within_mlflow_limits(scopemeter_bin, mlflow_server, proxy):
    p = subprocess.run([c_test_program(scopemeter_bin, "test_sink_mlflow")], capture_output=True, text=True,
                       env=clean_env(SM_TEST_MLFLOW_URI=proxy.uri), timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    run_id = re.search(r"run_id=(\w+)", p.stdout).group(1)
    hist = histories(mlflow_server, run_id)
    assert set(hist) == {"system/test_a/rank0", "system/test_b/rank0"}  # the NaN is skipped
    counts = assert_steps_contiguous(hist)
    assert counts == {"system/test_a/rank0": 1250, "system/test_b/rank0": 1250}
    assert [v for _, _, v in hist["system/test_a/rank0"][:3]] == [0.0, 0.5, 1.0]
    tags = tags_of(get_run(mlflow_server, run_id))
    mine = {k: v for k, v in tags.items() if k.startswith("scopemeter.test.tag")}
    assert len(mine) == 150 and mine["scopemeter.test.tag007"] == "value 7 ?"
    assert sum("non-finite" in l for l in sm_lines(p.stderr)) == 1, p.stderr
    # MLflow's limits per request: <= 1000 metrics, <= 100 tags, <= 1000 in all, <= 1 MB
    batches = [r for r in proxy.log(LOG_BATCH)]
    assert len(batches) >= 3
    for r in batches:
        b = r.json()
        assert len(b["metrics"]) <= 1000 and len(b["tags"]) <= 100
        assert len(b["metrics"]) + len(b["tags"]) + len(b["params"]) <= 1000
        assert len(r.body) <= 1_000_000
        assert r.status == 200


# ---- faults under `scopemeter run` -----------------------------------------------------

def wait_batches(proxy, n, timeout=30):
    assert proxy.wait_for(lambda: len(proxy.log(LOG_BATCH)) >= n, timeout), proxy.log()


def test_server_down_then_back_every_point_lands_in_order(scopemeter_bin, mlflow_server, proxy):
    proc = start_cli(scopemeter_bin, ["--interval", "0.3", "--", "sleep", "7"],
                     env={"MLFLOW_TRACKING_URI": proxy.uri})
    wait_batches(proxy, 2)
    proxy.down()
    time.sleep(3)
    proxy.up()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    lines = sm_lines(err)
    assert any("cannot deliver to MLflow" in l for l in lines), err
    assert any("reachable again" in l and "no point lost" in l for l in lines), err
    run_id = re.search(r"created run (\w+)", err).group(1)
    hist = histories(mlflow_server, run_id)
    counts = assert_steps_contiguous(hist)  # every step, in order
    assert every_window(counts) >= 15, counts  # a rate may lack the last window
    # the steps logged during the outage arrived after it, in step order
    shipped = []
    for r in proxy.log(LOG_BATCH):
        if r.status == 200:
            shipped += sorted({s for _, s in metrics_in(r.body)})
    assert shipped == sorted(shipped)


def test_buffer_overflow_drops_the_oldest_and_says_how_many(scopemeter_bin, mlflow_server,
                                                             proxy):
    """A 256-point buffer, 8 series every 0.05 s, 3 s of outage: the oldest
    queued points go, the count is said, what remains lands in order.  The
    ring alone: no spool (SCOPEMETER_SPOOL_MAX_MB=0; with it, test_spool.py)."""
    proc = start_cli(scopemeter_bin, ["--interval", "0.05", "--buffer-points", "256", "--",
                                      "sleep", "6"],
                     env={"MLFLOW_TRACKING_URI": proxy.uri, "SCOPEMETER_SPOOL_MAX_MB": "0"})
    wait_batches(proxy, 2)
    proxy.down()
    time.sleep(3)
    proxy.up()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    lines = sm_lines(err)
    assert any("full while MLflow is unreachable" in l for l in lines), err
    back = [l for l in lines if "reachable again" in l]
    assert back and re.search(r"(\d+) oldest points were dropped", back[0]), lines
    dropped = int(re.search(r"(\d+) oldest points were dropped", back[0]).group(1))
    total = [l for l in lines if "points dropped during the run" in l]
    assert total and int(re.search(r"(\d+) points dropped", total[0]).group(1)) >= dropped > 0
    run_id = re.search(r"created run (\w+)", err).group(1)
    hist = histories(mlflow_server, run_id)
    for key, pts in hist.items():
        steps = [s for s, _, _ in pts]
        assert steps == sorted(set(steps)), key  # order kept, no duplicates
        gaps = [b - a for a, b in zip(steps, steps[1:]) if b - a > 1]
        assert len(gaps) == 1, (key, gaps)  # one hole: the oldest points of the outage
    landed = sum(len(p) for p in hist.values())
    # every window's points landed or were dropped; a rate may lack the last
    # window (runread.RATE_KEY: the final sample may hold the levels alone)
    windows = max(max(s for s, _, _ in p) + 1 for p in hist.values())
    expected = sum(windows - (1 if RATE_KEY.search(k) and max(s for s, _, _ in p) < windows - 1
                              else 0) for k, p in hist.items())
    assert landed + dropped >= expected, (landed, dropped, windows, len(hist))


def test_500s_are_retried_with_the_same_points(scopemeter_bin, mlflow_server, proxy):
    proxy.set_fault("status", match=LOG_BATCH, code=500, count=3)
    p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sleep", "3"],
                env={"MLFLOW_TRACKING_URI": proxy.uri})
    assert p.returncode == 0, p.stderr
    batches = proxy.log(LOG_BATCH)
    assert [r.status for r in batches[:4]] == [500, 500, 500, 200], batches
    # a retry carries the same points as the refused attempt (and more when
    # windows queued up meanwhile), oldest first
    first = records_in(batches[0].body)
    assert first and first <= records_in(batches[3].body)
    assert any("HTTP 500" in l for l in sm_lines(p.stderr)), p.stderr
    hist = histories(mlflow_server, p.run_id)
    counts = assert_steps_contiguous(hist)
    assert min(counts.values()) >= 5


def test_a_retry_that_meets_its_own_first_write_is_retried_not_dropped(scopemeter_bin,
                                                                        mlflow_server, proxy):
    """The first log-batch reaches the store but its answer is lost (a reset
    after the server stored it); the retry then meets the first write still in
    progress and the store refuses it with a unique-key error (MLflow's
    duplicate filter is not atomic against a concurrent write: bench/README.md
    table 10).  That 400 is retried (docs/design.md §6), never dropped: every
    point lands, nothing is counted refused."""
    dup = json.dumps({"error_code": "INVALID_PARAMETER_VALUE",
                      "message": "(sqlite3.IntegrityError) UNIQUE constraint failed: "
                                 "metrics.key, metrics.timestamp, metrics.step, "
                                 "metrics.run_uuid, metrics.value, metrics.is_nan"}).encode()
    proxy.set_fault("stored_reset", match=LOG_BATCH, code=400, count=1, body=dup)
    p = run_cli(scopemeter_bin, ["--interval", "0.3", "--", "sleep", "3"],
                env={"MLFLOW_TRACKING_URI": proxy.uri})
    assert p.returncode == 0, p.stderr
    batches = proxy.log(LOG_BATCH)
    assert [getattr(r, "fault", None) for r in batches[:2]] == ["stored_reset", "reply 400"], \
        batches
    assert batches[2].status == 200, batches
    assert not any("MLflow refused" in l for l in sm_lines(p.stderr)), p.stderr
    closing = [l for l in sm_lines(p.stderr) if re.search(r"logged \d+ windows?", l)]
    assert closing and re.search(r"0 dropped \(buffer full\), 0 refused, 0 undelivered",
                                 closing[-1]), p.stderr
    hist = histories(mlflow_server, p.run_id)
    counts = assert_steps_contiguous(hist)
    # the retry's windows landed too: as many steps as the run logged
    assert min(counts.values()) >= 5, counts


def test_429_retry_after_is_honoured(scopemeter_bin, mlflow_server, proxy):
    proxy.set_fault("status", match=LOG_BATCH, code=429, count=1, retry_after=2)
    p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sleep", "3.5"],
                env={"MLFLOW_TRACKING_URI": proxy.uri})
    assert p.returncode == 0, p.stderr
    batches = proxy.log(LOG_BATCH)
    assert batches[0].status == 429 and batches[1].status == 200, batches
    # the next attempt waited for Retry-After (a lower bound, not a timing race)
    assert batches[1].t - batches[0].t >= 1.9, batches[1].t - batches[0].t
    assert any("429" in l and "Retry-After" in l for l in sm_lines(p.stderr)), p.stderr
    assert_steps_contiguous(histories(mlflow_server, p.run_id))


def test_a_slow_answer_is_said_and_waited_for_not_sent_again(scopemeter_bin, mlflow_server,
                                                            proxy):
    """A server that answers one log-batch after 15 s (what a queue of a 1024-rank job's
    windows looks like to one collector): the outage is said after 10 s while the job runs,
    and the request is waited for, not given up and sent again on top of the work the server
    is doing for it (deliver.c, "Patience": giving up at 10 s turned CI's 1024-collector stop
    into a queue of re-sends) -- every point reaches the server once, and lands."""
    proxy.set_fault("slow", match=LOG_BATCH, delay=15, count=1)
    p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sh", "-c",
                                 "sleep 22; echo JOB END >&2"],
                env={"MLFLOW_TRACKING_URI": proxy.uri})
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    said = [ln for ln in lines[:lines.index("JOB END")] if "cannot deliver to MLflow" in ln]
    assert len(said) == 1 and "no answer for 10 s" in said[0], p.stderr
    assert sum("cannot deliver to MLflow" in ln for ln in lines) == 1, p.stderr
    assert any("reachable again" in ln and "no point lost" in ln for ln in lines), p.stderr
    batches = proxy.log(LOG_BATCH)
    assert batches[0].fault == "slow 15" and batches[0].status == 200, batches[0]
    # every point went once (a peak tag is set again, with the same value if unchanged)
    sent = [metrics_in(b.body) for b in batches]
    assert sum(map(len, sent)) == len(set().union(*sent)), "a point was sent twice"
    c = closing(p.stderr)
    assert c["delivered"] == c["points"] + c["tags"], p.stderr
    assert {("metric", k, s) for k, s in set().union(*sent)} <= records_of_run(mlflow_server,
                                                                               p.run_id)
    assert_steps_contiguous(histories(mlflow_server, p.run_id))


def test_server_that_never_answers_stop_is_bounded(scopemeter_bin, mlflow_server, proxy):
    proxy.set_fault("hang", match=LOG_BATCH)
    p = run_cli(scopemeter_bin, ["--interval", "0.5", "--stop-timeout", "3", "--", sys.executable,
                                 "-c", "import time; t=time.time(); time.sleep(2); "
                                 "print('child took %.1f' % (time.time()-t)); raise SystemExit(5)"],
                env={"MLFLOW_TRACKING_URI": proxy.uri})
    # the child's exit is unaffected; scopemeter exits with it
    assert p.returncode == 5, p.stderr
    assert "child took 2." in p.stdout
    lines = sm_lines(p.stderr)
    undelivered = [l for l in lines if "points not delivered" in l]
    assert len(undelivered) == 1, lines
    assert int(re.search(r"(\d+) points not delivered", undelivered[0]).group(1)) > 0
    # the bound: child 2 s + stop timeout 3 s + marking the run (bounded by
    # the stop timeout) + process start; generous, it guards against a hang
    print(f"scopemeter run took {p.took:.1f} s with a server that never answers")
    assert p.took < 2 + 3 + 3 + 10, p.took
    assert get_run(mlflow_server, p.run_id)["info"]["status"] == "FAILED"


@pytest.mark.backends
def test_400_is_not_retried_and_the_message_is_shown(scopemeter_bin, mlflow_server, proxy):
    proxy.set_fault("status", match=LOG_BATCH, code=400, count=1)
    p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sleep", "3"],
                env={"MLFLOW_TRACKING_URI": proxy.uri})
    assert p.returncode == 0, p.stderr
    refused_lines = [l for l in sm_lines(p.stderr) if "refused" in l and "HTTP 400" in l]
    assert len(refused_lines) == 1, p.stderr
    assert "INVALID_PARAMETER_VALUE" in refused_lines[0]
    assert "faultproxy: injected HTTP 400" in refused_lines[0]
    batches = proxy.log(LOG_BATCH)
    refused = records_in(batches[0].body)  # the start tags and what came with them
    assert batches[0].status == 400 and refused
    # never sent again, never in the run; everything after it landed
    later = set().union(*(records_in(r.body) for r in batches[1:]))
    assert not (refused & later)
    landed = records_of_run(mlflow_server, p.run_id)
    # the rank's node tag was in the run before any batch: the run check wrote
    # it (docs/rest.md "The run check"); of the refused batch nothing else landed
    checked = {r for r in refused if r[0] == "tag" and r[1] == "scopemeter.rank0.node"}
    assert checked and not ((refused - checked) & landed), refused & landed
    # metrics exactly; tags by key: a window tag (docs/design.md §9:
    # process_tree_peak, memory_at_peak, ...) sent again with a new value
    # replaces its earlier value in the run
    metrics = {r for r in later if r[0] == "metric"}
    assert metrics and metrics <= landed
    assert {r[1] for r in later if r[0] == "tag"} <= {r[1] for r in landed if r[0] == "tag"}
    assert any(r[0] == "metric" for r in later)
    assert any("points dropped" in l for l in sm_lines(p.stderr)), p.stderr


# ---- auth, TLS, proxies, secrets ----------------------------------------------------------

TOKEN = "tok-SECRET-7f3a9c"
USER, PASSWORD = "alice", "pw-SECRET-41d2"


def assert_no_secret(secret, *texts):
    for t in texts:
        assert secret not in t


def all_run_text(uri, run_id):
    run = get_run(uri, run_id)
    return json.dumps(run) + json.dumps(histories(uri, run_id))


def test_bearer_token_sent_and_never_shown(scopemeter_bin, mlflow_server, proxy, tmp_path):
    p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sleep", "1"],
                env={"MLFLOW_TRACKING_URI": proxy.uri, "MLFLOW_TRACKING_TOKEN": TOKEN,
                     "HOME": str(tmp_path)})  # no ~/.mlflow/credentials of the developer
    assert p.returncode == 0, p.stderr
    auths = {r.auth for r in proxy.log()}
    assert auths == {f"Bearer {TOKEN}"}, auths
    assert_no_secret(TOKEN, p.stdout, p.stderr, all_run_text(mlflow_server, p.run_id))


def test_basic_auth_wins_over_token_as_in_mlflow(scopemeter_bin, mlflow_server, proxy, tmp_path):
    p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sleep", "1"],
                env={"MLFLOW_TRACKING_URI": proxy.uri, "MLFLOW_TRACKING_TOKEN": TOKEN,
                     "HOME": str(tmp_path),
                     "MLFLOW_TRACKING_USERNAME": USER, "MLFLOW_TRACKING_PASSWORD": PASSWORD})
    assert p.returncode == 0, p.stderr
    want = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert {r.auth for r in proxy.log()} == {want}
    assert_no_secret(PASSWORD, p.stdout, p.stderr, all_run_text(mlflow_server, p.run_id))
    assert_no_secret(TOKEN, p.stdout, p.stderr)


def test_credentials_file_like_mlflow(scopemeter_bin, mlflow_server, proxy, tmp_path):
    (tmp_path / ".mlflow").mkdir()
    (tmp_path / ".mlflow" / "credentials").write_text(
        f"[mlflow]\nmlflow_tracking_username = {USER}\nmlflow_tracking_password = {PASSWORD}\n")
    p = run_cli(scopemeter_bin, ["--interval", "5", "--", "true"],
                env={"MLFLOW_TRACKING_URI": proxy.uri, "HOME": str(tmp_path)})
    assert p.returncode == 0, p.stderr
    want = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert {r.auth for r in proxy.log()} == {want}


def test_headers_from_the_environment_pass_a_gateway(scopemeter_bin, mlflow_server, proxy):
    """SCOPEMETER_HTTP_HEADERS (docs/rest.md): a gateway in front of MLflow that
    refuses a request without its header lets every request of scopemeter run
    through; without the variable it refuses them (said, CMD runs); a malformed
    value is one line that never quotes it, and nothing is sent without it."""
    secret = "gw-" + "7" * 12
    proxy.require = ("X-Gateway-Key", secret)
    p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sleep", "1"],
                env={"MLFLOW_TRACKING_URI": proxy.uri,
                     "SCOPEMETER_HTTP_HEADERS": json.dumps({"X-Gateway-Key": secret})})
    assert p.returncode == 0 and p.run_id, p.stderr
    assert proxy.log() and not [r for r in proxy.log() if r.fault], proxy.log()
    assert histories(mlflow_server, p.run_id), "no point landed"
    assert_no_secret(secret, p.stdout, p.stderr, all_run_text(mlflow_server, p.run_id))
    n = len(proxy.log())
    p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "true"],
                env={"MLFLOW_TRACKING_URI": proxy.uri})
    assert p.returncode == 0 and p.run_id is None, p.stderr
    assert "401" in p.stderr, p.stderr
    assert {r.fault for r in proxy.log()[n:]} == {"unauthenticated"}
    n = len(proxy.log())
    p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "true"],
                env={"MLFLOW_TRACKING_URI": proxy.uri,
                     "SCOPEMETER_HTTP_HEADERS": '{"X-Gateway-Key": "%s"' % secret})
    assert p.returncode == 0 and p.run_id is None, p.stderr
    said = [ln for ln in p.stderr.splitlines() if "SCOPEMETER_HTTP_HEADERS" in ln]
    assert len(said) == 1 and "not a JSON object" in said[0], p.stderr
    assert_no_secret(secret, p.stdout, p.stderr)
    assert len(proxy.log()) == n  # nothing sent without the header


def test_secrets_in_uri_and_failures_never_shown(scopemeter_bin, mlflow_server, proxy):
    """userinfo in the tracking URI, a token, and a server that fails: every
    line that names the server must be redacted."""
    uri = proxy.uri.replace("http://", f"http://{USER}:{PASSWORD}@")
    proxy.set_fault("status", match=LOG_BATCH, code=503, count=2)
    p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sleep", "1.5"],
                env={"MLFLOW_TRACKING_URI": uri, "MLFLOW_TRACKING_TOKEN": TOKEN})
    assert p.returncode == 0, p.stderr
    assert any("***@" in l for l in sm_lines(p.stderr)), p.stderr
    assert_no_secret(PASSWORD, p.stdout, p.stderr, all_run_text(mlflow_server, p.run_id))
    assert_no_secret(TOKEN, p.stdout, p.stderr, all_run_text(mlflow_server, p.run_id))
    # and with the server down for good, at stop
    proxy.down()
    run_id = new_run(mlflow_server)
    p = run_cli(scopemeter_bin, ["--run-id", run_id, "--interval", "0.3", "--stop-timeout", "1",
                                 "--startup-timeout", "1", "--", "sleep", "1"],
                env={"MLFLOW_TRACKING_URI": uri, "MLFLOW_TRACKING_TOKEN": TOKEN})
    assert p.returncode == 0
    assert any("points not delivered" in l for l in sm_lines(p.stderr)), p.stderr
    assert_no_secret(PASSWORD, p.stdout, p.stderr)
    assert_no_secret(TOKEN, p.stdout, p.stderr)


def test_http_proxy_from_the_environment(scopemeter_bin, mlflow_server, proxy):
    for var in ("http_proxy", "HTTP_PROXY"):
        before = len(proxy.log())
        p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sleep", "1"],
                    env={"MLFLOW_TRACKING_URI": mlflow_server, var: proxy.uri})
        assert p.returncode == 0, p.stderr
        seen = proxy.log()[before:]
        assert seen and all(r.proxied for r in seen), (var, seen)
        assert LOG_BATCH in " ".join(r.path for r in seen)
        assert histories(mlflow_server, p.run_id)
    # no_proxy: straight to the server
    before = len(proxy.log())
    p = run_cli(scopemeter_bin, ["--interval", "5", "--", "true"],
                env={"MLFLOW_TRACKING_URI": mlflow_server, "http_proxy": proxy.uri,
                     "no_proxy": "127.0.0.1"})
    assert p.returncode == 0, p.stderr
    assert len(proxy.log()) == before


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, a server certificate for 127.0.0.1 and a client certificate,
    made with `cryptography` (an MLflow dependency, so nothing extra)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    d = tmp_path_factory.mktemp("pki")
    now = datetime.datetime.now(datetime.timezone.utc)

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def pem_key(k):
        return k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                               serialization.NoEncryption())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("sm test CA")).issuer_name(name("sm test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                         critical=True)
          .sign(ca_key, hashes.SHA256()))
    (d / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))

    def leaf(cn, usage, san=None):
        key = ec.generate_private_key(ec.SECP256R1())
        b = (x509.CertificateBuilder().subject_name(name(cn)).issuer_name(ca.subject)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(hours=1))
             .not_valid_after(now + datetime.timedelta(days=2))
             .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if san:
            b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return key, b.sign(ca_key, hashes.SHA256())

    skey, scert = leaf("127.0.0.1", ExtendedKeyUsageOID.SERVER_AUTH,
                       [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    (d / "server.pem").write_bytes(scert.public_bytes(serialization.Encoding.PEM))
    (d / "server.key").write_bytes(pem_key(skey))
    ckey, ccert = leaf("sm client", ExtendedKeyUsageOID.CLIENT_AUTH)
    # MLFLOW_TRACKING_CLIENT_CERT_PATH is one PEM with certificate and key
    (d / "client-bundle.pem").write_bytes(ccert.public_bytes(serialization.Encoding.PEM) +
                                          pem_key(ckey))
    return d


def tls_proxy(mlflow_server, pki, client_ca=False):
    return FaultProxy(mlflow_server, tls=(str(pki / "server.pem"), str(pki / "server.key"),
                                          str(pki / "ca.pem") if client_ca else None))


def test_tls_server_cert_path_and_insecure(scopemeter_bin, mlflow_server, pki):
    px = tls_proxy(mlflow_server, pki)
    try:
        # the CA bundle verifies the server
        p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sleep", "1"],
                    env={"MLFLOW_TRACKING_URI": px.uri,
                         "MLFLOW_TRACKING_SERVER_CERT_PATH": str(pki / "ca.pem")})
        assert p.returncode == 0 and p.run_id, p.stderr
        assert histories(mlflow_server, p.run_id)
        # without it the certificate is not trusted: said, and CMD still runs
        p = run_cli(scopemeter_bin, ["--interval", "5", "--startup-timeout", "3", "--", "sh",
                                     "-c", "exit 6"],
                    env={"MLFLOW_TRACKING_URI": px.uri}, cwd=pki)
        assert p.returncode == 6
        assert any("cannot create an MLflow run" in l and "certificate" in l.lower()
                   for l in sm_lines(p.stderr)), p.stderr
        # MLFLOW_TRACKING_INSECURE_TLS=true skips verification
        p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sleep", "1"],
                    env={"MLFLOW_TRACKING_URI": px.uri, "MLFLOW_TRACKING_INSECURE_TLS": "true"})
        assert p.returncode == 0 and p.run_id, p.stderr
        assert histories(mlflow_server, p.run_id)
        # both at once is refused, as MLflow refuses it
        p = run_cli(scopemeter_bin, ["--interval", "5", "--", "true"],
                    env={"MLFLOW_TRACKING_URI": px.uri, "MLFLOW_TRACKING_INSECURE_TLS": "true",
                         "MLFLOW_TRACKING_SERVER_CERT_PATH": str(pki / "ca.pem")}, cwd=pki)
        assert p.returncode == 0
        assert any("only one of them may be" in l for l in sm_lines(p.stderr)), p.stderr
    finally:
        px.close()


def test_tls_client_certificate(scopemeter_bin, mlflow_server, pki):
    px = tls_proxy(mlflow_server, pki, client_ca=True)
    try:
        env = {"MLFLOW_TRACKING_URI": px.uri,
               "MLFLOW_TRACKING_SERVER_CERT_PATH": str(pki / "ca.pem")}
        p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sleep", "1"],
                    env={**env, "MLFLOW_TRACKING_CLIENT_CERT_PATH": str(pki / "client-bundle.pem")})
        assert p.returncode == 0 and p.run_id, p.stderr
        assert histories(mlflow_server, p.run_id)
        # MLflow's own client accepts the same settings (parity check)
        script = ("import mlflow; c = mlflow.MlflowClient(); "
                  f"print(c.get_run('{p.run_id}').info.status)")
        q = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           timeout=120,
                           env=clean_env(**env, MLFLOW_TRACKING_CLIENT_CERT_PATH=str(
                               pki / "client-bundle.pem")))
        assert q.returncode == 0 and q.stdout.strip() == "FINISHED", q.stderr[-2000:]
        # without the client certificate the server refuses the handshake
        p = run_cli(scopemeter_bin, ["--interval", "5", "--startup-timeout", "3", "--", "true"],
                    env=env, cwd=pki)
        assert p.returncode == 0
        assert any("cannot create an MLflow run" in l for l in sm_lines(p.stderr)), p.stderr
    finally:
        px.close()


# ---- training is never stalled by the network ----------------------------------------

STEPPER = r"""
import sys, time
n = int(sys.argv[1])
for i in range(n):
    t = time.perf_counter()
    s = 0
    for k in range(200000):
        s += k * k
    print("step", i, time.perf_counter() - t, flush=True)
"""


def step_times(out):
    return [float(line.split()[2]) for line in out.splitlines() if line.startswith("step ")]


def test_long_outage_does_not_stall_training(scopemeter_bin, mlflow_server, proxy, tmp_path):
    """Step times of a CPU loop, recorded at interval 0.2 s, with the server
    up and with it down for the whole run; the ratio is printed (no threshold:
    the machine is shared).  Shipping is another thread that waits; the child
    is another process; neither should slow the loop."""
    script = tmp_path / "stepper.py"
    script.write_text(STEPPER)
    times = {"server up": [], "server down": []}
    # alternating, twice each, so a neighbour's load on the shared machine
    # hits both cases alike
    for case in ("server up", "server down", "server up", "server down"):
        run_id = new_run(mlflow_server)
        if case == "server down":
            proxy.down()
        p = run_cli(scopemeter_bin, ["--run-id", run_id, "--interval", "0.2", "--stop-timeout",
                                     "2", "--startup-timeout", "1", "--", sys.executable,
                                     str(script), "80"],
                    env={"MLFLOW_TRACKING_URI": proxy.uri}, timeout=300)
        proxy.up()
        assert p.returncode == 0, p.stderr
        t = step_times(p.stdout)
        assert len(t) == 80
        times[case] += t
        if case == "server down":
            assert any("cannot deliver" in l for l in sm_lines(p.stderr)), p.stderr
        else:
            assert histories(mlflow_server, run_id)
    means = {k: sum(v) / len(v) for k, v in times.items()}
    ratio = means["server down"] / means["server up"]
    print(f"mean step time: server up {means['server up'] * 1e3:.2f} ms, "
          f"server down {means['server down'] * 1e3:.2f} ms, ratio down/up {ratio:.3f}")
