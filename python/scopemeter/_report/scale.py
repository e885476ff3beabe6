"""The report of a big job: the job at a glance and the ranks that stand
apart (docs/report.md, "The job at scale").

Why this file exists: a row per rank reads well for 8 ranks and not at all
for 1024; what a person needs first is the job's summary (how many ranks
came near their limit, OOM kills, the worst ranks and what filled them) and
the ranks whose numbers differ from the others' -- the slow rank, the
leaking rank -- which no tracker finds for them.  The rule for "differs" is
robust (median and MAD, not the mean: one extreme rank must not hide
itself by moving the mean).  Reads only rank reports (model); never
MLflow, no output.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple

from .model import Gpu, Outlier, RankReport, SlowRank, Summary, WorstRank
from .values import median, printable
from .verdicts import CODES, MEMORY_HIGH_PCT, THROTTLED_PCT, cause_text

NEAR_PCT = 80.0        # the summary's second count: memory peak >= 80 % of the limit
WORST = 5              # the summary's worst ranks
OUTLIER_DEVIATIONS = 3.5   # |x - median| > 3.5 robust deviations (Iglewicz and Hoaglin)
MAD_TO_SIGMA = 1.4826  # MAD x 1.4826 estimates the standard deviation of a normal sample
MIN_RANKS = 5          # fewer ranks with a measure: no "the others" to stand apart from


def severity(r: RankReport) -> Tuple[int, float, int]:
    """The order of "worst": the most severe verdict, then memory peak %, then rank."""
    sev = min((CODES.index(c) for c in r["verdict_codes"]), default=len(CODES))
    return (sev, -(r["container_memory_peak_percentage"] or -1.0), r["rank"])


def ordered(ranks: List[RankReport]) -> List[RankReport]:
    return sorted(ranks, key=severity)


# ---- the summary -------------------------------------------------------------------


def _cause(r: RankReport) -> Optional[str]:
    comp = r["container_memory_at_peak_megabytes"]
    if comp is not None:
        return cause_text(comp)
    return r["verdicts"][0] if r["verdicts"] else None


def node_cpu_energy(ranks: List[RankReport]) -> Tuple[Optional[float], int]:
    """(kWh, nodes counted) of the CPU packages: node_cpu_energy is the
    node's, repeated by every rank recorded there, so each node counts once,
    with the largest of its ranks' values (their recordings cover slightly
    different spans: the longest is the job's).  A rank whose node has no
    name (`unknown`) cannot be matched with its neighbours and counts alone."""
    per_node: Dict[str, float] = {}
    for r in ranks:
        kwh = r["node_cpu_energy_kwh"]
        if kwh is None:
            continue
        node = r["node"] if r["node"] != "unknown" else f"unknown rank {r['rank']}"
        per_node[node] = max(per_node.get(node, 0.0), kwh)
    return (round(sum(per_node.values()), 6) if per_node else None), len(per_node)


def summary(ranks: List[RankReport], nodes: int, slow: Optional[List[SlowRank]] = None
            ) -> Summary:
    """The job at a glance.  A count whose counter no rank holds is None
    (unknown), never 0: an OOM count of 0 where the kernel's counter never
    reached the run would say "no kill" about a kill nobody recorded."""
    limited = [r for r in ranks if r["container_memory_limit_megabytes"] is not None]
    pcts = [r["container_memory_peak_percentage"] for r in limited]
    known = [p for p in pcts if p is not None]
    kills = [r for r in ranks if r["oom_kill"] is not None]
    events: Dict[str, int] = {}
    event_ranks: List[int] = []
    for r in ranks:
        ev = r["memory_events"]
        if ev is None:
            continue
        for k, v in ev.items():
            events[k] = events.get(k, 0) + v
        if any(ev.get(k, 0) > 0 for k in ("high", "max", "oom", "oom_kill")):
            event_ranks.append(r["rank"])
    energies = [g["energy_kwh"] for r in ranks for g in r["gpus"]
                if g["energy_kwh"] is not None]
    gpu_kwh = round(sum(energies), 6) if energies else None
    cpu_kwh, cpu_nodes = node_cpu_energy(ranks)
    parts = [x for x in (gpu_kwh, cpu_kwh) if x is not None]
    worst: List[WorstRank] = [
        {"rank": r["rank"], "node": r["node"],
         "container_memory_peak_percentage": r["container_memory_peak_percentage"],
         "code": r["verdict_codes"][0] if r["verdict_codes"] else None, "cause": _cause(r)}
        for r in ordered([r for r in ranks if not r["process_tree_only"]])[:WORST]]
    return {
        "ranks": len(ranks),
        "nodes": nodes,
        "ranks_with_memory_limit": len(limited),
        "ranks_peak_at_least_80_percentage": sum(p >= NEAR_PCT for p in known) if known else None,
        "ranks_peak_at_least_90_percentage":
            sum(p >= MEMORY_HIGH_PCT for p in known) if known else None,
        "oom_kills": sum(r["oom_kill"] or 0 for r in kills) if kills else None,
        "oom_killed_ranks": [r["rank"] for r in kills if (r["oom_kill"] or 0) > 0],
        "memory_events": events or None,
        "memory_event_ranks": event_ranks,
        "worst": worst,
        # the job's GPU energy: the sum of every GPU's gpu_energy (None: no rank has the tag)
        "gpu_energy_kwh": gpu_kwh,
        # the CPU packages of every node once (node_cpu_energy), and the two together
        "node_cpu_energy_kwh": cpu_kwh,
        "node_cpu_energy_nodes": cpu_nodes,
        "energy_kwh": round(sum(parts), 6) if parts else None,
        "slow_ranks": slow or [],
    }


# ---- outliers ----------------------------------------------------------------------


def _gb(mb_per_h: float) -> str:
    mb = abs(mb_per_h)
    return f"{mb / 1000:.1f} GB" if mb >= 1000 else f"{mb:.0f} MB"


Text = Callable[[float, float, float, str, RankReport], str]


def _growth(what: str) -> Text:
    def text(x: float, med: float, floor: float, direction: str, r: RankReport) -> str:
        did = f"grew {_gb(x)} an hour" if x >= 0 else f"shrank {_gb(x)} an hour"
        theirs = ("stayed flat" if abs(med) < floor else
                  f"grew {_gb(med)}" if med >= 0 else f"shrank {_gb(med)}")
        why = ("a leak" if direction == "high" else
               "it does not grow as the others do (it frees memory, or does less work)")
        return f"{what} {did} while the median rank's {theirs}: {why}"
    return text


def _busy(what: str, of: str, low: str, high: str) -> Text:
    def text(x: float, med: float, floor: float, direction: str, r: RankReport) -> str:
        return (f"{what} {x:.0f} % busy{of} while the job's median is {med:.0f} %: "
                f"{low if direction == 'low' else high}")
    return text


def _peak_text(x: float, med: float, floor: float, direction: str, r: RankReport) -> str:
    why = ("the closest to its limit" if direction == "high" else
           "far below the others (less data, or it stopped early)")
    return (f"container memory peaked at {x:.0f} % of its limit while the job's median is "
            f"{med:.0f} %: {why}")


def most_throttled(r: RankReport) -> Tuple[Gpu, float, float]:
    """(the rank's most throttled GPU, its power and thermal shares); the
    rank has gpu_throttled_max_percentage, so at least one GPU has a share."""
    known = [g for g in r["gpus"] if g["throttled_percentage"] is not None]
    g = max(known, key=lambda g: (g["throttled_percentage"] or 0.0, -g["index"]))
    return g, g["throttled_power_percentage"] or 0.0, g["throttled_thermal_percentage"] or 0.0


def _throttled_text(x: float, med: float, floor: float, direction: str, r: RankReport) -> str:
    """The rank's most throttled GPU, its share and why (the per-reason
    shares, as the verdict gpu_throttled says them)."""
    g, power, thermal = most_throttled(r)
    why = [name for name, v in (("power cap", power), ("thermal", thermal)) if v >= 0.5]
    if x - power - thermal >= 0.5:
        why.append("another reason")
    said = f" ({', '.join(why)})" if why and direction == "high" else ""
    return (f"GPU {g['index']} throttled {x:.0f} % of the run{said} while the job's median is "
            f"{med:.0f} %: " + ("it holds the others back" if direction == "high" else
                                "it runs at full clocks while the others are held down"))


def _clock_text(x: float, med: float, floor: float, direction: str, r: RankReport) -> str:
    return (f"GPU SM clock {x:.0f} MHz on average while the job's median is {med:.0f} MHz: "
            + ("a slower GPU holds the others back (see its throttle reasons)"
               if direction == "low" else "faster than the others: they are held down"))


def _temp_text(x: float, med: float, floor: float, direction: str, r: RankReport) -> str:
    return (f"GPU temperature {x:.0f} °C on average while the job's median is {med:.0f} °C: "
            + ("a hot GPU lowers its clocks and holds the others back (its cooling, its slot)"
               if direction == "high" else "cooler than the others (it does less work)"))


def _share(what: str, low: str, high: str) -> Text:
    def text(x: float, med: float, floor: float, direction: str, r: RankReport) -> str:
        return (f"{what} {x:.0f} % while the job's median is {med:.0f} %: "
                f"{low if direction == 'low' else high}")
    return text


def rate(mb_per_s: float) -> str:
    return f"{mb_per_s / 1000:.1f} GB/s" if mb_per_s >= 1000 else f"{mb_per_s:.1f} MB/s"


def _rdma(way: str) -> Text:
    def text(x: float, med: float, floor: float, direction: str, r: RankReport) -> str:
        of = f" ({100.0 * x / med:.0f} % of the median rank's {rate(med)})" if med > 0 else ""
        return (f"RDMA {way} {rate(x)}{of}: " +
                ("its ports move less than the others' (a degraded link, a congested path)"
                 if direction == "low" else "its ports move more than the others'"))
    return text


def ports_text(r: RankReport) -> str:
    """"port mlx5_3/1 link_downed 2, symbol_error 7; port mlx5_0/1 state DOWN":
    the tag rdma_events in words, "none counted" without it."""
    ports = r["rdma_events"] or {}
    return "; ".join(f"port {printable(dev)} " + ", ".join(f"{k} {v}" for k, v in items.items())
                     for dev, items in ports.items()) or "no link errors counted"


def _link_text(x: float, med: float, floor: float, direction: str, r: RankReport) -> str:
    return (f"RDMA link errors {x:.0f} ({ports_text(r)}) while the median rank's are "
            f"{med:.0f}: " + ("a failing link" if direction == "high" else
                              "fewer than the others'"))


def _tree_cpu_text(x: float, med: float, floor: float, direction: str, r: RankReport) -> str:
    return (f"CPU of its tree {x:.0f} % of its limit while the job's median is {med:.0f} %: " +
            ("its processes use less CPU than the others'" if direction == "low" else
             "its processes use more of their CPU than the others' (an input pipeline at its "
             "limit starves its GPU)"))


def _energy_text(x: float, med: float, floor: float, direction: str, r: RankReport) -> str:
    return (f"GPU energy {x:.3f} kWh an hour while the job's median is {med:.3f} kWh: " +
            ("its GPUs draw less than the others' (they wait, or are held down)"
             if direction == "low" else "its GPUs draw more than the others' for the same "
             "steps"))


class Measure(NamedTuple):
    """key: the rank's field; floor: the least robust deviation, in the
    field's unit (ranks that all read the same have a MAD of 0, and a rank
    0.1 % apart from them is no finding), and at least rel_floor x |median|
    (a throughput's noise scales with it); text(value, median, floor,
    direction, rank); per_hour: a slope, whose difference from the median's
    is a finding only when it adds up to GROWTH_MB over the rank's
    recording; digits: the JSON's rounding of value, median and MAD."""
    key: str
    floor: float
    text: Text
    per_hour: bool = False
    rel_floor: float = 0.0
    digits: int = 1


