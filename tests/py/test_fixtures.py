"""The cgroup fixture machines (tests/fixtures/cg-*) through `scopemeter probe
--json --interval 0` with SCOPEMETER_SYSROOT: exact series keys, exact values
computed here by hand from the numbers in each fixture's files, the cgroup
object, the run tag and the lines in notes.  The end tags (oom_kill, peaks,
throttling), which probe does not show, come from tests/tools/cg_driver run on
the same fixture.

With --interval 0 every rate is a delta of the same file read twice: node
CPU, network and container CPU are 0.0 (docs/cgroup.md).
"""
import os
import subprocess

import pytest

from conftest import FIXTURES, ROOT, clean_env

GiB = 1 << 30
# proc/meminfo of every cg-* fixture: MemTotal 503 GiB, MemAvailable 400000000 kB
MEMTOTAL_KB = 503 * 1024 * 1024
MEMAVAIL_KB = 400000000

NODE_AND_POD = {
    "system/node_cpu_utilization_percentage/rank0": 0.0,
    "system/node_memory_usage_megabytes/rank0": (MEMTOTAL_KB - MEMAVAIL_KB) * 1024 / 1e6,
    "system/node_memory_usage_percentage/rank0": 100.0 * (MEMTOTAL_KB - MEMAVAIL_KB) / MEMTOTAL_KB,
    "system/network_receive_megabytes/rank0": 0.0,
    "system/network_transmit_megabytes/rank0": 0.0,
}
ROOTFS = {  # statvfs of the fixture directory: present, values not asserted
    "system/rootfs_usage_megabytes/rank0",
    "system/rootfs_usage_percentage/rank0",
    "system/rootfs_available_megabytes/rank0",
}
MEM_MB = "system/container_memory_usage_megabytes/rank0"
MEM_PCT = "system/container_memory_usage_percentage/rank0"
CPU_PCT = "system/container_cpu_utilization_percentage/rank0"

# container_disk_* (src/collect/coll_io.c): with a limit, from the cgroup's block I/O
# file at the limiting level; cumulative since the start, so 0.0 with
# --interval 0.  name -> the file read (v1 blkio falls back to CFQ's file).
DISK_R = "system/container_disk_read_megabytes/rank0"
DISK_W = "system/container_disk_write_megabytes/rank0"
DISK_FILE = {
    "cg-k8s-v2-cgroupns": "/sys/fs/cgroup/io.stat",
    "cg-docker-v1-hostns": "/sys/fs/cgroup/blkio/blkio.throttle.io_service_bytes_recursive",
    "cg-hybrid": "/sys/fs/cgroup/blkio/user.slice/user-1000.slice/"
                 "blkio.io_service_bytes_recursive",
    "cg-slurm-v2": "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_12/io.stat",
    "cg-cpu-only": "/sys/fs/cgroup/io.stat",
    "cg-systemd-slice": "/sys/fs/cgroup/training.slice/io.stat",
    "cg-escaped-mount": "/sys/fs/cgroup/my cgroup/task 1/io.stat",
    "cg-k8s-v2-psi": "/sys/fs/cgroup/io.stat",
    "cg-docker-v1-shmem": "/sys/fs/cgroup/blkio/blkio.throttle.io_service_bytes_recursive",
    "cg-v1-cpuacct-apart": "/sys/fs/cgroup/blkio/adv3c/blkio.throttle.io_service_bytes_recursive",
}

GPU_NOTE = "no /dev/nvidia device: gpu_* series absent (normal on CPU workers)"
NODE_NOTE = ("no node name (SCOPEMETER_NODE_NAME, NODE_NAME, SLURMD_NODENAME unset): "
             "node tag 'unknown', keys without the node tier")
MEM_ONLY_NOTE = ("cgroup: memory limit only, no CPU limit: "
                 "container_cpu_utilization_percentage absent")
