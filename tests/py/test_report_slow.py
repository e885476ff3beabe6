"""Why a rank is slow, and what the job cost (issue 47 item 4; docs/report.md,
"Slow ranks" and "The job at scale").

A run of 64 ranks on 8 nodes is written by this program through MLflow's own
client (log_batch) into the harness's real `mlflow server`, with the series
and tags exactly as the engine names and formats them (docs/series.md: the
GPM series of the detail level full, `rdma_*_megabytes`, the tags
`rdma`, `rdma_events`, `gpu_energy`, `node_cpu_energy`).  Every rank reads
the same but for seeded noise and three known ranks:

- a network straggler: its RDMA ports move 38 % (receive) and 40 %
  (transmit) of the others' bytes a second, and a port counted link_downed 2;
- an input-bound rank: its GPU's SMs active 31 % against 78 %, its tree at
  its whole CPU limit;
- a thermally throttled rank: its GPU's clocks held down by thermal slowdown
  in 19 of 30 windows, at a lower SM clock and hotter.

The report must name exactly those three as slow ranks, each with its cause
and its numbers (checked against what was written), and no other rank among
the slow ranks or the outliers; the job's energy is the sum of every GPU's
and of every node's CPU packages once.  The text, `--json` and
`scopemeter.report()` say the same.
"""
import json
import random
import re

import pytest

from test_report import assert_fits, cli_report, py_report, rank_of, report_env, write_run

RANKS, PER_NODE, STEPS, PERIOD_S = 64, 8, 30, 10   # 30 windows of 10 s: 300 s recorded
NET, INPUT, HOT = 41, 9, 50
NET_RX, NET_TX = 0.38, 0.40                        # of a healthy rank's throughput
RX_MBPS, TX_MBPS = 3200.0, 3100.0                  # a healthy rank's RDMA MB/s
CPU_CORES = 8
THROTTLED_WINDOWS = 19                             # of 30: 63 % of the run
LIMIT_BYTES = 16 << 30


