"""The spool past the ring (docs/design.md §6, "The spool"; docs/rest.md):
an outage of 3 x the smallest ring against a real `mlflow server` stopped
and restarted on its sqlite store (every step in the store, contiguous, no
duplicate, read with SQL); an identical re-send is a no-op in the store;
the recorder SIGKILLed mid-outage, then `scopemeter sync` delivers every
spooled window once; bad spool files are one line each; a damaged file
(truncated, 4 bytes overwritten) delivers what reads into the real store and
is kept as FILE.damaged, counted not delivered; a DIR that does not exist is
exit 1; the container's working set while spooling (a real v1 memory
cgroup)."""
import glob
import math
import os
import re
import shutil
import signal
import sqlite3
import struct
import subprocess
import time
import uuid

import pytest

from conftest import clean_env, free_port, is_root, start_mlflow_server, stop_mlflow_server
from pyfront_util import SMALLEST_RING
from runread import get_run, read_line, rest, scratch_cwd, sm_lines, tags_of
from test_faults_recording import until_file
from test_shipping_faults import closing as closing_counts  # the closing line, points and tags apart

RING = "256"          # the smallest ring (--buffer-points)
RUN_ID = "0123456789abcdef0123456789abcdef"


def start(binary, args, env):
    return subprocess.Popen([binary, "run", *args], env=clean_env(**env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **scratch_cwd({}))


def created_run(proc):
    seen = []
    while True:
        line = read_line(proc.stderr, timeout=60)
        assert line, seen
        seen.append(line)
        m = re.search(r"created run ([0-9a-f]+)", line)
        if m:
            return m.group(1), seen


def rows(db, run_id):
    """(key, step) -> how many rows the store holds."""
    with sqlite3.connect(db) as c:
        return {(k, s): n for k, s, n in c.execute(
            "SELECT key, step, COUNT(*) FROM metrics WHERE run_uuid = ? GROUP BY key, step",
            (run_id,))}


def assert_contiguous_once(got):
    keys = {k for k, _ in got}
    assert keys
    for key in keys:
        steps = sorted(s for k, s in got if k == key)
        assert steps == list(range(len(steps))), (key, steps)  # contiguous
    dup = {ks: n for ks, n in got.items() if n != 1}
    assert not dup, dup  # no duplicate


def wait_rows(db, run_id, n, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if sum(rows(db, run_id).values()) >= n:
                return
        except sqlite3.OperationalError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"fewer than {n} rows of {run_id} within {timeout} s")


def spool_line(err):
    m = re.search(r"spool: (\d+) points spooled past the buffer: (\d+) replayed, (\d+) dropped "
                  r"\(spool full\), (\d+) left", err)
    return tuple(int(x) for x in m.groups()) if m else None


def closing(err):
    m = re.search(r"(\d+) delivered, (\d+) dropped \(buffer full\), (\d+) refused, (\d+) "
                  r"undelivered", err)
    assert m, err
    return tuple(int(x) for x in m.groups())


@pytest.fixture(scope="module")
def module_server(tmp_path_factory):
    """One sqlite server for the module's tests: each records into a run of
    its own (created by the recorder or by runs/create) and reads only that
    run's rows, so they share the store as users share a server; an outage
    stops and restarts this one on its port.  (One per test cost 9 starts and
    stops of `mlflow server`, an import of MLflow each.)"""
    tmp = tmp_path_factory.mktemp("spool-server")
    proc, uri = start_mlflow_server(str(tmp))
    s = {"proc": proc, "uri": uri, "db": str(tmp / "mlflow.db"), "dir": str(tmp),
         "port": int(uri.rsplit(":", 1)[1])}
    yield s
    stop_mlflow_server(s["proc"])


@pytest.fixture
def server(module_server):
    """The module's server, answering: a test that failed in the middle of an
    outage left it stopped, and the next starts it again on its port."""
    s = module_server
    if s["proc"].poll() is not None:
        s["proc"], _ = start_mlflow_server(s["dir"], port=s["port"])
    return s


def outage(s, seconds):
    stop_mlflow_server(s["proc"])
    time.sleep(seconds)
    s["proc"], _ = start_mlflow_server(s["dir"], port=s["port"])


def recording(binary, server, spool, seconds, **env):
    """`scopemeter run` at 0.1 s into the smallest ring, CMD `sleep seconds`
    (or, seconds a path, until the test creates it), until its first points
    are in the store: (proc, run_id)."""
    cmd = until_file(seconds) if isinstance(seconds, os.PathLike) else ["sleep", str(seconds)]
    proc = start(binary, ["--interval", "0.1", "--buffer-points", RING, "--", *cmd],
                 {"MLFLOW_TRACKING_URI": server["uri"], "SCOPEMETER_SPOOL_DIR": str(spool),
                  **env})
    run_id, _ = created_run(proc)
    wait_rows(server["db"], run_id, 20)
    return proc, run_id


def test_outage_of_three_rings_every_step_once_in_the_store(scopemeter_bin, server, tmp_path):
    """11 series every 0.1 s are 110 points/s: the 256-point ring holds 2.3 s;
    the server is down for at least 7 s (3 x the ring), the spool takes the
    rest, replays it first, and the store has every step once.  The job
    ends once the server answers again, a condition: with `sleep 16` a
    loaded machine's restart (over 30 s) outlasted the job and its stop
    deadline, 1706 points undelivered."""
    spool = tmp_path / "spool"
    done = tmp_path / "done"
    proc, run_id = recording(scopemeter_bin, server, spool, done)
    outage(server, 7)
    done.touch()
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    sp = spool_line(err)
    assert sp and sp[0] >= 3 * int(RING), err      # past the ring: spooled
    assert sp[0] == sp[1] and sp[2] == 0 and sp[3] == 0, err  # all replayed
    delivered, dropped, refused, undelivered = closing(err)
    assert dropped == 0 and refused == 0 and undelivered == 0, err
    assert_contiguous_once(rows(server["db"], run_id))
    assert not os.listdir(spool), os.listdir(spool)  # removed once delivered


def test_without_the_spool_the_same_outage_drops(scopemeter_bin, server, tmp_path):
    """The same run with SCOPEMETER_SPOOL_MAX_MB=0: the ring overwrites (the
    check above fails without the spool)."""
    proc, run_id = recording(scopemeter_bin, server, tmp_path / "spool", 12,
                             SCOPEMETER_SPOOL_MAX_MB="0")
    outage(server, 7)
    out, err = proc.communicate(timeout=180)
    assert closing(err)[1] > 0 and spool_line(err) is None, err
    with pytest.raises(AssertionError):
        assert_contiguous_once(rows(server["db"], run_id))


def test_an_identical_resend_is_a_no_op_in_the_store(server):
    """MLflow's metrics primary key (key, timestamp, step, run_uuid, value,
    is_nan): the same log-batch twice stores each row once (sqlite)."""
    run_id = rest(server["uri"], "runs/create", {"experiment_id": "0"})["run"]["info"]["run_id"]
    body = {"run_id": run_id, "metrics": [
        {"key": "system/x", "value": 1.5, "timestamp": 1700000000000, "step": s}
        for s in range(5)]}
    rest(server["uri"], "runs/log-batch", body)
    rest(server["uri"], "runs/log-batch", body)
    assert rows(server["db"], run_id) == {("system/x", s): 1 for s in range(5)}


def sync(binary, directory, uri, timeout=120):
    return subprocess.run([binary, "sync", "--timeout", "5", str(directory)],
                          env=clean_env(MLFLOW_TRACKING_URI=uri), capture_output=True,
                          text=True, timeout=timeout)


def test_sigkill_mid_outage_then_sync_delivers_every_spooled_window_once(scopemeter_bin,
                                                                        server, tmp_path):
    spool = tmp_path / "spool"
    proc, run_id = recording(scopemeter_bin, server, spool, 60)
    stop_mlflow_server(server["proc"])
    deadline = time.time() + 60
    while time.time() < deadline and sum(os.path.getsize(f) for f in
                                         glob.glob(str(spool / "*.spool"))) < 30000:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    files = glob.glob(str(spool / "*.spool"))
    assert files
    kept = tmp_path / "copy"
    kept.mkdir()
    for f in files:
        shutil.copy(f, kept)
    before = rows(server["db"], run_id)
    server["proc"], _ = start_mlflow_server(server["dir"], port=server["port"])
    assert get_run(server["uri"], run_id)["info"]["status"] == "RUNNING"
    r = sync(scopemeter_bin, spool, server["uri"])
    assert r.returncode == 0, r.stderr
    # issue 46 item 7: the recorder is gone and its run was RUNNING: sync
    # ends it KILLED and says why (the old code left it RUNNING for ever)
    run = get_run(server["uri"], run_id)
    reason = (f"KILLED by scopemeter sync: its recorder (rank 0, pid {proc.pid}) was gone "
              f"and had left it RUNNING")
    assert (run["info"]["status"], tags_of(run).get("scopemeter.end_reason")) == \
        ("KILLED", reason), (run["info"], r.stdout)
    assert f"run {run_id}: its recorder (rank 0, pid {proc.pid}) is gone" in r.stdout
    # the recorder created the run: its owner tag names it, as the spool's header does
    assert tags_of(run)["scopemeter.owner"] == f"rank=0 pid={proc.pid}", tags_of(run)
    said = [l for l in r.stdout.splitlines() if "points delivered" in l]
    assert len(said) == len(files), r.stdout
    metrics = sum(int(re.search(r"(\d+) metrics", l).group(1)) for l in said)
    after = rows(server["db"], run_id)
    assert sum(after.values()) - sum(before.values()) == metrics > 0, r.stdout
    assert_contiguous_once(after)  # the spool is the oldest: a prefix, no hole
    assert not glob.glob(str(spool / "*.spool"))  # delivered: removed
    # a second delivery of the same files (a sync that died before its
    # commit) changes nothing: exactly once in the store
    r = sync(scopemeter_bin, kept, server["uri"])
    assert r.returncode == 0, r.stderr
    assert rows(server["db"], run_id) == after


def make_spool(binary, tmp_path, run_id=RUN_ID):
    """A spool file left at stop: a run whose server never answers."""
    spool = tmp_path / "spool"
    p = subprocess.run([binary, "run", "--run-id", run_id, "--interval", "0.1",
                        "--buffer-points", RING, "--stop-timeout", "2", "--", "sleep", "3"],
                       env=clean_env(MLFLOW_TRACKING_URI=f"http://127.0.0.1:{free_port()}",
                                     SCOPEMETER_SPOOL_DIR=str(spool)),
                       capture_output=True, text=True, timeout=120, **scratch_cwd({}))
    assert "kept in the spool" in p.stderr, p.stderr
    (f,) = glob.glob(str(spool / "*.spool"))
    return spool, f


def test_bad_spool_files_are_one_line_each_and_skipped(scopemeter_bin, tmp_path):
    spool, good = make_spool(scopemeter_bin, tmp_path)
    data = open(good, "rb").read()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "a-truncated.spool").write_bytes(data[:40])
    flipped = bytearray(data)
    flipped[-10] ^= 0xFF
    (bad / "b-corrupt.spool").write_bytes(bytes(flipped))
    other = bytearray(data)
    other[8:12] = struct.pack("<I", 99)
    (bad / "c-version.spool").write_bytes(bytes(other))
    (bad / "d-garbage.spool").write_bytes(os.urandom(3000))
    (bad / "e-empty.spool").write_bytes(b"")
    held = bad / "f-held.spool"
    held.write_bytes(data)
    import fcntl
    with open(held, "rb") as h:
        fcntl.flock(h, fcntl.LOCK_EX)
        uri = f"http://127.0.0.1:{free_port()}"
        r = sync(scopemeter_bin, bad, uri)
    assert r.returncode == 1, r.stderr
    lines = sm_lines(r.stderr)
    by = {n: [l for l in lines if n in l] for n in
          ("a-truncated", "b-corrupt", "c-version", "d-garbage", "e-empty", "f-held")}
    assert all(len(v) == 1 for v in by.values()), lines
    assert "truncated" in by["a-truncated"][0]
    assert "corrupt" in by["b-corrupt"][0] or "stopped" in by["b-corrupt"][0]
    assert "another version" in by["c-version"][0]
    assert "not a scopemeter spool file" in by["d-garbage"][0]
    assert "held by a live recorder" in by["f-held"][0]
    # every file is still there: nothing skipped is removed
    assert len(os.listdir(bad)) == 6


