"""_transport.py — the MlflowClient transport of the engine's delivery policy.

Why this file exists: for a store C cannot write (sqlite:, file:, a
database, an auth plugin, Databricks) the engine's policy (_native.Delivery,
src/mlflow/deliver.c) decides everything — what to send, when, what an
answer means, the lines and the counters — and Python only sends: one
log_batch (a REST store: one request, MLflow's retries off, a bounded
timeout), an exception turned into the store's answer (_answer), and the
run check at start (get_run, bounded), whose verdict is the engine's.  What
must never happen here: a decision of the policy's written again in Python,
or MLflow's multi-minute retry loop inside the pump.
"""
from __future__ import annotations

import errno
import json
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set, Tuple

from . import _native
from ._lines import _short

if TYPE_CHECKING:
    from mlflow.entities import Run

_CHECK_TIMEOUT = _native.CHECK_TIMEOUT  # the run check at start: the engine's bound
# ... but a local store (sqlite, file) answers no network: its first open
# creates or migrates the database, which takes seconds on a loaded machine
_CHECK_TIMEOUT_LOCAL = 30.0
_REQUEST_TIMEOUT = 30.0      # one log_batch request of the MlflowClient path


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

