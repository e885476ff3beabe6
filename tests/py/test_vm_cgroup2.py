"""scopemeter on a real cgroup v2 kernel: Debian's kernel in a QEMU guest
(tests/vm/guest.py; this machine is cgroup v1, so without the guest every v2
path would rest on hand-written fixtures).  docs/cgroup.md §7 says what these
cases taught.

One boot runs three scripts, each of many cases (tests/vm/cases.sh,
tests/vm/oom.sh, tests/vm/whatfilled.sh), one after the other;
every case compares what scopemeter said (probe --json, or the JSONL of
`scopemeter run`) with the kernel's own files read around it in the same
guest, with real allocations inside the cgroup (tests/vm/alloc.c, python3):

- a Kubernetes-like container (own cgroup namespace and cgroup2 mount,
  container limit below the pod's, half a core of cpu.max, a busy loop):
  /proc/self/cgroup reads 0::/, the limits are the container's;
- a Slurm-like task (limit on job_12 only, above step_0/user/task_0), a
  systemd-like slice limit, a cpuset-only limit, no limit (no container_*);
- memory.peak against the peak tag: on this kernel memory.peak is the
  cgroup's peak since its creation, not the run's, and cannot be reset (a
  per-descriptor reset came with 6.12): a run that never passes an earlier
  peak gets no memory_peak_mb (issue 46 item 10);
- two pods (two netns + two cgroups) running at once: each rank's network_*
  is its own namespace's bytes, its container_* its own cgroup's;
- the OOM runs: ten times python3 allocating 400 MB in a 120M cgroup (every
  run survives and records oom_kill, the peak tags, the last window, exit
  status 137); memory that belongs to no process filling the cgroup (the
  kernel ranks the live processes by size: scopemeter's lowered
  oom_score_adj keeps it out of the way, and without CAP_SYS_RESOURCE it is
  the victim); such a file left in place, the recorder the last process in
  a full cgroup (its reserve, not it, is what the kernel may take then);
  memory.oom.group=1 (everything in the cgroup dies); the
  Python front's companion ending an OOM-killed process from memory.events.

- what filled the pod (docs/design.md §9, tests/vm/whatfilled.sh, the third
  script): 100 MB on a tmpfs and 60 MiB anonymous in a limited cgroup against
  memory.stat (the parts, adding up, shmem the largest); memory.high below
  what a job holds and two busy loops on one CPU: memory.events high, the
  memory and CPU pressure series and tags above 0, the window tags in the
  JSONL before the last window's points; disk I/O on the boot's virtio disk
  (ext4) against the cgroup's io.stat (200 MiB fsync-ed, 100 MiB O_DIRECT
  read, 100 MiB written back by the root cgroup's sync: v2 cgroup
  writeback); scopemeter run and CMD OOM-killed together (memory.oom.group):
  the window tags were in the JSONL before the kill.

The guest not booting is a failure (GuestError), never a skip.  Boots here
take about 7 s; the cases run under TCG: about 80 s for cases.sh, 96 s for
the OOM runs and 75 s for whatfilled.sh on this machine's two shared cores.
Once the boot took three (a boot and its staging per script).
"""
import json
import os
import re
import shutil
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "vm"))
import guest  # noqa: E402  (tests/vm/guest.py)

# the first test also pays for the boot (guest_out: up to 1500 s)
pytestmark = [pytest.mark.vm, pytest.mark.timeout(1800)]

MB = 1e6
MiB = 1 << 20
# The probe runs inside the cgroup it measures: its own charge (heap, stack,
# kernel objects; the binary itself is on tmpfs charged elsewhere) is in the
# kernel's memory.current while it samples and not before or after.  Bound
# on that share, for the comparison with the files read around it.
PROBE_SHARE = 8 * MB


# The three scripts, one after the other in one boot (a boot and the
# staging cost about as much as a script's cases on a loaded machine): each
# in its own subdirectory of the export (lib.sh's OUT), with its own log and
# exit status, as if it had the guest alone.  Their cgroups, cases and
# results have distinct names; each creates its own cgroups, so what one
# measures is its own (oom.sh clears the kernel log before each run).
SCRIPTS = [("cases", "cases.sh"), ("oom", "oom.sh"), ("filled", "whatfilled.sh")]
RUN_ALL = """set -u
for name in %s; do
  echo "== $name $(cut -d' ' -f1 /proc/uptime)"
  (cd /tmp/out/$name && OUT=/tmp/out/$name exec /bin/bash ./script.sh) \\
    > /tmp/out/$name/script.log 2>&1
  echo $? > /tmp/out/$name/script.rc
done
echo "== done $(cut -d' ' -f1 /proc/uptime)"
""" % " ".join(name for name, _ in SCRIPTS)