def cg_v1_memory():
    base = "/sys/fs/cgroup/memory"
    if not is_root() or not os.path.exists(os.path.join(base, "memory.stat")):
        pytest.skip("needs root and a cgroup v1 memory controller")
    return base


def working_set_peak(binary, tmp_path, spool_mb, server):
    """Runs the recorder alone in a fresh v1 memory cgroup through an
    outage; the peak of usage - total_inactive_file (the kubelet's working
    set) while the server is down."""
    cg = os.path.join(cg_v1_memory(), f"sm-spool-{uuid.uuid4().hex[:8]}")
    os.mkdir(cg)
    try:
        env = {"MLFLOW_TRACKING_URI": server["uri"], "SCOPEMETER_SPOOL_MAX_MB": spool_mb,
               "SCOPEMETER_SPOOL_DIR": str(tmp_path / f"spool{spool_mb}")}
        proc = subprocess.Popen(
            ["sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$0" "$@"', binary, "run",
             "--interval", "0.1", "--buffer-points", RING, "--", "sleep", "14"],
            env=clean_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True, **scratch_cwd({}))
        run_id, _ = created_run(proc)
        wait_rows(server["db"], run_id, 20)
        stop_mlflow_server(server["proc"])
        peak, t_end = 0, time.time() + 8
        while time.time() < t_end:
            usage = int(open(f"{cg}/memory.usage_in_bytes").read())
            stat = dict(l.split() for l in open(f"{cg}/memory.stat"))
            peak = max(peak, usage - int(stat["total_inactive_file"]))
            time.sleep(0.1)
        server["proc"], _ = start_mlflow_server(server["dir"], port=server["port"])
        out, err = proc.communicate(timeout=180)
        return peak, err
    finally:
        for _ in range(50):
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.2)