# A slope is an hour's growth made from however long the rank recorded: over
# three minutes, 13 MB more than the median rank (a shared process that grew
# as the job's other collectors started) reads 260 MB an hour, and over a
# day a 50 MB difference is 2 MB an hour.  So a rank's slope stands apart
# only when its difference from the median's, times its recording, is at
# least this much memory: a leak is memory that is there.
GROWTH_MB = 50.0


MEASURES = (
    Measure("container_memory_peak_percentage", 2.0, _peak_text),
    Measure("container_memory_growth_megabytes_per_hour", 50.0,
            _growth("container memory"), per_hour=True),
    Measure("process_memory_growth_megabytes_per_hour", 50.0, _growth("process memory"),
            per_hour=True),
    Measure("container_cpu_mean_percentage", 5.0,
            _busy("CPU", " of its limit", "it does less than the others (it waits: input, "
                  "network, a slower peer)", "it works more than the others: it may hold "
                  "them back")),
    Measure("gpu_utilization_mean_percentage", 5.0,
            _busy("GPU", "", "it holds the others back",
                  "busier than the others: they wait for it, or it does more of the work")),
    # where one rank's GPU holds the job back (issue 34): clocks held down, a
    # lower SM clock, a hotter board
    Measure("gpu_throttled_max_percentage", 5.0, _throttled_text),
    Measure("gpu_sm_clock_mean_megahertz", 50.0, _clock_text),
    Measure("gpu_temperature_mean_celsius", 3.0, _temp_text),
    # why a rank is slow (issue 47 item 4; docs/report.md, "Slow ranks"): what
    # its GPUs did (GPM, detail level full), its tree's CPU against its limit,
    # its RDMA ports' throughput and link health, and what its GPUs cost
    Measure("gpu_sm_active_mean_percentage", 5.0,
            _share("SM active", "its GPUs' SMs wait while the others' work",
                   "its SMs work while the others' wait")),
    Measure("gpu_tensor_active_mean_percentage", 5.0,
            _share("tensor active", "its GPUs use the tensor cores less than the others' "
                   "(they wait, or run another dtype or kernel)",
                   "its GPUs use the tensor cores more than the others'")),
    Measure("process_cpu_mean_limit_percentage", 5.0, _tree_cpu_text),
    Measure("rdma_receive_megabytes_per_second", 1.0, _rdma("receive"), rel_floor=0.05),
    Measure("rdma_transmit_megabytes_per_second", 1.0, _rdma("transmit"), rel_floor=0.05),
    Measure("rdma_link_errors", 0.5, _link_text),
    Measure("gpu_energy_kwh_per_hour", 0.001, _energy_text, rel_floor=0.05, digits=4),
)


