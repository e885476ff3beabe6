"""scopemeter run is not the OOM killer's choice, even without
CAP_SYS_RESOURCE, and outlives a cgroup CMD leaves full (issue 32, item 2;
docs/cgroup.md §7): the reproduction as a new user in a Kubernetes pod meets
it, on this host's real cgroup v1 memory controller, against a real MLflow
server.

`scopemeter run --interval 1 -- sh -c 'sleep 3; head -c 400M /dev/zero >
/dev/shm/big; sleep 2'` in a 300 MiB cgroup, CAP_SYS_RESOURCE dropped with
setpriv (from the bounding set too, as a container runtime does).  The file
is memory of no process: when it fills the cgroup the kernel ranks the live
processes by their own size, and scopemeter (a few MB) outweighs sh, head and
sleep.  Before the fix the kernel killed scopemeter, the run stayed RUNNING
without an oom_kill tag.  Now scopemeter, unable to lower its own
oom_score_adj, raises CMD's (said in one line).  And the file stays: once
CMD's last process is gone the recorder is the only process left in a full
cgroup, and its next page would kill it; its reserve process (`scopemeter
reserve`) is what the kernel takes then.  The recorder survives: its closing
line, the oom_kill tag, the run ended.

/dev/shm here is the host's tmpfs: the job gets a private tmpfs on /dev/shm
in a mount namespace of its own (unshare -m), so the 400 MB are charged to
the test's cgroup and are freed when the namespace's last process exits.
The recorder runs from a fresh copy of the binary whose page cache was
dropped, as in a pod whose image is read for the first time: its code is
read into, and charged to, the job's cgroup, and the fill evicts it, so the
run's end reads it back into a full cgroup (from the suite's binary, cached
by earlier tests in the root cgroup, it never has to).
"""
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from conftest import clean_env, is_root
from runread import get_run, scratch_cwd, tags_of
from test_cgroup_real import MOUNTS, MiB, read
from test_companion import oom_score_adj as adj
from test_composition_real import limited
from test_plan import plan_json

pytestmark = [
    pytest.mark.skipif(not is_root(), reason="needs root to create cgroups"),
    pytest.mark.skipif("memory" not in MOUNTS,
                       reason="no cgroup v1 memory controller mounted (v2: tests/vm)"),
    pytest.mark.skipif(not (shutil.which("setpriv") and shutil.which("unshare")),
                       reason="needs util-linux's setpriv and unshare"),
    pytest.mark.timeout(180),
]

JOB = "sleep 3; head -c 400M /dev/zero > /dev/shm/big; sleep 2"
NOCAP = ["setpriv", "--inh-caps=-sys_resource", "--bounding-set=-sys_resource", "--"]


def oom_kills(mem):
    return int(dict(ln.split() for ln in read(f"{mem}/memory.oom_control")
                    .splitlines()).get("oom_kill", "0"))


def fresh_copy(binary, where):
    """The binary at a new path with no page cache: its pages are read, and
    charged, by the first process that runs it (a pod's first start)."""
    path = os.path.join(where, "scopemeter")
    shutil.copy(binary, path)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return path


