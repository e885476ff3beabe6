"""docs/design.md §9 "Process tree of a rank", against a real mlflow server
and real processes:

- one recorder per rank and run: the issue's both.py (a Python front inside
  `scopemeter run`), two nested `scopemeter run`, two processes of one rank
  enabling on one run, and a new recorder after the first stopped
  (re-attach) — exactly one point per step, one line naming the first;
- the process tree: a parent that forks 4 children sharing copy-on-write
  pages is counted once (Pss), below the sum of the processes' Rss, at
  least the parent's own Pss and within a few % of the Pss the test reads
  itself; process_count >= 5; a torch DataLoader with 4 workers;
- all_workers with two local ranks: rank 1's tree is logged by rank 0's
  collector under rank 1.
"""
import importlib.util
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

from pyfront_util import (PROCESS, new_run, python_env, read_run, staged_package,
                          system_keys)
from runread import histories, read_line, run_cli, sm_lines

HOLDER = re.compile(r"rank (\d+) of run (\w+) already has a recorder: pid (\d+) \(([^)]*)\)")


def script(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return str(p)


def front_env(uri, **extra):
    return python_env(MLFLOW_TRACKING_URI=uri, **{k: str(v) for k, v in extra.items()})


def one_point_per_step(hist, key):
    steps = [s for s, _, _ in hist[key]]
    assert steps, key
    assert len(steps) == len(set(steps)), (key, steps)
    return steps


# ---- one recorder per rank and run --------------------------------------------------


BOTH = """
    import time, mlflow, scopemeter
    with mlflow.start_run():
        print("ENABLED", scopemeter.enable_system_metrics(interval=1), flush=True)
        time.sleep(6)
"""


@pytest.mark.timeout(120)
def test_front_inside_scopemeter_run_records_once(scopemeter_bin, mlflow_server, tmp_path):
    """The issue's both.py: `scopemeter run` records rank 0; the front inside
    CMD finds the rank taken, says so naming scopemeter's pid, and returns
    False; node_memory of rank 0 has exactly one point per step."""
    both = script(tmp_path, "both.py", BOTH)
    env = {"MLFLOW_TRACKING_URI": mlflow_server, "PYTHONPATH": staged_package() or ""}
    p = run_cli(scopemeter_bin, ["--interval", "1", "--", sys.executable, both], env=env)
    assert p.returncode == 0, p.stderr
    assert "ENABLED False" in p.stdout, (p.stdout, p.stderr)
    lines = [ln for ln in sm_lines(p.stderr) if "already has a recorder" in ln]
    assert len(lines) == 1, p.stderr
    m = HOLDER.search(lines[0])
    assert m and m.group(1) == "0" and m.group(2) == p.run_id, lines
    assert m.group(4) == "scopemeter", lines  # /proc/PID/comm of `scopemeter run`
    hist = histories(mlflow_server, p.run_id)
    steps = one_point_per_step(hist, "system/node_memory_usage_megabytes/rank0")
    assert len(steps) >= 5, steps
    # the tree of `scopemeter run` holds CMD (python) too
    assert max(v for _, _, v in hist["system/process_count/rank0"]) >= 2


@pytest.mark.timeout(120)
def test_nested_scopemeter_run_records_once(scopemeter_bin, mlflow_server):
    p = run_cli(scopemeter_bin, ["--interval", "1", "--", scopemeter_bin, "run", "--interval",
                                 "1", "--", "sleep", "4"],
                env={"MLFLOW_TRACKING_URI": mlflow_server})
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in sm_lines(p.stderr) if "already has a recorder" in ln]
    assert len(lines) == 1, p.stderr
    m = HOLDER.search(lines[0])
    assert m and m.group(2) == p.run_id and m.group(4) == "scopemeter", lines
    hist = histories(mlflow_server, p.run_id)
    for key in ("system/node_memory_usage_megabytes/rank0", "system/process_count/rank0"):
        assert len(one_point_per_step(hist, key)) >= 3
    # the outer one's tree: itself, the inner scopemeter and sleep
    assert max(v for _, _, v in hist["system/process_count/rank0"]) == 3