def measured(ranks: List[RankReport], key: str) -> List[Tuple[RankReport, float]]:
    """(rank, value) of the ranks that have the field key."""
    have: List[Tuple[RankReport, float]] = []
    for r in ranks:
        fields: Mapping[str, object] = r
        v = fields.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            have.append((r, float(v)))
    return have


def outliers(ranks: List[RankReport]) -> List[Outlier]:
    """The ranks whose measure stands more than OUTLIER_DEVIATIONS robust
    deviations (max(1.4826 x MAD, the measure's floor)) from the median of
    the job's ranks that have it (a slope: also GROWTH_MB apart over the
    rank's recording); by rank, then in MEASURES' order."""
    out: List[Outlier] = []
    for m in MEASURES:
        have = measured(ranks, m.key)
        if len(have) < MIN_RANKS:
            continue
        xs = [v for _, v in have]
        med = median(xs)
        mad = median([abs(v - med) for v in xs])
        sigma = max(MAD_TO_SIGMA * mad, m.floor, m.rel_floor * abs(med))
        for r, v in have:
            dev = (v - med) / sigma
            if abs(dev) <= OUTLIER_DEVIATIONS:
                continue
            span = r.get("recording_span_s")
            if m.per_hour and isinstance(span, (int, float)) and \
                    abs(v - med) * span / 3600.0 < GROWTH_MB:
                continue
            direction = "high" if dev > 0 else "low"
            out.append({"rank": r["rank"], "node": r["node"], "measure": m.key,
                        "value": round(v, m.digits), "median": round(med, m.digits),
                        "mad": round(mad, m.digits),
                        "deviations": round(dev, 1), "direction": direction,
                        "text": m.text(v, med, m.floor, direction, r)})
    order = {m.key: i for i, m in enumerate(MEASURES)}
    out.sort(key=lambda o: (o["rank"], order[o["measure"]]))
    return out


