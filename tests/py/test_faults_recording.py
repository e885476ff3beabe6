"""Faults while recording, end to end under `scopemeter run` (docs/design.md §6, docs/rest.md),
each with an exact assertion on what landed in a real `mlflow server`, read
back through MLflow's REST API (metrics/get-history per key, runread.py):

- the server process restarted mid-run on the same port and sqlite file:
  points resume, none lost (every key 0..W-1, W = the windows the process
  says it logged);
- the server's disk full (a real tmpfs holding the sqlite file, filled up):
  MLflow answers 503 "database or disk is full"; the sink retries; with a
  small buffer the oldest points go, and what is missing from the run is
  exactly what the process said it dropped;
- the process's cgroup removed mid-run (a real v1 memory cgroup with a
  limit; its processes moved out first, as a runtime does): one line, the
  container_* series stop, the others go on to the end;
- `scopemeter run` killed with SIGKILL: what was shipped stays, the run reads
  back, every history is a contiguous prefix, CMD died with it;
- a file that vanishes and comes back (SCOPEMETER_SYSROOT copy whose
  proc/net/dev is emptied, then refilled): network_* have a gap then
  resume, with one warning line and one "recovered" line.

The server-side faults in tests/py/test_rest_faults.py (proxy down/up, 500s,
429, never answering, 400) are not repeated here; the cgroup collector alone
is covered by test_cgroup_real.py.  Every wait is for an event (a line, a
request, a point landing), not a fixed time.
"""
import errno
import os
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest

from conftest import FIXTURES, clean_env, free_port, is_root, start_mlflow_server, \
    stop_mlflow_server
from faultproxy import FaultProxy
from pyfront_util import disk_here
from runread import (assert_steps_contiguous, assert_window_steps, every_window, get_run,
                     histories, new_run, rest, RATE_KEY)

LOG_BATCH = "runs/log-batch"
SUMMARY = re.compile(r"logged (\d+) windows? \((\d+) points?, (\d+) tags?\): (\d+) delivered, "
                     r"(\d+) dropped \(buffer full\), (\d+) refused, (\d+) undelivered at stop")


class Lines:
    """A command in the background whose stdout and stderr lines are
    collected as they come, so a test can wait for an event.  env is the
    whole environment."""

    def __init__(self, argv, env, preexec_fn=None, cwd=None):
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True,
                                     preexec_fn=preexec_fn, cwd=cwd)
        self.lines = []
        self.out = []
        self._t = [threading.Thread(target=self._read, args=(self.proc.stderr, self.lines),
                                    daemon=True),
                   threading.Thread(target=self._read, args=(self.proc.stdout, self.out),
                                    daemon=True)]
        for t in self._t:
            t.start()

    @staticmethod
    def _read(stream, sink):
        for line in stream:
            sink.append(line.rstrip("\n"))

    def wait_line(self, pattern, timeout=60, stdout=False):
        """The first stderr (or stdout) line matching pattern, waiting for it."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.out if stdout else self.lines):
                if rx.search(line):
                    return line
            if self.proc.poll() is not None and not any(t.is_alive() for t in self._t):
                break
            time.sleep(0.05)
        raise AssertionError(f"no line matching {pattern!r}:\n" + "\n".join(self.lines))

    def finish(self, timeout=120):
        rc = self.proc.wait(timeout=timeout)
        for t in self._t:
            t.join(10)
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def matching(self, text):
        return [line for line in self.lines if text in line]

    def summary(self):
        found = [SUMMARY.search(line) for line in self.lines]
        found = [m for m in found if m]
        assert len(found) == 1, self.lines
        # (windows, points, dropped): dropped = lost to a full buffer or
        # refused; the closing line accounts for every record
        w, p, t, delivered, overflow, refused, undelivered = (int(g) for g in found[0].groups())
        assert delivered + overflow + refused + undelivered == p + t, self.lines
        return w, p, overflow + refused


def run_bg(binary, args, env, preexec_fn=None, cwd=None):
    """`scopemeter run ARGS` in the background (a clean environment plus env)."""
    return Lines([binary, "run", *args], clean_env(**env), preexec_fn=preexec_fn, cwd=cwd)


def until_file(path):
    """A CMD that runs until the test creates `path`: the test, not a timer,
    decides when the run ends."""
    return ["sh", "-c", f'while [ ! -e "{path}" ]; do sleep 0.05; done']


def wait_for(pred, timeout=60, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def landed_steps(uri, run_id):
    """Windows that landed, by the first key's history (0 when none)."""
    try:
        run = get_run(uri, run_id)
    except OSError:
        return 0
    keys = [m["key"] for m in run["data"].get("metrics", [])]
    if not keys:
        return 0
    r = rest(uri, "metrics/get-history", params={"run_id": run_id, "metric_key": keys[0]})
    return len(r.get("metrics", []))


