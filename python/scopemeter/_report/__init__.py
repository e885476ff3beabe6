"""scopemeter report: how close did a run come to OOM, and where (docs/report.md).

Why this file exists: the charts of a run say the right thing, but a person
still has to open a dozen charts per rank and read tags to answer the one
question the project exists for.  This file is the report's front door:
``report()`` (a dict with a stable schema), ``format_report()`` (the
terminal table, at most 100 columns) and ``main()`` (``python -m scopemeter
report``, which the C CLI's ``scopemeter report`` execs).  The work is done
by one module per job of this package, read in this order (each imports
only those above it):

- model.py     the report's types: the JSON schema of docs/report.md
- values.py    reading numbers out of series and tags
- fetch.py     finding the store and the run, reading it (MLflow's client)
- verdicts.py  the verdicts, one function per rule, most severe first
- scale.py     the report of a big job: the summary, the outliers, "worst", the slow ranks
- build.py     a run's series and tags -> the report's fields
- text.py      the terminal tables, from column specs
- plot.py      the picture (matplotlib, optional)

It is the only implementation: it reads runs through MLflow's own client, so
every store MLflow supports (the local default sqlite:///mlflow.db, file:,
http(s) servers) and MLflow's auth variables and plugins work as they do for
MLflow.  MLflow is imported when a report is made, never at `import
scopemeter`.
"""
from __future__ import annotations

import json
import os
import re
import sys
from typing import BinaryIO, Dict, NoReturn, Optional, Sequence, Tuple, Union

from . import fetch
from .build import run_report
from .model import SCHEMA, RankData, Report, ReportError
from .text import format_report
from .values import first_line
from .verdicts import CODES, PARTS

__all__ = ["report", "format_report", "ReportError", "main", "SCHEMA", "CODES", "PARTS"]


def _collect(run_id: Optional[str] = None, tracking_uri: Optional[str] = None
             ) -> Tuple[Report, Dict[int, RankData]]:
    """(the report, the series it was made of: the picture's)."""
    client = fetch.client(tracking_uri)
    run_id, how = fetch.resolve_run_id(client, run_id)
    run, ranks = fetch.read(client, run_id)
    if not ranks:
        skipped = run.data.tags.get("scopemeter.skipped")
        why = f" (scopemeter.skipped: {skipped})" if skipped else ""
        started = fetch.started_without_points(run)
        if started is not None and not skipped:
            raise ReportError(f"run {run_id}: recording started{started} but no point "
                              "arrived: the recorder died at once")
        raise ReportError(f"run {run_id} holds no scopemeter series{why}")
    return run_report(run, ranks, how), ranks


def report(run_id: Optional[str] = None, tracking_uri: Optional[str] = None,
           plot: Union[str, "os.PathLike[str]", BinaryIO, None] = None) -> Report:
    """How close the run came to OOM, and where: per rank, the container's
    memory limit, peaks, headroom, node memory beside it, OOM kills, CPU and
    throttling, GPUs, network, the recording's span, and verdicts (most severe
    first).  Returns a dict whose schema docs/report.md documents.

    run_id: the run; default the active run of this process, else
    MLFLOW_RUN_ID, else the most recent run holding scopemeter series in the
    current experiment (MLFLOW_EXPERIMENT_ID / _NAME, mlflow.set_experiment),
    or in every experiment when none is set; an empty run_id ("", an unset
    variable) is a ReportError, not "any run".  tracking_uri: default MLflow's
    own (mlflow.set_tracking_uri(), MLFLOW_TRACKING_URI, else
    sqlite:///mlflow.db).  plot: a PNG path to also draw the picture into
    (needs matplotlib: ImportError saying how to get it).

    Unlike enable_system_metrics() this raises (ReportError) when the run
    cannot be reported: it is a reading tool, not part of training.  An
    argument of the wrong type is a TypeError, as in every public function:
    run_id and tracking_uri a str or None, plot a path (str, os.PathLike), a
    binary file object or None."""
    for name, value in (("run_id", run_id), ("tracking_uri", tracking_uri)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"report(): {name} must be a str or None, not {type(value).__name__}")
    if plot is not None and not isinstance(plot, (str, os.PathLike)) and \
            not callable(getattr(plot, "write", None)):
        raise TypeError("report(): plot must be a path (str, os.PathLike), a binary file or "
                        f"None, not {type(plot).__name__}")
    if plot:
        _require_plot()
    rep, ranks = _collect(run_id, tracking_uri)
    if plot:
        from . import plot as _plot
        _plot.draw(rep, ranks, plot)
    return rep


PLOT_HINT = "pip install 'scopemeter[report]'"


