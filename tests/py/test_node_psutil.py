"""Node-scope values of `scopemeter probe --json --interval 1` against psutil
(what MLflow's own monitor logs) on this machine, read around the probe: the
probe's sample falls between a psutil read just before it started and one
just after it exited, so its value must lie between the two, give or take
a small tolerance for what psutil rounds and for the machine moving on.
"""
import pytest

psutil = pytest.importorskip("psutil")

MB = 1e6


def snapshot():
    vm = psutil.virtual_memory()
    du = psutil.disk_usage("/")
    net = psutil.net_io_counters()
    return {
        "mem_pct": 100.0 * (vm.total - vm.available) / vm.total,
        "mem_pct_psutil": vm.percent,
        "mem_mb": (vm.total - vm.available) / MB,
        "disk_used_mb": du.used / MB,
        "disk_free_mb": du.free / MB,
        "disk_pct": du.percent,
        "rx": net.bytes_recv / MB,
        "tx": net.bytes_sent / MB,
    }


def between(v, a, b, tol):
    lo, hi = min(a, b) - tol, max(a, b) + tol
    assert lo <= v <= hi, (v, lo, hi)


def test_node_values_match_psutil(probe_json):
    before = snapshot()
    out = probe_json(interval="1")
    after = snapshot()
    s = {x["upstream"]: x["raw"] for x in out["series"]}
    scope = {x["upstream"]: x["scope"] for x in out["series"]}

    # memory: (MemTotal - MemAvailable), psutil's definition of "used" for percent
    between(s["system_memory_usage_megabytes"], before["mem_mb"], after["mem_mb"], 64)
    between(s["system_memory_usage_percentage"], before["mem_pct"], after["mem_pct"], 0.3)
    # psutil rounds its percent to 0.1
    between(s["system_memory_usage_percentage"], before["mem_pct_psutil"],
            after["mem_pct_psutil"], 0.35)

    # root filesystem: statvfs("/") as psutil.disk_usage("/")
    between(s["disk_usage_megabytes"], before["disk_used_mb"], after["disk_used_mb"], 64)
    between(s["disk_available_megabytes"], before["disk_free_mb"], after["disk_free_mb"], 64)
    between(s["disk_usage_percentage"], before["disk_pct"], after["disk_pct"], 0.15)
    assert s["disk_usage_percentage"] == pytest.approx(
        100.0 * s["disk_usage_megabytes"] /
        (s["disk_usage_megabytes"] + s["disk_available_megabytes"]), rel=1e-9)

    # network: cumulative since the probe started, never negative, and no more
    # than what psutil saw move around the whole probe
    for key, k in (("network_receive_megabytes", "rx"), ("network_transmit_megabytes", "tx")):
        assert s[key] >= 0.0
        assert s[key] <= after[k] - before[k] + 0.01

    # CPU: a percentage of the node
    assert 0.0 <= s["cpu_utilization_percentage"] <= 100.0
    assert scope["system_memory_usage_percentage"] == "node"
    assert scope["disk_usage_megabytes"] == "rootfs"
    assert scope["network_receive_megabytes"] == "pod"
