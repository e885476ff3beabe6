"""The self-contained wheels (scripts/build-wheel, README "Install"): built
once per session, x86_64 and aarch64, then installed where training runs —
docs/design.md §8 and § Shipping.

- both wheels: tagged manylinux2014 (glibc 2.17) by `auditwheel show`, every
  ELF file needing no symbol version above the tag (readelf's version needs),
  no shared library but glibc's, libcurl/jansson/OpenSSL not exported, the
  licences (test_wheel_is_self_contained);

- every CPython 3.9-3.13 that `pyenv versions` lists: a fresh venv, pip
  install of the wheel (its mlflow-skinny dependency from the index, with
  SQLAlchemy and alembic for a sqlite store), import, plan(), a short
  recording into a sqlite store, the CLI's --version, probe and run;
- the CLI and the extension with the system's libcurl and jansson (and, for
  the CLI, libssl and libcrypto) hidden: /dev/null bind-mounted over them in
  a private mount namespace (unshare -m); the recording goes through the C
  REST sink to the session's real `mlflow server`;
- the foreign userlands (Debian 11 for amd64 and, under qemu-user, arm64;
  Debian 12 arm64 for the system-OpenSSL path): tests/py/test_portability.py
  (tier `portability`).

`auditwheel show` of the wheel goes to the test log (test_wheel_is_self_contained).
Slow tier: marker `wheel` (pytest.ini); CI runs it.
"""
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import ARCHES, clean_env
from runread import get_run, tags_of

pytestmark = pytest.mark.wheel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYENV_ROOT = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
MINORS = ["3.9", "3.10", "3.11", "3.12", "3.13"]
# What a manylinux wheel may need from the system (PEP 600: glibc's own libraries).
GLIBC_LIBS = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1",
              "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
# manylinux2014 is glibc 2.17 (PEP 599): the newest symbol version a file may need
GLIBC_MAX = (2, 17)
CLOSING = re.compile(r"logged (\d+) windows? \((\d+) points?, (\d+) tags?\): (\d+) delivered, "
                     r"(\d+) dropped \(buffer full\), (\d+) refused, (\d+) undelivered at stop")


def pyenv_pythons():
    """{"3.9": path, ...}: the newest patch release of each minor that
    `pyenv versions --bare` lists."""
    try:
        out = subprocess.run(["pyenv", "versions", "--bare"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    found = {}
    for v in out.split():
        m = re.fullmatch(r"(3\.\d+)\.(\d+)", v)
        if m and m.group(1) in MINORS:
            exe = os.path.join(PYENV_ROOT, "versions", v, "bin", "python3")
            if os.access(exe, os.X_OK) and (m.group(1) not in found or
                                            int(m.group(2)) > found[m.group(1)][0]):
                found[m.group(1)] = (int(m.group(2)), exe)
    return {k: exe for k, (_, exe) in found.items()}


PYTHONS = pyenv_pythons()


@pytest.fixture(scope="session")
def wheel(wheels):
    """This machine's wheel: (path, build log)."""
    return wheels["x86_64"]


def elf_needed(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True,
                         check=True).stdout
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out))


def version_needs(path):
    """{library: {version name, ...}} that an ELF file needs (readelf -V's
    .gnu.version_r: what the dynamic linker checks at load), any arch."""
    out = subprocess.run(["readelf", "-V", "-W", path], capture_output=True, text=True,
                         check=True).stdout
    needs, lib = {}, None
    for line in out.splitlines():
        m = re.search(r"File: (\S+)\s+Cnt:", line)
        if m:
            lib = m.group(1)
            continue
        m = re.search(r"Name: (\S+)\s+Flags:", line)
        if m and lib:
            needs.setdefault(lib, set()).add(m.group(1))
    return needs


def newer_than_tag(needs):
    """The version names above manylinux2014: GLIBC_x.y past 2.17, and any
    other (GLIBCXX_, CXXABI_, OPENSSL_, ...: a wheel needs glibc alone)."""
    bad = []
    for lib, names in needs.items():
        for n in names:
            m = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", n)
            if not m or (int(m.group(1)), int(m.group(2))) > GLIBC_MAX:
                bad.append(f"{lib}: {n}")
    return bad


