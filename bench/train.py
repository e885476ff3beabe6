"""train.py — measurement 3: training throughput with no monitor, MLflow's
monitor, scopemeter's Python front (and W&B's, when installed).

One process runs every variant, interleaved: in round r the variants run in
an order rotated by r, each for a warm-up then a measured stretch of its
training loop, so drift of the machine (other tenants, thermal) lands on all
variants alike and the ratio to the same round's no-monitor run is what is
reported.

  train.py local --loop py|torch --rounds R --seconds D --interval S --variants a,b,c
      loops: "py" is GIL-bound pure Python (an SGD step of a small linear
      model over lists); "torch" a small MLP forward/backward/SGD step on the
      CPU (torch.set_num_threads(1): two cores are shared with the monitors
      and the server).  One RESULT line: per round, iterations/s per variant.
  torchrun --standalone --nproc-per-node 2 train.py dist ...
      the torch loop under DistributedDataParallel (gloo); variants none,
      mlflow (every rank: start_run(run_id, log_system_metrics=True), which is
      what MLflow's variable does in every process) and scopemeter
      (enable_system_metrics(all_workers=True) in every rank: the pod's local
      rank 0 collects).  Rank 0 creates one run per variant round and hands
      its id to the other rank; both ranks run the same iteration count
      (calibrated in the warm-up), and rank 0 prints the RESULT line.
"""
import argparse
import os
import random
import sys
import tempfile
import time

from benchlib import emit

EXPERIMENT = "scopemeter-bench-throughput"


# ---- training loops -------------------------------------------------------------------


def make_py_step():
    rng = random.Random(0)
    n, d = 32, 16
    xs = [[rng.uniform(-1, 1) for _ in range(d)] for _ in range(n)]
    w_true = [rng.uniform(-1, 1) for _ in range(d)]
    ys = [sum(a * b for a, b in zip(x, w_true)) for x in xs]
    w = [0.0] * d

    def step():
        grad = [0.0] * d
        for x, y in zip(xs, ys):
            err = sum(a * b for a, b in zip(x, w)) - y
            for j in range(d):
                grad[j] += err * x[j]
        for j in range(d):
            w[j] -= 0.01 * grad[j] / n
    return step


def make_torch_step(ddp=False):
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    if ddp:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 64), torch.randint(0, 10, (64,))
    lossf = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        lossf(model(x), y).backward()
        opt.step()
    return step


def run_for(step, seconds):
    """Iterations per second of step() over about `seconds`."""
    n, t0 = 0, time.perf_counter()
    end = t0 + seconds
    while True:
        step()
        n += 1
        if (n & 7) == 0 and time.perf_counter() >= end:
            break
    return n / (time.perf_counter() - t0)


def run_n(step, n):
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    return n / (time.perf_counter() - t0)


# ---- monitors ------------------------------------------------------------------------


class Variant:
    """Turns one monitor on for one measured stretch and off after it."""

    def __init__(self, name, interval, all_workers=False):
        self.name, self.interval, self.all_workers = name, interval, all_workers
        self.wandb_run = None

    def start(self, run_id=None):
        import mlflow
        if self.name == "wandb":
            import wandb
            d = tempfile.mkdtemp(prefix="bench-wandb-")
            self.wandb_run = wandb.init(
                project="scopemeter-bench", dir=d, mode="offline",
                settings=wandb.Settings(x_stats_sampling_interval=float(self.interval)))
            return
        if run_id is not None:  # dist: the run rank 0 created
            os.environ["MLFLOW_RUN_ID"] = run_id
        if self.name == "mlflow":
            mlflow.start_run(run_id=run_id, log_system_metrics=True)
        elif self.name == "scopemeter":
            import scopemeter
            if run_id is None:
                mlflow.start_run(log_system_metrics=False)
            scopemeter.enable_system_metrics(all_workers=self.all_workers,
                                             interval=self.interval, samples=1)
        elif run_id is None:
            mlflow.start_run(log_system_metrics=False)

    def stop(self):
        import mlflow
        if self.name == "wandb":
            self.wandb_run.finish()
            return
        if self.name == "scopemeter":
            import scopemeter
            scopemeter.disable_system_metrics()
        if mlflow.active_run() is not None:
            mlflow.end_run()
        os.environ.pop("MLFLOW_RUN_ID", None)


def setup_mlflow(uri, interval):
    os.environ["MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL"] = str(interval)
    os.environ["MLFLOW_SYSTEM_METRICS_SAMPLES_BEFORE_LOGGING"] = "1"
    import mlflow
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(EXPERIMENT)


def local(args):
    setup_mlflow(args.uri, args.interval)
    step = make_py_step() if args.loop == "py" else make_torch_step()
    run_for(step, 0.5)  # warm the interpreter / allocator
    names = args.variants.split(",")
    rounds = []
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        res = {}
        for name in order:
            v = Variant(name, args.interval)
            v.start()
            run_for(step, args.warmup)  # the monitor's start-up and first sample
            res[name] = run_for(step, args.seconds)
            v.stop()
        rounds.append(res)
        print(f"round {r}: " + ", ".join(f"{k} {res[k]:.1f}/s" for k in names),
              file=sys.stderr, flush=True)
    emit({"loop": args.loop, "rounds": rounds})


def dist(args):
    import torch.distributed as td
    td.init_process_group("gloo")
    rank = td.get_rank()
    setup_mlflow(args.uri, args.interval)
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri=args.uri)
    exp_id = None
    if rank == 0:
        exp = client.get_experiment_by_name(EXPERIMENT)
        exp_id = exp.experiment_id if exp else client.create_experiment(EXPERIMENT)
    step = make_torch_step(ddp=True)
    # calibrate: iterations for `seconds`, decided by rank 0 for both ranks.
    # DDP steps are collective: every rank must take the same number, so the
    # calibration is a fixed count, never "as many as fit in a second".
    run_n(step, 20)
    rate = run_n(step, 100)
    box = [max(1, int(rate * args.seconds))]
    td.broadcast_object_list(box, src=0)
    n_iter = box[0]
    names = args.variants.split(",")
    rounds = []
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        res = {}
        for name in order:
            box = [client.create_run(exp_id).info.run_id if rank == 0 else None]
            td.broadcast_object_list(box, src=0)
            v = Variant(name, args.interval, all_workers=True)
            v.start(run_id=box[0])
            run_n(step, max(1, int(n_iter * args.warmup / args.seconds)))
            mine = run_n(step, n_iter)
            rates = [None] * td.get_world_size()
            td.all_gather_object(rates, mine)
            res[name] = sum(rates) / len(rates)
            td.barrier()
            v.stop()
            td.barrier()
        rounds.append(res)
        if rank == 0:
            print(f"round {r}: " + ", ".join(f"{k} {res[k]:.1f}/s" for k in names),
                  file=sys.stderr, flush=True)
    if rank == 0:
        emit({"loop": "torch-ddp-2", "iterations": n_iter, "rounds": rounds})
    # Leave together and without destructors: tearing gloo down while the
    # other rank is already gone ended one run in eight here with "terminate
    # called without an active exception" (SIGABRT) after the result was out.
    td.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["local", "dist"])
    ap.add_argument("--loop", choices=["py", "torch"], default="py")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--variants", default="none,mlflow,scopemeter")
    ap.add_argument("--uri", required=True)
    args = ap.parse_args()
    (local if args.mode == "local" else dist)(args)


if __name__ == "__main__":
    main()
