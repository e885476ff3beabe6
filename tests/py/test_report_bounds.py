"""No function of the report (the package python/scopemeter/_report/, docs/report.md) is
longer than 90 lines, so each stays one screen a reader can hold: a longer one is split by the
groups it assembles, as rank_report's pressure and GPU fields were (_pressure, _gpu_means).

Counted with ast, from the `def` line to the function's last line (its docstring and comments
included, its decorators not), for every function and method, nested ones too.  The check is a
function of source text, held to a 91-line function by test_the_bound_can_fail."""
import ast
import glob
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPORT = os.path.join(ROOT, "python", "scopemeter", "_report")
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
