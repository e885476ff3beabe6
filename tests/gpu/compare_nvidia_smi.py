#!/usr/bin/env python3
"""compare_nvidia_smi.py — on a real NVIDIA machine, compare what scopemeter's
GPU collector reads through NVML with what nvidia-smi prints.

    python3 tests/gpu/compare_nvidia_smi.py [--bin build/cli/scopemeter] [--rounds 3]

No CI machine has a GPU: the tests use a fake libnvidia-ml (tests/fakenvml).
This script is the check against the real library.  It runs
`scopemeter probe --json` and, right after it,

    nvidia-smi --query-gpu=index,memory.used,memory.total,utilization.gpu,
               power.draw,power.limit,enforced.power.limit,driver_version
               --format=csv,noheader,nounits

and compares per GPU (i = NVML index = nvidia-smi index):

  gpu_i_memory_usage_megabytes   vs memory.used (MiB -> MB)        within 1 % of total
  total implied by used / pct    vs memory.total (MiB -> MB)       within 0.5 %
  gpu_i_utilization_percentage   vs utilization.gpu                within 15 points
  gpu_i_power_usage_watts        vs power.draw                     within 10 % or 5 W
  gpu_i_power_usage_percentage   vs 100 * power.draw / enforced    within 10 % or 2 points
  driver in the gpu status       vs driver_version                 equal

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


def smi():
    fields = ["index", "memory.used", "memory.total", "utilization.gpu", "power.draw",
              "power.limit", "enforced.power.limit", "driver_version"]
    out = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(fields),
                          "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    rows = {}
    for line in out.strip().splitlines():
        vals = [v.strip() for v in line.split(",")]
        row = dict(zip(fields, vals))
        rows[int(row["index"])] = row
    return rows


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None  # "[N/A]", "[Not Supported]"


def probe(binary):
    p = subprocess.run([binary, "probe", "--json", "--interval", "1"],
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


def compare(out, rows):
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
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.environ.get("SCOPEMETER_BIN", "build/cli/scopemeter"))
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    if not shutil.which("nvidia-smi"):
        print("nvidia-smi not found: run this on a machine with an NVIDIA driver", file=sys.stderr)
        return 2
    ok = True
    for n in range(args.rounds):
        print(f"\n== round {n + 1}")
        out = probe(args.bin)
        ok = compare(out, smi()) and ok
    print("\nresult:", "agree" if ok else "DISAGREE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
