"""Helpers of the Python-front tests (test_python_front, test_torchrun,
test_pods_netns, test_ray): real cgroups with limits, network namespaces,
reading a run back from MLflow, and the series docs/design.md §1 names.

Kernel isolation is real, not simulated: a "pod" here is a memory + CPU cgroup
with limits (cgroup v1 controllers, or cgroup v2 where that is what the host
has) and, where asked, its own network namespace (`ip netns`).
"""
import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "pyfront_worker.py")

# docs/design.md §1: the series of a CPU worker, by scope
NODE = ["node_cpu_utilization_percentage", "node_memory_usage_megabytes",
        "node_memory_usage_percentage"]
ROOTFS = ["rootfs_usage_megabytes", "rootfs_usage_percentage", "rootfs_available_megabytes"]
NETWORK = ["network_receive_megabytes", "network_transmit_megabytes"]
CONTAINER = ["container_memory_usage_megabytes", "container_memory_usage_percentage",
             "container_cpu_utilization_percentage"]
# docs/design.md §9: the working set's parts (a kernel whose memory.stat has
# shmem: every kernel these tests run on) and, on cgroup v2 with PSI, pressure
PARTS = ["container_memory_anon_megabytes", "container_memory_shmem_megabytes",
         "container_memory_file_active_megabytes", "container_memory_kernel_megabytes"]
PRESSURE = ["container_memory_pressure_percentage", "container_cpu_pressure_percentage"]


def psi_here():
    """cgroup v2 with PSI on: the container's pressure files exist (a v1 or
    hybrid host has none, docs/series.md)."""
    try:
        with open("/sys/fs/cgroup/cgroup.controllers"):
            pass
        with open("/proc/pressure/memory") as f:
            f.read()
        return True
    except OSError:
        return False


# the container's block I/O (docs/series.md, Disk I/O): where a blkio (v1) or
# io (v2) controller can be read, with any container limit
DISK = ["container_disk_read_megabytes", "container_disk_write_megabytes"]


def disk_here():
    """The disk series can be read here: a v1/hybrid blkio hierarchy, or cgroup
    v2 with the io controller enabled below the root."""
    if os.path.isdir("/sys/fs/cgroup/blkio"):
        return True
    try:
        with open("/sys/fs/cgroup/cgroup.subtree_control") as f:
            return "io" in f.read().split()
    except OSError:
        return False


# docs/design.md §9: the process tree of every recorded rank
PROCESS = ["process_count", "process_memory_megabytes", "process_cpu_utilization_percentage"]


def process_keys(rank):
    """The 3 process_* keys of one recorded rank (docs/design.md §9)."""
    return {f"system/{k}/rank{rank}" for k in PROCESS}


def expected_keys(rank, node=None, container=True):
    """The non-GPU keys of one collecting rank whose pod has a memory and a CPU
    limit (the working set's parts; pressure with PSI), its own process
    tree's included (docs/design.md §9)."""
    tier = f"/{node}" if node else ""
    keys = {f"system/{k}{tier}/rank{rank}" for k in NODE + ROOTFS}
    keys |= {f"system/{k}/rank{rank}" for k in NETWORK}
    if container:
        keys |= {f"system/{k}/rank{rank}" for k in CONTAINER + PARTS}
        if psi_here():
            keys |= {f"system/{k}/rank{rank}" for k in PRESSURE}
        if disk_here():
            keys |= {f"system/{k}/rank{rank}" for k in DISK}
    return keys | process_keys(rank)


_STAGED = []


def staged_package():
    """Where `import scopemeter` comes from: with SCOPEMETER_BUILD (tests/run
    sets it to the meson build dir), a package assembled from this tree's
    python/scopemeter's .py files (its _report/ package's too) and the
    extension just built there, so the tests exercise the working tree, not
    an older `pip install .`; otherwise None (the installed package)."""
    if _STAGED:
        return _STAGED[0]
    build = os.environ.get("SCOPEMETER_BUILD")
    ext = os.path.join(build, "python", "_native.abi3.so") if build else ""
    if not ext or not os.path.exists(ext):
        _STAGED.append(None)
        return None
    root = tempfile.mkdtemp(prefix="scopemeter-pkg-")
    pkg = os.path.join(root, "scopemeter")
    os.mkdir(pkg)
    src = os.path.join(os.path.dirname(os.path.dirname(HERE)), "python", "scopemeter")
    for d, dirs, names in os.walk(src):
        dirs[:] = [n for n in dirs if n != "__pycache__"]
        here = os.path.join(pkg, os.path.relpath(d, src))
        os.makedirs(here, exist_ok=True)
        for name in names:
            if name.endswith(".py"):
                shutil.copy(os.path.join(d, name), here)
    os.symlink(os.path.abspath(ext), os.path.join(pkg, "_native.abi3.so"))
    _STAGED.append(root)
    atexit.register(shutil.rmtree, root, True)
    return root