def only_scopemeter_lines(lines):
    """Every line on stderr is one scopemeter line (CMD prints nothing here):
    no message spilled over a second line."""
    assert lines and all(line.startswith("scopemeter: ") for line in lines), lines


# ---- a. the server restarted mid-run ------------------------------------------------

def test_server_restarted_mid_run_points_resume_none_lost(scopemeter_bin, tmp_path):
    port = free_port()
    server, uri = start_mlflow_server(str(tmp_path), port=port)
    done = tmp_path / "done"
    cli = None
    try:
        cli = run_bg(scopemeter_bin, ["--interval", "0.5", "--", *until_file(done)],
                      env={"MLFLOW_TRACKING_URI": uri})
        run_id = re.search(r"created run (\w+)", cli.wait_line("created run")).group(1)
        wait_for(lambda: landed_steps(uri, run_id) >= 2, what="two windows landed")
        down_ms = int(time.time() * 1000)
        stop_mlflow_server(server)  # the process ends: its sqlite file stays
        cli.wait_line("cannot deliver to MLflow")
        server, uri2 = start_mlflow_server(str(tmp_path), port=port)  # same port, same file
        up_ms = int(time.time() * 1000)
        assert uri2 == uri
        cli.wait_line("reachable again", timeout=120)
        n = landed_steps(uri, run_id)
        wait_for(lambda: landed_steps(uri, run_id) >= n + 2, what="two windows after restart")
        done.touch()
        assert cli.finish() == 0, cli.lines
        only_scopemeter_lines(cli.lines)
        assert len(cli.matching("cannot deliver to MLflow")) == 1, cli.lines
        back = cli.matching("reachable again")
        assert len(back) == 1 and "no point lost" in back[0], cli.lines
        windows, points, dropped = cli.summary()
        assert dropped == 0

        hist = histories(uri, run_id)
        counts = assert_steps_contiguous(hist)  # every key: 0..W-1 once, in order
        assert every_window(counts) == windows, (counts, windows)
        assert sum(counts.values()) == points
        # some of them were produced while the server was down: buffered,
        # then delivered after the restart
        during = {s for pts in hist.values() for s, ts, _ in pts if down_ms <= ts <= up_ms}
        assert during, (down_ms, up_ms)
        assert get_run(uri, run_id)["info"]["status"] == "FINISHED"
    finally:
        if cli:
            done.touch()
            cli.kill()
        stop_mlflow_server(server)


# ---- b. the server's disk full --------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """A 32 MiB tmpfs: the sqlite file of the server lives there."""
    if not is_root():
        pytest.skip("needs root to mount a tmpfs")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m,mode=0755", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(directory):
    """Writes a file until the filesystem is full; returns its path."""
    path = os.path.join(directory, "filler")
    chunk = b"\0" * (1 << 20)
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
    return path


