"""The Python front's lines go through logging.getLogger("scopemeter")
(docs/python.md): on stderr as "scopemeter: ..." while the application has
not configured logging, through the application's handlers once it has; so
do the engine's own lines written while enable_system_metrics() and
disable_system_metrics() run (issue 33 item 6), and the CLI's stay on stderr;
the SIGTERM handler is installed only in a process that collects."""
import subprocess
import sys

import pytest

from conftest import clean_env
from pyfront_util import python_env
from runread import sm_lines

NO_RUN = ("import scopemeter\n"
          "print('RESULT', scopemeter.enable_system_metrics())\n")


def run(code, tmp_path, **env):
    return subprocess.run([sys.executable, "-c", code], env=python_env(**env), cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


def test_lines_on_stderr_by_default(tmp_path):
    p = run(NO_RUN, tmp_path)
    assert p.returncode == 0, p.stderr
    assert "RESULT False" in p.stdout
    assert any(l.startswith("scopemeter: no active MLflow run") for l in p.stderr.splitlines()), \
        p.stderr


def test_lines_follow_the_applications_logging(tmp_path):
    code = ("import logging, sys\n"
            "logging.basicConfig(stream=sys.stdout, level=logging.INFO,\n"
            "                    format='APP %(name)s %(levelname)s %(message)s')\n" + NO_RUN)
    p = run(code, tmp_path)
    assert p.returncode == 0, p.stderr
    assert "APP scopemeter INFO no active MLflow run" in p.stdout, p.stdout
    assert "scopemeter: no active MLflow run" not in p.stderr, p.stderr


def test_the_applications_level_is_kept(tmp_path):
    # basicConfig(level=WARNING): the front's INFO lines are not shown, its
    # warnings are; importing scopemeter sets no level of its own
    code = ("import logging, sys\n"
            "logging.basicConfig(stream=sys.stdout, level=logging.WARNING,\n"
            "                    format='APP %(levelname)s %(message)s')\n"
            "import scopemeter\n"
            "print('LEVEL', logging.getLogger('scopemeter').level)\n"
            "print('RESULT', scopemeter.enable_system_metrics())\n"
            "print('RESULT', scopemeter.enable_system_metrics(interval=0))\n")
    p = run(code, tmp_path)
    assert p.returncode == 0, p.stderr
    assert "LEVEL 0" in p.stdout, p.stdout
    assert "no active MLflow run" not in p.stdout + p.stderr, p.stdout + p.stderr
    assert "APP WARNING enable_system_metrics(): interval must be" in p.stdout, p.stdout


def test_warnings_keep_their_level(tmp_path):
    code = ("import logging, sys\n"
            "logging.basicConfig(stream=sys.stdout, format='%(levelname)s %(message)s')\n"
            "import scopemeter\n"
            "print('RESULT', scopemeter.enable_system_metrics(interval=0))\n")
    p = run(code, tmp_path)
    assert "WARNING enable_system_metrics(): interval must be between 0.01 and 86400 s" in p.stdout


SIGTERM = ("import signal, mlflow, scopemeter\n"
           "mlflow.set_tracking_uri('sqlite:///{db}')\n"
           "with mlflow.start_run():\n"
           "    ok = scopemeter.enable_system_metrics(interval=0.5)\n"
           "    h = signal.getsignal(signal.SIGTERM)\n"
           "    print('RESULT', ok, 'DEFAULT' if h is signal.SIG_DFL else getattr(h, '__module__', h))\n"
           "    scopemeter.disable_system_metrics()\n")


def test_sigterm_handler_only_where_collecting(tmp_path):
    db = tmp_path / "m.db"
    collecting = run(SIGTERM.format(db=db), tmp_path)
    assert "RESULT True scopemeter._front" in collecting.stdout, collecting.stderr
    idle = run(SIGTERM.format(db=db), tmp_path, RANK="1", WORLD_SIZE="2", LOCAL_RANK="1")
    assert "RESULT False DEFAULT" in idle.stdout, idle.stderr


FORKED = """
import os, sys, mlflow, scopemeter
mlflow.set_tracking_uri('sqlite:///{db}')
with mlflow.start_run():
    if {enable}:
        print('PARENT', scopemeter.enable_system_metrics(interval=0.5), flush=True)
    pid = os.fork()
    if pid == 0:  # a DataLoader-like worker
        print('CHILD', scopemeter.enable_system_metrics(interval=0.5), flush=True)
        sys.stdout.flush()
        os._exit(0)
    os.waitpid(pid, 0)
    scopemeter.disable_system_metrics()
"""


def test_a_forked_worker_is_told_why(tmp_path):
    """A forked child (a DataLoader worker) calling enable_system_metrics()
    is told that it was forked and where its metrics are, not 'no active
    MLflow run' (issue 21 #7)."""
    db = tmp_path / "m.db"
    recorded = run(FORKED.format(db=db, enable=True), tmp_path)
    assert "PARENT True" in recorded.stdout and "CHILD False" in recorded.stdout, \
        recorded.stdout + recorded.stderr
    assert "was forked from pid" in recorded.stderr and "which records run" in recorded.stderr, \
        recorded.stderr
    assert "no active MLflow run" not in recorded.stderr, recorded.stderr
    bare = run(FORKED.format(db=db, enable=False), tmp_path)
    assert "CHILD False" in bare.stdout, bare.stdout + bare.stderr
    assert "was forked from pid" in bare.stderr and "stays with that process" in bare.stderr, \
        bare.stderr


# ---- the engine's own lines of enable / disable (issue 33 item 6) ------------------

ENGINE = """
import logging, sys, mlflow, scopemeter
logging.basicConfig(stream=sys.stdout, level=logging.{level},
                    format='APP %(name)s %(levelname)s %(message)s')
mlflow.set_tracking_uri({uri!r})
with mlflow.start_run():
    print('RESULT', scopemeter.enable_system_metrics(), flush=True)
    scopemeter.disable_system_metrics()
"""
# written while enable_system_metrics() / disable_system_metrics() run, in
# the caller's thread: the receipt line at start, the closing line at stop
NOTES = ("collecting ", "logged 1 window ")
# SCOPEMETER_INTERVAL=0x10 is refused with one warning at start (docs/design.md
# §8), and the next source, MLflow's variable, gives the interval
BAD_INTERVAL = {"SCOPEMETER_INTERVAL": "0x10", "MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL": "0.5"}
WARNED = "SCOPEMETER_INTERVAL must be a number of seconds between 0.01 and 86400 s, got '0x10'"


def engine_run(tmp_path, uri, level):
    p = run(ENGINE.format(level=level, uri=uri), tmp_path, **BAD_INTERVAL)
    assert p.returncode == 0, p.stderr
    assert "RESULT True" in p.stdout, p.stdout + p.stderr
    return p


@pytest.mark.parametrize("store", ["rest", "sqlite"])
def test_engine_notes_follow_a_warning_level(tmp_path, mlflow_server, store):
    """logging.basicConfig(level=WARNING) hides the engine's notes of enable
    and disable (they went straight to stderr), and its warning still shows,
    through logging, as a WARNING of the "scopemeter" logger."""
    uri = mlflow_server if store == "rest" else f"sqlite:///{tmp_path}/m.db"
    p = engine_run(tmp_path, uri, "WARNING")
    out = p.stdout + p.stderr
    for note in NOTES:
        assert note not in out, out
    assert f"APP scopemeter WARNING {WARNED}" in p.stdout, out
    assert WARNED not in p.stderr, p.stderr


def test_engine_notes_go_through_logging_at_info(tmp_path, mlflow_server):
    p = engine_run(tmp_path, mlflow_server, "INFO")
    lines = p.stdout.splitlines()
    for note in NOTES:
        assert any(l.startswith(f"APP scopemeter INFO {note}") for l in lines), p.stdout
        assert not any(note in l for l in sm_lines(p.stderr)), p.stderr
    assert f"APP scopemeter WARNING {WARNED}" in p.stdout, p.stdout


def test_engine_lines_on_stderr_while_logging_is_not_configured(tmp_path):
    code = ENGINE.replace("logging.basicConfig(", "dict(").format(
        level="INFO", uri=f"sqlite:///{tmp_path}/m.db")
    p = run(code, tmp_path, **BAD_INTERVAL)
    assert "RESULT True" in p.stdout, p.stdout + p.stderr
    lines = sm_lines(p.stderr)
    for note in NOTES:
        assert any(l.startswith(f"scopemeter: {note}") for l in lines), p.stderr
    assert f"scopemeter: warning: {WARNED}; ignored" in lines, p.stderr


def test_a_logger_disabled_by_someone_elses_config_loses_no_line(tmp_path):
    """logging.config with disable_existing_loggers (fileConfig's and
    dictConfig's default) disables the "scopemeter" logger, created at
    `import scopemeter`, without anyone choosing a level for it: its lines
    then go to stderr, as with logging unconfigured, instead of nowhere
    (docs/python.md)."""
    code = ENGINE.replace("logging.basicConfig(", "dict(").format(
        level="INFO", uri=f"sqlite:///{tmp_path}/m.db").replace(
        "mlflow.set_tracking_uri(",
        "import logging.config\n"
        "logging.config.dictConfig({'version': 1, 'disable_existing_loggers': True,"
        " 'root': {'level': 'WARNING', 'handlers': ['h']},"
        " 'handlers': {'h': {'class': 'logging.StreamHandler', 'stream': 'ext://sys.stdout'}}})\n"
        "assert logging.getLogger('scopemeter').disabled\n"
        "mlflow.set_tracking_uri(", 1)
    p = run(code, tmp_path, **BAD_INTERVAL)
    assert "RESULT True" in p.stdout, p.stdout + p.stderr
    lines = sm_lines(p.stderr)
    for note in NOTES:
        assert any(l.startswith(f"scopemeter: {note}") for l in lines), p.stderr
    assert f"scopemeter: warning: {WARNED}; ignored" in lines, p.stderr


def test_the_clis_lines_are_unchanged(scopemeter_bin, tmp_path):
    """The CLI has no Python: its lines stay on stderr, one write each."""
    p = subprocess.run([scopemeter_bin, "run", "--", "sleep", "1"],
                       env=clean_env(**BAD_INTERVAL), cwd=tmp_path, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = sm_lines(p.stderr)
    assert any(l.startswith("scopemeter: collecting ") for l in lines), p.stderr
    assert any(l.startswith("scopemeter: logged ") for l in lines), p.stderr
    assert f"scopemeter: warning: {WARNED}; ignored" in lines, p.stderr