def test_version_check_finds_a_newer_symbol():
    """The check above can fail: glibc 2.34's pthread symbols and a C++
    runtime's version are caught, 2.17 and older pass."""
    assert newer_than_tag({"libc.so.6": {"GLIBC_2.2.5", "GLIBC_2.17"}}) == []
    assert newer_than_tag({"libc.so.6": {"GLIBC_2.34"}}) == ["libc.so.6: GLIBC_2.34"]
    assert newer_than_tag({"libstdc++.so.6": {"GLIBCXX_3.4"}}) == ["libstdc++.so.6: GLIBCXX_3.4"]
    # and this machine's own build (gcc against glibc 2.36) is caught
    here = version_needs(os.path.join(os.environ.get("SCOPEMETER_BUILD") or
                                      os.path.join(ROOT, "build"), "cli", "scopemeter"))
    assert newer_than_tag(here), here


@pytest.mark.timeout(2400)
@pytest.mark.parametrize("arch", ARCHES)
def test_wheel_is_self_contained(wheels, arch, tmp_path, capsys):
    path, log = wheels[arch]
    with capsys.disabled():
        if arch == ARCHES[0]:
            print("\n--- scripts/build-wheel (auditwheel show) ---\n" + log.strip())
        print(f"\n--- wheel: {os.path.basename(path)}, {os.path.getsize(path)} bytes ---")
    name = os.path.basename(path)
    m = re.fullmatch(r"scopemeter-[^-]+-cp39-abi3-manylinux2014_(\w+)\.manylinux_2_17_(\w+)\.whl",
                     name)
    assert m and m.group(1) == m.group(2) == arch, name
    assert f'"manylinux_2_17_{arch}"' in log, log
    with zipfile.ZipFile(path) as z:
        z.extractall(tmp_path)
        names = z.namelist()
    assert "scopemeter/__init__.py" in names
    elves = []
    for n in names:
        if not n.endswith("/"):
            with open(os.path.join(tmp_path, n), "rb") as f:
                if f.read(4) == b"\x7fELF":
                    elves.append(os.path.join(tmp_path, n))
    kinds = sorted(os.path.basename(e) for e in elves)
    assert kinds == ["_native.abi3.so", "scopemeter", "scopemeter-https-sys.so",
                     "scopemeter-https.so"], kinds
    # OpenSSL is in the TLS module only, never in the extension that loads
    # into every training process nor in the CLI (src/mlflow/curl_api.c); the
    # sys module uses the OpenSSL the process has loaded, without naming it
    # (no DT_NEEDED: checked below with every other file)
    for e in elves:
        with open(e, "rb") as f:
            has_ssl = b"OpenSSL 3." in f.read()  # OpenSSL_version() text
        assert has_ssl == e.endswith("scopemeter-https.so"), (e, has_ssl)
    machine = {"x86_64": "X86-64", "aarch64": "AArch64"}[arch]
    for e in elves:
        hdr = subprocess.run(["readelf", "-h", e], capture_output=True, text=True,
                             check=True).stdout
        assert re.search(r"Machine:\s+.*" + machine, hdr), (e, hdr)
        needed = elf_needed(e)
        assert needed and needed <= GLIBC_LIBS, (e, needed)
        assert not newer_than_tag(version_needs(e)), (e, newer_than_tag(version_needs(e)))
        # libcurl, jansson and OpenSSL are inside, not exported (no clash with
        # a process's own copies): readelf reads either arch's dynamic symbols
        syms = subprocess.run(["readelf", "--dyn-syms", "-W", e], capture_output=True,
                              text=True, check=True).stdout
        defined = [ln.split()[-1] for ln in syms.splitlines()
                   if re.match(r"\s*\d+:", ln) and " UND " not in ln and len(ln.split()) >= 8]
        assert not [d for d in defined if re.match(r"(curl_|json_|SSL_|EVP_)", d)], e
    # PEP 639: our licence and those of the three libraries linked in
    dist = [n for n in names if re.match(r"scopemeter-[^/]+\.dist-info/", n)]
    lic = sorted(n.split("/licenses/", 1)[1] for n in dist
                 if "/licenses/" in n and not n.endswith("/"))  # auditwheel adds directories
    assert lic == ["LICENSE", "LICENSES/OpenSSL.txt", "LICENSES/curl.txt",
                   "LICENSES/jansson.txt"], dist
    meta = open(os.path.join(tmp_path, [n for n in dist if n.endswith("/METADATA")][0])).read()
    assert "License-Expression: Apache-2.0 AND curl AND MIT" in meta, meta[:2000]
    assert sorted(re.findall(r"^License-File: (.+)$", meta, re.M)) == lic, meta[:2000]
    for n in lic:
        text = open(os.path.join(tmp_path, [d for d in dist if d.endswith("/" + n)][0])).read()
        assert {"LICENSE": "Apache License", "LICENSES/OpenSSL.txt": "OpenSSL",
                "LICENSES/curl.txt": "Daniel Stenberg",
                "LICENSES/jansson.txt": "Petri Lehtinen"}[n] in text, n


