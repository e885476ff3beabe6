#!/usr/bin/env python3
"""bench/server_capacity.py — the largest sustained rows/s the tracking server
takes from one job (bench/README.md table 11; docs/rest.md "Sizing").

    bench/server_capacity.py [--build DIR] [--quick] [--json PATH]
        [--backends postgres,sqlite] [--sizes 64,256,1024] [--start R] [--steps K]
        [--pool SIZE+OVERFLOW]

--start R begins every search at R rows/s (a size whose search from the
smaller job's budget would take longer than one sitting: 1024 collectors);
--steps K bounds the steps of a search (8; --quick: 1); --pool sets the
PostgreSQL server's pool per worker (MLFLOW_SQLALCHEMYSTORE_POOL_SIZE and
_MAX_OVERFLOW; default MLflow's stock 5+10, as the postgres tier runs it),
e.g. 10+31, the pool docs/rest.md sizes a shared server with.

For each server — PostgreSQL with `mlflow server --workers 4` (the postgres
tier's deployment: conftest.py's SERVER_ENV and pool, a cluster of its own)
and sqlite with 1 worker — and each job size n (64, 256, 1024 collectors;
--quick: 16), n full collectors (tests/tools/many_collectors: a monitor each, its
own identity, ring, delivery and connection) record one run at a write budget
R, doubling R from the budget of a 16 s period (a larger job: from the
smaller one's best budget, search()) until a step fails.  A step
passes when every point lands (0 dropped, refused or undelivered), the server
answers no log-batch with a 5xx, and the delivery lag stays bounded: p99 of
(the time the row reached the store - the window's timestamp, its end) under
one period, so windows do not queue (the regular windows': the stop's partial
window is posted within the stop's own spread, up to 7.5 s, once a job, and
is reported apart as lag_stop_max_s).  The store stamps each row's arrival
itself (PostgreSQL: a column defaulting to clock_timestamp(); sqlite: a
trigger into a side table), so the lag is the whole path: the sink's spread,
the HTTP request, the server, the commit.

Each step records SPAN seconds after the last collector started, so every
series holds at least 3 windows.  The driver's own sampling (n monitors)
shares the machine with the server: the capacity measured is that of the
server beside its load generator, a lower bound of the server alone.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

SERVER_ERROR = re.compile(r'"POST /api/2\.0/mlflow/runs/log-batch HTTP/1\.1" 5\d\d')
CLOSING = re.compile(r"logged (\d+) windows? \((\d+) points?, (\d+) tags?\): (\d+) delivered, "
                     r"(\d+) dropped \(buffer full\), (\d+) refused, (\d+) undelivered at stop")
SERIES = 11          # a collector's series here (no cgroup limit, no GPU; `scopemeter plan`)
FIRST_PERIOD = 16.0  # s: the first step's period
MIN_PERIOD = 1.0     # s: the interval, the floor of the budget's period
MAX_PERIOD = 256.0   # s: the longest period a step is run at (3.5 of it recorded)


class Server:
    def __init__(self, tmp, backend):
        cf = B.load_conftest()
        self.backend, self.pg, self.proc = backend, None, None
        d = os.path.join(tmp, backend)
        os.makedirs(d, exist_ok=True)
        self.log = os.path.join(d, "server.log")
        if backend == "postgres":
            self.pg = cf.Postgres()
            self.store = self.pg.createdb("mlflow")
            subprocess.run([sys.executable, "-m", "mlflow", "db", "upgrade", self.store],
                           env=cf.clean_env(), capture_output=True, text=True, timeout=900,
                           check=True)
            self.sql("ALTER TABLE metrics ADD COLUMN sm_arrived_ms double precision "
                     "DEFAULT (extract(epoch from clock_timestamp()) * 1000)")
            self.proc, self.uri = cf.start_mlflow_server(
                d, backend=self.store, workers=4, env=cf.SERVER_ENV,
                uvicorn_opts=cf.LOADED_MACHINE, startup_timeout=900)
        else:
            self.proc, self.uri = cf.start_mlflow_server(d, startup_timeout=900)
            self.store = f"sqlite:///{os.path.join(d, 'mlflow.db')}"
            self.sql("CREATE TABLE sm_arrival (run_uuid TEXT, key TEXT, step INTEGER, "
                     "arrived_ms REAL)")
            self.sql("CREATE TRIGGER sm_arrival AFTER INSERT ON metrics BEGIN INSERT INTO "
                     "sm_arrival VALUES (NEW.run_uuid, NEW.key, NEW.step, "
                     "(julianday('now') - 2440587.5) * 86400000.0); END")

    def sql(self, q, params=None):
        import sqlalchemy
        eng = sqlalchemy.create_engine(self.store)
        try:
            with eng.begin() as conn:
                r = conn.execute(sqlalchemy.text(q), params or {})
                return r.fetchall() if r.returns_rows else None
        finally:
            eng.dispose()

    def rows(self, run_id):
        """(key, step, timestamp ms, arrived ms) of every row of the run."""
        if self.pg:
            return self.sql("SELECT key, step, timestamp, sm_arrived_ms FROM metrics "
                            "WHERE run_uuid = :r", {"r": run_id})
        return self.sql("SELECT m.key, m.step, m.timestamp, a.arrived_ms FROM metrics m JOIN "
                        "sm_arrival a ON a.run_uuid = m.run_uuid AND a.key = m.key AND "
                        "a.step = m.step WHERE m.run_uuid = :r", {"r": run_id})

    def stop(self):
        cf = B.load_conftest()
        try:
            if self.proc is not None:
                cf.stop_mlflow_server(self.proc)
        finally:
            if self.pg is not None:
                self.pg.stop()


def step(server, driver, n, budget, span):
    from mlflow.tracking import MlflowClient
    run_id = MlflowClient(tracking_uri=server.uri).create_run(
        "0", run_name=f"capacity-{n}-{budget:g}").info.run_id
    log_from = os.path.getsize(server.log) if os.path.exists(server.log) else 0
    t0 = time.monotonic()
    p = subprocess.run([driver, server.uri, run_id, str(n), f"{budget:g}", str(MIN_PERIOD),
                        f"{span:g}", "30"], capture_output=True, text=True,
                       timeout=span + 900, env=B.load_conftest().clean_env())
    wall = time.monotonic() - t0
    closings = [tuple(int(g) for g in m.groups())
                for m in map(CLOSING.search, p.stderr.splitlines()) if m]
    lost = sum(c[4] + c[5] + c[6] for c in closings) + (n - len(closings)) * 10 ** 6
    errors = 0
    if os.path.exists(server.log):
        with open(server.log, errors="replace") as f:
            f.seek(log_from)
            errors = len(SERVER_ERROR.findall(f.read()))
    rows = server.rows(run_id)
    period = SERIES * n / budget
    # each series' last row is the stop's partial window, posted within a
    # quarter of the stop bound (deliver.c's spread at stop: up to 7.5 s of a
    # 30 s bound, 0.05 s a collector): a stop's cost, once a job, not the
    # sustained load the capacity is about.  Its lag is kept apart.
    by_key = {}
    for key, st, ts, a in rows:
        by_key.setdefault(key, []).append((st, ts, a))
    lag, lag_stop = [], []
    for v in by_key.values():
        v.sort()
        for i, (_, ts, a) in enumerate(v):
            if a is not None:
                (lag_stop if i == len(v) - 1 else lag).append(max(0.0, a - ts) / 1000)
    lag.sort()
    # the rate each series was logged at, summed: its regular windows (the stop's
    # partial one left out) over the time between its first and its last
    rate = 0.0
    for v in by_key.values():
        regular = [(st, ts) for st, ts, _ in v[:-1]]
        if len(regular) >= 2 and regular[-1][1] > regular[0][1]:
            rate += (len(regular) - 1) / ((regular[-1][1] - regular[0][1]) / 1000)
    p50, p99 = (B.quantile(lag, 0.5), B.quantile(lag, 0.99)) if lag else (None, None)
    ok = (p.returncode == 0 and lost == 0 and errors == 0 and p99 is not None
          and p99 < max(period, MIN_PERIOD))
    return dict(n=n, budget=budget, period_s=period, rows_per_s=rate, rows=len(rows),
                lost=lost, errors_5xx=errors, lag_p50_s=p50, lag_p99_s=p99,
                lag_stop_max_s=max(lag_stop) if lag_stop else None, ok=ok,
                exit=p.returncode, wall_s=wall)


def settle(server, bound=600.0):
    """Waits until the server answers a small request within 5 s again: a
    failed step leaves it working through the backlog of the requests whose
    clients gave up (measured: the next step's runs/create read-timed out)."""
    import urllib.request
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(server.uri + "/health", timeout=5) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(5)
    return False


def search(server, driver, n, known, steps_max, results, backend, start=None):
    """The largest passing budget for n collectors, doubling.  The first step
    is the budget of a FIRST_PERIOD period, or, when a smaller job already
    passed at fewer rows/s than that, its best budget: a window costs the server
    per row and per request, and at equal rows/s n collectors of the same
    series send the same requests a second whatever n, so the capacity in rows/s
    is where the smaller job left it (1024 collectors from a 16 s period would
    start at 704 rows/s, past what a small server takes).  A first step that
    fails halves the budget, down to a period of MAX_PERIOD, until one passes."""
    budget = SERIES * n / FIRST_PERIOD
    if known is not None and known < budget:
        budget = known
    if start:
        budget = start
    best, up = None, None
    for _ in range(steps_max):
        period = SERIES * n / budget
        span = max(3.5 * period, 10.0)
        try:
            r = step(server, driver, n, budget, span)
        except Exception as e:     # a server choked by the step before: a failed step
            r = dict(n=n, budget=budget, period_s=period, ok=False,
                     error=f"{type(e).__name__}: {e}"[:300])
        r["backend"] = backend
        results.append(r)
        print(json.dumps(r), file=sys.stderr, flush=True)
        if r["ok"]:
            best = r
            if up is False or period / 2 < MIN_PERIOD:
                break          # the step above already failed, or the floor
            up, budget = True, budget * 2
        else:
            if up is True or period * 2 > MAX_PERIOD:
                break          # the largest passing step is known, or none will
            if not settle(server):
                break          # it does not recover: no later step would say anything
            up, budget = False, budget / 2
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("SCOPEMETER_BUILD",
                                                      os.path.join(B.ROOT, "build")))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--backends", default="postgres,sqlite")
    ap.add_argument("--sizes", default=None)
    ap.add_argument("--start", type=float, default=None)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--pool", default=None)
    a = ap.parse_args()
    driver = os.path.join(a.build, "tests", "tools", "many_collectors")
    sizes = [int(x) for x in a.sizes.split(",")] if a.sizes else ([16] if a.quick
                                                                   else [64, 256, 1024])
    steps_max = a.steps or (1 if a.quick else 8)
    # the pools of the harness's servers: PostgreSQL as the postgres tier runs it
    # (conftest.py's postgres_server: MLflow's default QueuePool), sqlite as
    # bench/run's (NullPool, its note on MLflow's nested sessions)
    pools = {"postgres": None, "sqlite": "NullPool"}
    results = []
    with tempfile.TemporaryDirectory(prefix="sm-capacity-") as tmp:
        for backend in a.backends.split(","):
            if pools[backend]:
                os.environ["MLFLOW_SQLALCHEMYSTORE_POOLCLASS"] = pools[backend]
            else:
                os.environ.pop("MLFLOW_SQLALCHEMYSTORE_POOLCLASS", None)
            for k in ("MLFLOW_SQLALCHEMYSTORE_POOL_SIZE", "MLFLOW_SQLALCHEMYSTORE_MAX_OVERFLOW"):
                os.environ.pop(k, None)
            if a.pool and backend == "postgres":
                size, overflow = a.pool.split("+")
                os.environ["MLFLOW_SQLALCHEMYSTORE_POOL_SIZE"] = str(int(size))
                os.environ["MLFLOW_SQLALCHEMYSTORE_MAX_OVERFLOW"] = str(int(overflow))
            server = Server(tmp, backend)
            try:
                known = None   # the best budget of the previous (smaller) size
                for n in sorted(sizes):
                    best = search(server, driver, n, known, steps_max, results, backend,
                                  a.start)
                    results.append(dict(backend=backend, n=n, best=best))
                    known = best["budget"] if best else known
            finally:
                server.stop()
    rows = []
    for r in results:
        if "best" not in r:
            continue
        b = r["best"]
        rows.append([r["backend"] + (" (4 workers)" if r["backend"] == "postgres" else
                                     " (1 worker)"), str(r["n"])] +
                    ([f"{b['budget']:.0f}", f"{b['period_s']:.2f}", f"{b['rows_per_s']:.0f}",
                      f"{b['lag_p50_s']:.2f}", f"{b['lag_p99_s']:.2f}"]
                     if b else ["-", "-", "-", "-", "-"]))
    print(B.table("11. Server capacity: the largest sustained budget with 0 lost, 0 5xx, "
            "p99 delivery lag < one period",
            ["server", "collectors", "budget rows/s", "period s", "rows/s stored",
             "lag p50 s", "lag p99 s"], rows,
            note="each step doubles the budget from a 16 s period (or from the best budget of "
                 "the smaller job) until one fails, halving first when the first step fails "
                 "(every step is in --json); the load generator shares the machine"))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
