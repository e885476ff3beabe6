"""_route.py — which way a run's points take to MLflow (docs/python.md).

Why this file exists: enable_system_metrics() chooses once, at start, between
the engine's REST sink (an http(s) tracking URI whose requests C can make as
MLflow's client would: its auth and TLS variables, its request-header
providers' headers) and the MlflowClient path (_transport.py, _session.py's
pump) for every other store; and it pins a relative local store to today's
directory.  Deciding only: nothing here sends.
"""
from __future__ import annotations

import os
import pathlib
import urllib.parse
from typing import Any, Tuple

from . import _native
from ._lines import _redact, _short


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