CPU_ONLY_NOTE = "cgroup: CPU limit only, no memory limit: container_memory_* absent"
# docs/design.md §9: the parts of the working set and PSI, absent with one line
ANON = "system/container_memory_anon_megabytes/rank0"
SHMEM = "system/container_memory_shmem_megabytes/rank0"
FILE_ACTIVE = "system/container_memory_file_active_megabytes/rank0"
KERNEL = "system/container_memory_kernel_megabytes/rank0"
MEM_PSI = "system/container_memory_pressure_percentage/rank0"
CPU_PSI = "system/container_cpu_pressure_percentage/rank0"
NO_PSI_V2 = ("no PSI (memory.pressure, cpu.pressure: No such file or directory): "
             "container_*_pressure_percentage absent")
NO_PSI_V1 = "cgroup v1 has no PSI: container_*_pressure_percentage absent"
NO_SHMEM_V1 = ("memory.stat has no total_shmem: "
               "container_memory_{anon,shmem,file_active,kernel}_megabytes absent")


def fx(name):
    return os.path.join(FIXTURES, name)


def ws(usage, inactive):
    return max(0, usage - inactive)


def parts(usage, inactive, anon, shmem, active_file):
    """The four parts of docs/design.md §9 (MB): the kernel part is the rest."""
    w = ws(usage, inactive)
    return {ANON: anon / 1e6, SHMEM: shmem / 1e6, FILE_ACTIVE: active_file / 1e6,
            KERNEL: max(0, w - anon - shmem - active_file) / 1e6}


def at_peak(usage, inactive, limit, anon=None, shmem=None, active_file=None):
    """scopemeter.rankN.memory_at_peak for a fixture that never changes."""
    w = ws(usage, inactive)
    if anon is None:
        return f"working_set_mb={w / 1e6:.1f} limit_mb={limit / 1e6:.1f}"
    k = max(0, w - anon - shmem - active_file)
    return (f"working_set_mb={w / 1e6:.1f} anon_mb={anon / 1e6:.1f} shmem_mb={shmem / 1e6:.1f} "
            f"file_active_mb={active_file / 1e6:.1f} kernel_mb={k / 1e6:.1f} "
            f"limit_mb={limit / 1e6:.1f}")


APART = ("the cpu limit is at /adv3c in the cpu hierarchy, where the process is at /adv3c, "
         "but its cpuacct cgroup is /: no cpuacct cgroup counts just the processes the limit "
         "binds")
EVENTS_V2 = "high=0 max=0 oom=0 oom_kill=0"  # deltas since open: the files do not move