def shm_fill_once(binary, mlflow_server):
    """The reproduction, once; the file is left in /dev/shm as the user's job
    leaves it.  Returns whether the kernel took the recorder's reserve."""
    cg, mem = limited("oomorder", 300 * MiB)
    try:
        k0 = oom_kills(mem)
        # the private tmpfs, then the user's command line without the capability
        script = 'mount -t tmpfs -o size=1g tmpfs /dev/shm && exec "$@"'
        argv = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh",
                *NOCAP, binary, "run", "--interval", "1", "--", "sh", "-c", JOB]
        p = subprocess.run(argv, env=clean_env(MLFLOW_TRACKING_URI=mlflow_server),
                           capture_output=True, text=True, preexec_fn=cg.enter, timeout=150,
                           **scratch_cwd({}))
        err = p.stderr
        kills = oom_kills(mem) - k0
        assert kills >= 1, (kills, p.returncode, err[-2000:])  # the kernel did OOM-kill
        m = re.search(r"created run ([0-9a-f]+)", err)
        assert m, err[-2000:]
        # it survived: its closing line, and it exited with CMD's status, not
        # as a SIGKILLed process (137 is also what an OOM-killed sh gives,
        # so the closing line is the proof)
        assert re.search(r"logged \d+ windows?", err), (p.returncode, err[-2000:])
        # scopemeter could not protect itself and said what it did instead, once
        said = [ln for ln in err.splitlines() if "oom_score_adj" in ln]
        assert len(said) == 1 and "CAP_SYS_RESOURCE" in said[0], err[-2000:]
        # the raise itself was made (not the line that says nothing could be)
        assert "CMD runs at oom_score_adj" in said[0] and "instead, so that" in said[0], said
        run = get_run(mlflow_server, m.group(1))
        tags = tags_of(run)
        # the kills up to the recorder's stop: 1 <= tag <= what the cgroup counted by the
        # time the test reads it (CI, 2026-12-04, under load: the tag 1, the counter 2;
        # which kill came after the recorder's last read is not known yet)
        assert 1 <= int(tags["scopemeter.rank0.oom_kill"]) <= kills, (tags, kills)
        assert run["info"]["status"] != "RUNNING", run["info"]
        assert run["info"]["end_time"], run["info"]
        taken = "recorder's reserve" in err and "was SIGKILLed" in err
        # when the kernel took the reserve, the run says so: that kill is not CMD's
        assert taken == ("scopemeter.rank0.oom_reserve_taken" in tags), (err[-1500:], tags)
        return taken
    finally:
        cg.remove()


def test_without_cap_sys_resource_the_recorder_survives_the_shm_fill(scopemeter_bin,
                                                                      mlflow_server, tmp_path):
    # Three times: whether the end needs more than the victims freed is the
    # kernel's reclaim and timing; without the reserve the recorder died in 2 of
    # 12 runs here (2026-12-06), every one of them with the file left.
    binary = fresh_copy(scopemeter_bin, str(tmp_path))
    taken = [shm_fill_once(binary, mlflow_server) for _ in range(3)]
    print(f"the kernel took the reserve in {sum(taken)} of {len(taken)} runs")