def test_the_spool_does_not_grow_the_working_set(scopemeter_bin, server, tmp_path):
    without, err0 = working_set_peak(scopemeter_bin, tmp_path, "0", server)
    with_spool, err = working_set_peak(scopemeter_bin, tmp_path, "64", server)
    sp = spool_line(err)
    assert sp and sp[0] > 0, err
    print(f"working set peak: {without} without the spool, {with_spool} with {sp[0]} spooled")
    assert with_spool - without < 1_000_000, (with_spool, without)


FRONT = r"""
import os, sys, time
import scopemeter
""" + SMALLEST_RING + r"""
ok = scopemeter.enable_system_metrics(interval=0.1)
print("enabled" if ok else "not enabled", file=sys.stderr, flush=True)
while not os.path.exists(os.environ["SM_TEST_DONE"]):
    time.sleep(0.05)
scopemeter.disable_system_metrics()
"""


def test_the_python_fronts_mlflowclient_pump_spools_too(mlflow_server, tmp_path):
    """The same policy on the Python front's MlflowClient path (taken for an
    http server because MLFLOW_TRACKING_AUTH names an auth plugin, as in
    test_delivery_policy.py), its Monitor given the smallest ring (256
    points, 2.3 s at 0.1 s); an outage of 10 s: the spool takes what the ring
    cannot hold and replays it in order."""
    import sys
    from faultproxy import FaultProxy
    from pyfront_util import python_env
    from runread import assert_steps_contiguous, histories, new_run
    from test_delivery_policy import PLUGIN, install_plugin

    (tmp_path / "plugin").mkdir()
    install_plugin(tmp_path / "plugin")
    proxy = FaultProxy(mlflow_server)
    run_id = new_run(mlflow_server)
    done = tmp_path / "done"
    spool = tmp_path / "spool"
    env = python_env(MLFLOW_TRACKING_URI=proxy.uri, MLFLOW_RUN_ID=run_id,
                     MLFLOW_HTTP_REQUEST_MAX_RETRIES="0", MLFLOW_HTTP_REQUEST_TIMEOUT="10",
                     MLFLOW_TRACKING_AUTH=PLUGIN, PYTHONPATH=str(tmp_path / "plugin"),
                     SCOPEMETER_SPOOL_DIR=str(spool), SM_TEST_DONE=str(done))
    p = subprocess.Popen([sys.executable, "-c", FRONT], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    try:
        seen = []
        while not seen or seen[-1].strip() not in ("enabled", "not enabled"):
            seen.append(read_line(p.stderr, timeout=120))
            assert seen[-1], seen
        assert seen[-1].strip() == "enabled", seen
        assert proxy.wait_for(lambda: any(r.status == 200 for r in proxy.log("runs/log-batch")),
                              60)
        proxy.down()
        time.sleep(10)
        proxy.up()
        time.sleep(3)
        done.touch()
        err = "".join(seen) + p.communicate(timeout=180)[1]
    finally:
        done.touch()
        if p.poll() is None:
            p.kill()
        proxy.close()
    assert p.returncode == 0, err
    assert "MLFLOW_TRACKING_AUTH" in err, err  # the MlflowClient path
    sp = spool_line(err)
    assert sp and sp[0] > 0 and sp[0] == sp[1] and sp[2] == sp[3] == 0, err
    assert closing(err)[1:] == (0, 0, 0), err
    assert_steps_contiguous(histories(mlflow_server, run_id))


def test_a_spool_directory_on_a_tmpfs_is_refused_in_one_line(scopemeter_bin, tmp_path):
    """/dev/shm is a tmpfs: its pages would count against the memory limit
    the spool must outlive.  One line, and the ring works alone."""
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    shm = f"/dev/shm/sm-spool-{uuid.uuid4().hex[:8]}"
    try:
        p = subprocess.run([scopemeter_bin, "run", "--run-id", RUN_ID, "--interval", "0.1",
                            "--buffer-points", RING, "--stop-timeout", "2", "--", "sleep", "3"],
                           env=clean_env(MLFLOW_TRACKING_URI=f"http://127.0.0.1:{free_port()}",
                                         SCOPEMETER_SPOOL_DIR=shm),
                           capture_output=True, text=True, timeout=120, **scratch_cwd({}))
        said = [l for l in sm_lines(p.stderr) if "is a tmpfs" in l]
        assert len(said) == 1, p.stderr
        assert spool_line(p.stderr) is None and closing(p.stderr)[1] > 0, p.stderr
        assert not glob.glob(os.path.join(shm, "*.spool"))
    finally:
        shutil.rmtree(shm, ignore_errors=True)


@pytest.fixture
def small_disk(tmp_path):
    """A real 1 MB ext2 file system on a loop device (ext2 allocates at
    write(2), so a full disk is ENOSPC at the spool's pwrite, not later; -m 0: no
    blocks reserved for root, which the suite is):
    yields (mountpoint, remount(ro)).  Root only (mount)."""
    if not is_root() or not shutil.which("mkfs.ext2"):
        pytest.skip("needs root and mkfs.ext2 (CI runs as root)")
    img, mnt = tmp_path / "disk.img", tmp_path / "disk"
    mnt.mkdir()
    with open(img, "wb") as f:
        f.truncate(1 << 20)
    subprocess.run(["mkfs.ext2", "-q", "-F", "-m", "0", str(img)], check=True, timeout=60)
    r = subprocess.run(["mount", "-o", "loop", str(img), str(mnt)], capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a loop device here: {r.stderr.strip()}")
    try:
        yield mnt, lambda: subprocess.run(["mount", "-o", "remount,ro", str(mnt)],
                                          check=True, timeout=60)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], timeout=60)