# Python lines that give the front's Monitor the smallest ring (256 points):
# the front sets no buffer size, so a spool test wraps _native once.
SMALLEST_RING = r"""
from scopemeter import _front, _native

class _SmallestRing:
    def __getattr__(self, name):
        return getattr(_native, name)
    @staticmethod
    def Monitor(**kw):
        return _native.Monitor(buffer_points=256, **kw)

_front._native = _SmallestRing()
"""


def python_env(**extra):
    """A clean environment (no launcher / MLflow variables from the shell)."""
    from conftest import clean_env
    env = clean_env(**extra)
    env["PYTHONUNBUFFERED"] = "1"
    root = staged_package()
    if root:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


# ---- reading a run back --------------------------------------------------------


def cgroup_limits(tag):
    """(memory limit in bytes, CPU cores) read back from a
    scopemeter.rankN.cgroup tag such as "v1 /pod mem=512MiB cpu=0.5" or
    "v2 /x mem=56.0GiB cpu=16"; None for what the tag does not carry.
    Tolerance: the tag rounds (0.1 GiB, 1 MiB)."""
    units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
    mem = re.search(r"\bmem=([0-9.]+)\s*(B|KiB|MiB|GiB|TiB)\b", tag)
    cpu = re.search(r"\bcpu=([0-9.]+)\b", tag)
    return (float(mem.group(1)) * units[mem.group(2)] if mem else None,
            float(cpu.group(1)) if cpu else None)


def assert_limits(tag, mem_bytes, cpu_cores):
    mem, cpu = cgroup_limits(tag)
    assert tag.startswith("v"), tag
    assert mem is not None and abs(mem - mem_bytes) <= 0.05 * (1 << 30), (tag, mem_bytes)
    assert cpu is not None and abs(cpu - cpu_cores) < 0.051, (tag, cpu_cores)


def read_run(tracking_uri, run_id):
    """(metrics: {key: [(step, value, timestamp)]}, tags: {key: value})"""
    from mlflow.tracking import MlflowClient
    c = MlflowClient(tracking_uri=tracking_uri)
    run = c.get_run(run_id)
    metrics = {}
    for key in run.data.metrics:
        hist = c.get_metric_history(run_id, key)
        metrics[key] = sorted((m.step, m.value, m.timestamp) for m in hist)
    return metrics, dict(run.data.tags)


def system_keys(metrics):
    return {k for k in metrics if k.startswith("system/")}


def new_run(tracking_uri, name="scopemeter-test"):
    from mlflow.tracking import MlflowClient
    c = MlflowClient(tracking_uri=tracking_uri)
    exp = c.get_experiment_by_name(name)
    exp_id = exp.experiment_id if exp else c.create_experiment(name)
    return c.create_run(exp_id).info.run_id


# ---- cgroups -------------------------------------------------------------------------


def _v1_mounts():
    """{controller: mount point} of the cgroup v1 hierarchies."""
    out = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = left.split()
            rf = right.split()
            if len(rf) < 3 or rf[0] != "cgroup":
                continue
            for opt in rf[2].split(","):
                if opt in ("memory", "cpu", "cpuacct"):
                    out.setdefault(opt, fields[4])
    return out


def _v2_root():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.split()[:1] == ["cgroup2"]:
                mp = left.split()[4]
                ctrls = os.path.join(mp, "cgroup.controllers")
                if os.path.exists(ctrls) and "memory" in open(ctrls).read().split():
                    return mp
    return None


def cgroups_usable():
    if os.geteuid() != 0:
        return "needs root to create cgroups"
    v1 = _v1_mounts()
    if "memory" in v1 and "cpu" in v1:
        return None
    if _v2_root():
        return None
    return "no writable cgroup hierarchy with the memory and cpu controllers"


