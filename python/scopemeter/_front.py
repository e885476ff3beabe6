"""_front.py — enable_system_metrics(), disable_system_metrics(), plan().

Why this file exists: the C engine (scopemeter._native over libscopemeter)
samples, aggregates and ships on its own threads; this module attaches it to
an MLflow run and stops it.  One shipping path (docs/python.md):

  - an http(s) tracking URI: the engine's REST sink ships (the same code as
    `scopemeter run`), with MLflow's auth and TLS variables and the headers
    of MLflow's request-header providers, resolved once here at start.  No
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
answer (_answer).  Nothing here ever raises
into user code, but a TypeError for an argument of the wrong type (a mistake
in the call, not something that happened to recording).

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
import errno
import json
import logging
import numbers
import os
import pathlib
import re
import signal
import sys
import threading
import time
import urllib.parse
from types import FrameType
from typing import (TYPE_CHECKING, Any, Callable, Dict, List, Literal, Optional, Set,
                    Tuple, Union, overload)

from . import _native
from ._late import ATTACH_GRACE_S, OWN_RUN_GRACE_S

if TYPE_CHECKING:
    from mlflow.entities import Run

# Bounds and limits come from the C engine (scopemeter.h), never a copy.
STOP_TIMEOUT = _native.STOP_TIMEOUT_DEFAULT  # docs/design.md §7: the stop bound
SIGTERM_STOP_TIMEOUT = 10.0  # inside a launcher's / kubelet's grace period
_ENGINE_MAX_TIMEOUT = _native.STOP_TIMEOUT_MAX
_CHECK_TIMEOUT = _native.CHECK_TIMEOUT  # the run check at start: the engine's bound
# ... but a local store (sqlite, file) answers no network: its first open
# creates or migrates the database, which takes seconds on a loaded machine
_CHECK_TIMEOUT_LOCAL = 30.0
_REQUEST_TIMEOUT = 30.0      # one log_batch request of the MlflowClient path

_ENV_MLFLOW_MONITOR = "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING"

_lock = threading.RLock()     # re-entrant: the SIGTERM handler may run inside enable()
_forked_from: Optional[int] = None  # the parent's pid in a child forked after import, else None


def _after_fork_in_child() -> None:
    global _forked_from
    _forked_from = os.getppid()


os.register_at_fork(after_in_child=_after_fork_in_child)
_current: Optional["_Session"] = None  # the one _Session of this process, or None
_hooks: Dict[str, Any] = {"atexit": False, "sigterm": False, "prev_sigterm": None}


class _StderrUnlessConfigured(logging.Handler):
    """The front's lines go through logging.getLogger("scopemeter").  While the
    application has not configured logging (the root logger has no handler),
    they are written to stderr exactly as the C engine writes its own:
    "scopemeter: <msg>", "scopemeter: warning: <msg>".  Once it has, they
    propagate to its handlers instead (and this one stays silent), so an
    application routes them like any library's."""

    def emit(self, record: logging.LogRecord) -> None:
        if logging.getLogger().handlers:
            return
        self.write(record.levelno, record.getMessage())

    @staticmethod
    def write(levelno: int, msg: str) -> None:
        try:
            warn = "warning: " if levelno >= logging.WARNING else ""
            sys.stderr.write(f"scopemeter: {warn}{msg}\n")
            sys.stderr.flush()
        except Exception:  # a closed stderr must not break training
            pass


# The library never sets a level: an application's logging.basicConfig(
# level=WARNING) or a level on "scopemeter" decides which lines it sees.
_logger = logging.getLogger("scopemeter")
if not any(isinstance(h, _StderrUnlessConfigured) for h in _logger.handlers):
    _logger.addHandler(_StderrUnlessConfigured())


def _log(msg: str, warn: bool = False) -> None:
    level = logging.WARNING if warn else logging.INFO
    if _logger.disabled or (_logger.level == logging.NOTSET and
                            not logging.getLogger().handlers):
        # logging configured by no one: every line on stderr, as the engine
        # writes its own (logging's default WARNING would hide the INFO ones).
        # Disabled: a logging.config call that did not name this logger
        # (fileConfig/dictConfig's default disable_existing_loggers) -- its
        # lines would be lost, not hidden by a level anyone chose
        # (docs/python.md).
        _StderrUnlessConfigured.write(level, msg)
    else:
        _logger.log(level, "%s", msg)


