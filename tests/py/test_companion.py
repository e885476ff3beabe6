"""The recording outlives the training process (issue 32 item 1,
docs/design.md §7): enable_system_metrics() starts `scopemeter companion`,
which watches the process through a pidfd and, when it dies without a stop,
writes the end tags the cgroup kept and why it died, and marks the run it
opened KILLED / FAILED; after the front's SIGTERM stop it only ends the run.
The C API starts the same companion (sm_monitor_set_companion): the
test_capi_* tests drive tests/tools/capi_companion.c on libscopemeter.so.

Real parts: the Python front in a real process against a real MLflow server
(the REST path) and a local sqlite store (the MlflowClient path, the
companion's `python -m scopemeter _companion-end`); a real v1 memory cgroup
whose limit the training process allocates past, so the kernel OOM-kills it.
Each test also fails with the companion off (SCOPEMETER_COMPANION=0 in the
environment pytest runs under): no end, the run stays RUNNING, or no
companion was seen while the process ran.
"""
import os
import select
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import c_test_program, clean_env, have, is_root
from pyfront_util import SMALLEST_RING, new_run, python_env
from test_cgroup_real import MOUNTS, MiB, write
from test_composition_real import limited
from test_report import py_report

pytestmark = pytest.mark.timeout(240)

TRAIN = """
    import contextlib, os, sys, time, mlflow, scopemeter
    from scopemeter import _front
    mlflow.set_tracking_uri(sys.argv[1])
    mode = sys.argv[2]
    # a worker attaches through MLFLOW_RUN_ID (its launcher's run), else it opens the run
    opened = contextlib.nullcontext() if os.environ.get("MLFLOW_RUN_ID") else mlflow.start_run()
    with opened:
        ok = scopemeter.enable_system_metrics(interval=0.5)
        c = _front._current.companion if _front._current else None
        print("RUN", _front._current.run_id if _front._current else None, "ENABLED", ok,
              "COMPANION", c.pid if c else 0, flush=True)
        time.sleep(2)
        if mode == "oomtree":
            # a process of its group that outlives it, blocked on the test's FIFO;
            # let go, it puts itself first in the OOM order (a raise needs no
            # capability) and allocates past the limit: a kill after the parent's
            import subprocess
            child = subprocess.Popen([sys.executable, "-c", "import sys\\n"
                              "open(sys.argv[1]).read()\\n"
                              "with open('/proc/self/oom_score_adj', 'w') as f:\\n"
                              "    f.write('1000')\\n"
                              "b = b'x' * (600 << 20)\\n", os.environ["SM_TEST_FIFO"]],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
            print("CHILD", child.pid, flush=True)
            mode = "oom"
        if mode == "oom":
            chunks = []
            while True:                      # past the cgroup's limit: the kernel kills
                b = bytearray(16 << 20)
                for i in range(0, len(b), 4096):
                    b[i] = 1
                chunks.append(b)
        if mode == "oomchild":
            # a worker OOM-killed (the one large process), and the process that
            # started it gives up with exit 1 without its stop: `bash train.sh`
            # outliving python, as the companion sees it
            pid = os.fork()
            if pid == 0:
                with open("/proc/self/oom_score_adj", "w") as f:
                    f.write("1000")          # the kernel's first choice, whatever the sizes
                b = b"x" * (600 << 20)
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            print("CHILD", status, flush=True)
            os._exit(1)
        if mode == "fork":
            # a DataLoader-like worker: it inherits the pipe's write end and
            # outlives its parent, so the pipe sees no EOF at the death
            pid = os.fork()
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            print("WORKER", pid, flush=True)
            mode = "wait"
        if mode == "wait":
            print("WAITING", flush=True)
            time.sleep(120)
    print("DONE", flush=True)
"""


@pytest.fixture(params=["http", "sqlite"])
def store(request, tmp_path):
    if request.param == "http":
        return request.getfixturevalue("mlflow_server")
    return f"sqlite:///{tmp_path}/mlflow.db"


