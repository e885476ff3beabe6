"""_front.py — enable_system_metrics(), disable_system_metrics(), plan().

Why this file exists: the C engine (scopemeter._native over libscopemeter)
samples, aggregates and ships on its own threads; this module attaches it to
an MLflow run and stops it: which session is this process's (one at a time,
never one inherited through fork), the guard rails against MLflow's own
monitor, and the stops.  The front's other jobs have a module each, below
this one (none imports _front.py):

  _route.py      which way the points take: the engine's REST sink or MlflowClient
  _transport.py  the MlflowClient transport of the engine's delivery policy
  _session.py    one monitor attached to one run: its pump thread, its stop, the late check
  _companion.py  `scopemeter companion`, the watcher of this process
  _checks.py     the public functions' argument checks
  _lines.py      the lines, through logging.getLogger("scopemeter")
  _late.py       the graces of a late call (the report reads them too)

One shipping path (docs/python.md):

  - an http(s) tracking URI: the engine's REST sink ships (the same code as
    `scopemeter run`), with MLflow's auth and TLS variables and the headers
    of MLflow's request-header providers, resolved once at start (_route.py).  No
    Python runs per window.  It checks the run once at start (docs/rest.md, "The run check").
  - any other store (the local default sqlite:///mlflow.db, file:, a
    database URI), and http(s) with an MLflow auth plugin
    (MLFLOW_TRACKING_AUTH) or databricks/uc URIs, which C cannot honour: one
    Python daemon thread ("pump") is the transport of the engine's delivery
    policy (_native.Delivery, src/mlflow/deliver.c): it asks the policy for a
    batch (waiting with the GIL released), sends it with
    MlflowClient.log_batch (for a REST store, one request with MLflow's
    retries off) and tells the policy what came back.

The policy is the REST sink's, in C: batching, what an answer means,
backoff with jitter, the lines (one when delivery starts failing, one when
it recovers, refusals, the stop deadline), the counters and the closing
line, and the verdict of the run check at start.  Python only makes the
MlflowClient, calls log_batch / get_run and turns an exception into an
answer (_transport._answer).  Nothing in the front ever raises into user
code, but a TypeError for an argument of the wrong type (a mistake in the
call, not something that happened to recording).

Stop order (docs/design.md §7): the C monitor stops sampling, logs the last
partial window and the end tags, then its sink delivers what is left; all of
it bounded by the stop timeout (30 s; 10 s on SIGTERM).
Stopping happens on disable_system_metrics(), on the next enable for another
run (sweeps), at interpreter exit (atexit) and on SIGTERM (a chained handler).
See docs/python.md for why the end of an MLflow run is not hooked.

The companion (docs/design.md §7): once a monitor records, `scopemeter
companion` is started as this process's child; every stop above tells it
"stop" on its stdin after the monitor's own stop.  If this process dies
without that (OOM kill, SIGKILL), the companion writes the end tags the
cgroup kept, why it died, and the end of a run this process opened.

Lines go to stderr, one per event, prefixed "scopemeter:" like the engine's.
"""
from __future__ import annotations

import atexit
import os
import signal
import threading
import time
from types import FrameType
from typing import Any, Callable, Dict, Optional

from . import _native
from ._checks import _detail, _number, _plan_arg, _require_flag, _require_number
from ._lines import _log, _short
from ._route import _absolute_uri, _shipping
from ._session import _mlflow_monitors, _Session, _warn_if_late
from ._transport import _check_run

# Bounds and limits come from the C engine (scopemeter.h), never a copy.
STOP_TIMEOUT = _native.STOP_TIMEOUT_DEFAULT  # docs/design.md §7: the stop bound
SIGTERM_STOP_TIMEOUT = 10.0  # inside a launcher's / kubelet's grace period

_ENV_MLFLOW_MONITOR = "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING"

_lock = threading.RLock()     # re-entrant: the SIGTERM handler may run inside enable()
_forked_from: Optional[int] = None  # the parent's pid in a child forked after import, else None


def _after_fork_in_child() -> None:
    global _forked_from
    _forked_from = os.getppid()


