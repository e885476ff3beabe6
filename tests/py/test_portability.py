"""The wheels where the largest jobs train (docs/design.md § Shipping): each
wheel installed with pip into a foreign userland and used there as a user
would — Debian 11 "bullseye" (glibc 2.31, CPython 3.9, OpenSSL 1.1 only: no
libssl.so.3, so https takes the bundled TLS module) for amd64 and for arm64,
the arm64 root run under qemu-user-static through binfmt_misc.

And a Debian 12 "bookworm" arm64 root (CPython 3.11, libssl.so.3) for the
https path through the system's OpenSSL.

Each root: debootstrap minbase + python3-venv and ca-certificates, a venv with
mlflow-skinny from PyPI (its dependency), built once and cached outside the
clone in $SCOPEMETER_ROOTS (default /var/cache/scopemeter/roots: CI's fresh
clone on the same machine reuses it; on a fresh machine tests/run builds the
roots in the background from its start, tests/py/roots.py).
In each, against the session's real `mlflow server` on the host (127.0.0.1:
a chroot shares the host's network):
- `scopemeter probe` inside a real v1 cgroup with a memory and CPU limit made
  here: the container series present, the limits the cgroup's files';
- `scopemeter run -- CMD`: every point delivered, read back through the REST API;
- the Python front recording a run over http, and over https through the
  harness's TLS endpoint with verification on;
- `scopemeter report` of that run.
Emulated timings are not performance figures: nothing here measures time.
Tier `portability` (pytest.ini); CI runs it.
"""
import glob
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import clean_env, is_root
from faultproxy import FaultProxy
from pyfront_util import Pod, cgroups_usable, new_run, read_run, system_keys
from roots import ARCH, HOST, QEMU, ROOT_DIR, ROOTS, SUITE, VENV, binfmt_ready, build_root, in_root, sh
from test_rest_faults import pki  # noqa: F401  (fixture: the harness's CA and server certificate)
from test_wheel import CLOSING

pytestmark = [pytest.mark.portability, pytest.mark.wheel]
# Each test's bound holds the root's first build when it is the first to ask
# for it and tests/run did not build it beforehand (roots.py).
BUILD_BOUND = 2400


