#!/usr/bin/env python3
"""soak.py — many collectors against one real MLflow server (docs/hardening.md, soak).

Why: a job with every pod recording (`--all-workers`) is N separate
`scopemeter run` processes writing into one run on one tracking server.  This
runs exactly that on loopback for a while and checks what docs/design.md
promises at that scale:

  1. every point produced is in MLflow: each collector says at stop what it
     logged (the closing line "logged W windows (P points, T tags): ...", src/engine/monitor.c); the
     run read back through metrics/get-history per key must hold exactly P
     points for that rank, steps 0..W-1 on every key, and D must be 0;
  2. the write-load cap holds: the rows per hour the collectors wrote,
     measured from the timestamps MLflow stored (each rank's full windows),
     within 5 % of `scopemeter plan --workers N --all-workers --json`;
  3. memory of each collector is flat: VmRSS from /proc/<pid>/status once
     every collector has shipped its first window, then every sample period
     until the stop; the largest growth is reported;
  4. stopping is bounded: SIGTERM to every collector at once (each forwards it
     to its CMD, takes its last partial window, flushes), time until the last
     one exited.

The full run (docs/hardening.md, "Soak"):

    python3 tests/soak/soak.py --collectors 64 --minutes 10

Each collector is `scopemeter run --all-workers --interval I -- sleep ...`
with RANK=i, WORLD_SIZE=N, LOCAL_RANK=0, LOCAL_WORLD_SIZE=1 (one pod per
collector, as on N nodes: SCOPEMETER_NODE_NAME=soak-node-i) and one shared
MLFLOW_RUN_ID.  --interval defaults to 1 s: the write-load cap raises it to
10 x ceil(N/4) s (160 s for 64 collectors, 40 s for 16), which is the point —
the cap must hold even when a user asks for more.  The rate needs at least
two full windows per collector, so --minutes must exceed two periods.

Without --uri a private `mlflow server` (sqlite, loopback) is started in the
work directory and stopped at the end.  Prints a summary table; exits 1 when
a check fails.  tests/py/test_soak_short.py runs it shortened for CI.
"""
import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))

from conftest import clean_env, start_mlflow_server, stop_mlflow_server  # noqa: E402
from runread import RATE_KEY, get_run, history, new_run, tags_of  # noqa: E402

SUMMARY = re.compile(r"logged (\d+) windows \((\d+) points, (\d+) tags\): (\d+) delivered, "
                     r"(\d+) dropped \(buffer full\), (\d+) refused, (\d+) undelivered at stop")
RECEIPT = re.compile(r"collecting (\d+) series every ([0-9.]+) s \((\d+) collectors?\)")
RATE_TOLERANCE = 0.05


def vmrss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def plan(binary, n, interval, container):
    args = [binary, "plan", "--workers", str(n), "--all-workers", "--interval", str(interval),
            "--json"]
    if not container:
        args.append("--no-container-limits")
    p = subprocess.run(args, capture_output=True, text=True, timeout=60, env=clean_env())
    if p.returncode != 0:
        raise RuntimeError(f"scopemeter plan failed: {p.stderr}")
    return json.loads(p.stdout)


class Collector:
    def __init__(self, binary, rank, n, uri, run_id, interval, stop_timeout, workdir):
        self.rank = rank
        self.err_path = os.path.join(workdir, f"collector-{rank}.stderr")
        self.err = open(self.err_path, "w")
        env = clean_env(RANK=rank, WORLD_SIZE=n, LOCAL_RANK=0, LOCAL_WORLD_SIZE=1,
                        MLFLOW_TRACKING_URI=uri, MLFLOW_RUN_ID=run_id,
                        SCOPEMETER_NODE_NAME=f"soak-node-{rank}")
        # CMD outlives the soak; the SIGTERM at the end is forwarded to it
        self.proc = subprocess.Popen(
            [binary, "run", "--all-workers", "--interval", str(interval), "--stop-timeout",
             str(stop_timeout), "--", "sleep", "86400"],
            env=env, stdout=subprocess.DEVNULL, stderr=self.err, cwd=workdir)
        self.rss = []           # (monotonic time, kB)

    def stderr(self):
        self.err.flush()
        with open(self.err_path) as f:
            return f.read()

    def receipt(self):
        m = RECEIPT.search(self.stderr())
        return (int(m.group(1)), float(m.group(2)), int(m.group(3))) if m else None

    def summary(self):
        m = SUMMARY.search(self.stderr())
        if not m:
            return None
        w, p, _, _, overflow, refused, _ = (int(g) for g in m.groups())
        return w, p, overflow + refused  # (windows, points, dropped)

    def sample_rss(self):
        kb = vmrss_kb(self.proc.pid)
        if kb is not None:
            self.rss.append((time.monotonic(), kb))


