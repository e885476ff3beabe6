"""`python -m scopemeter`: the Python side of the command line.

Why this file exists: `scopemeter report` is implemented in Python (it reads
runs through MLflow's own client, docs/report.md); the C CLI's `report`
subcommand execs `python -m scopemeter report ...` with an interpreter that
can import this package.  `--version` says which package that interpreter
imports, the first thing to check when the CLI and the module disagree.
"""
from __future__ import annotations

import os
import sys
from typing import Optional, Sequence

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
    sys.stderr.write(f"scopemeter: unknown command {argv[0]!r} for python -m scopemeter "
                     "(probe, plan and run are the C CLI's: `scopemeter`)\n" + USAGE)
    return 2


if __name__ == "__main__":
    _drop_working_directory()
    sys.exit(main())
