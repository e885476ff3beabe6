#!/usr/bin/env python3
"""How long the MLflow UI's System metrics tab takes for a job of many ranks
(issue 31 item 5): a run holding what `scopemeter plan --workers N --nodes N/8
--gpus-per-worker 1 --all-workers` predicts (27 keys a rank: 24 pod series, 3
process series; node_*/rootfs_* under 8 ranks a node), POINTS points each,
written through MLflow's client into a sqlite store; then `mlflow server` on
that store (the harness's, tests/py/conftest.py) and headless Chromium (the
`ui` tier's, tests/py/test_ui.py) on the run's System metrics tab, in a
1600 x 1200 window, timed:

  sections  from navigation until every section header of the plan is on the
            page with its chart count (the tab's structure);
  first     from navigation until the first screen's charts have drawn (their
            legends on the page, none new for 0.6 s);
  pass      one pass to the end of the tab, a screen at a time, each waited
            for until its charts drew (MLflow draws a chart when it scrolls
            into view): what a user scrolling the whole tab waits.

Usage: bench/ui_render.py [--ranks 64] [--points 20] [--bound 900] [--screenshot PNG]
Prints one table; the JSON goes to stdout's last line.  Wall-clock times on
whatever machine it runs on: say its load with them.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib as B  # noqa: E402

POD_KEYS = (["node_cpu_utilization_percentage", "node_memory_usage_megabytes",
             "node_memory_usage_percentage", "rootfs_usage_megabytes", "rootfs_usage_percentage",
             "rootfs_available_megabytes"],
            ["network_receive_megabytes", "network_transmit_megabytes"] +
            [f"gpu_0_{k}" for k in ("memory_usage_percentage", "memory_usage_megabytes",
                                    "utilization_percentage", "power_usage_watts",
                                    "power_usage_percentage")] +
            [f"container_{k}" for k in ("memory_usage_megabytes", "memory_usage_percentage",
                                        "cpu_utilization_percentage", "memory_anon_megabytes",
                                        "memory_shmem_megabytes", "memory_file_active_megabytes",
                                        "memory_kernel_megabytes", "memory_pressure_percentage",
                                        "cpu_pressure_percentage", "disk_read_megabytes",
                                        "disk_write_megabytes")] +
            ["process_count", "process_memory_megabytes", "process_cpu_utilization_percentage"])


def job_keys(ranks):
    """The keys scopemeter logs for the job (docs/design.md §2), 8 ranks a node."""
    tiered, other = POD_KEYS
    keys = []
    for r in range(ranks):
        node = f"node-{r // 8}"
        keys += [f"system/{k}/{node}/rank{r}" for k in tiered]
        keys += [f"system/{k}/rank{r}" for k in other]
    return keys


def write_run(store, keys, points):
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient
    c = MlflowClient(tracking_uri=store)
    exp = c.create_experiment("ui-render")
    run_id = c.create_run(exp).info.run_id
    t0 = int(time.time() * 1000) - points * 10_000
    rows = [Metric(k, float((i * 7 + s) % 100), t0 + s * 10_000, s)
            for s in range(points) for i, k in enumerate(keys)]
    for i in range(0, len(rows), 1000):
        c.log_batch(run_id, metrics=rows[i:i + 1000])
    c.set_terminated(run_id)
    return exp, run_id


# A screen further down the page's scrolling element (the run page scrolls an
# inner container, not the window); true at its end.
SCROLL = """
let e = window.__smScroll;
if (!e || !e.isConnected) {
  const all = [...document.querySelectorAll('*')].filter(x => x.scrollHeight > x.clientHeight + 10
      && /(auto|scroll)/.test(getComputedStyle(x).overflowY));
  all.sort((a, b) => b.scrollHeight - a.scrollHeight);
  e = window.__smScroll = all[0] || document.scrollingElement;
}
if (e.scrollTop + e.clientHeight >= e.scrollHeight - 2) return true;
e.scrollTop += e.clientHeight;
return false;
"""


def legends(d, ui_sections, want_keys):
    page = ui_sections(d.execute_script("return document.body.innerText"))
    mine = {s: v for s, v in page.items() if s.startswith("system/")}
    return mine, {k for _, (_, lg) in mine.items() for k in lg if k in want_keys}


def settle(d, ui_sections, want_keys, seen, limit=10.0):
    """Waits until the charts on screen have drawn: new legends appeared and
    none for 0.6 s, or `limit` s.  Returns the legends then."""
    t0, last_new, got = time.monotonic(), None, set()
    while time.monotonic() - t0 < limit:
        _, now = legends(d, ui_sections, want_keys)
        if now - seen - got:
            got |= now - seen
            last_new = time.monotonic()
        elif last_new is not None and time.monotonic() - last_new > 0.6:
            break
        time.sleep(0.2)
    return got


def measure(uri, exp, run_id, want_sections, want_keys, bound, shot=None):
    sys.path.insert(0, B.TESTS_PY)
    from test_ui import browser, ui_sections  # the ui tier's Chromium and page reader
    d = browser(1600, 1200)
    out = {"sections_s": None, "first_screen_s": None, "first_screen_charts": 0,
           "pass_s": None, "screens": 0, "charts_seen": 0, "sections_seen": 0,
           "screen_waits_s": []}
    try:
        t0 = time.monotonic()
        d.get(f"{uri}/#/experiments/{exp}/runs/{run_id}/system-metrics")
        while time.monotonic() - t0 < bound:
            mine, _ = legends(d, ui_sections, want_keys)
            out["sections_seen"] = len(mine)
            if len(mine) >= want_sections:
                out["sections_s"] = time.monotonic() - t0
                break
            time.sleep(0.5)
        if out["sections_s"] is None:
            return out
        seen = settle(d, ui_sections, want_keys, set(), limit=60)
        out["first_screen_s"] = time.monotonic() - t0
        out["first_screen_charts"] = len(seen)
        # one pass top to bottom, each screen waited for until its charts drew
        t1 = time.monotonic()
        while time.monotonic() - t0 < bound and len(seen) < len(want_keys):
            if d.execute_script(SCROLL):
                break  # at the end
            ts = time.monotonic()
            seen |= settle(d, ui_sections, want_keys, seen)
            out["screen_waits_s"].append(round(time.monotonic() - ts, 2))
            out["screens"] += 1
        out["pass_s"] = time.monotonic() - t1
        out["charts_seen"] = len(seen)
        if shot:
            d.save_screenshot(shot)
    finally:
        d.quit()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--points", type=int, default=20)
    ap.add_argument("--bound", type=float, default=900)
    ap.add_argument("--screenshot", help="a PNG of the page at the end")
    a = ap.parse_args()
    cli = os.environ.get("SCOPEMETER_BIN") or os.path.join(B.ROOT, "build", "cli", "scopemeter")
    plan = json.loads(subprocess.run(
        [cli, "plan", "--workers", str(a.ranks), "--nodes", str(max(1, a.ranks // 8)),
         "--gpus-per-worker", "1", "--all-workers", "--json"],
        capture_output=True, text=True, check=True, timeout=60).stdout)
    keys = job_keys(a.ranks)
    assert len(keys) == plan["charts"], (len(keys), plan["charts"])
    sections = {k.rsplit("/", 1)[0] for k in keys}
    assert len(sections) == plan["sections"], (len(sections), plan["sections"])
    cf = B.load_conftest()
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="ui-render-") as tmp:
        store = f"sqlite:///{tmp}/mlflow.db"
        t = time.monotonic()
        exp, run_id = write_run(store, keys, a.points)
        wrote = time.monotonic() - t
        server, uri = cf.start_mlflow_server(tmp)
        try:
            res = measure(uri, exp, run_id, len(sections), set(keys), a.bound, a.screenshot)
        finally:
            cf.stop_mlflow_server(server)
    res.update(ranks=a.ranks, points=a.points, charts=len(keys), sections=len(sections),
               write_s=wrote, load_start=load0, load_end=os.getloadavg()[0])
    fmt = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
    print(f"ranks {a.ranks}: {len(keys)} charts in {len(sections)} sections, {a.points} points "
          f"each (written in {wrote:.0f} s); load average {load0:.1f} -> {res['load_end']:.1f}")
    w = sorted(res["screen_waits_s"])
    print(f"  sections on the page: {res['sections_seen']}/{len(sections)} after "
          f"{fmt(res['sections_s'])} s; first screen drawn ({res['first_screen_charts']} "
          f"charts) after {fmt(res['first_screen_s'])} s")
    print(f"  one pass to the end, each screen waited for: {res['charts_seen']}/{len(keys)} "
          f"charts in {res['screens']} screens, {fmt(res['pass_s'])} s; per screen median "
          f"{fmt(w[len(w) // 2] if w else None)} s, max {fmt(w[-1] if w else None)} s")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