def slow_run(uri):
    """The run, and what was written: {rank: (rx MB/s, tx MB/s, GPU kWh)},
    {node: the node's CPU packages' kWh}."""
    rnd = random.Random(47)
    series, tags = {}, {"scopemeter.interval_s": str(PERIOD_S), "scopemeter.samples": "1",
                        "scopemeter.collectors": str(RANKS)}
    truth, node_kwh = {}, {}
    for k in range(RANKS):
        node = f"node-{k // PER_NODE}"
        rx = RX_MBPS * (NET_RX if k == NET else 1.0) * rnd.uniform(0.99, 1.01)
        tx = TX_MBPS * (NET_TX if k == NET else 1.0) * rnd.uniform(0.99, 1.01)
        # 700 W over 300 s is 0.0583 kWh; the input-bound GPU waits and draws less
        kwh = round((0.030 if k == INPUT else 0.058) + rnd.uniform(-0.001, 0.001), 6)
        truth[k] = (rx, tx, kwh)
        thr = [100.0 if k == HOT and w < THROTTLED_WINDOWS else 0.0 for w in range(STEPS)]

        def noisy(mid, spread, n=STEPS):
            return [mid + rnd.uniform(-spread, spread) for _ in range(n)]

        def pts(vals):
            return list(enumerate(vals))
        series.update({
            f"system/container_memory_usage_megabytes/rank{k}": pts(noisy(6000.0, 5.0)),
            f"system/container_cpu_utilization_percentage/rank{k}":
                pts(noisy(100.0, 0.5) if k == INPUT else noisy(50.0, 3.0)),
            # the tree's CPU, 100 = one core: the input-bound rank's at its 8 cores
            f"system/process_cpu_utilization_percentage/rank{k}":
                pts([800.0 - rnd.uniform(0, 5) for _ in range(STEPS)] if k == INPUT
                    else noisy(360.0, 20.0)),
            f"system/gpu_0_utilization_percentage/rank{k}":
                pts(noisy(45.0 if k == INPUT else 96.0, 2.0)),
            f"system/gpu_0_sm_active_percentage/rank{k}":
                pts(noisy(31.0 if k == INPUT else 78.0, 2.0)),
            f"system/gpu_0_tensor_active_percentage/rank{k}":
                pts(noisy(20.0 if k == INPUT else 55.0, 2.0)),
            f"system/gpu_0_throttled_percentage/rank{k}": pts(thr),
            f"system/gpu_0_throttled_power_percentage/rank{k}": pts([0.0] * STEPS),
            f"system/gpu_0_throttled_thermal_percentage/rank{k}": pts(thr),
            f"system/gpu_0_sm_clock_megahertz/rank{k}":
                pts([(1410.0 if t else 1980.0) + rnd.uniform(-10, 10) for t in thr]),
            f"system/gpu_0_temperature_celsius/rank{k}": pts(noisy(89.0 if k == HOT else 65.0,
                                                                   1.0)),
            # cumulative MB since recording started, a window of 10 s each
            f"system/rdma_receive_megabytes/rank{k}":
                pts([rx * PERIOD_S * (s + 1) for s in range(STEPS)]),
            f"system/rdma_transmit_megabytes/rank{k}":
                pts([tx * PERIOD_S * (s + 1) for s in range(STEPS)]),
        })
        # the node's CPU packages, repeated by each of its ranks; the node's
        # last rank recorded a moment less (a smaller reading): each node once,
        # its largest reading
        cpu = node_kwh.setdefault(node, round(0.0100 + 0.0007 * (k // PER_NODE), 6))
        mine = round(cpu - 0.0002, 6) if k % PER_NODE == PER_NODE - 1 else cpu
        tags.update({
            f"scopemeter.rank{k}.node": node,
            f"scopemeter.rank{k}.cgroup": f"v2 /kubepods/pod/ctr mem=16GiB cpu={CPU_CORES}.0",
            f"scopemeter.rank{k}.memory_limit_bytes": str(LIMIT_BYTES),
            f"scopemeter.rank{k}.cpu_limit_cores": str(CPU_CORES),
            f"scopemeter.rank{k}.oom_kill": "0",
            f"scopemeter.rank{k}.rdma": "mlx5_0/1 InfiniBand ACTIVE 200 Gb/sec (4X HDR); "
                                        "mlx5_3/1 InfiniBand ACTIVE 200 Gb/sec (4X HDR)",
            f"scopemeter.rank{k}.gpu_energy": f"gpu0 kwh={kwh:.6f}",
            f"scopemeter.rank{k}.node_cpu_energy":
                f"package0 kwh={mine / 2:.6f}; package1 kwh={mine / 2:.6f}; "
                f"total_kwh={mine:.6f}",
        })
    tags[f"scopemeter.rank{NET}.rdma_events"] = "mlx5_3/1 link_downed=2"
    # one symbol error on a healthy rank is no finding (2 more than the median's make one)
    tags["scopemeter.rank60.rdma_events"] = "mlx5_0/1 symbol_error=1"
    return write_run(uri, series, tags), truth, node_kwh


@pytest.fixture(scope="module")
def slow(request):
    server = request.getfixturevalue("sqlite_server")
    run_id, truth, node_kwh = slow_run(server)
    return {"uri": server, "run": run_id, "truth": truth, "node_kwh": node_kwh,
            "rep": py_report(run_id, server)}


def healthy_median(truth, i):
    xs = sorted(v[i] for k, v in truth.items() if k not in (NET, INPUT))
    return (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


@pytest.mark.timeout(300)
def test_exactly_the_three_slow_ranks_are_named_with_their_cause(slow):
    rep = slow["rep"]
    s = rep["summary"]
    by = {sr["rank"]: sr for sr in s["slow_ranks"]}
    assert {k: sr["cause"] for k, sr in by.items()} == \
        {NET: "network", INPUT: "input", HOT: "gpu_thermal"}, s["slow_ranks"]
    # no other rank stands apart in any measure
    assert {o["rank"] for o in rep["outliers"]} == {NET, INPUT, HOT}, rep["outliers"]
    # the verdicts: each slow rank's, and no other rank's
    assert {(v["rank"], v["text"]) for v in rep["verdicts"] if v["code"] == "slow_rank"} == \
        {(k, sr["text"]) for k, sr in by.items()}, rep["verdicts"]
    for k in (NET, INPUT, HOT):
        r = rank_of(rep, k)
        assert r["verdicts"][r["verdict_codes"].index("slow_rank")] == by[k]["text"]

    # the network straggler: its throughput against the median rank's, its port's count
    net = rank_of(rep, NET)
    rx, tx, _ = slow["truth"][NET]
    assert net["rdma_receive_megabytes_per_second"] == pytest.approx(rx, abs=0.05)
    assert net["rdma_transmit_megabytes_per_second"] == pytest.approx(tx, abs=0.05)
    assert net["rdma_link_errors"] == 2 and net["rdma_events"] == {"mlx5_3/1": {"link_downed": 2}}
    o = {o["measure"]: o for o in rep["outliers"] if o["rank"] == NET}
    rx_med = o["rdma_receive_megabytes_per_second"]["median"]
    tx_med = o["rdma_transmit_megabytes_per_second"]["median"]
    # the median rank's: the written healthy ranks' middle (the three known ranks
    # and the noise move it by less than the noise, 1 %)
    assert rx_med == pytest.approx(healthy_median(slow["truth"], 0), rel=0.01)
    assert tx_med == pytest.approx(healthy_median(slow["truth"], 1), rel=0.01)
    assert round(100 * rx / rx_med) == 38 and round(100 * tx / tx_med) == 40
    assert by[NET]["text"] == (
        f"RDMA receive 38 % of the median rank's ({rx / 1000:.1f} GB/s against "
        f"{rx_med / 1000:.1f} GB/s), RDMA transmit 40 % of the median rank's ({tx / 1000:.1f} "
        f"GB/s against {tx_med / 1000:.1f} GB/s), port mlx5_3/1 link_downed 2 — the network "
        "holds it back"), by[NET]["text"]

    # the input-bound rank: its SMs against the median, not throttled, its tree at its limit
    inp = rank_of(rep, INPUT)
    assert inp["gpu_sm_active_mean_percentage"] == pytest.approx(31, abs=1)
    assert inp["gpu_throttled_max_percentage"] == 0.0
    assert inp["process_cpu_mean_limit_percentage"] == pytest.approx(
        inp["process_cpu_mean_percentage"] / CPU_CORES, abs=0.1)
    assert 99.0 <= inp["process_cpu_mean_limit_percentage"] <= 100.0
    sm_med = by[INPUT]["median"]
    assert by[INPUT]["measure"] == "gpu_sm_active_mean_percentage" and \
        sm_med == pytest.approx(78, abs=1)
    assert by[INPUT]["text"] == (
        f"SM active 31 % while the median is 78 %, throttled 0 %, CPU of its tree 100 % of its "
        "limit — the input pipeline"), by[INPUT]["text"]

    # the thermally throttled rank: the share, the reason, its clock and temperature
    hot = rank_of(rep, HOT)
    g = hot["gpus"][0]
    assert (g["throttled_percentage"], g["throttled_thermal_percentage"]) == (63.3, 63.3)
    o = {o["measure"]: o for o in rep["outliers"] if o["rank"] == HOT}
    clock, temp = o["gpu_sm_clock_mean_megahertz"], o["gpu_temperature_mean_celsius"]
    assert clock["value"] == pytest.approx((19 * 1410 + 11 * 1980) / 30, abs=5)
    assert clock["median"] == pytest.approx(1980, abs=5)
    assert by[HOT]["text"] == (
        f"GPU 0 clocks held down 63 % of the run (thermal 63 %) while the median rank's are "
        f"0 %, SM clock {clock['value']:.0f} MHz against {clock['median']:.0f} MHz, temperature "
        f"{temp['value']:.0f} °C against {temp['median']:.0f} °C — a thermally throttled GPU: "
        "its cooling (airflow, its slot) holds it back"), by[HOT]["text"]
    assert round(temp["value"]) == 89 and round(temp["median"]) == 65

    # a healthy rank with one symbol error: counted, not a finding
    assert rank_of(rep, 60)["rdma_link_errors"] == 1
    assert rank_of(rep, 0)["rdma_link_errors"] == 0 and rank_of(rep, 0)["rdma_events"] is None


@pytest.mark.timeout(300)
def test_the_job_energy_is_the_sum_of_every_gpu_and_every_node_once(slow):
    s = slow["rep"]["summary"]
    gpu = round(sum(v[2] for v in slow["truth"].values()), 6)
    cpu = round(sum(slow["node_kwh"].values()), 6)
    assert s["gpu_energy_kwh"] == gpu, (s["gpu_energy_kwh"], gpu)
    assert (s["node_cpu_energy_kwh"], s["node_cpu_energy_nodes"]) == (cpu, RANKS // PER_NODE), \
        (s["node_cpu_energy_kwh"], cpu, "each node once, its largest reading")
    assert s["energy_kwh"] == round(gpu + cpu, 6), (s["energy_kwh"], gpu, cpu)
    r = rank_of(slow["rep"], 0)
    assert r["node_cpu_energy_kwh"] == slow["node_kwh"]["node-0"]
    assert r["gpu_energy_kwh_per_hour"] == pytest.approx(
        slow["truth"][0][2] * 3600 / (STEPS * PERIOD_S), abs=1e-6)


@pytest.mark.timeout(300)
def test_text_and_json_say_the_same(scopemeter_bin, slow):
    rep = slow["rep"]
    env = report_env(MLFLOW_TRACKING_URI=slow["uri"])
    p = cli_report(scopemeter_bin, slow["run"], "--json", env=env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == rep
    p = cli_report(scopemeter_bin, slow["run"], env=env)
    assert p.returncode == 0, p.stderr
    assert_fits(p.stdout)
    lines = p.stdout.splitlines()
    # a wrapped line continues indented: join them to read each statement whole
    joined = re.sub(r"\n {4,}", " ", p.stdout).splitlines()
    said = [ln.strip() for ln in joined if ln.startswith("  slow rank ")]
    s = rep["summary"]
    assert said == [f"slow rank {sr['rank']} ({sr['node']}): {sr['text']}"
                    for sr in s["slow_ranks"]], said
    assert [int(ln.split()[2]) for ln in said] == [INPUT, NET, HOT]
    energy = [ln.strip() for ln in joined if ln.startswith("  energy: ")]
    assert energy == [
        f"energy: {s['energy_kwh']:.6f} kWh since recording started: GPUs "
        f"{s['gpu_energy_kwh']:.6f} kWh (every rank's), CPU packages "
        f"{s['node_cpu_energy_kwh']:.6f} kWh (8 nodes, each once)"], energy
    total = float(energy[0].split()[1])
    parts = [float(x) for x in re.findall(r"(?:GPUs|packages) ([0-9.]+) kWh", energy[0])]
    assert total == pytest.approx(sum(parts), abs=1.5e-6), (total, parts)
    # said once: not again among the verdicts (here every verdict was said above)
    assert joined[-2:] == ["", "verdicts: each said above"], joined[-4:]
    # the tables list the three, with their RDMA and work rows
    rdma = p.stdout.split("\n\nrdma (")[1].split("\n\n")[0].splitlines()
    rows = {int(ln.split()[1]): ln.split()[-5:] for ln in rdma if ln.startswith("  rank ")}
    assert set(rows) == {INPUT, NET, HOT}, rdma
    net = rank_of(rep, NET)
    assert rows[NET] == [f"{net['rdma_receive_megabytes']:.1f}",
                         f"{net['rdma_transmit_megabytes']:.1f}",
                         f"{net['rdma_receive_megabytes_per_second']:.1f}",
                         f"{net['rdma_transmit_megabytes_per_second']:.1f}", "2"], rows
    work = p.stdout.split("\n\nwork (")[1].split("\n\n")[0].splitlines()
    row = next(ln.split() for ln in work if ln.startswith(f"  rank {INPUT} "))
    inp = rank_of(rep, INPUT)
    assert row[-4:] == [f"{inp['gpu_sm_active_mean_percentage']:.1f}",
                        f"{inp['gpu_tensor_active_mean_percentage']:.1f}",
                        f"{inp['process_cpu_mean_limit_percentage']:.1f}",
                        f"{inp['gpu_energy_kwh_per_hour']:.3f}"], row
    assert len(lines) < 100, p.stdout


def test_rdma_events_and_node_cpu_energy_read():
    """The two tags as the engine writes them (docs/series.md), pure functions."""
    from scopemeter._report.values import package_energy, rdma_ports
    assert rdma_ports("mlx5_0/1 link_downed=2 symbol_error=255+ port_xmit_data=stopped "
                      "state=DOWN; mlx5_3/1 local_ack_timeout_err=120") == {
        "mlx5_0/1": {"link_downed": 2, "symbol_error": 255, "port_xmit_data": "stopped",
                     "state": "DOWN"},
        "mlx5_3/1": {"local_ack_timeout_err": 120}}
    assert rdma_ports(None) == {} and rdma_ports("garbage; =1") == {}
    assert package_energy("package0 kwh=0.123456; package1 kwh=0.2; total_kwh=0.323456") == \
        0.323456
    assert package_energy("package0 kwh=0.1; package1 kwh=0.2") == pytest.approx(0.3)
    assert package_energy(None) is None and package_energy("package0 kwh=nan") is None
