"""scopemeter — system metrics of ML training in MLflow, with names that say
what they measure (node_*, rootfs_*, network_*, gpu_i_*, container_*), per rank.

    import mlflow, scopemeter

    with mlflow.start_run():
        scopemeter.enable_system_metrics()     # right after the run opens,
        ...                                    # before data loaders and models

The sampling thread is the C engine's (libscopemeter) and never holds the GIL;
the Python side only hands finished batches to MLflow through its public
client, so every tracking store works, the local default sqlite:///mlflow.db
included.  See docs/python.md.

Importing this package imports neither mlflow nor psutil nor pynvml: MLflow is
imported when a monitor starts.
"""
from ._front import disable_system_metrics, enable_system_metrics, plan
from ._native import version as _c_version
from ._report import ReportError, format_report, report  # mlflow only when a report is made

__version__ = _c_version()

__all__ = ["enable_system_metrics", "disable_system_metrics", "plan", "report", "format_report",
           "ReportError", "__version__"]
