#!/usr/bin/env python3
"""breakdown.py — where a logging window's CPU goes, per thread
(bench/README.md, "Where a window's CPU goes").

    bench/breakdown.py [--build DIR] [--span S] [--strace]

Against a real `mlflow server` (the harness's, benchlib.Server), for each
period (1 s and 10 s) and each surface:
  - the CLI: `scopemeter run --interval P --samples 1 -- sleep T`;
  - the front: a Python process that imports mlflow, opens a run and calls
    scopemeter.enable_system_metrics(interval=P, samples=1) (bench/worker.py's
    scopemeter variant),
and reads /proc/<pid>/task/<tid>/schedstat (kernel's sched_info: CPU time in
ns, run periods = times the thread was put on a CPU, i.e. its wake-ups;
Documentation/scheduler/sched-stats.rst) of every thread at the start and
the end of a span of whole windows, after a warm-up.  Per window: CPU and
wake-ups of the sampling thread ("scopemeter"), the shipping thread
("scopemeter-ship") and the rest (the CLI's main thread; the front's
Python threads).  With --strace, the CLI once more under `strace -f -c`
over the same span (system calls per thread kind), and `ss -tn` counts of
its connections to the server at every window.

Prints one table.  The numbers are context (a shared 2-core VM); the point
is the split.
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402


def threads(pid):
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tids:
        try:
            with open(f"/proc/{pid}/task/{t}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                ns, _wait, slices = (int(x) for x in f.read().split())
        except (OSError, ValueError):
            continue
        out[int(t)] = (comm, ns, slices)
    return out


def kind(comm, main_tid, tid):
    if comm in ("scopemeter", "scopemeter-ship"):
        return comm
    return "main thread" if tid == main_tid else "other threads"


def measure(pid, warm, span):
    time.sleep(warm)
    a = threads(pid)
    time.sleep(span)
    b = threads(pid)
    per = {}
    for tid, (comm, ns, sl) in b.items():
        ns0, sl0 = (a[tid][1], a[tid][2]) if tid in a else (0, 0)
        k = kind(comm, pid, tid)
        cpu, wk = per.get(k, (0, 0))
        per[k] = (cpu + ns - ns0, wk + sl - sl0)
    return per


def conns(port):
    r = subprocess.run(["ss", "-tnH", "state", "established", f"( dport = :{port} )"],
                       capture_output=True, text=True)
    return len([x for x in r.stdout.splitlines() if x.strip()])


FRONT = """
import os, sys, time
import mlflow, scopemeter
mlflow.set_tracking_uri(sys.argv[1]); mlflow.set_experiment("breakdown")
mlflow.start_run()
assert scopemeter.enable_system_metrics(interval=float(sys.argv[2]), samples=1)
print("ready", flush=True)
time.sleep(float(sys.argv[3]))
os._exit(0)
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("SCOPEMETER_BUILD") or
                    os.path.join(B.ROOT, "build"))
    ap.add_argument("--span", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=5.5)
    ap.add_argument("--strace", action="store_true")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    cli = os.path.join(build, "cli", "scopemeter")
    front = B.pyfront_dir(build)
    import tempfile
    tmp = tempfile.mkdtemp(prefix="scopemeter-breakdown-")
    srv = B.Server(os.path.join(tmp, "server"))
    port = srv.uri.rsplit(":", 1)[1]
    rows = []
    try:
        for period in (1.0, 10.0):
            total = args.warmup + args.span + 2
            windows = args.span / period
            # the CLI
            p = subprocess.Popen([cli, "run", "--experiment", "breakdown", "--interval",
                                  f"{period:g}", "--samples", "1", "--", "sleep", f"{total:g}"],
                                 env=B.child_env(front, MLFLOW_TRACKING_URI=srv.uri),
                                 stderr=subprocess.DEVNULL)
            seen = []
            per = {}

            def watch():
                t_end = time.monotonic() + args.warmup + args.span
                while time.monotonic() < t_end:
                    seen.append(conns(port))
                    time.sleep(period / 2)
            import threading
            th = threading.Thread(target=watch)
            th.start()
            per = measure(p.pid, args.warmup, args.span)
            th.join()
            p.wait()
            rows.append(("CLI", period, windows, per, max(seen) if seen else 0, seen))
            # the front
            p = subprocess.Popen([sys.executable, "-c", FRONT, srv.uri, f"{period:g}",
                                  f"{total + 30:g}"], env=B.child_env(front),
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            p.stdout.readline()
            per = measure(p.pid, args.warmup, args.span)
            p.kill()
            p.wait()
            rows.append(("front", period, windows, per, None, None))
        print(f"per window, {args.span:g} s span after {args.warmup:g} s warm-up; "
              "CPU from /proc/<pid>/task/<tid>/schedstat (us), wake-ups = run periods")
        print(f"  {'surface':6} {'period':>6} {'thread':>16} {'CPU us/window':>14} "
              f"{'wake-ups/window':>16}")
        for surf, period, windows, per, maxc, seen in rows:
            for k in ("scopemeter", "scopemeter-ship", "main thread", "other threads"):
                if k in per:
                    cpu, wk = per[k]
                    print(f"  {surf:6} {period:>5g}s {k:>16} {cpu / 1e3 / windows:14.1f} "
                          f"{wk / windows:16.2f}")
            tot = sum(v[0] for v in per.values())
            print(f"  {surf:6} {period:>5g}s {'all':>16} {tot / 1e3 / windows:14.1f}")
            if seen is not None:
                print(f"  {surf:6} {period:>5g}s established connections to the server, "
                      f"sampled every {period / 2:g} s: {' '.join(map(str, seen))}")
        if args.strace:
            for period in (1.0, 10.0):
                total = args.warmup + args.span
                r = subprocess.run(["strace", "-f", "-c", "-o", os.path.join(tmp, "st"), cli, "run",
                                    "--experiment", "breakdown", "--interval", f"{period:g}",
                                    "--samples", "1", "--", "sleep", f"{total:g}"],
                                   env=B.child_env(front, MLFLOW_TRACKING_URI=srv.uri),
                                   stderr=subprocess.DEVNULL)
                print(f"\nstrace -f -c, CLI at {period:g} s, {total:g} s "
                      f"({total / period:g} windows, start and stop included):")
                with open(os.path.join(tmp, "st")) as f:
                    print(f.read())
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