class Pod:
    """A memory + CPU limited cgroup (v1: one directory per hierarchy of
    memory, cpu, cpuacct; v2: one directory).  `wrap(cmd)` runs a command
    inside it (the shell writes its own pid into cgroup.procs, then execs, so
    the command and its children start inside)."""

    def __init__(self, name, mem_bytes, cpu_cores):
        self.name = f"scopemeter-test-{name}-{uuid.uuid4().hex[:6]}"
        self.mem_bytes = int(mem_bytes)
        self.cpu_cores = float(cpu_cores)
        self.dirs = []
        v1 = _v1_mounts()
        if "memory" in v1 and "cpu" in v1:
            self.version = 1
            for mp in dict.fromkeys(v1[c] for c in ("memory", "cpu", "cpuacct") if c in v1):
                d = os.path.join(mp, self.name)
                os.mkdir(d)
                self.dirs.append(d)
            mem = os.path.join(v1["memory"], self.name)
            cpu = os.path.join(v1["cpu"], self.name)
            _write(os.path.join(mem, "memory.limit_in_bytes"), self.mem_bytes)
            _write(os.path.join(cpu, "cpu.cfs_period_us"), 100000)
            _write(os.path.join(cpu, "cpu.cfs_quota_us"), int(self.cpu_cores * 100000))
        else:
            self.version = 2
            root = _v2_root()
            for c in ("+memory", "+cpu"):
                try:
                    _write(os.path.join(root, "cgroup.subtree_control"), c)
                except OSError:
                    pass
            d = os.path.join(root, self.name)
            os.mkdir(d)
            self.dirs.append(d)
            _write(os.path.join(d, "memory.max"), self.mem_bytes)
            _write(os.path.join(d, "cpu.max"), f"{int(self.cpu_cores * 100000)} 100000")

    def procs_files(self):
        return [os.path.join(d, "cgroup.procs") for d in self.dirs]

    def wrap(self, cmd):
        files = " ".join(f"'{p}'" for p in self.procs_files())
        script = f'for f in {files}; do echo $$ > "$f"; done; exec "$@"'
        return ["sh", "-c", script, "sh"] + list(cmd)

    def cleanup(self):
        for d in self.dirs:
            procs = os.path.join(d, "cgroup.procs")
            deadline = time.time() + 20
            while time.time() < deadline:
                try:
                    pids = open(procs).read().split()
                except OSError:
                    break
                if not pids:
                    break
                for p in pids:  # stragglers of a failed test: ours, by pid
                    try:
                        os.kill(int(p), 9)
                    except (ProcessLookupError, ValueError):
                        pass
                time.sleep(0.2)
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.2)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()


def _write(path, value):
    with open(path, "w") as f:
        f.write(str(value))


# ---- network namespaces ----------------------------------------------------------


def netns_usable():
    if os.geteuid() != 0:
        return "needs root for ip netns"
    for tool in ("ip", "nsenter"):
        if not shutil.which(tool):
            return f"{tool} not installed (iproute2, util-linux)"
    return None


class Netns:
    def __init__(self, name):
        self.name = f"smtest-{name}-{uuid.uuid4().hex[:6]}"
        subprocess.run(["ip", "netns", "add", self.name], check=True)
        subprocess.run(["ip", "-n", self.name, "link", "set", "lo", "up"], check=True)

    def wrap(self, cmd):
        # nsenter, not `ip netns exec`: the latter remounts /sys for the new
        # namespace, which hides /sys/fs/cgroup from the process.
        return ["nsenter", f"--net=/var/run/netns/{self.name}"] + list(cmd)

    def cleanup(self):
        subprocess.run(["ip", "netns", "del", self.name], check=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()


def worker_cmd(*args):
    return [sys.executable, WORKER] + [str(a) for a in args]


def wait_all(procs, timeout=300):
    """[(returncode, stdout, stderr)] of every process, all within timeout
    seconds; one still running then is killed."""
    outs = []
    deadline = time.time() + timeout
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        outs.append((p.returncode, out, err))
    return outs


def run_pods_on_one_node(uri, run_id, spec, node, name="pod"):
    """Each (rank, memory limit, CPU cores, MB sent) of spec as its own pod —
    a cgroup with those limits and a network namespace — running the front's
    worker with all_workers into run_id on one node (world size len(spec), one
    rank per pod), sending the MB over the pod's loopback.  Returns
    wait_all's [(returncode, stdout, stderr)]; pods and namespaces are gone
    afterwards."""
    pods, nets, procs = [], [], []
    try:
        for rank, mem, cpu, mb in spec:
            pod, net = Pod(f"{name}{rank}", mem, cpu), Netns(f"{name}{rank}")
            pods.append(pod)
            nets.append(net)
            env = python_env(MLFLOW_TRACKING_URI=uri, MLFLOW_RUN_ID=run_id, RANK=rank,
                             WORLD_SIZE=len(spec), LOCAL_RANK=0, LOCAL_WORLD_SIZE=1,
                             NODE_NAME=node)
            cmd = pod.wrap(net.wrap(worker_cmd("--attach", "env", "--all-workers",
                                               "--interval", "0.5", "--seconds", "2.5",
                                               "--traffic-mb", mb)))
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        return wait_all(procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for x in pods + nets:
            x.cleanup()

