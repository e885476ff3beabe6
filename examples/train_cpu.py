#!/usr/bin/env python3
"""examples/train_cpu.py — train a small model on the CPU with scopemeter
recording its system metrics into MLflow, then show what was recorded and
the report: how close the run came to its memory limit, and where.

    python3 examples/train_cpu.py                  # into ./mlflow.db (MLflow's local default)
    python3 examples/train_cpu.py --plot run.png   # also the picture (pip install 'scopemeter[report]')
    scopemeter report                              # the same report again, from the shell
    mlflow ui --backend-store-uri sqlite:///mlflow.db   # then open the run's "System metrics" tab

Where the call goes is the point of this example: right after the run opens,
before the data is loaded and the model is built, because loading data is
where memory spikes, and what happens before the call is not recorded.

Uses torch when it is installed, numpy otherwise.  MLFLOW_TRACKING_URI, when
set, picks another tracking store (e.g. an `mlflow server`).
"""
import argparse
import os
import time

import mlflow
import numpy as np

import scopemeter


def load_data(n, d, seed=0):
    """The 'data loading' phase: a synthetic regression set (n x d float32)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d), dtype=np.float32)
    w = rng.standard_normal(d, dtype=np.float32)
    y = x @ w + 0.1 * rng.standard_normal(n, dtype=np.float32)
    return x, y


def train_torch(x, y, seconds, batch=1024):
    import torch
    torch.manual_seed(0)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y).unsqueeze(1)
    model = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    end, epoch = time.time() + seconds, 0
    while time.time() < end:
        perm = torch.randperm(len(xt))
        total = 0.0
        for i in range(0, len(xt), batch):
            idx = perm[i:i + batch]
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
            if time.time() >= end:
                break
        mlflow.log_metric("train_loss", total / len(xt), step=epoch)
        epoch += 1
    return epoch


def train_numpy(x, y, seconds, batch=1024, lr=0.01):
    w = np.zeros(x.shape[1], dtype=np.float32)
    end, epoch = time.time() + seconds, 0
    while time.time() < end:
        for i in range(0, len(x), batch):
            xb, yb = x[i:i + batch], y[i:i + batch]
            w -= lr * xb.T @ (xb @ w - yb) / len(yb)
        mlflow.log_metric("train_loss", float(((x @ w - y) ** 2).mean()), step=epoch)
        epoch += 1
    return epoch


def show(run_id):
    """A short table of what landed in the run, read back from MLflow."""
    client = mlflow.MlflowClient()
    run = client.get_run(run_id)
    keys = sorted(k for k in run.data.metrics if k.startswith("system/"))
    print(f"\nrecorded into run {run_id} ({mlflow.get_tracking_uri()}):\n")
    print(f"{'series':<58} {'points':>6} {'last':>10}")
    for k in keys:
        n = len(client.get_metric_history(run_id, k))
        print(f"{k:<58} {n:>6} {run.data.metrics[k]:>10.1f}")
    if not keys:
        print("(no system metrics: see the scopemeter: lines above)")
    tags = {k: v for k, v in run.data.tags.items() if k.startswith("scopemeter.")}
    if tags:
        print()
        for k in sorted(tags):
            v = tags[k]  # a long value (the build tag's path) cut to the 100 columns
            print(f"{k:<40} {v if len(v) <= 59 else v[:58] + '…'}")
    uri = mlflow.get_tracking_uri()
    if uri.startswith("sqlite:"):
        print(f"\nlook: mlflow ui --backend-store-uri {uri}   (from this directory)")
    else:
        print(f"\nlook: {uri}")
    print("      -> experiment 'scopemeter-example' -> the run -> tab 'System metrics'")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20, help="training time (default 20)")
    ap.add_argument("--interval", type=float, default=2,
                    help="seconds between samples (default 2 here so a short demo has "
                         "points; scopemeter's own default is 10)")
    ap.add_argument("--rows", type=int, default=400_000, help="rows of synthetic data")
    ap.add_argument("--plot", metavar="FILE.png",
                    help="also draw the report's picture (needs matplotlib)")
    args = ap.parse_args()

    # MLflow's embedded default: a sqlite file in this directory.
    mlflow.set_tracking_uri(os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db")
    mlflow.set_experiment("scopemeter-example")

    with mlflow.start_run() as run:
        scopemeter.enable_system_metrics(interval=args.interval)   # <- right after the run opens

        x, y = load_data(args.rows, 64)                              # data loading comes after
        try:
            import torch  # noqa: F401
            backend, epochs = "torch", train_torch(x, y, args.seconds)
        except ImportError:
            backend, epochs = "numpy", train_numpy(x, y, args.seconds)
        mlflow.log_params({"backend": backend, "rows": args.rows, "epochs": epochs})

        # Optional: exit stops it too.  Here the table below reads the run back
        # in this process, so the last window and the end tags must be in first.
        scopemeter.disable_system_metrics()
    show(run.info.run_id)

    # The report of the run (docs/report.md): per rank, memory against the
    # container's limit beside the node's, OOM kills, CPU, and verdicts.
    print()
    print(scopemeter.format_report(scopemeter.report(run.info.run_id, plot=args.plot)))
    if args.plot:
        print(f"\npicture: {args.plot}")


if __name__ == "__main__":
    main()