# name -> what probe must say.  Values are from the fixture's own files.
CASES = {
    "cg-k8s-v2-cgroupns": dict(
        container={MEM_MB: ws(30000000000, 5000000000) / 1e6,
                   MEM_PCT: 100.0 * ws(30000000000, 5000000000) / (56 * GiB),
                   CPU_PCT: 0.0, **parts(30000000000, 5000000000, 1000000, 0, 123456789)},
        version=2, dir="sys/fs/cgroup", limiting_dir="sys/fs/cgroup",
        cpu_limiting_dir="sys/fs/cgroup", memory_limit_bytes=56 * GiB,
        cpu_limit_cores=1600000 / 100000,
        why="v2 cgroup /, memory limit 56.0 GiB at /, cpu limit 16.0 cores (quota) at /",
        tag="v2 / mem=56.0GiB cpu=16.0", note=NO_PSI_V2,
        end={"oom_kill": "0", "mem_peak_sampled_mb": "25000.0", "memory_peak_mb": "32000.0",
             "cpu_throttled_periods": "0", "cpu_throttled_s": "0.0",
             "memory_at_peak": at_peak(30000000000, 5000000000, 56 * GiB, 1000000, 0, 123456789),
             "memory_events": EVENTS_V2}),
    "cg-k8s-v2-psi": dict(
        container={MEM_MB: ws(7000000000, 500000000) / 1e6,
                   MEM_PCT: 100.0 * ws(7000000000, 500000000) / (8 * GiB),
                   CPU_PCT: 0.0, MEM_PSI: 0.0, CPU_PSI: 0.0,
                   **parts(7000000000, 500000000, 2300000000, 3100000000, 400000000)},
        version=2, dir="sys/fs/cgroup", limiting_dir="sys/fs/cgroup",
        cpu_limiting_dir="sys/fs/cgroup", memory_limit_bytes=8 * GiB,
        cpu_limit_cores=400000 / 100000,
        why="v2 cgroup /, memory limit 8.0 GiB at /, cpu limit 4.0 cores (quota) at /",
        tag="v2 / mem=8.0GiB cpu=4.0", note=None,
        end={"oom_kill": "0", "mem_peak_sampled_mb": "6500.0", "memory_peak_mb": "7800.0",
             "cpu_throttled_periods": "0", "cpu_throttled_s": "0.0",
             "memory_at_peak": at_peak(7000000000, 500000000, 8 * GiB, 2300000000, 3100000000,
                                       400000000),
             "memory_events": EVENTS_V2,
             "pressure": "memory_some_s=0.00 memory_peak_pct=0.0 cpu_some_s=0.00 "
                         "cpu_peak_pct=0.0"}),
    "cg-docker-v1-shmem": dict(
        # total_rss excludes shmem (v1 counts it in cache): the four parts add up
        container={MEM_MB: ws(1500000000, 300000000) / 1e6,
                   MEM_PCT: 100.0 * ws(1500000000, 300000000) / (2 * GiB),
                   CPU_PCT: 0.0, **parts(1500000000, 300000000, 400000000, 500000000, 200000000)},
        version=1, dir="sys/fs/cgroup/memory", limiting_dir="sys/fs/cgroup/memory",
        cpu_limiting_dir="sys/fs/cgroup/cpu,cpuacct", memory_limit_bytes=2 * GiB,
        cpu_limit_cores=150000 / 100000,
        why="v1 cgroup /docker/3f1e5a9b2c7d (mount root /docker/3f1e5a9b2c7d), memory limit "
            "2.0 GiB at /docker/3f1e5a9b2c7d, cpu limit 1.5 cores (quota) at /docker/3f1e5a9b2c7d",
        tag="v1 /docker/3f1e5a9b2c7d mem=2.0GiB cpu=1.5", note=NO_PSI_V1,
        end={"oom_kill": "0", "mem_peak_sampled_mb": "1200.0", "memory_peak_mb": "1900.0",
             "cpu_throttled_periods": "0", "cpu_throttled_s": "0.0",
             "memory_at_peak": at_peak(1500000000, 300000000, 2 * GiB, 400000000, 500000000,
                                       200000000),
             "memory_events": "max=0 oom_kill=0"}),
    "cg-v1-cpuacct-apart": dict(
        # issue 46 item 3: quota at cpu:/adv3c, but cpuacct shows the process at
        # the root, whose cpuacct.usage counts the host: no CPU series, one line
        container={MEM_MB: ws(104857600, 4000000) / 1e6,
                   MEM_PCT: 100.0 * ws(104857600, 4000000) / (300 << 20),
                   **parts(104857600, 4000000, 100000000, 0, 857600)},
        version=1, dir="sys/fs/cgroup/memory/adv3c", limiting_dir="sys/fs/cgroup/memory/adv3c",
        cpu_limiting_dir="sys/fs/cgroup/cpu/adv3c", memory_limit_bytes=300 << 20,
        cpu_limit_cores=50000 / 100000,
        why="v1 cgroup /adv3c, memory limit 300 MiB at /adv3c, cpu limit 0.5 cores (quota) at "
            "/adv3c, no cpu usage (" + APART + ")",
        tag="v1 /adv3c mem=300MiB cpu=0.5",
        note="cgroup: CPU limit but no CPU usage (" + APART + "): "
             "container_cpu_utilization_percentage absent; cgroup v1 has no PSI: "
             "container_memory_pressure_percentage absent",
        end={"oom_kill": "0", "mem_peak_sampled_mb": "100.9", "memory_peak_mb": "110.0",
             "memory_at_peak": at_peak(104857600, 4000000, 300 << 20, 100000000, 0, 857600),
             "memory_events": "max=0 oom_kill=0"}),
    "cg-docker-v1-hostns": dict(
        # total_inactive_file (hierarchical), not inactive_file (299)
        container={MEM_MB: ws(1500000000, 300000000) / 1e6,
                   MEM_PCT: 100.0 * ws(1500000000, 300000000) / (2 * GiB),
                   CPU_PCT: 0.0},
        version=1, dir="sys/fs/cgroup/memory", limiting_dir="sys/fs/cgroup/memory",
        cpu_limiting_dir="sys/fs/cgroup/cpu,cpuacct", memory_limit_bytes=2 * GiB,
        cpu_limit_cores=150000 / 100000,
        why="v1 cgroup /docker/3f1e5a9b2c7d (mount root /docker/3f1e5a9b2c7d), memory limit "
            "2.0 GiB at /docker/3f1e5a9b2c7d, cpu limit 1.5 cores (quota) at /docker/3f1e5a9b2c7d",
        # an older kernel's memory.stat: no total_shmem, so no parts (one line)
        tag="v1 /docker/3f1e5a9b2c7d mem=2.0GiB cpu=1.5", note=NO_SHMEM_V1 + "; " + NO_PSI_V1,
        end={"oom_kill": "0", "mem_peak_sampled_mb": "1200.0", "memory_peak_mb": "1900.0",
             "cpu_throttled_periods": "0", "cpu_throttled_s": "0.0",
             "memory_at_peak": at_peak(1500000000, 300000000, 2 * GiB),
             "memory_events": "oom_kill=0"}),
    "cg-hybrid": dict(
        container={MEM_MB: ws(3000000000, 1000000000) / 1e6,
                   MEM_PCT: 100.0 * ws(3000000000, 1000000000) / (8 * GiB)},
        version=1, dir="sys/fs/cgroup/memory/user.slice/user-1000.slice/session-3.scope",
        limiting_dir="sys/fs/cgroup/memory/user.slice/user-1000.slice",
        cpu_limiting_dir=None, memory_limit_bytes=8 * GiB, cpu_limit_cores=None,
        why="v1 cgroup /user.slice/user-1000.slice/session-3.scope, memory limit 8.0 GiB at "
            "/user.slice/user-1000.slice, no cpu limit",
        tag="v1 /user.slice/user-1000.slice/session-3.scope mem=8.0GiB",
        note=MEM_ONLY_NOTE + "; " + NO_SHMEM_V1 +
        "; cgroup v1 has no PSI: container_memory_pressure_percentage absent",
        end={"oom_kill": "0", "mem_peak_sampled_mb": "2000.0", "memory_peak_mb": "4000.0",
             "memory_at_peak": at_peak(3000000000, 1000000000, 8 * GiB),
             "memory_events": "oom_kill=0"}),
    "cg-slurm-v2": dict(
        container={MEM_MB: ws(9000000000, 1000000000) / 1e6,
                   MEM_PCT: 100.0 * ws(9000000000, 1000000000) / (16 * GiB),
                   CPU_PCT: 0.0, **parts(9000000000, 1000000000, 1000000, 0, 123456789)},
        version=2, dir="sys/fs/cgroup/system.slice/slurmstepd.scope/job_12/step_0/user/task_0",
        limiting_dir="sys/fs/cgroup/system.slice/slurmstepd.scope/job_12",
        cpu_limiting_dir="sys/fs/cgroup/system.slice/slurmstepd.scope/job_12/step_0/user/task_0",
        memory_limit_bytes=16 * GiB, cpu_limit_cores=4.0,  # cpuset 0-3 of 16 CPUs
        why="v2 cgroup /system.slice/slurmstepd.scope/job_12/step_0/user/task_0, memory limit "
            "16.0 GiB at /system.slice/slurmstepd.scope/job_12, cpu limit 4.0 cores (cpuset: 4 "
            "of 16 CPUs) at /system.slice/slurmstepd.scope/job_12/step_0/user/task_0",
        tag="v2 /system.slice/slurmstepd.scope/job_12/step_0/user/task_0 mem=16.0GiB cpu=4.0",
        note=NO_PSI_V2,
        # no quota: no throttling tags
        end={"oom_kill": "0", "mem_peak_sampled_mb": "8000.0", "memory_peak_mb": "12000.0",
             "memory_at_peak": at_peak(9000000000, 1000000000, 16 * GiB, 1000000, 0, 123456789),
             "memory_events": EVENTS_V2}),
    "cg-bare-host": dict(
        container={}, version=2,
        dir="sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope", limiting_dir=None,
        cpu_limiting_dir=None, memory_limit_bytes=None, cpu_limit_cores=None,
        why="v2 cgroup /user.slice/user-1000.slice/session-2.scope, no memory limit, "
            "no cpu limit",
        tag="none: no limit",
        note="no cgroup limit (v2 cgroup /user.slice/user-1000.slice/session-2.scope, "
             "no memory limit, no cpu limit): container_* absent",
        end=None),
    "cg-cpu-only": dict(
        container={CPU_PCT: 0.0}, version=2, dir="sys/fs/cgroup", limiting_dir=None,
        cpu_limiting_dir="sys/fs/cgroup", memory_limit_bytes=None,
        cpu_limit_cores=250000 / 100000,
        why="v2 cgroup /, no memory limit, cpu limit 2.5 cores (quota) at /",
        tag="v2 / cpu=2.5", note=CPU_ONLY_NOTE + "; no PSI (cpu.pressure: No such file or "
        "directory): container_cpu_pressure_percentage absent",
        end={"cpu_throttled_periods": "0", "cpu_throttled_s": "0.0"}),
    "cg-mem-above-total": dict(
        container={}, version=2, dir="sys/fs/cgroup", limiting_dir=None, cpu_limiting_dir=None,
        memory_limit_bytes=None, cpu_limit_cores=None,
        why="v2 cgroup /, no memory limit (600.0 GiB at / is not below MemTotal 503.0 GiB), "
            "no cpu limit",
        tag="none: no limit",
        note="no cgroup limit (v2 cgroup /, no memory limit (600.0 GiB at / is not below "
             "MemTotal 503.0 GiB), no cpu limit): container_* absent",
        end=None),
    "cg-systemd-slice": dict(
        container={MEM_MB: ws(20000000000, 4000000000) / 1e6,
                   MEM_PCT: 100.0 * ws(20000000000, 4000000000) / (32 * GiB),
                   CPU_PCT: 0.0, **parts(20000000000, 4000000000, 1000000, 0, 123456789)},
        version=2, dir="sys/fs/cgroup/training.slice/trainer.service",
        limiting_dir="sys/fs/cgroup/training.slice",
        cpu_limiting_dir="sys/fs/cgroup/training.slice",
        memory_limit_bytes=32 * GiB, cpu_limit_cores=400000 / 100000,
        why="v2 cgroup /training.slice/trainer.service, memory limit 32.0 GiB at "
            "/training.slice, cpu limit 4.0 cores (quota) at /training.slice",
        tag="v2 /training.slice/trainer.service mem=32.0GiB cpu=4.0", note=NO_PSI_V2,
        end={"oom_kill": "0", "mem_peak_sampled_mb": "16000.0",
             "cpu_throttled_periods": "0", "cpu_throttled_s": "0.0",
             "memory_at_peak": at_peak(20000000000, 4000000000, 32 * GiB, 1000000, 0,
                                       123456789),
             "memory_events": EVENTS_V2}),
    "cg-escaped-mount": dict(
        container={MEM_MB: ws(600000000, 100000000) / 1e6,
                   MEM_PCT: 100.0 * ws(600000000, 100000000) / GiB,
                   **parts(600000000, 100000000, 1000000, 0, 123456789)},
        version=2, dir="sys/fs/cgroup/my cgroup/task 1",
        limiting_dir="sys/fs/cgroup/my cgroup/task 1", cpu_limiting_dir=None,
        memory_limit_bytes=GiB, cpu_limit_cores=None,
        why="v2 cgroup /batch job/task 1 (mount root /batch job), memory limit 1.0 GiB at "
            "/batch job/task 1, no cpu limit",
        tag="v2 /batch job/task 1 mem=1.0GiB",
        note=MEM_ONLY_NOTE + "; no PSI (memory.pressure: No such file or directory): "
        "container_memory_pressure_percentage absent",
        end={"mem_peak_sampled_mb": "500.0",
             "memory_at_peak": at_peak(600000000, 100000000, GiB, 1000000, 0, 123456789)}),
}

