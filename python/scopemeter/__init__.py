"""scopemeter — system metrics of ML training in MLflow, with names that say
what they measure (node_*, rootfs_*, network_*, gpu_i_*, container_*), per rank.

    import mlflow, scopemeter

    with mlflow.start_run():
        scopemeter.enable_system_metrics()     # right after the run opens,
        ...                                    # before data loaders and models

Sampling and shipping are the C engine's (libscopemeter) and never hold the
GIL: for an http(s) tracking URI the engine's REST sink ships itself; other
stores (the local default sqlite:///mlflow.db, file:) get finished batches
through MLflow's client.  See docs/python.md.

Importing this package imports neither mlflow nor psutil nor pynvml: MLflow is
imported when a monitor starts, and the report's code when a report is made
(every module imported is resident in the training process for its life).
"""
from __future__ import annotations

from typing import Any

from ._front import disable_system_metrics, enable_system_metrics, plan
from ._native import version as _c_version

__version__ = _c_version()

_REPORT = ("report", "format_report", "ReportError")


def __getattr__(name: str) -> Any:  # PEP 562: scopemeter.report & co. import _report on first use
    if name in _REPORT:
        from . import _report
        return getattr(_report, name)
    raise AttributeError(f"module 'scopemeter' has no attribute {name!r}")

__all__ = ["enable_system_metrics", "disable_system_metrics", "plan", "report", "format_report",
           "ReportError", "__version__"]