def wait_until(pred, timeout, step=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


def soak(binary, collectors, seconds, interval=1.0, uri=None, workdir=None, stop_timeout=30,
         log=print):
    """Runs the soak; returns a dict of figures and a list of failed checks."""
    workdir = workdir or tempfile.mkdtemp(prefix="scopemeter-soak-")
    server = None
    procs = []
    res = {"collectors": collectors, "workdir": workdir, "failures": []}
    fail = res["failures"].append
    try:
        if uri is None:
            server, uri = start_mlflow_server(workdir)
            log(f"mlflow server at {uri} (sqlite in {workdir})")
        run_id = new_run(uri)
        res["run_id"] = run_id
        log(f"run {run_id}: starting {collectors} collectors")
        t0 = time.monotonic()
        procs = [Collector(binary, r, collectors, uri, run_id, interval, stop_timeout, workdir)
                 for r in range(collectors)]
        if not wait_until(lambda: all(c.receipt() or c.proc.poll() is not None for c in procs),
                          120):
            fail("not every collector printed its 'collecting' line within 120 s")
        receipts = [c.receipt() for c in procs]
        started = time.monotonic()
        res["startup_s"] = started - t0
        if any(r is None for r in receipts):
            bad = [c.rank for c, r in zip(procs, receipts) if r is None]
            fail(f"collectors {bad[:8]} did not start: {procs[bad[0]].stderr()[-800:]}")
            return res
        series = {r[0] for r in receipts}
        periods = {r[1] for r in receipts}
        res["series_per_collector"] = max(series)
        res["period_s"] = max(periods)
        if len(series) != 1 or len(periods) != 1 or {r[2] for r in receipts} != {collectors}:
            fail(f"collectors disagree on series/period/collectors: {set(receipts)}")
        period = res["period_s"]
        if seconds < 2 * period + 5:
            fail(f"{seconds:g} s is too short for two full windows of {period:g} s")
        log(f"all started in {res['startup_s']:.1f} s: {res['series_per_collector']} series "
            f"every {period:g} s each; soaking {seconds:g} s")

        # memory: first reading once every collector shipped its first window
        steady = started + min(period + 5, seconds / 2)
        end = started + seconds
        next_rss = steady
        while True:
            now = time.monotonic()
            if now >= end:
                break
            if now >= next_rss:
                for c in procs:
                    c.sample_rss()
                next_rss += max(5.0, min(period, 30.0))
            dead = [c.rank for c in procs if c.proc.poll() is not None]
            if dead:
                fail(f"collectors {dead[:8]} exited during the soak")
                break
            time.sleep(min(1.0, max(0.0, min(end, next_rss) - now)))
        for c in procs:
            c.sample_rss()

        # stop: SIGTERM to all at once, time until the last has exited
        t_stop = time.monotonic()
        res["wall_s"] = t_stop - t0
        for c in procs:
            if c.proc.poll() is None:
                c.proc.send_signal(signal.SIGTERM)
        for c in procs:
            try:
                c.proc.wait(timeout=max(1.0, stop_timeout + 60 - (time.monotonic() - t_stop)))
            except subprocess.TimeoutExpired:
                pass
        res["stop_all_s"] = time.monotonic() - t_stop
        alive = [c.rank for c in procs if c.proc.poll() is None]
        if alive:
            fail(f"collectors {alive[:8]} still running {res['stop_all_s']:.0f} s after SIGTERM")
        codes = {c.proc.returncode for c in procs}
        res["exit_codes"] = sorted(x for x in codes if x is not None)
        # CMD (sleep) dies of the forwarded SIGTERM: 128 + 15
        if codes != {128 + signal.SIGTERM}:
            fail(f"exit codes {sorted(map(str, codes))}, want 143 (CMD killed by SIGTERM)")

        # what each collector says it logged
        said = {}
        for c in procs:
            s = c.summary()
            # the closing line names every outcome ("0 refused"); its counts are checked
            # through summary(), the words below are looked for in the other lines
            text = "\n".join(ln for ln in c.stderr().splitlines() if not SUMMARY.search(ln))
            if s is None:
                fail(f"rank {c.rank} printed no 'logged ... windows' line: {c.stderr()[-600:]}")
                continue
            said[c.rank] = s
            for bad in ("not delivered", "cannot deliver", "refused", "points dropped"):
                if bad in text:
                    fail(f"rank {c.rank}: '{bad}' in its stderr: "
                         f"{[ln for ln in text.splitlines() if bad in ln][:2]}")
        res["windows_said"] = sum(s[0] for s in said.values())
        res["points_said"] = sum(s[1] for s in said.values())
        res["dropped_said"] = sum(s[2] for s in said.values())
        if res["dropped_said"]:
            fail(f"{res['dropped_said']} records dropped")

        # what landed: metrics/get-history per key
        run = get_run(uri, run_id)
        keys = [m["key"] for m in run["data"].get("metrics", [])]
        tags = tags_of(run)
        landed, rates, windows = 0, [], []
        by_rank = {}
        for k in keys:
            m = re.search(r"/rank(\d+)$", k)
            by_rank.setdefault(int(m.group(1)) if m else -1, []).append(k)
        res["keys"] = len(keys)
        if -1 in by_rank:
            fail(f"keys without a rank: {by_rank[-1][:4]}")
        for c in procs:
            r = c.rank
            if f"scopemeter.rank{r}.node" not in tags:
                fail(f"rank {r}: no scopemeter.rank{r}.node tag")
            rk = by_rank.get(r, [])
            if len(rk) != res["series_per_collector"]:
                fail(f"rank {r}: {len(rk)} keys landed, it collected "
                     f"{res['series_per_collector']} series")
            if r not in said:
                continue
            w, p, _ = said[r]
            got, steps_ok, ts_by_step = 0, True, {}
            for k in rk:
                h = history(uri, run_id, k)
                got += len(h)
                steps = [s for s, _, _ in h]
                # a rate may lack the last window: the final sample leaves it
                # out when it comes less than min(interval/2, 1 s) after the one
                # before (docs/design.md, Decisions)
                if steps != list(range(w)) and \
                        not (RATE_KEY.search(k) and steps == list(range(w - 1))):
                    steps_ok = False
                    fail(f"{k}: steps {[s for s, _, _ in h][:12]}, want 0..{w - 1}")
                for s, ts, _ in h:
                    ts_by_step.setdefault(s, ts)
            landed += got
            if got != p:
                fail(f"rank {r}: {got} points in MLflow, it logged {p}")
            windows.append(w)
            # the write rate: full windows only (the last window is the
            # partial one taken at stop); their timestamps are MLflow's
            full = w - 1
            if steps_ok and full >= 2:
                span_ms = ts_by_step[full - 1] - ts_by_step[0]
                if span_ms > 0:
                    rates.append(len(rk) * (full - 1) * 3600e3 / span_ms)
        res["points_landed"] = landed
        res["windows_min"] = min(windows) if windows else 0
        res["windows_max"] = max(windows) if windows else 0
        if landed != res["points_said"]:
            fail(f"{landed} points landed, collectors logged {res['points_said']}")

        # without a limit a collector logs 8 series and its process tree's 3
        # (docs/design.md §9); any container_* series makes it more
        container = res["series_per_collector"] > 11
        pl = plan(binary, collectors, interval, container)
        res["plan_rows_per_hour"] = pl["rows_per_hour"]
        res["plan_period_s"] = pl["period_s"]
        res["interval_tag"] = tags.get("scopemeter.interval_s")
        if pl["period_s"] != period:
            fail(f"period {period} s, plan says {pl['period_s']} s")
        if res["interval_tag"] is None or float(res["interval_tag"]) != pl["interval_s"]:
            fail(f"tag scopemeter.interval_s={res['interval_tag']}, plan {pl['interval_s']}")
        if len(rates) != len(procs):
            fail(f"rate measured for {len(rates)} of {len(procs)} collectors (needs two full "
                 "windows each)")
        res["rows_per_hour"] = sum(rates)
        res["rows_per_hour_ratio"] = (res["rows_per_hour"] / pl["rows_per_hour"]
                                      if pl["rows_per_hour"] else float("nan"))
        if not abs(res["rows_per_hour_ratio"] - 1) <= RATE_TOLERANCE:
            fail(f"rows per hour {res['rows_per_hour']:.0f} vs plan {pl['rows_per_hour']:.0f} "
                 f"(ratio {res['rows_per_hour_ratio']:.4f}, tolerance {RATE_TOLERANCE:.0%})")
        res["landed_rows_per_hour_wall"] = landed * 3600 / res["wall_s"]

        # memory
        growth = []
        for c in procs:
            if len(c.rss) >= 2:
                kbs = [kb for _, kb in c.rss]
                growth.append((kbs[-1] - kbs[0], max(kbs) - kbs[0], kbs[0], kbs[-1], c.rank))
        res["rss_samples_per_collector"] = min((len(c.rss) for c in procs), default=0)
        if growth:
            res["rss_start_kb_max"] = max(g[2] for g in growth)
            res["rss_end_kb_max"] = max(g[3] for g in growth)
            res["rss_growth_kb_max"] = max(g[0] for g in growth)
            res["rss_peak_over_start_kb_max"] = max(g[1] for g in growth)
            res["rss_growth_rank"] = max(growth)[4]
        else:
            fail("no VmRSS readings")
        return res
    finally:
        for c in procs:
            if c.proc.poll() is None:
                c.proc.kill()
                c.proc.wait()
            c.err.close()
        if server is not None:
            stop_mlflow_server(server)


def table(res):
    rows = [
        ("collectors (separate processes)", res.get("collectors")),
        ("series per collector", res.get("series_per_collector")),
        ("logging period after the cap (s)", res.get("period_s")),
        ("scopemeter.interval_s tag", res.get("interval_tag")),
        ("startup of all collectors (s)", fmt(res.get("startup_s"), 1)),
        ("windows per collector (min..max)",
         f"{res.get('windows_min')}..{res.get('windows_max')}" if "windows_min" in res else None),
        ("points logged (collectors' own count)", res.get("points_said")),
        ("points in MLflow (metrics/get-history)", res.get("points_landed")),
        ("records dropped", res.get("dropped_said")),
        ("rows/hour, measured (full windows)", fmt(res.get("rows_per_hour"), 0)),
        ("rows/hour, scopemeter plan", fmt(res.get("plan_rows_per_hour"), 0)),
        ("measured / plan", fmt(res.get("rows_per_hour_ratio"), 4)),
        ("rows/hour, all points over wall time (info)",
         fmt(res.get("landed_rows_per_hour_wall"), 0)),
        ("VmRSS per collector at steady start, max (kB)", res.get("rss_start_kb_max")),
        ("VmRSS per collector at the end, max (kB)", res.get("rss_end_kb_max")),
        ("VmRSS growth start->end, max over collectors (kB)", res.get("rss_growth_kb_max")),
        ("VmRSS peak over start, max over collectors (kB)", res.get("rss_peak_over_start_kb_max")),
        ("VmRSS readings per collector", res.get("rss_samples_per_collector")),
        ("SIGTERM to all -> all exited (s)", fmt(res.get("stop_all_s"), 2)),
        ("exit codes", res.get("exit_codes")),
        ("checks failed", len(res["failures"])),
    ]
    w = max(len(k) for k, _ in rows)
    out = ["", "scopemeter soak summary", "-" * (w + 16)]
    out += [f"{k:<{w}}  {v if v is not None else '-'}" for k, v in rows]
    out += ["-" * (w + 16)]
    out += [f"FAILED: {f}" for f in res["failures"]]
    return "\n".join(out)


def fmt(v, digits):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return f"{v:.{digits}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--collectors", type=int, default=64)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--interval", type=float, default=1.0,
                    help="requested interval; the write-load cap raises it (default 1 s)")
    ap.add_argument("--stop-timeout", type=float, default=30.0)
    ap.add_argument("--bin", default=os.environ.get("SCOPEMETER_BIN") or
                    os.path.join(ROOT, "build", "cli", "scopemeter"))
    ap.add_argument("--uri", help="an existing tracking server (default: start one)")
    ap.add_argument("--workdir", help="collectors' stderr and the server's files "
                    "(default: a fresh temporary directory, removed when all checks pass)")
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)  # collectors run in the work directory
    if not os.access(a.bin, os.X_OK):
        sys.exit(f"soak: no scopemeter binary at {a.bin} (meson compile -C build, or --bin)")
    keep = a.workdir is not None
    workdir = a.workdir or tempfile.mkdtemp(prefix="scopemeter-soak-")
    os.makedirs(workdir, exist_ok=True)
    res = soak(a.bin, a.collectors, a.minutes * 60, a.interval, a.uri, workdir, a.stop_timeout)
    print(table(res), flush=True)
    if res["failures"]:
        print(f"(collectors' stderr and the server's files kept in {workdir})")
        sys.exit(1)
    if not keep:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
