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

from .model import Outlier, RankReport, Summary, WorstRank
from .values import median, printable
from .verdicts import CODES, MEMORY_HIGH_PCT, cause_text

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


def summary(ranks: List[RankReport], nodes: int) -> Summary:
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
        "gpu_energy_kwh": (round(sum(e for e in energies), 6) if energies else None),
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


def _throttled_text(x: float, med: float, floor: float, direction: str, r: RankReport) -> str:
    """The rank's most throttled GPU, its share and why (the per-reason
    shares, as the verdict gpu_throttled says them)."""
    known = [g for g in r["gpus"] if g["throttled_percentage"] is not None]
    g = max(known, key=lambda g: (g["throttled_percentage"] or 0.0, -g["index"]))
    power = g["throttled_power_percentage"] or 0.0
    thermal = g["throttled_thermal_percentage"] or 0.0
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


class Measure(NamedTuple):
    """key: the rank's field; floor: the least robust deviation, in the
    field's unit (ranks that all read the same have a MAD of 0, and a rank
    0.1 % apart from them is no finding); text(value, median, floor,
    direction, rank); per_hour: a slope, whose difference from the median's
    is a finding only when it adds up to GROWTH_MB over the rank's
    recording."""
    key: str
    floor: float
    text: Text
    per_hour: bool = False


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
)


def outliers(ranks: List[RankReport]) -> List[Outlier]:
    """The ranks whose measure stands more than OUTLIER_DEVIATIONS robust
    deviations (max(1.4826 x MAD, the measure's floor)) from the median of
    the job's ranks that have it (a slope: also GROWTH_MB apart over the
    rank's recording); by rank, then in MEASURES' order."""
    out: List[Outlier] = []
    for m in MEASURES:
        have: List[Tuple[RankReport, float]] = []
        for r in ranks:
            fields: Mapping[str, object] = r
            v = fields.get(m.key)
            if isinstance(v, (int, float)):
                have.append((r, float(v)))
        if len(have) < MIN_RANKS:
            continue
        xs = [v for _, v in have]
        med = median(xs)
        mad = median([abs(v - med) for v in xs])
        sigma = max(MAD_TO_SIGMA * mad, m.floor)
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
                        "value": round(v, 1), "median": round(med, 1), "mad": round(mad, 1),
                        "deviations": round(dev, 1), "direction": direction,
                        "text": m.text(v, med, m.floor, direction, r)})
    order = {m.key: i for i, m in enumerate(MEASURES)}
    out.sort(key=lambda o: (o["rank"], order[o["measure"]]))
    return out


def outlier_line(o: Outlier) -> str:
    return f"rank {o['rank']} ({printable(o['node'])}): {o['text']}"