# The engine's lines written in the caller's thread (while the monitor's
# start() and stop() and the run check run: enable_system_metrics(),
# disable_system_metrics() and the other stops) take the same way, INFO or
# WARNING as the engine says; the sampling and shipping threads' lines stay
# on stderr (docs/python.md).
_native.set_log(lambda warn, msg: _log(msg, warn))


# ---- records -> MLflow ----------------------------------------------------------


# Tracking URIs without a scheme that are not paths: MLflow resolves them to
# remote stores (mlflow/tracking/registry.py, get_store_builder).
_BARE_STORES = frozenset(("databricks", "databricks-uc", "uc"))


def _absolute_uri(uri: str) -> str:
    """A relative local store -- sqlite:///relative, file:relative or a plain
    relative path -- pinned to today's directory (the user's code may chdir
    later; the pump thread must keep the store).  Every other URI is MLflow's
    to resolve and is returned unchanged: any other scheme (http, postgresql,
    databricks://profile, ...) and the bare databricks / databricks-uc / uc."""
    if not uri or uri in _BARE_STORES:
        return uri
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        path = uri[len("sqlite:///"):]
        if path and not path.startswith(":memory:"):
            return "sqlite:///" + os.path.abspath(path)
        return uri
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme == "":
        return os.path.abspath(uri)
    if parsed.scheme == "file" and not parsed.netloc and parsed.path and \
            not parsed.path.startswith("/"):
        # MLflow reads file:x as the path url2pathname(x), which is unquote(x)
        # on POSIX (mlflow/utils/file_utils.py, local_file_uri_to_path)
        path = urllib.parse.unquote(parsed.path)
        return pathlib.Path(os.path.abspath(path)).as_uri()
    return uri


def _shipping(uri: str) -> Tuple[str, Any]:
    """How points of a run at `uri` reach MLflow: ("rest", headers) when the
    engine's REST sink can ship them exactly as MLflow's client would, else
    ("client", line) with the one line that says why not (None when the
    store is not an HTTP server at all: the MlflowClient path is its path)."""
    scheme = urllib.parse.urlparse(uri or "").scheme.lower()
    if scheme not in ("http", "https"):
        if uri in _BARE_STORES or scheme.startswith("databricks") or scheme == "uc":
            return "client", (f"tracking URI {_redact(uri)}: Databricks stores are not plain "
                              "MLflow REST, so points go through MlflowClient")
        return "client", None
    auth = os.environ.get("MLFLOW_TRACKING_AUTH")
    if auth:
        return "client", (f"MLFLOW_TRACKING_AUTH={auth} (an MLflow auth plugin) cannot be "
                          "applied from C, so points go through MlflowClient")
    if scheme == "https":
        try:
            _native.tls()  # the engine's TLS module loads here, not for http
        except OSError as e:
            return "client", f"{e}, so points go through MlflowClient"
    try:
        from mlflow.tracking.request_header.registry import resolve_request_headers
        headers = sorted((str(k), str(v)) for k, v in resolve_request_headers().items())
    except Exception as e:
        return "client", (f"MLflow's request-header providers failed ({_short(e)}), so points "
                          "go through MlflowClient")
    return "rest", headers


def _redact(uri: Optional[str]) -> str:
    """The URI as the engine prints it (sm_mlflow_redact_uri): one redaction."""
    try:
        return _native.redact_uri(uri or "")
    except (TypeError, ValueError):  # an embedded NUL
        return _USERINFO.sub("***@", uri or "").split("?", 1)[0]


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
        self.hook: Optional[_RunEndHook] = None  # our entry in MLflow's registry (run end)
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
        """The stop word: the companion exits at once, touching nothing; it
        is reaped here (a zombie of ours otherwise).  "ended" (the SIGTERM
        path of a process that opened the run): the monitor's end is
        written, but a process dying of SIGTERM runs no atexit, so MLflow
        would leave the run RUNNING; the companion stays to end the run at
        the death (docs/design.md §7)."""
        c, self.companion = self.companion, None
        if c is None:
            return
        try:
            c.stdin.write(word.encode() + b"\n")
            c.stdin.close()
        except (OSError, ValueError):
            pass  # it is gone already
        if word == "ended":
            return  # it lives until this process's end, then exits itself
        try:
            c.wait(_COMPANION_WAIT)
        except Exception:
            try:
                c.kill()
                c.wait(_COMPANION_WAIT)
            except Exception:
                pass


