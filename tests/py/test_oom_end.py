"""The end of a run is its state at the end (issue 46, items 1, 2, 6 and 10),
through `scopemeter run` in real cgroup v1 memory cgroups, against a real
MLflow server, without CAP_SYS_RESOURCE (setpriv, as the issue's new user and
a Kubernetes container): the literal reproductions of the issue.

- The final sample always records the levels (docs/design.md §7): after an
  OOM kill (`sleep 2; head -c 400M /dev/zero > /dev/shm/F` in 300 MiB) and
  without one (`sleep 5.2; head -c 100M ...; sleep 0.2` at --interval 5,
  ending within a second of a scheduled sample), the run's last
  container_memory_shmem_megabytes is the cgroup's shmem that the test reads
  after CMD's tree has ended, and the sampled peak sees it.  Before, a final
  sample less than min(interval/2, 1 s) after the last was skipped: the run
  ended at 0.0 MB of shmem with 309 MB in the cgroup.
- `oom_kill` is the cgroup's count over the whole run (the test's own
  counter delta), read once CMD's tree is gone (docs/cgroup.md).
- A run whose cgroup counted OOM kills ends KILLED with end_reason oom_kill,
  even when a shell wrapper outlived its OOM-killed child and exited 3.
- The v1 kernel peak is the run's: an earlier job's 210 MB peak in the same
  cgroup is reset at start (CAP_SYS_RESOURCE is not needed to write
  memory.max_usage_in_bytes), and where the file cannot be written (a
  read-only cgroupfs, as in a container) it is not tagged as this run's.

Every /dev/shm file made here is removed in a finally block, before its
cgroup.  No verdict depends on timing: the last point is compared with what
the kernel holds after the run, which a final sample always records.
"""
import os
import re
import shutil
import subprocess

import pytest

from conftest import clean_env, is_root
from runread import get_run, history, scratch_cwd, tags_of
from test_cgroup_real import MOUNTS, MiB, read
from test_composition_real import kernel_parts, limited
from test_oom_order import NOCAP, oom_kills

pytestmark = [
    pytest.mark.skipif(not is_root(), reason="needs root to create cgroups"),
    pytest.mark.skipif("memory" not in MOUNTS,
                       reason="no cgroup v1 memory controller mounted (v2: tests/vm)"),
    pytest.mark.skipif(not shutil.which("setpriv"), reason="needs util-linux's setpriv"),
    pytest.mark.timeout(180),
]

SHMEM = "system/container_memory_shmem_megabytes/rank0"
USAGE = "system/container_memory_usage_megabytes/rank0"


def shm_path(tag):
    return f"/dev/shm/sm-test-{os.getpid()}-{tag}"


def run_in(cg, binary, uri, cmd, interval, wrap=()):
    """`scopemeter run --interval I -- CMD` in the cgroup without
    CAP_SYS_RESOURCE; (the run's id, the completed process)."""
    argv = [*wrap, *NOCAP, binary, "run", "--interval", str(interval), "--", *cmd]
    p = subprocess.run(argv, env=clean_env(MLFLOW_TRACKING_URI=uri), capture_output=True,
                       text=True, preexec_fn=cg.enter, timeout=150, **scratch_cwd({}))
    m = re.search(r"created run ([0-9a-f]+)", p.stderr)
    assert m, (p.returncode, p.stderr[-2000:])
    return m.group(1), p


def last(uri, run_id, key):
    h = history(uri, run_id, key)
    assert h, (key, run_id)
    return h[-1][2]


def assert_last_is_the_cgroup(uri, run_id, mem, err):
    """The run's last shmem point is the cgroup's shmem now (the file CMD
    left: nothing else in the cgroup is shmem), rounded as logged; its last
    working set holds it, and the sampled peak sees that last sample."""
    kernel = kernel_parts(mem)
    want = round(kernel["shmem"] / 1e6, 1)
    shmem, usage = last(uri, run_id, SHMEM), last(uri, run_id, USAGE)
    tags = tags_of(get_run(uri, run_id))
    peak = float(tags["scopemeter.rank0.mem_peak_sampled_mb"])
    assert shmem == want, ("last shmem point", shmem, "the cgroup's shmem after the run", want,
                           history(uri, run_id, SHMEM), err[-1500:])
    assert usage >= shmem, (usage, shmem)
    assert peak >= usage, ("mem_peak_sampled_mb must see the final sample", peak, usage)
    return tags


