"""container_disk_read/write_megabytes against the kernel, on this cgroup v1
host (the fixtures of test_fixtures.py cover v2 io.stat).  Needs root and v1
memory and blkio controllers; skips with the reason otherwise.

A fresh memory cgroup (with a limit: the series exist only with one) and a
blkio cgroup of the same name; tests/tools/cg_driver runs the disk_io collector
inside them and, between its samples, runs jobs there:
  1. 200 MiB written with O_DIRECT, then fsync,
  2. 100 MiB of that file read back with O_DIRECT,
  3. 200 MiB written through the page cache, then fsync.
After each, the series must have moved by what the cgroup's own
blkio.throttle.io_service_bytes_recursive says (read here), and for 1. and 2.
by what the job moved, within 5 %.  3. is only matched against the file: on
v1 the kernel charges a write to whoever submits the bio — the fsync-ing job
here, the flusher threads (the root cgroup) when the pages are written back
in the background — docs/series.md.

Since Linux 6.10 (a3166c51702b "blk-throttle: delay initialization until
configuration") the v1 throttle counters count only on a disk where some
throttle rule was ever set: the test sets a rule of 1 TiB/s (no throttling)
on the disk under test in its own cgroup, as a node's admin would.
"""
import os
import subprocess
import sys

import pytest

from conftest import clean_env, is_root
from test_fixtures import cg_driver

MiB = 1 << 20
JOB = r"""
import mmap, os, sys
what, path, mib = sys.argv[1], sys.argv[2], int(sys.argv[3])
buf = mmap.mmap(-1, 1 << 20)            # page-aligned, as O_DIRECT needs
buf.write(os.urandom(1 << 20))
if what == "write-direct":
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o600)
    for _ in range(mib):
        assert os.write(fd, buf) == 1 << 20
    os.fsync(fd)
elif what == "read-direct":
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    for _ in range(mib):
        assert os.readv(fd, [buf]) == 1 << 20
elif what == "write-buffered":
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for _ in range(mib):
        assert os.write(fd, buf) == 1 << 20
    os.fsync(fd)
os.close(fd)
"""


def v1_mount(ctl):
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.rstrip("\n").split(" - ", 1)
            fields = left.split(" ")
            fstype, _src, sup = right.split(" ", 2)
            if fstype == "cgroup" and ctl in sup.split(",") and fields[3] == "/":
                return fields[4]
    return None


MEM, BLKIO = v1_mount("memory"), v1_mount("blkio")
pytestmark = [
    pytest.mark.skipif(not is_root(), reason="needs root to create cgroups"),
    pytest.mark.skipif(not MEM or not BLKIO,
                       reason="no cgroup v1 memory and blkio hierarchies mounted from their root"),
]


def read(path):
    with open(path) as f:
        return f.read()


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def kernel_bytes(blkdir):
    """Read and Write summed over the devices, as the kernel prints them."""
    r = w = 0
    for line in read(f"{blkdir}/blkio.throttle.io_service_bytes_recursive").splitlines():
        f = line.split()
        if len(f) == 3 and f[1] == "Read":
            r += int(f[2])
        elif len(f) == 3 and f[1] == "Write":
            w += int(f[2])
    return r, w


def whole_disk(path):
    """MAJ:MIN of the block device holding path (the disk, not a partition:
    blk-throttle rules are per disk), or None."""
    st = os.stat(path)
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    sysdir = f"/sys/dev/block/{dev}"
    if not os.path.isdir(sysdir):
        return None  # tmpfs, overlay, a network filesystem: no block device
    if os.path.exists(f"{sysdir}/partition"):
        return read(os.path.join(os.path.realpath(sysdir), "..", "dev")).strip()
    return dev


def remove(d, parent):
    if not os.path.isdir(d):
        return
    for pid in read(f"{d}/cgroup.procs").split():
        try:
            write(f"{parent}/cgroup.procs", pid)
        except OSError:
            pass
    os.rmdir(d)


@pytest.mark.timeout(300)
def test_disk_series_match_the_kernel(tmp_path):
    disk = whole_disk(tmp_path)
    if disk is None:
        pytest.skip(f"{tmp_path} is not on a block device")
    name = f"sm-test-{os.getpid()}-io"
    mem, blk = os.path.join(MEM, name), os.path.join(BLKIO, name)
    job = tmp_path / "job.py"
    job.write_text(JOB)
    data = tmp_path / "data"
    p = None
    try:
        os.mkdir(mem)
        os.mkdir(blk)
        write(f"{mem}/memory.limit_in_bytes", str(1024 * MiB))
        write(f"{blk}/blkio.throttle.read_bps_device", f"{disk} {1 << 40}")

        def enter():
            write(f"{mem}/cgroup.procs", str(os.getpid()))
            write(f"{blk}/cgroup.procs", str(os.getpid()))

        steps = [("write-direct", 200), ("read-direct", 100), ("write-buffered", 200)]
        # the driver reads its collector and the test reads the kernel's file
        # at the same moments: one command at a time
        p = subprocess.Popen([cg_driver(), "disk_io"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=clean_env(), preexec_fn=enter)
        start = [p.stdout.readline().rstrip("\n") for _ in range(4)]
        assert start[0] == "open 0" and start[3] == "ready", (start, p.stderr.read())
        assert start[2] == "msg ", start  # read at the memory-limiting level: nothing to say

        def sample():
            p.stdin.write("sample\n")
            p.stdin.flush()
            pts = {}
            while True:
                line = p.stdout.readline()
                assert line, p.stderr.read()
                f = line.split()
                if f[0] == "point":
                    pts[f[1]] = float(f[2]) * 1e6
                elif f[0] == "sample":
                    assert f[1] == "0", line
                    return pts, kernel_bytes(blk)

        def run(cmd):
            p.stdin.write(f"run {cmd}\n")
            p.stdin.flush()
            assert p.stdout.readline().strip() == "exit 0"

        prev, (kr0, kw0) = sample()
        assert prev == {"container_disk_read_megabytes": 0.0,
                        "container_disk_write_megabytes": 0.0}
        moved = {}
        for what, mib in steps:
            run(f"{sys.executable} {job} {what} {data} {mib}")
            pts, (kr, kw) = sample()
            dr = pts["container_disk_read_megabytes"] - prev["container_disk_read_megabytes"]
            dw = pts["container_disk_write_megabytes"] - prev["container_disk_write_megabytes"]
            # the collector and the kernel's own file agree (nothing else
            # does block I/O in this cgroup between the two reads)
            assert dr == pytest.approx(kr - kr0, rel=0.05, abs=MiB), what
            assert dw == pytest.approx(kw - kw0, rel=0.05, abs=MiB), what
            moved[what] = (dr, dw)
            prev, kr0, kw0 = pts, kr, kw
        p.stdin.write("quit\n")
        p.stdin.flush()
        assert p.wait(timeout=30) == 0

        # what the jobs moved, within 5 %
        assert moved["write-direct"][1] == pytest.approx(200 * MiB, rel=0.05)
        assert moved["read-direct"][0] == pytest.approx(100 * MiB, rel=0.05)
        assert moved["read-direct"][1] < 5 * MiB
    finally:
        if p and p.poll() is None:
            p.kill()
            p.wait()
        remove(blk, BLKIO)
        remove(mem, MEM)