NOT_FOUND = {
    "cg-deleted": "the process's cgroup /kubepods/pod1/ctr was deleted "
                  "(/proc/self/cgroup says so)",
    "cg-outside-root": "cgroup /docker/xyz is not under the mount root /docker/abc of "
                       "/sys/fs/cgroup/memory: not visible",
}


def check_common(out, name):
    assert out["rank"] == 0 and out["node"] is None
    keys = {s["key"] for s in out["series"]}
    for s in out["series"]:
        assert s["value"] == round(s["raw"], 1), s
    vals = {s["key"]: s["raw"] for s in out["series"]}
    for k, v in NODE_AND_POD.items():
        assert vals[k] == pytest.approx(v, rel=1e-12, abs=1e-12), (name, k)
    assert ROOTFS <= keys
    assert GPU_NOTE in out["notes"] and NODE_NOTE in out["notes"]
    return keys, vals


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture(probe_json, name):
    want = CASES[name]
    root = fx(name)
    out = probe_json(sysroot=root)
    keys, vals = check_common(out, name)

    # exactly these series: node, rootfs, network, and the container ones
    disk = {DISK_R, DISK_W} if name in DISK_FILE else set()
    assert keys == set(NODE_AND_POD) | ROOTFS | set(want["container"]) | disk, name
    for k in disk:
        s = next(s for s in out["series"] if s["key"] == k)
        assert s["raw"] == 0.0 and s["scope"] == "container" and s["unit"] == "MB"
        v2 = DISK_FILE[name].endswith("io.stat")
        assert s["source"] == DISK_FILE[name] + ":" + (
            ("rbytes" if v2 else "Read") if k == DISK_R else ("wbytes" if v2 else "Write"))
    for k, v in want["container"].items():
        assert vals[k] == pytest.approx(v, rel=1e-12, abs=1e-12), (name, k)
        s = next(s for s in out["series"] if s["key"] == k)
        assert s["scope"] == "container" and s["upstream"] == k.split("/")[1]
        assert s["unit"] == ("MB" if k.split("/")[1].endswith("_megabytes") else "percent")

    cg = out["cgroup"]

    def full(rel):
        return None if rel is None else os.path.join(root, rel)

    assert cg == {
        "found": True,
        "version": want["version"],
        "dir": full(want["dir"]),
        "limiting_dir": full(want["limiting_dir"]),
        "cpu_limiting_dir": full(want["cpu_limiting_dir"]),
        "memory_limit_bytes": want["memory_limit_bytes"],
        "cpu_limit_cores": want["cpu_limit_cores"],
        "why": want["why"],
        "tag": want["tag"],
    }
    assert out["tags"]["scopemeter.rank0.cgroup"] == want["tag"]
    container_notes = [n for n in out["notes"] if "container" in n or "cgroup" in n]
    assert container_notes == ([want["note"]] if want["note"] else [])
    # the container collector's lines are informational: nothing on stderr
    assert "container" not in out["_stderr"]


