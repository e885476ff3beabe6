"""Tables 9 and 9b: a process tree of 9 processes holding 4 GB (256 MB in quick
mode; issue 20): the process collector's sample vs the floor
(bench/tree_cost), the full sample vs today's (without it), the monitor's CPU
per window at 10 s and 1 s, rows/hour vs `scopemeter plan`."""
import json
import sqlite3
import subprocess

import benchlib as B
from harness import EXPERIMENT, INTERVALS, log


TREE_PROCS = 9


TREE_ROWS = {"floor, with memory": "floor: tree's files, with smaps_rollup",
             "collector, memory": "process collector, memory read",
             "floor, no memory": "floor: tree's files, no smaps_rollup",
             "collector, count+CPU": "process collector, count+CPU",
             "without process": "today's sample (every collector but process)",
             "full sample": "full sample, process included"}


def section9(c):
    from mlflow.tracking import MlflowClient
    p = c.p
    mb, shared = p["s9_mb"], p["s9_shared_mb"]
    log(f"9: tree of {TREE_PROCS} processes holding {mb} MB: sample cost")
    out = subprocess.run([c.tree_cost, "--procs", str(TREE_PROCS), "--mb", str(mb),
                          "--shared-mb", str(shared), "--rounds", str(p["s9_rounds"]),
                          "--iters", str(p["s9_iters"])],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    ms, thp, notes = {}, "unknown", []
    for line in out.splitlines():
        for k in TREE_ROWS:
            if line.startswith(k + " "):
                med, lo, hi = (float(x) for x in line[len(k):].split())
                ms[k] = {"median": med, "lo": lo, "hi": hi, "n": p["s9_rounds"],
                         "kind": "min-max"}
        if line.startswith("tree:"):
            thp = line.split("thp:", 1)[1].strip()
        if line.startswith("note:"):
            notes.append(line)
    missing = [k for k in TREE_ROWS if k not in ms]
    if missing:
        raise RuntimeError(f"tree_cost printed no {missing}: {out[-500:]}")
    base = {"collector, memory": "floor, with memory", "collector, count+CPU": "floor, no memory",
            "full sample": "without process"}
    rows = []
    for k in ("floor, with memory", "collector, memory", "floor, no memory",
              "collector, count+CPU", "without process", "full sample"):
        ratio = f"{ms[k]['median'] / ms[base[k]]['median']:.3g} x {base[k]}" if k in base else ""
        rows.append([TREE_ROWS[k], B.fmt_spread(ms[k]), ratio])
    read_ms = ms["collector, memory"]["median"]
    per_gb = read_ms / (mb / 1024)
    every = read_ms / 1e3 / 0.001  # one read at most this often for 0.1 % of a core
    c.tables.append(B.table(
        f"9. Process tree: {TREE_PROCS} processes holding {mb} MB, CPU per sample (ms; thread CPU)",
        ["variant", "ms/sample", "x"], rows,
        [f"bench/tree_cost: {shared} MB touched before the forks (shared copy-on-write), "
         f"{(mb - shared) // TREE_PROCS} MB private touched in each process; transparent huge "
         f"pages: {thp}; {p['s9_rounds']} interleaved rounds x {p['s9_iters']}, median [min-max]",
         f"smaps_rollup of the tree: {read_ms:.1f} ms CPU per read, {per_gb:.1f} ms per GB "
         f"(the kernel walks every page table entry); 0.1 % of one core allows one such read "
         f"every {every:.0f} s; the collector reads it within 0.09 % of one core (its CPU time, "
         f"design.md §9) and estimates the memory between reads"] + notes))
    c.results["9_sample"] = {"ms_per_sample": ms, "thp": thp, "mb": mb, "shared_mb": shared,
                             "procs": TREE_PROCS, "rollup_ms_per_gb": per_gb}

    client = MlflowClient(tracking_uri=c.server.uri)
    db = sqlite3.connect(f"file:{c.server.db}?mode=ro", uri=True)
    wrows, res = [], {}
    for iv in INTERVALS:
        span = p["s9_span"][iv]
        log(f"9: monitor CPU per window at {iv:g} s, {span:g} s measured")
        pr = subprocess.run(c.py("tree_worker.py", "--uri", c.server.uri, "--experiment",
                                 EXPERIMENT, "--interval", iv, "--warmup", p["s9_warmup"],
                                 "--span", span, "--procs", TREE_PROCS, "--mb", mb,
                                 "--shared-mb", shared),
                            # the tree of table 9 is the job's 9 processes, as tree_cost
                            # builds it: the front's companion (docs/design.md §7; a 10th
                            # process, about 0.6 MB Pss, no CPU while it waits) stays out
                            env=dict(c.env(), SCOPEMETER_COMPANION="0"), capture_output=True,
                            text=True, timeout=span + 300)
        r = B.parse_result(pr.stdout)
        if pr.returncode != 0 or r is None:
            raise RuntimeError(f"tree_worker.py at {iv:g} s: exit {pr.returncode}: "
                               f"{pr.stderr[-500:]}")
        client.get_run(r["run_id"])  # the run exists (the store is read directly below)
        tags = dict(db.execute("SELECT key, value FROM tags WHERE run_uuid = ?",
                               (r["run_id"],)).fetchall())
        series = db.execute("SELECT COUNT(DISTINCT key) FROM metrics WHERE run_uuid = ?",
                            (r["run_id"],)).fetchone()[0]
        container = db.execute("SELECT COUNT(*) FROM metrics WHERE run_uuid = ? AND key LIKE "
                               "'system/container_%'", (r["run_id"],)).fetchone()[0] > 0
        period = float(tags.get("scopemeter.interval_s", "nan")) * \
            int(tags.get("scopemeter.samples", "0") or 0)
        measured = series * 3600 / period if period > 0 else float("nan")
        plan_cmd = [c.cli, "plan", "--workers", "1", "--interval", f"{iv:g}", "--json"]
        if not container:
            plan_cmd.append("--no-container-limits")
        plan = json.loads(subprocess.run(plan_cmd, capture_output=True, text=True,
                                         check=True).stdout)
        windows = r["wall_s"] / iv
        mon_ms = r["monitor_threads_s"] * 1e3 / windows
        oth_ms = r["other_threads_s"] * 1e3 / windows
        pct = 100 * r["monitor_threads_s"] / r["wall_s"]
        peak = tags.get("scopemeter.rank0.process_tree_peak", "absent")
        res[f"{iv:g}"] = dict(r, windows=windows, monitor_ms_per_window=mon_ms,
                              other_ms_per_window=oth_ms, pct_of_core=pct, series=series,
                              period_s=period, rows_per_hour=measured,
                              plan={k: plan[k] for k in ("series", "period_s", "rows_per_hour")},
                              process_tree_peak=peak)
        ok = series == plan["series"] and abs(measured - plan["rows_per_hour"]) < 1e-6
        wrows.append([f"{iv:g} s x 1", f"{windows:.0f}", f"{mon_ms:.2f}", f"{pct:.3f}",
                      f"{oth_ms:.2f}", f"{series} / {plan['series']}",
                      f"{B.fmt_num(measured, 0)} / {B.fmt_num(plan['rows_per_hour'], 0)}",
                      "yes" if ok else "NO"])
    db.close()
    c.tables.append(B.table(
        f"9b. Monitor CPU per window with the tree measured ({TREE_PROCS} processes, {mb} MB)",
        ["period", "windows", "monitor ms/window", "% of one core", "all non-main threads ms/w",
         "series / plan", "rows/h / plan", "match"], wrows,
        ["bench/tree_worker.py: the same tree under an idle Python process that opened a run "
         "on the harness's server and called scopemeter.enable_system_metrics(interval=S, "
         "samples=1); monitor = the CPU of its threads named scopemeter* (sampling, shipping) "
         "from /proc/self/task/TID/schedstat over the span after "
         f"{p['s9_warmup']:g} s of warm-up; all non-main threads = getrusage(RUSAGE_SELF) minus "
         "the main thread's; rows/h = series x 3600 / (interval_s x samples tags) against "
         "`scopemeter plan --workers 1 --interval S`",
         "process_tree_peak tag at 10 s: " + res["10"]["process_tree_peak"]]))
    c.results["9_window"] = res
    pct = res["10"]["pct_of_core"]
    c.targets.append((f"9 whole monitor, tree of {TREE_PROCS} / {mb} MB, 10 s", "<= 0.1 % of one core",
                      f"{pct:.3f} %", pct <= 0.1))
