"""Tables 1 and 1b: CPU per full sample.  1: the C collectors vs the pread
floor (bench/sample_cost), MLflow's CPU/Disk/Network monitors (psutil),
psutil's bare calls; 1b: the same C sample with two AMD GPUs and a container
with disk I/O attached (a fixture machine under SCOPEMETER_SYSROOT) vs its
floor."""
import os
import shutil
import subprocess

import benchlib as B


def sample_cost_round(c, iters, env=None):
    """One round of bench/sample_cost (floor and full sample interleaved):
    the floor's and the sample's CPU per sample, the series per sample and
    the descriptors read, as it prints them."""
    out = subprocess.run([c.sample_cost, "--rounds", "1", "--iters", str(iters)],
                         capture_output=True, text=True, timeout=120, check=True, env=env).stdout
    fl = sa = series = files = None
    for line in out.splitlines():
        if line.startswith("floor:"):
            fl = float(line.split()[-2])
        elif line.startswith("scopemeter: full sample"):
            sa = float(line.split()[-2])
        elif line.startswith("series per sample:"):
            series = int(line.split()[-1])
        elif line.startswith("files read"):
            files = line.split("(")[1].split(" ")[0]
    return fl, sa, series, files


def section1(c):
    p = c.p
    sp = subprocess.Popen(c.py("sample_py.py"), env=c.env(), stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True)
    try:
        first = sp.stdout.readline()
        if not first.startswith(B.RESULT):
            raise RuntimeError("sample_py.py did not start")
        rows = {"floor": [], "scopemeter": [], "mlflow": [], "psutil": []}
        ratios = {"scopemeter": [], "mlflow": [], "psutil": []}
        files, series = None, None
        for r in range(p["s1_rounds"]):
            # C: one round of floor + full sample (interleaved inside), then
            # the Python variants: one round each, right after.
            fl, sa, series, files = sample_cost_round(c, p["s1_iters"])
            sp.stdin.write(f"round {p['s1_py_iters']}\n")
            sp.stdin.flush()
            pyr = B.parse_result(sp.stdout.readline())
            rows["floor"].append(fl)
            rows["scopemeter"].append(sa)
            rows["mlflow"].append(pyr["mlflow"])
            rows["psutil"].append(pyr["psutil"])
            for k in ratios:
                ratios[k].append(rows[k][-1] / fl)
        sp.stdin.write("quit\n")
        sp.stdin.flush()
        sp.wait(timeout=30)
    finally:
        if sp.poll() is None:
            sp.kill()
            sp.wait()
    s = {k: B.spread(v) for k, v in rows.items()}
    rs = {k: B.spread(v) for k, v in ratios.items()}
    c.results["1"] = {"us_per_sample": s, "ratio_to_floor": rs, "raw": rows,
                      "series_per_sample": series, "kept_fds": files}
    label = {"floor": "floor: pread kept fds + statvfs", "scopemeter": "scopemeter C collectors",
             "mlflow": "MLflow CPU+Disk+Network monitors", "psutil": "psutil bare calls (4)"}
    table_rows = []
    for k in ("floor", "scopemeter", "mlflow", "psutil"):
        table_rows.append([label[k], B.fmt_spread(s[k]),
                           "1" if k == "floor" else B.fmt_spread(rs[k])])
    table_rows.append(["MLflow monitors / scopemeter", "",
                       B.fmt_spread(B.spread([m / x for m, x in
                                              zip(rows["mlflow"], rows["scopemeter"])]))])
    c.tables.append(B.table(
        "1. CPU per full sample, no GPU (us; thread CPU time)",
        ["variant", "us/sample", "x floor"], table_rows,
        [f"{p['s1_rounds']} interleaved rounds: C {p['s1_iters']} samples, Python "
         f"{p['s1_py_iters']} samples per round; floor = pread of the {files} descriptors the "
         f"collectors keep + statvfs('/'), nothing parsed; {series} series per sample"]))
    m = rs["scopemeter"]["median"]
    c.targets.append(("1 sample cost", "scopemeter <= 1.5x floor", f"{B.fmt_num(m)}x",
                      m <= 1.5))


def section1b(c):
    """1b: the C sample with every collector of the table attached — two AMD
    GPUs (amdgpu sysfs) and a cgroup v2 container with its disk I/O — on a
    fixture machine (tests/fixtures: cg-k8s-v2-cgroupns + amd-two-cards under
    SCOPEMETER_SYSROOT), against the floor of reading its own kept
    descriptors.  The fixture's files are regular files, cheaper to read than
    sysfs/kernfs: the floor is lower than on a real node, so the ratio is an
    upper bound of the overhead."""
    p = c.p
    root = os.path.join(c.tmp, "machine-amd-io")
    for fx in ("cg-k8s-v2-cgroupns", "amd-two-cards"):
        shutil.copytree(os.path.join(B.ROOT, "tests", "fixtures", fx), root, symlinks=True,
                        dirs_exist_ok=True)
    env = dict(os.environ, SCOPEMETER_SYSROOT=root)
    rows, ratios, files, series = {"floor": [], "scopemeter": []}, [], None, None
    for _ in range(p["s1_rounds"]):
        fl, sa, series, files = sample_cost_round(c, p["s1_iters"], env)
        rows["floor"].append(fl)
        rows["scopemeter"].append(sa)
        ratios.append(sa / fl)
    s = {k: B.spread(v) for k, v in rows.items()}
    r = B.spread(ratios)
    c.results["1b"] = {"us_per_sample": s, "ratio_to_floor": r, "raw": rows,
                       "series_per_sample": series, "kept_fds": files}
    c.tables.append(B.table(
        "1b. CPU per full sample, 2 AMD GPUs + container with disk I/O (fixture; us, thread CPU)",
        ["variant", "us/sample", "x floor"],
        [["floor: pread kept fds + statvfs", B.fmt_spread(s["floor"]), "1"],
         ["scopemeter C collectors, all attached", B.fmt_spread(s["scopemeter"]),
          B.fmt_spread(r)]],
        [f"{p['s1_rounds']} interleaved rounds of {p['s1_iters']} samples; {files} descriptors "
         f"kept, {series} series per sample; fixture files are regular files (cheaper than "
         "sysfs): the ratio is an upper bound"]))
    c.targets.append(("1b sample cost, AMD GPUs + disk I/O", "scopemeter <= 1.5x floor",
                      f"{B.fmt_num(r['median'])}x", r["median"] <= 1.5))
