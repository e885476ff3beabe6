"""The MLflow UI in a real browser (the `ui` tier): what a user sees.

A two-rank job on one node (two pods: cgroups with limits, each its own
network namespace, so they record into a sqlite store, as test_pods_netns
does; the Python front with all_workers), then a real `mlflow server` on that
store.  Headless Chromium (Debian's chromium and
chromium-driver, driven by selenium; --no-sandbox as root) opens the run
page's "System metrics" tab, and its sections and charts are what
`scopemeter plan --workers 2 --nodes 1 --all-workers` predicts, named by
scopemeter's rule (docs/series.md): one section per series, node_* and
rootfs_* ones per node, one chart per rank.  The screenshot stays in the
test's temporary directory (its path is printed).

MLflow's own "System metrics" section stays empty, "(0)": it holds the keys
system/NAME with no further `/`, which scopemeter never logs (docs/series.md).
"""
import json
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import is_root, start_mlflow_server, stop_mlflow_server
from pyfront_util import (cgroups_usable, netns_usable, new_run, psi_here, read_run,
                          run_pods_on_one_node)

pytestmark = pytest.mark.ui

NODE = "ui-node-a"
CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SECTION_COUNT = re.compile(r"^\((\d+)\)$")
LEGEND_KEY = re.compile(r"\((system/[^()]+)\)$")


def browser(width=1600, height=14000):
    """Headless Chromium.  A window tall enough for every section: MLflow draws
    a chart only once it scrolls into view."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    o = Options()
    o.binary_location = CHROMIUM
    for a in ("--headless=new", "--disable-gpu", "--disable-dev-shm-usage",
              f"--window-size={width},{height}"):
        o.add_argument(a)
    if is_root():
        o.add_argument("--no-sandbox")  # Chromium's sandbox refuses to run as root
    return webdriver.Chrome(service=Service(DRIVER), options=o)


def ui_sections(text):
    """{section name: (count in its header, [full keys of its charts' legends])}
    from the page's text, in page order: a header is a `system/...` line followed
    by a `(N)` line; each chart's legend says `run-name (KEY)`."""
    lines = [ln.strip() for ln in text.splitlines()]
    out, current = {}, None
    for i, ln in enumerate(lines):
        m = SECTION_COUNT.match(lines[i + 1]) if i + 1 < len(lines) else None
        if m and (ln.startswith("system/") or ln in ("System metrics", "Model metrics")):
            current = ln
            out[current] = (int(m.group(1)), [])
            continue
        k = LEGEND_KEY.search(ln)
        if k and current:
            out[current][1].append(k.group(1))
    return out


@pytest.mark.timeout(400)
def test_system_metrics_tab_shows_what_plan_predicts(scopemeter_bin, tmp_path):
    for why in (cgroups_usable(), netns_usable()):
        if why:
            pytest.skip(why)
    for tool in (CHROMIUM, DRIVER):
        assert os.access(tool, os.X_OK), f"{tool} missing: scripts/install-deps installs it"

    t0 = time.monotonic()
    store = f"sqlite:///{tmp_path}/mlflow.db"  # the pods' own netns cannot reach loopback
    run_id = new_run(store)
    spec = [(0, 512 << 20, 0.5, 2), (1, 1 << 30, 1.0, 2)]  # rank, memory, CPUs, MB sent
    for rc, _, err in run_pods_on_one_node(store, run_id, spec, NODE, name="ui"):
        assert rc == 0, err[-3000:]
    keys = set(read_run(store, run_id)[0])
    from mlflow.tracking import MlflowClient
    experiment_id = MlflowClient(tracking_uri=store).get_run(run_id).info.experiment_id

    plan = json.loads(subprocess.run(
        [scopemeter_bin, "plan", "--workers", "2", "--nodes", "1", "--all-workers", "--json"],
        capture_output=True, text=True, timeout=60, check=True).stdout)
    # scopemeter's rule: section = the key less its /rankN; node_* and rootfs_* carry the node
    want = {}
    for k in keys:
        section, rank = k.rsplit("/", 1)
        want.setdefault(section, set()).add(k)
        assert re.fullmatch(r"rank[01]", rank), k
        tiered = section.split("/")[1].startswith(("node_", "rootfs_"))
        assert section.endswith(f"/{NODE}") == tiered, k
    # plan counts the two PSI series of each pod as the upper bound (docs/plan.md):
    # where the kernel has no PSI (this v1 host) each pod logs two fewer
    absent = 0 if psi_here() else 2
    assert len(keys) == plan["charts"] - 2 * absent and \
        len(want) == plan["sections"] - absent, (sorted(keys), plan)
    assert sum(s.endswith(f"/{NODE}") for s in want) == plan["node_sections"]

    t1 = time.monotonic()
    server, uri = start_mlflow_server(str(tmp_path))  # on the store the pods wrote
    t2 = time.monotonic()
    url = f"{uri}/#/experiments/{experiment_id}/runs/{run_id}/system-metrics"
    d = browser()
    shot = tmp_path / "system-metrics.png"
    try:
        d.get(url)
        deadline, seen = time.monotonic() + 240, {}
        while time.monotonic() < deadline:  # the UI loads its bundle, then the run
            # innerText in the page: WebDriver's element text walks the charts' SVGs
            seen = ui_sections(d.execute_script("return document.body.innerText"))
            if all(s in seen and len(seen[s][1]) == len(ks) for s, ks in want.items()):
                break
            time.sleep(2)
        t3 = time.monotonic()
        d.save_screenshot(str(shot))
    finally:
        d.quit()
        stop_mlflow_server(server)
    print(f"screenshot: {shot}; job {t1 - t0:.0f} s, server {t2 - t1:.0f} s, "
          f"page {t3 - t2:.0f} s")

    mine = {s: v for s, v in seen.items() if s.startswith("system/")}
    assert set(mine) == set(want), (sorted(mine), sorted(want))
    for s, (count, legend_keys) in mine.items():
        assert count == len(want[s]) == 2, (s, count)       # one chart per rank
        assert set(legend_keys) == want[s], (s, legend_keys)
    # MLflow's own section for system/NAME keys: none of ours lands there
    assert seen.get("System metrics") == (0, []), seen.get("System metrics")
    assert shot.stat().st_size > 10_000
    keep = os.environ.get("SCOPEMETER_UI_SCREENSHOT")  # to look at it after the run
    if keep:
        shutil.copy(shot, keep)