def test_the_oom_kill_is_the_runs_last_point(scopemeter_bin, mlflow_server):
    """Issue 46 items 1, 2, 6: the literal reproduction."""
    cg, mem = limited("oomend", 300 * MiB)
    big = shm_path("big")
    try:
        k0 = oom_kills(mem)
        run_id, p = run_in(cg, scopemeter_bin, mlflow_server,
                           ["sh", "-c", f"sleep 2; head -c 400M /dev/zero > {big}"], 1)
        kills = oom_kills(mem) - k0
        assert kills >= 1, (kills, p.stderr[-2000:])  # the kernel did OOM-kill
        assert os.path.getsize(big) > 250 * MiB, os.path.getsize(big)
        tags = assert_last_is_the_cgroup(mlflow_server, run_id, mem, p.stderr)
        # item 2: every kill of the run, however far apart (the test's own counter)
        assert int(tags["scopemeter.rank0.oom_kill"]) == kills, (tags, kills, p.stderr[-1500:])
        # item 6: said as the run's end
        run = get_run(mlflow_server, run_id)
        assert run["info"]["status"] == "KILLED", run["info"]
        assert tags["scopemeter.rank0.end_reason"] == "oom_kill", tags
        assert tags["scopemeter.end_reason"].startswith(
            "KILLED by scopemeter run of rank 0: oom_kill"), tags
    finally:
        if os.path.exists(big):
            os.unlink(big)
        cg.remove()


# CMD is the process the kernel kills first (the one with ~300 MB); its child,
# in CMD's process group, waits for that death (a condition, no sleep bound),
# then fills /dev/shm and is killed in turn: the issue's `sh` and `head`, 12 ms
# apart, made certain.
AFTER_CMD = """
import os, sys, time
parent = os.getpid()
if os.fork() == 0:
    while os.getppid() == parent:
        time.sleep(0.01)
    os.execvp("sh", ["sh", "-c", "head -c 400M /dev/zero > " + sys.argv[1]])
b = b"x" * (400 << 20)
"""


def test_oom_kill_counts_the_kills_after_cmds_death(scopemeter_bin, mlflow_server):
    """Issue 46 item 2: the kills of CMD's tree after CMD itself are the run's
    too.  Before: oom_kill 1, read when CMD died."""
    cg, mem = limited("killsafter", 300 * MiB)
    big = shm_path("after")
    try:
        k0 = oom_kills(mem)
        run_id, p = run_in(cg, scopemeter_bin, mlflow_server,
                           ["python3", "-c", AFTER_CMD, big], 1)
        kills = oom_kills(mem) - k0
        assert p.returncode == 137, (p.returncode, p.stderr[-2000:])  # CMD was the first
        assert kills >= 2, (kills, p.stderr[-2000:])
        tags = tags_of(get_run(mlflow_server, run_id))
        assert int(tags["scopemeter.rank0.oom_kill"]) == kills, (tags, kills, p.stderr[-1500:])
        assert_last_is_the_cgroup(mlflow_server, run_id, mem, p.stderr)
        assert run_status(mlflow_server, run_id) == "KILLED"
    finally:
        if os.path.exists(big):
            os.unlink(big)
        cg.remove()


def test_the_final_sample_keeps_the_levels_without_an_oom(scopemeter_bin, mlflow_server):
    """Issue 46 item 1, without an OOM: CMD ends 0.3 s after the sample at
    5 s; the last window holds the 100 MB it wrote."""
    cg, mem = limited("finalshm", 1024 * MiB)
    f = shm_path("x")
    try:
        run_id, p = run_in(cg, scopemeter_bin, mlflow_server,
                           ["sh", "-c", f"sleep 5.2; head -c 100M /dev/zero > {f}; sleep 0.2"], 5)
        assert p.returncode == 0, p.stderr[-2000:]
        assert os.path.getsize(f) == 100 * MiB
        tags = assert_last_is_the_cgroup(mlflow_server, run_id, mem, p.stderr)
        assert run_status(mlflow_server, run_id) == "FINISHED"
        assert "scopemeter.rank0.end_reason" not in tags, tags  # no OOM: nothing to say
    finally:
        if os.path.exists(f):
            os.unlink(f)
        cg.remove()


