"""tests/vm/diskjob.py DIR MOUNT — the job of whatfilled.sh's disk case: block
I/O of known size on the guest's virtio disk (ext4 at MOUNT), in three
phases.  After each it creates DIR/<phase>.done and waits for DIR/<phase>.go,
so the script reads the cgroup's io.stat while the job does no I/O and a
window of `scopemeter run` is logged after that reading.

  write   200 MiB through the page cache, then fsync()
  read    100 MiB of that file with O_DIRECT (never the page cache)
  nosync  100 MiB through the page cache, no fsync: the script runs `sync`
          from another cgroup (the root) before it reads io.stat

Python, not C: the guest runs the host's python3 over 9p, and the job's
size is the I/O, not its start-up."""
import mmap
import os
import sys
import time

MiB = 1 << 20
d, mnt = sys.argv[1], sys.argv[2]
# page-aligned (O_DIRECT needs it), not zeros
buf = mmap.mmap(-1, MiB)
buf.write(bytes(range(256)) * (MiB // 256))


def phase(name):
    open(os.path.join(d, name + ".done"), "w").close()
    go = os.path.join(d, name + ".go")
    while not os.path.exists(go):
        time.sleep(0.05)


fd = os.open(os.path.join(mnt, "a"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
for _ in range(200):
    assert os.write(fd, buf) == MiB
os.fsync(fd)
os.close(fd)
phase("write")

fd = os.open(os.path.join(mnt, "a"), os.O_RDONLY | os.O_DIRECT)
for _ in range(100):
    assert os.readv(fd, [buf]) == MiB
os.close(fd)
phase("read")

fd = os.open(os.path.join(mnt, "b"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
for _ in range(100):
    assert os.write(fd, buf) == MiB
os.close(fd)
phase("nosync")