def venv_for(py, where):
    """A fresh venv with the wheel's Python; returns its bin/."""
    subprocess.run([py, "-m", "venv", where], check=True, timeout=300)
    return os.path.join(where, "bin")


def pip_install(bindir, *args):
    p = subprocess.run([os.path.join(bindir, "python"), "-m", "pip", "install", "-q",
                        "--disable-pip-version-check", *args],
                       capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]


RECORD = r"""
import json, logging, os, sys, time
# MLflow 3.1 (CPython 3.9's newest) migrates a new sqlite store with alembic,
# whose fileConfig gives the root logger a WARNING handler: the engine's notes,
# the closing line this test reads among them, then follow that level
# (docs/python.md); an application that wants them sets the logger's level
# (which the migration's reconfiguring of the root keeps)
logging.basicConfig(level=logging.INFO)
logging.getLogger("scopemeter").setLevel(logging.INFO)
import scopemeter
assert "mlflow" not in sys.modules, "import scopemeter imported mlflow"
here = os.path.dirname(scopemeter.__file__)
assert here.startswith(sys.prefix), (here, sys.prefix)
plan = scopemeter.plan(workers=2, all_workers=True)
assert plan["collectors"] == 2, plan
import mlflow
mlflow.set_tracking_uri(sys.argv[1])
with mlflow.start_run() as run:
    assert scopemeter.enable_system_metrics(interval=1, samples=1) is True
    time.sleep(3)
    scopemeter.disable_system_metrics()
got = mlflow.MlflowClient().get_run(run.info.run_id).data.metrics
maps = open("/proc/self/maps").read()
# https would load the module beside the extension: the one that uses the
# system's OpenSSL where mlflow's requests loaded libssl.so.3, else the one
# with its own (src/mlflow/curl_api.c)
sys_ssl = any(ln.rstrip().endswith("/libssl.so.3") for ln in maps.splitlines())
tls = scopemeter._native.tls()
want = "scopemeter-https-sys.so" if sys_ssl else "scopemeter-https.so"
assert os.path.join(here, want) in tls and "OpenSSL" in tls, (tls, sys_ssl)
print(json.dumps({"metrics": sorted(got), "mlflow": mlflow.__version__,
                  "libcurl_mapped": "libcurl" in maps, "jansson_mapped": "libjansson" in maps,
                  "tls_module_mapped": "scopemeter-https" in maps}))
"""


def check_recording(p):
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    import json
    res = json.loads(p.stdout.strip().splitlines()[-1])
    names = res["metrics"]
    for s in ("node_cpu_utilization_percentage", "node_memory_usage_megabytes"):
        assert f"system/{s}/rank0" in names, names
    m = [c for c in map(CLOSING.search, p.stderr.splitlines()) if c]
    assert len(m) == 1, p.stderr
    w, pts, tags, delivered, overflow, refused, undelivered = map(int, m[0].groups())
    assert w >= 1 and delivered == pts + tags and undelivered == 0, p.stderr
    return res


