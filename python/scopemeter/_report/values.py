"""Reading numbers out of a run's series and tags, for the report.

Why this file exists: every part of the report (the rank's numbers, the
verdicts, the table) reads values the same way -- a tag as a number, a
"key=value" tag, a series' peak or mean -- and refuses the same values
(NaN, infinities, MLflow's stand-in for them).  One place, so the rule
"a value that cannot be a measurement is absent" is one rule.  Pure
functions over the types of model.py; no MLflow, no output.
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar, Union, overload

from .model import Build, Series, Tags

_N = TypeVar("_N", int, float)

# No series or tag of scopemeter can hold a magnitude this large (MB, %, W,
# seconds, counts): 10^15 MB is 10^21 bytes.
ABSURD = 1e15


def finite(v: Any) -> bool:
    """A value that can be a measurement: not NaN or infinite, nor MLflow's
    stand-in for an infinity (its SQL store keeps +-inf as
    +-sys.float_info.max), nor larger than any measurement (ABSURD).
    scopemeter never logs such points; another program writing into its keys
    may, and one such point must not turn the report into NaN or 300 digits."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        return False
    return math.isfinite(x) and abs(x) < ABSURD


def json_safe(obj: Any) -> Any:
    """The report with every non-finite float as None: JSON has no NaN."""
    if isinstance(obj, float):
        return obj if finite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def first_line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return s[0] if s else type(e).__name__


# C0, DEL, C1, and the two Unicode line separators: characters that move the
# cursor, end a line or drive the terminal, none of which a name can show.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(name: str) -> str:
    """A name (a node, a run's name, a tag) as the report prints it: each
    control character as its escape (\\n, \\x1b, \\u2028), so a name holding a
    newline stays on its line and cannot split a table or fake a row.  The
    one rule for every printer of the report (table, verdicts, picture); the
    JSON keeps the name as it is (JSON escapes it itself)."""
    return _CONTROL.sub(_escape, name)


def _escape(m: "re.Match[str]") -> str:
    c = m.group()
    return _ESCAPES.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def r1(x: Optional[float]) -> Optional[float]:
    return None if x is None else round(float(x), 1)


def r2(c: Optional[float]) -> Optional[float]:
    """Cores for people: the exact limit (1/6 core) to 0.01, as the display
    tag rounds it, so a column keeps its width."""
    return None if c is None else round(c, 2)


@overload
def num(tags: Tags, key: str) -> Optional[float]: ...
@overload
def num(tags: Tags, key: str, kind: Callable[[str], _N]) -> Optional[_N]: ...


def num(tags: Tags, key: str, kind: Callable[[str], Any] = float) -> Any:
    """A tag as a number (float, or int with kind=int); None when absent or
    not a number."""
    return as_number(tags.get(key), kind)


@overload
def kv(text: Optional[str]) -> Optional[Dict[str, float]]: ...
@overload
def kv(text: Optional[str], kind: Callable[[str], _N]) -> Optional[Dict[str, _N]]: ...


def kv(text: Optional[str], kind: Callable[[str], Any] = float) -> Optional[Dict[str, Any]]:
    """{key: number} of a "key=value key=value" tag (docs/design.md §9);
    a malformed pair is left out, an absent or empty tag is None."""
    out: Dict[str, Any] = {}
    for word in (text or "").split():
        key, eq, val = word.partition("=")
        if not eq or not key:
            continue
        try:
            x = kind(val)
        except ValueError:
            continue
        if kind is int or finite(x):
            out[key] = x
    return out or None


def values(series: Series, name: str) -> List[float]:
    return [v for _, _, v in series.get(name, ())]


def peak(series: Series, name: str) -> Optional[float]:
    v = values(series, name)
    return max(v) if v else None


def mean(series: Series, name: str) -> Optional[float]:
    v = values(series, name)
    return sum(v) / len(v) if v else None


def last(series: Series, name: str) -> Optional[float]:
    v = values(series, name)
    return v[-1] if v else None


