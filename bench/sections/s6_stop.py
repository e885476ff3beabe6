"""Table 6: stop latency, against a healthy server and against one that stopped
answering (SIGSTOP)."""
import math
import select
import subprocess
import time

import benchlib as B
from harness import EXPERIMENT, STOP_TIMEOUT, log


class StopJob:
    """One monitored process waiting for the signal to stop; the harness then
    times the stop (the worker itself, or the CLI's exit for `scopemeter run`)."""

    def __init__(self, c, variant, server=None):
        server = server or c.server
        self.variant, self.result, self.t_go = variant, None, None
        if variant == "cli":
            env = c.env(MLFLOW_TRACKING_URI=server.uri)
            self.proc = subprocess.Popen(
                [c.cli, "run", "--experiment", EXPERIMENT, "--interval", "1",
                 "--stop-timeout", f"{STOP_TIMEOUT:g}", "--", "sh", "-c",
                 "sleep 2; echo READY; read x"],
                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, start_new_session=True)
        else:
            self.proc = subprocess.Popen(
                c.py("worker.py", "stop", "--variant", variant, "--interval", 1, "--run-for", 2,
                     "--stop-timeout", STOP_TIMEOUT, "--uri", server.uri, "--experiment",
                     EXPERIMENT),
                env=c.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, start_new_session=True)

    def wait_ready(self, timeout=180):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # select first: a child that hangs silently must not hang the harness
            ready, _, _ = select.select([self.proc.stdout], [], [],
                                        max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            line = self.proc.stdout.readline()
            if not line:
                break
            if line.strip() == "READY":
                return
        B.kill_group(self.proc)
        raise RuntimeError(f"{self.variant}: never ready: {self.proc.stderr.read()[-800:]}")

    def go(self):
        self.t_go = time.monotonic()
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self, cap):
        """Seconds the stop took, or None when it was still running at cap."""
        try:
            out, _ = self.proc.communicate(timeout=max(0.1, self.t_go + cap - time.monotonic()))
        except subprocess.TimeoutExpired:
            B.kill_group(self.proc)
            return None
        if self.variant == "cli":
            return time.monotonic() - self.t_go
        r = B.parse_result(out)
        if r is None:
            raise RuntimeError(f"{self.variant}: no result")
        return r["stop_s"]


def section6(c):
    p = c.p
    variants = ["scopemeter", "cli", "mlflow"] + (["wandb"] if c.wandb else [])
    healthy = {v: [] for v in variants}
    for rep in range(p["s6_reps"]):
        log(f"6: healthy server, repetition {rep + 1}/{p['s6_reps']}")
        order = variants[rep % len(variants):] + variants[:rep % len(variants)]
        jobs = [StopJob(c, v) for v in order]
        try:
            for j in jobs:
                j.wait_ready()
            for j in jobs:  # one stop at a time: they would compete for the 2 cores
                j.go()
                healthy[j.variant].append(j.finish(p["s6_cap"]))
        finally:
            for j in jobs:
                B.kill_group(j.proc)
    # The server that stops answering is a second, dedicated one: a SIGSTOP
    # can catch the server inside a sqlite transaction, and what it does
    # after SIGCONT with the requests of clients killed at the cap is not
    # something the other measurements should depend on.
    spare = c.spare_server()
    hung = {v: [] for v in variants if v != "wandb"}
    for rep in range(p["s6_hung_reps"]):
        log(f"6: server stopped (SIGSTOP), repetition {rep + 1}/{p['s6_hung_reps']}, cap "
            f"{p['s6_cap']:g} s")
        jobs = [StopJob(c, v, spare) for v in hung]
        try:
            for j in jobs:
                j.wait_ready()
            spare.pause()
            time.sleep(0.5)
            for j in jobs:  # together: each waits on the server, not on the CPU
                j.go()
            for j in jobs:
                hung[j.variant].append(j.finish(p["s6_cap"]))
        finally:
            spare.resume()
            for j in jobs:
                B.kill_group(j.proc)
    cap = p["s6_cap"]

    def show(vals):
        if any(v is None for v in vals):
            done = [v for v in vals if v is not None]
            return f"> {cap:g} s ({len(vals) - len(done)}/{len(vals)} capped)"
        return B.fmt_spread(B.spread(vals), 2)

    labels = {"scopemeter": f"scopemeter front: disable_system_metrics(timeout={STOP_TIMEOUT:g})",
              "cli": f"scopemeter run --stop-timeout {STOP_TIMEOUT:g} (child exit -> CLI exit)",
              "mlflow": "MLflow: mlflow.end_run()", "wandb": "W&B: run.finish() (offline)"}
    rows = []
    for v in ["scopemeter", "cli", "mlflow", "wandb"]:
        if v == "wandb" and not c.wandb:
            rows.append([labels[v], f"n/a: {c.wandb_why}", ""])
            continue
        rows.append([labels[v], show(healthy[v]),
                     show(hung[v]) if v in hung else "n/a (offline: no server)"])
    c.tables.append(B.table(
        "6. Stop latency (s): from the stop call to its return",
        ["monitor", "healthy server", "server stopped (SIGSTOP)"], rows,
        [f"interval 1 s, stopped after 2 s; healthy: {p['s6_reps']} repetitions, hung: "
         f"{p['s6_hung_reps']}; measurement capped at {cap:g} s",
         "the CLI owns its run: after the monitor's stop it marks the run finished, bounded by "
         f"min(max(stop timeout, 1), 10) s more"]))
    c.results["6"] = {"healthy": healthy, "hung": hung, "cap_s": cap}
    sm = hung["scopemeter"]
    worst = max((v if v is not None else math.inf) for v in sm)
    c.targets.append(("6 stop, server not answering", f"scopemeter front <= stop timeout "
                      f"({STOP_TIMEOUT:g} s) + 1 s", f"{B.fmt_num(worst, 2)} s (worst)",
                      worst <= STOP_TIMEOUT + 1))
