"""The package's type information (PEP 561) and the type checks of its public
functions (docs/python.md, "Argument types").

- mypy --strict is clean on python/scopemeter, the stub of the C extension
  (_native.pyi) included; the configuration is pyproject.toml's [tool.mypy].
- The stub names every public name the built extension has, so it cannot
  drift from _native.c's tables.
- Every public function raises TypeError for an argument of the wrong type
  (a str interval, a bool where a number is expected); a value out of range
  keeps its own behaviour (enable: one line and False; plan: ValueError).
  Each runs in a subprocess against this tree's package (pyfront_util's
  staged package with SCOPEMETER_BUILD), never a stale installed one.
"""
import ast
import os
import subprocess
import sys

import pytest

from pyfront_util import python_env, staged_package

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.join(ROOT, "python", "scopemeter")


@pytest.mark.timeout(600)
def test_mypy_strict_clean():
    """mypy --strict on the package with its stub: exit 0.  A cold cache
    reads MLflow's sources too (about a minute on a loaded machine)."""
    pytest.importorskip("mypy")
    p = subprocess.run([sys.executable, "-m", "mypy", "--strict", "python/scopemeter"],
                       cwd=ROOT, capture_output=True, text=True, timeout=540)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Success: no issues found" in p.stdout, p.stdout


def _stub_names():
    """The top-level names the stub declares (functions, classes, constants)."""
    tree = ast.parse(open(os.path.join(PKG, "_native.pyi")).read())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names, tree


def _native_names():
    """dir() of the built extension and of its Monitor type, in a subprocess
    (the staged package of this tree when SCOPEMETER_BUILD is set)."""
    code = ("import scopemeter._native as n\n"
            "print(' '.join(x for x in dir(n) if not x.startswith('_')))\n"
            "print(' '.join(x for x in dir(n.Monitor) if not x.startswith('_')))\n")
    p = subprocess.run([sys.executable, "-c", code], env=python_env(), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    module, monitor = p.stdout.splitlines()
    return set(module.split()), set(monitor.split())


def test_stub_covers_the_extension():
    """Every public name of _native (functions, constants, Monitor and its
    methods and properties) is in _native.pyi, and the stub names nothing the
    extension lacks (its own helper types aside)."""
    module, monitor = _native_names()
    names, tree = _stub_names()
    assert module <= names, f"missing from _native.pyi: {sorted(module - names)}"
    helpers = {"Record", "PlanResult", "Identity", "SeriesParts"}  # types of the stub, not the module
    assert names - helpers <= module, f"not in the extension: {sorted(names - helpers - module)}"
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Monitor")
    members = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)} - {"__init__"}
    assert members == monitor, (sorted(members ^ monitor))


def test_package_ships_the_type_information():
    """python/meson.build installs py.typed and the stub with the .py files,
    so the wheel carries them; and every module of the package (a module the
    list forgets is missing from `pip install .` and the wheels only: the
    suite's staged package has it), the report's package's (_report/) too."""
    assert os.path.exists(os.path.join(PKG, "py.typed"))
    build = open(os.path.join(ROOT, "python", "meson.build")).read()
    for name in ("'scopemeter/py.typed'", "'scopemeter/_native.pyi'"):
        assert name in build, name
    modules = sorted(os.path.relpath(os.path.join(d, f), PKG) for d, _, names in os.walk(PKG)
                     for f in names if f.endswith(".py"))
    assert "_report/__init__.py" in modules, modules  # the walk sees the subpackage
    missing = [f for f in modules if f"'scopemeter/{f}'" not in build]
    assert not missing, f"not installed by python/meson.build: {missing}"