@pytest.mark.timeout(120)
def test_the_reserve_sits_between_cmd_and_the_recorder(scopemeter_bin, mlflow_server):
    """The reserve, checked against the kernel's own ranking (/proc/PID/oom_score and
    what mm/oom_kill.c's oom_badness adds in a memory cgroup's OOM: rss + page
    tables + swap + oom_score_adj thousandths of the limit): a child of the
    recorder whose oom_score_adj sits between the recorder's and CMD's, ranked
    above the recorder by enough that the recorder may grow by 2 MB and still
    go after it (a v2 guest saw the recorder at 4.4 MB taken instead of a
    reserve sized at its start, at the same value), and below a process of
    CMD with no memory by as much; a SIGKILL of it is said and tagged; it never
    outlives the recorder; and there is none without a limit."""
    cg, mem = limited("oomres", 300 * MiB)
    try:
        argv = [*NOCAP, scopemeter_bin, "run", "--interval", "1", "--", "sleep", "30"]
        proc = subprocess.Popen(argv, env=clean_env(MLFLOW_TRACKING_URI=mlflow_server),
                                stderr=subprocess.PIPE, text=True, preexec_fn=cg.enter,
                                **scratch_cwd({}))
        try:
            kids = {}
            deadline = time.monotonic() + 30
            while len(kids) < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
                kids = {}
                for pid in children(proc.pid):
                    kids[comm(pid)] = pid
            assert set(kids) == {"sm-reserve", "sleep"}, kids
            me, res, cmd = proc.pid, kids["sm-reserve"], kids["sleep"]
            assert adj(me) < adj(res) < adj(cmd), (adj(me), adj(res), adj(cmd))
            # its memory is the recorder's resident size when CMD started
            assert rss_kb(res, "RssAnon") >= 0.9 * rss_kb(me, "VmRSS"), (rss_kb(res, "RssAnon"),
                                                                          rss_kb(me, "VmRSS"))
            # the kernel's ranking: /proc's oom_score is in thousandths of the node's
            # memory, too coarse for MBs, so the sizes it adds up are compared too
            # (oom_badness: rss + page tables + swap)
            assert score(cmd) > score(res) >= score(me), (score(cmd), score(res), score(me))
            point = 300 * MiB / 1000  # one oom_score_adj point in this cgroup's OOM

            def badness(pid, kb=None):
                return (size_kb(pid) if kb is None else kb) * 1024 + adj(pid) * point

            cushion = badness(res) - badness(me)
            margin = badness(cmd, kb=0) - badness(res)
            assert cushion >= 2e6 and margin >= 2e6, (cushion, margin, adj(me), adj(res),
                                                      adj(cmd), size_kb(me), size_kb(res))
            # and the two together sit within what plan counts for scopemeter run
            # (its own anonymous memory is what it adds: its file pages are ours)
            counted = plan_json(scopemeter_bin, "--workers", "1")["pod_memory_cli_mb"]
            both = (rss_kb(me, "VmRSS") + rss_kb(res, "RssAnon")) * 1024 / 1e6
            assert both <= counted, (both, counted)
            os.kill(res, signal.SIGKILL)  # what the kernel does when nothing of CMD is left
            os.kill(cmd, signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        said = [ln for ln in err.splitlines() if "recorder's reserve" in ln]
        assert len(said) == 1 and "was SIGKILLed" in said[0], err[-2000:]
        m = re.search(r"created run ([0-9a-f]+)", err)
        tags = tags_of(get_run(mlflow_server, m.group(1)))
        assert float(tags["scopemeter.rank0.oom_reserve_taken"]) > 0, tags
        # the recorder SIGKILLed: its reserve goes with it (PR_SET_PDEATHSIG)
        proc = subprocess.Popen([scopemeter_bin, "run", "--", "sleep", "30"],
                                env=clean_env(), stderr=subprocess.DEVNULL,
                                preexec_fn=cg.enter, **scratch_cwd({}))
        res = None
        deadline = time.monotonic() + 30
        while res is None and time.monotonic() < deadline:
            time.sleep(0.1)
            res = next((p for p in children(proc.pid) if comm(p) == "sm-reserve"), None)
        proc.kill()
        proc.wait()
        assert res is not None
        gone_by = time.monotonic() + 10
        while os.path.exists(f"/proc/{res}") and time.monotonic() < gone_by:
            time.sleep(0.05)
        assert not os.path.exists(f"/proc/{res}"), res
    finally:
        cg.remove()
    # no memory limit: no reserve (a node OOM ranks the whole node)
    probe = subprocess.run([scopemeter_bin, "probe"], capture_output=True, text=True,
                           env=clean_env(), timeout=60)
    if "no memory limit" not in probe.stdout + probe.stderr:
        return  # this suite itself runs under a limit: every run here has one
    proc = subprocess.Popen([scopemeter_bin, "run", "--", "sleep", "3"], env=clean_env(),
                            stderr=subprocess.DEVNULL, **scratch_cwd({}))
    try:
        time.sleep(1.5)
        assert [comm(p) for p in children(proc.pid)] == ["sleep"]
    finally:
        proc.wait(timeout=30)


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def comm(pid):
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()


def score(pid):
    with open(f"/proc/{pid}/oom_score") as f:
        return int(f.read())


def size_kb(pid):
    return sum(rss_kb(pid, key) for key in ("VmRSS", "VmPTE", "VmSwap"))


def rss_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith(key + ":"))
