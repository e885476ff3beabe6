"""The RDMA fixture machines (tests/fixtures/rdma-*, written by
tests/fixtures/make-rdma-fixtures) through `scopemeter probe --json
--interval 0` with SCOPEMETER_SYSROOT: which ports a container records (the
devices of its /dev/infiniband/uverbsN, every device on a bare host), the
series' keys, scope and sources, the start tags (`rdma`, `rdma_events`) and
the one line each case says.  The values' arithmetic (4-octet units, resets,
a stopped counter, one port failing) is tests/c/test_rdma.c's, which moves
the counters between samples; here --interval 0 reads each counter twice
unchanged, so every series is 0.0 since the start.
"""
import json
import os
import subprocess

from conftest import FIXTURES, clean_env

RX, TX = "system/rdma_receive_megabytes/rank0", "system/rdma_transmit_megabytes/rank0"
RXP, TXP = "system/rdma_receive_packets/rank0", "system/rdma_transmit_packets/rank0"


def fx(name):
    return os.path.join(FIXTURES, name)


def rdma(out):
    return {s["key"]: s for s in out["series"] if "/rdma_" in s["key"]}


def rdma_notes(out):
    return [n for n in out["notes"] if n.startswith(("rdma", "no RDMA"))]


def test_given_hca_only(probe_json):
    """The node has mlx5_0 and mlx5_1; /dev/infiniband holds only uverbs0
    (mlx5_0, by /sys/class/infiniband_verbs/uverbs0/ibdev): only its port."""
    out = probe_json(sysroot=fx("rdma-k8s-mlx5-ib"))
    s = rdma(out)
    assert sorted(s) == [RX, TX]
    assert s[RX]["value"] == 0.0 and s[RX]["scope"] == "pod" and s[RX]["unit"] == "MB"
    assert s[RX]["source"] == ("/sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_data "
                               "x4 octets")
    assert s[TX]["source"] == ("/sys/class/infiniband/mlx5_0/ports/1/counters/port_xmit_data "
                               "x4 octets")
    tag = "mlx5_0/1 InfiniBand ACTIVE 200 Gb/sec (4X HDR)"
    assert out["tags"]["scopemeter.rank0.rdma"] == tag
    assert rdma_notes(out) == [f"rdma_* from 1 port (/dev/infiniband: {tag})"]
    # link_downed was 1 before the start: nothing happened since
    assert "scopemeter.rank0.rdma_events" not in out["tags"]


def test_roce_port(probe_json):
    out = probe_json(sysroot=fx("rdma-k8s-mlx5-roce"))
    assert sorted(rdma(out)) == [RX, TX]
    assert out["tags"]["scopemeter.rank0.rdma"] == "mlx5_2/1 Ethernet ACTIVE 100 Gb/sec (4X EDR)"


def test_bare_host_32bit(probe_json):
    """/dev is devtmpfs (no container runtime made it): every device of
    /sys/class/infiniband, here without ib_uverbs (no /dev/infiniband).  The
    32-bit transmit counter at all ones is said, in a line and the tag."""
    out = probe_json(sysroot=fx("rdma-host-mlx4-32bit"))
    s = rdma(out)
    assert sorted(s) == [RX, TX]
    assert s[TX]["source"].endswith("/mlx4_0/ports/1/counters/port_xmit_data x4 octets "
                                    "(+mlx4_0/2)")
    assert out["tags"]["scopemeter.rank0.rdma"] == (
        "mlx4_0/1 InfiniBand ACTIVE 56 Gb/sec (4X FDR) 32-bit; "
        "mlx4_0/2 Ethernet DOWN 10 Gb/sec (1X QDR) 32-bit")
    assert out["tags"]["scopemeter.rank0.rdma_events"] == (
        "mlx4_0/1 port_xmit_data=stopped; mlx4_0/2 state=DOWN")
    assert "mlx4_0 port 1: /sys/class/infiniband/mlx4_0/ports/1/counters/port_xmit_data " \
           "stopped at its maximum" in out["_stderr"]
    (note,) = rdma_notes(out)
    assert note.startswith("rdma_* from 2 ports (the host's /dev: ")


def test_packets_only_no_byte_count(probe_json):
    """rxe without PMA counters/: packets from hw_counters, one line, and
    no rdma_*_megabytes made up from them."""
    out = probe_json(sysroot=fx("rdma-k8s-rxe-packets"))
    s = rdma(out)
    assert sorted(s) == [RXP, TXP]
    assert s[RXP]["unit"] == "packets" and s[RXP]["value"] == 0.0
    assert s[TXP]["source"] == "/sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts"
    (note,) = rdma_notes(out)
    assert note.endswith("; rxe0/1 counts packets only (no PMA counters/: No such file or "
                         "directory): rdma_*_packets from hw_counters, no byte count")


def test_none_given(probe_json):
    out = probe_json(sysroot=fx("rdma-k8s-none-given"))
    assert rdma(out) == {}
    assert rdma_notes(out) == [
        "no RDMA device given to this container (no /dev/infiniband/uverbs* of the 1 device "
        "in /sys/class/infiniband): rdma_* absent"]
    assert out["tags"]["scopemeter.rank0.rdma"] == "none: no /dev/infiniband/uverbs* here"


def test_no_rdma_says_nothing(probe_json):
    """Most machines: no series, no tag, no line."""
    out = probe_json(sysroot=fx("cg-k8s-v2-cgroupns"))
    assert rdma(out) == {} and rdma_notes(out) == []
    assert not any("rdma" in k for k in out["tags"])


def plan(scopemeter_bin, *args):
    p = subprocess.run([scopemeter_bin, "plan", "--workers", "8", "--gpus-per-worker", "1",
                        "--json", *args], capture_output=True, text=True, timeout=60,
                       env=clean_env())
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_plan_counts_rdma_only_with_ports(probe_json, scopemeter_bin):
    """`scopemeter plan` counts rdma_* only where the pods are given ports
    (--rdma), as many as a collector on such a machine records."""
    without, with_ = plan(scopemeter_bin), plan(scopemeter_bin, "--rdma")
    recorded = len(rdma(probe_json(sysroot=fx("rdma-k8s-mlx5-ib"))))
    assert recorded == 2 == len(rdma(probe_json(sysroot=fx("rdma-k8s-rxe-packets"))))
    assert without["rdma_ports"] is False and without["rdma_series_per_collector"] == 0
    assert with_["rdma_ports"] is True and with_["rdma_series_per_collector"] == recorded
    assert with_["series_per_collector"] - without["series_per_collector"] == recorded
    assert with_["series"] - without["series"] == recorded  # one collector by default
    assert with_["sections"] - without["sections"] == recorded  # no node tier: one each
