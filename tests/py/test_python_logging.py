"""The Python front's lines go through logging.getLogger("scopemeter")
(docs/python.md): on stderr as "scopemeter: ..." while the application has
not configured logging, through the application's handlers once it has; the
SIGTERM handler is installed only in a process that collects."""
import subprocess
import sys

from pyfront_util import python_env

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
