"""Scale (the `scale` tier): 256 collectors of one job (`scopemeter run
--all-workers`, RANK 0-255, one per simulated pod, each its own node name)
record into one run on the PostgreSQL-backed 4-worker server of the postgres
tier and all stop in the same second: every point lands (0 dropped, 0
undelivered at stop; test_one_path.many_collectors_stop_together), every rank
is in the run.

Why not minutes: with 256 collectors the write-load cap (docs/design.md §5)
raises the logging period to 10 x ceil(256/4) = 640 s, so a collector of a
run shorter than that logs its start and its stop windows only; what 256
collectors do to a server is the stop, when all of them post at once (the
pool deadlock of docs/rest.md: 4 workers leave 24 of 80 simultaneous
log-batch requests unanswered), and the sinks' spread must keep the server
out of it.
"""
import json
import subprocess

import pytest

from runread import get_run, tags_of
from test_one_path import many_collectors_stop_together

pytestmark = [pytest.mark.scale, pytest.mark.postgres]


@pytest.mark.timeout(900)
def test_256_collectors_stop_together_on_postgres(postgres_server, scopemeter_bin, tmp_path):
    run_id = many_collectors_stop_together(postgres_server, scopemeter_bin, 256, tmp_path)
    run = get_run(postgres_server, run_id)
    tags = tags_of(run)
    keys = {m["key"] for m in run["data"]["metrics"]}
    # what plan predicts for this job (no cgroup limits here: no container_* series)
    plan = json.loads(subprocess.run(
        [scopemeter_bin, "plan", "--workers", "256", "--all-workers", "--nodes", "256",
         "--interval", "0.5", "--no-container-limits", "--json"],
        capture_output=True, text=True, timeout=60, check=True).stdout)
    assert tags["scopemeter.collectors"] == "256"
    period = float(tags["scopemeter.interval_s"]) * int(tags["scopemeter.samples"])
    assert period == plan["period_s"] == 640, (tags, plan)
    assert len(keys) == plan["series"], (len(keys), plan["series"])
    assert len(keys) * 3600 / period == plan["rows_per_hour"]
