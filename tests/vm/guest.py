"""tests/vm/guest.py — a real cgroup v2 kernel in a QEMU guest, for the tests.

The machines here are cgroup v1 (hybrid), so the v2 code paths of scopemeter
would otherwise be proven on hand-written fixtures only.  This harness boots
Debian's own kernel under `qemu-system-x86_64 -accel tcg` (TCG: nested KVM is
exposed here but a KVM guest hangs at boot), with this machine's root file
system read-only over 9p, so the built `scopemeter`, python3 and util-linux
run inside unchanged, and a second, writable 9p export that returns results.

    build()              kernel + initramfs, once, into build-vm/ (gitignored)
    disk(path, mb)       a sparse raw image with an ext4 file system, made
                         here (mkfs.ext4 on a plain file), for boot(disks=)
    boot(script, out)    boot, run `script` (bash) as root in the guest with
                         cwd /tmp/out (the writable export, = `out` here),
                         return its exit status; raise GuestError when the
                         guest does not boot or does not finish; disks=[img]
                         attaches each image as a virtio disk (/dev/vda, ...)

No kernel is installed on the host: the package that `linux-image-amd64`
depends on is fetched with `apt-get download` and unpacked with `dpkg-deb -x`.
Debian's kernel has virtio-pci and 9p as modules, so a small initramfs
(busybox-static) loads them; their dependencies differ between kernel builds,
so they are loaded in passes until none is left (no modules.dep needed).
The guest has no network device (-nic none); `ip netns` and veth work inside.

In the guest, /sys/fs/cgroup is a cgroup2 mount with cpu, cpuset, memory and
pids enabled for the root's children; /tmp and /run are tmpfs; PID 1 is the
initramfs shell (never an OOM victim), the script runs chrooted into the
9p root.

Command line (for a person):  python3 tests/vm/guest.py build
                              python3 tests/vm/guest.py run SCRIPT OUTDIR
(run stages OUTDIR first: SCOPEMETER_BIN, else build/cli/scopemeter)
"""
import fcntl
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.environ.get("SCOPEMETER_VM_CACHE", os.path.join(REPO, "build-vm"))
HERE = os.path.dirname(os.path.abspath(__file__))

# The modules the guest needs to reach its root (virtio-pci, 9p), veth for
# two pods' network namespaces, and a disk: virtio_blk and ext4 (Debian
# builds CONFIG_VIRTIO_BLK, CONFIG_EXT4_FS, JBD2, FS_MBCACHE, CRC16 and
# CRYPTO_CRC32C as modules; ext4's metadata checksums ask the crypto API for
# crc32c, which insmod cannot load on demand, so crc32c_generic is loaded
# too).  Soft-RoCE for the RDMA case (tests/vm/rdma.sh): ib_core, ib_uverbs
# and rdma_rxe with its UDP tunnels, and the "crc32" hash rxe asks the crypto
# API for (crc32_generic), none of which modprobe could load in the guest (the
# host's /lib/modules).  Names without .ko; absent ones are skipped (a
# kernel that builds one in has no module for it).
MODULES = ["virtio", "virtio_ring", "virtio_pci_modern_dev", "virtio_pci_legacy_dev",
           "virtio_pci", "netfs", "fscache", "9pnet", "9pnet_virtio", "9p", "veth",
           "virtio_blk", "crc16", "crc32c_generic", "mbcache", "jbd2", "ext4",
           "ib_core", "ib_uverbs", "udp_tunnel", "ip6_udp_tunnel", "crc32_generic", "rdma_rxe"]

MEM_MB = 1024
CPUS = 2


class GuestError(RuntimeError):
    pass


def _run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise GuestError("%s failed (%d): %s" % (" ".join(cmd), r.returncode,
                                                   (r.stderr or r.stdout).strip()[-2000:]))
    return r.stdout


def _kernel_package():
    """The kernel package linux-image-amd64 depends on (e.g. linux-image-6.1.0-57-amd64)."""
    out = _run(["apt-cache", "depends", "linux-image-amd64"])
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("Depends:") and "linux-image-" in line:
            return line.split(":", 1)[1].strip()
    raise GuestError("apt-cache depends linux-image-amd64 names no kernel package:\n" + out)


