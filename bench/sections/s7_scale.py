"""Table 7: rows/hour at the server for 1, 4, 8, 16, 64 collectors vs
`scopemeter plan`."""
import json
import sqlite3
import subprocess
import time

import benchlib as B
from harness import EXPERIMENT, RECEIPT, ROUTINE, SCALE_N, log


def section7(c):
    from mlflow.tracking import MlflowClient
    p = c.p
    T = p["s7_seconds"]
    client = MlflowClient(tracking_uri=c.server.uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    exp_id = exp.experiment_id
    runs, procs = {}, []
    log(f"7: {sum(SCALE_N)} collector processes ({', '.join(map(str, SCALE_N))}) for {T:g} s")
    t0 = time.monotonic()
    for n in SCALE_N:
        runs[n] = client.create_run(exp_id, run_name=f"scale-{n}").info.run_id
        for i in range(n):
            env = c.env(MLFLOW_TRACKING_URI=c.server.uri, RANK=i, LOCAL_RANK=0, WORLD_SIZE=n,
                        LOCAL_WORLD_SIZE=1)
            procs.append((n, i, subprocess.Popen(
                [c.cli, "run", "--run-id", runs[n], "--all-workers", "--startup-timeout", "120",
                 "--", "sleep", f"{T:g}"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)))
    bad = []
    problems = []
    for n, i, pr in procs:
        _, err = pr.communicate(timeout=T + 300)
        if pr.returncode != 0:
            bad.append(f"n={n} rank {i}: exit {pr.returncode}: {err[-300:]}")
        # every line but the receipts a healthy start prints
        problems += [f"n={n} rank {i}: {ln}" for ln in err.splitlines()
                     if not any(w in ln for w in ROUTINE) and not RECEIPT.search(ln)]
    if bad:
        raise RuntimeError("; ".join(bad[:3]))
    wall = time.monotonic() - t0
    db = sqlite3.connect(f"file:{c.server.db}?mode=ro", uri=True)
    rows, res = [], {}
    all_ok = True
    for n in SCALE_N:
        tags = dict(db.execute("SELECT key, value FROM tags WHERE run_uuid = ?",
                               (runs[n],)).fetchall())
        counts = dict(db.execute("SELECT key, COUNT(*) FROM metrics WHERE run_uuid = ? "
                                 "GROUP BY key", (runs[n],)).fetchall())
        series = len(counts)
        interval = float(tags.get("scopemeter.interval_s", "nan"))
        samples = int(tags.get("scopemeter.samples", "0") or 0)
        collectors = int(tags.get("scopemeter.collectors", "0") or 0)
        period = interval * samples
        measured = series * 3600 / period if period > 0 else float("nan")
        container = any(k.startswith("system/container_") for k in counts)
        plan_cmd = [c.cli, "plan", "--workers", str(n), "--all-workers", "--json"]
        if not container:
            plan_cmd.append("--no-container-limits")
        plan = json.loads(subprocess.run(plan_cmd, capture_output=True, text=True,
                                         check=True).stdout)
        pts = sorted(counts.values())
        ranks = {k.rsplit("/", 1)[-1] for k in counts}
        missing = [i for i in range(n) if f"rank{i}" not in ranks]
        expect = int(T // plan["period_s"]) + 1  # full windows + the partial one at stop
        pts_ok = bool(pts) and pts[0] == pts[-1] == expect
        ok = (series == plan["series"] and abs(measured - plan["rows_per_hour"]) < 1e-6
              and collectors == plan["collectors"] and abs(period - plan["period_s"]) < 1e-9
              and pts_ok)
        all_ok &= ok
        res[n] = {"series": series, "interval_s": interval, "samples": samples,
                  "collectors": collectors, "points_per_series": [pts[0], pts[-1]] if pts else [],
                  "points_expected": expect, "rows_per_hour": measured,
                  "ranks_without_points": missing,
                  "plan": {k: plan[k] for k in ("collectors", "period_s", "series",
                                                "rows_per_hour")}, "ok": ok}
        rows.append([str(n), str(collectors), f"{period:g}", f"{plan['period_s']:g}", str(series),
                     str(plan["series"]),
                     (f"{pts[0]}" if pts and pts[0] == pts[-1] else
                      f"{pts[0]}-{pts[-1]}" if pts else "0") + f" (exp {expect})",
                     B.fmt_num(measured, 0), B.fmt_num(plan["rows_per_hour"], 0),
                     "yes" if ok else "NO"])
    db.close()
    c.tables.append(B.table(
        "7. Write load at scale (all_workers, one collector per pod, default 10 s x 1)",
        ["n", "collectors tag", "period s", "plan period", "series", "plan series",
         "points/series", "rows/h", "plan rows/h", "match"], rows,
        [f"n `scopemeter run --all-workers -- sleep {T:g}` processes per row (RANK=i, "
         "WORLD_SIZE=n, LOCAL_WORLD_SIZE=1), all rows at once on this host; period from the "
         "run's scopemeter.interval_s x scopemeter.samples tags, series and points counted in "
         "the server's store; rows/h = series x 3600 / period; points expected = "
         "full windows + the partial one logged at stop", f"{sum(SCALE_N)} processes, "
         f"{wall:.0f} s wall; lines beyond the receipts on their stderr: {len(problems)}"
         + (f" (first: {problems[0][:200]})" if problems else "")]
        + [f"n={n}: no points from {len(r['ranks_without_points'])} of {n} ranks "
           f"(ranks {', '.join(map(str, r['ranks_without_points'][:10]))}"
           f"{', ...' if len(r['ranks_without_points']) > 10 else ''})"
           for n, r in res.items() if r["ranks_without_points"]]))
    c.results["7"] = res
    c.results["7_problems"] = problems[:200]
    c.targets.append(("7 write load", "rows/h, series, period = scopemeter plan's",
                      "all match" if all_ok else "mismatch (table 7)", all_ok))
