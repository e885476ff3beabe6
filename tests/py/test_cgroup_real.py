"""The container collector on the real kernel (cgroup v1 here; v2 is covered
by the fixtures of test_fixtures.py).  Needs root and a v1 memory controller;
skips with the reason otherwise.

- A child moves itself into fresh memory and cpu/cpuacct cgroups (limit
  512 MiB, quota 0.5 core) before it allocates and touches 200 MB, then runs
  `scopemeter probe` there: the working set and the limit must match what
  memory.usage_in_bytes - memory.stat:total_inactive_file and
  memory.limit_in_bytes say, the CPU limit must be quota/period.
- A deliberate OOM in a 64 MiB cgroup: tests/tools/cg_driver (the container
  collector itself) must count it in its oom_kill end tag.
- Limits the display tag rounds (an odd byte count, 1/6 core): the start
  tags carry them exactly, as the kernel's files say (docs/design.md §3).
- A cgroup removed under an open collector: one failed sample naming the
  file; when the cgroup comes back, the series resume.
- This process's own cgroup: what `scopemeter probe` says must agree with a
  walk over the same files done here.
Every cgroup made here is removed in a finally block.
"""
import json
import os
import subprocess
import sys
import time

import pytest

from conftest import clean_env, is_root
from runread import read_line
from test_fixtures import cg_driver

V1_UNLIMITED = 1 << 62
MiB = 1 << 20