INIT = r"""#!/bin/busybox sh
# The guest's PID 1: load virtio + 9p, mount the host root read-only and the
# results export, mount cgroup2, run the script chrooted, power off.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
left="$(cat /modules/list)"
for pass in 1 2 3 4 5 6; do
  next=""
  for m in $left; do insmod /modules/$m.ko 2>/dev/null || next="$next $m"; done
  left="$next"
  [ -z "$left" ] && break
done
[ -n "$left" ] && echo "GUEST: modules not loaded:$left"
mkdir -p /root
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 root /root ||
  { echo "GUEST-FAIL: cannot mount the 9p root"; poweroff -f; }
mount -t proc proc /root/proc
mount -t sysfs sys /root/sys
mount -t devtmpfs dev /root/dev
mount -t tmpfs tmp /root/tmp
mount -t tmpfs run /root/run
mount -t cgroup2 -o nsdelegate cgroup2 /root/sys/fs/cgroup ||
  { echo "GUEST-FAIL: cannot mount cgroup2"; poweroff -f; }
echo "+cpu +cpuset +memory +pids" > /root/sys/fs/cgroup/cgroup.subtree_control
mkdir -p /root/tmp/out
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 out /root/tmp/out ||
  { echo "GUEST-FAIL: cannot mount the results export"; poweroff -f; }
echo "GUEST-UP $(uname -r)"
cd /root/tmp/out
chroot /root /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/tmp LANG=C.UTF-8 /bin/bash -c 'cd /tmp/out && exec /bin/bash ./script.sh' \
  > /root/tmp/out/script.log 2>&1
echo "$?" > /root/tmp/out/script.rc
cd /
sync
umount /root/tmp/out
echo "GUEST-DONE"
poweroff -f
"""


def _cache_key():
    """What the cached initramfs was built from, besides the kernel: a
    change of MODULES or INIT rebuilds it (a checkout that adds a module
    must not boot an old initramfs without it)."""
    return hashlib.sha256((" ".join(MODULES) + "\0" + INIT).encode()).hexdigest()[:16]


def build():
    """kernel + initramfs into CACHE once; return (vmlinuz, initramfs).  Two
    test sessions of one checkout at once share CACHE: the second waits on
    the lock and finds it built."""
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_locked()


def _build_locked():
    vmlinuz = os.path.join(CACHE, "vmlinuz")
    initrd = os.path.join(CACHE, "initramfs.cpio.gz")
    stamp = os.path.join(CACHE, "ready")
    key = "initramfs " + _cache_key()
    if os.path.exists(stamp) and os.path.exists(vmlinuz) and os.path.exists(initrd):
        with open(stamp) as f:
            if key in f.read().splitlines():
                return vmlinuz, initrd
    for tool in ("qemu-system-x86_64", "busybox", "cpio", "dpkg-deb"):
        if not shutil.which(tool):
            raise GuestError("%s not found: scripts/install-deps installs it" % tool)
    os.makedirs(CACHE, exist_ok=True)
    pkg = _kernel_package()
    dl = os.path.join(CACHE, "dl")
    shutil.rmtree(dl, ignore_errors=True)
    os.makedirs(dl)
    _run(["apt-get", "download", pkg], cwd=dl)
    debs = glob.glob(os.path.join(dl, pkg + "_*.deb"))
    if len(debs) != 1:
        raise GuestError("apt-get download %s left %r" % (pkg, os.listdir(dl)))
    tree = os.path.join(CACHE, "kernel")
    shutil.rmtree(tree, ignore_errors=True)
    _run(["dpkg-deb", "-x", debs[0], tree])
    kz = glob.glob(os.path.join(tree, "boot", "vmlinuz-*"))
    mods = glob.glob(os.path.join(tree, "lib", "modules", "*"))
    if len(kz) != 1 or len(mods) != 1:
        raise GuestError("unexpected kernel package layout: %r %r" % (kz, mods))
    shutil.copyfile(kz[0], vmlinuz)

    root = os.path.join(CACHE, "initramfs")
    shutil.rmtree(root, ignore_errors=True)
    for d in ("bin", "proc", "sys", "dev", "root", "modules"):
        os.makedirs(os.path.join(root, d))
    shutil.copyfile(shutil.which("busybox"), os.path.join(root, "bin", "busybox"))
    os.chmod(os.path.join(root, "bin", "busybox"), 0o755)
    found = []
    for m in MODULES:
        hits = [p for p in glob.glob(os.path.join(mods[0], "kernel", "**", m + ".ko"),
                                     recursive=True)]
        if hits:
            shutil.copyfile(hits[0], os.path.join(root, "modules", m + ".ko"))
            found.append(m)
    with open(os.path.join(root, "modules", "list"), "w") as f:
        f.write(" ".join(found) + "\n")
    with open(os.path.join(root, "init"), "w") as f:
        f.write(INIT)
    os.chmod(os.path.join(root, "init"), 0o755)
    tmp = initrd + ".tmp"
    with open(tmp, "wb") as f:
        files = subprocess.run("find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1",
                               shell=True, cwd=root, stdout=f, stderr=subprocess.PIPE)
    if files.returncode != 0:
        raise GuestError("initramfs: " + files.stderr.decode(errors="replace"))
    os.replace(tmp, initrd)
    shutil.rmtree(dl, ignore_errors=True)
    shutil.rmtree(tree, ignore_errors=True)  # 400 MB of modules; the initramfs has ours
    with open(stamp, "w") as f:
        f.write(pkg + "\n" + key + "\n")
    return vmlinuz, initrd


