"""The node's CPU package energy (src/collect/coll_rapl.c, docs/series.md
node_cpu_energy) through `scopemeter run --jsonl` on copies of the RAPL
fixture machines (tests/fixtures/rapl-*, written by
tests/fixtures/make-rapl-fixtures) under SCOPEMETER_SYSROOT: CMD itself
moves the counters (the collector reads them at its start, before CMD, and
at its end, after it), so the end tag's kWh are known; a counter below its
last reading wrapped once at max_energy_range_uj (262143328850 uJ here).
--interval 600: no sample falls between CMD's writes and the end.
`scopemeter probe` says in one line whether RAPL is readable.  The
arithmetic on many readings is tests/c/test_rapl.c's.
"""
import json
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

from conftest import FIXTURES, clean_env
from runread import run_cli

ZONES = "sys/devices/virtual/powercap/intel-rapl"
TAG = "scopemeter.rank0.node_cpu_energy"


def copy_fx(name, dst):
    root = dst / name
    shutil.copytree(os.path.join(FIXTURES, name), root, symlinks=True)
    return root


def tags(path):
    return {r["key"]: r["value"] for r in map(json.loads, path.read_text().splitlines())
            if r["kind"] == "tag"}


def rapl_lines(stderr):
    return [l for l in stderr.splitlines() if "RAPL" in l]


def test_two_packages_and_a_wrap(tmp_path, scopemeter_bin):
    """package-0: 123456789012 -> 127056789012 uJ (+3.6e9 uJ = 0.001 kWh);
    package-1: 262000000000 -> 1000000000, a wrap: (262143328850 -
    262000000000) + 1000000000 = 1143328850 uJ = 0.000318 kWh.  The dram
    subzones and psys move too and are never counted."""
    root = copy_fx("rapl-two-packages", tmp_path)
    z = root / ZONES
    cmd = (f"printf '127056789012\\n' > '{z}/intel-rapl:0/energy_uj' && "
           f"printf '1000000000\\n' > '{z}/intel-rapl:1/energy_uj' && "
           f"printf '9999999999\\n' > '{z}/intel-rapl:0/intel-rapl:0:0/energy_uj' && "
           f"printf '1\\n' > '{z}/intel-rapl:2/energy_uj'")
    out = tmp_path / "run.jsonl"
    p = run_cli(scopemeter_bin, ["--interval", "600", "--jsonl", str(out), "--", "sh", "-c", cmd],
                env={"SCOPEMETER_SYSROOT": str(root)})
    assert p.returncode == 0, p.stderr
    got = tags(out)
    assert got.get(TAG) == "package0 kwh=0.001000; package1 kwh=0.000318; total_kwh=0.001318", \
        (got.get(TAG), p.stderr)
    assert rapl_lines(p.stderr) == [
        "scopemeter: node_cpu_energy from RAPL (/sys/class/powercap/intel-rapl:N/energy_uj): "
        "package0, package1"], p.stderr


def test_one_package_no_total_and_no_mmio_twin(tmp_path, scopemeter_bin):
    """A client part: package-0 and its MMIO twin (intel-rapl-mmio:0, the
    same package): counted once, and one package has no total_kwh."""
    root = copy_fx("rapl-client", tmp_path)
    z = root / "sys/devices/virtual/powercap"
    cmd = (f"printf '8600000000\\n' > '{z}/intel-rapl/intel-rapl:0/energy_uj' && "
           f"printf '8600000000\\n' > '{z}/intel-rapl-mmio/intel-rapl-mmio:0/energy_uj'")
    out = tmp_path / "run.jsonl"
    p = run_cli(scopemeter_bin, ["--interval", "600", "--jsonl", str(out), "--", "sh", "-c", cmd],
                env={"SCOPEMETER_SYSROOT": str(root)})
    assert p.returncode == 0, p.stderr
    assert tags(out).get(TAG) == "package0 kwh=0.001000", p.stderr


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root to make a file root's alone and setpriv to drop it")
def test_root_only_energy_is_one_line_and_no_tag(request, scopemeter_bin):
    """energy_uj mode 0400, root's (the PLATYPUS fix, CVE-2020-8694), read by
    a user that is not root: one line naming the file and why, no tag."""
    # pytest's tmp_path is root's alone (0700 above it): a directory of /tmp
    base = pathlib.Path(tempfile.mkdtemp(prefix="scopemeter-rapl-"))
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    os.chmod(base, 0o777)
    root = copy_fx("rapl-client", base)
    os.chmod(root / ZONES / "intel-rapl:0/energy_uj", 0o400)
    out = base / "run.jsonl"
    spool = base / "spool"
    spool.mkdir()
    os.chmod(spool, 0o777)
    env = clean_env(SCOPEMETER_SYSROOT=str(root), SCOPEMETER_SPOOL_DIR=str(spool))
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        scopemeter_bin, "run", "--interval", "600", "--jsonl", str(out), "--",
                        "true"], env=env, cwd=base, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert TAG not in tags(out), tags(out)
    assert rapl_lines(p.stderr) == [
        "scopemeter: RAPL not readable (cannot read /sys/class/powercap/intel-rapl:0/energy_uj: "
        "Permission denied (root's alone since the PLATYPUS fix, CVE-2020-8694)): "
        "node_cpu_energy absent"], p.stderr


def test_no_powercap_is_one_line_and_no_tag(tmp_path, scopemeter_bin):
    root = copy_fx("rapl-none", tmp_path)
    out = tmp_path / "run.jsonl"
    p = run_cli(scopemeter_bin, ["--interval", "600", "--jsonl", str(out), "--", "true"],
                env={"SCOPEMETER_SYSROOT": str(root)})
    assert p.returncode == 0, p.stderr
    assert TAG not in tags(out), tags(out)
    assert rapl_lines(p.stderr) == [
        "scopemeter: no RAPL package zone (no /sys/class/powercap/intel-rapl:N): "
        "node_cpu_energy absent"], p.stderr


@pytest.mark.parametrize("name,line", [
    ("rapl-two-packages", "node_cpu_energy from RAPL (/sys/class/powercap/intel-rapl:N/energy_uj):"
                          " package0, package1"),
    ("rapl-none", "no RAPL package zone (no /sys/class/powercap/intel-rapl:N): node_cpu_energy "
                  "absent"),
])
def test_probe_says_whether_rapl_is_readable(probe_json, name, line):
    out = probe_json(sysroot=os.path.join(FIXTURES, name))
    assert [n for n in out["notes"] if "RAPL" in n] == [line], out["notes"]
    # a tag, no series: nothing of it among the series
    assert not [s for s in out["series"] if "energy" in s["key"]], out["series"]
