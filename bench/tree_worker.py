"""tree_worker.py — an otherwise idle "training process" with a tree of N
processes holding M MB (table 9 of bench/run, bench/README.md), recorded by
scopemeter's Python front against the harness's `mlflow server`.

  tree_worker.py --uri URI --experiment E --interval S --warmup W --span T
                 [--procs 9] [--mb 4096] [--shared-mb 512]

The tree is built as bench/tree_cost.c builds it: this process maps and
touches SHARED MB of private anonymous memory, forks N-1 children (they share
those pages copy-on-write), and every process maps and touches its own
(M - SHARED) / N MB; the children sleep.  Then the run is opened and
scopemeter.enable_system_metrics(interval=S, samples=1) called; after W s of
warm-up, T s are measured: the CPU of the monitor's own threads (named
`scopemeter*`: sampling and shipping) from /proc/self/task/TID/schedstat
(ns), and this process's CPU from getrusage minus its main thread's (every
other thread).  One RESULT line with the run id.
"""
import argparse
import mmap
import os
import resource
import signal
import sys
import time

from benchlib import emit


def touched(mb):
    m = mmap.mmap(-1, max(mb, 1) << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    chunk = b"\x01" * (64 << 20)
    for off in range(0, mb << 20, len(chunk)):
        m[off:off + min(len(chunk), (mb << 20) - off)] = chunk[:min(len(chunk), (mb << 20) - off)]
    return m


def monitor_threads_ns():
    total = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if not f.read().startswith("scopemeter"):
                    continue
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def others_cpu_s():
    s = resource.getrusage(resource.RUSAGE_SELF)
    t = resource.getrusage(resource.RUSAGE_THREAD)
    return (s.ru_utime + s.ru_stime) - (t.ru_utime + t.ru_stime)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--uri", required=True)
    ap.add_argument("--experiment", required=True)
    ap.add_argument("--interval", type=float, required=True)
    ap.add_argument("--warmup", type=float, required=True)
    ap.add_argument("--span", type=float, required=True)
    ap.add_argument("--procs", type=int, default=9)
    ap.add_argument("--mb", type=int, default=4096)
    ap.add_argument("--shared-mb", type=int, default=512)
    a = ap.parse_args()
    each = (a.mb - a.shared_mb) // a.procs
    keep = [touched(a.shared_mb)]
    r, w = os.pipe()
    kids = []
    for _ in range(a.procs - 1):
        pid = os.fork()
        if pid == 0:
            keep.append(touched(each))
            os.write(w, b"x")
            while True:
                signal.pause()
        kids.append(pid)
    keep.append(touched(each))
    for _ in kids:
        os.read(r, 1)
    try:
        import mlflow
        import scopemeter
        mlflow.set_tracking_uri(a.uri)
        mlflow.set_experiment(a.experiment)
        run = mlflow.start_run()
        if not scopemeter.enable_system_metrics(interval=a.interval, samples=1):
            raise SystemExit("scopemeter did not start (see its line above)")
        time.sleep(a.warmup)
        n0, c0, t0 = monitor_threads_ns(), others_cpu_s(), time.monotonic()
        time.sleep(a.span)
        n1, c1, t1 = monitor_threads_ns(), others_cpu_s(), time.monotonic()
        scopemeter.disable_system_metrics(timeout=30)
        mlflow.end_run()
        emit({"run_id": run.info.run_id, "wall_s": t1 - t0, "monitor_threads_s": (n1 - n0) / 1e9,
              "other_threads_s": c1 - c0, "procs": a.procs, "mb": a.mb})
    finally:
        for pid in kids:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


if __name__ == "__main__":
    sys.exit(main())
