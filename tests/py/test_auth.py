"""MLflow's own authentication and permissions (`mlflow server --app-name
basic-auth`, mlflow/server/auth), not a proxy that checks a header: the real
permission model in front of the PostgreSQL store of the postgres tier.

The admin (its password from MLFLOW_AUTH_ADMIN_PASSWORD, as the auth app's
bootstrap reads it) makes one experiment and two users through MLflow's REST
API (users/create, 3.0 users/permissions/grant); default_permission is
NO_PERMISSIONS, so each user has exactly what it was granted:

  - editor, EDIT on the experiment: `scopemeter run` and the Python front
    record everything (every series, contiguous steps), the closing line counts
    every point delivered;
  - reader, READ: recording into a run of the experiment is refused at start
    in one line naming the refusal (HTTP 403 PERMISSION_DENIED), nothing is
    written, CMD / training goes on, enable_system_metrics() returns False;
    `scopemeter report` reads the editor's run;
  - a wrong password: one line with 401;
  - no password in any output.
"""
import base64
import json
import subprocess
import sys
import textwrap
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest

from conftest import LOADED_MACHINE, SERVER_ENV, start_mlflow_server, stop_mlflow_server
from pyfront_util import python_env
from runread import API, assert_steps_contiguous, every_window, run_cli, sm_lines

pytestmark = [pytest.mark.auth, pytest.mark.postgres]

ADMIN = "admin"
ADMIN_PW = "adm-SECRET-" + uuid.uuid4().hex[:8]
EDITOR, EDITOR_PW = "editor", "ed-SECRET-" + uuid.uuid4().hex[:8]
READER, READER_PW = "reader", "rd-SECRET-" + uuid.uuid4().hex[:8]
SECRETS = (ADMIN_PW, EDITOR_PW, READER_PW)


def call(uri, user, password, endpoint, body=None, params=None, version="2.0"):
    """One REST call as `user`; returns (HTTP status, JSON answer)."""
    url = uri + API.replace("2.0", version) + endpoint
    if params:
        url += "?" + urllib.parse.urlencode(params)
    data = json.dumps(body).encode() if body is not None else None
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    req = urllib.request.Request(url, data=data, method="POST" if data else "GET",
                                 headers={"Content-Type": "application/json",
                                          "Authorization": f"Basic {auth}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def admin(uri, endpoint, body=None, params=None, version="2.0"):
    st, out = call(uri, ADMIN, ADMIN_PW, endpoint, body, params, version)
    assert st == 200, (endpoint, st, out)
    return out


class AuthServer:
    def __init__(self, uri, experiment_id):
        self.uri, self.experiment_id = uri, experiment_id

    def new_run(self, user=ADMIN, password=ADMIN_PW):
        st, out = call(self.uri, user, password, "runs/create",
                       {"experiment_id": self.experiment_id})
        assert st == 200, out
        return out["run"]["info"]["run_id"]

    def histories(self, run_id):
        run = admin(self.uri, "runs/get", params={"run_id": run_id})["run"]
        out = {}
        for m in run["data"].get("metrics", []):
            h = admin(self.uri, "metrics/get-history",
                      params={"run_id": run_id, "metric_key": m["key"], "max_results": 25000})
            out[m["key"]] = sorted((p["step"], p["timestamp"], p["value"])
                                   for p in h.get("metrics", []))
        return out

    def tags(self, run_id):
        run = admin(self.uri, "runs/get", params={"run_id": run_id})["run"]
        return {t["key"]: t["value"] for t in run["data"].get("tags", [])}


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory, postgres, postgres_server):
    """`mlflow server --app-name basic-auth --workers 2` on the postgres tier's
    tracking database (migrated by postgres_server: two servers on one store,
    as a deployment behind a load balancer runs them) and its own auth
    database on the same PostgreSQL."""
    tmp = tmp_path_factory.mktemp("mlflow-auth")
    auth_db = postgres.createdb("mlflow_auth_users")
    ini = tmp / "basic_auth.ini"
    ini.write_text(textwrap.dedent(f"""\
        [mlflow]
        default_permission = NO_PERMISSIONS
        database_uri = {auth_db}
        admin_username = {ADMIN}
        authorization_function = mlflow.server.auth:authenticate_request_basic_auth
        """))
    proc, uri = start_mlflow_server(
        str(tmp), backend=postgres.uri("mlflow"), workers=2, app_name="basic-auth",
        uvicorn_opts=LOADED_MACHINE,
        env={**SERVER_ENV, "MLFLOW_AUTH_CONFIG_PATH": str(ini),
             "MLFLOW_AUTH_ADMIN_PASSWORD": ADMIN_PW,
             "MLFLOW_FLASK_SERVER_SECRET_KEY": uuid.uuid4().hex})
    try:
        exp = admin(uri, "experiments/create", {"name": f"auth-{uuid.uuid4().hex[:8]}"})
        exp_id = exp["experiment_id"]
        for user, pw, perm in ((EDITOR, EDITOR_PW, "EDIT"), (READER, READER_PW, "READ")):
            admin(uri, "users/create", {"username": user, "password": pw})
            admin(uri, "users/permissions/grant",
                  {"username": user, "resource_type": "experiment", "resource_id": exp_id,
                   "permission": perm}, version="3.0")
        yield AuthServer(uri, exp_id)
    finally:
        stop_mlflow_server(proc)
        log = tmp / "server.log"
        if log.exists():  # the server's own log holds no password either
            assert_no_secret(log.read_text(errors="replace"))


def assert_no_secret(*texts):
    for t in texts:
        for s in SECRETS:
            assert s not in t, f"a password appears in: {t[:2000]}"


def creds(user, pw):
    return {"MLFLOW_TRACKING_USERNAME": user, "MLFLOW_TRACKING_PASSWORD": pw}


FRONT_JOB = textwrap.dedent("""
    import sys, time, scopemeter
    ok = scopemeter.enable_system_metrics(interval=0.5)
    print("ENABLED", ok, flush=True)
    time.sleep(2.5)
    print("TRAINING WENT ON", flush=True)
    scopemeter.disable_system_metrics(timeout=20)
""")


def run_front(server, run_id, user, pw):
    env = python_env(MLFLOW_TRACKING_URI=server.uri, MLFLOW_RUN_ID=run_id, **creds(user, pw))
    return subprocess.run([sys.executable, "-c", FRONT_JOB], env=env, capture_output=True,
                          text=True, timeout=180)


def recorded_everything(server, run_id, stderr):
    hist = server.histories(run_id)
    assert hist, stderr
    counts = assert_steps_contiguous(hist)
    every_window(counts)  # every series, every window (a rate may lack the last)
    closing = [ln for ln in sm_lines(stderr) if "delivered," in ln]
    assert len(closing) == 1 and " 0 dropped" in closing[0] and " 0 refused" in closing[0] \
        and " 0 undelivered" in closing[0], stderr
    return hist


@pytest.mark.timeout(400)
def test_edit_records_everything_from_both_surfaces(auth_server, scopemeter_bin):
    # the CLI creates its run in the experiment (EDIT allows it)
    p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sleep", "2.5"],
                env={"MLFLOW_TRACKING_URI": auth_server.uri,
                     "MLFLOW_EXPERIMENT_ID": auth_server.experiment_id,
                     **creds(EDITOR, EDITOR_PW)})
    assert p.returncode == 0 and p.run_id, p.stderr
    recorded_everything(auth_server, p.run_id, p.stderr)
    assert_no_secret(p.stdout, p.stderr, json.dumps(auth_server.tags(p.run_id)))
    # the Python front attaches to a run the editor made
    run_id = auth_server.new_run(EDITOR, EDITOR_PW)
    f = run_front(auth_server, run_id, EDITOR, EDITOR_PW)
    assert f.returncode == 0 and "ENABLED True" in f.stdout, f.stderr
    recorded_everything(auth_server, run_id, f.stderr)
    assert_no_secret(f.stdout, f.stderr, json.dumps(auth_server.tags(run_id)))


