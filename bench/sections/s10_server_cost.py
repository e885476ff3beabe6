"""Table 10: the tracking server's CPU per collector (issue 23): its process
tree's and, on PostgreSQL, the postmaster's, from /proc, minus an idle
baseline, at 16, 64, 256 collectors, a sqlite and a PostgreSQL server side by
side.  Full runs only unless named in --only (it starts its own PostgreSQL
cluster)."""
import json
import os
import subprocess
import sys
import threading
import time

import benchlib as B
from harness import RECEIPT, ROUTINE, log


COST_RATE = 16.0    # windows per second each server receives in every row (interval = n / 16)


COST_STARTUP = 600  # s for a server's /health: 4 workers importing MLflow took 90 s at load 36


def tree_cpu_s(pid):
    """CPU seconds of pid and every live process below it (utime + stime), plus
    what their reaped children spent (cutime + cstime, proc(5)): a uvicorn
    worker or a PostgreSQL backend that exits keeps counting.  None when pid
    is gone."""
    total = 0.0
    for q in [pid] + B.descendants(pid):
        try:
            with open(f"/proc/{q}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            if q == pid:
                return None
            continue
        # after "(comm)": utime, stime, cutime, cstime are fields 11-14
        total += sum(int(x) for x in fields[11:15]) / B.CLK_TCK
    return total


class CostServer:
    """One backend of table 10, started fresh for it: sqlite (the harness's
    server: 1 worker, NullPool) or PostgreSQL (the postgres tier's deployment:
    a cluster of its own, `mlflow server --workers 4`, MLflow's default
    QueuePool).  cpu() = (the mlflow server's process tree, the postmaster's)."""

    def __init__(self, c, backend):
        cf = B.load_conftest()
        self.backend, self.pg, self.proc = backend, None, None
        tmp = os.path.join(c.tmp, f"cost-{backend}")
        os.makedirs(tmp, exist_ok=True)
        try:
            if backend == "postgres":
                self.pg = cf.Postgres()
                self.store = self.pg.createdb("mlflow")
                # MLflow's migrations first, unbounded by the server's 120 s
                # start-up limit (minutes on a loaded machine, beside two
                # other servers starting)
                subprocess.run([sys.executable, "-m", "mlflow", "db", "upgrade", self.store],
                               env=cf.clean_env(), capture_output=True, text=True, timeout=900,
                               check=True)
                with open(os.path.join(self.pg.data, "postmaster.pid")) as f:
                    self.pg_pid = int(f.readline())
                self.proc, self.uri = cf.start_mlflow_server(
                    tmp, backend=self.store, workers=4, uvicorn_opts=cf.LOADED_MACHINE,
                    env=dict(cf.SERVER_ENV, MLFLOW_SQLALCHEMYSTORE_POOLCLASS="QueuePool"),
                    startup_timeout=COST_STARTUP)
            else:
                self.proc, self.uri = cf.start_mlflow_server(tmp, startup_timeout=COST_STARTUP)
                self.store = f"sqlite:///{os.path.join(tmp, 'mlflow.db')}"
        except BaseException:
            self.stop()
            raise

    def cpu(self):
        return (tree_cpu_s(self.proc.pid),
                tree_cpu_s(self.pg_pid) if self.pg else 0.0)

    def windows(self, run_ids, since, until):
        """Windows logged into the runs with a timestamp in [since, until)
        (every key of one window carries the same timestamp, the rank is the
        key's last part), and the runs' series."""
        import sqlalchemy
        eng = sqlalchemy.create_engine(self.store)
        rows = []
        try:
            with eng.connect() as conn:
                for r in run_ids:
                    rows += [(r, k, ts) for k, ts in conn.execute(sqlalchemy.text(
                        "SELECT key, timestamp FROM metrics WHERE run_uuid = :r"), {"r": r})]
        finally:
            eng.dispose()
        win = {(r, k.rsplit("/", 1)[-1], ts) for r, k, ts in rows
               if since * 1000 <= ts < until * 1000}
        return len(win), len({(r, k) for r, k, _ in rows})

    def stop(self):
        """Stops the server and the cluster; again is a no-op."""
        cf = B.load_conftest()
        proc, pg, self.proc, self.pg = self.proc, self.pg, None, None
        try:
            if proc is not None:
                cf.stop_mlflow_server(proc)
        finally:
            if pg is not None:
                pg.stop()


def cost_phase(c, servers, n, span):
    """n collectors per server at once — n/4 jobs of 4 pods (RANK 0-3,
    WORLD_SIZE 4, one run per job), so the write-load cap leaves their window
    at `interval` — their starts spread evenly over one window so each server
    receives COST_RATE windows a second; the servers' CPU over `span` seconds
    of steady state (every collector started, its start-up requests done) and
    the windows logged in that span."""
    from mlflow.tracking import MlflowClient
    interval = max(1.0, n / COST_RATE)
    runs = {b: [MlflowClient(tracking_uri=s.uri).create_run("0", run_name=f"cost-{n}-job{j}")
                .info.run_id for j in range(n // 4)] for b, s in servers.items()}
    sleep_s = 2 * interval + span + 10        # the first started ends well after the span
    procs = []
    t0 = time.monotonic()
    for i in range(n):
        delay = t0 + i * interval / n - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        for b, s in servers.items():
            env = c.env(MLFLOW_TRACKING_URI=s.uri, RANK=i % 4, LOCAL_RANK=0, WORLD_SIZE=4,
                        LOCAL_WORLD_SIZE=1, NODE_NAME=f"node{i}")
            procs.append((b, i, subprocess.Popen(
                [c.cli, "run", "--run-id", runs[b][i // 4], "--all-workers", "--interval",
                 f"{interval:g}", "--startup-timeout", "120", "--", "sleep", f"{sleep_s:g}"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)))
    spawned = time.monotonic()
    begin = max(spawned, t0 + interval) + 5
    time.sleep(max(0.0, begin - time.monotonic()))
    w0, cpu0 = time.time(), {b: s.cpu() for b, s in servers.items()}
    time.sleep(span)
    w1, cpu1 = time.time(), {b: s.cpu() for b, s in servers.items()}
    lagged = time.monotonic() > t0 + sleep_s    # the first collectors ended inside the span
    bad, problems = [], []
    for b, i, pr in procs:
        try:
            _, err = pr.communicate(timeout=sleep_s + 300)
        except subprocess.TimeoutExpired:
            pr.kill()
            _, err = pr.communicate()
        if pr.returncode != 0:
            bad.append(f"{b} n={n} rank {i}: exit {pr.returncode}: {err[-300:]}")
        problems += [f"{b} n={n} collector {i}: {ln}" for ln in err.splitlines()
                     if not any(w in ln for w in ROUTINE + ("recording into run",))
                     and not RECEIPT.search(ln)]
    if bad:
        raise RuntimeError("; ".join(bad[:3]))
    if lagged:
        raise RuntimeError(f"n={n}: starting the collectors took {spawned - t0:.0f} s, the first "
                           "ended inside the measured span")
    out = {}
    for b, s in servers.items():
        wins, series = s.windows(runs[b], w0, w1)
        out[b] = {"interval_s": interval, "span_s": w1 - w0, "windows": wins, "series": series,
                  "cpu_s": [cpu1[b][k] - cpu0[b][k] for k in (0, 1)],
                  "spawn_s": spawned - t0}
    return out, problems


def start_cost_servers(c):
    """Starts table 10's two servers in the background, at once (the
    PostgreSQL one migrates its database: minutes on a loaded machine), beside
    the harness's."""
    box = {}

    def go(b):
        try:
            box[b] = CostServer(c, b)
        except BaseException as e:
            box["error"] = e
    log("10: starting a sqlite server and a PostgreSQL cluster + 4-worker server")
    threads = [threading.Thread(target=go, args=(b,), daemon=True)
               for b in ("sqlite", "postgres")]
    for t in threads:
        t.start()
    c.cost = (threads, box)


def stop_cost_servers(c):
    if c.cost is not None:
        threads, box = c.cost
        for t in threads:
            t.join()
        for b in ("sqlite", "postgres"):
            if b in box:
                box[b].stop()


def section10(c):
    p = c.p
    backends = ("sqlite", "postgres")
    if c.cost is None:
        start_cost_servers(c)
    threads, box = c.cost
    for t in threads:
        t.join()
    servers = {b: box[b] for b in backends if b in box}
    try:
        if "error" in box:
            raise box["error"]
        servers = {b: servers[b] for b in backends}
        time.sleep(3)
        # the idle baseline: what the servers spend with nobody posting
        w0, cpu0 = time.monotonic(), {b: s.cpu() for b, s in servers.items()}
        time.sleep(p["s10_baseline"])
        w1, cpu1 = time.monotonic(), {b: s.cpu() for b, s in servers.items()}
        idle = {b: [(cpu1[b][k] - cpu0[b][k]) / (w1 - w0) for k in (0, 1)] for b in backends}
        res, problems = {"idle_cpu_s_per_s": idle}, []
        for n in p["s10_n"]:
            log(f"10: {n} collectors per server ({2 * n} processes), "
                f"{max(1.0, n / COST_RATE):g} s window")
            res[n], pr = cost_phase(c, servers, n, p["s10_span"])
            problems += pr
    finally:
        stop_cost_servers(c)
    rows = []
    for n in p["s10_n"]:
        plan = json.loads(subprocess.run(
            [c.cli, "plan", "--workers", str(n), "--all-workers", "--json"],
            capture_output=True, text=True, check=True).stdout)
        row = [str(n), f"{res[n]['sqlite']['interval_s']:g} s"]
        for b in backends:
            r = res[n][b]
            net = [r["cpu_s"][k] - idle[b][k] * r["span_s"] for k in (0, 1)]
            ms = [x * 1000 / r["windows"] if r["windows"] else float("nan") for x in net]
            r["ms_per_window"] = {"mlflow": ms[0], "postgres": ms[1], "total": ms[0] + ms[1]}
            # a collector at the default 10 s window: 360 windows an hour
            r["cpu_s_per_collector_hour_10s"] = (ms[0] + ms[1]) * 360 / 1000
            # all n collectors as scopemeter ships them: the capped period
            r["cpu_s_per_hour_n_capped"] = (ms[0] + ms[1]) * n * 3600 / plan["period_s"] / 1000
            r["period_s_capped"] = plan["period_s"]
            row += [str(r["windows"]),
                    (f"{B.fmt_num(ms[0], 2)} + {B.fmt_num(ms[1], 2)}" if b == "postgres"
                     else B.fmt_num(ms[0], 2)),
                    B.fmt_num(r["cpu_s_per_collector_hour_10s"], 2)]
        row += [f"{plan['period_s']:g} s"] + [B.fmt_num(res[n][b]["cpu_s_per_hour_n_capped"], 1)
                                              for b in backends]
        rows.append(row)
    c.tables.append(B.table(
        "10. Tracking server CPU per collector (sqlite: 1 worker; PostgreSQL: 4 workers + postgres)",
        ["n", "window", "sqlite windows", "ms/window", "s/collector-h",
         "pg windows", "ms/window mlflow+postgres", "s/collector-h", "capped period",
         "n at cap: sqlite s/h", "pg s/h"], rows,
        [f"per row and server n `scopemeter run --all-workers --interval W -- sleep T` processes "
         f"as n/4 jobs of 4 pods (RANK 0-3, WORLD_SIZE=4, one run per job: the write-load cap "
         f"leaves W = n/{COST_RATE:g} s), both servers at once, starts spread evenly over one "
         f"window: each server receives {COST_RATE:g} windows/s in every row",
         f"server CPU: utime+stime (+ reaped children's) of the mlflow server's process tree and "
         f"of the postmaster's, from /proc/PID/stat, over {p['s10_span']:g} s of steady state, "
         f"minus the idle baseline ({p['s10_baseline']:g} s before the first row: sqlite "
         f"{idle['sqlite'][0] * 1000:.1f} ms/s, PostgreSQL mlflow {idle['postgres'][0] * 1000:.1f}"
         f" + postgres {idle['postgres'][1] * 1000:.1f} ms/s), divided by the windows stamped in "
         "the span (counted in the store)",
         "s/collector-h: ms/window x 360, one collector at the default 10 s window; n at cap: "
         "all n collectors as scopemeter ships them, n x ms/window x 3600 / the capped period "
         "(`scopemeter plan --workers n --all-workers`), server CPU seconds per hour",
         f"lines beyond the receipts on the collectors' stderr: {len(problems)}"
         + (f" (first: {problems[0][:200]})" if problems else "")]))
    c.results["10"] = res
    c.results["10_problems"] = problems[:200]