_COMPANION_WAIT = 2.0  # s: a companion answers the stop word at once


def _companion_bin() -> Optional[str]:
    """The CLI installed with this package, which runs the companion:
    SCOPEMETER_BIN, else a bundle's DIR/bin (`pip install --target DIR`
    puts the package in DIR/scopemeter and the CLI in DIR/bin), else the
    environment's scripts directory when the package is that environment's
    (the wheel installs the CLI there, beside python).  A package imported
    from elsewhere (PYTHONPATH, a checkout) does not take an environment's
    CLI, which may be another version.  None when there is none."""
    env = os.environ.get("SCOPEMETER_BIN")
    if env:
        return env if os.path.isfile(env) and os.access(env, os.X_OK) else None
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    where = [os.path.join(top, "bin")]
    try:
        import sysconfig
        libs = {os.path.realpath(sysconfig.get_path(k)) for k in ("purelib", "platlib")}
        if os.path.realpath(top) in libs:
            where.append(sysconfig.get_path("scripts"))
    except Exception:
        pass
    for d in where:
        exe = os.path.join(d, "scopemeter")
        if os.path.isfile(exe) and os.access(exe, os.X_OK):
            return exe
    return None


def _companion_env(headers: List[Tuple[str, str]]) -> Optional[Dict[str, str]]:
    """This process's environment with MLflow's request headers (the ones the
    REST sink sends) added to SCOPEMETER_HTTP_HEADERS, which every request of
    the companion carries (docs/rest.md): behind a gateway that asks for a
    header, its end would be refused without them.  None: ours as it is."""
    if not headers:
        return None
    env = dict(os.environ)
    try:
        merged = json.loads(env.get("SCOPEMETER_HTTP_HEADERS") or "{}")
    except ValueError:
        merged = None  # a bad one is the engine's to say, as it said it here
    if not isinstance(merged, dict):
        return None
    merged.update(headers)
    env["SCOPEMETER_HTTP_HEADERS"] = json.dumps(merged)
    return env


def _start_companion(run_id: str, uri: str, owns_run: bool, client: bool,
                     headers: Optional[List[Tuple[str, str]]] = None) -> Optional[Any]:
    """Starts `scopemeter companion` as this process's child, in its cgroup
    (docs/design.md §7): it ends the recording if this process dies without
    a stop (OOM kill, SIGKILL).  SCOPEMETER_COMPANION=0 turns it off.  None
    when it is off or cannot start (one line: the front records as before)."""
    if os.environ.get("SCOPEMETER_COMPANION") == "0":
        return None
    exe = _companion_bin()
    if exe is None:
        _log("the scopemeter CLI installed with this package is not found (SCOPEMETER_BIN, a "
             "bundle's bin/, the environment's scripts): "
             "no companion, so if this process is OOM-killed or SIGKILLed the run keeps no end "
             "tags and stays RUNNING")
        return None
    rank = int(_native.identity()["rank"])
    argv = [exe, "companion", "--pid", str(os.getpid()), "--run-id", run_id,
            "--tracking-uri", uri, "--rank", str(rank)]
    if sys.executable:
        argv += ["--python", sys.executable, "--python-path",
                 os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
    if owns_run:
        argv.append("--owns-run")
    if client:
        argv.append("--mlflow-client")
    try:
        import subprocess
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                close_fds=True, env=_companion_env(headers or []))
    except Exception as e:
        _log(f"the companion ({exe}) did not start: {_short(e)}; if this process is OOM-killed "
             "or SIGKILLed the run keeps no end tags and stays RUNNING", warn=True)
        return None


BatchLogger = Callable[[str, List[Any], List[Any], float], None]