def test_disk_full_is_retried_and_what_was_lost_is_counted(scopemeter_bin, tmp_path, small_disk):
    server, uri = start_mlflow_server(str(tmp_path), db=str(small_disk / "mlflow.db"))
    proxy = FaultProxy(uri)  # passes everything through; records the statuses
    done = tmp_path / "done"
    cli = None
    try:
        # 8 series every 0.1 s into a 256-point buffer: ~3 s of points; the
        # ring alone (no spool: test_spool.py has it), whose count is checked
        cli = run_bg(scopemeter_bin, ["--interval", "0.1", "--buffer-points", "256", "--",
                                       *until_file(done)],
                      env={"MLFLOW_TRACKING_URI": proxy.uri, "SCOPEMETER_SPOOL_MAX_MB": "0"})
        run_id = re.search(r"created run (\w+)", cli.wait_line("created run")).group(1)
        wait_for(lambda: sum(r.status == 200 for r in proxy.log(LOG_BATCH)) >= 3,
                 what="three batches accepted")
        filler = fill(str(small_disk))
        full = cli.wait_line("cannot deliver to MLflow")
        cli.wait_line("full while MLflow is unreachable", timeout=60)  # the buffer overflowed
        os.unlink(filler)
        back = cli.wait_line("reachable again", timeout=120)
        done.touch()
        assert cli.finish() == 0, cli.lines
        only_scopemeter_lines(cli.lines)

        # the real server said why, in one line: 5xx, "disk is full"
        assert re.search(r"HTTP 5\d\d", full) and "disk is full" in full, full
        statuses = [r.status for r in proxy.log(LOG_BATCH)]
        first_bad = next(i for i, s in enumerate(statuses) if s >= 500)
        assert 200 in statuses[first_bad:], statuses  # retried until it was taken
        assert statuses[-1] == 200, statuses

        # what was lost: said when the server came back, and at stop
        lost_now = int(re.search(r"(\d+) oldest points were dropped", back).group(1))
        windows, points, dropped = cli.summary()
        assert dropped == lost_now > 0, (dropped, lost_now)
        assert len(cli.matching(f"{dropped} points dropped during the run")) == 1, cli.lines

        # ... and it is exactly what is missing from the run
        hist = histories(uri, run_id)
        landed = sum(len(p) for p in hist.values())
        assert landed == points - dropped, (landed, points, dropped)
        missing = 0
        for key, pts in hist.items():
            steps = [s for s, _, _ in pts]
            assert steps == sorted(set(steps)), key  # order kept, no duplicates
            # a rate may lack the final window (runread.RATE_KEY): never taken,
            # so neither sent nor dropped
            last = windows - (2 if RATE_KEY.search(key) and steps[-1] == windows - 2 else 1)
            assert steps[0] == 0 and steps[-1] == last, (key, steps[-3:], windows)
            holes = [(a, b) for a, b in zip(steps, steps[1:]) if b - a > 1]
            assert len(holes) == 1, (key, holes)  # the oldest points of the outage went
            missing += last + 1 - len(steps)
        assert missing == dropped, (missing, dropped)
        assert get_run(uri, run_id)["info"]["status"] == "FINISHED"
    finally:
        if cli:
            done.touch()
            cli.kill()
        proxy.close()
        stop_mlflow_server(server)


# ---- c. the process's cgroup removed mid-run ---------------------------------------------