@pytest.fixture(scope="session")
def guest_out(tmp_path_factory, scopemeter_bin):
    """One boot for every VM test: the export's directory, a subdirectory per
    script (staged: bin/, lib.sh, vm/), and the virtio disk of whatfilled.sh's
    disk case (512 MB sparse, ext4 made here) attached.  The guest not
    finishing is a GuestError for every test; a script's own failure is its
    tests' (script_dir)."""
    out = str(tmp_path_factory.mktemp("vm"))
    for name, script in SCRIPTS:
        d = os.path.join(out, name)
        guest.stage(d, scopemeter_bin)
        shutil.copy(os.path.join(guest.HERE, script), os.path.join(d, "script.sh"))
    img = guest.disk(str(tmp_path_factory.mktemp("vm-disk") / "disk.img"), 512)
    try:
        # the three scripts' time (about 250 s here, more on a loaded machine)
        rc = guest.boot(RUN_ALL, out, timeout=1500, disks=[img])
    finally:
        os.unlink(img)  # 300 MB written in it: not kept with pytest's last three tmp dirs
    assert rc == 0, read(out, "script.log")
    return out


def script_dir(out, name):
    """The results of one script of the boot; its failure fails its tests."""
    d = os.path.join(out, name)
    rc = read(d, "script.rc").strip()
    assert rc == "0", f"{name}: exit status {rc}\n" + read(d, "script.log")[-4000:]
    return d


@pytest.fixture(scope="module")
def cases(guest_out):
    return script_dir(guest_out, "cases")


@pytest.fixture(scope="module")
def ooms(guest_out):
    return script_dir(guest_out, "oom")


def read(*parts):
    with open(os.path.join(*parts)) as f:
        return f.read()


def kv(text, key):
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if k == key:
            return int(v)
    raise KeyError(key)


def working_set(snapdir):
    """memory.current - memory.stat:inactive_file, as the kernel says it."""
    cur = int(read(snapdir, "memory.current"))
    return max(0, cur - kv(read(snapdir, "memory.stat"), "inactive_file"))


def probe(case_dir):
    assert read(case_dir, "rc").strip() == "0", read(case_dir, "probe.err")
    return json.loads(read(case_dir, "probe.json"))


def series(p):
    return {s["key"].split("/")[1]: s for s in p["series"]}


def check_memory(d, p, limit_dir_name):
    """The probe's memory series against the kernel's files of the limiting
    level read just before and just after it, the same allocation held."""
    s = series(p)
    before, after = working_set(os.path.join(d, limit_dir_name + "_before")), \
        working_set(os.path.join(d, limit_dir_name + "_after"))
    limit = int(read(d, limit_dir_name + "_before", "memory.max"))
    ws = s["container_memory_usage_megabytes"]["raw"] * MB
    assert min(before, after) <= ws <= max(before, after) + PROBE_SHARE, (before, ws, after)
    assert p["cgroup"]["memory_limit_bytes"] == limit
    assert s["container_memory_usage_percentage"]["raw"] == pytest.approx(100 * ws / limit,
                                                                         rel=1e-6)
    return ws


# ---- the cases of one boot -------------------------------------------------------