os.register_at_fork(after_in_child=_after_fork_in_child)
_current: Optional["_Session"] = None  # the one _Session of this process, or None
_hooks: Dict[str, Any] = {"atexit": False, "sigterm": False, "prev_sigterm": None}


# ---- guard rails ------------------------------------------------------------------


def _drop_mlflow_env() -> None:
    """MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING would start MLflow's own monitor in
    every process that opens the run (every rank), writing unprefixed keys."""
    if _ENV_MLFLOW_MONITOR in os.environ:
        value = os.environ.pop(_ENV_MLFLOW_MONITOR)
        _log(f"{_ENV_MLFLOW_MONITOR}={value} removed from the environment: it would start "
             "MLflow's own system metrics monitor in every process that opens the run; "
             "scopemeter records system metrics instead")


def _stop_mlflow_monitor(run_id: str) -> None:
    """MLflow's start_run() already started its own monitor for this run (the
    variable was set before the run opened, or log_system_metrics=True): stop
    it before it writes its first window.  Read-only use of MLflow's registry
    of monitors; nothing of MLflow is patched."""
    monitors = _mlflow_monitors()
    if monitors is None or run_id not in monitors or isinstance(monitors[run_id], _RunEndHook):
        return
    mon = monitors.pop(run_id)
    # finish() joins MLflow's thread (it wakes at once) and flushes its empty
    # buffer; on a thread so a slow server never holds up the caller.
    threading.Thread(target=_quiet(mon.finish), name="scopemeter-stop-mlflow-monitor",
                     daemon=True).start()
    _log(f"stopped MLflow's own system metrics monitor of run {run_id} (it writes unprefixed "
         "system/* keys from every process); scopemeter records this run")


class _RunEndHook:
    """Stops a session when MLflow ends its run.  mlflow.end_run() looks up
    the run it ends in MLflow's registry of system-metrics monitors
    (mlflow.tracking.fluent.run_id_to_system_metrics_monitor) and calls
    finish() on the entry; this object is that entry for scopemeter's
    monitor.  So `with mlflow.start_run(): enable_system_metrics(); ...` stops
    at the block's end, with the last window and the end tags, even where the
    process is then killed without atexit (Ray Train kills its workers).
    Nothing of MLflow is patched; without the registry (another MLflow), there
    is no hook and process exit still stops the monitor."""

    def __init__(self, session: _Session) -> None:
        self.session = session

    def finish(self) -> None:
        _stop_session(self.session, STOP_TIMEOUT)


def _quiet(fn: Callable[[], object]) -> Callable[[], None]:
    def run() -> None:
        try:
            fn()
        except Exception as e:
            _log(f"stopping MLflow's own monitor: {_short(e)}", warn=True)
    return run


# ---- hooks: atexit and SIGTERM ----------------------------------------------------------


def _at_exit() -> None:
    _stop_current(STOP_TIMEOUT)


def _on_sigterm(signum: int, frame: Optional[FrameType]) -> None:
    _stop_current(SIGTERM_STOP_TIMEOUT, word="ended")
    prev = _hooks["prev_sigterm"]
    if callable(prev):
        prev(signum, frame)
        return
    # The default action: die of SIGTERM, so the exit status still says so.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _install_hooks(sigterm: bool) -> None:
    """atexit always (a session to stop); the SIGTERM handler only in a
    process that collects: a rank that records nothing keeps the
    application's own SIGTERM disposition untouched."""
    if not _hooks["atexit"]:
        # Registered after `import mlflow`, so it runs before MLflow's own
        # atexit end_run (atexit is last-in, first-out).
        atexit.register(_at_exit)
        _hooks["atexit"] = True
    if not sigterm or _hooks["sigterm"] or \
            threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread
    try:
        prev = signal.getsignal(signal.SIGTERM)
        if prev is signal.SIG_IGN or prev is None:  # ignored, or a handler set outside Python
            return
        _hooks["prev_sigterm"] = None if prev is signal.SIG_DFL else prev
        signal.signal(signal.SIGTERM, _on_sigterm)
        _hooks["sigterm"] = True
    except (ValueError, OSError):
        pass