def _require_plot() -> None:
    try:
        from . import plot as _plot
        _plot.require()
    except ImportError as e:
        raise ImportError(f"the report's picture needs matplotlib ({first_line(e)}): "
                          f"{PLOT_HINT}") from None


# ---- the command -------------------------------------------------------------------


USAGE = "usage: scopemeter report [RUN_ID] [--json] [--all] [--plot FILE.png]"


def main(argv: Optional[Sequence[str]] = None, prog: str = "scopemeter report") -> int:
    """`scopemeter report [RUN_ID] [--json] [--all] [--plot FILE.png]`: 0 when the
    report was made, 1 when the run cannot be reported (or the picture not
    drawn), 2 for a usage error.  Every problem is one line on stderr."""
    import argparse
    p = argparse.ArgumentParser(
        prog=prog,
        description="How close a run came to OOM, and where: per rank, the container's memory "
                    "against its limit beside the node's, OOM kills, CPU throttling, GPUs, "
                    "network, and verdicts.  Reads the run through MLflow's client: "
                    "MLFLOW_TRACKING_URI (default sqlite:///mlflow.db), MLflow's auth "
                    "variables.  See docs/report.md.")
    p.add_argument("run_id", nargs="?", metavar="RUN_ID",
                   help="the run (default: MLFLOW_RUN_ID, else the most recent run with "
                        "scopemeter series in MLFLOW_EXPERIMENT_ID / MLFLOW_EXPERIMENT_NAME, "
                        "or in every experiment)")
    p.add_argument("--json", action="store_true", help="the report as JSON (docs/report.md)")
    p.add_argument("--all", action="store_true", dest="all_ranks",
                   help="list every rank in the tables (default: with more than 8 ranks, "
                        "the outliers and the worst; the JSON always holds every rank)")
    p.add_argument("--plot", metavar="FILE.png",
                   help="also draw memory and CPU per rank over time into a PNG "
                        "(needs matplotlib: pip install 'scopemeter[report]')")
    try:
        args = p.parse_args(argv)
    except BrokenPipeError:  # `--help | head -1`
        _write_stdout("")
        _die_of_sigpipe()
    if args.run_id is not None and not args.run_id.strip():
        # `scopemeter report "$RUN"` with RUN unset: not "the most recent run"
        sys.stderr.write(f"{prog}: error: RUN_ID is empty (an unset variable?): pass a run "
                         "id, or none for the most recent run with scopemeter series\n")
        return 2
    # A person waits for this command: MLflow's client retries a dead server
    # for minutes by default (7 retries with doubling backoff).  The user's own
    # settings win; scopemeter.report() in a program leaves them alone.
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
    if args.plot:
        # before reading the run: a missing extra is said at once, in one line
        try:
            _require_plot()
        except ImportError as e:
            _say(f"--plot: {e}")
            return 1
    try:
        rep, ranks = _collect(args.run_id)
    except ReportError as e:
        _say(str(e))
        return 1
    except Exception as e:  # the store's own error (unreachable server, auth)
        _say(f"cannot read the run: {type(e).__name__}: {first_line(e)}")
        return 1
    text = (json.dumps(rep, indent=2, allow_nan=False) if args.json
            else format_report(rep, args.all_ranks))
    closed = not _write_stdout(text + "\n")
    if args.plot:
        from . import plot as _plot
        try:
            _plot.draw(rep, ranks, args.plot)
        except Exception as e:
            _say(f"cannot draw {args.plot}: {type(e).__name__}: {first_line(e)}")
            return 1
        _say(f"picture written to {args.plot}")
    if closed:
        _die_of_sigpipe()
    return 0


def _write_stdout(text: str) -> bool:
    """Write and flush stdout; False when its reader has gone (`| head -1`).
    Python ignores SIGPIPE (so a closed socket to the tracking server is an
    exception, not a silent death); a closed stdout is BrokenPipeError."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
        return True
    except BrokenPipeError:
        # nothing more can go there, and the interpreter's own flush at exit
        # must not raise again: point stdout at /dev/null
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return False


def _die_of_sigpipe() -> NoReturn:
    """End as `git log | head -1` does when its reader is gone: quietly, killed
    by SIGPIPE (the shell's status 141), which a pipeline expects of a writer
    whose reader stopped (`set -o pipefail` sees it; nothing is printed)."""
    import signal
    sys.stderr.flush()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGPIPE)
    os._exit(128 + signal.SIGPIPE)  # not reached: the signal ends the process


def _redact(s: str) -> str:
    """MLflow's error texts name the request URL, user-info included."""
    return re.sub(r"(//)[^/@\s]+@", r"\1***@", s)


def _say(line: str) -> None:
    sys.stderr.write(f"scopemeter: {_redact(line)}\n")
    sys.stderr.flush()