def check_cli(bindir, server, env=None, install="wheel"):
    exe = os.path.join(bindir, "scopemeter")
    v = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
    assert v.returncode == 0, v.stderr
    assert v.stdout.startswith("scopemeter ") and f"executable: {exe}" in v.stdout, v.stdout
    # https: the TLS module of the same install, in the venv's package
    https = re.search(r"^https: (.*OpenSSL.*) \((.*)\)$", v.stdout, re.M)
    assert https, v.stdout
    assert os.path.realpath(https.group(2)).startswith(
        os.path.realpath(os.path.dirname(bindir))), (https.group(2), bindir)
    pr = subprocess.run([exe, "probe"], capture_output=True, text=True, timeout=60)
    assert pr.returncode == 0, pr.stderr
    assert "system/node_cpu_utilization_percentage/rank0" in pr.stdout, pr.stdout
    r = subprocess.run([exe, "run", "--experiment", "wheel", "--interval", "1", "--", "sleep", "3"],
                       capture_output=True, text=True, timeout=120,
                       env=clean_env(MLFLOW_TRACKING_URI=server, **(env or {})))
    assert r.returncode == 0, r.stderr
    m = [c for c in map(CLOSING.search, r.stderr.splitlines()) if c]
    assert len(m) == 1, r.stderr
    w, pts, tags, delivered, overflow, refused, undelivered = map(int, m[0].groups())
    assert w >= 2 and delivered == pts + tags, r.stderr
    # the build tag names this install (docs/series.md): the venv's wheel, or the bundle
    run_id = re.search(r"created run ([0-9a-f]+)", r.stderr).group(1)
    build = tags_of(get_run(server, run_id))["scopemeter.rank0.build"]
    assert f" install={install} " in build and build.endswith(
        " path=" + os.path.realpath(exe)), build


@pytest.fixture(scope="session")
def venvs(wheel, tmp_path_factory):
    """{minor: bin/} — a fresh venv per CPython 3.9-3.13 with the wheel
    installed; made at the same time (pip mostly waits on the index).  Its
    mlflow-skinny comes with the wheel (its dependency; pip picks the newest
    release for that Python); a sqlite store needs SQLAlchemy and alembic.
    pip's own cache is used."""
    import concurrent.futures as cf
    top = tmp_path_factory.mktemp("venvs")

    def make(minor):
        bindir = venv_for(PYTHONS[minor], str(top / minor))
        pip_install(bindir, wheel[0], "sqlalchemy", "alembic")
        return bindir
    with cf.ThreadPoolExecutor(len(PYTHONS) or 1) as ex:
        futs = {m: ex.submit(make, m) for m in PYTHONS}
        return {m: f.result() for m, f in futs.items()}


def check_cpython(bindir, rec, server):
    """One CPython's venv: a recording into its own sqlite store (rec), the
    CLI against the session's server; returns the recording's result."""
    p = subprocess.run([os.path.join(bindir, "python"), "-c", RECORD,
                        f"sqlite:///{rec}/mlflow.db"], capture_output=True, text=True,
                       timeout=300, cwd=str(rec), env=clean_env())
    res = check_recording(p)
    check_cli(bindir, server)
    return res


@pytest.fixture(scope="session")
def cpython_checks(venvs, sqlite_server, tmp_path_factory):
    """{minor: future of check_cpython}: every CPython's checks at the same
    time, from the first test_every_cpython on; each test waits for its own.
    They share nothing but the server: each venv, sqlite store and working
    directory is its own, and the five CLIs' `--experiment wheel` is
    get-or-create (sm_mlflow_experiment looks the experiment up again when a
    concurrent create answers RESOURCE_ALREADY_EXISTS).  One after the other
    they spent most of their time in the sleeps and in importing mlflow."""
    import concurrent.futures as cf
    top = tmp_path_factory.mktemp("cpython")
    ex = cf.ThreadPoolExecutor(len(venvs) or 1)
    futs = {}
    for m, bindir in venvs.items():
        rec = top / m
        rec.mkdir()
        futs[m] = ex.submit(check_cpython, bindir, rec, sqlite_server)
    yield futs
    ex.shutdown(wait=True, cancel_futures=True)


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("minor", MINORS)
def test_every_cpython(cpython_checks, minor):
    if minor not in PYTHONS:
        pytest.fail(f"pyenv lists no CPython {minor}: `pyenv install {minor}` (issue: every "
                    f"CPython 3.9-3.13)")
    res = cpython_checks[minor].result()  # its assertion, if one failed
    print(f"CPython {minor}: mlflow {res['mlflow']}")