def _stop_current(timeout: float, word: str = "stop") -> None:
    with _lock:
        s = _current
    if s is not None:
        _stop_session(s, timeout, word)


def _stop_session(s: _Session, timeout: float, word: str = "stop") -> None:
    """Stops s if it is still this process's session (once)."""
    global _current
    with _lock:
        if _current is not s:
            return
        _current = None
    try:
        s.stop(timeout, word)
    except Exception as e:
        _log(f"stopping: {_short(e)}; going on", warn=True)


# ---- public API -------------------------------------------------------------------


def enable_system_metrics(all_workers: bool = False, interval: Optional[float] = None,
                          samples: Optional[int] = None,
                          write_budget: Optional[float] = None,
                          detail: Optional[str] = None) -> bool:
    """Records system metrics of this process into the active MLflow run.

    Call it right after the run is opened (``mlflow.start_run()``), before data
    loaders and models are built: data loading is where memory spikes.  Without
    an active run, ``MLFLOW_RUN_ID`` names the run.

    all_workers: False (default) -> only global rank 0 collects; True -> one
        process per pod collects (the pod's local rank 0).  With more than four
        collectors the logging period is raised to 10 x ceil(n/4) s, unless a
        write budget is given.
    interval, samples: seconds between samples and samples per logged point
        (default: SCOPEMETER_INTERVAL / SCOPEMETER_SAMPLES, else MLflow's
        MLFLOW_SYSTEM_METRICS_* variables, else 10 s x 1).
    write_budget: rows per second the tracking server takes from the whole
        job, all collectors together (default: SCOPEMETER_WRITE_BUDGET, else
        none: the load of four collectors at 10 s).  The period becomes the
        smallest that keeps the job within it, never below interval x samples
        (docs/design.md §5); pass every rank the same value.
    detail: "default" (the series a user reads first) or "full" (adds the
        diagnosis series: GPM, NVLink, GPU clocks and ECC counts;
        docs/series.md "Levels"); default: SCOPEMETER_DETAIL, else "default".

    Returns True when this process records, False otherwise.  Raises only
    TypeError, for an argument of the wrong type (a str interval, a bool
    where a number is expected), as every public function does: a mistake in
    the call, not a problem of the machine.  Every other problem (a value
    out of range included) is one line on stderr prefixed "scopemeter:",
    False, and training goes on.
    """
    _require_flag("enable_system_metrics", "all_workers", all_workers)
    _require_number("enable_system_metrics", "interval", interval)
    _require_number("enable_system_metrics", "samples", samples, whole=True)
    _require_number("enable_system_metrics", "write_budget", write_budget)
    if detail is not None and not isinstance(detail, str):
        _detail("enable_system_metrics", detail)  # the TypeError
    try:
        return _enable(bool(all_workers), interval, samples, write_budget, detail)
    except Exception as e:
        _log(f"system metrics not recorded: {type(e).__name__}: {_short(e)}; training goes on",
             warn=True)
        return False