def _batch_logger(client: Any) -> BatchLogger:
    """log(run_id, metrics, tags, timeout): one log_batch of the store.  For a
    REST store (the auth-plugin and Databricks cases) one request with
    MLflow's own retries off and a bounded timeout, so its multi-minute retry
    loop never runs inside the pump; else the client's log_batch (sqlite,
    file, databases: no HTTP retry loop there)."""
    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    creds = getattr(store, "get_host_creds", None)
    if creds is not None:
        try:
            from mlflow.utils.rest_utils import http_request
        except ImportError:
            creds = None
    if creds is None:
        sync: Dict[str, Any] = {}
        try:
            import inspect
            if "synchronous" in inspect.signature(client.log_batch).parameters:
                # the pump is the asynchronous part; a failure must reach it
                sync = {"synchronous": True}
        except (TypeError, ValueError):
            pass

        def log(run_id: str, metrics: List[Any], tags: List[Any], timeout: float) -> None:
            client.log_batch(run_id, metrics=metrics, tags=tags, **sync)
        return log

    endpoint = "/api/2.0/mlflow/runs/log-batch"

    def log_rest(run_id: str, metrics: List[Any], tags: List[Any], timeout: float) -> None:
        body = {"run_id": run_id, "params": [],
                "metrics": [{"key": m.key, "value": m.value, "timestamp": m.timestamp,
                             "step": m.step} for m in metrics],
                "tags": [{"key": t.key, "value": t.value} for t in tags]}
        try:
            resp = http_request(creds(), endpoint, "POST", max_retries=0, timeout=timeout,
                                raise_on_status=False, json=body)
        except Exception as e:
            err = _os_error(e)
            if err is None or _errno_of(err) != errno.ECONNRESET:
                raise
            # a kept-alive connection the server had closed: once more on a
            # fresh one, as libcurl does on the REST path
            resp = http_request(creds(), endpoint, "POST", max_retries=0, timeout=timeout,
                                raise_on_status=False, json=body)
        if not 200 <= resp.status_code < 300:
            # the answer as it came: the engine reads it as the REST sink does
            raise _Answered(resp.status_code, resp.content, resp.headers.get("Retry-After"))
    return log_rest


class _Answered(Exception):
    """A REST store's answer other than 2xx, as received."""

    def __init__(self, status: int, body: bytes, retry_after: Optional[str]) -> None:
        super().__init__(f"HTTP {status}")
        self.status, self.body, self.retry_after = status, body, retry_after


# (http status or 0, body, Retry-After, errno, why): what the engine's policy reads
Answer = Tuple[int, Optional[bytes], Optional[str], int, str]


# OSErrors raised without an errno, by their class: http.client's
# RemoteDisconnected (a connection closed without a reply) is a
# ConnectionResetError, as libcurl's "empty reply" is said (rest_http.c)
_ERRNO_OF = {ConnectionResetError: errno.ECONNRESET, ConnectionRefusedError: errno.ECONNREFUSED,
             ConnectionAbortedError: errno.ECONNABORTED, BrokenPipeError: errno.EPIPE,
             TimeoutError: errno.ETIMEDOUT}


def _errno_of(e: OSError) -> int:
    return int(e.errno or next((n for c, n in _ERRNO_OF.items() if isinstance(e, c)), 0))


def _os_error(exc: BaseException) -> Optional[OSError]:
    """The OSError with an errno under an exception (requests wraps urllib3's
    wrapping of the socket's; MLflow wraps that again): a connection that got
    no answer is said by its errno on both transports."""
    seen: Set[int] = set()
    todo: List[Any] = [exc]
    while todo:
        e = todo.pop()
        if not isinstance(e, BaseException) or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, OSError) and _errno_of(e):
            return e
        todo.extend([e.__cause__, e.__context__, *getattr(e, "args", ())])
        todo.append(getattr(e, "reason", None))
    return None


def _answer(exc: BaseException) -> Answer:
    """An exception of log_batch as the store's answer: the HTTP status and
    MLflow's error JSON where there was one (a REST store's reply, or an
    MlflowException of a local store with the status MLflow gives its error
    code), else 0 and the words of what happened.  The engine classifies."""
    if isinstance(exc, _Answered):
        return exc.status, exc.body, exc.retry_after, 0, ""
    os_err = _os_error(exc)
    if os_err is not None:
        return 0, None, None, _errno_of(os_err), _short(exc)
    code = getattr(exc, "error_code", None)
    get = getattr(exc, "get_http_status_code", None)
    if code and get is not None:
        try:
            status = int(get())
        except Exception:
            status = 500
        message = str(getattr(exc, "message", "") or _short(exc))
        body = json.dumps({"error_code": str(code), "message": message[:300]})
        return status, body.encode(), None, 0, ""
    return 0, None, None, 0, f"{type(exc).__name__}: {_short(exc)}"