def test_cgroup_removed_mid_run_container_series_stop_others_go_on(scopemeter_bin,
                                                                    mlflow_server, tmp_path):
    import test_cgroup_real as real
    if not is_root() or "memory" not in real.MOUNTS:
        pytest.skip("needs root and a cgroup v1 memory controller")
    cg = real.Cgroups("runrm")
    cg.dirs = {"memory": cg.dirs["memory"]}
    done = tmp_path / "done"
    cli = None
    try:
        cg.create()
        mem = cg.dirs["memory"]
        real.write(f"{mem}/memory.limit_in_bytes", str(256 * real.MiB))
        run_id = new_run(mlflow_server)
        # scopemeter and its CMD start inside the limited cgroup
        cli = run_bg(scopemeter_bin, ["--run-id", run_id, "--interval", "0.3", "--",
                                       *until_file(done)],
                      env={"MLFLOW_TRACKING_URI": mlflow_server}, preexec_fn=cg.enter)
        cli.wait_line("collecting")
        wait_for(lambda: landed_steps(mlflow_server, run_id) >= 3, what="three windows")
        # what a runtime does: move the processes out, then remove the cgroup
        cg.remove()
        assert not os.path.exists(mem)
        gone = cli.wait_line(r"container: .*memory\.")
        n = landed_steps(mlflow_server, run_id)
        wait_for(lambda: landed_steps(mlflow_server, run_id) >= n + 3,
                 what="three windows after the removal")
        done.touch()
        assert cli.finish() == 0, cli.lines
        only_scopemeter_lines(cli.lines)

        assert mem in gone and "skipped until it recovers" in gone, gone
        assert len(cli.matching("container:")) == 1, cli.lines  # one line, no recovery
        windows, points, dropped = cli.summary()
        assert dropped == 0
        hist = histories(mlflow_server, run_id)
        # the disk series read the process's own blkio cgroup here (not the
        # removed memory cgroup): they go on with the others
        ctr = {k for k in hist if "/container_" in k and "/container_disk_" not in k}
        assert ctr == {"system/container_memory_usage_megabytes/rank0",
                       "system/container_memory_usage_percentage/rank0",
                       "system/container_memory_anon_megabytes/rank0",
                       "system/container_memory_shmem_megabytes/rank0",
                       "system/container_memory_file_active_megabytes/rank0",
                       "system/container_memory_kernel_megabytes/rank0"}, sorted(hist)
        rest_keys = set(hist) - ctr
        # node 3, rootfs 3, network 2, process 3, disk 2 where blkio/io can be read
        assert len(rest_keys) == 11 + 2 * disk_here(), sorted(hist)
        # the others go on: every window, 0..W-1
        for k in rest_keys:
            assert_window_steps(k, [s for s, _, _ in hist[k]], windows)
        # the container series stop: a contiguous prefix 0..k, then nothing
        stops = set()
        for k in ctr:
            steps = [s for s, _, _ in hist[k]]
            assert steps == list(range(len(steps))), (k, steps)
            stops.add(len(steps))
        assert len(stops) == 1, stops
        stop = stops.pop()
        assert 3 <= stop <= windows - 3, (stop, windows)
        assert sum(len(p) for p in hist.values()) == points
        # the limit was real while it lasted
        tags = {t["key"]: t["value"] for t in get_run(mlflow_server, run_id)["data"]["tags"]}
        assert tags["scopemeter.rank0.cgroup"] == f"v1 /{cg.name} mem=256MiB"
    finally:
        if cli:
            done.touch()
            cli.kill()
        cg.remove()


# ---- d. the tracking process killed with SIGKILL ---------------------------------------

def children_of(pid):
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def gone_or_zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True


@pytest.mark.backends
def test_sigkill_keeps_what_was_shipped_and_nothing_is_corrupt(scopemeter_bin, mlflow_server,
                                                               tmp_path):
    run_id = new_run(mlflow_server)
    cli = run_bg(scopemeter_bin, ["--run-id", run_id, "--interval", "0.2", "--", "sleep",
                                   "300"], env={"MLFLOW_TRACKING_URI": mlflow_server})
    try:
        cli.wait_line("collecting")
        wait_for(lambda: landed_steps(mlflow_server, run_id) >= 5, what="five windows")
        wait_for(lambda: children_of(cli.proc.pid), what="CMD started")
        cmd_pid = children_of(cli.proc.pid)[0]
        before = histories(mlflow_server, run_id)
        cli.proc.send_signal(signal.SIGKILL)
        assert cli.finish() == -signal.SIGKILL
    finally:
        cli.kill()
    # CMD dies with it (PR_SET_PDEATHSIG): no orphaned training process
    wait_for(lambda: gone_or_zombie(cmd_pid), timeout=30, what="CMD to die with scopemeter")

    after = histories(mlflow_server, run_id)  # the run reads back
    run = get_run(mlflow_server, run_id)
    assert run["info"]["status"] == "RUNNING"  # attached, never scopemeter's to end
    assert set(after) == set(before)
    counts = assert_steps_contiguous(after)  # every history a contiguous prefix 0..n-1
    # windows go out whole (one push per window, one batch holds whole windows)
    every_window(counts)
    for key, pts in before.items():
        assert after[key][:len(pts)] == pts, key  # what was shipped stays, unchanged
    assert min(counts.values()) >= min(len(p) for p in before.values()) >= 5
    # start tags shipped with the first batch are there too
    tags = {t["key"] for t in run["data"]["tags"]}
    assert {"scopemeter.rank0.node", "scopemeter.interval_s"} <= tags


# ---- e. a file that vanishes and comes back ---------------------------------------------