def test_kubernetes_like_container_own_cgroupns(cases):
    d = os.path.join(cases, "k8s")
    assert read(d, "rc").strip() == "0"
    assert read(d, "proc_self_cgroup") == "0::/\n"
    p = probe(d)
    c = p["cgroup"]
    # the container's own limit (200M), not the pod's (300M, invisible in the namespace)
    assert c["version"] == 2 and c["dir"] == "/sys/fs/cgroup"
    assert c["limiting_dir"] == "/sys/fs/cgroup" and c["cpu_limiting_dir"] == "/sys/fs/cgroup"
    assert read(d, "limit_before", "cpu.max") == "50000 100000\n"
    assert c["cpu_limit_cores"] == 0.5
    assert c["tag"] == "v2 / mem=200MiB cpu=0.5"
    ws = check_memory(d, p, "limit")
    assert ws >= 100 * 2**20  # the allocation (100 MiB) is in it
    s = series(p)
    cpu = s["container_cpu_utilization_percentage"]
    assert cpu["source"] == "/sys/fs/cgroup/cpu.stat:usage_usec, cpu.max"
    # a busy loop under half a core: the kernel throttled it and counted the
    # time; scopemeter saw CPU being used against the 0.5-core limit
    k0, k1 = read(d, "limit_before", "cpu.stat"), read(d, "limit_after", "cpu.stat")
    assert kv(k1, "nr_throttled") > kv(k0, "nr_throttled")
    assert kv(k1, "usage_usec") > kv(k0, "usage_usec")
    assert cpu["raw"] > 0


def test_slurm_like_task_limit_on_the_job(cases):
    d = os.path.join(cases, "slurm")
    p = probe(d)
    c = p["cgroup"]
    job = "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_12"
    assert read(d, "proc_self_cgroup") == \
        "0::/system.slice/slurmstepd.scope/job_12/step_0/user/task_0\n"
    assert c["dir"] == job + "/step_0/user/task_0"
    assert c["limiting_dir"] == job and c["cpu_limit_cores"] is None
    assert c["tag"] == "v2 /system.slice/slurmstepd.scope/job_12/step_0/user/task_0 mem=150MiB"
    check_memory(d, p, "limit")
    s = series(p)
    assert s["container_memory_usage_megabytes"]["source"] == \
        job + "/memory.current - memory.stat:inactive_file"
    assert "container_cpu_utilization_percentage" not in s
    assert any("memory limit only, no CPU limit" in n for n in p["notes"])


def test_systemd_like_slice_limit(cases):
    d = os.path.join(cases, "slice")
    p = probe(d)
    c = p["cgroup"]
    sl = "/sys/fs/cgroup/workload.slice"
    assert c["dir"] == sl + "/train.service"
    assert c["limiting_dir"] == sl and c["cpu_limiting_dir"] == sl
    assert c["cpu_limit_cores"] == 1.5  # cpu.max 150000 100000 on the slice
    assert c["tag"] == "v2 /workload.slice/train.service mem=180MiB cpu=1.5"
    check_memory(d, p, "limit")
    cpu = series(p)["container_cpu_utilization_percentage"]
    assert cpu["source"] == sl + "/cpu.stat:usage_usec, cpu.max"


def test_cpuset_only_limit(cases):
    d = os.path.join(cases, "cpuset")
    p = probe(d)
    c = p["cgroup"]
    assert read(d, "own_before", "cpuset.cpus.effective") == "1\n"
    assert read(d, "own_before", "memory.max") == "max\n"
    assert read(d, "own_before", "cpu.max").startswith("max ")
    assert c["cpu_limit_cores"] == 1.0 and c["memory_limit_bytes"] is None
    assert c["tag"] == "v2 /cpusetonly cpu=1.0"
    assert "cpuset: 1 of 2 CPUs" in c["why"]
    s = series(p)
    # a CPU limit alone: the CPU series, and its pressure where the guest has
    # PSI (docs/design.md §9; the guest's kernel has it)
    assert [k for k in s if k.startswith("container_")] == \
        ["container_cpu_utilization_percentage"] + \
        (["container_cpu_pressure_percentage"] if psi_in_guest(cases) else [])


def test_no_limit_no_container_series(cases):
    d = os.path.join(cases, "nolimit")
    p = probe(d)
    assert p["cgroup"]["tag"] == "none: no limit"
    assert not [k for k in series(p) if k.startswith("container_")]
    assert any(n.startswith("no cgroup limit (v2 cgroup /nolimit") for n in p["notes"])


def jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def tags(recs):
    return {r["key"]: r["value"] for r in recs if r["kind"] == "tag"}


def metric(recs, name):
    return [r for r in recs if r["kind"] == "metric" and r["key"].split("/")[1] == name]


