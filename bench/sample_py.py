"""sample_py.py — the Python side of measurement 1: CPU time of one full
sample taken the way MLflow takes it (its CPUMonitor + DiskMonitor +
NetworkMonitor collect_metrics(), i.e. psutil) and with psutil's bare calls
(cpu_percent, virtual_memory, disk_usage('/'), net_io_counters).

It stays alive between rounds so the driver can interleave its rounds with
rounds of the C program (bench/sample_cost): one line "round N" on stdin, one
RESULT line back with the CPU microseconds per sample of each variant in this
round (time.thread_time() around N calls, divided by N).

  sample_py.py rest --uri URI --iters N
      context for measurement 2: the client-side CPU of one MlflowClient call
      from Python, the unit both Python monitors pay per window or sample:
      log_batch of 8 metrics (what scopemeter's Python front sends per window
      of a CPU process) and get_run (what MLflow's monitor asks before every
      sample).  One RESULT line, microseconds per call (thread CPU time).
"""
import os
import sys
import time

import psutil
from mlflow.system_metrics.metrics.cpu_monitor import CPUMonitor
from mlflow.system_metrics.metrics.disk_monitor import DiskMonitor
from mlflow.system_metrics.metrics.network_monitor import NetworkMonitor

from benchlib import emit


def rest(uri, iters):
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient
    c = MlflowClient(tracking_uri=uri)
    exp = c.get_experiment_by_name("scopemeter-bench")
    run_id = c.create_run(exp.experiment_id if exp else "0").info.run_id
    step = [0]

    def log_batch():
        ts = int(time.time() * 1000)
        c.log_batch(run_id, metrics=[Metric(f"system/bench_{k}/rank0", float(k), ts, step[0])
                                     for k in range(8)])
        step[0] += 1

    def get_run():
        c.get_run(run_id)

    out = {}
    for name, fn in (("log_batch_8", log_batch), ("get_run", get_run)):
        for _ in range(5):
            fn()
        vals = []
        for _ in range(iters):
            t0 = time.thread_time()
            fn()
            vals.append((time.thread_time() - t0) * 1e6)
        out[name] = vals
    c.set_terminated(run_id)
    emit(out)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "rest":
        uri = sys.argv[sys.argv.index("--uri") + 1]
        iters = int(sys.argv[sys.argv.index("--iters") + 1])
        return rest(uri, iters)
    monitors = [CPUMonitor(), DiskMonitor(), NetworkMonitor()]

    def mlflow_sample():
        for m in monitors:
            m.collect_metrics()

    def psutil_sample():
        psutil.cpu_percent()
        psutil.virtual_memory()
        psutil.disk_usage(os.sep)
        psutil.net_io_counters()

    variants = {"mlflow": mlflow_sample, "psutil": psutil_sample}
    for fn in variants.values():  # warm caches and psutil's internal state
        for _ in range(50):
            fn()
    for m in monitors:
        m.clear_metrics()
    emit({"ready": True, "psutil": psutil.__version__})

    for line in sys.stdin:
        words = line.split()
        if not words or words[0] != "round":
            break
        iters = int(words[1])
        out = {}
        for name, fn in variants.items():
            t0 = time.thread_time()
            for _ in range(iters):
                fn()
            out[name] = (time.thread_time() - t0) / iters * 1e6
        for m in monitors:  # CPUMonitor appends to lists until a window is logged
            m.clear_metrics()
        emit(out)


if __name__ == "__main__":
    main()