def fill(mnt, leave):
    """Fills the file system up to `leave` bytes free."""
    st = os.statvfs(mnt)
    with open(os.path.join(mnt, "filler"), "wb") as f:
        f.write(b"\0" * max(st.f_bavail * st.f_frsize - leave, 0))
        f.flush()
        os.fsync(f.fileno())


@pytest.mark.parametrize("case", ["full", "read-only"])
def test_a_full_or_read_only_spool_disk_is_one_line_and_keeps_what_it_took(
        scopemeter_bin, server, small_disk, case):
    """docs/design.md §6, the spool's "Where": a write error is one line and
    the ring alone, as before.  Full: the disk takes a few chunks (12 kB
    left) and then says ENOSPC in the middle of a 7 s outage of 770 records;
    what the spool took is replayed once, the rest is the ring's overwrite,
    counted; the store holds no step twice and exactly what the closing line
    says it delivered.  Read-only: no file at all, one line, the ring's drops
    counted."""
    mnt, remount_ro = small_disk
    if case == "full":
        fill(mnt, 12 * 1024)
    else:
        remount_ro()
    proc, run_id = recording(scopemeter_bin, server, mnt, 16)
    outage(server, 7)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    why = "No space left on device" if case == "full" else "Read-only file system"
    said = [l for l in sm_lines(err) if "spool" in l and why in l]
    assert len(said) == 1, err                     # one line, said once
    c = closing_counts(err)                        # points and tags apart
    assert c["overflow"] > 0 and c["refused"] == 0 and c["undelivered"] == 0, err
    sp = spool_line(err)
    if case == "full":
        assert sp and sp[0] > 0 and sp[0] == sp[1] and sp[2] == sp[3] == 0, err
    else:
        assert sp is None, err
    got = rows(server["db"], run_id)               # delivered counts the tags too
    assert sum(got.values()) == c["delivered"] - c["tags"], (sum(got.values()), c)
    assert all(n == 1 for n in got.values())       # no step twice
    assert not glob.glob(os.path.join(mnt, "*.spool"))  # delivered: removed


