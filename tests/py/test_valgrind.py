"""The CLI under valgrind memcheck: zero errors, zero leaks (docs/hardening.md).

`scopemeter probe` on the real machine and on a fixture machine, and
`scopemeter run` against the real MLflow server, each run under

    valgrind --leak-check=full --errors-for-leak-kinds=definite,indirect
             --error-exitcode=99

so an invalid read/write, a use of uninitialised memory, a bad free or a
definitely/indirectly lost block makes the process exit 99.  "Still
reachable" blocks (libcurl's and OpenSSL's process-wide state) are allowed;
tests/valgrind.supp, when present, holds the third-party suppressions, each
with a comment saying why.  The binary must be a plain build (valgrind and
ASan exclude each other): SCOPEMETER_BIN, as for the other tests.
"""
import json
import os
import re
import subprocess
import urllib.request

import pytest

from conftest import FIXTURES, ROOT, clean_env, have

SUPP = os.path.join(ROOT, "tests", "valgrind.supp")

pytestmark = [
    pytest.mark.valgrind,
    # one process under memcheck is bounded at 300 s (_valgrind); the last
    # test may also start the session's mlflow server
    pytest.mark.timeout(480),
    pytest.mark.skipif(not have("valgrind"),
                       reason="valgrind not installed (scripts/install-deps installs it)"),
]


def _valgrind(cmd, env, tmp_path, timeout=300):
    log = tmp_path / "valgrind.log"
    vg = ["valgrind", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect",
          "--error-exitcode=99", "--show-leak-kinds=definite,indirect",
          f"--log-file={log}"]
    if os.path.exists(SUPP):
        vg.append(f"--suppressions={SUPP}")
    p = subprocess.run(vg + cmd, env=env, capture_output=True, text=True, timeout=timeout)
    text = log.read_text()
    return p, text


def _assert_clean(p, vglog):
    if "ASan" in vglog or "AddressSanitizer" in p.stderr:
        pytest.fail("SCOPEMETER_BIN is a sanitizer build; valgrind needs a plain build")
    assert p.returncode != 99, f"valgrind found errors or leaks:\n{vglog}"
    m = re.search(r"ERROR SUMMARY: (\d+) errors", vglog)
    assert m, vglog
    assert m.group(1) == "0", vglog
    # leak summary: absent when nothing was allocated at exit
    for kind in ("definitely lost", "indirectly lost"):
        m = re.search(kind + r": ([\d,]+) bytes", vglog)
        if m:
            assert m.group(1) == "0", vglog
    assert "Invalid read" not in vglog and "Invalid write" not in vglog, vglog


def _fixture_sysroot():
    """A fixture machine with a cgroup limit (the container collector attaches,
    so its open/sample/close run under memcheck too); else any fixture machine."""
    machines = []
    if os.path.isdir(FIXTURES):
        for name in sorted(os.listdir(FIXTURES)):
            d = os.path.join(FIXTURES, name)
            if os.path.isfile(os.path.join(d, "proc", "self", "cgroup")) and \
               os.path.isfile(os.path.join(d, "proc", "stat")):
                machines.append(d)
    if not machines:
        pytest.fail(f"no fixture machine (proc/self/cgroup + proc/stat) under {FIXTURES}")
    for d in machines:
        for root, _dirs, files in os.walk(os.path.join(d, "sys", "fs", "cgroup")):
            for f in files:
                if f in ("memory.max", "memory.limit_in_bytes", "cpu.max"):
                    with open(os.path.join(root, f)) as fh:
                        v = fh.read().strip()
                    if v and not v.startswith("max") and v != "9223372036854771712":
                        return d
    return machines[0]


def test_harness_catches_a_leak_and_a_bad_read(tmp_path):
    """The flags above really fail a leak and an invalid read (so a clean
    result below means something)."""
    if not have("cc"):
        pytest.skip("no C compiler")
    src = tmp_path / "bad.c"
    src.write_text("#include <stdlib.h>\n"
                   "int main(int c, char **v) { (void)v;\n"
                   "  char *p = malloc(16); p = 0; (void)p;\n"  # 16 bytes definitely lost
                   "  char *q = malloc(8); int r = q[8 + c - 1];\n"  # reads q[8]
                   "  free(q); return r & 0; }\n")
    exe = tmp_path / "bad"
    subprocess.run(["cc", "-O0", "-g", "-o", str(exe), str(src)], check=True)
    p, vglog = _valgrind([str(exe)], clean_env(), tmp_path)
    assert p.returncode == 99, vglog
    assert "Invalid read of size 1" in vglog, vglog
    assert re.search(r"definitely lost: 16 bytes", vglog), vglog
    with pytest.raises(AssertionError):
        _assert_clean(p, vglog)


def test_probe_real_machine(scopemeter_bin, tmp_path):
    p, vglog = _valgrind([scopemeter_bin, "probe", "--json", "--interval", "0.2"],
                         clean_env(), tmp_path)
    _assert_clean(p, vglog)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["series"], out


def test_probe_fixture_machine(scopemeter_bin, tmp_path):
    sysroot = _fixture_sysroot()
    p, vglog = _valgrind([scopemeter_bin, "probe", "--json", "--interval", "0.2"],
                         clean_env(SCOPEMETER_SYSROOT=sysroot), tmp_path)
    _assert_clean(p, vglog)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["series"], out


def _has_run(scopemeter_bin):
    p = subprocess.run([scopemeter_bin, "--help"], capture_output=True, text=True, timeout=30)
    return re.search(r"^\s+run\s", p.stdout, re.M) is not None


def test_run_against_mlflow(scopemeter_bin, request, tmp_path):
    if not _has_run(scopemeter_bin):
        pytest.skip("this build has no `scopemeter run` (cli/cmd_run.c)")
    mlflow_server = request.getfixturevalue("mlflow_server")
    env = clean_env(MLFLOW_TRACKING_URI=mlflow_server,
                    MLFLOW_EXPERIMENT_NAME="valgrind-run")
    p, vglog = _valgrind([scopemeter_bin, "run", "--interval", "0.2", "--", "sleep", "1"],
                         env, tmp_path)
    _assert_clean(p, vglog)
    assert p.returncode == 0, p.stderr
    # the shipping path really ran under memcheck: points landed in the run
    exp = _api(mlflow_server, "experiments/get-by-name?experiment_name=valgrind-run")
    runs = _api(mlflow_server, "runs/search",
                {"experiment_ids": [exp["experiment"]["experiment_id"]]})["runs"]
    assert len(runs) == 1, runs
    keys = [m["key"] for m in runs[0]["data"].get("metrics", [])]
    assert any(k.startswith("system/") for k in keys), (keys, p.stderr)


def _api(uri, endpoint, body=None):
    req = urllib.request.Request(f"{uri}/api/2.0/mlflow/{endpoint}",
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())
