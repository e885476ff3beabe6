"""The shape of the Python package (docs/design.md §0), read with ast:

- no function of the report (the package python/scopemeter/_report/, docs/report.md) is
  longer than 90 lines, so each stays one screen a reader can hold: a longer one is split by
  the groups it assembles, as rank_report's pressure and GPU fields were (_pressure,
  _gpu_means).  Counted from the `def` line to the function's last line (its docstring and
  comments included, its decorators not), for every function and method, nested ones too;
- the report imports nothing of the recorder: of the package's own modules only its own,
  _native and _late (the graces both read);
- no module of the front imports _front.py, the one on top.

Each check is a function of source text, held to a broken source by a *_can_fail test."""
import ast
import glob
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.join(ROOT, "python", "scopemeter")
REPORT = os.path.join(PKG, "_report")
BOUND = 90  # lines of one function


def function_lengths(source):
    """[(qualified name, lines)] of every function in source."""
    out = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    out.append((name, child.end_lineno - child.lineno + 1))
                visit(child, name + ".")
            else:
                visit(child, prefix)
    visit(ast.parse(source), "")
    return out


def too_long(source, bound=BOUND):
    return [(name, n) for name, n in function_lengths(source) if n > bound]


def test_no_report_function_is_over_the_bound():
    files = sorted(glob.glob(os.path.join(REPORT, "*.py")))
    assert len(files) >= 9, files  # the glob found the package
    over = {os.path.relpath(f, ROOT): too_long(open(f, encoding="utf-8").read()) for f in files}
    over = {f: v for f, v in over.items() if v}
    assert not over, f"functions over {BOUND} lines (split them by job): {over}"


def test_the_bound_can_fail():
    """A 91-line function (a method, a nested function) is caught; 90 lines are not."""
    def fn(name, lines, indent=""):
        body = "".join(f"{indent}    x = {i}\n" for i in range(lines - 1))
        return f"{indent}def {name}():\n{body}"
    assert function_lengths(fn("f", 91)) == [("f", 91)]
    assert too_long(fn("f", 91)) == [("f", 91)]
    assert too_long(fn("f", 90)) == []
    method = "class C:\n" + fn("m", 91, "    ")
    assert too_long(method) == [("C.m", 91)]
    nested = "def outer():\n" + fn("inner", 91, "    ") + "    return inner\n"
    assert too_long(nested) == [("outer", 93), ("outer.inner", 91)]


# ---- who imports whom ---------------------------------------------------------------

# what the report may take from the package outside _report/: the extension and
# the graces of a late call (_late.py), never the recorder
REPORT_MAY_IMPORT = {"scopemeter._native", "scopemeter._late"}


def package_imports(source, module):
    """The scopemeter.* modules `module` (a dotted name, e.g.
    "scopemeter._report.build") imports, relative imports resolved."""
    package = module.rsplit(".", 1)[0]  # a module's package; __init__'s is itself
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "scopemeter"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target.split(".")[0] != "scopemeter":
                continue
            if node.module:
                out.add(target)
            else:  # from . import fetch: the names are modules
                out |= {f"{target}.{a.name}" for a in node.names}
    return out


def module_name(path):
    rel = os.path.relpath(path, os.path.dirname(PKG))[:-len(".py")]
    return rel.replace(os.sep, ".")


def report_imports_of_the_recorder(files):
    """{module: [what it imports of the package outside the report]}: the
    report's own modules are those of `files` (and the package itself)."""
    own = {"scopemeter._report"} | {module_name(f) for f in files}
    bad = {}
    for f in files:
        name = module_name(f)
        found = {m for m in package_imports(open(f, encoding="utf-8").read(), name)
                 if m not in own and m not in REPORT_MAY_IMPORT}
        if found:
            bad[name] = sorted(found)
    return bad


def test_the_report_imports_nothing_of_the_recorder():
    files = sorted(glob.glob(os.path.join(REPORT, "*.py")))
    assert len(files) >= 9, files
    bad = report_imports_of_the_recorder(files)
    assert not bad, f"the report imports the recorder (allowed: its own modules, " \
        f"{sorted(REPORT_MAY_IMPORT)}): {bad}"


def test_no_module_of_the_front_imports_front():
    front = [f for f in sorted(glob.glob(os.path.join(PKG, "_*.py")))
             if os.path.basename(f) not in ("__init__.py", "__main__.py", "_front.py")]
    assert len(front) >= 7, front
    bad = [module_name(f) for f in front
           if "scopemeter._front" in package_imports(open(f, encoding="utf-8").read(),
                                                     module_name(f))]
    assert not bad, f"modules below _front.py that import it: {bad}"


@pytest.mark.parametrize("line", ["from .._front import ATTACH_GRACE_S",
                                  "from .. import _front",
                                  "import scopemeter._session",
                                  "from scopemeter._lines import _log"])
def test_the_import_check_can_fail(tmp_path, line):
    d = tmp_path / "python" / "scopemeter" / "_report"
    d.mkdir(parents=True)
    f = d / "verdicts.py"
    f.write_text(f"from __future__ import annotations\n{line}\nfrom .model import X\n"
                 "from .. import _native\nfrom .._late import OWN_RUN_GRACE_S\n")
    (d / "model.py").write_text("X = 1\n")
    global PKG
    saved, PKG = PKG, str(tmp_path / "python" / "scopemeter")
    try:
        bad = report_imports_of_the_recorder([str(f), str(d / "model.py")])
    finally:
        PKG = saved
    assert list(bad) == ["scopemeter._report.verdicts"], bad
    assert len(bad["scopemeter._report.verdicts"]) == 1, bad