def test_an_earlier_memory_peak_is_not_the_runs(cases):
    d = os.path.join(cases, "peak")
    err = read(d, "run.err")
    assert read(d, "rc").strip() == "0", err
    recs = jsonl(os.path.join(d, "run.jsonl"))
    t = tags(recs)
    earlier = int(read(d, "before", "memory.peak"))  # 150 MiB allocated before the run
    after = int(read(d, "after", "memory.peak"))
    assert earlier >= 150 * 2**20
    # memory.peak never went down and the run's allocation (60 MiB) did not
    # raise it: the lifetime peak, an earlier job's, is not tagged as the
    # run's (before issue 46 it was), and the start line says why
    assert after == earlier
    assert "scopemeter.rank0.memory_peak_mb" not in t, t
    said = [ln for ln in err.splitlines() if "may predate the run" in ln]
    assert len(said) == 1 and "cannot be reset here" in said[0], err
    # the sampled peak is the run's own: the held 60 MiB, the kernel's
    # working set while it was held
    sampled = float(t["scopemeter.rank0.mem_peak_sampled_mb"])
    held = working_set(os.path.join(d, "during"))
    assert 60 * 2**20 / MB <= sampled < earlier / MB
    assert held / MB - 1 <= sampled <= held / MB + PROBE_SHARE / MB
    assert t["scopemeter.rank0.oom_kill"] == "0"


def netdev_total(text, col):
    """Sum over interfaces of /proc/net/dev column col (0 rx bytes, 8 tx bytes)."""
    total = 0
    for line in text.splitlines()[2:]:
        _, _, rest = line.partition(":")
        total += int(rest.split()[col])
    return total


def test_two_pods_distinct_network_and_container_values(cases):
    d = os.path.join(cases, "pods")
    seen = {}
    for rank, mb, mem in ((0, 4, 150), (1, 24, 250)):
        assert read(d, "rc%d" % rank).strip() == "0", read(d, "rank%d.err" % rank)
        recs = jsonl(os.path.join(d, "rank%d.jsonl" % rank))
        keys = {r["key"] for r in recs if r["kind"] == "metric"}
        assert all(k.endswith("/rank%d" % rank) for k in keys), keys
        t = tags(recs)
        assert t["scopemeter.rank%d.cgroup" % rank] == "v2 /pod%d mem=%dMiB" % (rank, mem)
        for col, name in ((0, "network_receive_megabytes"), (8, "network_transmit_megabytes")):
            k0 = netdev_total(read(d, "netdev%d.before" % rank), col)
            k1 = netdev_total(read(d, "netdev%d.after" % rank), col)
            last = metric(recs, name)[-1]["value"]
            # the namespace's own bytes over the run, nothing of the other pod's
            assert last == pytest.approx(round((k1 - k0) / MB, 1), abs=0.05001), (name, k0, k1)
            assert (k1 - k0) / MB >= mb
            seen[(rank, name)] = last
        ws = metric(recs, "container_memory_usage_megabytes")
        pct = metric(recs, "container_memory_usage_percentage")
        assert ws and pct
        # within one window both come from the same sample: pct = ws / limit
        for w, p in zip(ws, pct):
            assert p["value"] == pytest.approx(100 * w["value"] * MB / (mem * 2**20), abs=0.11)
        peak = int(read(d, "cg%d" % rank, "memory.peak"))
        assert float(t["scopemeter.rank%d.memory_peak_mb" % rank]) == \
            pytest.approx(peak / MB, abs=0.051)
    assert seen[(1, "network_receive_megabytes")] > seen[(0, "network_receive_megabytes")] + 15


# ---- the OOM runs (oom.sh) ---------------------------------------------


def oom_run(ooms, name):
    d = os.path.join(ooms, name)
    err = read(d, "run.err")
    return d, int(read(d, "rc")), err, jsonl(os.path.join(d, "run.jsonl")), \
        read(d, "oom_lines")


def killed(oom_lines):
    return re.findall(r"Killed process \d+ \((\S+)\)", oom_lines)


def closing(err):
    m = re.search(r"logged (\d+) windows?", err)
    return int(m.group(1)) if m else None


