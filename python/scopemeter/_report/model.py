"""The report's data, as types: what is read from a run, and the report itself.

Why this file exists: the report's JSON schema (docs/report.md, "--json")
is a contract that programs read; here it is a type, so mypy --strict holds
every module of the report to it and a field added in one place and not
another is an error, not a silent difference.  The keys of the TypedDicts
below are exactly the JSON's, in the JSON's order (a dict keeps the order
it was built in, and the builders in build.py write them in this
order).  This module holds no logic and imports nothing of the report's:
every other module of the report may import it.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple, TypedDict, Union

# JSON schema version: raised only when a field changes meaning or goes away
# (adding a field keeps it).  docs/report.md documents every field.
SCHEMA = 1

# One series: its points (timestamp_ms, step, value), oldest first; a rank's
# series by name (without node tier and rank); a run's or a rank's tags.
Point = Tuple[int, int, float]
Series = Dict[str, List[Point]]
Tags = Dict[str, str]


class ReportError(Exception):
    """A run that cannot be reported: not found, no scopemeter series, no store."""


class RankData(TypedDict):
    """One rank's series as fetch.read gives them, and the node tier
    of its node_* keys (None when it has none)."""
    series: Series
    node_tier: Optional[str]


class GpuAtPeak(TypedDict):
    """Who held a GPU's memory at its highest sampled use, MB
    (ranks[].gpus[].memory_at_peak_megabytes; the tag gpu_memory_at_peak).
    ranks: another rank's processes, by rank (as a string: a JSON key);
    unattributed: used minus every holder (the driver's own, contexts NVML
    does not attribute)."""
    used: Optional[float]
    own: float
    ranks: Dict[str, float]
    other_ranks: float
    unranked: float
    foreign: float
    unattributed: Optional[float]


class GpuEvents(TypedDict):
    """A GPU's events and memory health (ranks[].gpus[].events; the tag gpu_events)."""
    xid: Optional[int]
    xid_at: Optional[str]
    xids: int
    xid_codes: List[int]
    remapped_corrected: int
    remapped_uncorrected: int
    remap_pending: bool
    remap_failure: bool
    retired_pages_sbe: int
    retired_pages_dbe: int


class GpuMeasured(TypedDict):
    """The first keys of a Gpu: MLflow's five series."""
    index: int
    memory_peak_percentage: Optional[float]
    memory_peak_megabytes: Optional[float]
    utilization_mean_percentage: Optional[float]
    power_mean_watts: Optional[float]


class GpuHealth(TypedDict):
    """The keys of a Gpu after the five: its health and who held its memory
    (issue 34; null where the run lacks them)."""
    throttled_percentage: Optional[float]
    throttled_power_percentage: Optional[float]
    throttled_thermal_percentage: Optional[float]
    ecc_errors_corrected: Optional[int]
    ecc_errors_uncorrected: Optional[int]
    process_memory_peak_megabytes: Optional[float]
    memory_at_peak_megabytes: Optional[GpuAtPeak]
    events: Optional[GpuEvents]
    energy_kwh: Optional[float]


class Gpu(GpuMeasured, GpuHealth):
    """One GPU of a rank (ranks[].gpus[]): the keys of GpuMeasured, then GpuHealth's."""


class AtPeak(TypedDict):
    """The working set's parts at its peak, MB
    (ranks[].container_memory_at_peak_megabytes)."""
    working_set: Optional[float]
    anon: Optional[float]
    shmem: Optional[float]
    file_active: Optional[float]
    kernel: Optional[float]
    limit: Optional[float]


class TreePeak(TypedDict):
    """The rank's process tree at its highest memory (ranks[].process_tree_peak)."""
    processes: Optional[int]
    memory_megabytes: Optional[float]


class RankMeasured(TypedDict):
    """The first keys of a RankReport: the limits, memory, CPU, GPUs, network
    and recording of the rank (docs/report.md, "Per rank")."""
    rank: int
    node: str
    cgroup: Optional[str]
    gpu_status: Optional[str]
    container_memory_limit_megabytes: Optional[float]
    container_memory_peak_megabytes: Optional[float]
    container_memory_peak_percentage: Optional[float]
    container_memory_headroom_megabytes: Optional[float]
    container_memory_kernel_peak_megabytes: Optional[float]
    node_memory_peak_percentage: Optional[float]
    node_memory_peak_megabytes: Optional[float]
    oom_kill: Optional[int]
    container_cpu_limit_cores: Optional[float]
    container_cpu_mean_percentage: Optional[float]
    container_cpu_peak_percentage: Optional[float]
    cpu_throttled_periods: Optional[int]
    cpu_throttled_s: Optional[float]
    cpu_throttled_percentage: Optional[float]
    node_cpu_mean_percentage: Optional[float]
    node_cpu_peak_percentage: Optional[float]
    gpus: List[Gpu]
    network_receive_megabytes: Optional[float]
    network_transmit_megabytes: Optional[float]
    points: int
    recording_start_ms: Optional[int]
    recording_end_ms: Optional[int]
    recording_span_s: Optional[float]
    started_after_run_s: Optional[float]
    started_after_first_rank_s: Optional[float]
    end_tags: bool
    stopped_early: Optional[bool]
    ended_by: Optional[str]
    end_reason: Optional[str]
    container_memory_limit_exact: bool
    container_memory_limit_bytes: Optional[int]
    container_cpu_limit_exact: bool
    cpu_quota_us: Optional[int]
    cpu_period_us: Optional[int]
    container_memory_at_peak_megabytes: Optional[AtPeak]
    container_memory_at_peak_source: Optional[str]
    memory_events: Optional[Dict[str, int]]
    memory_pressure_peak_percentage: Optional[float]
    memory_pressure_last_minute_percentage: Optional[float]
    memory_pressure_stalled_s: Optional[float]
    cpu_pressure_peak_percentage: Optional[float]
    cpu_pressure_stalled_s: Optional[float]
    process_tree_peak: Optional[TreePeak]
    process_cpu_mean_percentage: Optional[float]
    container_memory_growth_megabytes_per_hour: Optional[float]
    process_memory_growth_megabytes_per_hour: Optional[float]
    gpu_utilization_mean_percentage: Optional[float]
    gpu_throttled_max_percentage: Optional[float]
    gpu_sm_clock_mean_megahertz: Optional[float]
    gpu_temperature_mean_celsius: Optional[float]