def test_file_vanishes_and_comes_back_network_gap_then_resume(scopemeter_bin, mlflow_server,
                                                               tmp_path):
    root = tmp_path / "machine"
    shutil.copytree(os.path.join(FIXTURES, "monitor-basic"), root, symlinks=True)
    dev = root / "proc" / "net" / "dev"
    original = dev.read_text()
    assert original.startswith("Inter-|")
    # back with 5 MB more received on one interface than when it went away
    lines = original.splitlines(keepends=True)
    iface = next(i for i, ln in enumerate(lines) if ":" in ln)
    name, nums = lines[iface].split(":", 1)
    nums = nums.split()
    nums[0] = str(int(nums[0]) + 5_000_000)
    lines[iface] = f"{name}: " + " ".join(nums) + "\n"
    restored = "".join(lines)

    run_id = new_run(mlflow_server)
    cli = run_bg(scopemeter_bin, ["--run-id", run_id, "--interval", "0.3", "--",
                                   *until_file(tmp_path / "done")],
                  env={"MLFLOW_TRACKING_URI": mlflow_server, "SCOPEMETER_SYSROOT": str(root)})
    try:
        cli.wait_line("collecting 8 series")
        wait_for(lambda: landed_steps(mlflow_server, run_id) >= 3, what="three windows")
        # it vanishes: the kept descriptor reads nothing (see the note below)
        with open(dev, "w"):
            pass
        cli.wait_line("network: cannot read /proc/net/dev")
        n = landed_steps(mlflow_server, run_id)
        wait_for(lambda: landed_steps(mlflow_server, run_id) >= n + 2,
                 what="two windows without the file")
        # and comes back
        dev.write_text(restored)
        cli.wait_line("network: recovered")
        n = landed_steps(mlflow_server, run_id)
        wait_for(lambda: landed_steps(mlflow_server, run_id) >= n + 2,
                 what="two windows after it came back")
        (tmp_path / "done").touch()
        assert cli.finish() == 0, cli.lines
    finally:
        (tmp_path / "done").touch()
        cli.kill()
    only_scopemeter_lines(cli.lines)
    net_lines = cli.matching("network")
    assert len(net_lines) == 2, cli.lines  # one warning, one "recovered"
    assert net_lines[0] == ("scopemeter: warning: network: cannot read /proc/net/dev: No such "
                            "file or directory; its series are skipped until it recovers")
    assert net_lines[1] == "scopemeter: network: recovered"

    windows, points, dropped = cli.summary()
    hist = histories(mlflow_server, run_id)
    net = {k for k in hist if "/network_" in k}
    assert net == {"system/network_receive_megabytes/rank0",
                   "system/network_transmit_megabytes/rank0"}
    for k in set(hist) - net:  # the rest go on: every window
        assert_window_steps(k, [s for s, _, _ in hist[k]], windows)
    gaps = set()
    for k in net:
        steps = [s for s, _, _ in hist[k]]
        holes = [(a, b) for a, b in zip(steps, steps[1:]) if b - a > 1]
        assert steps[0] == 0 and steps[-1] == windows - 1, (k, steps)
        assert len(holes) == 1, (k, holes)  # one gap, then they resume
        gaps.add(holes[0])
    assert len(gaps) == 1
    (a, b), = gaps
    assert b - a - 1 >= 2  # at least the two windows waited for above
    assert sum(len(p) for p in hist.values()) == points and dropped == 0
    # values: 0.0 before (the fixture never changes), 5.0 MB received after
    rx = {s: v for s, _, v in hist["system/network_receive_megabytes/rank0"]}
    assert all(v == 0.0 for s, v in rx.items() if s <= a)
    assert all(v == 5.0 for s, v in rx.items() if s >= b), rx
    tx = [v for _, _, v in hist["system/network_transmit_megabytes/rank0"]]
    assert set(tx) == {0.0}
    # Note: the file is emptied and refilled in place rather than unlinked.
    # The collector keeps one descriptor per file (src/util/sysroot.c): procfs and
    # kernfs files regenerate on each pread, and the kernel's /proc/net/dev
    # cannot be unlinked.  A regular file unlinked from a sysroot copy would
    # keep being read through the old descriptor, so only in-place loss of
    # the content is observable there; a removed cgroup (kernfs answers
    # ENODEV) is the real "file vanishes" case, covered in
    # test_cgroup_removed_mid_run_container_series_stop_others_go_on.