def outlier_line(o: Outlier) -> str:
    return f"rank {o['rank']} ({printable(o['node'])}): {o['text']}"


# ---- slow ranks: the most likely cause (issue 47 item 4) -----------------------------------

# A slow rank's cause, by the first rule that holds (docs/report.md, "Slow ranks"): the
# clocks of its GPU held down (a measured slowdown of the rank's own work, which waiting
# cannot cause: an idle GPU is not throttled), then its RDMA ports (less throughput than the
# others', or link errors: a measured fault of its path), then its GPUs working less than the
# others' (the input pipeline: a symptom the two before can cause too, so named only without
# them), then tensor cores left unused while its SMs work as the others'.
CAUSES = ("gpu_thermal", "gpu_power", "gpu_clocks", "network", "input", "compute")
Found = Dict[str, Outlier]   # a rank's outliers by measure


def _slow(r: RankReport, cause: str, o: Outlier, text: str) -> SlowRank:
    return {"rank": r["rank"], "node": r["node"], "cause": cause, "measure": o["measure"],
            "value": o["value"], "median": o["median"], "text": text}


def _low(found: Found, key: str) -> Optional[Outlier]:
    o = found.get(key)
    return o if o is not None and o["direction"] == "low" else None


def _high(found: Found, key: str) -> Optional[Outlier]:
    o = found.get(key)
    return o if o is not None and o["direction"] == "high" else None


