"""Table 3: training throughput with each monitor on (a pure-Python loop, a
torch CPU loop, a 2-process torchrun)."""
import os
import subprocess
import sys

import benchlib as B
from harness import log


def run_capped(cmd, env, timeout):
    """subprocess.run in its own session: past the timeout the whole group goes
    (torchrun's workers too), and the section fails with what it printed."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        B.kill_group(proc)
        out, err = proc.communicate()
        raise RuntimeError(f"{os.path.basename(cmd[1])} ran past {timeout} s: {err[-1500:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def section3(c):
    p = c.p
    names = ["none", "none2", "mlflow", "scopemeter"] + (["wandb"] if c.wandb else [])
    out = {}
    for loop in ("py", "torch"):
        log(f"3: {loop} loop, {p['s3_rounds']} rounds x {len(names)} variants")
        r = run_capped(
            c.py("train.py", "local", "--loop", loop, "--rounds", p["s3_rounds"], "--seconds",
                 p["s3_seconds"], "--warmup", p["s3_warmup"], "--interval", 1,
                 "--variants", ",".join(names), "--uri", c.server.uri),
            c.env(), p["s3_timeout"])
        res = B.parse_result(r.stdout)
        if r.returncode != 0 or res is None:
            raise RuntimeError(f"train.py {loop} failed ({r.returncode}): {r.stderr[-1500:]}")
        out[loop] = res["rounds"]
    dnames = ["none", "none2", "mlflow", "scopemeter"]
    log(f"3: torchrun 2 processes, {p['s3_dist_rounds']} rounds")
    r = run_capped(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         os.path.join(B.BENCH, "train.py"), "dist", "--rounds", str(p["s3_dist_rounds"]),
         "--seconds", str(p["s3_seconds"]), "--warmup", str(p["s3_warmup"]), "--interval", "1",
         "--variants", ",".join(dnames), "--uri", c.server.uri],
        c.env(OMP_NUM_THREADS=1), p["s3_timeout"])
    res = B.parse_result(r.stdout)
    if r.returncode != 0 or res is None:
        raise RuntimeError(f"torchrun failed ({r.returncode}): {r.stderr[-1500:]}")
    out["torchrun"] = res["rounds"]

    rows, summ = [], {}
    labels = {"py": "pure Python (GIL-bound)", "torch": "torch CPU MLP",
              "torchrun": "torchrun 2 procs, DDP (all_workers)"}
    for loop, rounds in out.items():
        base = B.spread([r["none"] for r in rounds])
        noise = B.spread([r["none2"] / r["none"] for r in rounds])
        vs = [v for v in ("mlflow", "scopemeter", "wandb") if v in rounds[0]]
        row = [labels[loop], B.fmt_spread(base, 0), B.fmt_spread(noise, 3)]
        for v in ("mlflow", "scopemeter", "wandb"):
            if v not in vs:
                row.append("n/a" if v != "wandb" or c.wandb else f"n/a ({c.wandb_why})")
                continue
            s = B.spread([r[v] / r["none"] for r in rounds])
            summ[f"{loop}/{v}"] = s
            row.append(B.fmt_spread(s, 3))
        summ[f"{loop}/noise"] = noise
        rows.append(row)
        s = summ[f"{loop}/scopemeter"]
        # "indistinguishable from noise": the median ratio lies inside the
        # spread of the second unmonitored run against the first.
        c.targets.append((f"3 throughput, {labels[loop]}",
                          "scopemeter/none median within none2/none spread",
                          f"{B.fmt_num(s['median'], 3)} vs [{B.fmt_num(noise['lo'], 3)}-"
                          f"{B.fmt_num(noise['hi'], 3)}]",
                          noise["lo"] <= s["median"] <= noise["hi"]))
    c.tables.append(B.table(
        "3. Training throughput at a 1 s interval (iterations/s relative to no monitor)",
        ["loop", "none it/s", "none2/none", "MLflow", "scopemeter", "W&B"], rows,
        [f"{p['s3_rounds']} rounds (torchrun {p['s3_dist_rounds']}), variants interleaved in an "
         f"order rotated every round, {p['s3_warmup']:g} s warm-up + {p['s3_seconds']:g} s "
         "measured each; ratio to the same round's unmonitored run; none2 = a second "
         "unmonitored run (the noise)",
         "torch: 1 intra-op thread per process; torchrun: MLflow's monitor in both ranks "
         "(what its variable does), scopemeter all_workers (the pod's local rank 0 collects)"]))
    c.results["3"] = {"rounds": out, "summary": summ}
