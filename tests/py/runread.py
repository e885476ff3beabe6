"""runread — what `scopemeter run` tests share: running the CLI, and reading
a run back through MLflow's REST API (urllib; no MLflow client import, which
costs seconds per test)."""
import atexit
import json
import os
import re
import select
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
import uuid

from conftest import clean_env

API = "/api/2.0/mlflow/"


def rest(uri, endpoint, body=None, params=None):
    url = uri + API + endpoint
    if params:
        url += "?" + urllib.parse.urlencode(params)
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method="POST" if data else "GET",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"{}")


def get_run(uri, run_id):
    return rest(uri, "runs/get", params={"run_id": run_id})["run"]


def tags_of(run):
    return {t["key"]: t["value"] for t in run["data"].get("tags", [])}


def history(uri, run_id, key):
    """Every point of one key, in step order: [(step, timestamp, value)]."""
    out, token = [], None
    while True:
        params = {"run_id": run_id, "metric_key": key, "max_results": 25000}
        if token:
            params["page_token"] = token
        r = rest(uri, "metrics/get-history", params=params)
        out += [(m["step"], m["timestamp"], m["value"]) for m in r.get("metrics", [])]
        token = r.get("next_page_token")
        if not token:
            break
    return sorted(out)


def histories(uri, run_id):
    """{key: [(step, timestamp, value)]} for every metric of the run."""
    run = get_run(uri, run_id)
    return {m["key"]: history(uri, run_id, m["key"]) for m in run["data"].get("metrics", [])}


def new_experiment():
    return f"sm-run-{uuid.uuid4().hex[:12]}"


def new_run(uri, experiment_id="0"):
    r = rest(uri, "runs/create", {"experiment_id": experiment_id,
                                  "start_time": int(time.time() * 1000)})
    return r["run"]["info"]["run_id"]


def scratch_cwd(kw):
    """A fresh working directory unless the test chose one: a run that
    cannot reach MLflow writes its JSONL file there, never into the
    checkout."""
    if "cwd" not in kw:
        d = tempfile.mkdtemp(prefix="scopemeter-cwd-")
        atexit.register(shutil.rmtree, d, True)
        kw["cwd"] = d
    return kw


def run_cli(binary, args, env=None, timeout=120, **kw):
    """`scopemeter run ARGS`; returns the CompletedProcess plus .run_id (the
    run it said it created, else None) and .took (seconds)."""
    e = clean_env(**(env or {}))
    scratch_cwd(kw)
    t0 = time.monotonic()
    p = subprocess.run([binary, "run", *args], env=e, capture_output=True, text=True,
                       timeout=timeout, **kw)
    p.took = time.monotonic() - t0
    m = re.search(r"created run ([0-9a-f]+)", p.stderr)
    p.run_id = m.group(1) if m else None
    return p


def start_cli(binary, args, env=None, **kw):
    e = clean_env(**(env or {}))
    return subprocess.Popen([binary, "run", *args], env=e, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **scratch_cwd(kw))


def read_bytes(stream, n, timeout=60):
    """Up to n bytes of a child's pipe (fewer at end of file), waited for at
    most `timeout` seconds: a child that stops writing fails the test with what
    it did write, instead of blocking it in read() forever."""
    fd = stream.fileno()
    deadline = time.monotonic() + timeout
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"{n} bytes not read within {timeout} s; got {bytes(buf)!r}")
        if select.select([fd], [], [], left)[0]:
            b = os.read(fd, n - len(buf))
            if not b:
                break
            buf += b
    return bytes(buf)


def read_line(stream, timeout=60):
    """One line of a child's pipe (text), waited for at most `timeout` seconds
    instead of an unbounded readline(); "" at end of file.  It reads the
    descriptor itself, a byte at a time, so nothing is left in a Python buffer:
    select() stays true to what is unread, and a later read_line() or
    communicate() gets the rest."""
    fd = stream.fileno()
    deadline = time.monotonic() + timeout
    buf = bytearray()
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no whole line within {timeout} s; got {bytes(buf)!r}")
        if select.select([fd], [], [], left)[0]:
            b = os.read(fd, 1)
            if not b:
                break
            buf += b
    return buf.decode(errors="replace")


def sm_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("scopemeter")]


def probe_keys(probe_json, env=None):
    """The series this host has, by the probe (same environment)."""
    return {s["key"] for s in probe_json(env=env)["series"]}


# Rate series: the final sample of a recording leaves them out when it comes
# less than min(interval/2, 1 s) after the one before (docs/design.md,
# Decisions: "The final sample at stop"), so a recording's last window may
# hold the levels alone.
RATE_KEY = re.compile(r"_(cpu_utilization|pressure)_percentage(/|$)")


def assert_window_steps(key, steps, windows):
    """One recording's history of key: steps 0..windows-1, once each; a rate
    may lack the last (RATE_KEY: the final window may hold the levels alone,
    whether it does depends on when the stop came)."""
    ok = steps == list(range(windows)) or \
        (RATE_KEY.search(key) is not None and steps == list(range(windows - 1)))
    assert ok, (key, steps, f"want 0..{windows - 1}", "a rate may lack the last")


def every_window(counts):
    """The windows of one recording from each key's count of points: every
    level has them all, a rate all or all but the last (RATE_KEY); returns
    the windows."""
    n = max(counts.values())
    bad = {k: c for k, c in counts.items()
           if c != n and not (RATE_KEY.search(k) and c == n - 1)}
    assert not bad, (f"{n} windows", bad)
    return n


def steps_ok_across_recordings(key, steps):
    """A run that several recordings continued (steps continue at last+1):
    steps from 0, strictly increasing; a hole only in a rate series and of one
    step (its recording's final window, which had the levels alone).  Returns
    None, or why not."""
    if steps != sorted(set(steps)) or (steps and steps[0] != 0):
        return f"{key}: steps {steps} restart or repeat"
    holes = [b - a - 1 for a, b in zip(steps, steps[1:]) if b - a > 1]
    if holes and (not RATE_KEY.search(key) or max(holes) > 1):
        return f"{key}: steps {steps} have a hole that is not a rate's final window"
    return None


def assert_steps_continue(hist):
    """assert_steps_contiguous for a run that several recordings continued:
    steps_ok_across_recordings for every key; returns the count of each."""
    bad = [w for w in (steps_ok_across_recordings(k, [s for s, _, _ in pts])
                       for k, pts in hist.items()) if w]
    assert not bad, bad
    for key, pts in hist.items():
        ts = [t for _, t, _ in pts]
        assert ts == sorted(ts), (key, ts)
    return {k: len(pts) for k, pts in hist.items()}


def assert_steps_contiguous(hist):
    """Every key: steps 0..n-1 once each, timestamps not decreasing with the
    step (order preserved); returns n for each key."""
    counts = {}
    for key, pts in hist.items():
        steps = [s for s, _, _ in pts]
        assert steps == list(range(len(steps))), (key, steps)
        ts = [t for _, t, _ in pts]
        assert ts == sorted(ts), (key, ts)
        counts[key] = len(steps)
    return counts