def _against(found: Found, key: str, what: str, unit: str) -> str:
    """", SM clock 1674 MHz against 1980 MHz" where the rank stands apart in key."""
    o = found.get(key)
    return f", {what} {o['value']:.0f}{unit} against {o['median']:.0f}{unit}" if o else ""


def _gpu_clocks(r: RankReport, found: Found, med: Dict[str, float]) -> Optional[SlowRank]:
    o = _high(found, "gpu_throttled_max_percentage")
    if o is None:
        return None
    g, power, thermal = most_throttled(r)
    why = [f"{name} {v:.0f} %" for name, v in (("thermal", thermal), ("power cap", power))
           if v >= 0.5]
    cause = ("gpu_thermal" if thermal >= 0.5 and thermal >= power else
             "gpu_power" if power >= 0.5 else "gpu_clocks")
    ending = {"gpu_thermal": "a thermally throttled GPU: its cooling (airflow, its slot) holds "
                             "it back",
              "gpu_power": "the power cap holds its GPU back",
              "gpu_clocks": "its GPU's clocks are held down (docs/gpu.md, \"Throttled\")"}[cause]
    text = (f"GPU {g['index']} clocks held down {o['value']:.0f} % of the run"
            + (f" ({', '.join(why)})" if why else "")
            + f" while the median rank's are {o['median']:.0f} %"
            + _against(found, "gpu_sm_clock_mean_megahertz", "SM clock", " MHz")
            + _against(found, "gpu_temperature_mean_celsius", "temperature", " °C")
            + f" — {ending}")
    return _slow(r, cause, o, text)


