"""_companion.py — `scopemeter companion`, this process's watcher (docs/design.md §7).

Why this file exists: once a monitor records, the companion is started as
this process's child, in its cgroup; every stop tells it "stop" (or
"ended") on its stdin after the monitor's own stop.  If this process dies
without that (OOM kill, SIGKILL), the companion writes the end tags the
cgroup kept, why it died, and the end of a run this process opened.  Here:
finding the CLI installed with this package, its argv and environment,
starting it and telling it the stop word.  A companion that cannot start is
one line, never an exception: the front records as before.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List, Optional, Tuple

from . import _native
from ._lines import _log, _short

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


def _stop_companion(c: Any, word: str = "stop") -> None:
    """The stop word: the companion exits at once, touching nothing; it
    is reaped here (a zombie of ours otherwise).  "ended" (the SIGTERM
    path of a process that opened the run): the monitor's end is
    written, but a process dying of SIGTERM runs no atexit, so MLflow
    would leave the run RUNNING; the companion stays to end the run at
    the death (docs/design.md §7)."""
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