def spool_frames(data):
    """(offset, type, records) of every frame, read as docs/design.md §6 lays
    the file out (header length at byte 12; a frame: u32 length, type, payload,
    CRC): the test's own reading, not scopemeter's."""
    off, out = struct.unpack_from("<I", data, 12)[0], []
    while off < len(data):
        plen = struct.unpack_from("<I", data, off)[0]
        kind = chr(data[off + 4])
        recs = [struct.unpack_from("<dqiHH", data, off + 5 + i * 24)
                for i in range(plen // 24)] if kind == "R" else []
        out.append((off, kind, recs))
        off += 9 + plen
    return out


def finite(recs):
    """the records sync sends: a non-finite value is skipped (docs/rest.md)"""
    return [r for r in recs if math.isfinite(r[0])]


def metric_rows(recs):
    """how many of recs are metrics (text 0) sync sends"""
    return sum(1 for r in finite(recs) if r[4] == 0)


@pytest.mark.parametrize("damage", ["truncated", "overwritten"])
def test_a_damaged_spool_delivers_what_reads_and_is_kept_aside(scopemeter_bin, server, tmp_path,
                                                               damage):
    """Issue 46 item 8, against a real server: a spool file truncated inside
    its 4th record frame, or with 4 bytes overwritten in the middle of that
    frame.  sync delivers every record of the frames that read (truncated:
    those before the cut; overwritten: all but that frame, whose records the
    line counts), keeps the file as FILE.damaged (never removes what it did
    not deliver), says so, and does not count it delivered (exit 1).  The old
    code removed the file, counted it delivered and exited 0."""
    run_id = rest(server["uri"], "runs/create", {"experiment_id": "0"})["run"]["info"]["run_id"]
    spool, path = make_spool(scopemeter_bin, tmp_path, run_id)
    data = open(path, "rb").read()
    frames = spool_frames(data)
    rframes = [f for f in frames if f[1] == "R"]
    assert len(rframes) >= 4, [(o, k, len(r)) for o, k, r in frames]
    off, _, recs = rframes[3]
    mid = off + 5 + (len(recs) * 24) // 2
    if damage == "truncated":
        data = data[:mid]
        sent = [r for f in rframes[:3] for r in f[2]]
        said = f"not delivered: the rest from byte {off} is truncated"
    else:
        data = data[:mid] + b"\xde\xad\xbe\xef" + data[mid + 4:]
        sent = [r for f in rframes if f[0] != off for r in f[2]]
        said = (f"not delivered: 1 frame ({len(recs)} records) corrupt (CRC mismatch) from byte "
                f"{off}, skipped")
    open(path, "wb").write(data)
    r = sync(scopemeter_bin, spool, server["uri"])
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    (line,) = [l for l in sm_lines(r.stderr) if os.path.basename(path) in l]
    assert f"{len(finite(sent))} points delivered ({metric_rows(sent)} metrics" in line, line
    assert said in line and f"the file is kept as {path}.damaged" in line, line
    assert "sync of" in r.stdout and "0 files delivered, 1 not" in r.stdout, r.stdout
    # the store has exactly the metric records of the frames that read
    assert sum(rows(server["db"], run_id).values()) == metric_rows(sent)
    # kept aside, byte for byte but the commit (bytes 16..31, rewritten as sent)
    assert not os.path.exists(path) and os.listdir(spool) == [os.path.basename(path) + ".damaged"]
    kept = open(path + ".damaged", "rb").read()
    assert kept[:16] == data[:16] and kept[32:] == data[32:]
    # the run was made here and attached to (--run-id): not the recorder's to
    # end, so sync leaves it RUNNING and says whose it is (issue 46 item 7)
    assert get_run(server["uri"], run_id)["info"]["status"] == "RUNNING"
    assert (f"run {run_id} is RUNNING; left as it is: its owner is not a scopemeter run (no "
            f"scopemeter.owner tag)") in r.stdout, r.stdout
    # a second sync finds nothing: the damaged file is out of its way
    r = sync(scopemeter_bin, spool, server["uri"])
    assert r.returncode == 0 and "0 files delivered, 0 not" in r.stdout, r.stdout


def test_sync_of_a_directory_that_does_not_exist_fails(scopemeter_bin, tmp_path):
    """A mistyped DIR must not read as success (issue 46 item 8): exit 1 and
    the reason; the recorders' default directory, never made because nothing
    ever spooled, is still "nothing to deliver", exit 0."""
    missing = tmp_path / "no-such-dir"
    r = sync(scopemeter_bin, missing, f"http://127.0.0.1:{free_port()}")
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert f"cannot read {missing}: No such file or directory" in r.stderr, r.stderr
    assert "nothing to deliver" not in r.stdout
    r = subprocess.run([scopemeter_bin, "sync"], capture_output=True, text=True, timeout=60,
                       env=clean_env(MLFLOW_TRACKING_URI=f"http://127.0.0.1:{free_port()}",
                                     SCOPEMETER_SPOOL_DIR=str(missing)))
    assert r.returncode == 0 and "nothing to deliver" in r.stdout, (r.stdout, r.stderr)
