"""Tables 8a and 8b: what installing costs: the wheel's size
(scripts/build-wheel) and its binaries', and `import scopemeter` time."""
import glob
import os
import platform
import subprocess
import sys

import benchlib as B
from harness import log


def import_times(python, env, module, reps):
    """Wall time of `import <module>` in a fresh interpreter, reps times (s)."""
    code = ("import time; t = time.perf_counter(); import %s; "
            "print(time.perf_counter() - t)" % module)
    out = []
    for _ in range(reps):
        r = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True,
                           timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"import {module}: {r.stderr.strip()[-300:]}")
        out.append(float(r.stdout.strip().splitlines()[-1]))
    return out


def section8(c):
    """The wheel of scripts/build-wheel (dist/, built here when missing in a
    full run): its size and its binaries' sizes; `import scopemeter` from it
    (pip install --no-deps --target, the bundle-directory install of README),
    with `import mlflow` beside it as context."""
    p = c.p
    wheels = sorted(glob.glob(os.path.join(B.ROOT, "dist", f"scopemeter-*-abi3-*_{platform.machine()}.whl")),
                    key=os.path.getmtime)
    if not wheels and not c.args.quick:
        log("8: building the wheel (scripts/build-wheel)")
        subprocess.run([os.path.join(B.ROOT, "scripts", "build-wheel")], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=1800)
        wheels = sorted(glob.glob(os.path.join(B.ROOT, "dist", f"scopemeter-*-abi3-*_{platform.machine()}.whl")),
                        key=os.path.getmtime)
    rows, res = [], {}
    if wheels:
        whl = wheels[-1]
        site = os.path.join(c.tmp, "bundle")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "--no-deps", "--no-index", "--target", site, whl], check=True,
                       timeout=300)
        res["wheel"] = os.path.basename(whl)
        res["wheel_bytes"] = os.path.getsize(whl)
        ext = glob.glob(os.path.join(site, "scopemeter", "_native*.so"))[0]
        cli = os.path.join(site, "bin", "scopemeter")
        tls = os.path.join(site, "scopemeter", "scopemeter-https.so")
        res["ext_bytes"], res["cli_bytes"] = os.path.getsize(ext), os.path.getsize(cli)
        res["tls_bytes"] = os.path.getsize(tls) if os.path.exists(tls) else None
        rows += [["wheel " + res["wheel"], B.fmt_num(res["wheel_bytes"] / 1e6, 3)],
                 ["  extension scopemeter/_native.abi3.so", B.fmt_num(res["ext_bytes"] / 1e6, 3)],
                 ["  CLI bin/scopemeter", B.fmt_num(res["cli_bytes"] / 1e6, 3)],
                 ["  TLS module scopemeter/scopemeter-https.so",
                  B.fmt_num(res["tls_bytes"] / 1e6, 3) if res["tls_bytes"] else "absent"]]
        pythonpath, where = site, "the wheel, unpacked into a bundle directory on PYTHONPATH"
    else:
        rows.append(["wheel", "n/a: dist/ has none (scripts/build-wheel)"])
        pythonpath, where = c.pyfront, f"the build {c.build}"
    tab = B.table("8a. Install footprint (MB)", ["what", "MB"], rows,
                  ["the extension and the CLI link libcurl (http only) and jansson; https loads "
                   "the TLS module (libcurl with OpenSSL; scripts/build-deps, src/mlflow/curl_api.c); "
                   "nothing but glibc is needed at run time"])
    env = B.child_env(pythonpath)
    reps = p.get("s8_reps", 10)
    sm = B.spread([x * 1e3 for x in import_times(sys.executable, env, "scopemeter", reps)])
    ml = B.spread([x * 1e3 for x in import_times(sys.executable, B.child_env(), "mlflow", reps)])
    res["import_scopemeter_ms"], res["import_mlflow_ms"] = sm, ml
    tab2 = B.table("8b. Import time (ms, wall, fresh interpreter each)", ["import", "ms"],
                   [["import scopemeter", B.fmt_spread(sm)],
                    ["import mlflow (context)", B.fmt_spread(ml)]],
                   [f"{reps} interpreters each; scopemeter from {where}"])
    c.tables += [tab, tab2]
    c.results["8"] = res