@pytest.mark.timeout(600)
def test_bundle_directory(wheel, mlflow_server, tmp_path):
    """The platform teams' layout (README, Install): the wheel unpacked with
    `pip install --target DIR` and mounted into images; the CLI runs from
    DIR/bin and finds its TLS module in DIR/scopemeter/."""
    d = tmp_path / "bundle"
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "--no-deps", "--target", str(d), wheel[0]],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    check_cli(str(d / "bin"), mlflow_server, install="bundle")


def system_libs(*stems):
    """Every file of the system's copies of these libraries (ldconfig's cache
    and the usual directories), real paths."""
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    paths = set()
    for stem in stems:
        for line in out.splitlines():
            m = re.search(r"^\s*(%s\S*) .*=> (\S+)$" % re.escape(stem), line)
            if m:
                paths.add(os.path.realpath(m.group(2)))
        for d in ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib", "/usr/lib64",
                  "/usr/local/lib"):
            for f in glob.glob(os.path.join(d, stem + "*.so*")):
                paths.add(os.path.realpath(f))
    return sorted(p for p in paths if os.path.isfile(p))


def hidden(argv, libs, **kw):
    """argv in a private mount namespace where /dev/null covers each of libs."""
    mounts = "".join(f"mount --bind /dev/null {shlex.quote(p)} && " for p in libs)
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                           mounts + "exec " + " ".join(map(shlex.quote, argv))], **kw)


@pytest.mark.timeout(1500)
def test_runs_with_system_libcurl_and_jansson_hidden(venvs, mlflow_server):
    minor = "%d.%d" % sys.version_info[:2]
    venv311 = venvs[minor if minor in venvs else sorted(venvs)[-1]]
    curl_jansson = system_libs("libcurl", "libjansson")
    ssl = system_libs("libssl", "libcrypto")
    assert any("libcurl" in p for p in curl_jansson), "no system libcurl to hide"
    # the hiding is real: the system's libcurl cannot be loaded
    probe = "import ctypes; ctypes.CDLL('libcurl.so.4')"
    p = hidden([sys.executable, "-c", probe], curl_jansson, capture_output=True, text=True,
               timeout=60)
    assert p.returncode != 0 and "libcurl" in p.stderr, p.stderr
    # CLI: not even libssl/libcrypto (OpenSSL is inside it)
    exe = os.path.join(venv311, "scopemeter")
    r = hidden([exe, "run", "--experiment", "wheel-hidden", "--interval", "1", "--", "sleep", "3"],
               curl_jansson + ssl, capture_output=True, text=True, timeout=120,
               env=clean_env(MLFLOW_TRACKING_URI=mlflow_server))
    assert r.returncode == 0, r.stderr
    m = [c for c in map(CLOSING.search, r.stderr.splitlines()) if c]
    assert len(m) == 1, r.stderr
    w, pts, tags, delivered, overflow, refused, undelivered = map(int, m[0].groups())
    assert w >= 2 and delivered == pts + tags, r.stderr
    pr = hidden([exe, "probe"], curl_jansson + ssl, capture_output=True, text=True, timeout=60)
    assert pr.returncode == 0 and "node_cpu_utilization_percentage" in pr.stdout, pr.stderr
    # the extension: an http(s) URI ships through the C REST sink; MLflow's
    # own client (requests) keeps the system's libssl, so only libcurl and
    # jansson are hidden
    p = hidden([os.path.join(venv311, "python"), "-c", RECORD, mlflow_server], curl_jansson,
               capture_output=True, text=True, timeout=300, env=clean_env())
    res = check_recording(p)
    assert not res["libcurl_mapped"] and not res["jansson_mapped"], res
    assert not res["tls_module_mapped"], res  # an http server: no OpenSSL mapped
    # a process without the system's libssl.so.3 (hidden, and nothing imports
    # ssl): https still has its module, the one with its own OpenSSL
    code = ("import os, scopemeter; t = scopemeter._native.tls(); "
            "m = open('/proc/self/maps').read(); print(t); print('libssl' in m)")
    p = hidden([os.path.join(venv311, "python"), "-c", code], curl_jansson + ssl,
               capture_output=True, text=True, timeout=120, env=clean_env())
    assert p.returncode == 0, p.stderr
    tls, mapped = p.stdout.strip().splitlines()[-2:]
    assert "OpenSSL" in tls and tls.rstrip(")").endswith("/scopemeter-https.so"), tls
    assert mapped == "False", p.stdout  # the module's OpenSSL is static: no libssl file