def start(tmp_path, uri, mode, preexec_fn=None, wrap=(), new_session=False, **env):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(TRAIN))
    return subprocess.Popen([*wrap, sys.executable, str(path), uri, mode], env=python_env(**env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=str(tmp_path), preexec_fn=preexec_fn,
                            start_new_session=new_session)


def no_swap(mem):
    """swappiness 0 where the kernel lets it: the allocation meets the limit, not swap."""
    try:
        write(f"{mem}/memory.swappiness", "0")
    except OSError:
        pass


def first_line(proc):
    line = proc.stdout.readline().split()
    assert line[:1] == ["RUN"], (line, proc.stderr.read() if proc.poll() is not None else "")
    assert line[3] == "True", line
    return line[1], int(line[5])


def alive(pid):
    """pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def oom_score_adj(pid):
    with open(f"/proc/{pid}/oom_score_adj") as f:
        return int(f.read())


def has_cap_sys_resource():
    """CAP_SYS_RESOURCE (24, linux/capability.h) in this process's effective set: a
    container's root may lack it (Docker's and this suite's sandbox drop it)."""
    with open("/proc/self/status") as f:
        eff = next(int(ln.split()[1], 16) for ln in f if ln.startswith("CapEff:"))
    return bool(eff >> 24 & 1)


def assert_below_its_job(comp, parent):
    """The companion's place in the OOM order of its job (cmd_companion.c, as scopemeter
    run): -999 where the kernel lets it (CAP_SYS_RESOURCE, inherited from the test), else
    its parent's value; the parent's own value untouched either way.  Set as it starts:
    its first moment may not have it yet."""
    before = oom_score_adj(parent)
    want = -999 if has_cap_sys_resource() else before
    deadline = time.monotonic() + 10
    while oom_score_adj(comp) != want and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (oom_score_adj(comp), oom_score_adj(parent)) == (want, before), \
        has_cap_sys_resource()


def get_run(uri, run_id):
    from mlflow.tracking import MlflowClient
    return MlflowClient(tracking_uri=uri).get_run(run_id)


def wait_ended(uri, run_id, bound=60):
    t0 = time.monotonic()
    while True:
        run = get_run(uri, run_id)
        if run.info.status != "RUNNING" or time.monotonic() - t0 > bound:
            return run, time.monotonic() - t0
        time.sleep(0.5)


def wait_gone(pid, bound=30):
    t0 = time.monotonic()
    while alive(pid) and time.monotonic() - t0 < bound:
        time.sleep(0.1)
    return not alive(pid)


def assert_left_alone(run, err):
    """A run whose recorder stopped cleanly: the monitor recorded, the
    companion wrote nothing and said nothing."""
    tags = run.data.tags
    assert "scopemeter.rank0.ended_by" not in tags and "scopemeter.end_reason" not in tags
    assert "scopemeter.rank0.cgroup" in tags  # the monitor itself recorded
    assert "companion" not in err, err[-2000:]


def assert_killed_by_sigkill(run, err):
    """The run a SIGKILLed rank 0 left, as its companion ends it."""
    tags = run.data.tags
    assert run.info.status == "KILLED", (run.info.status, err[-2000:])
    assert run.info.end_time
    assert tags["scopemeter.rank0.end_reason"] == "signal 9 (SIGKILL)", tags
    assert tags["scopemeter.rank0.ended_by"] == "companion", tags
    assert tags["scopemeter.end_reason"] == \
        "KILLED by scopemeter companion of rank 0: signal 9 (SIGKILL)", tags


@pytest.mark.parametrize("mode", ["wait", "fork"])
def test_kill9_marks_the_run_killed_with_the_signal(store, tmp_path, mode):
    """fork: a forked worker that outlives the parent holds the stop pipe's
    write end; the death is the pidfd's, not the pipe's EOF."""
    proc = start(tmp_path, store, mode)
    worker = 0
    try:
        run_id, comp = first_line(proc)
        assert comp and alive(comp), "no companion while the process runs"
        assert_below_its_job(comp, proc.pid)
        line = proc.stdout.readline().split()
        if mode == "oomchild":
            # a worker OOM-killed (the one large process), and the process that
            # started it gives up with exit 1 without its stop: `bash train.sh`
            # outliving python, as the companion sees it
            pid = os.fork()
            if pid == 0:
                with open("/proc/self/oom_score_adj", "w") as f:
                    f.write("1000")          # the kernel's first choice, whatever the sizes
                b = b"x" * (600 << 20)
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            print("CHILD", status, flush=True)
            os._exit(1)
        if mode == "fork":
            worker = int(line[1])
            line = proc.stdout.readline().split()
        assert line == ["WAITING"], line
        os.kill(proc.pid, signal.SIGKILL)
        # not reaped until the end is written: the exit status is the
        # zombie's (a parent that reaps at once leaves "unknown")
        run, took = wait_ended(store, run_id)
        proc.wait(30)
        if worker:
            assert alive(worker)  # it held the pipe through the end
            os.kill(worker, signal.SIGKILL)
            worker = 0
        err = proc.stderr.read()
        assert_killed_by_sigkill(run, err)
        assert wait_gone(comp), "the companion outlived its job"
    finally:
        if worker:
            os.kill(worker, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigterm_the_monitor_ends_itself_the_companion_ends_the_run(store, tmp_path):
    """The front's SIGTERM handler stops the monitor (its end tags), then the
    process dies of SIGTERM: no atexit, so MLflow would leave the run
    RUNNING.  The companion, told "ended", marks it KILLED and writes no
    tag of the rank."""
    proc = start(tmp_path, store, "wait")
    try:
        run_id, comp = first_line(proc)
        assert comp and alive(comp), "no companion while the process runs"
        assert proc.stdout.readline().strip() == "WAITING"
        os.kill(proc.pid, signal.SIGTERM)
        run, took = wait_ended(store, run_id)
        proc.wait(60)
        err = proc.stderr.read()
        assert proc.returncode == -signal.SIGTERM, (proc.returncode, err[-2000:])
        assert "logged " in err, err[-2000:]  # the monitor's own closing line
        tags = run.data.tags
        assert run.info.status == "KILLED", (run.info.status, err[-2000:])
        assert tags["scopemeter.end_reason"] == \
            "KILLED by scopemeter companion of rank 0: signal 15 (SIGTERM)", tags
        assert "scopemeter.rank0.ended_by" not in tags, tags
        assert wait_gone(comp), "the companion outlived its job"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_an_attached_worker_writes_its_rank_and_leaves_the_run(store, tmp_path):
    """MLFLOW_RUN_ID: the launcher owns the run's status; the companion of a
    killed worker writes only the rank's end."""
    run_id = new_run(store)
    proc = start(tmp_path, store, "wait", MLFLOW_RUN_ID=run_id)
    try:
        got, comp = first_line(proc)
        assert got == run_id and comp and alive(comp), (got, comp)
        assert proc.stdout.readline().strip() == "WAITING"
        os.kill(proc.pid, signal.SIGKILL)
        assert wait_gone(comp), "the companion outlived its job"
        proc.wait(30)
        run = get_run(store, run_id)
        tags = run.data.tags
        assert tags.get("scopemeter.rank0.ended_by") == "companion", tags
        assert tags["scopemeter.rank0.end_reason"] == "signal 9 (SIGKILL)", tags
        assert run.info.status == "RUNNING" and "scopemeter.end_reason" not in tags
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_clean_exit_leaves_nothing_running_and_the_run_to_mlflow(store, tmp_path):
    proc = start(tmp_path, store, "exit")
    try:
        run_id, comp = first_line(proc)
        assert comp and alive(comp), "no companion while the process runs"
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0 and "DONE" in out, err[-2000:]
        # the front reaped it at its stop: not even a zombie is left
        assert not os.path.exists(f"/proc/{comp}"), "the companion outlived a clean exit"
        run = get_run(store, run_id)
        assert run.info.status == "FINISHED"  # MLflow's own end of the with block
        assert_left_alone(run, err)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# A seccomp filter that answers pidfd_open (434) with ENOSYS, as a kernel
# before 5.3 does; inherited by the companion (the filter stays across fork
# and exec).  x86-64 and aarch64 share the number.
SPOOLING = r"""
import sys, time, mlflow, scopemeter
from scopemeter import _front
""" + SMALLEST_RING + r"""
mlflow.set_tracking_uri(sys.argv[1])
with mlflow.start_run() as r:
    ok = scopemeter.enable_system_metrics(interval=0.1)
    c = _front._current.companion if _front._current else None
    print("RUN", r.info.run_id, "ENABLED", ok, "COMPANION", c.pid if c else 0, flush=True)
    time.sleep(600)
"""


def test_kill9_mid_outage_the_companion_delivers_the_spool(mlflow_server, tmp_path):
    """An outage longer than the ring (the smallest, 256 points, at 0.1 s):
    the front spools; SIGKILL, and the server is back at once.  The
    companion delivers the dead process's spool files before the end, each
    file one line, exactly once (the store holds a contiguous prefix of
    every series, the spooled points added to what was delivered before the
    outage, the files gone), then ends the run KILLED."""
    import glob
    import re
    from faultproxy import FaultProxy
    from runread import assert_steps_contiguous, histories
    proxy = FaultProxy(mlflow_server)
    spool = tmp_path / "spool"
    path = tmp_path / "spooling.py"
    path.write_text(SPOOLING)
    proc = subprocess.Popen([sys.executable, str(path), proxy.uri],
                            env=python_env(SCOPEMETER_SPOOL_DIR=str(spool)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=str(tmp_path))
    try:
        run_id, comp = first_line(proc)
        assert comp and alive(comp), "no companion while the process runs"
        assert proxy.wait_for(lambda: any(r.status == 200 for r in proxy.log("runs/log-batch")),
                              60), proxy.log()
        proxy.down()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum(
                os.path.getsize(f) for f in glob.glob(str(spool / "*.spool"))) < 20000:
            time.sleep(0.2)
        files = glob.glob(str(spool / "*.spool"))
        assert files, "nothing spooled"
        before = sum(len(h) for h in histories(mlflow_server, run_id).values())
        os.kill(proc.pid, signal.SIGKILL)
        proxy.up()
        run, _ = wait_ended(mlflow_server, run_id)
        err = proc.communicate(timeout=120)[1]  # its stderr closes when the companion exits
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proxy.close()
    said = [ln for ln in err.splitlines() if "companion:" in ln and "points delivered" in ln]
    assert len(said) == len(files), err[-3000:]
    assert not glob.glob(str(spool / "*.spool")), err[-3000:]
    spooled = sum(int(re.search(r"(\d+) metrics", ln).group(1)) for ln in said)
    after = histories(mlflow_server, run_id)
    assert_steps_contiguous(after)  # the spool is what came after the delivered: no hole
    # A batch the server took while down() cut its answer was sent again
    # (spooled): the store keeps one copy (the steps above have no duplicate),
    # so it is in `before` and in `spooled` both.  Seen here: 860 spooled, 849
    # added, one 11-series window.
    again = sum(len(r.json().get("metrics", [])) for r in proxy.log("runs/log-batch")
                if r.reply_lost and r.status == 200)
    assert sum(len(h) for h in after.values()) - before == spooled - again > 0, (
        before, said, again)
    assert run.info.status == "KILLED", err[-3000:]
    assert run.data.tags["scopemeter.rank0.end_reason"] == "signal 9 (SIGKILL)"
    assert wait_gone(comp), "the companion outlived its job"


NO_PIDFD = r"""
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 434, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    if (argc < 2 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
        perror("seccomp");
        return 126;
    }
    execvp(argv[1], argv + 1);
    perror(argv[1]);
    return 127;
}
"""


@pytest.mark.skipif(not have("cc"), reason="needs a C compiler for the seccomp wrapper")
def test_without_pidfd_the_parent_is_watched_through_getppid(tmp_path):
    """ENOSYS from pidfd_open (a kernel before 5.3, made here with seccomp):
    the companion polls getppid() once a second and still ends the run."""
    src = tmp_path / "nopidfd.c"
    src.write_text(NO_PIDFD)
    wrap = str(tmp_path / "nopidfd")
    subprocess.run(["cc", "-o", wrap, str(src)], check=True, timeout=60)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    proc = start(tmp_path, uri, "wait", wrap=[wrap])
    try:
        run_id, comp = first_line(proc)
        assert comp and alive(comp), "no companion while the process runs"
        with open(f"/proc/{comp}/status") as f:
            assert "Seccomp:\t2" in f.read()  # the filter reached it
        assert proc.stdout.readline().strip() == "WAITING"
        os.kill(proc.pid, signal.SIGKILL)
        run, took = wait_ended(uri, run_id)
        proc.wait(30)
        tags = run.data.tags
        assert run.info.status == "KILLED", (run.info.status, proc.stderr.read()[-2000:])
        assert tags["scopemeter.rank0.end_reason"] == "signal 9 (SIGKILL)", tags
        assert wait_gone(comp), "the companion outlived its job"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.skipif(not is_root(), reason="needs root to create cgroups")
@pytest.mark.skipif("memory" not in MOUNTS,
                    reason="no cgroup v1 memory controller mounted (v2: tests/vm)")
def test_oom_kill_in_a_v1_cgroup_is_recorded_and_ends_the_run(store, tmp_path):
    cg, mem = limited("companion", 400 * MiB)
    proc = None
    try:
        no_swap(mem)
        proc = start(tmp_path, store, "oom", preexec_fn=cg.enter)
        run_id, comp = first_line(proc)
        assert comp and alive(comp), "no companion while the process runs"
        proc.wait(120)
        err = proc.stderr.read()
        assert proc.returncode == -signal.SIGKILL, (proc.returncode, err[-2000:])
        run, took = wait_ended(store, run_id)
        tags = run.data.tags
        assert run.info.status == "KILLED", (run.info.status, err[-2000:])
        assert tags["scopemeter.rank0.end_reason"] == "oom_kill", tags
        assert tags["scopemeter.rank0.oom_kill"] == "1", tags
        assert tags["scopemeter.rank0.ended_by"] == "companion", tags
        assert tags["scopemeter.end_reason"] == \
            "KILLED by scopemeter companion of rank 0: oom_kill", tags
        # the kernel's own peak: at the limit, the companion read it after the kill
        assert float(tags["scopemeter.rank0.memory_peak_mb"]) >= 0.95 * 400 * MiB / 1e6, tags
        assert "oom_kill=1" in tags["scopemeter.rank0.memory_events"], tags
        assert wait_gone(comp), "the companion outlived its job"
        # the report says who ended it and why (docs/report.md, `process_died`)
        rep = py_report(run_id, store, cwd=str(tmp_path))
        r0 = rep["ranks"][0]
        assert (r0["ended_by"], r0["end_reason"]) == ("companion", "oom_kill"), r0
        assert rep["end_reason"] == "KILLED by scopemeter companion of rank 0: oom_kill", rep
        assert "process_died" in r0["verdict_codes"] and \
            "oom_killed" in r0["verdict_codes"], r0["verdict_codes"]
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        cg.remove()


@pytest.mark.skipif(not is_root(), reason="needs root to create cgroups")
@pytest.mark.skipif("memory" not in MOUNTS,
                    reason="no cgroup v1 memory controller mounted (v2: tests/vm)")
def test_an_oom_kill_before_an_exit_1_ends_the_run_killed(mlflow_server, tmp_path):
    """Issue 46 item 6 on the companion: the cgroup counted an OOM kill, the
    process exited 1: end_reason oom_kill and KILLED, as scopemeter run says
    (test_oom_end.py).  Before: `exit 1, after 1 OOM kill in its cgroup`, FAILED."""
    cg, mem = limited("compchild", 400 * MiB)
    proc = None
    try:
        proc = start(tmp_path, mlflow_server, "oomchild", preexec_fn=cg.enter)
        run_id, comp = first_line(proc)
        proc.wait(120)
        out, err = proc.stdout.read(), proc.stderr.read()
        assert proc.returncode == 1 and "CHILD 9" in out, (proc.returncode, out, err[-2000:])
        run, _ = wait_ended(mlflow_server, run_id)
        tags = run.data.tags
        assert tags["scopemeter.rank0.end_reason"] == "oom_kill", tags
        assert run.info.status == "KILLED", (run.info.status, tags)
        assert tags["scopemeter.end_reason"] == \
            "KILLED by scopemeter companion of rank 0: oom_kill", tags
        assert tags["scopemeter.rank0.oom_kill"] == "1", tags
        assert wait_gone(comp), "the companion outlived its job"
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        cg.remove()


@pytest.mark.skipif(not is_root(), reason="needs root to create cgroups")
@pytest.mark.skipif("memory" not in MOUNTS,
                    reason="no cgroup v1 memory controller mounted (v2: tests/vm)")
def test_oom_kill_counts_the_kills_of_the_tree_after_the_parent(mlflow_server, tmp_path):
    """Issue 46 item 2 on the companion: the front is OOM-killed, then a
    process of its group allocates past the limit and is killed in turn; the end's
    oom_kill is the cgroup's count over the whole run (the test's own
    counter), read once the parent's tree is gone.  No timing: the child is
    let go only once the companion has said what it does at the death (the
    old one: the end written, with the one kill it had seen; the new one:
    waiting for the group).  Before: oom_kill=1 with 2 kills counted."""
    from test_oom_order import oom_kills  # it imports this module
    cg, mem = limited("comptree", 400 * MiB)
    fifo = str(tmp_path / "go")
    os.mkfifo(fifo)
    proc = None
    try:
        no_swap(mem)
        k0 = oom_kills(mem)
        # a session of its own: its group is its tree's, not pytest's
        proc = start(tmp_path, mlflow_server, "oomtree", preexec_fn=cg.enter, new_session=True,
                     SM_TEST_FIFO=fifo)
        run_id, comp = first_line(proc)
        child = int(proc.stdout.readline().split()[1])
        gone = os.pidfd_open(child)  # readable once it has exited
        proc.wait(120)
        assert proc.returncode == -signal.SIGKILL, proc.returncode
        lines = []
        for line in proc.stderr:  # the companion's lines: it holds the pipe
            lines.append(line)
            if "ended without a stop" in line or "before reading the end" in line:
                break
        assert lines, "the companion said nothing"
        with open(fifo, "w"):
            pass  # the child goes on: it allocates and is killed
        select.select([gone], [], [])  # the test's timeout guards a hang
        os.close(gone)
        assert not alive(child), "the child outlived its allocation"
        err = "".join(lines) + proc.stderr.read()  # EOF: the companion is gone
        kills = oom_kills(mem) - k0
        assert kills >= 2, (kills, err[-2000:])  # the parent, then the child
        run, _ = wait_ended(mlflow_server, run_id)
        tags = run.data.tags
        assert tags["scopemeter.rank0.oom_kill"] == str(kills), (tags, kills, err[-2000:])
        assert f"oom_kill={kills}" in tags["scopemeter.rank0.memory_events"], tags
        assert tags["scopemeter.rank0.end_reason"] == "oom_kill", tags
        assert run.info.status == "KILLED", run.info.status
        assert "waiting up to" in err and "process left of its group" in err, err[-2000:]
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        cg.remove()


# ---- the C API's companion (sm_monitor_set_companion, docs/monitor.md) ----------------

def companions_of(pid):
    """Pids of the `scopemeter companion` children of pid."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and argv[1:2] == [b"companion"]:
            found.append(int(d))
    return found


def pipe_ends_held(pid, pipe):
    """The descriptors of pid that are an end of pipe ("pipe:[inode]")."""
    held = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == pipe:
                held.append(int(fd))
        except OSError:
            pass
    return held


def start_capi(scopemeter_bin, uri, mode, *extra):
    """The C program started as a launcher starts a worker: with a pipe's write
    end it did not open O_CLOEXEC (a launcher's output pipe).  Its companion
    must not keep it: the launcher's EOF would wait for the companion."""
    exe = c_test_program(scopemeter_bin, "tools/capi_companion")
    r, w = os.pipe()
    pipe = os.readlink(f"/proc/self/fd/{r}")
    try:
        proc = subprocess.Popen([exe, uri, scopemeter_bin, mode, *extra], env=clean_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                pass_fds=(w,))
    finally:
        os.close(w)
        os.close(r)
    line = proc.stdout.readline().split()
    assert line[:1] == ["RUN"], (line, proc.stderr.read() if proc.poll() is not None else "")
    run_id = line[1]
    line = proc.stdout.readline().split()
    assert line == ["RECORDING"], (line, proc.stderr.read() if proc.poll() is not None else "")
    comps = companions_of(proc.pid)  # started in sm_monitor_start, before it returned
    assert len(comps) == 1 and alive(comps[0]), "no companion while the C program records"
    assert pipe_ends_held(proc.pid, pipe) == [w]  # the program holds it, as given
    # the companion closes what it inherited beyond stdio as it starts
    # (cmd_companion.c, close_inherited): its first moment may still hold it
    deadline = time.monotonic() + 10
    while pipe_ends_held(comps[0], pipe) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pipe_ends_held(comps[0], pipe) == [], "the companion kept the caller's pipe"
    assert_below_its_job(comps[0], proc.pid)
    return proc, run_id, comps[0]


def test_capi_kill9_the_companion_ends_the_run(mlflow_server, tmp_path, scopemeter_bin):
    """A native program that set the companion and created its run is
    SIGKILLed: its companion writes the rank's end and marks the run KILLED."""
    proc, run_id, comp = start_capi(scopemeter_bin, mlflow_server, "wait")
    try:
        time.sleep(1.5)  # a window or two recorded
        os.kill(proc.pid, signal.SIGKILL)
        run, took = wait_ended(mlflow_server, run_id)
        proc.wait(30)
        err = proc.stderr.read()
        assert_killed_by_sigkill(run, err)
        assert "scopemeter.rank0.cgroup" in run.data.tags  # the monitor itself recorded
        assert wait_gone(comp), "the companion outlived its job"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_capi_clean_stop_reaps_the_companion_and_leaves_the_run(mlflow_server, tmp_path,
                                                               scopemeter_bin):
    """sm_monitor_stop tells the companion and reaps it while the program
    lives; the program then exits without ending its run, which stays as it
    left it (RUNNING: a companion not told would have ended it FINISHED)."""
    proc, run_id, comp = start_capi(scopemeter_bin, mlflow_server, "stop")
    try:
        line = proc.stdout.readline().split()
        assert line == ["STOPPED", "0"], (line, proc.stderr.read())
        # reaped by the stop, the program still alive: not even a zombie
        assert not os.path.exists(f"/proc/{comp}"), "the companion outlived sm_monitor_stop"
        assert companions_of(proc.pid) == []
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and "DONE" in out, err[-2000:]
        time.sleep(2)  # a companion left behind would end the run within this
        run = get_run(mlflow_server, run_id)
        assert run.info.status == "RUNNING", run.info.status
        assert_left_alone(run, err)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---- behind a gateway that asks for a header ------------------------------------------

GATEWAY = ("X-Gateway-Key", "k-2026")

# an MLflow request-header provider, as a plugin package installs one (its
# entry point in the group MLflow's registry reads at import)
PROVIDER = """
from mlflow.tracking.request_header.abstract_request_header_provider import \\
    RequestHeaderProvider


class Gateway(RequestHeaderProvider):
    def in_context(self):
        return True

    def request_headers(self):
        return {"%s": "%s"}
""" % GATEWAY


def gateway(mlflow_server):
    from faultproxy import FaultProxy
    proxy = FaultProxy(mlflow_server)
    proxy.require = GATEWAY
    return proxy


def refused(proxy):
    return [r for r in proxy.requests if r.fault == "unauthenticated"]


def kill9_through(proxy, mlflow_server, proc, run_id, comp):
    """SIGKILL of the recording process; its companion must end the run through
    the gateway: KILLED, gone, no request refused, the run's end among them."""
    try:
        time.sleep(1.5)
        os.kill(proc.pid, signal.SIGKILL)
        run, took = wait_ended(mlflow_server, run_id)
        proc.wait(30)
        assert_killed_by_sigkill(run, proc.stderr.read())
        assert wait_gone(comp), "the companion outlived its job"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not refused(proxy), refused(proxy)
    ends = [r for r in proxy.requests if r.path.endswith("runs/update")]
    assert ends and all(r.status == 200 for r in ends), ends


def test_capi_companion_carries_the_headers_of_sm_monitor_set_headers(mlflow_server,
                                                                       scopemeter_bin):
    """A gateway in front of the server refuses a request without its header.
    The C program gives it to its sink with sm_monitor_set_headers only; when
    the program is SIGKILLed, its companion's end goes through the same gateway
    and must carry it (companion.c passes it in SCOPEMETER_HTTP_HEADERS):
    without, every request of the end was refused and the run stayed RUNNING."""
    proxy = gateway(mlflow_server)
    try:
        proc, run_id, comp = start_capi(scopemeter_bin, proxy.uri, "wait", "%s=%s" % GATEWAY)
        kill9_through(proxy, mlflow_server, proc, run_id, comp)
    finally:
        proxy.close()


def test_front_companion_carries_mlflows_request_headers(mlflow_server, tmp_path):
    """The Python front ships with the headers MLflow's request-header providers
    give (a plugin's, here the gateway's); its companion, a process of its own,
    gets them in SCOPEMETER_HTTP_HEADERS and ends the SIGKILLed run through the
    gateway."""
    plugin = tmp_path / "plugin"
    info = plugin / "sm_gateway_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (plugin / "sm_gateway_plugin.py").write_text(textwrap.dedent(PROVIDER))
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sm-gateway-plugin\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[mlflow.request_header_provider]\ngateway = sm_gateway_plugin:Gateway\n")
    proxy = gateway(mlflow_server)
    try:
        proc = start(tmp_path, proxy.uri, "wait", PYTHONPATH=str(plugin))
        run_id, comp = first_line(proc)
        assert comp and alive(comp)
        kill9_through(proxy, mlflow_server, proc, run_id, comp)
        batches = [r for r in proxy.requests if r.path.endswith("runs/log-batch")]
        assert batches and all(r.status == 200 for r in batches), batches  # the sink's own
    finally:
        proxy.close()