def test_run_survives_its_childs_oom_kill_ten_of_ten(ooms):
    """The 120M / 400 MB case ten times: every run carries oom_kill (equal to
    the kernel's memory.events), both peak tags, its last window, and exits
    137 like the OOM-killed python3."""
    bad = []
    for i in range(1, 11):
        d, rc, err, recs, lines = oom_run(ooms, "rep%d" % i)
        t = tags(recs)
        ev0 = kv(read(d, "before", "memory.events"), "oom_kill")
        ev1 = kv(read(d, "after", "memory.events"), "oom_kill")
        windows = closing(err)
        steps = {r["step"] for r in recs if r["kind"] == "metric"}
        got = {
            "rc": rc, "killed": killed(lines), "windows": windows, "steps": len(steps),
            "oom_kill": t.get("scopemeter.rank0.oom_kill"),
            "peak": t.get("scopemeter.rank0.memory_peak_mb"),
            "kernel_peak": "%.1f" % (int(read(d, "after", "memory.peak")) / MB),
            "sampled": t.get("scopemeter.rank0.mem_peak_sampled_mb"),
        }
        ok = (rc == 137 and "scopemeter" not in got["killed"] and "python3" in got["killed"]
              and got["oom_kill"] is not None and int(got["oom_kill"]) == ev1 - ev0 >= 1
              and got["peak"] == got["kernel_peak"] and got["sampled"] is not None
              and windows is not None and windows == len(steps) == max(steps) + 1)
        if not ok:
            bad.append((i, got, err[-600:]))
    assert not bad, bad


def test_memory_of_no_process_fills_the_cgroup_scopemeter_is_not_the_victim(ooms):
    """A tmpfs file fills the cgroup and the process that writes it is tiny:
    the kernel picks among the live processes by their own size, where
    scopemeter (a few MB) outweighs a shell or `head`.  scopemeter runs at
    oom_score_adj -999 and gives CMD its own value back, so CMD's processes
    go first and the run is recorded.  (CMD's shell, which removes the file
    after, holds -500, still above scopemeter: tests/vm/oom.sh says why.)"""
    for i in (1, 2, 3):
        d, rc, err, recs, lines = oom_run(ooms, "tmpfs%d" % i)
        assert read(d, "adj_scopemeter").strip() == "-999", err
        assert read(d, "adj_cmd").strip() == "0", err
        victims = killed(lines)
        assert victims and "scopemeter" not in victims, lines
        assert rc in (3, 137), (rc, err)  # head killed (sh goes on), or sh itself
        t = tags(recs)
        assert int(t["scopemeter.rank0.oom_kill"]) >= 1, t
        assert closing(err) is not None, err


def test_without_cap_sys_resource_cmd_is_raised_instead(ooms):
    """What docs/cgroup.md §7 says an unprivileged container sees: scopemeter
    cannot lower its oom_score_adj, so CMD runs raised (one line says so),
    and the kernel takes a process of CMD first: the run keeps its oom_kill
    tag and closing line (the v1 host's case: tests/py/test_oom_order.py)."""
    d, rc, err, recs, lines = oom_run(ooms, "nocap")
    assert read(d, "adj_scopemeter").strip() == "0"
    assert int(read(d, "adj_cmd")) > 0, err
    assert "no CAP_SYS_RESOURCE" in err, err
    victims = killed(lines)
    assert victims and victims[0] == "head" and "scopemeter" not in victims, lines
    assert int(tags(recs).get("scopemeter.rank0.oom_kill", 0)) >= 1, (lines, err)
    assert closing(err) is not None, err


def test_the_file_stays_and_the_recorder_still_ends_the_run(ooms):
    """The issue's reproduction as a user leaves it, on v2: the 200M file stays
    after CMD's processes are taken, the cgroup full with the recorder the last
    process in it.  It writes its end (closing line, oom_kill); if the end
    needed a page the kernel took its reserve, never the recorder, and the run
    said so (docs/cgroup.md §7).  The reserve's oom_score_adj lies between the
    recorder's and CMD's: at the recorder's own value, with only a larger size,
    the recorder grown after the reserve was sized (4.4 MB) was once taken
    instead."""
    d, rc, err, recs, lines = oom_run(ooms, "keep")
    order = [int(read(d, "adj_" + who)) for who in ("scopemeter", "reserve", "cmd")]
    assert order[0] < order[1] < order[2], order
    victims = killed(lines)
    assert victims and "scopemeter" not in victims, (lines, err[-1500:])
    assert rc in (3, 137), (rc, err)  # head taken (sh goes on), or sh itself
    assert int(tags(recs)["scopemeter.rank0.oom_kill"]) >= 1, (lines, err)
    assert closing(err) is not None, err
    assert ("sm-reserve" in victims) == ("recorder's reserve" in err), (lines, err[-1500:])


