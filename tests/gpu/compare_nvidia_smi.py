#!/usr/bin/env python3
"""compare_nvidia_smi.py — on a real NVIDIA machine, compare what scopemeter's
GPU collector reads through NVML with what nvidia-smi prints.

    python3 tests/gpu/compare_nvidia_smi.py [--bin build/cli/scopemeter] [--rounds 3]
                                            [--torch-mb 1024] [--load] [--energy-s 10]

No CI machine has a GPU: the tests use a fake libnvidia-ml (tests/fakenvml).
This script is the check against the real library.  It runs
`scopemeter probe --json` and, right after it,

    nvidia-smi --query-gpu=index,memory.used,memory.total,utilization.gpu,
               power.draw,power.limit,enforced.power.limit,driver_version,
               temperature.gpu,clocks.sm,clocks.mem,clocks_event_reasons.active,
               ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total
               --format=csv,noheader,nounits
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits

(drivers before R535 call the reasons clocks_throttle_reasons.active: asked when the
new name is refused)

and compares per GPU (i = NVML index = nvidia-smi index):

  gpu_i_memory_usage_megabytes   vs memory.used (MiB -> MB)        within 1 % of total
  total implied by used / pct    vs memory.total (MiB -> MB)       within 0.5 %
  gpu_i_utilization_percentage   vs utilization.gpu                within 15 points
  gpu_i_power_usage_watts        vs power.draw                     within 10 % or 5 W
  gpu_i_power_usage_percentage   vs 100 * power.draw / enforced    within 10 % or 2 points
  driver in the gpu status       vs driver_version                 equal
  gpu_i_temperature_celsius      vs temperature.gpu                within 3 °C
  gpu_i_sm_clock_megahertz       vs clocks.sm                      within 10 % or 100 MHz
  gpu_i_memory_clock_megahertz   vs clocks.mem                     within 5 %
  gpu_i_throttled_percentage     vs clocks_event_reasons.active    100 iff a bit other than
                                    (and _power_, _thermal_)       idle (0x1) and application
                                                                   clocks (0x2) is set; the
                                                                   power / thermal bits alike
  gpu_i_ecc_errors_*             ecc.errors.*.volatile.total       informational: ours count
                                                                   since recording started (0 in
                                                                   a probe), nvidia-smi's since
                                                                   the driver loaded
  gpu_i_process_memory_megabytes vs --query-compute-apps           with --torch-mb M: a torch
                                    used_memory of the torch pid   process (RANK=0, as the
                                                                   probe) holds M MiB on cuda:0;
                                                                   ours within 2 % of nvidia-smi's
                                                                   for that pid, and >= M MiB
  gpu_i_pcie_*_megabytes         (no nvidia-smi counter)           printed only

The detail series (probe --detail full; docs/gpu.md "Detail series"), against
`nvidia-smi dmon --gpm-metrics 2,3,5,10,60,61 -c 1` (the same GPM ids) and,
where DCGM is installed, `dcgmi dmon -e 1002,1003,1004,1005,1011,1012 -c 1`
(SM active, SM occupancy, tensor active, DRAM active as 0..1; NVLink TX/RX
bytes/s).  The probe's pair and dmon's are different 1 s intervals: run it
under a steady load (--load: a torch process multiplying bf16 matrices on
every GPU, tensor cores busy) or on an idle GPU:

  gpu_i_sm_active_percentage      vs dmon SM util (2), dcgmi 1002 x 100   within 10 points
  gpu_i_sm_occupancy_percentage   vs dmon (3), dcgmi 1003 x 100           within 10 points
  gpu_i_tensor_active_percentage  vs dmon (5), dcgmi 1004 x 100           within 10 points
  gpu_i_dram_bandwidth_percentage vs dmon (10), dcgmi 1005 x 100          within 10 points
  gpu_i_nvlink_*_megabytes        vs dmon (60, 61) MiB/s                  printed (ours is
                                                                          cumulative since start)

and the energy: `scopemeter run --jsonl F -- sleep S` between two reads of
`nvidia-smi --query-gpu=index,total_energy_consumption` (mJ since the driver
loaded): the gpu_energy end tag's kWh per GPU must not exceed what nvidia-smi
counted around the run (+1 %), and must be at least 90 % of it scaled by the
run's share of the time between the two reads.

Utilization and power move between the two reads: run it on an idle GPU or
under a steady load, and use --rounds to see the spread.  Exit status 0 when
every round agrees, 1 otherwise; the table is printed either way.  Record the
output in docs/gpu.md ("Checked on real hardware").
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

MIB = 1048576 / 1e6  # MiB in MB


BASE = ["index", "memory.used", "memory.total", "utilization.gpu", "power.draw",
        "power.limit", "enforced.power.limit", "driver_version", "temperature.gpu",
        "clocks.sm", "clocks.mem", "REASONS", "ecc.errors.corrected.volatile.total",
        "ecc.errors.uncorrected.volatile.total"]
REASONS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")
# nvmlClocksEventReason* bits (NVIDIA's nvml.h), as src/collect/gpu_query.c groups them
THR_NOT = 0x1 | 0x2        # GpuIdle, ApplicationsClocksSetting
THR_POWER = 0x4 | 0x80     # SwPowerCap, HwPowerBrakeSlowdown
THR_THERMAL = 0x20 | 0x40  # SwThermalSlowdown, HwThermalSlowdown


def smi():
    for name in REASONS:
        fields = [name if f == "REASONS" else f for f in BASE]
        p = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(fields),
                            "--format=csv,noheader,nounits"], capture_output=True, text=True)
        if p.returncode == 0:
            break
    else:
        p.check_returncode()
    rows = {}
    for line in p.stdout.strip().splitlines():
        vals = [v.strip() for v in line.split(",")]
        row = dict(zip(BASE, vals))
        rows[int(row["index"])] = row
    return rows


def smi_apps():
    """pid -> used MiB of every compute process, as nvidia-smi lists them."""
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                          "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    apps = {}
    for line in out.strip().splitlines():
        pid, mem = [v.strip() for v in line.split(",")][:2]
        if num(mem) is not None:
            apps[int(pid)] = apps.get(int(pid), 0.0) + num(mem)
    return apps


TORCH = r"""
import sys, time, torch
x = torch.empty(int(sys.argv[1]) * 1048576, dtype=torch.uint8, device="cuda:0")
torch.cuda.synchronize()
print("ready", flush=True)
time.sleep(600)
"""


def start_torch(mib):
    """A CUDA process holding mib MiB on cuda:0 with RANK=0 (so the probe,
    also RANK=0, takes it as its own rank's: docs/gpu.md)."""
    env = dict(os.environ, RANK="0")
    p = subprocess.Popen([sys.executable, "-c", TORCH, str(mib)], env=env,
                         stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "ready":
        p.kill()
        sys.exit("the torch process did not allocate its memory on cuda:0")
    return p


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None  # "[N/A]", "[Not Supported]"


def probe(binary):
    env = dict(os.environ, RANK="0")
    p = subprocess.run([binary, "probe", "--json", "--interval", "1", "--detail", "full"],
                       capture_output=True, text=True, check=True, env=env)
    return json.loads(p.stdout)


GPM_IDS = (2, 3, 5, 10, 60, 61)  # NVML_GPM_METRIC_* (nvml.h), as src/collect/gpu_gpm.c asks them
GPM_SERIES = ("sm_active_percentage", "sm_occupancy_percentage", "tensor_active_percentage",
              "dram_bandwidth_percentage", "nvlink_receive_megabytes",
              "nvlink_transmit_megabytes")
DCGM_IDS = (1002, 1003, 1004, 1005, 1012, 1011)  # DCGM_FI_PROF_*: the same order (RX, TX)


def dmon_gpm():
    """index -> [the six GPM values] from one `nvidia-smi dmon --gpm-metrics`
    line per GPU: the GPM columns are the last six, in the order asked."""
    p = subprocess.run(["nvidia-smi", "dmon", "-c", "1", "--gpm-metrics",
                        ",".join(map(str, GPM_IDS))], capture_output=True, text=True)
    if p.returncode != 0:
        print(f"  nvidia-smi dmon --gpm-metrics refused: {p.stderr.strip() or p.stdout.strip()}")
        return {}
    rows = {}
    for line in p.stdout.splitlines():
        if line.startswith("#"):
            print(f"  dmon: {line}")
            continue
        v = line.split()
        if len(v) > len(GPM_IDS) and v[0].isdigit():
            rows[int(v[0])] = [num(x) for x in v[-len(GPM_IDS):]]
    return rows


def dcgmi_dmon():
    """index -> [the six DCGM profiling values], or {} without dcgmi."""
    if not shutil.which("dcgmi"):
        return {}
    p = subprocess.run(["dcgmi", "dmon", "-c", "1", "-e", ",".join(map(str, DCGM_IDS))],
                       capture_output=True, text=True)
    rows = {}
    for line in p.stdout.splitlines():
        v = line.split()
        if len(v) >= 2 + len(DCGM_IDS) and v[0] == "GPU" and v[1].isdigit():
            rows[int(v[1])] = [num(x) for x in v[2:2 + len(DCGM_IDS)]]
    if p.returncode != 0:
        print(f"  dcgmi dmon refused: {p.stderr.strip() or p.stdout.strip()}")
    return rows


def compare_gpm(out):
    """The detail series against dmon's and dcgmi's of the next second."""
    ok = True
    series = {s["upstream"]: s["raw"] for s in out["series"] if s["scope"] == "gpu"}
    dm, dc = dmon_gpm(), dcgmi_dmon()
    for n in out["notes"]:
        if "GPM" in n or "nvmlGpm" in n or "NVLINK" in n:
            print(f"  note: {n}")
    print(f"{'detail series':40} {'scopemeter':>12} {'dmon':>10} {'dcgmi':>10}  verdict")
    for i in sorted({int(k.split("_")[1]) for k in series}):
        for j, name in enumerate(GPM_SERIES):
            ours = series.get(f"gpu_{i}_{name}")
            a = dm.get(i, [None] * 6)[j]
            b = dc.get(i, [None] * 6)[j]
            if b is not None and j < 4:
                b *= 100.0  # DCGM's ratios
            if j >= 4:
                verdict = "printed (ours: MB since start; theirs: a rate)"
            elif ours is None:
                verdict = "skipped (absent: see the notes)"
            else:
                bad = [t for t in (a, b) if t is not None and abs(ours - t) > 10.0]
                verdict = "MISMATCH" if bad else ("ok" if a is not None or b is not None
                                                  else "skipped (no dmon value)")
                ok = ok and not bad
            f = lambda x: "-" if x is None else f"{x:.2f}"
            print(f"{'gpu_%d_%s' % (i, name):40} {f(ours):>12} {f(a):>10} {f(b):>10}  {verdict}")
    return ok


def smi_energy():
    """index -> mJ since the driver loaded (nvidia-smi's total_energy_consumption)."""
    p = subprocess.run(["nvidia-smi", "--query-gpu=index,total_energy_consumption",
                        "--format=csv,noheader,nounits"], capture_output=True, text=True,
                       check=True)
    rows = {}
    for line in p.stdout.strip().splitlines():
        i, e = [v.strip() for v in line.split(",")][:2]
        rows[int(i)] = num(e)
    return rows


def compare_energy(binary, seconds, tmpdir):
    """scopemeter run's gpu_energy tag against nvidia-smi's counter read
    around the run."""
    import time
    path = os.path.join(tmpdir, "energy.jsonl")
    t0, before = time.monotonic(), smi_energy()
    r0 = time.monotonic()
    subprocess.run([binary, "run", "--interval", "1", "--jsonl", path, "--", "sleep",
                    str(seconds)], check=True, env=dict(os.environ, RANK="0"),
                   capture_output=True)
    r1 = time.monotonic()
    after, t1 = smi_energy(), time.monotonic()
    tags = {}
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("kind") == "tag":
                tags[rec["key"]] = rec["value"]
    tag = tags.get("scopemeter.rank0.gpu_energy")
    print(f"gpu_energy tag: {tag!r}; run {r1 - r0:.2f} s of {t1 - t0:.2f} s between the reads")
    if not tag:
        return False
    ours = {}
    for part in tag.split("; "):
        if part.startswith("gpu") and " kwh=" in part:
            g, v = part.split(" kwh=")
            ours[int(g[3:])] = float(v) * 3.6e9  # kWh -> mJ
    ok = True
    for i, mj in sorted(ours.items()):
        if before.get(i) is None or after.get(i) is None:
            print(f"  gpu{i}: nvidia-smi has no energy counter")
            continue
        theirs = after[i] - before[i]
        lo = 0.9 * theirs * (r1 - r0) / (t1 - t0)
        good = lo <= mj <= 1.01 * theirs + 1000
        ok = ok and good
        print(f"  gpu{i}: ours {mj / 1000:.1f} J, nvidia-smi {theirs / 1000:.1f} J around the run "
              f"(bound [{lo / 1000:.1f}, {(1.01 * theirs + 1000) / 1000:.1f}] J)  "
              f"{'ok' if good else 'MISMATCH'}")
    return ok


LOAD = r"""
import time, torch
xs = []
for i in range(torch.cuda.device_count()):
    a = torch.randn(8192, 8192, device=f"cuda:{i}", dtype=torch.bfloat16)
    xs.append((a, a.clone()))
print("ready", flush=True)
while True:
    for a, b in xs:
        torch.mm(a, b)
"""


def start_load():
    """A steady tensor-core load on every GPU (bf16 matmuls)."""
    p = subprocess.Popen([sys.executable, "-c", LOAD], stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "ready":
        p.kill()
        sys.exit("the load process did not start")
    return p


def reasons(v):
    try:
        return int(v, 16)
    except (TypeError, ValueError):
        return None


def compare(out, rows, apps=None, torch_pid=None, torch_mib=0):
    ok = True
    series = {s["upstream"]: s["raw"] for s in out["series"] if s["scope"] == "gpu"}
    status = out["gpu"]
    print(f"scopemeter gpu status: {status}")
    drivers = {r["driver_version"] for r in rows.values()}
    if status.startswith("nvml ") and not any(status.startswith(f"nvml {d},") for d in drivers):
        print(f"  MISMATCH driver: status {status!r}, nvidia-smi {sorted(drivers)}")
        ok = False
    indices = sorted({int(k.split("_")[1]) for k in series})
    if not indices:
        print("  no gpu_* series: nothing to compare (see the notes above)")
        print("  notes:", *out["notes"], sep="\n    ")
        return False
    print(f"{'metric':40} {'scopemeter':>12} {'nvidia-smi':>12}  verdict")
    for i in indices:
        r = rows.get(i)
        if r is None:
            print(f"  gpu_{i}: nvidia-smi has no GPU {i}")
            ok = False
            continue

        def check(name, ours, theirs, good):
            nonlocal ok
            if ours is None or theirs is None:
                verdict = "skipped (absent)"
            elif good(ours, theirs):
                verdict = "ok"
            else:
                verdict = "MISMATCH"
                ok = False
            o = "-" if ours is None else f"{ours:.2f}"
            t = "-" if theirs is None else f"{theirs:.2f}"
            print(f"{name:40} {o:>12} {t:>12}  {verdict}")

        used = series.get(f"gpu_{i}_memory_usage_megabytes")
        pct = series.get(f"gpu_{i}_memory_usage_percentage")
        smi_used = num(r["memory.used"])
        smi_total = num(r["memory.total"])
        smi_used = smi_used * MIB if smi_used is not None else None
        smi_total = smi_total * MIB if smi_total is not None else None
        check(f"gpu_{i}_memory_usage_megabytes", used, smi_used,
              lambda a, b: abs(a - b) <= 0.01 * (smi_total or b or 1))
        total = used / (pct / 100) if used and pct else None
        check(f"gpu_{i} total (used/pct)", total, smi_total,
              lambda a, b: abs(a - b) <= 0.005 * b)
        check(f"gpu_{i}_utilization_percentage", series.get(f"gpu_{i}_utilization_percentage"),
              num(r["utilization.gpu"]), lambda a, b: abs(a - b) <= 15)
        draw = num(r["power.draw"])
        check(f"gpu_{i}_power_usage_watts", series.get(f"gpu_{i}_power_usage_watts"), draw,
              lambda a, b: abs(a - b) <= max(5.0, 0.10 * b))
        limit = num(r["enforced.power.limit"]) or num(r["power.limit"])
        check(f"gpu_{i}_power_usage_percentage",
              series.get(f"gpu_{i}_power_usage_percentage"),
              100.0 * draw / limit if draw is not None and limit else None,
              lambda a, b: abs(a - b) <= max(2.0, 0.10 * b))
        check(f"gpu_{i}_temperature_celsius", series.get(f"gpu_{i}_temperature_celsius"),
              num(r["temperature.gpu"]), lambda a, b: abs(a - b) <= 3)
        check(f"gpu_{i}_sm_clock_megahertz", series.get(f"gpu_{i}_sm_clock_megahertz"),
              num(r["clocks.sm"]), lambda a, b: abs(a - b) <= max(100.0, 0.10 * b))
        check(f"gpu_{i}_memory_clock_megahertz", series.get(f"gpu_{i}_memory_clock_megahertz"),
              num(r["clocks.mem"]), lambda a, b: abs(a - b) <= 0.05 * b)
        bits = reasons(r["REASONS"])
        for name, mask in (("", ~THR_NOT), ("_power", THR_POWER), ("_thermal", THR_THERMAL)):
            check(f"gpu_{i}_throttled{name}_percentage",
                  series.get(f"gpu_{i}_throttled{name}_percentage"),
                  None if bits is None else (100.0 if bits & mask else 0.0),
                  lambda a, b: a == b)
        for kind in ("corrected", "uncorrected"):
            ours = series.get(f"gpu_{i}_ecc_errors_{kind}")
            print(f"{'gpu_%d_ecc_errors_%s' % (i, kind):40} "
                  f"{'-' if ours is None else '%.0f' % ours:>12} "
                  f"{r['ecc.errors.%s.volatile.total' % kind]:>12}  "
                  "informational (since start / since the driver loaded)")
        for d in ("receive", "transmit"):
            ours = series.get(f"gpu_{i}_pcie_{d}_megabytes")
            print(f"{'gpu_%d_pcie_%s_megabytes' % (i, d):40} "
                  f"{'-' if ours is None else '%.2f' % ours:>12} {'-':>12}  printed only")
        if i == 0 and torch_pid is not None:
            theirs = apps.get(torch_pid) if apps else None
            mb = series.get("gpu_0_process_memory_megabytes")
            check("gpu_0_process_memory_megabytes", mb,
                  theirs * MIB if theirs is not None else None,
                  lambda a, b: abs(a - b) <= 0.02 * b and a >= torch_mib * MIB)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.environ.get("SCOPEMETER_BIN", "build/cli/scopemeter"))
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--torch-mb", type=int, default=0,
                    help="MiB a torch process holds on cuda:0 for the process-memory check")
    ap.add_argument("--load", action="store_true",
                    help="a steady bf16 matmul load on every GPU during the detail checks")
    ap.add_argument("--energy-s", type=float, default=10.0,
                    help="seconds of the scopemeter run whose gpu_energy is compared (0: none)")
    args = ap.parse_args()
    if not shutil.which("nvidia-smi"):
        print("nvidia-smi not found: run this on a machine with an NVIDIA driver", file=sys.stderr)
        return 2
    ok = True
    holder = start_torch(args.torch_mb) if args.torch_mb > 0 else None
    try:
        for n in range(args.rounds):
            print(f"\n== round {n + 1}")
            out = probe(args.bin)
            ok = compare(out, smi(), smi_apps() if holder else None,
                         holder.pid if holder else None, args.torch_mb) and ok
        load = start_load() if args.load else None
        try:
            for n in range(args.rounds):
                print(f"\n== detail round {n + 1}")
                ok = compare_gpm(probe(args.bin)) and ok
            if args.energy_s > 0:
                import tempfile
                print("\n== energy")
                with tempfile.TemporaryDirectory() as d:
                    ok = compare_energy(args.bin, args.energy_s, d) and ok
        finally:
            if load:
                load.kill()
                load.wait()
    finally:
        if holder:
            holder.kill()
            holder.wait()
    print("\nresult:", "agree" if ok else "DISAGREE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