def _network(r: RankReport, found: Found, med: Dict[str, float]) -> Optional[SlowRank]:
    slow = [(way, o) for way, o in (
        ("receive", _low(found, "rdma_receive_megabytes_per_second")),
        ("transmit", _low(found, "rdma_transmit_megabytes_per_second"))) if o is not None]
    errors = _high(found, "rdma_link_errors")
    first = slow[0][1] if slow else errors
    if first is None:
        return None
    said = [f"RDMA {way} {100.0 * o['value'] / o['median']:.0f} % of the median rank's "
            f"({rate(o['value'])} against {rate(o['median'])})" for way, o in slow
            if o["median"] > 0]
    rx, rx_med = r["rdma_receive_megabytes_per_second"], med.get(
        "rdma_receive_megabytes_per_second")
    if not slow and rx is not None and rx_med:
        said.append(f"RDMA receive {100.0 * rx / rx_med:.0f} % of the median rank's")
    said.append(ports_text(r))
    ending = ("the network holds it back" if slow else
              "a failing link: the network may hold it back")
    return _slow(r, "network", first, ", ".join(said) + f" — {ending}")


def _cpu_said(r: RankReport) -> str:
    """", CPU of its tree 100 % of its limit": the rank's CPU, the tree's
    against the limit where both are known."""
    tree, cont = r["process_cpu_mean_limit_percentage"], r["container_cpu_mean_percentage"]
    said = (f", CPU of its tree {tree:.0f} % of its limit" if tree is not None else
            f", CPU of its container {cont:.0f} % of its limit" if cont is not None else "")
    thr = r["cpu_throttled_percentage"]
    if thr is not None and thr >= THROTTLED_PCT:
        said += f", CPU throttled in {thr:.0f} % of periods"
    return said


def _input(r: RankReport, found: Found, med: Dict[str, float]) -> Optional[SlowRank]:
    o = _low(found, "gpu_sm_active_mean_percentage")
    what = "SM active {:.0f} %"
    if o is None and r["gpu_sm_active_mean_percentage"] is None:
        o, what = _low(found, "gpu_utilization_mean_percentage"), "GPU {:.0f} % busy"
    if o is None:
        return None
    thr = r["gpu_throttled_max_percentage"]
    text = (what.format(o["value"]) + f" while the median is {o['median']:.0f} %"
            + (f", throttled {thr:.0f} %" if thr is not None else "") + _cpu_said(r)
            + " — the input pipeline")
    return _slow(r, "input", o, text)


def _compute(r: RankReport, found: Found, med: Dict[str, float]) -> Optional[SlowRank]:
    o = _low(found, "gpu_tensor_active_mean_percentage")
    sm, sm_med = r["gpu_sm_active_mean_percentage"], med.get("gpu_sm_active_mean_percentage")
    if o is None or sm is None or sm_med is None:
        return None
    text = (f"tensor active {o['value']:.0f} % while the median is {o['median']:.0f} %, SM "
            f"active {sm:.0f} % (the median {sm_med:.0f} %) — "
            "its GPUs compute without the tensor cores the others use (another dtype or "
            "kernel path)")
    return _slow(r, "compute", o, text)


SlowRule = Callable[[RankReport, Found, Dict[str, float]], Optional[SlowRank]]
SLOW_RULES: Tuple[SlowRule, ...] = (_gpu_clocks, _network, _input, _compute)


def slow_ranks(ranks: List[RankReport], outs: List[Outlier]) -> List[SlowRank]:
    """Each rank that holds the job back, with the first cause of SLOW_RULES
    that holds for it (its outliers; the job's medians); by rank."""
    found: Dict[int, Found] = {}
    for o in outs:
        found.setdefault(o["rank"], {})[o["measure"]] = o
    med = {m.key: median([v for _, v in have]) for m in MEASURES
           if len(have := measured(ranks, m.key)) >= MIN_RANKS}
    out: List[SlowRank] = []
    for r in ranks:
        for rule in SLOW_RULES:
            hit = rule(r, found.get(r["rank"], {}), med)
            if hit is not None:
                out.append(hit)
                break
    return out