def test_oom_group_kills_everything_in_the_cgroup(ooms):
    """memory.oom.group=1 (Kubernetes >= 1.28 on v2): the kernel kills every
    process of the cgroup, scopemeter included — no end tags, no closing
    line; what was written before stays."""
    d, rc, err, recs, lines = oom_run(ooms, "group")
    assert read(d, "before", "memory.oom.group") == "1\n"
    assert kv(read(d, "after", "memory.events"), "oom_group_kill") == 1
    victims = killed(lines)
    assert "scopemeter" in victims and "python3" in victims, lines
    assert rc == 137
    assert "scopemeter.rank0.oom_kill" not in tags(recs)
    assert closing(err) is None
    assert "scopemeter.rank0.cgroup" in tags(recs)  # the start tags were written


def test_the_companion_ends_an_oom_killed_process_from_memory_events_v2(ooms):
    """The Python front's companion (docs/design.md §7) on v2: the process it
    watches is OOM-killed in a 120M cgroup; it says oom_kill from the
    cgroup's memory.events (the kernel's count, before against after), the
    kernel's memory.peak as the peak tag, and the run KILLED, in the end it
    hands its writer (a stand-in for MLflow's client: the arguments it got;
    tests/vm/oom.sh)."""
    d = os.path.join(ooms, "companion")
    rc, err, lines = int(read(d, "rc")), read(d, "run.err"), read(d, "oom_lines")
    assert rc == 137 and "python3" in killed(lines), (rc, lines, err[-2000:])
    assert "scopemeter" not in killed(lines), lines
    args = read(d, "end_args").split("\0")
    tags = {args[i + 1]: args[i + 2] for i, a in enumerate(args) if a == "--tag"}
    assert args[args.index("--end") + 1] == "KILLED", args
    assert args[args.index("--reason") + 1] == "oom_kill", args
    ev0 = kv(read(d, "before", "memory.events"), "oom_kill")
    ev1 = kv(read(d, "after", "memory.events"), "oom_kill")
    assert int(tags["scopemeter.rank0.oom_kill"]) == ev1 - ev0 >= 1, (tags, ev0, ev1)
    assert tags["scopemeter.rank0.memory_peak_mb"] == \
        "%.1f" % (int(read(d, "after", "memory.peak")) / MB), tags
    assert tags["scopemeter.rank0.end_reason"] == "oom_kill", tags
    assert tags["scopemeter.rank0.ended_by"] == "companion", tags
    assert "ended without a stop (oom_kill)" in err, err[-2000:]
    # the guest's root holds CAP_SYS_RESOURCE: the companion left the OOM order of
    # its job, its parent kept its own value (cmd_companion.c, docs/cgroup.md §7)
    assert (read(d, "companion.adj").strip(), read(d, "parent.adj").strip()) == ("-999", "0")


# ---- what filled the pod (docs/design.md §9): whatfilled.sh --------------------------


@pytest.fixture(scope="module")
def filled(guest_out):
    return script_dir(guest_out, "filled")


def psi_in_guest(out):
    return read(out, "psi").strip() == "yes"


def memstat(snapdir, key):
    return kv(read(snapdir, "memory.stat"), key)


