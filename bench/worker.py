"""worker.py — an otherwise idle "training process" with one monitor on, for
measurements 2, 4, 5 and 6 of the harness.

Every variant imports mlflow and opens a run on the harness's `mlflow server`
(what a training script that uses MLflow does anyway), then turns on its
monitor:
  none        no monitor: the baseline the others are subtracted from
  mlflow      mlflow.start_run(log_system_metrics=True), the interval from
              MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL (MLflow's SystemMetricsMonitor)
  scopemeter  scopemeter.enable_system_metrics(interval=S, samples=1) (the Python front)
  wandb       wandb.init(mode="offline", settings=x_stats_sampling_interval=S):
              its Go service wandb-core (and its wandb-symon child) samples

  worker.py idle --variant V --interval S --warmup W --span T
      sleeps W s (start-up, first samples), then T s measured: this process's
      CPU time (getrusage RUSAGE_SELF: every thread, exited ones too), VmRSS,
      VmHWM, RssAnon (private memory, without the pages of shared libraries), and for wandb the CPU time and RSS of wandb-core and its children
      from /proc.  One RESULT line.
  worker.py stop --variant V --interval S --run-for T [--stop-timeout S]
      runs T s, prints READY, waits for a line on stdin (the harness may
      SIGSTOP the server meanwhile), then times the stop call:
      disable_system_metrics(timeout) / mlflow.end_run() / wandb finish().
      One RESULT line, then os._exit (no atexit: MLflow's own end_run at exit
      would hang on a stopped server too).
"""
import argparse
import os
import sys
import tempfile
import time

from benchlib import descendants, emit, proc_comm, proc_cpu_s, proc_status_kb, self_cpu_s

WANDB_PROCS = ("wandb-core", "wandb-symon")


def start(variant, interval, uri, experiment, stop_timeout):
    """Opens the run and turns the monitor on; returns a stop function."""
    os.environ["MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL"] = str(interval)
    os.environ["MLFLOW_SYSTEM_METRICS_SAMPLES_BEFORE_LOGGING"] = "1"
    import mlflow
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(experiment)
    mlflow.start_run(log_system_metrics=(variant == "mlflow"))
    if variant in ("none", "mlflow"):
        return mlflow.end_run
    if variant == "scopemeter":
        import scopemeter
        if not scopemeter.enable_system_metrics(interval=interval, samples=1):
            raise SystemExit("scopemeter did not start (see its line above)")
        return lambda: scopemeter.disable_system_metrics(timeout=stop_timeout)
    if variant == "wandb":
        import wandb
        d = tempfile.mkdtemp(prefix="bench-wandb-")
        run = wandb.init(project="scopemeter-bench", dir=d, mode="offline",
                         settings=wandb.Settings(x_stats_sampling_interval=float(interval)))
        return run.finish
    raise SystemExit(f"unknown variant {variant}")


def wandb_pids():
    return [p for p in descendants(os.getpid()) if proc_comm(p) in WANDB_PROCS]


def side_cpu(pids):
    vals = [proc_cpu_s(p) for p in pids]
    return sum(v for v in vals if v is not None)


def idle(args):
    stop = start(args.variant, args.interval, args.uri, args.experiment, args.stop_timeout)
    time.sleep(args.warmup)
    side = wandb_pids() if args.variant == "wandb" else []
    c0, s0, t0 = self_cpu_s(), side_cpu(side), time.monotonic()
    # sleep in one call: an idle training process, no wake-ups of our own
    time.sleep(args.span)
    c1, s1, t1 = self_cpu_s(), side_cpu(side), time.monotonic()
    pid = os.getpid()
    out = {
        "variant": args.variant, "interval": args.interval, "wall_s": t1 - t0,
        "cpu_s": c1 - c0, "rss_kb": proc_status_kb(pid, "VmRSS"),
        "hwm_kb": proc_status_kb(pid, "VmHWM"), "anon_kb": proc_status_kb(pid, "RssAnon"),
        "side_procs": [proc_comm(p) for p in side], "side_cpu_s": s1 - s0,
        "side_rss_kb": sum(proc_status_kb(p, "VmRSS") or 0 for p in side),
    }
    emit(out)
    try:
        stop()
    finally:
        sys.stdout.flush()
        os._exit(0)


def stop_latency(args):
    stop = start(args.variant, args.interval, args.uri, args.experiment, args.stop_timeout)
    time.sleep(args.run_for)
    print("READY", flush=True)
    sys.stdin.readline()
    t0 = time.monotonic()
    try:
        stop()
        err = None
    except Exception as e:  # a failed stop is a result too
        err = f"{type(e).__name__}: {e}"
    emit({"variant": args.variant, "stop_s": time.monotonic() - t0, "error": err})
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["idle", "stop"])
    ap.add_argument("--variant", required=True,
                    choices=["none", "mlflow", "scopemeter", "wandb"])
    ap.add_argument("--interval", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--span", type=float, default=10.0)
    ap.add_argument("--run-for", type=float, default=2.0)
    ap.add_argument("--stop-timeout", type=float, default=5.0)
    ap.add_argument("--uri", required=True)
    ap.add_argument("--experiment", default="scopemeter-bench")
    args = ap.parse_args()
    (idle if args.mode == "idle" else stop_latency)(args)


if __name__ == "__main__":
    main()
