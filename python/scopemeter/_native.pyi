"""Types of scopemeter._native (python/scopemeter/_native.c): its module
methods (module_methods), the Monitor type (Monitor_methods, Monitor_getset),
the Delivery type (Delivery_methods)
and the constants of module_exec.  tests/py/test_typing.py checks that every
public name of the built extension is here."""
from typing import Callable, Literal, Optional, Sequence, Tuple, TypedDict, Union

# record kinds of Monitor.drain()
RECORD_METRIC: int
RECORD_TAG: int
DRAIN_CAP_MAX: int

# bounds and defaults of scopemeter.h (seconds where a float)
INTERVAL_MIN: float
INTERVAL_MAX: float
INTERVAL_DEFAULT: float
STOP_TIMEOUT_MAX: float
STOP_TIMEOUT_DEFAULT: float
CHECK_TIMEOUT: float
SAMPLES_MAX: int
WRITE_BUDGET_MIN: float
WRITE_BUDGET_MAX: float
GPUS_MAX: int
PLAN_DEFAULT: int
PLAN_WORKERS_MAX: int

# MLflow's log_batch limits and key length
BATCH_METRICS: int
BATCH_TAGS: int
BATCH_ENTITIES: int
KEY_MAX: int

# (kind, key, value, timestamp_ms, step): value a float for RECORD_METRIC,
# a str for RECORD_TAG
Record = Tuple[int, str, Union[float, str], int, int]


class Monitor:
    def __init__(self, interval: float = ..., samples: int = ..., all_workers: object = ...,
                 stop_timeout: float = ..., buffer_points: int = ...,
                 tracking_uri: Optional[str] = ..., run_id: Optional[str] = ...,
                 headers: Optional[Sequence[Tuple[str, str]]] = ...,
                 recording_key: Optional[str] = ...,
                 delivery: Optional["Delivery"] = ...,
                 write_budget: float = ..., detail: int = ...) -> None: ...
    def start(self) -> Literal["collecting", "not collecting", "skipped"]: ...
    def drain(self, timeout: float = ..., cap: int = ...) -> Optional[list[Record]]: ...
    def stop(self, timeout: Optional[float] = ...) -> bool: ...
    def report(self, delivered: int, refused: int, undelivered: int, /) -> None: ...
    @property
    def queued(self) -> int: ...
    @property
    def interval(self) -> float: ...
    @property
    def samples(self) -> int: ...
    @property
    def collectors(self) -> int: ...
    @property
    def write_budget(self) -> float: ...
    @property
    def dropped(self) -> int: ...


class Delivery:
    """The engine's delivery policy (src/mlflow/deliver.c) driven by the
    front's MlflowClient thread."""
    def __init__(self, run_id: str, tracking_uri: str) -> None: ...
    def next(self) -> Optional[list[Record]]: ...
    def done(self, taken: int, http: int, body: Optional[bytes], retry_after: Optional[str],
             errno: int, why: str, /) -> None: ...
    def check(self, rank: int, run_json: Optional[str], error_code: Optional[str],
              why: Optional[str], /) -> Optional[str]: ...
    def cancel(self) -> None: ...


class PlanResult(TypedDict):
    collectors: int
    interval_s: float
    samples: int
    period_s: float
    gpus_per_collector: int
    series_per_collector: int
    node_series_per_collector: int
    gpu_series_per_collector: int
    container_series_per_collector: int
    ranks_recorded: int
    process_series: int
    series: int
    charts: int
    sections: int
    rows_per_hour: float
    bytes_per_row: float
    bytes_per_day: float
    write_budget: Optional[float]
    series_per_collector_recorded: int
    budget_period_s: Optional[float]
    rows_per_s: float
    server_cores: int
    ui_charts_over: bool
    ui_charts_warn: int
    pod_memory_front_mb: float
    pod_memory_companion_mb: float
    pod_memory_cli_mb: float
    rdma_series_per_collector: int
    detail: Literal["default", "full"]
    series_full: int


# series_parse(): a logged key's parts (docs/design.md §2); node is the tier
# as written in the key ("" when none), not the full node name
class SeriesParts(TypedDict):
    upstream: str
    scoped: str
    scope: str
    node: str
    rank: int


class Identity(TypedDict):
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node: str
    launcher: str
    invalid: Optional[str]
    node_source: Optional[str]


def plan(workers: int = ..., workers_per_pod: int = ..., nodes: int = ...,
         gpus_per_worker: int = ..., all_workers: object = ..., interval: float = ...,
         samples: int = ..., container_limits: object = ...,
         write_budget: float = ..., rdma_ports: object = ..., detail: int = ...) -> PlanResult: ...
# "default" -> 0, "full" -> 1 (the words of SCOPEMETER_DETAIL); ValueError otherwise
def parse_detail(word: str, /) -> int: ...
def identity() -> Identity: ...
def series_name(upstream_key: str, rank: int, node: Optional[str] = ..., /) -> str: ...
def series_scope(key: str, /) -> Optional[str]: ...
def series_parse(key: str, /) -> Optional[SeriesParts]: ...
def version() -> str: ...
# a name as the engine prints and tags it: control characters escaped
def shown(name: str, /) -> str: ...
# fn(warn, msg): the engine's lines written in the caller's thread of this
# module's calls (Monitor.start(), .stop(), .report(), Delivery.check());
# None: stderr
def set_log(fn: Optional[Callable[[bool, str], None]], /) -> None: ...
def tls() -> str: ...
def valid_run_id(s: str, /) -> bool: ...
def redact_uri(uri: str, /) -> str: ...
def parse_number(value: Union[str, float], name: str, min: float = ..., max: float = ..., *,
                 whole: bool = ..., seconds: bool = ...) -> float: ...