@pytest.mark.parametrize("name", sorted(NOT_FOUND))
def test_fixture_not_found(probe_json, name):
    out = probe_json(sysroot=fx(name))
    keys, _ = check_common(out, name)
    assert keys == set(NODE_AND_POD) | ROOTFS
    why = NOT_FOUND[name]
    assert out["cgroup"] == {
        "found": False, "version": None, "dir": None, "limiting_dir": None,
        "cpu_limiting_dir": None, "memory_limit_bytes": None, "cpu_limit_cores": None,
        "why": why, "tag": "none: " + why,
    }
    assert out["tags"]["scopemeter.rank0.cgroup"] == "none: " + why
    assert f"cgroup: {why}; container_* dropped" in out["notes"]


def cg_driver():
    build = os.environ.get("SCOPEMETER_BUILD")
    if not build and os.environ.get("SCOPEMETER_BIN"):
        build = os.path.dirname(os.path.dirname(os.environ["SCOPEMETER_BIN"]))
    path = os.path.join(build or os.path.join(ROOT, "build"), "tests", "tools", "cg_driver")
    if not os.access(path, os.X_OK):
        pytest.fail(f"cg_driver not built at {path} (meson compile builds it)")
    return path


def drive(commands, sysroot=None, preexec_fn=None):
    """Runs cg_driver with commands on stdin; returns its output lines."""
    env = clean_env(SCOPEMETER_SYSROOT=sysroot)
    p = subprocess.run([cg_driver()], input="".join(c + "\n" for c in commands), env=env,
                       capture_output=True, text=True, timeout=120, preexec_fn=preexec_fn)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def parse_tags(lines):
    return {ln.split(" ", 2)[1]: ln.split(" ", 2)[2] for ln in lines if ln.startswith("tag ")}