def _enable(all_workers: bool, interval: Optional[float], samples: Optional[int],
            write_budget: Optional[float], detail: Optional[str]) -> bool:
    global _current
    called_ms = int(time.time() * 1000)
    try:
        interval_s = _number("interval", interval, integer=False)
        n_samples = _number("samples", samples, integer=True)
        # None: the engine's (SCOPEMETER_WRITE_BUDGET, else the default rule)
        budget = 0.0 if write_budget is None else _native.parse_number(
            write_budget, "write_budget", _native.WRITE_BUDGET_MIN, _native.WRITE_BUDGET_MAX)
        level = _detail("enable_system_metrics", detail)
    except ValueError as e:
        _log(f"enable_system_metrics(): {e}; system metrics not recorded", warn=True)
        return False

    _drop_mlflow_env()
    try:
        import mlflow
    except ImportError as e:
        _log(f"mlflow cannot be imported ({e}); system metrics not recorded", warn=True)
        return False

    run = mlflow.active_run()
    run_id = run.info.run_id if run is not None else os.environ.get("MLFLOW_RUN_ID") or None
    parent = _current
    if _forked_from is not None and parent is not None and parent.pid != os.getpid() and \
            parent.status == "collecting":
        # a DataLoader worker forked from the recording process: it is in that
        # process's tree, whose series already hold it (docs/design.md §9)
        _log(f"this process (pid {os.getpid()}) was forked from pid {parent.pid}, which records "
             f"run {parent.run_id}: its system metrics (this process in its process tree) are "
             "recorded there; nothing to record here")
        return False
    if not run_id and _forked_from is not None:
        _log(f"this process (pid {os.getpid()}) was forked from pid {_forked_from} (a DataLoader "
             "or multiprocessing worker?), and MLflow's active run stays with that process: call "
             "enable_system_metrics() there, right after mlflow.start_run(); system metrics not "
             "recorded here")
        return False
    if not run_id:
        _log("no active MLflow run (call mlflow.start_run() first, or set MLFLOW_RUN_ID); "
             "system metrics not recorded")
        return False
    if not _native.valid_run_id(run_id):
        _log(f"MLFLOW_RUN_ID is not an MLflow run id: {run_id[:80]!r}; system metrics not "
             "recorded", warn=True)
        return False
    _stop_mlflow_monitor(run_id)

    with _lock:
        prev = _current
        if prev is not None and prev.pid != os.getpid():
            prev = _current = None  # inherited through fork: not ours to stop
        if prev is not None and prev.run_id == run_id:
            _log(f"system metrics of run {run_id} are already being recorded in this process; "
                 "this call is ignored")
            return prev.status == "collecting"
        if prev is not None:
            _log(f"run {run_id} replaces run {prev.run_id}: stopping the previous run's monitor "
                 "first")
            _stop_session(prev, STOP_TIMEOUT)

        uri = _absolute_uri(mlflow.get_tracking_uri())
        path, extra = _shipping(uri)
        delivery: Optional[_native.Delivery] = None
        if path == "rest":
            mon = _native.Monitor(interval=interval_s, samples=n_samples,
                                  all_workers=all_workers, stop_timeout=STOP_TIMEOUT,
                                  tracking_uri=uri, run_id=run_id, headers=extra,
                                  recording_key=run_id, write_budget=budget, detail=level)
        else:
            if extra:
                _log(extra)
            delivery = _native.Delivery(run_id, uri)
            failed = _check_run(delivery, run_id, uri, run)
            if failed is not None:
                _log(f"{failed}; system metrics not recorded", warn=True)
                return False
            mon = _native.Monitor(interval=interval_s, samples=n_samples,
                                  all_workers=all_workers, stop_timeout=STOP_TIMEOUT,
                                  recording_key=run_id, delivery=delivery,
                                  write_budget=budget, detail=level)
        s = _Session(run_id, uri, mon, "starting", delivery)
        s.rest = path == "rest"
        s.headers = extra if path == "rest" else []
        s.enabled_ms = called_ms
        if delivery is not None:
            # before start: a start that skips delivers its scopemeter.skipped
            # tag within start, through this thread
            s.start_pump()
        try:
            # "collecting", "not collecting" or "skipped"; the engine said why.
            # The REST sink checks the run here (runs/get).
            status = mon.start()
        except OSError as e:
            if delivery is not None:
                delivery.cancel()
            _log(f"{_short(e).split(': ', 1)[-1]}; system metrics not recorded", warn=True)
            return False
        s.status = status
        if status == "not collecting" and delivery is not None:
            delivery.cancel()  # nothing to deliver: the thread ends
        if status == "collecting":
            period = mon.interval * mon.samples
            if run is not None and run.info.run_id == run_id:
                _warn_if_late(run_id, run.info.start_time, called_ms, period)
            else:
                s.late_check = (None, period)
                if s.rest:
                    s.start_late_check()
        if status == "collecting":
            # this process opened the run (its active run, rank 0 of the job)
            # or attached to it (MLFLOW_RUN_ID, a rank resuming rank 0's run)
            owns = run is not None and run.info.run_id == run_id and \
                int(_native.identity()["rank"]) == 0
            s.start_companion(owns)
        _current = s
        monitors = _mlflow_monitors()
        if monitors is not None and run is not None and run.info.run_id == run_id:
            s.hook = monitors[run_id] = _RunEndHook(s)
        _install_hooks(sigterm=status == "collecting")
        return status == "collecting"