def _run(code):
    if staged_package() is None and os.environ.get("SCOPEMETER_BUILD"):
        pytest.fail("SCOPEMETER_BUILD is set but holds no built extension")
    p = subprocess.run([sys.executable, "-c", code], env=python_env(), capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return p


def _raises(call, exc):
    """A line of a subprocess script: `call` raises exc (by name)."""
    return (f"try:\n    {call}\nexcept {exc} as e:\n    print('OK', {call!r}, '->', e)\n"
            f"else:\n    raise SystemExit('no {exc}: ' + {call!r})\n")


def test_enable_wrong_type_is_type_error():
    """enable_system_metrics(): a wrong type raises TypeError (before any
    MLflow import or run lookup); a value out of range is one line and False,
    as before."""
    calls = ['enable_system_metrics(interval="10")', "enable_system_metrics(interval=True)",
             'enable_system_metrics(samples="2")', "enable_system_metrics(samples=[1])",
             'enable_system_metrics(all_workers="yes")', "enable_system_metrics(all_workers=None)"]
    code = "from scopemeter import enable_system_metrics\n" + "".join(
        _raises(c, "TypeError") for c in calls)
    code += ("print('RANGE', enable_system_metrics(interval=0))\n"
             "print('FRACTION', enable_system_metrics(samples=2.5))\n")
    p = _run(code)
    assert p.stdout.count("OK ") == len(calls), p.stdout
    assert "interval must be a number or None, not str" in p.stdout, p.stdout
    assert "all_workers must be True or False, not str" in p.stdout, p.stdout
    assert "RANGE False" in p.stdout and "FRACTION False" in p.stdout, p.stdout
    assert "enable_system_metrics(): interval must be between 0.01 and 86400 s" in p.stderr, \
        p.stderr
    assert "enable_system_metrics(): samples must be a whole number" in p.stderr, p.stderr


def test_disable_wrong_type_is_type_error():
    """disable_system_metrics(): a timeout that is not a number raises
    TypeError; None or one not above 0 is the default, as before."""
    calls = ['disable_system_metrics("5")', "disable_system_metrics(True)",
             "disable_system_metrics(timeout=[1])"]
    code = "from scopemeter import disable_system_metrics\n" + "".join(
        _raises(c, "TypeError") for c in calls)
    code += ("print('DEFAULTS', disable_system_metrics(None), disable_system_metrics(-1),"
             " disable_system_metrics(0.5))\n")
    p = _run(code)
    assert p.stdout.count("OK ") == len(calls), p.stdout
    assert "DEFAULTS None None None" in p.stdout, p.stdout


def test_plan_wrong_type_is_type_error():
    """plan(): a wrong type raises TypeError; an impossible value stays a
    ValueError with the CLI's words (test_plan.py), a whole float is a whole
    number."""
    calls = ['plan(workers="8")', "plan(workers=True)", "plan(interval=True)",
             'plan(interval="10")', "plan(nodes=[2])", 'plan(all_workers="yes")',
             "plan(container_limits=None)"]
    code = "from scopemeter import plan\n" + "".join(_raises(c, "TypeError") for c in calls)
    code += _raises("plan(workers=8.5)", "ValueError") + _raises("plan(workers=0)", "ValueError")
    code += ("print('WHOLE', plan(workers=8.0, all_workers=1) == "
             "plan(workers=8, all_workers=True))\n")
    p = _run(code)
    assert p.stdout.count("OK ") == len(calls) + 2, p.stdout
    assert "plan(): workers must be a whole number or None, not str" in p.stdout, p.stdout
    assert "WHOLE True" in p.stdout, p.stdout


def test_report_wrong_type_is_type_error(tmp_path):
    """report(): run_id and tracking_uri a str or None, plot a path or a
    file; anything else raises TypeError before any store is opened."""
    calls = ["report(run_id=123)", "report(tracking_uri=5)", "report(plot=3)",
             "report(run_id=b'abc')"]
    code = "import scopemeter\nreport = scopemeter.report\n" + "".join(
        _raises(c, "TypeError") for c in calls)
    # a missing store is still the ReportError it was (no store created)
    store = f"sqlite:///{tmp_path}/missing.db"
    code += _raises(f"report(run_id='0' * 32, tracking_uri={store!r})", "scopemeter.ReportError")
    p = _run(code)
    assert p.stdout.count("OK ") == len(calls) + 1, p.stdout
    assert "report(): run_id must be a str or None, not int" in p.stdout, p.stdout
    assert not (tmp_path / "missing.db").exists()