def test_parts_of_the_working_set_v2(filled):
    """100 MB on a tmpfs and 60 MiB anonymous in a limited cgroup: each part
    within 5 % of memory.stat read around the probe (plus the probe's own
    charge), the four add up to the working set, shmem is the largest."""
    d = os.path.join(filled, "parts")
    p = probe(d)
    s = series(p)
    b, a = os.path.join(d, "before"), os.path.join(d, "after")
    ws = s["container_memory_usage_megabytes"]["raw"] * MB
    parts = {k: s["container_memory_%s_megabytes" % k]["raw"] * MB
             for k in ("anon", "shmem", "file_active", "kernel")}
    assert sum(parts.values()) == pytest.approx(ws, abs=1.0)
    for k, key in (("anon", "anon"), ("shmem", "shmem"), ("file_active", "active_file")):
        lo, hi = sorted((memstat(b, key), memstat(a, key)))
        assert 0.95 * lo - 2 * MB <= parts[k] <= 1.05 * hi + PROBE_SHARE, (k, lo, parts[k], hi)
    assert parts["shmem"] >= 100 * 2**20 * 0.99  # dd wrote 100 MiB to the tmpfs
    assert parts["anon"] >= 60 * 2**20  # alloc holds 60 MiB
    assert parts["shmem"] == max(parts.values()), parts
    assert s["container_memory_shmem_megabytes"]["source"] == "/sys/fs/cgroup/fill/memory.stat:shmem"
    pressure = [k for k in s if k.endswith("_pressure_percentage")]
    if psi_in_guest(filled):
        assert sorted(pressure) == ["container_cpu_pressure_percentage",
                                    "container_memory_pressure_percentage"]
        assert s["container_cpu_pressure_percentage"]["source"] == \
            "/sys/fs/cgroup/fill/cpu.pressure:some total"
    else:
        assert pressure == []
        assert any("no PSI (" in n and "_pressure_percentage absent" in n for n in p["notes"])


def test_memory_high_pressure_and_events_v2(filled):
    """memory.high below what the job holds, two busy loops on one CPU: the
    kernel counted memory.events high; the memory_events tag says so during
    the run (a window tag, before the last window's points) and at the end;
    with PSI the pressure series and tag are above 0."""
    d = os.path.join(filled, "high")
    assert read(d, "rc").strip() == "0", read(d, "run.err")
    recs = jsonl(os.path.join(d, "run.jsonl"))
    t = tags(recs)
    high = kv(read(d, "after", "memory.events"), "high") - \
        kv(read(d, "before", "memory.events"), "high")
    assert high > 0
    ev = dict(x.split("=") for x in t["scopemeter.rank0.memory_events"].split())
    assert list(ev) == ["high", "max", "oom", "oom_kill"]
    assert 0 < int(ev["high"]) <= high and ev["oom_kill"] == "0"
    last_metric = max(i for i, r in enumerate(recs) if r["kind"] == "metric")
    first_ev = min(i for i, r in enumerate(recs)
                   if r["kind"] == "tag" and r["key"] == "scopemeter.rank0.memory_events")
    assert first_ev < last_metric  # shipped with a window, not only at stop
    peak = dict(x.split("=") for x in t["scopemeter.rank0.memory_at_peak"].split())
    assert float(peak["anon_mb"]) >= 40 * 2**20 / MB
    if psi_in_guest(filled):
        mem = [r["value"] for r in metric(recs, "container_memory_pressure_percentage")]
        cpu = [r["value"] for r in metric(recs, "container_cpu_pressure_percentage")]
        assert mem and cpu and max(cpu) > 0 and max(mem) > 0, (mem, cpu)
        pr = dict(x.split("=") for x in t["scopemeter.rank0.pressure"].split())
        assert float(pr["memory_some_s"]) > 0 and float(pr["cpu_some_s"]) > 0
        assert float(pr["cpu_peak_pct"]) >= max(cpu) - 0.05
        # the kernel's own total moved at least as much over the whole case
        stall = (kv_psi(read(d, "after", "memory.pressure")) -
                 kv_psi(read(d, "before", "memory.pressure"))) / 1e6
        assert float(pr["memory_some_s"]) <= stall + 0.01
    else:
        assert "scopemeter.rank0.pressure" not in t


def kv_psi(text):
    """The some line's total= of a PSI file, µs."""
    for line in text.splitlines():
        if line.startswith("some "):
            return int(line.rsplit("total=", 1)[1])
    raise KeyError("some")


# ---- disk I/O on v2 (docs/series.md "Disk I/O"), in whatfilled.sh --------------------


def io_stat(path, dev):
    """rbytes, wbytes of device `dev` (MAJ:MIN) in an io.stat copy; 0, 0
    when the cgroup did no I/O on it (a fresh cgroup's io.stat is empty)."""
    for line in read(path).splitlines():
        f = line.split()
        if f and f[0] == dev:
            kv_ = dict(x.split("=", 1) for x in f[1:])
            return int(kv_["rbytes"]), int(kv_["wbytes"])
    return 0, 0