def disable_system_metrics(timeout: Optional[float] = STOP_TIMEOUT) -> None:
    """Stops recording: sampling stops, the last partial window and the end
    tags (OOM kills, peaks) are logged, and what is queued is shipped — in
    that order, bounded by `timeout` seconds; past it, one line and the
    program goes on.  Also runs at interpreter exit and on SIGTERM.
    timeout None, or not above 0, is the default (30 s); a timeout that is
    not a number is a TypeError."""
    _require_number("disable_system_metrics", "timeout", timeout)
    t = STOP_TIMEOUT if timeout is None else float(timeout)
    if not t > 0:
        t = STOP_TIMEOUT
    _stop_current(t)


def plan(workers: Optional[int] = 1, workers_per_pod: Optional[int] = 1,
         nodes: Optional[int] = None, gpus_per_worker: Optional[int] = 0,
         all_workers: bool = False, interval: Optional[float] = None,
         samples: Optional[int] = None, container_limits: bool = True,
         write_budget: Optional[float] = None, rdma_ports: bool = False,
         detail: Optional[str] = None) -> _native.PlanResult:
    """The preflight of ``scopemeter plan``: what turning on system metrics
    costs for a job, computed by the same C function as the CLI.

    Returns a dict: collectors, interval_s (effective, after the write-load
    cap), samples, period_s, gpus_per_collector, series_per_collector, series, charts, sections,
    rows_per_hour, bytes_per_row, bytes_per_day; with write_budget (rows/s, as
    enable_system_metrics) the period that fits it, write_budget,
    budget_period_s (the period it asks: above period_s it cannot be met),
    rows_per_s and server_cores (docs/rest.md's sizing table); ui_charts_over (more
    charts than ui_charts_warn, the largest System metrics tab the UI was seen to
    draw: said in one warning line, as the CLI's); pod_memory_front_mb,
    pod_memory_companion_mb, pod_memory_cli_mb (what the recorder holds in each
    collecting pod, docs/plan.md "Memory"); rdma_ports (pods are given RDMA
    ports, as --rdma) counts the rdma_* series (rdma_series_per_collector);
    detail ("default" or "full", as --detail) is the level counted, and
    series_full the job's series at level full.  Raises ValueError for an
    impossible job (this is a planning tool, not the training path), and
    TypeError for an argument of the wrong type (a str, a bool where a number
    is expected).  nodes=None means one node per pod, as the CLI assumes
    without --nodes.
    """
    _require_flag("plan", "all_workers", all_workers)
    _require_flag("plan", "container_limits", container_limits)
    _require_flag("plan", "rdma_ports", rdma_ports)
    p = _native.plan(workers=_plan_arg("workers", workers),
                     workers_per_pod=_plan_arg("workers_per_pod", workers_per_pod),
                     nodes=_plan_arg("nodes", nodes),
                     gpus_per_worker=_plan_arg("gpus_per_worker", gpus_per_worker),
                     all_workers=bool(all_workers),
                     interval=_plan_arg("interval", interval, integer=False),
                     samples=_plan_arg("samples", samples),
                     container_limits=bool(container_limits),
                     write_budget=_plan_arg("write_budget", write_budget, integer=False),
                     rdma_ports=bool(rdma_ports), detail=_detail("plan", detail))
    if p["ui_charts_over"]:
        _log(f"plan: warning: {p['charts']} charts in the run's System metrics tab, more than "
             f"{p['ui_charts_warn']} (the largest bench/ui_render.py drew to its end): read the "
             "ranks with scopemeter.report() (docs/plan.md)", warn=True)
    return p