@pytest.fixture(scope="session", params=sorted(ARCH))
def root(request, wheels):
    """(deb arch, the root with this session's wheel of that arch installed
    in its venv, the wheel's path inside)."""
    if not is_root():
        pytest.fail("the portability tier needs root (debootstrap, chroot, cgroups)")
    assert shutil.which("debootstrap"), "debootstrap missing (scripts/install-deps)"
    deb = request.param
    for old in glob.glob(os.path.join(ROOTS, f"{SUITE}-{deb}", "root", "scopemeter-*.whl")):
        os.remove(old)  # an earlier session's wheel in the cached root
    if deb != HOST:
        assert os.access(QEMU, os.X_OK), "qemu-user-static missing (scripts/install-deps)"
        binfmt_ready()
    path = build_root(deb)
    whl = wheels[ARCH[deb]][0]
    inside = os.path.join(path, "root", os.path.basename(whl))
    shutil.copy(whl, inside)
    p = in_root(path, f"{VENV}/bin/pip install -q --disable-pip-version-check --no-index "
                      f"--no-deps --force-reinstall /root/{os.path.basename(whl)}", timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return deb, path


@pytest.mark.timeout(BUILD_BOUND)
def test_the_root_is_what_it_claims(root):
    """A foreign userland without what the wheel brings: no compiler, no
    libcurl or jansson, no libssl.so.3; its own glibc and arch."""
    deb, path = root
    for tool in ("cc", "gcc", "clang", "curl"):
        for d in ("usr/bin", "bin", "usr/local/bin"):
            assert not os.path.exists(os.path.join(path, d, tool)), f"{tool} in the root"
    libs = [p for pat in ("libcurl*", "libjansson*", "libssl.so.3*")
            for p in glob.glob(os.path.join(path, "usr/lib/*", pat))]
    assert not libs, libs
    p = in_root(path, "uname -m; ldd --version | head -1; python3 -V", timeout=300)
    assert p.returncode == 0, p.stderr
    machine, glibc, py = p.stdout.strip().splitlines()
    assert machine == ARCH[deb], p.stdout
    assert glibc.endswith(" 2.31") and py.startswith("Python 3.9."), p.stdout


@pytest.mark.timeout(BUILD_BOUND)
def test_probe_finds_the_v1_cgroup_limits(root):
    why = cgroups_usable()
    if why:
        pytest.fail(why)
    deb, path = root
    with Pod(f"port-{deb}", 700 << 20, 1.5) as pod:
        if pod.version != 1:
            pytest.fail("the host's cgroups are not v1 (the v2 kernel is the vm tier's)")
        p = in_root(path, "scopemeter probe --json --interval 0.3", timeout=600, pod=pod)
        assert p.returncode == 0, p.stderr
        out = json.loads(p.stdout)
        c = out["cgroup"]
        mem = open(os.path.join(pod.dirs[0], "memory.limit_in_bytes")).read().strip()
        assert c["found"] is True and c["version"] == 1, c
        assert c["memory_limit_bytes"] == int(mem) == 700 << 20, c
        assert c["cpu_limit_cores"] == 1.5, c
        keys = {s["key"] for s in out["series"]}
        for s in ("container_memory_usage_megabytes", "container_memory_usage_percentage",
                  "container_cpu_utilization_percentage", "node_cpu_utilization_percentage",
                  "process_memory_megabytes"):
            assert f"system/{s}/rank0" in keys, (s, sorted(keys))


def closing(stderr):
    m = [c for c in map(CLOSING.search, stderr.splitlines()) if c]
    assert len(m) == 1, stderr
    return tuple(map(int, m[0].groups()))


@pytest.mark.timeout(BUILD_BOUND)
def test_run_delivers_every_point(root, mlflow_server):
    deb, path = root
    run_id = new_run(mlflow_server, f"portability-{deb}")
    p = in_root(path, "scopemeter run --interval 1 -- sleep 4", timeout=600,
                env={"MLFLOW_TRACKING_URI": mlflow_server, "MLFLOW_RUN_ID": run_id})
    assert p.returncode == 0, p.stderr
    w, pts, tags, delivered, overflow, refused, undelivered = closing(p.stderr)
    assert w >= 2 and delivered == pts + tags and undelivered == 0, p.stderr
    metrics, got_tags = read_run(mlflow_server, run_id)
    stored = sum(len(v) for k, v in metrics.items() if k.startswith("system/"))
    assert stored == pts, (stored, pts, sorted(metrics))
    assert "system/node_cpu_utilization_percentage/rank0" in metrics, sorted(metrics)


FRONT = r"""
import json, os, sys, time
import mlflow, scopemeter
assert scopemeter.enable_system_metrics(interval=0.5, samples=1) is True
time.sleep(3)
scopemeter.disable_system_metrics()
maps = open("/proc/self/maps").read()
print("RESULT " + json.dumps({"tls": scopemeter._native.tls(),
                              "libssl3": "libssl.so.3" in maps,
                              "module": sorted({l.split()[-1] for l in maps.splitlines()
                                                if "scopemeter-https" in l})}))
"""


def front_in(path, uri, run_id, env=None):
    with open(os.path.join(path, "root", "front.py"), "w") as f:
        f.write(FRONT)
    p = in_root(path, "python /root/front.py", timeout=600,
                env={"MLFLOW_TRACKING_URI": uri, "MLFLOW_RUN_ID": run_id,
                     "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", **(env or {})})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    res = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert res, p.stdout + p.stderr
    return json.loads(res[-1][7:])


@pytest.mark.timeout(BUILD_BOUND)
def test_front_over_http_and_https_then_report(root, mlflow_server, pki):  # noqa: F811
    deb, path = root
    # http: the engine's REST sink, no TLS module mapped
    run_id = new_run(mlflow_server, f"portability-{deb}")
    res = front_in(path, mlflow_server, run_id)
    assert res["module"] == [], res
    metrics, tags = read_run(mlflow_server, run_id)
    assert "system/node_cpu_utilization_percentage/rank0" in system_keys(metrics), sorted(metrics)
    assert tags.get("scopemeter.rank0.cgroup") is not None, tags
    # the report of that run, in the root (MLflow's client there)
    p = in_root(path, f"scopemeter report {run_id}", timeout=600,
                env={"MLFLOW_TRACKING_URI": mlflow_server})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert f"run {run_id}" in p.stdout and "1 rank on 1 node" in p.stdout, p.stdout
    # https with verification on, the harness's CA given: the root has no
    # libssl.so.3, so the bundled module (its own static OpenSSL) serves it
    res = front_over_https(path, mlflow_server, pki, f"portability-{deb}")
    assert not res["libssl3"], res
    assert [os.path.basename(m) for m in res["module"]] == ["scopemeter-https.so"], res
    assert "OpenSSL" in res["tls"], res


def front_over_https(path, mlflow_server, pki, experiment):  # noqa: F811
    """The front in the root over the harness's TLS endpoint, verification
    on with its CA; its points read back, the endpoint reached.  Returns
    front_in's result (which module, libssl.so.3 mapped)."""
    shutil.copy(str(pki / "ca.pem"), os.path.join(path, "root", "ca.pem"))
    px = FaultProxy(mlflow_server, tls=(str(pki / "server.pem"), str(pki / "server.key"), None))
    try:
        run_id = new_run(mlflow_server, experiment)
        res = front_in(path, px.uri, run_id, env={"MLFLOW_TRACKING_SERVER_CERT_PATH": "/root/ca.pem"})
        metrics, _ = read_run(mlflow_server, run_id)
        assert "system/node_cpu_utilization_percentage/rank0" in metrics, sorted(metrics)
        assert px.log("runs/log-batch"), "nothing reached the https endpoint"
    finally:
        px.close()
    return res


@pytest.mark.timeout(BUILD_BOUND)
def test_c_api_installs_and_links(root, tmp_path):
    """The C API of each arch as a native program meets it: `meson install`
    of the wheel's build (the same toolchain, scripts/build-wheel's build
    folder) puts libscopemeter.so, the headers and scopemeter.pc under a
    prefix; a program built against them with that arch's cc
    (scripts/toolchain) runs in the root and reports the one version."""
    from test_capi_install import PROG
    deb, path = root
    target = f"{ARCH[deb]}-linux-gnu.2.17"
    build = os.path.join(ROOT_DIR, f"build-wheel-{target}")
    assert os.path.isdir(build), f"{build}: scripts/build-wheel made no build folder"
    dest = os.path.join(path, "root", "capi")
    shutil.rmtree(dest, ignore_errors=True)
    sh(["meson", "install", "-C", build, "--destdir", dest, "--tags", "devel,c-api"], 300)
    pcs = glob.glob(os.path.join(dest, "**", "scopemeter.pc"), recursive=True)
    assert len(pcs) == 1, pcs
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pcs[0]), PKG_CONFIG_SYSROOT_DIR=dest)
    flags = sh(["pkg-config", "--cflags", "--libs", "scopemeter"], 60, env=env).stdout.split()
    tc = sh([os.path.join(ROOT_DIR, "scripts", "toolchain"), target], 600).stdout.strip()
    src = tmp_path / "prog.c"
    src.write_text(PROG)
    exe = os.path.join(path, "root", "capi-prog")
    sh([os.path.join(tc, "cc"), "-std=c11", "-Wall", "-Wextra", "-Werror", str(src), "-o", exe]
       + flags, 600)
    libdir = os.path.dirname(glob.glob(os.path.join(dest, "**", "libscopemeter.so"),
                                       recursive=True)[0])
    p = in_root(path, "/root/capi-prog", timeout=300,
                env={"LD_LIBRARY_PATH": "/" + os.path.relpath(libdir, path)})
    version = open(os.path.join(ROOT_DIR, "VERSION")).read().strip()
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith(f"header {version} ") and f"library {version} " in p.stdout, p.stdout
    assert "run-id-ok 1 0 plan 0 1 sized 1" in p.stdout, p.stdout