def slope_per_hour(series: Series, name: str) -> Optional[float]:
    """The least-squares slope of a series over time, per hour (MB/h for a
    memory series): how fast it grew over the whole recording, not only its
    peak.  Least squares, not Theil-Sen: a run holds thousands of points per
    rank and the pairs of Theil-Sen would be millions; the robustness that
    matters (one rank against the others) is the outlier rule's.  None for
    fewer than 3 points or points all at one time."""
    pts = series.get(name, ())
    if len(pts) < 3:
        return None
    t0 = pts[0][0]
    xs = [(ts - t0) / 3.6e6 for ts, _, _ in pts]
    ys = [v for _, _, v in pts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx


def median(xs: List[float]) -> float:
    """The median of a non-empty list."""
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def max_of(*xs: Optional[float]) -> Optional[float]:
    present = [x for x in xs if x is not None]
    return max(present) if present else None


def at_step(series: Series, name: str, step: int) -> Optional[float]:
    for _, st, v in series.get(name, ()):
        if st == step:
            return v
    return None


def peak_point(series: Series, name: str) -> Optional[Tuple[int, float]]:
    """(step, value) of the highest point of a series (the first of equals)."""
    best: Optional[Tuple[int, float]] = None
    for _, st, v in series.get(name, ()):
        if best is None or v > best[1]:
            best = (st, v)
    return best


def last_window_mean(series: Series, name: str, end_ms: int, window_s: float
                     ) -> Optional[float]:
    """The mean of a series' points in the window_s before end_ms: each point
    is a window's share of time, windows are equally long, so the mean is the
    share of that whole stretch."""
    pts = [v for ts, _, v in series.get(name, ()) if ts > end_ms - window_s * 1000]
    return sum(pts) / len(pts) if pts else None


_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def cgroup_limits(tag: Optional[str]) -> Tuple[Optional[float], Optional[float], Optional[float]]:
    """(memory limit bytes, half-width of the tag's rounding in bytes, CPU cores)
    from "v1 /path mem=512MiB cpu=0.5" / "v2 /x mem=56.0GiB cpu=16.0"."""
    mem = re.search(r"\bmem=([0-9.]+)(B|KiB|MiB|GiB|TiB)\b", tag or "")
    cpu = re.search(r"\bcpu=([0-9.]+)\b", tag or "")
    limit: Optional[float] = None
    half: Optional[float] = None
    if mem:
        text, unit = mem.group(1), _UNITS[mem.group(2)]
        limit = float(text) * unit
        decimals = len(text.split(".", 1)[1]) if "." in text else 0
        half = 0.5 * 10 ** -decimals * unit
    return limit, half, (float(cpu.group(1)) if cpu else None)


_GPU_CLAUSE = re.compile(r"^gpu(\d+)$")


def gpu_clauses(text: Optional[str]) -> Dict[int, Dict[str, str]]:
    """{GPU index: {name: value}} of a per-GPU tag (gpu_events,
    gpu_memory_at_peak; docs/series.md): clauses "gpu<i> name=value ..."
    separated by "; ".  A clause without its gpu<i> head is left out; the
    values stay text (an Xid's time, a list of codes)."""
    out: Dict[int, Dict[str, str]] = {}
    for clause in (text or "").split(";"):
        words = clause.split()
        m = _GPU_CLAUSE.match(words[0]) if words else None
        if not m:
            continue
        items = out.setdefault(int(m.group(1)), {})
        for word in words[1:]:
            key, eq, val = word.partition("=")
            if eq and key:
                items[key] = val
    return out


def rdma_ports(text: Optional[str]) -> Dict[str, Dict[str, Union[int, str]]]:
    """{"DEV/N": {item: value}} of the tag rdma_events (docs/series.md,
    "RDMA"): clauses "mlx5_0/1 link_downed=2 symbol_error=255+ state=DOWN"
    separated by "; ".  A count is an int, one written "N+" (a PMA counter
    stopped at its width's maximum) the N it is at least; `stopped` and a
    state's name stay text.  A clause without its DEV/N head is left out."""
    out: Dict[str, Dict[str, Union[int, str]]] = {}
    for clause in (text or "").split(";"):
        words = clause.split()
        if not words or "/" not in words[0] or "=" in words[0]:
            continue
        items = out.setdefault(words[0], {})
        for word in words[1:]:
            key, eq, val = word.partition("=")
            if not eq or not key:
                continue
            count = as_number(val[:-1] if val.endswith("+") else val, int)
            items[key] = count if count is not None and count >= 0 else val
    return out


def package_energy(text: Optional[str]) -> Optional[float]:
    """The kWh of the tag node_cpu_energy ("package0 kwh=0.123456; package1
    kwh=…; total_kwh=…"): its total_kwh, else the packages' sum; None
    without a number."""
    total: Optional[float] = None
    packages: List[float] = []
    for clause in (text or "").split(";"):
        for word in clause.split():
            key, eq, val = word.partition("=")
            x = as_number(val, float) if eq else None
            if x is not None and key == "total_kwh":
                total = x
            elif x is not None and key == "kwh":
                packages.append(x)
    return total if total is not None else (sum(packages) if packages else None)


def as_number(text: Optional[str], kind: Callable[[str], _N]) -> Optional[_N]:
    """A tag item as a number; None when absent, not a number or not finite."""
    if text is None:
        return None
    try:
        x = kind(text)
    except ValueError:
        return None
    return x if kind is int or finite(x) else None


def build_of(text: str) -> Build:
    """scopemeter.rankN.build ("version=0.2.0 install=wheel tls=bundled
    nvml=550.54.15 path=/…"): space-separated key=value fields, the path
    last with a space, tab, newline or backslash written as \\ooo (src/identity/build.c,
    as mountinfo does)."""
    fields: Dict[str, str] = {}
    for word in text.split(" "):
        key, eq, value = word.partition("=")
        if eq and key in ("version", "install", "tls", "nvml", "path") and key not in fields:
            fields[key] = value
    path = fields.get("path")
    if path is not None:
        path = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)
    return {"version": fields.get("version"), "install": fields.get("install"),
            "tls": fields.get("tls"), "nvml": fields.get("nvml"), "path": path}