HOLD = """
    import os, sys, time, scopemeter
    ok = scopemeter.enable_system_metrics(interval=0.5)
    print("ENABLED", ok, os.getpid(), flush=True)
    sys.stdin.readline()  # until told to stop
    scopemeter.disable_system_metrics()
    print("STOPPED", flush=True)
"""


@pytest.mark.timeout(120)
def test_two_processes_of_one_rank_then_reattach(mlflow_server, tmp_path):
    """Two processes of rank 0 enable on one run: the second records nothing
    and names the first; once the first stopped, a third one records (the
    lock went with the first's stop, not its exit)."""
    run_id = new_run(mlflow_server)
    hold = script(tmp_path, "hold.py", HOLD)
    env = front_env(mlflow_server, MLFLOW_RUN_ID=run_id)

    def start():
        return subprocess.Popen([sys.executable, hold], env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    a = start()
    try:
        first = read_line(a.stdout).split()
        assert first[:2] == ["ENABLED", "True"], first
        b = start()
        second = read_line(b.stdout).split()
        assert second[:2] == ["ENABLED", "False"], second
        b.stdin.write("\n")
        b.stdin.flush()
        _, err_b = b.communicate(timeout=60)
        m = HOLDER.search(err_b)
        assert m and m.group(2) == run_id and m.group(3) == first[2], err_b
        assert m.group(4).startswith("python"), err_b
        time.sleep(1.5)
        a.stdin.write("\n")
        a.stdin.flush()
        assert read_line(a.stdout).strip() == "STOPPED"
        # a is still alive here: its stop released the rank
        c = start()
        third = read_line(c.stdout).split()
        assert third[:2] == ["ENABLED", "True"], third
        time.sleep(1.5)
        c.stdin.write("\n")
        c.stdin.flush()
        _, err_c = c.communicate(timeout=60)
        assert "already has a recorder" not in err_c, err_c
    finally:
        for p in (a,):
            if p.poll() is None:
                p.stdin.close()
                p.wait(timeout=60)
    hist = histories(mlflow_server, run_id)
    # a's steps, then c's continuing after them (§1 re-attach): one point each
    steps = one_point_per_step(hist, "system/node_memory_usage_megabytes/rank0")
    assert steps == list(range(len(steps))) and len(steps) >= 4, steps


@pytest.mark.timeout(120)
def test_two_processes_of_one_rank_on_a_sqlite_store(tmp_path):
    """The queue path (MlflowClient, no run id in the engine): the front
    passes the run id as the recording key, so the lock holds there too."""
    import mlflow
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    mlflow.set_tracking_uri(uri)
    client = mlflow.tracking.MlflowClient(tracking_uri=uri)
    run_id = client.create_run(client.create_experiment("lock")).info.run_id
    hold = script(tmp_path, "hold.py", HOLD)
    env = python_env(MLFLOW_TRACKING_URI=uri, MLFLOW_RUN_ID=run_id)
    procs = []
    try:
        for want in ("True", "False"):
            p = subprocess.Popen([sys.executable, hold], env=env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            procs.append(p)
            line = read_line(p.stdout, timeout=90).split()
            assert line[:2] == ["ENABLED", want], line
        first_pid = procs[0].pid
        for p in reversed(procs):
            p.stdin.write("\n")
            p.stdin.flush()
        errs = [p.communicate(timeout=90)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    m = HOLDER.search(errs[1])
    assert m and m.group(2) == run_id and int(m.group(3)) == first_pid, errs[1]
    assert "already has a recorder" not in errs[0], errs[0]


# ---- the process tree ----------------------------------------------------------------


FORK4 = """
    import os, sys, time, scopemeter

    def smaps(pid, key):
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024 / 1e6
        return 0.0

    assert scopemeter.enable_system_metrics(interval=0.5)
    shared = b"\\x01" * (100 * 10**6)   # touched: resident, then shared by fork
    kids = []
    r, w = os.pipe()
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            os.close(w)
            os.read(r, 1)               # until the parent's window ends
            os._exit(0)
        kids.append(pid)
    os.close(r)
    tree = [os.getpid()] + kids
    # the read the forks call for is due T*3/0.02 after them (design.md §9:
    # MEM_SET's 2 % spacing, a read taken up to 3 times), T the CPU time a
    # read of this tree takes, measured here on it
    c = time.thread_time()
    sum(smaps(p, "Pss") for p in tree)
    wait = 3 * (time.thread_time() - c) / 0.02
    time.sleep(max(2, wait))
    t0 = int(time.time() * 1000)
    pss = []
    for _ in range(5):  # 5 s: memory reads may be spaced (design.md §9, read budget)
        time.sleep(1)
        pss.append(sum(smaps(p, "Pss") for p in tree))
    rss = sum(smaps(p, "Rss") for p in tree)
    own = smaps(os.getpid(), "Pss")
    t1 = int(time.time() * 1000)
    print("TREE", t0, t1, min(pss), max(pss), rss, own, wait, flush=True)
    os.close(w)
    for k in kids:
        os.waitpid(k, 0)
    scopemeter.disable_system_metrics()
"""


@pytest.mark.timeout(120)
def test_forked_children_share_memory_once(mlflow_server, tmp_path):
    """Verdict by a bound around the Pss the script reads itself over the
    window (3 % + 0.1 MB, as before: a margin over design.md §9's max(2 %,
    4 MB) for the front's own faults, the documented case of faults that are
    not unsharing; not derived, left as it was).  The window begins when the
    read the forks call for is due, T*3/0.02 after them with T the CPU time
    the script's own read of the tree took (was a fixed 2 s: CI's slower
    machine could still be on the estimate there).  The rules are fed
    numbers in tests/c/test_proc_estimate.c."""
    run_id = new_run(mlflow_server)
    p = subprocess.run([sys.executable, script(tmp_path, "fork4.py", FORK4)],
                       env=front_env(mlflow_server, MLFLOW_RUN_ID=run_id), capture_output=True,
                       text=True, timeout=90)
    assert p.returncode == 0, p.stderr
    words = p.stdout.split()
    i = words.index("TREE")
    t0, t1 = int(words[i + 1]), int(words[i + 2])
    pss_lo, pss_hi, rss, own, wait = map(float, words[i + 3:i + 8])
    assert rss > 2.5 * pss_hi  # the fixture really shares: 5 x 100 MB Rss vs 100 MB once
    metrics, _ = read_run(mlflow_server, run_id)
    mem = [v for _, v, ts in metrics["system/process_memory_megabytes/rank0"] if t0 <= ts <= t1]
    count = [v for _, v, ts in metrics["system/process_count/rank0"] if t0 <= ts <= t1]
    assert mem and count, (metrics["system/process_memory_megabytes/rank0"], t0, t1)
    assert min(count) >= 5, count
    for v in mem:
        assert v < rss, (v, rss)
        assert v >= own - 0.1, (v, own)
        assert 0.97 * pss_lo - 0.1 <= v <= 1.03 * pss_hi + 0.1, (
            f"process_memory_megabytes {v} MB, the script's Pss {pss_lo:.1f}-{pss_hi:.1f} MB "
            f"(bound 3 % + 0.1 MB), the window began {wait:.2f} s after the forks (T*3/0.02)")
    cpu = metrics["system/process_cpu_utilization_percentage/rank0"]
    assert all(v >= 0 for _, v, _ in cpu)


DATALOADER = """
    import time, torch, scopemeter
    from torch.utils.data import DataLoader, Dataset

    class Slow(Dataset):
        def __len__(self):
            return 400
        def __getitem__(self, i):
            time.sleep(0.02)
            return torch.zeros(8)

    assert scopemeter.enable_system_metrics(interval=0.5)
    t0 = int(time.time() * 1000)
    for _ in DataLoader(Slow(), batch_size=4, num_workers=4):
        pass
    t1 = int(time.time() * 1000)
    print("ITER", t0, t1, flush=True)
    scopemeter.disable_system_metrics()
"""


@pytest.mark.launchers
@pytest.mark.timeout(180)
def test_dataloader_workers_in_the_tree(mlflow_server, tmp_path):
    """Counts, not timing: at least 5 processes seen during the loop (4
    workers that live for the whole loop, 8 s at 0.02 s an item)."""
    if importlib.util.find_spec("torch") is None:  # not imported here: see test_proctree_cow.drive
        pytest.skip("torch not installed (pip install torch==2.13.0)")
    run_id = new_run(mlflow_server)
    p = subprocess.run([sys.executable, script(tmp_path, "dl.py", DATALOADER)],
                       env=front_env(mlflow_server, MLFLOW_RUN_ID=run_id), capture_output=True,
                       text=True, timeout=170)
    assert p.returncode == 0, p.stderr
    words = p.stdout.split()
    t0, t1 = int(words[words.index("ITER") + 1]), int(words[words.index("ITER") + 2])
    metrics, _ = read_run(mlflow_server, run_id)
    count = [v for _, v, ts in metrics["system/process_count/rank0"] if t0 <= ts <= t1]
    assert count and max(count) >= 5, (count, metrics["system/process_count/rank0"])


# ---- all_workers: the pod's collector records its siblings' trees -------------------


SIBLING = """
    import os, sys, time, scopemeter
    kids = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        kids.append(pid)
    ok = scopemeter.enable_system_metrics(all_workers=True, interval=0.5)
    print("ENABLED", ok, flush=True)
    sys.stdin.readline()
    for k in kids:
        os.kill(k, 9)
        os.waitpid(k, 0)
    scopemeter.disable_system_metrics()
"""


@pytest.mark.timeout(120)
def test_all_workers_records_sibling_tree(mlflow_server, tmp_path):
    """Counts and names, not timing bounds.  Two local ranks of one pod (torchrun's variables): rank 1 holds its
    lock and records nothing; rank 0's collector, started first, finds it
    and logs its tree (rank 1 + 2 children = 3) under rank 1."""
    run_id = new_run(mlflow_server)
    sib = script(tmp_path, "sibling.py", SIBLING)

    def start(rank):
        env = front_env(mlflow_server, MLFLOW_RUN_ID=run_id, RANK=rank, LOCAL_RANK=rank,
                        WORLD_SIZE=2, LOCAL_WORLD_SIZE=2)
        return subprocess.Popen([sys.executable, sib], env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    r0 = start(0)
    r1 = None
    try:
        assert read_line(r0.stdout).split() == ["ENABLED", "True"]
        r1 = start(1)  # after rank 0's baseline: found at a later sample
        assert read_line(r1.stdout).split() == ["ENABLED", "False"]
        time.sleep(3)
        for p in (r1, r0):
            p.stdin.write("\n")
            p.stdin.flush()
        out = {}
        for name, p in (("r1", r1), ("r0", r0)):
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
            out[name] = err
    finally:
        for p in (r0, r1):
            if p and p.poll() is None:
                p.kill()
    assert "its process tree included (process_*/rank1)" in out["r1"], out["r1"]
    metrics, tags = read_run(mlflow_server, run_id)
    rank1 = {k for k in system_keys(metrics) if k.endswith("/rank1")}
    assert rank1 == {f"system/{k}/rank1" for k in PROCESS}, rank1
    count1 = [v for _, v, _ in metrics["system/process_count/rank1"]]
    assert max(count1) == 3, count1
    assert max(v for _, v, _ in metrics["system/process_memory_megabytes/rank1"]) > 1
    assert not any(k.startswith("scopemeter.rank1.") for k in tags), tags
