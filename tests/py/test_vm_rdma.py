"""The interconnect against a real kernel: Soft-RoCE (rdma_rxe) in Debian's
kernel under QEMU (tests/vm/guest.py), real RDMA traffic of a known size
(ibv_rc_pingpong, 200 round trips of 4096 bytes, server and client on one
rxe device over a veth), and what the RDMA collector says around it
(tests/vm/rdma.sh drives tests/tools/cg_driver rdma and cg_driver network).

Whatever that kernel's rxe exposes is the oracle.  Debian 12's 6.1 has no
PMA counters/ for rxe (the kernel adds that group only for a driver with
process_mad, drivers/infiniband/core/sysfs.c setup_port; rxe's came later):
the collector must then record packets from hw_counters and no byte count,
and its packets must equal the kernel's own sent_pkts / rcvd_pkts read
around the traffic.  A kernel whose rxe answers counters/ gets the byte
series instead, held to port_{rcv,xmit}_data x 4 the same way.
network_* (/proc/net/dev) over the same span sees only the TCP exchange of
the queue pair numbers: RDMA bypasses it.  `ip link set va down` shows in
the rdma_events tag (state=DOWN, and rxe's own link_downed).

Needs the host's libibverbs provider for rxe and ibv_rc_pingpong
(ibverbs-providers, ibverbs-utils: scripts/install-deps); the guest runs
them from the host's root over 9p.
"""
import os
import shutil
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "vm"))
import guest  # noqa: E402  (tests/vm/guest.py)

pytestmark = [pytest.mark.vm, pytest.mark.timeout(1200)]

ITERS, SIZE = 200, 4096  # tests/vm/rdma.sh's ibv_rc_pingpong -n -s


def read(*parts):
    with open(os.path.join(*parts)) as f:
        return f.read()


@pytest.fixture(scope="module")
def out(tmp_path_factory, scopemeter_bin):
    if not shutil.which("ibv_rc_pingpong") or not os.path.exists(
            "/etc/libibverbs.d/rxe.driver"):
        pytest.fail("ibv_rc_pingpong or the rxe provider missing: scripts/install-deps "
                    "installs ibverbs-utils and ibverbs-providers")
    d = str(tmp_path_factory.mktemp("vm-rdma"))
    guest.stage(d, scopemeter_bin)
    build = os.environ.get("SCOPEMETER_BUILD") or os.path.dirname(
        os.path.dirname(scopemeter_bin))
    shutil.copy2(os.path.join(build, "tests", "tools", "cg_driver"), os.path.join(d, "bin", "cg_driver"))
    with open(os.path.join(guest.HERE, "rdma.sh")) as f:
        rc = guest.boot(f.read(), d, timeout=900)
    assert rc == 0, read(d, "script.log")[-4000:]
    return d


def driver(text):
    """cg_driver's output: the start lines, each sample's points, each tags call's tags."""
    start, samples, tags = {}, [], []
    points, cur_tags = {}, None
    for line in text.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("open", "status", "msg"):
            start[word] = rest
        elif word == "point":
            k, _, v = rest.rpartition(" ")
            points[k] = float(v)
        elif word == "sample":
            samples.append(points)
            points = {}
        elif word == "tag":
            k, _, v = rest.partition(" ")
            cur_tags = {} if cur_tags is None else cur_tags
            cur_tags[k] = v
        elif word == "done":
            tags.append(cur_tags or {})
            cur_tags = None
    return start, samples, tags


def counters(text):
    return [int(x) for x in text.split()]


def netdev_bytes(text):
    rx = tx = 0
    for line in text.splitlines()[2:]:
        f = line.split(":", 1)[1].split()
        rx += int(f[0])
        tx += int(f[8])
    return rx, tx


def test_rdma_series_equal_the_kernels_counters(out):
    assert read(out, "client.rc").strip() == "0", read(out, "client.log")
    start, samples, _ = driver(read(out, "rdma.out"))
    assert start["open"] == "0", start
    files = read(out, "counters_files")
    sent0, rcvd0 = counters(read(out, "kernel_before"))
    sent1, rcvd1 = counters(read(out, "kernel_after"))
    assert len(samples) == 2, samples
    if files.strip() == "no counters/":
        # this kernel's rxe counts packets only: said, recorded, no bytes made up
        assert "rxe0/1 counts packets only" in start["msg"], start
        assert "packets-only" in start["status"], start
        assert samples[0] == {"rdma_receive_packets": 0.0, "rdma_transmit_packets": 0.0}
        assert "rdma_receive_megabytes" not in samples[1]
        assert samples[1]["rdma_transmit_packets"] == sent1 - sent0, (samples, sent0, sent1)
        assert samples[1]["rdma_receive_packets"] == rcvd1 - rcvd0, (samples, rcvd0, rcvd1)
        # each round trip is a send each way, 4096 bytes in 4 packets of the
        # 1024-byte path MTU at least: the traffic was real
        assert sent1 - sent0 >= 2 * ITERS, (sent0, sent1)
    else:
        pytest.fail("this kernel's rxe answers counters/ (%s): compare the byte series with "
                    "port_{rcv,xmit}_data x 4 here" % files.split())


def test_network_does_not_see_it(out):
    """/proc/net/dev over the same span: the TCP exchange only."""
    _, net, _ = driver(read(out, "net.out"))
    _, rdma, _ = driver(read(out, "rdma.out"))
    payload = 2 * ITERS * SIZE  # both sides send every round trip
    moved = net[1]["network_transmit_megabytes"] * 1e6
    assert len(net) == 2 and net[0]["network_transmit_megabytes"] == 0.0, net
    assert moved < payload / 10, (moved, payload, rdma)
    rx0, tx0 = netdev_bytes(read(out, "netdev_before"))
    rx1, tx1 = netdev_bytes(read(out, "netdev_after"))
    assert tx1 - tx0 < payload / 10, (tx0, tx1)


# rxe's health counters in the collector's order (src/collect/coll_rdma.c health_defs)
RXE_HEALTH = ["retry_exceeded_err", "retry_rnr_exceeded_err", "completer_retry_err",
              "rcvd_seq_err", "link_downed"]


def hw(text):
    """`grep . hw_counters/*`: {name: value}."""
    return {os.path.basename(k): int(v) for k, _, v in
            (line.rpartition(":") for line in text.splitlines())}


def test_link_down_shows_in_the_tag(out):
    """After `ip link set va down`: the tag is exactly what the kernel's
    hw_counters moved since before the traffic, then state=DOWN."""
    start, _, tags = driver(read(out, "rdma.out"))
    assert start["status"].startswith("rxe0/1 Ethernet ACTIVE"), start
    assert read(out, "state_down").strip() == "1: DOWN"
    assert "rdma_events" not in tags[0], tags  # the start: nothing yet
    before, after = hw(read(out, "hw_before")), hw(read(out, "hw_after"))
    assert after["link_downed"] - before["link_downed"] == 1, (before, after)
    want = "rxe0/1" + "".join(" %s=%d" % (k, after[k] - before[k]) for k in RXE_HEALTH
                              if k in after and after[k] != before[k]) + " state=DOWN"
    assert tags[1]["rdma_events"] == want, (tags, before, after)
    assert tags[2]["rdma_events"] == want, tags
