"""_session.py — one monitor attached to one run in this process.

Why this file exists: a _Session holds what enable_system_metrics() started
for a run — the engine's monitor, the pump thread that is the MlflowClient
transport's loop (for a store the REST sink cannot write), the companion
process, the late-call check — and stops them in docs/design.md §7's order,
bounded by the stop timeout.  Which session is current, and the hooks that
stop it (atexit, SIGTERM, MLflow's end of run), are _front.py's.  Nothing
here raises into user code.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from . import _native
from ._companion import _start_companion, _stop_companion
from ._late import ATTACH_GRACE_S, OWN_RUN_GRACE_S
from ._lines import _log, _short
from ._transport import _REQUEST_TIMEOUT, _answer, _batch_logger

_ENGINE_MAX_TIMEOUT = _native.STOP_TIMEOUT_MAX  # the engine's own bound, never a copy


class _Session:
    """One monitor attached to one run in this process."""

    def __init__(self, run_id: str, tracking_uri: str, mon: _native.Monitor,
                 status: str, delivery: Optional[_native.Delivery] = None) -> None:
        self.run_id = run_id
        self.tracking_uri = tracking_uri
        self.mon = mon
        self.status = status          # "collecting" | "not collecting" | "skipped"
        self.rest = False             # the engine ships (REST sink): no pump
        self.headers: List[Tuple[str, str]] = []  # MLflow's request headers the sink sends
        self.delivery = delivery      # the engine's policy the pump drives (MlflowClient path)
        self.pid = os.getpid()
        self.thread: Optional[threading.Thread] = None
        self.deadline: Optional[float] = None          # set by stop(): past it the pump gives up
        self.wake = threading.Event()  # stop() hurries a pump whose next() keeps failing
        # (start_time_ms or None, period_s)
        self.late_check: Optional[Tuple[Optional[int], float]] = None
        self.drain_errors = 0         # next() calls that raised (said once)
        self.enabled_ms = int(time.time() * 1000)
        self.hook: Optional[object] = None  # our entry in MLflow's registry (_front._RunEndHook)
        self.companion: Optional[Any] = None     # the watching process (subprocess.Popen)

    # -- the pump thread (MlflowClient path) --
    def start_pump(self) -> None:
        self.thread = threading.Thread(target=self._pump, name="scopemeter-mlflow", daemon=True)
        self.thread.start()

    def start_late_check(self) -> None:
        """An attached run (MLFLOW_RUN_ID): its start time is asked once, off
        the caller's thread."""
        def check() -> None:
            try:
                from mlflow.tracking import MlflowClient
                self._check_late_start(MlflowClient(tracking_uri=self.tracking_uri))
            except Exception:
                pass
        threading.Thread(target=check, name="scopemeter-late-check", daemon=True).start()

    def _pump(self) -> None:
        try:
            self._pump_loop()
        except Exception as e:  # never let the thread die silently
            _log(f"logging thread for run {self.run_id} ended: {type(e).__name__}: {e}", warn=True)

    def _pump_loop(self) -> None:
        """The MlflowClient transport of the engine's delivery policy: every
        decision (what to send, when, what an answer means, the lines and
        counts) is the policy's; this loop only sends and reports back."""
        from mlflow.entities import Metric, RunTag
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=self.tracking_uri)
        log_batch = _batch_logger(client)
        while True:
            try:
                if self.delivery is None:
                    raise RuntimeError("no delivery")
                records = self.delivery.next()  # waits with the GIL released
            except Exception as e:
                # the thread goes on (the next windows still reach the run),
                # one line the first time
                self.drain_errors += 1
                if self.drain_errors == 1:
                    _log(f"taking records of run {self.run_id} from the queue failed: "
                         f"{type(e).__name__}: {_short(e)}; those are lost, logging goes on",
                         warn=True)
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    return
                self.wake.wait(0.1)  # a next() that keeps failing must not spin
                continue
            if records is None:  # delivery is over (stopped, or past the stop bound)
                return
            metrics = [Metric(key, float(value), ts, step) for kind, key, value, ts, step in records
                       if kind != _native.RECORD_TAG]
            tags = [RunTag(key, str(value)) for kind, key, value, ts, step in records
                    if kind == _native.RECORD_TAG]
            try:
                log_batch(self.run_id, metrics, tags, self._request_timeout())
            except Exception as e:
                self.delivery.done(len(records), *_answer(e))
                continue
            self.delivery.done(len(records), 200, None, None, 0, "")
            if self.late_check is not None:  # once the store answers, never before
                self._check_late_start(client)
                self.late_check = None

    def _request_timeout(self) -> float:
        if self.deadline is None:
            return _REQUEST_TIMEOUT
        return max(0.1, min(_REQUEST_TIMEOUT, self.deadline - time.monotonic()))

    def _check_late_start(self, client: Any) -> None:
        """Warns when the run began more than one logging window before this
        call: data loading, where memory spikes, was not recorded."""
        if self.late_check is None:
            return
        start_ms, period = self.late_check
        called_ms = self.enabled_ms
        if start_ms is None:  # attached through MLFLOW_RUN_ID: ask the store
            try:
                start_ms = client.get_run(self.run_id).info.start_time
            except Exception:
                return
        _warn_if_late(self.run_id, start_ms, called_ms, period)

    # -- stop --
    def stop(self, timeout: float, word: str = "stop") -> None:
        """docs/design.md §7 order, bounded by timeout: the engine stops
        sampling, logs the last partial window and the end tags; its REST
        sink delivers the rest, or the pump does from the queue."""
        if self.pid != os.getpid():
            return  # a forked child: the monitor and the thread are the parent's
        monitors = _mlflow_monitors()
        if monitors is not None and self.hook is not None and \
                monitors.get(self.run_id) is self.hook:
            monitors.pop(self.run_id, None)
        t0 = time.monotonic()
        self.deadline = t0 + timeout
        try:
            # The engine's own stop gets what is left of the bound, rounded to
            # the millisecond so its line says "3 s", not "2.99999 s".  It
            # releases the GIL; the pump keeps shipping meanwhile.
            left = round(max(0.0, self.deadline - time.monotonic()), 3)
            self.mon.stop(min(left, _ENGINE_MAX_TIMEOUT))
        except Exception as e:
            _log(f"stopping the monitor of run {self.run_id}: {e}", warn=True)
        # The engine's delivery policy said the closing line on either path;
        # a pump stuck in a request past the bound is abandoned (a daemon: its
        # next() returns None), never joined beyond it.
        self.wake.set()
        if self.delivery is not None:
            self.delivery.cancel()
        if self.thread is not None:
            self.thread.join(max(0.0, self.deadline - time.monotonic()))
        # after the monitor's own end: a kill during the stop is still seen
        self.stop_companion(word)

    # -- the companion (docs/design.md §7): watches this process, ends what it leaves --
    def start_companion(self, owns_run: bool) -> None:
        self.companion = _start_companion(self.run_id, self.tracking_uri, owns_run,
                                          client=not self.rest, headers=self.headers)

    def stop_companion(self, word: str = "stop") -> None:
        """The stop word (_companion._stop_companion); the companion is forgotten."""
        c, self.companion = self.companion, None
        if c is not None:
            _stop_companion(c, word)