def refusal_lines(stderr):
    # "HTTP 403", not "403": a line naming a cgroup path whose id holds 403 is no refusal
    return [ln for ln in sm_lines(stderr) if "HTTP 403" in ln or "PERMISSION_DENIED" in ln]


@pytest.mark.timeout(300)
def test_read_only_is_one_line_nothing_written_training_goes_on(auth_server, scopemeter_bin):
    run_id = auth_server.new_run()
    before = auth_server.tags(run_id)
    f = run_front(auth_server, run_id, READER, READER_PW)
    assert f.returncode == 0 and "ENABLED False" in f.stdout, f.stderr
    assert "TRAINING WENT ON" in f.stdout
    said = refusal_lines(f.stderr)
    assert len(said) == 1 and "PERMISSION_DENIED" in said[0] and "403" in said[0], f.stderr
    p = run_cli(scopemeter_bin, ["--run-id", run_id, "--interval", "0.5", "--", "sh", "-c",
                                 "sleep 1; echo CMD RAN"],
                env={"MLFLOW_TRACKING_URI": auth_server.uri, **creds(READER, READER_PW)})
    assert p.returncode == 0 and "CMD RAN" in p.stdout, p.stderr
    said = refusal_lines(p.stderr)
    assert len(said) == 1 and "PERMISSION_DENIED" in said[0] and "403" in said[0], p.stderr
    assert auth_server.histories(run_id) == {}
    assert auth_server.tags(run_id) == before
    assert_no_secret(f.stdout, f.stderr, p.stdout, p.stderr)


@pytest.mark.timeout(300)
def test_wrong_password_is_one_401_line(auth_server, scopemeter_bin):
    run_id = auth_server.new_run()
    wrong = "wrong-SECRET-" + uuid.uuid4().hex[:8]
    f = run_front(auth_server, run_id, EDITOR, wrong)
    assert f.returncode == 0 and "ENABLED False" in f.stdout, f.stderr
    p = run_cli(scopemeter_bin, ["--run-id", run_id, "--interval", "0.5", "--", "true"],
                env={"MLFLOW_TRACKING_URI": auth_server.uri, **creds(EDITOR, wrong)})
    assert p.returncode == 0, p.stderr
    for err in (f.stderr, p.stderr):
        said = [ln for ln in sm_lines(err) if "HTTP 401" in ln]  # not a cgroup id's 401
        assert len(said) == 1, err
        assert wrong not in err and EDITOR_PW not in err
    assert auth_server.histories(run_id) == {}


@pytest.mark.timeout(300)
def test_report_reads_the_run_with_read(auth_server, scopemeter_bin):
    p = run_cli(scopemeter_bin, ["--interval", "0.5", "--", "sleep", "2"],
                env={"MLFLOW_TRACKING_URI": auth_server.uri,
                     "MLFLOW_EXPERIMENT_ID": auth_server.experiment_id,
                     **creds(EDITOR, EDITOR_PW)})
    assert p.returncode == 0 and p.run_id, p.stderr
    env = python_env(MLFLOW_TRACKING_URI=auth_server.uri, **creds(READER, READER_PW))
    env["SCOPEMETER_PYTHON"] = sys.executable  # the report runs in this interpreter
    r = subprocess.run([scopemeter_bin, "report", p.run_id, "--json"], env=env,
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["run_id"] == p.run_id and rep["collectors"] == 1, rep
    assert_no_secret(r.stdout, r.stderr)
