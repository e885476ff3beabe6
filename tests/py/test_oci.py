"""A real OCI runtime (the `oci` tier): Debian's runc starts a container from
a root filesystem directory with a memory limit, a CPU quota and a cpuset in
its config.json, as containerd does for a Kubernetes pod.  Inside,
`scopemeter probe --json` must find the limits the runtime wrote, read from
the host's cgroup files (the runtime's own cgroup, linux.cgroupsPath) while
the container runs.

The root filesystem is the smallest that runs the CLI: Debian's static
busybox for the shell, the CLI, and the glibc it links dynamically (its only
shared libraries, copied as ldd lists them).  On a cgroup v1 host runc mounts
each hierarchy inside at the container's own cgroup (/sys/fs/cgroup/memory is
the container's subtree) while /proc/self/cgroup names the host's path: the
resolver has to map one onto the other (docs/cgroup.md §1).
"""
import json
import os
import re
import shutil
import subprocess
import time
import uuid

import pytest

from conftest import have, is_root

pytestmark = pytest.mark.oci

BUSYBOX = "/bin/busybox"
MB = 1 << 20


def need_runc():
    if not is_root():
        pytest.skip("runc needs root here (cgroups, mounts)")
    if not have("runc"):
        pytest.fail("runc is not installed (scripts/install-deps: Debian's runc)")
    if not os.path.exists(BUSYBOX):
        pytest.fail("busybox-static is not installed (scripts/install-deps)")


def shared_libs(binary):
    """The absolute paths ldd lists for binary (libc and the loader)."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    return sorted(set(re.findall(r"(/\S+\.so[.\d]*)", out)))


def make_rootfs(root, scopemeter_bin):
    for d in ("bin", "usr/bin", "proc", "sys", "dev", "tmp", "out"):
        os.makedirs(root / d, exist_ok=True)
    shutil.copy(BUSYBOX, root / "bin" / "busybox")
    for tool in ("sh", "sleep", "cat", "touch"):
        os.symlink("busybox", root / "bin" / tool)
    shutil.copy(scopemeter_bin, root / "usr" / "bin" / "scopemeter")
    for lib in shared_libs(scopemeter_bin):
        dest = root / lib.lstrip("/")
        os.makedirs(dest.parent, exist_ok=True)
        shutil.copy(os.path.realpath(lib), dest)


def cgroup_version():
    return 2 if os.path.exists("/sys/fs/cgroup/cgroup.controllers") else 1


def host_limits(cg_path):
    """What the runtime wrote for its container, read on the host:
    (memory limit bytes, quota/period cores, cpuset CPU count)."""
    def read(*parts):
        with open(os.path.join("/sys/fs/cgroup", *parts)) as f:
            return f.read().strip()

    rel = cg_path.lstrip("/")
    if cgroup_version() == 1:
        mem = int(read("memory", rel, "memory.limit_in_bytes"))
        quota, period = int(read("cpu", rel, "cpu.cfs_quota_us")), int(
            read("cpu", rel, "cpu.cfs_period_us"))
        cpus = read("cpuset", rel, "cpuset.cpus")
    else:
        mem = int(read(rel, "memory.max"))
        q, p = read(rel, "cpu.max").split()
        quota, period = int(q), int(p)
        cpus = read(rel, "cpuset.cpus")
    count = 0
    for part in cpus.split(","):
        a, _, b = part.partition("-")
        count += int(b or a) - int(a) + 1
    return mem, quota / period, count


@pytest.mark.timeout(180)
@pytest.mark.parametrize("quota,cpuset", [(0.5, None), (1.5, "0")], ids=["quota", "cpuset"])
def test_probe_inside_runc_finds_the_runtimes_limits(scopemeter_bin, tmp_path, quota, cpuset):
    need_runc()
    ncpu = os.cpu_count()
    cpuset = cpuset or f"0-{ncpu - 1}"
    bundle, out = tmp_path / "bundle", tmp_path / "out"
    out.mkdir()
    make_rootfs(bundle / "rootfs", scopemeter_bin)
    subprocess.run(["runc", "spec"], cwd=bundle, check=True)
    cfg = json.loads((bundle / "config.json").read_text())
    name = f"scopemeter-oci-{uuid.uuid4().hex[:10]}"
    cg_path = f"/{name}"
    cfg["process"]["terminal"] = False
    cfg["process"]["args"] = ["/bin/sh", "-c",
                              "scopemeter probe --json --interval 0 >/out/probe.json "
                              "2>/out/probe.err; scopemeter run --interval 0.5 --jsonl "
                              "/out/run.jsonl -- sleep 2 2>/out/run.err; touch /out/done; "
                              "sleep 60"]
    cfg["root"] = {"path": "rootfs", "readonly": False}
    cfg["mounts"].append({"destination": "/out", "type": "bind", "source": str(out),
                          "options": ["rbind", "rw"]})
    cfg["linux"]["cgroupsPath"] = cg_path
    cfg["linux"]["resources"].update({
        "memory": {"limit": 256 * MB},
        "cpu": {"quota": int(quota * 100000), "period": 100000, "cpus": cpuset},
    })
    (bundle / "config.json").write_text(json.dumps(cfg))

    proc = subprocess.Popen(["runc", "run", "--bundle", str(bundle), name],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (out / "done").exists() and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        assert (out / "done").exists(), "the container did not run the probe"
        host = host_limits(cg_path)  # while the container lives
    finally:
        subprocess.run(["runc", "kill", name, "KILL"], capture_output=True)
        try:
            proc.communicate(timeout=30)
        finally:
            subprocess.run(["runc", "delete", "--force", name], capture_output=True)
    err = (out / "probe.err").read_text()
    probe = json.loads((out / "probe.json").read_text())
    cg = probe["cgroup"]
    mem, quota_cores, cpus = host
    # the runtime did write them
    assert mem == 256 * MB and quota_cores == quota, host
    assert cpus == (1 if cpuset == "0" else ncpu), host
    assert cg["found"] and cg["version"] == cgroup_version(), cg
    assert cg["memory_limit_bytes"] == mem, (cg, host, err)
    # docs/cgroup.md §2: min(quota/period, a cpuset narrower than the host)
    want_cores = min(quota_cores, cpus) if cpus < ncpu else quota_cores
    assert cg["cpu_limit_cores"] == pytest.approx(want_cores), (cg, host, err)
    keys = {s["key"] for s in probe["series"]}
    container = {"system/container_memory_usage_megabytes/rank0",
                 "system/container_memory_usage_percentage/rank0",
                 "system/container_cpu_utilization_percentage/rank0"}
    assert container <= keys, sorted(keys)
    # `scopemeter run` in the container (no server: its JSONL file) records them, with
    # the limits' tag, and the usage is the container's: within its limit
    recs = [json.loads(ln) for ln in (out / "run.jsonl").read_text().splitlines()]
    tags = {r["key"]: r["value"] for r in recs if r["kind"] == "tag"}
    assert tags["scopemeter.rank0.cgroup"] == cg["tag"], (tags, (out / "run.err").read_text())
    points = {}
    for r in recs:
        if r["kind"] == "metric":
            points.setdefault(r["key"], []).append(r["value"])
    assert container <= set(points), sorted(points)
    used = points["system/container_memory_usage_megabytes/rank0"]
    pct = points["system/container_memory_usage_percentage/rank0"]
    assert all(0 < mb * 1e6 <= mem for mb in used), used  # MB of 10^6 bytes
    for mb, p in zip(used, pct):  # the percentage is of the runtime's limit
        assert p == pytest.approx(100 * mb * 1e6 / mem, abs=0.1)