def disk(path, mb):
    """A sparse raw image of `mb` MB at `path` with an ext4 file system,
    made on this side (seconds here, minutes under TCG), every inode table
    and the journal written now: no lazy init writing in the guest while a
    case measures block I/O."""
    if not shutil.which("mkfs.ext4"):
        raise GuestError("mkfs.ext4 not found: scripts/install-deps installs e2fsprogs")
    with open(path, "wb") as f:
        f.truncate(mb * 1000 * 1000)
    _run(["mkfs.ext4", "-F", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0", path])
    return path


def boot(script, out, timeout=600, mem_mb=MEM_MB, cpus=CPUS, disks=()):
    """Run `script` (bash text) in a fresh guest with `out` as /tmp/out; return
    its exit status.  The console is out/console.log, the script's own output
    out/script.log.  A guest that does not come up or does not finish within
    `timeout` seconds is a GuestError, never a skip.  Each of `disks` (raw
    images, see disk()) is a virtio disk: /dev/vda, /dev/vdb, ... in order."""
    vmlinuz, initrd = build()
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "script.sh"), "w") as f:
        f.write(script)
    for stale in ("script.rc", "script.log", "console.log"):
        if os.path.exists(os.path.join(out, stale)):
            os.unlink(os.path.join(out, stale))
    cmd = ["qemu-system-x86_64", "-accel", "tcg", "-m", str(mem_mb), "-smp", str(cpus),
           "-nographic", "-no-reboot", "-nic", "none", "-monitor", "none",
           "-kernel", vmlinuz, "-initrd", initrd,
           "-append", "console=ttyS0 panic=-1 quiet loglevel=4",
           "-virtfs", "local,path=/,mount_tag=root,security_model=none,readonly=on,"
                      "multidevs=remap",
           "-virtfs", "local,path=%s,mount_tag=out,security_model=none,multidevs=remap"
                      % os.path.abspath(out)]
    for img in disks:
        cmd += ["-drive", "file=%s,if=virtio,format=raw"
                % os.path.abspath(img).replace(",", ",,")]
    console = os.path.join(out, "console.log")
    t0 = time.monotonic()
    with open(console, "wb") as con:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=con, stderr=subprocess.STDOUT)
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise GuestError("guest did not finish in %d s; console:\n%s"
                             % (timeout, _tail(console)))
    took = time.monotonic() - t0
    rcfile = os.path.join(out, "script.rc")
    if not os.path.exists(rcfile):
        raise GuestError("guest ended (qemu status %d) without running the script to its end; "
                         "console:\n%s" % (p.returncode, _tail(console)))
    with open(os.path.join(out, "boot_seconds"), "w") as f:
        f.write("%.1f\n" % took)
    with open(rcfile) as f:
        return int(f.read().strip())


def stage(out, scopemeter):
    """Put what the guest scripts use into `out` (the guest's /tmp/out):
    bin/scopemeter (a copy of the built CLI), bin/alloc (tests/vm/alloc.c,
    built here), lib.sh, vm/send.py, vm/diskjob.py.  Copies, so the guest runs what was
    built when the test started."""
    binv = os.path.join(out, "bin")
    os.makedirs(binv, exist_ok=True)
    os.makedirs(os.path.join(out, "vm"), exist_ok=True)
    shutil.copy2(scopemeter, os.path.join(binv, "scopemeter"))
    cc = os.environ.get("CC", "cc")
    _run([cc, "-O2", "-std=c11", "-D_DEFAULT_SOURCE", "-Wall", "-Wextra", "-Werror", "-o",
          os.path.join(binv, "alloc"), os.path.join(HERE, "alloc.c")])
    shutil.copy2(os.path.join(HERE, "lib.sh"), os.path.join(out, "lib.sh"))
    for py in ("send.py", "diskjob.py"):
        shutil.copy2(os.path.join(HERE, py), os.path.join(out, "vm", py))


def _tail(path, n=4000):
    try:
        with open(path, "rb") as f:
            return f.read()[-n:].decode(errors="replace")
    except OSError as e:
        return "(%s)" % e


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "build":
        print(*build())
    elif len(sys.argv) == 4 and sys.argv[1] == "run":
        stage(sys.argv[3], os.environ.get("SCOPEMETER_BIN",
                                          os.path.join(REPO, "build", "cli", "scopemeter")))
        with open(sys.argv[2]) as f:
            rc = boot(f.read(), sys.argv[3])
        print("script exit status", rc)
        sys.exit(rc)
    else:
        sys.exit(__doc__)