@pytest.mark.timeout(BUILD_BOUND)
def test_c_suite_with_the_wheels_toolchain(root):
    """Every C unit test (collectors on fixture trees, cgroups, the NVML and
    amdgpu fakes, the REST sink, the ABI programs) built with the wheel's
    toolchain and static libraries of this arch, and run: natively for
    amd64, under qemu-user with the root's loader and libraries for arm64.
    What the portability tier's other tests show of the shipped binaries,
    this shows of the engine's every part."""
    deb, path = root
    target = f"{ARCH[deb]}-linux-gnu.2.17"
    tc = sh([os.path.join(ROOT_DIR, "scripts", "toolchain"), target], 600).stdout.strip()
    build = os.path.join(ROOT_DIR, f"build-ctest-{target}")
    env = dict(os.environ)
    cross = ["--cross-file", os.path.join(tc, "cross.ini")]
    if deb != HOST:
        wrap = os.path.join(ROOT_DIR, f"build-ctest-{target}-qemu", "exe.ini")  # git-ignored build*/
        os.makedirs(os.path.dirname(wrap), exist_ok=True)
        with open(wrap, "w") as f:
            f.write(f"[binaries]\nexe_wrapper = ['{QEMU}', '-L', '{path}']\n")
        cross += ["--cross-file", wrap]
        # the test programs that start others (the ABI check's, the CLI's
        # children) reach qemu through binfmt_misc, which finds the loader here
        env["QEMU_LD_PREFIX"] = path
    if not os.path.isfile(os.path.join(build, "build.ninja")):
        shutil.rmtree(build, ignore_errors=True)
        sh(["meson", "setup", build, *cross, f"-Ddeps=.deps/{target}/prefix",
            "-Dbundled_deps=enabled", "-Dpython=disabled"], 600, cwd=ROOT_DIR)
    sh(["meson", "compile", "-C", build], 1200)
    p = subprocess.run(["meson", "test", "-C", build, "--print-errorlogs",
                        "--timeout-multiplier", "4"], capture_output=True, text=True,
                       timeout=1500, env=env)
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-2000:]
    assert re.search(r"^Fail:\s+0\s*$", p.stdout, re.M), p.stdout[-3000:]
    ok = int(re.search(r"^Ok:\s+(\d+)", p.stdout, re.M).group(1))
    assert ok >= 17, p.stdout[-3000:]