# userinfo of a URL ("http://user:password@host"): MLflow's exception texts
# name the request URL, and a tracking URI may carry credentials there
_USERINFO = re.compile(r"(?<=://)[^/\s@]+@")


def _run_json(run: "Run") -> Optional[str]:
    """The Run as runs/get's "run" object (protobuf JSON, as the REST API
    sends it), for the engine's run check; None when it cannot be written."""
    try:
        from mlflow.utils.proto_json_utils import message_to_json
        return str(message_to_json(run.to_proto()))
    except Exception:
        return None


def _check_run(delivery: _native.Delivery, run_id: str, uri: str,
               run: Optional["Run"]) -> Optional[str]:
    """The MlflowClient path's run check at start: Python asks (get_run,
    bounded), the engine decides and says it (deliver.c, as for the REST
    sink): a run that does not exist or is deleted fails the start (the line
    returned), a store that does not answer in time is said and recording
    goes on, an ended run is said and steps continue after the run's earlier
    system steps.  Returns None to record, or the line."""
    rank = int(_native.identity()["rank"])
    if run is not None and run.info.run_id == run_id:
        # the active run, opened by this process: maybe a resumed one
        # (mlflow.start_run(run_id=...)), whose data start_run fetched
        return delivery.check(rank, _run_json(run), None, None)
    result: Dict[str, Any] = {}

    def get() -> None:
        try:
            from mlflow.tracking import MlflowClient
            result["run"] = MlflowClient(tracking_uri=uri).get_run(run_id)
        except Exception as e:
            result["error"] = e
    bound = _CHECK_TIMEOUT if uri.split(":", 1)[0].lower() in ("http", "https") \
        else _CHECK_TIMEOUT_LOCAL
    t = threading.Thread(target=get, name="scopemeter-check-run", daemon=True)
    t.start()
    t.join(bound)
    if "run" in result:
        return delivery.check(rank, _run_json(result["run"]), None, None)
    e = result.get("error")
    why = _short(e) if e is not None else f"no answer in {bound:g} s"
    return delivery.check(rank, None, getattr(e, "error_code", None) or None, why)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return _USERINFO.sub("***@", text[0] if text else type(exc).__name__)[:300]


def _sysroot() -> str:
    """SCOPEMETER_SYSROOT without trailing slashes ("" for none or "/"), the
    prefix of every absolute path read, as the engine takes it (docs/design.md §8,
    src/collectors.c sm__ctx_init)."""
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


def _mlflow_monitors() -> Optional[Dict[str, Any]]:
    fluent = sys.modules.get("mlflow.tracking.fluent")
    monitors = getattr(fluent, "run_id_to_system_metrics_monitor", None)
    return monitors if isinstance(monitors, dict) else None


def _quiet(fn: Callable[[], object]) -> Callable[[], None]:
    def run() -> None:
        try:
            fn()
        except Exception as e:
            _log(f"stopping MLflow's own monitor: {_short(e)}", warn=True)
    return run