def run_status(uri, run_id):
    return get_run(uri, run_id)["info"]["status"]


def test_an_oom_inside_a_shell_wrapper_is_the_runs_end(scopemeter_bin, mlflow_server):
    """Issue 46 item 6: the wrapper (`bash train.sh`) outlives its OOM-killed
    python (the one process with ~300 MB: the kernel's certain victim) and
    exits 3.  Before: FAILED, no end_reason."""
    cg, mem = limited("wrapper", 300 * MiB)
    try:
        k0 = oom_kills(mem)
        job = 'python3 -c "b = b\'x\' * (400 << 20)"; exit 3'
        run_id, p = run_in(cg, scopemeter_bin, mlflow_server, ["sh", "-c", job], 1)
        kills = oom_kills(mem) - k0
        assert p.returncode == 3, (p.returncode, p.stderr[-2000:])  # CMD's own status
        assert kills >= 1, kills
        tags = tags_of(get_run(mlflow_server, run_id))
        assert run_status(mlflow_server, run_id) == "KILLED", (tags, p.stderr[-1500:])
        assert tags["scopemeter.rank0.end_reason"] == "oom_kill", tags
        assert tags["scopemeter.end_reason"] == (
            f"KILLED by scopemeter run of rank 0: oom_kill ({kills} OOM kill"
            f"{'' if kills == 1 else 's'} in its cgroup; CMD exit 3)"), tags
        assert int(tags["scopemeter.rank0.oom_kill"]) == kills, (tags, kills)
    finally:
        cg.remove()


def earlier_peak(cg, mem):
    """An earlier job in the cgroup: 200 MB written to /dev/shm and removed.
    The kernel's peak keeps it; returns it (bytes)."""
    f = shm_path("earlier")
    try:
        subprocess.run(["sh", "-c", f"head -c 200M /dev/zero > {f}"], check=True,
                       preexec_fn=cg.enter, timeout=60)
    finally:
        if os.path.exists(f):
            os.unlink(f)
    peak = int(read(f"{mem}/memory.max_usage_in_bytes"))
    assert peak > 200e6 > int(read(f"{mem}/memory.usage_in_bytes")), peak
    return peak


def test_the_v1_kernel_peak_is_the_runs(scopemeter_bin, mlflow_server):
    """Issue 46 item 10: a run that never passes 20 MB after a 210 MB job.
    Writable (root, without CAP_SYS_RESOURCE): reset at start, the tag is the
    run's peak.  A read-only cgroupfs (a container's): one line, no tag.
    Before: memory_peak_mb=210 from the earlier job."""
    cg, mem = limited("peak", 300 * MiB)
    try:
        before = earlier_peak(cg, mem)
        run_id, p = run_in(cg, scopemeter_bin, mlflow_server, ["sleep", "2"], 1)
        tags = tags_of(get_run(mlflow_server, run_id))
        after = int(read(f"{mem}/memory.max_usage_in_bytes"))
        assert after < before, (after, before)  # it was reset
        peak = float(tags["scopemeter.rank0.memory_peak_mb"])
        # the run's own: read at its end, at most what the kernel holds after it
        assert peak <= after / 1e6 + 0.05 and peak < before / 1e6 - 100, (peak, after, before)
        assert "predate" not in p.stderr, p.stderr[-1500:]

        before = earlier_peak(cg, mem)
        ro = ["unshare", "-m", "--propagation", "private", "sh", "-c",
              f'mount -o remount,bind,ro {MOUNTS["memory"][0]} && exec "$@"', "sh"]
        run_id, p = run_in(cg, scopemeter_bin, mlflow_server, ["sleep", "2"], 1, wrap=ro)
        tags = tags_of(get_run(mlflow_server, run_id))
        assert int(read(f"{mem}/memory.max_usage_in_bytes")) == before  # not reset
        said = [ln for ln in p.stderr.splitlines() if "may predate the run" in ln]
        assert len(said) == 1 and "Read-only file system" in said[0], p.stderr[-1500:]
        assert "scopemeter.rank0.memory_peak_mb" not in tags, tags
        assert float(tags["scopemeter.rank0.mem_peak_sampled_mb"]) < 100, tags
    finally:
        cg.remove()