@pytest.mark.parametrize("name", sorted(n for n in CASES if CASES[n]["end"] is not None))
def test_fixture_end_tags(name):
    lines = drive(["sample", "tags end"], sysroot=fx(name))
    assert lines[0] == "open 0" and lines[1] == "status " + CASES[name]["tag"]
    end = dict(CASES[name]["end"])
    # The fixture's kernel peak (memory_peak_mb: its memory.peak or
    # max_usage_in_bytes) lies above every sample and its files never move,
    # and nothing is written under a sysroot: a peak that predates the run and
    # was never passed is not this run's, so it is not tagged (docs/cgroup.md)
    kernel_peak = end.pop("memory_peak_mb", None)
    if kernel_peak is not None:
        assert float(kernel_peak) > float(end["mem_peak_sampled_mb"]), end
    assert parse_tags(lines) == end


@pytest.mark.parametrize("name,limit", [("cg-v1-cpuacct-apart", "300 MiB"),
                                        ("cg-docker-v1-hostns", "2.0 GiB")])
def test_probe_text_says_the_memory_limit_in_one_unit(scopemeter_bin, name, limit):
    """Issue 46 item 13: probe's header said "memory limit 300 MiB" and its
    detail "0.3 GiB" of the same limit; both now say the header's unit (MiB
    below 1 GiB, docs/cgroup.md)."""
    p = subprocess.run([scopemeter_bin, "probe", "--interval", "0"],
                       env=clean_env(SCOPEMETER_SYSROOT=fx(name)), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    head = [ln for ln in p.stdout.splitlines() if ln.startswith("cgroup: ")]
    detail = [ln.strip() for ln in p.stdout.splitlines() if ln.startswith("  memory limit ")]
    assert len(head) == 1 and f"memory limit {limit} at " in head[0], p.stdout
    assert len(detail) == 1 and detail[0].startswith(f"memory limit {limit} at "), p.stdout