def _mlflow_monitors() -> Optional[Dict[str, Any]]:
    """MLflow's registry of system-metrics monitors by run id
    (mlflow.tracking.fluent.run_id_to_system_metrics_monitor), read only;
    None without it (another MLflow, or MLflow not imported)."""
    fluent = sys.modules.get("mlflow.tracking.fluent")
    monitors = getattr(fluent, "run_id_to_system_metrics_monitor", None)
    return monitors if isinstance(monitors, dict) else None


def _sysroot() -> str:
    """SCOPEMETER_SYSROOT without trailing slashes ("" for none or "/"), the
    prefix of every absolute path read, as the engine takes it (docs/design.md §8,
    src/collect/collectors.c sm__ctx_init)."""
    return (os.environ.get("SCOPEMETER_SYSROOT") or "").rstrip("/")


def _process_start_ms() -> int:
    """This process's start (epoch ms) from /proc/self/stat and /proc/stat."""
    root = _sysroot()
    try:
        with open(root + "/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22 of proc(5), counted after "(comm)"
        with open(root + "/proc/stat") as f:
            btime = next(int(ln.split()[1]) for ln in f if ln.startswith("btime "))
        return int((btime + ticks / os.sysconf("SC_CLK_TCK")) * 1000)
    except Exception:
        return 0


def _warn_if_late(run_id: str, start_ms: Optional[int], called_ms: int, period: float) -> None:
    """The reference is the later of the run's start and this process's: a
    worker attaching to a run its launcher opened earlier is late only by its
    own time (for it, the start of the process is the start of the run)."""
    if not start_ms:
        return
    proc_ms = _process_start_ms()
    attached = proc_ms > start_ms
    grace = max(period, ATTACH_GRACE_S if attached else OWN_RUN_GRACE_S)
    late = (called_ms - max(start_ms, proc_ms)) / 1000.0
    if late > grace:
        since = "this process's start (the run is older)" if attached else "the run's start"
        _log(f"enable_system_metrics() was called {late:.0f} s after {since} in run {run_id}: "
             "the beginning of the run (data loading, where memory spikes) was not recorded; "
             "call it right after mlflow.start_run(), before building data loaders and models",
             warn=True)
