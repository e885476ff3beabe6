"""The source map's directions (docs/design.md §0) hold: the core (src/*.c,
*.h) and the parsers (src/parse_*.c) never include an MLflow, libcurl or
jansson header; the parsers include nothing but libc and parse.h (they are
pure: no I/O); the MLflow layer (src/mlflow/) never includes a surface's
header (cli/, python/).  Read from the #include lines, so a new file is
checked the day it is added."""
import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
MLFLOW = {"scopemeter_mlflow.h", "mlflow_rest.h", "rest_private.h", "curl_api.h", "jansson.h"}
LIBC_OK = re.compile(r"^(std[a-z]+|string|strings|errno|limits|math|ctype|inttypes|stddef|"
                     r"stdarg|stdint|stdbool|stdio|stdlib)\.h$")


def includes(path):
    text = open(path, encoding="utf-8").read()
    return [(kind, name) for kind, name in INCLUDE.findall(text)]


def files(pattern):
    return sorted(glob.glob(os.path.join(ROOT, pattern)))


def test_the_core_does_not_include_mlflow_or_its_libraries():
    core = [f for f in files("src/*.c") + files("src/*.h")]
    assert len(core) > 20, core  # the glob found the tree
    bad = [(os.path.relpath(f, ROOT), n) for f in core for _, n in includes(f)
           if os.path.basename(n) in MLFLOW or n.startswith("curl/") or "mlflow/" in n]
    assert not bad, bad


def test_the_core_knows_no_mlflow_setting():
    """A sink's settings are opaque to the core (src/sink.h: sm_sink_config
    carries a settings pointer): the run id, the HTTP headers and the bound
    of the run check belong to the MLflow layer that builds them."""
    core = files("src/*.c") + files("src/*.h")
    words = re.compile(r"\b(run_id|headers|check_s)\b")
    bad = [(os.path.relpath(f, ROOT), w) for f in core
           for w in words.findall(open(f, encoding="utf-8").read())]
    assert not bad, bad


def test_parsers_are_pure():
    parsers = files("src/parse_*.c")
    assert len(parsers) >= 3, parsers
    bad = [(os.path.relpath(f, ROOT), n) for f in parsers for kind, n in includes(f)
           if not (n == "parse.h" or (kind == "<" and LIBC_OK.match(n)))]
    assert not bad, bad
    # parse.h itself: libc and the internal header's types only
    bad = [n for kind, n in includes(os.path.join(ROOT, "src", "parse.h"))
           if not (n == "internal.h" or (kind == "<" and LIBC_OK.match(n)))]
    assert not bad, bad


def test_the_mlflow_layer_does_not_include_a_surface():
    rest = files("src/mlflow/*.c") + files("src/mlflow/*.h")
    assert rest
    bad = [(os.path.relpath(f, ROOT), n) for f in rest for _, n in includes(f)
           if n in ("cli.h", "oom_guard.h") or n.startswith("Python")]
    assert not bad, bad


def test_the_rest_clients_private_header_stays_inside_it():
    """rest_private.h is what the REST client's files (rest_*.c) share; every
    other file reaches the client through mlflow_rest.h."""
    users = [os.path.relpath(f, ROOT) for f in files("src/*.[ch]") + files("src/*/*.[ch]") + files("cli/*.[ch]") +
             files("python/scopemeter/*.c") + files("tests/c/*.c")
             if "rest_private.h" in [n for _, n in includes(f)]]
    assert users, "no file includes rest_private.h: the glob or the header moved"
    bad = [f for f in users if not os.path.basename(f).startswith("rest_")]
    assert not bad, bad


def test_the_check_can_fail(tmp_path):
    """The pattern sees an include written the ways C allows."""
    f = tmp_path / "x.c"
    f.write_text('#include <stdio.h>\n  # include "scopemeter_mlflow.h"\n#include <curl/curl.h>\n')
    names = [n for _, n in includes(str(f))]
    assert names == ["stdio.h", "scopemeter_mlflow.h", "curl/curl.h"]