def _is_number(value: object) -> bool:
    """int, float and the other real numbers (numpy's included), not bool: True
    as an interval is a mistake, not 1 s."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _require_number(func: str, name: str, value: object, whole: bool = False) -> None:
    """The type check of every public function's numeric arguments: None (the
    default) or a number, else TypeError.  Its range is checked apart (a value
    out of range is one line in enable_system_metrics(), a ValueError in
    plan())."""
    if value is not None and not _is_number(value):
        what = "a whole number" if whole else "a number"
        raise TypeError(f"{func}(): {name} must be {what} or None, not {type(value).__name__}")


def _require_flag(func: str, name: str, value: object) -> None:
    """A flag (all_workers, container_limits): True or False (an int is taken
    as C takes it), else TypeError."""
    if not isinstance(value, int):
        raise TypeError(f"{func}(): {name} must be True or False, not {type(value).__name__}")


@overload
def _number(name: str, value: Optional[float], integer: Literal[True]) -> int: ...
@overload
def _number(name: str, value: Optional[float], integer: Literal[False]) -> float: ...


def _number(name: str, value: Optional[float], integer: bool) -> Union[int, float]:
    """interval / samples of enable_system_metrics(), whose type
    _require_number checked: None is the default (0 for the engine); anything
    else within the engine's bounds, checked and said by the engine's one
    number parser (src/number.h), as the CLI says them."""
    if value is None:
        return 0
    lo, hi = (1, _native.SAMPLES_MAX) if integer else (_native.INTERVAL_MIN, _native.INTERVAL_MAX)
    v = _native.parse_number(value, name, lo, hi, whole=integer, seconds=not integer)
    return int(v) if integer else v


@overload
def _plan_arg(name: str, value: Optional[float], integer: Literal[True] = ...) -> int: ...
@overload
def _plan_arg(name: str, value: Optional[float], integer: Literal[False]) -> float: ...


def _plan_arg(name: str, value: Optional[float], integer: bool = True) -> Union[int, float]:
    """One argument of plan(): None is the engine's default; a value of the
    wrong type is a TypeError, a fraction where a whole number is wanted (or
    inf, nan) a ValueError of the engine's one number parser here; its bounds
    are checked by the engine (sm_plan_estimate: they depend on each other,
    nodes <= pods), with the words of `scopemeter plan`."""
    default = _native.PLAN_DEFAULT
    _require_number("plan", name, value, whole=integer)
    if value is None:
        return default
    _native.parse_number(value, name, whole=integer)
    if integer:
        v = int(value)
        # outside a C int: the nearest invalid value, so the engine names the bound
        v = max(min(v, 2**31 - 1), -2**31)
        return v if v != default else default - 1  # an explicit -1 is not "default"
    f = float(value)
    return f if f != default else default - 1.0


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
                          write_budget: Optional[float] = None) -> bool:
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
    try:
        return _enable(bool(all_workers), interval, samples, write_budget)
    except Exception as e:
        _log(f"system metrics not recorded: {type(e).__name__}: {_short(e)}; training goes on",
             warn=True)
        return False


def _enable(all_workers: bool, interval: Optional[float], samples: Optional[int],
            write_budget: Optional[float]) -> bool:
    global _current
    called_ms = int(time.time() * 1000)
    try:
        interval_s = _number("interval", interval, integer=False)
        n_samples = _number("samples", samples, integer=True)
        # None: the engine's (SCOPEMETER_WRITE_BUDGET, else the default rule)
        budget = 0.0 if write_budget is None else _native.parse_number(
            write_budget, "write_budget", _native.WRITE_BUDGET_MIN, _native.WRITE_BUDGET_MAX)
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
                                  recording_key=run_id, write_budget=budget)
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
                                  write_budget=budget)
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
         write_budget: Optional[float] = None) -> _native.PlanResult:
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
    collecting pod, docs/plan.md "Memory").  Raises ValueError for an
    impossible job (this is a planning tool, not the training path), and
    TypeError for an argument of the wrong type (a str, a bool where a number
    is expected).  nodes=None means one node per pod, as the CLI assumes
    without --nodes.
    """
    _require_flag("plan", "all_workers", all_workers)
    _require_flag("plan", "container_limits", container_limits)
    p = _native.plan(workers=_plan_arg("workers", workers),
                     workers_per_pod=_plan_arg("workers_per_pod", workers_per_pod),
                     nodes=_plan_arg("nodes", nodes),
                     gpus_per_worker=_plan_arg("gpus_per_worker", gpus_per_worker),
                     all_workers=bool(all_workers),
                     interval=_plan_arg("interval", interval, integer=False),
                     samples=_plan_arg("samples", samples),
                     container_limits=bool(container_limits),
                     write_budget=_plan_arg("write_budget", write_budget, integer=False))
    if p["ui_charts_over"]:
        _log(f"plan: warning: {p['charts']} charts in the run's System metrics tab, more than "
             f"{p['ui_charts_warn']} (the largest bench/ui_render.py drew to its end): read the "
             "ranks with scopemeter.report() (docs/plan.md)", warn=True)
    return p
