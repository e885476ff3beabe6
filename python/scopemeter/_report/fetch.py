"""Reading a run for the report, through MLflow's own client (docs/report.md,
"Which run, which store").

Why this file exists: it is the report's only contact with MLflow.  It finds
the store (MLflow's own resolution; a local store that is not there is
refused, never created), the run (an argument, the active run, MLFLOW_RUN_ID,
or the most recent run holding scopemeter series), and reads the run's
series and tags into the types of model.py.  It computes nothing
the report says: build.py does.  MLflow is imported here when a
report is made, never at `import scopemeter`; it must never be imported at
this module's top.
"""
from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from .. import _native
from .model import RankData, ReportError
from .values import finite, first_line, printable

if TYPE_CHECKING:
    from mlflow.entities import Metric, Run
    from mlflow.tracking import MlflowClient

# Logged keys, system/<key>[/NODE]/rankN (docs/design.md §2), are read with
# the engine's own inverse of its naming rule (_native.series_parse), never a
# grammar of the report's: a key the rule cannot have written is not ours.
RANK_TAG = re.compile(r"^scopemeter\.rank(\d+)\.(.+)$")


def client(tracking_uri: Optional[str]) -> "MlflowClient":
    try:
        from mlflow.tracking import MlflowClient
        from mlflow.tracking import get_tracking_uri
    except ModuleNotFoundError as e:
        # the report's one dependency: a Python without it is a run that
        # cannot be read (ReportError, docs/python.md), not a traceback
        if not (e.name or "").split(".")[0] == "mlflow":
            raise
        raise ReportError(f"cannot read the run: this Python ({sys.executable}) cannot import "
                          f"MLflow ({first_line(e)}): pip install mlflow") from None
    # MLflow's own resolution: mlflow.set_tracking_uri() in this process, else
    # MLFLOW_TRACKING_URI, else its local default (sqlite:///mlflow.db)
    uri = tracking_uri or get_tracking_uri()
    _refuse_missing_store(uri)
    _require_sql_modules(uri)
    return MlflowClient(tracking_uri=uri)


# MLflow's SQL stores (mlflow/store/db/db_types.py: its DATABASE_ENGINES),
# "postgresql+psycopg2://" included: they need SQLAlchemy and alembic, which
# mlflow-skinny (the wheel's dependency) does not bring.
SQL_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")


def _require_sql_modules(uri: str) -> None:
    """A SQL store read by mlflow-skinny fails inside MLflow with
    UnsupportedModelRegistryStoreURIException, which names no fix: say the
    one line (issue 46)."""
    import importlib.util
    scheme = uri.split(":", 1)[0].split("+", 1)[0].lower() if ":" in uri else ""
    if scheme not in SQL_SCHEMES:
        return
    missing = [m for m in ("sqlalchemy", "alembic") if importlib.util.find_spec(m) is None]
    if missing:
        raise ReportError(f"cannot read the run: the {scheme} store {uri} needs SQLAlchemy and "
                          f"alembic, and this Python ({sys.executable}) has no "
                          f"{' or '.join(missing)} (mlflow-skinny has neither): "
                          f"pip install sqlalchemy alembic, or pip install mlflow")


def _local_store_path(uri: str) -> Optional[Tuple[str, str]]:
    """(kind, path) of a store MLflow would create when missing: a sqlite
    file, or a file store's directory (file:///x, file:/x, or a plain path,
    which MLflow takes as a file store); None for every other store."""
    from urllib.parse import unquote, urlparse
    if uri.startswith("sqlite:///"):
        path = uri[len("sqlite:///"):].split("?", 1)[0]
        return ("file", path) if path and path != ":memory:" else None
    parsed = urlparse(uri)
    if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
        return "directory", unquote(parsed.path)
    if parsed.scheme == "" and uri:
        return "directory", uri
    return None


def _refuse_missing_store(uri: str) -> None:
    """A report only reads: opening a local store that is not there would
    create it (MLflow's sqlite store creates and migrates an empty database,
    its file store makes the directory and a default experiment) in whatever
    directory the user happens to be in."""
    local = _local_store_path(uri)
    if local and not os.path.exists(local[1]):
        raise ReportError(f"no MLflow store at {uri} ({local[0]} {os.path.abspath(local[1])} "
                          "does not exist): set MLFLOW_TRACKING_URI to the store the run was "
                          "logged to")


def _holds_series(run: "Run") -> bool:
    return any(_native.series_parse(k) is not None for k in run.data.metrics)


def _current_experiments(client: "MlflowClient") -> List[str]:
    """The experiment(s) "the most recent run" is looked for in: the one the
    environment names, else the one this process set with mlflow.set_experiment,
    else every active experiment (a shell has no current experiment, and a
    script's set_experiment does not outlive it)."""
    exp_id = os.environ.get("MLFLOW_EXPERIMENT_ID")
    if exp_id:
        _require_experiment(client, exp_id)
        return [exp_id]
    name = os.environ.get("MLFLOW_EXPERIMENT_NAME")
    if name:
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise ReportError(f"no experiment named {name!r} (MLFLOW_EXPERIMENT_NAME)")
        return [exp.experiment_id]
    try:  # set by mlflow.set_experiment() in this process; private, so guarded
        from mlflow.tracking import fluent
        active = getattr(fluent, "_active_experiment_id", None)
        if active:
            return [active]
    except Exception:
        pass
    return [e.experiment_id for e in client.search_experiments()]


