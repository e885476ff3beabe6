"""_lines.py — the front's lines: one per event on stderr, "scopemeter: ...".

Why this file exists: every module of the front says what happened the same
way the C engine does (its prefix, "warning: " for a warning), through
logging.getLogger("scopemeter") once the application has configured logging
(docs/python.md); and a line never shows a tracking URI's password.  The
engine's own lines written in the caller's thread take this way too
(_native.set_log, set at import).  Nothing here may import MLflow.
"""
from __future__ import annotations

import logging
import re
import sys
from typing import Optional

from . import _native


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


# userinfo of a URL ("http://user:password@host"): MLflow's exception texts
# name the request URL, and a tracking URI may carry credentials there
_USERINFO = re.compile(r"(?<=://)[^/\s@]+@")


def _redact(uri: Optional[str]) -> str:
    """The URI as the engine prints it (sm_mlflow_redact_uri): one redaction."""
    try:
        return _native.redact_uri(uri or "")
    except (TypeError, ValueError):  # an embedded NUL
        return _USERINFO.sub("***@", uri or "").split("?", 1)[0]


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return _USERINFO.sub("***@", text[0] if text else type(exc).__name__)[:300]

