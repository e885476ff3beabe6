"""A training process for the Python-front tests: opens (or attaches to) an
MLflow run, calls scopemeter.enable_system_metrics() first thing, then does
what the test asks — train a small model (torch DDP under torchrun, numpy
otherwise), send traffic over its own network namespace's loopback, raise,
wait for SIGTERM — and exits the way a training script does.

Launched as: python pyfront_worker.py [options]; the tracking URI and run id
come from MLFLOW_TRACKING_URI / MLFLOW_RUN_ID like a launcher would pass them.
"""
import argparse
import json
import os
import socket
import sys
import threading
import time


def send_loopback(megabytes):
    """Sends `megabytes` MB to a listener on 127.0.0.1 of this netns."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    got = [0]

    def sink():
        c, _ = srv.accept()
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            got[0] += len(b)
        c.close()

    t = threading.Thread(target=sink)
    t.start()
    total = int(megabytes * 1e6)
    chunk = b"x" * (1 << 16)
    with socket.create_connection(("127.0.0.1", port)) as s:
        sent = 0
        while sent < total:
            n = min(len(chunk), total - sent)
            s.sendall(chunk[:n])
            sent += n
    t.join()
    srv.close()
    return got[0]


def train_numpy(seconds):
    import numpy as np
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2048, 32))
    w_true = rng.standard_normal(32)
    y = x @ w_true
    w = np.zeros(32)
    end = time.time() + seconds
    while time.time() < end:
        grad = x.T @ (x @ w - y) / len(y)
        w -= 0.05 * grad
    return float(((x @ w - y) ** 2).mean())


def train_torch_ddp(seconds):
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(512, 32), torch.randn(512, 1)
    end = time.time() + seconds
    steps = 0
    while True:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        steps += 1
        # every rank takes the same number of steps (DDP needs it)
        done = torch.tensor([1.0 if time.time() >= end else 0.0])
        dist.all_reduce(done)
        if done.item() > 0:
            break
    dist.barrier()
    dist.destroy_process_group()
    return float(loss.item())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attach", choices=["start_run", "env", "none"], default="start_run")
    ap.add_argument("--all-workers", action="store_true")
    ap.add_argument("--interval", type=float, default=None)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--traffic-mb", type=float, default=0)
    ap.add_argument("--torch-ddp", action="store_true")
    ap.add_argument("--raise-after", action="store_true")
    ap.add_argument("--wait-sigterm", action="store_true")
    ap.add_argument("--disable-after", type=float, default=None)
    ap.add_argument("--enable-twice", action="store_true")
    ap.add_argument("--child-env-check", action="store_true")
    ap.add_argument("--oom-rank", type=int, default=None,
                    help="that RANK allocates past the cgroup's limit after --seconds; "
                         "the others wait to be stopped by the launcher")
    args = ap.parse_args()

    import mlflow
    import scopemeter

    run = None
    if args.attach == "start_run":
        run = mlflow.start_run(run_id=os.environ.get("MLFLOW_RUN_ID"))
    report = {"pid": os.getpid()}
    report["enabled"] = scopemeter.enable_system_metrics(all_workers=args.all_workers,
                                                         interval=args.interval)
    if args.enable_twice:
        report["enabled_again"] = scopemeter.enable_system_metrics(
            all_workers=args.all_workers, interval=args.interval)
    report["env_var_left"] = "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING" in os.environ
    from scopemeter import _front
    comp = _front._current.companion if _front._current else None
    report["companion"] = comp.pid if comp else 0
    report["rank"] = int(os.environ.get("RANK", "0"))
    if args.child_env_check:
        import subprocess
        out = subprocess.run([sys.executable, "-c", "import os; print(os.environ.get("
                              "'MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING'))"],
                             capture_output=True, text=True)
        report["child_env"] = out.stdout.strip()
    print("REPORT " + json.dumps(report), flush=True)

    if args.traffic_mb:
        send_loopback(args.traffic_mb)
    if args.wait_sigterm:
        print("READY", flush=True)
        while True:
            time.sleep(0.2)
    if args.oom_rank is not None:
        train_numpy(args.seconds)
        if report["rank"] != args.oom_rank:
            time.sleep(300)          # the launcher stops it when the other rank dies
        held = []
        while True:                  # past the cgroup's limit: the kernel kills
            held.append(b"\1" * (16 << 20))   # every page written
    if args.torch_ddp:
        train_torch_ddp(args.seconds)
    else:
        train_numpy(args.seconds)
    if args.disable_after is not None:
        scopemeter.disable_system_metrics()
    if args.raise_after:
        raise RuntimeError("training failed on purpose (test)")
    if run is not None:
        mlflow.end_run()


if __name__ == "__main__":
    main()