def _require_experiment(client: "MlflowClient", exp_id: str) -> None:
    """MLFLOW_EXPERIMENT_ID names an experiment that exists: searching one
    that does not finds no run, which would blame the runs, not the id."""
    try:
        client.get_experiment(exp_id)
    except Exception as e:
        code = getattr(e, "error_code", "")
        if code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
            raise ReportError(f"no such experiment {exp_id!r} (MLFLOW_EXPERIMENT_ID)") from None
        raise


def _latest_run_with_series(client: "MlflowClient") -> str:
    exps = _current_experiments(client)
    token: Optional[str] = None
    seen = 0
    while seen < 5000:
        page = client.search_runs(exps, order_by=["attributes.start_time DESC"],
                                  max_results=500, page_token=token)
        for run in page:
            if _holds_series(run):
                found: str = run.info.run_id
                return found
        seen += len(page)
        token = page.token
        if not token:
            break
    raise ReportError("no run with scopemeter series in experiment(s) "
                      f"{', '.join(exps) or '(none)'}: pass a run id")


def check_run_id(run_id: Optional[str]) -> None:
    """An empty id is a mistake (an unset shell variable), never "any run"."""
    if run_id is not None and not str(run_id).strip():
        raise ReportError("the run id is empty (an unset variable?): pass a run id, or none "
                          "for the most recent run")


def resolve_run_id(client: "MlflowClient", run_id: Optional[str]) -> Tuple[str, str]:
    """(the run id, which rule found it: the JSON's found_by)."""
    check_run_id(run_id)
    if run_id is not None:
        return run_id, "argument"
    mlflow = sys.modules.get("mlflow")
    if mlflow is not None:  # only when the caller already uses MLflow in this process
        active = mlflow.active_run()
        if active is not None:
            return active.info.run_id, "active run"
    if os.environ.get("MLFLOW_RUN_ID"):
        return os.environ["MLFLOW_RUN_ID"], "MLFLOW_RUN_ID"
    return _latest_run_with_series(client), "most recent run with scopemeter series"


def read(client: "MlflowClient", run_id: str) -> Tuple["Run", Dict[int, RankData]]:
    """(run, {rank: {"series": {name: [(ts_ms, step, value)]}, "node_tier": str|None}}),
    name without the node tier and the rank (container_memory_usage_megabytes)."""
    try:
        run = client.get_run(run_id)
    except Exception as e:
        raise ReportError(f"cannot read run {run_id}: {first_line(e)}") from None
    ranks: Dict[int, RankData] = {}
    ours = [(key, p) for key in sorted(run.data.metrics)
            if (p := _native.series_parse(key)) is not None]
    hists = _histories(client, run_id, [key for key, _ in ours])
    for (key, p), hist in zip(ours, hists):
        name, tier, rank = p["scoped"], p["node"] or None, p["rank"]
        r = ranks.setdefault(rank, {"series": {}, "node_tier": None})
        if tier and r["node_tier"] is None:
            r["node_tier"] = tier
        r["series"][name] = sorted((h.timestamp, h.step, h.value) for h in hist
                                   if finite(h.value))
    if ranks:
        # a rank that started (its start tag) but logged no point is part of
        # the run too: killed before its first window, it is what to look at
        for key in run.data.tags:
            m = RANK_TAG.match(key)
            if m and m.group(2) == "node":
                ranks.setdefault(int(m.group(1)), {"series": {}, "node_tier": None})
    return run, ranks


# A tracking server is asked for up to this many histories at once.  MLflow
# has no call for several keys' histories, so a run is read one request per
# series -- 11 a rank, 11264 for 1024 ranks: minutes in turn, while the
# server's workers (4 in the suite's deployment) sit idle between them.  8
# stays under MLflow's HTTP pool (MLFLOW_HTTP_POOL_MAXSIZE, 10): no request
# waits for a connection.  A local store is read in this process, where
# threads would only take turns at the interpreter: one at a time there.
FETCHERS = 8


def _histories(client: "MlflowClient", run_id: str,
               keys: List[str]) -> List[List["Metric"]]:
    """Each key's metric history, in the order of keys."""
    uri = str(getattr(client, "tracking_uri", "") or "")
    if len(keys) < 2 or not uri.startswith(("http://", "https://")):
        return [client.get_metric_history(run_id, key) for key in keys]
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=FETCHERS) as pool:
        return list(pool.map(lambda key: client.get_metric_history(run_id, key), keys))


def started_without_points(run: "Run") -> Optional[str]:
    """For a run without a point: None when no rank tagged its start, else
    what its start tags say of the limit (" (limit 700 MiB)", or "" without
    one): a recorder that started and died before its first window."""
    exact: Dict[int, str] = {}
    shown: Dict[int, str] = {}
    started = False
    for key, value in run.data.tags.items():
        m = RANK_TAG.match(key)
        if not m:
            continue
        started, rank = True, int(m.group(1))
        if m.group(2) == "memory_limit_bytes" and value.strip().isdigit() and int(value) > 0:
            b = int(value)
            exact[rank] = f"{b / (1 << 20):g} MiB" if b % (1 << 20) == 0 else f"{b / 1e6:.1f} MB"
        elif m.group(2) == "cgroup" and (mem := re.search(r"\bmem=(\S+)", value)):
            shown[rank] = re.sub(r"(\d)([KMGT]?i?B)$", r"\1 \2", mem.group(1))
    if not started:
        return None
    limits = sorted({exact.get(k) or shown[k] for k in set(exact) | set(shown)})
    return f" (limit {printable(', '.join(limits))})" if limits else ""


def rank_tags(tags: Dict[str, str], rank: int) -> Dict[str, str]:
    """The tags of one rank, scopemeter.rankN.KEY, by KEY."""
    return {m.group(2): v for k, v in tags.items()
            if (m := RANK_TAG.match(k)) and int(m.group(1)) == rank}