def unescape(s):
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 3 < len(s) + 0 and s[i + 1:i + 4].isdigit():
            out.append(chr(int(s[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def v1_mounts():
    """controller -> (mount point, mount root) of the v1 hierarchies, preferring
    mounts under /sys/fs/cgroup."""
    found = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.rstrip("\n").split(" - ", 1)
            fields = left.split(" ")
            fstype, _source, sup = right.split(" ", 2)
            if fstype != "cgroup":
                continue
            point, root = unescape(fields[4]), unescape(fields[3])
            for ctl in sup.split(","):
                if ctl in ("memory", "cpu", "cpuacct"):
                    old = found.get(ctl)
                    if old is None or (point.startswith("/sys/fs/cgroup/") and
                                       not old[0].startswith("/sys/fs/cgroup/")):
                        found[ctl] = (point, root)
    return found


def own_paths(pid="self"):
    paths = {}
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            hid, ctls, path = line.rstrip("\n").split(":", 2)
            for c in ctls.split(","):
                paths[c] = path
    return paths


MOUNTS = v1_mounts() if os.path.exists("/proc/self/mountinfo") else {}
pytestmark = [
    pytest.mark.skipif(not is_root(), reason="needs root to create cgroups"),
    pytest.mark.skipif("memory" not in MOUNTS,
                       reason="no cgroup v1 memory controller mounted (v2 is covered by "
                              "the fixtures of test_fixtures.py)"),
]


def read(path):
    with open(path) as f:
        return f.read()


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def kernel_ws(memdir):
    usage = int(read(f"{memdir}/memory.usage_in_bytes"))
    stat = dict(line.split() for line in read(f"{memdir}/memory.stat").splitlines())
    return max(0, usage - int(stat["total_inactive_file"]))


class Cgroups:
    """Fresh v1 cgroups named sm-test-<pid>-<tag> in the memory, cpu and cpuacct
    hierarchies (one directory when cpu and cpuacct share a mount)."""

    def __init__(self, tag):
        self.name = f"sm-test-{os.getpid()}-{tag}"
        self.dirs = {}
        for ctl in ("memory", "cpu", "cpuacct"):
            if ctl not in MOUNTS:
                continue
            point, root = MOUNTS[ctl]
            if root != "/":
                pytest.skip(f"the {ctl} hierarchy is mounted from {root}, not its root")
            self.dirs[ctl] = os.path.join(point, self.name)

    def create(self):
        for d in sorted(set(self.dirs.values())):
            os.makedirs(d, exist_ok=True)
        return self

    def enter(self):
        """For preexec_fn: move the calling process into every hierarchy."""
        for d in sorted(set(self.dirs.values())):
            write(f"{d}/cgroup.procs", str(os.getpid()))

    def remove(self):
        for ctl, d in self.dirs.items():
            if not os.path.isdir(d):
                continue
            parent = MOUNTS[ctl][0]
            for _ in range(50):
                try:
                    pids = read(f"{d}/cgroup.procs").split()
                except OSError:
                    break
                for pid in pids:
                    try:
                        write(f"{parent}/cgroup.procs", pid)
                    except OSError:
                        pass  # exited meanwhile
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)  # a killed task not reaped yet


CHILD = r"""
import json, os, subprocess, sys, threading
bin_, memdir, acctdir, interval, cache = sys.argv[1:6]
b = bytearray(200_000_000)          # after the move: charged to the new cgroup
for i in range(0, len(b), 4096):
    b[i] = 1                        # touched, so it is resident
with open(cache, "wb") as f:        # 64 MiB of page cache on the inactive list:
    f.write(os.urandom(1 << 20) * 64)  # usage counts it, the working set must not
def ws():
    u = int(open(memdir + "/memory.usage_in_bytes").read())
    st = dict(l.split() for l in open(memdir + "/memory.stat"))
    return max(0, u - int(st["total_inactive_file"]))
stop = []
def spin():                         # some CPU for the 0.5-core quota to meter
    while not stop:
        pass
t = threading.Thread(target=spin)
t.start()
before, cpu0 = ws(), int(open(acctdir + "/cpuacct.usage").read())
p = subprocess.run([bin_, "probe", "--json", "--interval", interval],
                   capture_output=True, text=True)
cpu1, after = int(open(acctdir + "/cpuacct.usage").read()), ws()
stop.append(1)
t.join()
st = dict(l.split() for l in open(memdir + "/memory.stat"))
print(json.dumps({"rc": p.returncode, "out": p.stdout, "err": p.stderr, "before": before,
                  "inactive_file": int(st["total_inactive_file"]),
                  "after": after, "cpu0": cpu0, "cpu1": cpu1,
                  "limit": int(open(memdir + "/memory.limit_in_bytes").read()),
                  "cgroup": open("/proc/self/cgroup").read()}))
"""


def series(out):
    return {s["upstream"]: s["raw"] for s in out["series"]}


def test_usage_and_limits_match_the_kernel(scopemeter_bin, tmp_path):
    cg = Cgroups("use")
    if "cpu" not in cg.dirs or "cpuacct" not in cg.dirs:
        pytest.skip("no v1 cpu/cpuacct controllers mounted")
    try:
        cg.create()
        mem, cpu, acct = cg.dirs["memory"], cg.dirs["cpu"], cg.dirs["cpuacct"]
        write(f"{mem}/memory.limit_in_bytes", str(512 * MiB))
        write(f"{cpu}/cpu.cfs_period_us", "100000")
        write(f"{cpu}/cpu.cfs_quota_us", "50000")
        interval = 0.5
        p = subprocess.run([sys.executable, "-c", CHILD, scopemeter_bin, mem, acct,
                            str(interval), str(tmp_path / "cache")],
                           env=clean_env(), capture_output=True, text=True, timeout=120,
                           preexec_fn=cg.enter)
        assert p.returncode == 0, p.stderr
        r = json.loads(p.stdout)
        assert r["rc"] == 0, r["err"]
        assert f"memory:/{cg.name}" in r["cgroup"]  # the child really was inside
        out = json.loads(r["out"])
        s = series(out)
        c = out["cgroup"]

        # the limits, exactly as the kernel's files say
        limit = int(read(f"{mem}/memory.limit_in_bytes"))
        assert limit == r["limit"] == 512 * MiB
        quota = int(read(f"{cpu}/cpu.cfs_quota_us"))
        period = int(read(f"{cpu}/cpu.cfs_period_us"))
        assert c["found"] is True and c["version"] == 1
        assert c["dir"] == mem and c["limiting_dir"] == mem
        assert c["cpu_limiting_dir"] == cpu
        assert c["memory_limit_bytes"] == limit
        assert c["cpu_limit_cores"] == quota / period == 0.5
        assert c["tag"] == f"v1 /{cg.name} mem=512MiB cpu=0.5"
        assert out["tags"]["scopemeter.rank0.cgroup"] == c["tag"]

        # working set: probe read it between the child's two reads; probe's own
        # process (a few MB, charged while it ran) is in its number only
        ws = s["container_memory_usage_megabytes"] * 1e6
        lo, hi = min(r["before"], r["after"]), max(r["before"], r["after"])
        assert lo >= 200_000_000  # the touched 200 MB are all in the working set
        assert r["inactive_file"] >= 48 * MiB  # and usage is well above it
        assert lo - 1 * MiB <= ws <= hi + 32 * MiB, (lo, ws, hi)
        pct = s["container_memory_usage_percentage"]
        assert pct == pytest.approx(100.0 * ws / limit, rel=1e-9)

        # CPU: what probe measured fits inside what cpuacct.usage counted
        # around it, over at least the probe's interval, on 0.5 core
        used_s = (r["cpu1"] - r["cpu0"]) / 1e9
        cpu_pct = s["container_cpu_utilization_percentage"]
        assert 0.0 < cpu_pct <= 100.0 * used_s / (interval * 0.5) + 1e-6
    finally:
        cg.remove()


def drive(cg, commands):
    p = subprocess.run([cg_driver()], input="".join(c + "\n" for c in commands),
                       env=clean_env(), capture_output=True, text=True, timeout=120,
                       preexec_fn=cg.enter)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def test_oom_kill_is_counted():
    cg = Cgroups("oom")
    cg.dirs = {"memory": cg.dirs["memory"]}
    try:
        cg.create()
        mem = cg.dirs["memory"]
        write(f"{mem}/memory.limit_in_bytes", str(64 * MiB))
        if os.path.exists(f"{mem}/memory.memsw.limit_in_bytes"):
            write(f"{mem}/memory.memsw.limit_in_bytes", str(64 * MiB))  # no escape to swap
        oom_ctl = dict(line.split() for line in read(f"{mem}/memory.oom_control").splitlines())
        if "oom_kill" not in oom_ctl:
            pytest.skip("this kernel has no memory.oom_control:oom_kill (before 4.13)")
        assert int(oom_ctl["oom_kill"]) == 0
        hog = f"{sys.executable} -c 'b = b\"x\" * 256_000_000'"  # one line: a driver command
        lines = drive(cg, ["sample", "run exec " + hog, "sample", "tags end"])
        assert lines[0] == "open 0", lines
        assert lines[1] == f"status v1 /{cg.name} mem=64MiB"
        assert "signal 9" in lines, lines  # the kernel killed the hog
        kernel = int(dict(line.split() for line in
                          read(f"{mem}/memory.oom_control").splitlines())["oom_kill"])
        assert kernel >= 1
        tags = {ln.split(" ", 2)[1]: ln.split(" ", 2)[2] for ln in lines if ln.startswith("tag ")}
        assert tags["oom_kill"] == str(kernel)  # counted during the run: end - 0
        # the kernel's peak includes the hog's pages up to the limit
        assert float(tags["memory_peak_mb"]) == pytest.approx(
            int(read(f"{mem}/memory.max_usage_in_bytes")) / 1e6, abs=0.05)
        assert float(tags["memory_peak_mb"]) >= float(tags["mem_peak_sampled_mb"])
    finally:
        cg.remove()


def test_start_tags_carry_the_exact_limits():
    """memory.limit_in_bytes written as 1000000007 (the kernel keeps a
    multiple of the page size) and a quota of 50000 us per 300000 us: the
    start tags hold the kernel's numbers; the display tag rounds them."""
    cg = Cgroups("exact")
    if "cpu" not in cg.dirs or "cpuacct" not in cg.dirs:
        pytest.skip("no v1 cpu/cpuacct controllers mounted")
    try:
        cg.create()
        mem, cpu = cg.dirs["memory"], cg.dirs["cpu"]
        write(f"{mem}/memory.limit_in_bytes", "1000000007")
        write(f"{cpu}/cpu.cfs_period_us", "300000")
        write(f"{cpu}/cpu.cfs_quota_us", "50000")
        limit = int(read(f"{mem}/memory.limit_in_bytes"))
        assert 999_000_000 < limit <= 1000000007
        lines = drive(cg, ["tags start"])
        assert lines[0] == "open 0", lines
        assert lines[1] == f"status v1 /{cg.name} mem=954MiB cpu=0.17"
        tags = {ln.split(" ", 2)[1]: ln.split(" ", 2)[2] for ln in lines if ln.startswith("tag ")}
        assert tags == {"memory_limit_bytes": str(limit), "cpu_limit_cores": repr(50000 / 300000),
                        "cpu_quota_us": "50000", "cpu_period_us": "300000"}, lines
    finally:
        cg.remove()


def test_cpu_and_cpuacct_apart_give_no_cpu_percentage(scopemeter_bin):
    """Issue 46 item 3, on the real kernel: the process moved into a cpu
    cgroup with a 0.5-core quota but left in its cpuacct cgroup (here the
    root, which counts the whole host).  That cpuacct.usage does not count the
    quota's processes: no container_cpu_utilization_percentage (the old code
    logged cpuacct root / 0.5 core, 4 x node_cpu on 2 CPUs), and probe says
    why in the cgroup line and in one note (docs/cgroup.md §2)."""
    cg = Cgroups("apart")
    if "cpu" not in cg.dirs or "cpuacct" not in cg.dirs:
        pytest.skip("no v1 cpu/cpuacct controllers mounted")
    if MOUNTS["cpu"] == MOUNTS["cpuacct"]:
        pytest.skip("cpu and cpuacct are co-mounted here: the kernel keeps them in one "
                    "hierarchy (fixture cg-v1-cpuacct-apart covers the layout)")
    acct_path = own_paths()["cpuacct"]
    cg.dirs = {"cpu": cg.dirs["cpu"]}  # the cpu hierarchy only
    spin = subprocess.Popen(["sh", "-c", "while :; do :; done"])  # host CPU the root counts
    try:
        cg.create()
        cpu = cg.dirs["cpu"]
        write(f"{cpu}/cpu.cfs_period_us", "100000")
        write(f"{cpu}/cpu.cfs_quota_us", "50000")
        p = subprocess.run([scopemeter_bin, "probe", "--json", "--interval", "0.5"],
                           env=clean_env(), capture_output=True, text=True, timeout=120,
                           preexec_fn=cg.enter)
        assert p.returncode == 0, p.stderr
        out = json.loads(p.stdout)
        s = series(out)
        c = out["cgroup"]
        assert c["cpu_limit_cores"] == 0.5 and c["cpu_limiting_dir"] == cpu, c
        why = (f"the cpu limit is at /{cg.name} in the cpu hierarchy, where the process is at "
               f"/{cg.name}, but its cpuacct cgroup is {acct_path}: no cpuacct cgroup counts "
               f"just the processes the limit binds")
        assert "container_cpu_utilization_percentage" not in s, (
            f"{s.get('container_cpu_utilization_percentage')} % of 0.5 core read from the "
            f"cpuacct cgroup {acct_path}; node CPU {s.get('cpu_utilization_percentage')} %")
        assert f"no cpu usage ({why})" in c["why"], c["why"]
        notes = [n for n in out["notes"] if "CPU usage" in n]
        # "container_* absent" where the memory cgroup has no limit either
        assert len(notes) == 1 and f"({why})" in notes[0] and "absent" in notes[0], out["notes"]
    finally:
        spin.kill()
        spin.wait()
        cg.remove()


def test_removed_cgroup_fails_once_and_resumes():
    cg = Cgroups("gone")
    cg.dirs = {"memory": cg.dirs["memory"]}
    mem = cg.dirs["memory"]
    parent = MOUNTS["memory"][0]
    proc = None
    try:
        cg.create()
        write(f"{mem}/memory.limit_in_bytes", str(256 * MiB))
        proc = subprocess.Popen([cg_driver()], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=clean_env(),
                                preexec_fn=cg.enter)

        def cmd(c, until):
            proc.stdin.write(c + "\n")
            proc.stdin.flush()
            got = []
            deadline = time.monotonic() + 60  # a driver that stops answering fails, not hangs
            while True:
                line = read_line(proc.stdout, max(0.0, deadline - time.monotonic()))
                assert line, got
                got.append(line.rstrip("\n"))
                if line.startswith(until):
                    return got

        start = [read_line(proc.stdout).rstrip("\n") for _ in range(4)]
        assert start[0] == "open 0" and start[3] == "ready", start
        assert cmd("sample", "sample ")[-1] == "sample 0 "
        # move the driver out, remove its cgroup under the open descriptors
        write(f"{parent}/cgroup.procs", str(proc.pid))
        os.rmdir(mem)
        got = cmd("sample", "sample ")
        assert got[-1].startswith("sample -"), got
        assert f"cannot read {mem}/memory.usage_in_bytes" in got[-1]
        # it comes back (a new cgroup of the same name): the series resume
        os.mkdir(mem)
        got = cmd("sample", "sample ")
        assert got[-1] == "sample 0 ", got
        assert any(g.startswith("point container_memory_usage_megabytes ") for g in got)
        proc.stdin.write("quit\n")
        proc.stdin.flush()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        cg.remove()


def test_probe_on_this_machine(probe_json):
    """The real probe, here, says what a walk over the same files says."""
    out = probe_json()
    c = out["cgroup"]
    path = own_paths()["memory"]
    point, root = MOUNTS["memory"]
    assert root == "/" or path == root or path.startswith(root + "/")
    rel = path[len(root):] if root != "/" else path
    own = point + (rel if rel != "/" else "")
    assert c["found"] is True and c["version"] == 1
    assert c["dir"] == own

    mem_total = int(read("/proc/meminfo").split("MemTotal:")[1].split()[0]) * 1024
    best, best_dir, d = 0, None, own
    while True:  # own level up to the mount point; ties go to the higher level
        try:
            v = int(read(f"{d}/memory.limit_in_bytes"))
        except FileNotFoundError:
            v = None
        if v and v < V1_UNLIMITED and v < mem_total and (not best or v <= best):
            best, best_dir = v, d
        if d == point:
            break
        d = os.path.dirname(d)
    s = series(out)
    if best:
        assert c["memory_limit_bytes"] == best and c["limiting_dir"] == best_dir
        assert c["tag"].startswith(f"v1 {path} mem=")
        assert "container_memory_usage_megabytes" in s
    else:
        assert c["memory_limit_bytes"] is None and c["limiting_dir"] is None
        assert "container_memory_usage_megabytes" not in s
        if c["cpu_limit_cores"] is None:
            assert c["tag"] == "none: no limit"
            assert not any(k.startswith("container_") for k in s)
            assert any(n.startswith(f"no cgroup limit (v1 cgroup {path}, no memory limit")
                       for n in out["notes"])