class RankWork(TypedDict):
    """The keys of a RankReport after RankMeasured's: what the rank's GPUs,
    tree and RDMA ports did and cost (issue 47; docs/report.md, "Slow ranks").
    rdma_events: {"DEV/N": {item: count, or "stopped" / a state name}}, the
    tag scopemeter.rankN.rdma_events read; a count written "N+" is N."""
    gpu_sm_active_mean_percentage: Optional[float]
    gpu_tensor_active_mean_percentage: Optional[float]
    gpu_energy_kwh_per_hour: Optional[float]
    process_cpu_mean_limit_percentage: Optional[float]
    rdma_receive_megabytes: Optional[float]
    rdma_transmit_megabytes: Optional[float]
    rdma_receive_megabytes_per_second: Optional[float]
    rdma_transmit_megabytes_per_second: Optional[float]
    rdma_link_errors: Optional[int]
    rdma_events: Optional[Dict[str, Dict[str, Union[int, str]]]]
    node_cpu_energy_kwh: Optional[float]


class RankFindings(TypedDict):
    """The last keys of a RankReport: who recorded it, and its verdicts."""
    recorded_by_rank: Optional[int]
    process_tree_only: bool
    verdict_codes: List[str]
    verdicts: List[str]


class RankReport(RankMeasured, RankWork, RankFindings):
    """One rank (ranks[]): docs/report.md, "Per rank": RankMeasured's keys,
    then RankWork's, then RankFindings'."""


class RunVerdict(TypedDict):
    """One entry of the run's verdicts (verdicts[])."""
    rank: int
    ranks: List[int]
    node: str
    code: str
    text: str


class WorstRank(TypedDict):
    """One of the job's worst ranks (summary.worst[])."""
    rank: int
    node: str
    container_memory_peak_percentage: Optional[float]
    code: Optional[str]
    cause: Optional[str]


class SlowRank(TypedDict):
    """A rank that holds the job back and its most likely cause
    (summary.slow_ranks[]; docs/report.md, "Slow ranks"): cause is one of
    scale.CAUSES; measure, value, median: the outlier that says it most."""
    rank: int
    node: str
    cause: str
    measure: str
    value: float
    median: float
    text: str


class Summary(TypedDict):
    """The job at a glance (summary): docs/report.md, "The job at scale"."""
    ranks: int
    nodes: int
    ranks_with_memory_limit: int
    ranks_peak_at_least_80_percentage: Optional[int]
    ranks_peak_at_least_90_percentage: Optional[int]
    oom_kills: Optional[int]
    oom_killed_ranks: List[int]
    memory_events: Optional[Dict[str, int]]
    memory_event_ranks: List[int]
    worst: List[WorstRank]
    gpu_energy_kwh: Optional[float]
    node_cpu_energy_kwh: Optional[float]
    node_cpu_energy_nodes: int
    energy_kwh: Optional[float]
    slow_ranks: List[SlowRank]


class Outlier(TypedDict):
    """A rank that stands apart from the job's others in one measure (outliers[])."""
    rank: int
    node: str
    measure: str
    value: float
    median: float
    mad: float
    deviations: float
    direction: str
    text: str


class Build(TypedDict):
    """A rank's tag scopemeter.rankN.build, read (docs/series.md, "The build
    tag"): which build recorded.  A field the tag lacks is None."""
    version: Optional[str]
    install: Optional[str]
    tls: Optional[str]
    nvml: Optional[str]
    path: Optional[str]


class Report(TypedDict):
    """What scopemeter.report() returns and --json prints: docs/report.md, "Run level"."""
    schema: int
    run_id: str
    run_name: Optional[str]
    experiment_id: str
    status: str
    lifecycle_stage: Optional[str]
    start_time_ms: Optional[int]
    end_time_ms: Optional[int]
    found_by: str
    interval_s: Optional[float]
    samples: Optional[int]
    period_s: Optional[float]
    collectors: Optional[int]
    skipped: Optional[str]
    nodes: Dict[str, List[int]]
    recording: str
    end_reason: Optional[str]
    last_point_age_s: Optional[float]
    ranks: List[RankReport]
    verdicts: List[RunVerdict]
    summary: Summary
    outliers: List[Outlier]
    build: Dict[str, Build]
