"""The foreign userlands of the portability tier (tests/py/test_portability.py):
Debian roots made with debootstrap (minbase + python3-venv and
ca-certificates, a venv with mlflow-skinny from PyPI), an arm64 one's second
stage run under qemu-user-static.  Kept outside the clone in
$SCOPEMETER_ROOTS (default /var/cache/scopemeter/roots), so a later clone on
the same machine reuses them.

Why a module of its own: on a fresh machine the roots are the suite's longest
build (minutes an arm64 root, emulated), so tests/run starts
`python3 tests/py/roots.py` in the background at its start, beside the C
phases, and the tier's fixtures find them made.  Whoever comes second waits:
a root is built under an exclusive lock of its own (flock), made in ROOT.tmp
and renamed when complete, so a build cut short leaves no half root that
looks whole and two builders never write one root at once.

Usage: python3 tests/py/roots.py [SUITE-ARCH ...]   (default: every root the
tier uses, ROOTS_USED); exit 0 when each is complete.
"""
import fcntl
import os
import shlex
import shutil
import subprocess
import sys
import time

ROOT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROOTS = os.environ.get("SCOPEMETER_ROOTS") or "/var/cache/scopemeter/roots"
SUITE = "bullseye"
MIRROR = "http://deb.debian.org/debian"
# Debian's arch names -> the wheels' (conftest.ARCHES)
ARCH = {"amd64": "x86_64", "arm64": "aarch64"}
HOST = {"x86_64": "amd64", "aarch64": "arm64"}[os.uname().machine]
QEMU = "/usr/bin/qemu-aarch64-static"
# binfmt_misc's 'P' registration of Debian's package names this
# interpreter; without the 'F' flag the kernel opens it inside the chroot.
BINFMT_INTERP = "/usr/libexec/qemu-binfmt/aarch64-binfmt-P"
VENV = "/opt/sm"


def sh(argv, timeout, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    assert p.returncode == 0, (argv, p.stdout[-3000:], p.stderr[-3000:])
    return p


def binfmt_ready():
    """arm64 executables run here: binfmt_misc mounted and qemu-aarch64
    registered (scripts/install-deps installs qemu-user-static and
    binfmt-support; a machine that booted without binfmt_misc mounted
    registers nothing until it is)."""
    reg = "/proc/sys/fs/binfmt_misc/qemu-aarch64"
    if not os.path.exists("/proc/sys/fs/binfmt_misc/register"):
        sh(["mount", "-t", "binfmt_misc", "binfmt_misc", "/proc/sys/fs/binfmt_misc"], 30)
    if not os.path.exists(reg):
        sh(["update-binfmts", "--import", "qemu-aarch64"], 60)
    if open(reg).readline().strip() != "enabled":
        sh(["update-binfmts", "--enable", "qemu-aarch64"], 60)


def in_root(root, script, timeout, env=None, pod=None):
    """Runs `sh -c script` chrooted into root, in a private mount namespace
    with /proc, /sys (the host's cgroup hierarchies) and /dev, a clean
    environment plus env; inside pod's cgroups when given."""
    q = shlex.quote(root)
    envs = " ".join(shlex.quote(f"{k}={v}") for k, v in (env or {}).items())
    cmd = (f"mount -t proc proc {q}/proc && mount --rbind /sys {q}/sys && "
           f"mount --rbind /dev {q}/dev && "
           f"exec chroot {q} /usr/bin/env -i PATH={VENV}/bin:/usr/bin:/bin HOME=/root "
           f"LANG=C.UTF-8 {envs} sh -c {shlex.quote(script)}")
    argv = ["unshare", "-m", "--propagation", "private", "sh", "-c", cmd]
    if pod is not None:
        argv = pod.wrap(argv)
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def build_root(deb_arch, suite=SUITE):
    """The cached root of deb_arch, made when missing: debootstrap (foreign
    for another arch: the second stage runs under qemu), then a venv with
    mlflow-skinny."""
    root = os.path.join(ROOTS, f"{suite}-{deb_arch}")
    if os.path.isfile(os.path.join(root, ".complete")):
        return root
    os.makedirs(ROOTS, exist_ok=True)
    with open(os.path.join(ROOTS, f".{suite}-{deb_arch}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not os.path.isfile(os.path.join(root, ".complete")):
            _make_root(root, deb_arch, suite)
    return root


def _stage(name, t0):
    """One line a stage of a build, with its seconds (tests/README.md's table
    of where a fresh machine's time goes comes from these)."""
    print(f"roots: {os.path.basename(name)}: {time.monotonic() - t0:.0f} s", file=sys.stderr,
          flush=True)
    return time.monotonic()


def _make_root(root, deb_arch, suite):
    t = time.monotonic()
    tmp = root + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    foreign = deb_arch != HOST
    sh(["debootstrap", "--variant=minbase", f"--arch={deb_arch}",
        "--include=python3-venv,ca-certificates"] + (["--foreign"] if foreign else []) +
       [suite, tmp, MIRROR], 1800)
    t = _stage(f"{root} debootstrap", t)
    if foreign:
        shutil.copy(QEMU, tmp + QEMU)
        os.makedirs(os.path.dirname(tmp + BINFMT_INTERP), exist_ok=True)
        os.symlink(QEMU, tmp + BINFMT_INTERP)
        sh(["chroot", tmp, "/debootstrap/debootstrap", "--second-stage"], 2400)
        t = _stage(f"{root} second stage (emulated)", t)
    # the host's resolver and trust store: pip in the root reaches PyPI as the host does
    shutil.copy("/etc/resolv.conf", os.path.join(tmp, "etc/resolv.conf"))
    shutil.copy("/etc/ssl/certs/ca-certificates.crt", os.path.join(tmp, "root/host-ca.crt"))
    p = in_root(tmp, f"python3 -m venv {VENV} && PIP_CERT=/root/host-ca.crt {VENV}/bin/pip "
                     f"install -q --disable-pip-version-check mlflow-skinny", timeout=2400)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    t = _stage(f"{root} venv + mlflow-skinny", t)
    sh(["chroot", tmp, "apt-get", "clean"], 120)
    open(os.path.join(tmp, ".complete"), "w").close()
    shutil.rmtree(root, ignore_errors=True)
    os.rename(tmp, root)


# Every root the tier uses, in the order its tests first ask for them (the
# session fixture's arches sorted, then the bookworm test).
ROOTS_USED = [f"{SUITE}-amd64", f"{SUITE}-arm64", "bookworm-arm64"]


def main(names):
    for name in names or ROOTS_USED:
        suite, arch = name.split("-", 1)
        if arch != HOST:
            binfmt_ready()
        print(f"roots: {name}: {build_root(arch, suite)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
