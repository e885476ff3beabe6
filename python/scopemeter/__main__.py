"""`python -m scopemeter`: the Python side of the command line.

Why this file exists: `scopemeter report` is implemented in Python (it reads
runs through MLflow's own client, docs/report.md); the C CLI's `report`
subcommand execs `python -m scopemeter report ...` with an interpreter that
can import this package.  `--version` says which package that interpreter
imports, the first thing to check when the CLI and the module disagree.

`_companion-end` is internal: the companion (`scopemeter companion`,
cli/cmd_companion.c) runs it after the recording process died, for a store
only MLflow's client can write (sqlite:, file:, an auth plugin): the tags it
decided, then, with --end, the run's end when the run is still RUNNING.
"""
from __future__ import annotations

import os
import sys
from typing import List, Optional, Sequence, Tuple

USAGE = ("usage: python -m scopemeter report [RUN_ID] [--json] [--all] [--plot FILE.png]\n"
         "       python -m scopemeter --version\n")


def _drop_working_directory() -> None:
    """`python -m` puts the working directory first on sys.path (unless -P or
    PYTHONSAFEPATH, 3.11+): an mlflow.py or json.py where the user happens to
    stand would be imported instead of the real one.  This package is already
    imported by then (its submodules are found through its own __path__), so
    the entry goes; an entry the user put on PYTHONPATH comes later and stays."""
    if getattr(sys.flags, "safe_path", False) or not sys.path:
        return
    try:
        if os.path.realpath(sys.path[0] or os.curdir) == os.path.realpath(os.getcwd()):
            del sys.path[0]
    except OSError:
        pass


def _companion_end(argv: Sequence[str]) -> int:
    """--tracking-uri URI --run-id ID --rank N [--end STATUS] --reason TEXT
    [--tag KEY VALUE]...: exit 0 written (the run ended when asked), 4
    written but the run was no longer RUNNING (left as it is), 1 not
    written (one line), 2 usage."""
    opts = {"--tracking-uri": "", "--run-id": "", "--rank": "0", "--end": "", "--reason": ""}
    tags: List[Tuple[str, str]] = []
    i = 0
    try:
        while i < len(argv):
            if argv[i] == "--tag":
                tags.append((argv[i + 1], argv[i + 2]))
                i += 3
            elif argv[i] in opts:
                opts[argv[i]] = argv[i + 1]
                i += 2
            else:
                raise IndexError(argv[i])
    except IndexError:
        sys.stderr.write("scopemeter: _companion-end: bad arguments\n")
        return 2
    run_id = opts["--run-id"]
    try:
        from mlflow.entities import RunTag
        from mlflow.tracking import MlflowClient
        client = MlflowClient(tracking_uri=opts["--tracking-uri"])
        if tags:
            client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags])
        status = opts["--end"]
        if not status:
            return 0
        if client.get_run(run_id).info.status != "RUNNING":
            return 4  # someone ended it: theirs to say
        client.set_tag(run_id, "scopemeter.end_reason",
                       f"{status} by scopemeter companion of rank {opts['--rank']}: "
                       f"{opts['--reason']}")
        client.set_terminated(run_id, status)
        return 0
    except Exception as e:
        text = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        sys.stderr.write(f"scopemeter: companion: could not write the end of run {run_id}: "
                         f"{type(e).__name__}: {text}\n")
        return 1


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        (sys.stdout if argv else sys.stderr).write(USAGE)
        return 0 if argv else 2
    if argv[0] in ("--version", "version"):
        import scopemeter
        print(f"scopemeter {scopemeter.__version__} "
              f"({os.path.dirname(os.path.abspath(scopemeter.__file__))})")
        return 0
    if argv[0] == "report":
        from ._report import main as report_main
        return report_main(argv[1:])
    if argv[0] == "_companion-end":
        return _companion_end(argv[1:])
    sys.stderr.write(f"scopemeter: unknown command {argv[0]!r} for python -m scopemeter "
                     "(probe, plan and run are the C CLI's: `scopemeter`)\n" + USAGE)
    return 2


if __name__ == "__main__":
    _drop_working_directory()
    sys.exit(main())