@pytest.mark.timeout(BUILD_BOUND)
def test_front_https_through_the_systems_openssl_on_arm64(wheels, mlflow_server, pki):  # noqa: F811
    """The other https path on arm64: a Debian 12 root (CPython 3.11, the
    newest Debian's arm64 CPython, linked with the system's libssl.so.3),
    where Python's ssl module has loaded an arm64 libssl.so.3 and the front
    uses it through scopemeter-https-sys.so instead of a second OpenSSL
    (src/mlflow/curl_api.c); verification on, the harness's CA given."""
    if not is_root():
        pytest.fail("the portability tier needs root (debootstrap, chroot, binfmt_misc)")
    assert shutil.which("debootstrap"), "debootstrap missing (scripts/install-deps)"
    assert os.access(QEMU, os.X_OK), "qemu-user-static missing (scripts/install-deps)"
    binfmt_ready()
    path = build_root("arm64", "bookworm")
    whl = wheels["aarch64"][0]
    shutil.copy(whl, os.path.join(path, "root", os.path.basename(whl)))
    p = in_root(path, f"{VENV}/bin/pip install -q --disable-pip-version-check --no-index "
                      f"--no-deps --force-reinstall /root/{os.path.basename(whl)} && python3 -V",
                timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.stdout.strip().startswith("Python 3.11."), p.stdout
    res = front_over_https(path, mlflow_server, pki, "portability-bookworm-arm64")
    assert res["libssl3"], res  # the system's arm64 libssl.so.3, loaded by Python's ssl
    assert [os.path.basename(m) for m in res["module"]] == ["scopemeter-https-sys.so"], res


@pytest.mark.timeout(BUILD_BOUND)
def test_platform_bundle_in_the_root(root, wheels, mlflow_server):
    """The platform teams' layout (README, Install) per arch: the wheel
    unpacked with `pip install --no-deps --target DIR` (no venv, no pip
    metadata of the image touched), the CLI run from DIR/bin and the front
    imported from DIR on PYTHONPATH by the root's own python3."""
    deb, path = root
    whl = "/root/" + os.path.basename(wheels[ARCH[deb]][0])  # this session's, copied by `root`
    run_id = new_run(mlflow_server, f"portability-bundle-{deb}")
    script = (f"rm -rf /opt/bundle && {VENV}/bin/pip install -q --disable-pip-version-check "
              f"--no-index --no-deps --target /opt/bundle {whl} && "
              "/opt/bundle/bin/scopemeter --version && "
              "/opt/bundle/bin/scopemeter run --interval 1 -- sleep 3 && "
              "PYTHONPATH=/opt/bundle /usr/bin/python3 -c "
              "'import scopemeter, sys; print(\"from\", scopemeter.__file__); "
              "print(\"plan\", scopemeter.plan(workers=2, all_workers=True)[\"collectors\"])'")
    p = in_root(path, script, timeout=900,
                env={"MLFLOW_TRACKING_URI": mlflow_server, "MLFLOW_RUN_ID": run_id})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "executable: /opt/bundle/bin/scopemeter" in p.stdout, p.stdout
    assert "from /opt/bundle/scopemeter/__init__.py" in p.stdout, p.stdout
    assert "plan 2" in p.stdout, p.stdout
    w, pts, tags, delivered, overflow, refused, undelivered = closing(p.stderr)
    assert w >= 2 and delivered == pts + tags, p.stderr