def test_disk_io_v2_against_io_stat(filled):
    """A job under `scopemeter run` in a cgroup with memory.max and the io
    controller, on the guest's virtio disk (ext4): 200 MiB written through
    the page cache and fsync()-ed, 100 MiB read with O_DIRECT, 100 MiB
    written through the page cache and written back by `sync` run from the
    root cgroup.  After each phase the series (a window sampled after the
    cgroup's io.stat was read, the job idle) equal io.stat's rbytes/wbytes
    since the start, and move by what the job did, within 5 %.  The third
    phase is v2's cgroup writeback: the pages are charged to the cgroup that
    dirtied them though another cgroup's sync wrote them (on v1 the syncing
    task's cgroup is charged, docs/series.md)."""
    d = os.path.join(filled, "disk")
    assert os.path.exists(os.path.join(d, "dev")), read(d, "partitions")
    assert "io" in read(d, "controllers").split()
    assert read(d, "rc").strip() == "0", read(d, "run.err")
    dev = read(d, "dev").strip()
    recs = jsonl(os.path.join(d, "run.jsonl"))
    wr = metric(recs, "container_disk_write_megabytes")
    rd = metric(recs, "container_disk_read_megabytes")
    assert len(wr) == len(rd)
    r0, w0 = io_stat(os.path.join(d, "start.io"), dev)
    job = {"write": (0, 200 * MiB), "read": (100 * MiB, 0), "nosync": (0, 100 * MiB)}
    prev = (0.0, 0.0)
    got = {}
    for ph in ("write", "read", "nosync"):
        r1, w1 = io_stat(os.path.join(d, ph + ".io"), dev)
        k = (r1 - r0) / MB, (w1 - w0) / MB
        # the second window logged after the reading (lines counted then)
        i = int(read(d, ph + ".lines")) + 1
        s = rd[i]["value"], wr[i]["value"]
        got[ph] = (k, s)
        for kernel, series in zip(k, s):
            assert series == pytest.approx(kernel, rel=0.05, abs=0.05), (ph, got)
        for moved, did in zip((s[0] - prev[0], s[1] - prev[1]), job[ph]):
            assert moved == pytest.approx(did / MB, rel=0.05, abs=0.5), (ph, got)
        prev = s
    assert tags(recs)["scopemeter.rank0.cgroup"] == "v2 /disk mem=300MiB"


def complete_lines(path):
    """The JSON records of a JSONL file copied while it was being written:
    a last line without its newline is still being written, left out."""
    with open(path) as f:
        return [json.loads(line) for line in f.read().split("\n")[:-1] if line.strip()]


def test_recorder_killed_with_its_job_leaves_the_window_tags_v2(filled):
    """What a Python front OOM-killed in its own container leaves (the
    engine dies with the training process): scopemeter run and CMD in one
    cgroup with memory.oom.group=1; CMD over memory.high, then past
    memory.max.  The kernel killed every process, scopemeter too (exit 137,
    no closing line, no end tags); the memory_at_peak and memory_events
    window tags were in the JSONL before the kill, with the kernel's high
    events and the held allocation."""
    d = os.path.join(filled, "oomgroup")
    assert read(d, "before", "memory.oom.group") == "1\n"
    assert int(read(d, "rc")) == 137, read(d, "run.err")
    assert kv(read(d, "after", "memory.events"), "oom_group_kill") >= 1
    err = read(d, "run.err")
    assert closing(err) is None, err
    victims = killed(read(d, "oom_lines"))
    assert "scopemeter" in victims and "alloc" in victims, victims
    before = tags(complete_lines(os.path.join(d, "before_kill.jsonl")))
    ev = dict(x.split("=") for x in before["scopemeter.rank0.memory_events"].split())
    assert int(ev["high"]) > 0 and ev["oom_kill"] == "0", ev
    peak = dict(x.split("=") for x in before["scopemeter.rank0.memory_at_peak"].split())
    assert float(peak["anon_mb"]) >= 48 * MiB / MB * 0.95, peak
    assert float(peak["limit_mb"]) == pytest.approx(150 * MiB / MB, abs=0.05)
    # the file the dead recorder left has them, and no end tag (oom_kill is
    # one, written at stop)
    after = tags(complete_lines(os.path.join(d, "run.jsonl")))
    assert "scopemeter.rank0.memory_at_peak" in after
    assert "scopemeter.rank0.memory_events" in after
    assert "scopemeter.rank0.oom_kill" not in after
