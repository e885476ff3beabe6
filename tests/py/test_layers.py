"""The source map's directions (docs/design.md §0) hold: the core (src/*.c,
*.h) and the parsers (src/parse_*.c) never include an MLflow, libcurl or
jansson header; the parsers include nothing but libc and parse.h (they are
pure: no I/O); the MLflow layer (src/mlflow/) never includes a surface's
header (cli/, python/).  Read from the #include lines, so a new file is
checked the day it is added — and from the calls: a file never names a
function defined in a higher layer's file.  The map itself is the one
list of files: every source file is in it, every file it names exists, and
no comment cites a source file that does not exist.  Each check is a
function of a tree, held to a broken tree too (the *_can_fail tests)."""
import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
MLFLOW = {"scopemeter_mlflow.h", "mlflow_rest.h", "rest_private.h", "curl_api.h", "answer.h",
          "deliver.h", "jansson.h"}
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


# ---- the one source map (docs/design.md §0) -----------------------------------

SOURCES = ("src/*.[ch]", "src/mlflow/*.[ch]", "cli/*.[ch]", "python/scopemeter/*.c",
           "python/scopemeter/*.py", "python/scopemeter/*.pyi")
MAP_ENTRY = re.compile(r"`((?:src|cli|python)/[\w./-]+\.(?:c|h|py|pyi))`")
CITE = re.compile(r"(?<![\w./*<-])((?:[\w.-]+/)*[\w-]+\.(?:c|h|py|pyi))(?![\w/])")
C_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
PY_COMMENT = re.compile(r'#[^\n]*|"""(?:.|\n)*?"""')
# top-level folders of this tree: a cited path starting elsewhere is another
# project's (the kernel's fs/proc/base.c, MLflow's mlflow/utils/...)
OURS = ("src", "cli", "python", "tests", "include", "docs", "scripts", "bench", "examples")
# files of other projects cited by a bare name or one of our folder names
EXTERNAL = {
    "curl.h",     # libcurl's header (curl_api.h)
    "src/utf.c",  # jansson's UTF-8 rule (body.c)
    "mlflow.py",  # a user's module that would shadow MLflow (cmd_report.c, __main__.py)
    "json.py",    # likewise the standard library's (__main__.py)
}


def tree_files(root, patterns=SOURCES):
    return sorted(os.path.relpath(f, root) for p in patterns
                  for f in glob.glob(os.path.join(root, p)))


def source_map(root):
    """The files docs/design.md §0 names (its section up to the next one)."""
    text = open(os.path.join(root, "docs", "design.md"), encoding="utf-8").read()
    start = text.index("\n## 0.")
    end = text.find("\n## ", start + 1)
    return set(MAP_ENTRY.findall(text[start:end if end > 0 else len(text)]))


def missing_from_map(root):
    return [f for f in tree_files(root) if f not in source_map(root)]


def map_names_nothing(root):
    return sorted(f for f in source_map(root) if not os.path.exists(os.path.join(root, f)))


def dead_citations(root):
    """(file, cited name) for every comment that cites a source file this
    tree does not have: a path under one of our folders that is not there,
    or a bare name no file of the tree carries."""
    everything = [os.path.relpath(os.path.join(d, n), root)
                  for d, _, names in os.walk(root) if "/." not in d and "/build" not in d
                  for n in names]
    basenames = {os.path.basename(f) for f in everything}
    bad = []
    for f in tree_files(root):
        text = open(os.path.join(root, f), encoding="utf-8").read()
        comments = (PY_COMMENT if f.endswith((".py", ".pyi")) else C_COMMENT).findall(text)
        for name in sorted({n for c in comments for n in CITE.findall(c)}):
            if name in EXTERNAL:
                continue
            if "/" in name:
                if name.split("/")[0] not in OURS:
                    continue
                ok = any(e == name or e.endswith("/" + name) for e in everything)
            else:
                ok = name in basenames
            if not ok:
                bad.append((f, name))
    return bad


def test_every_source_file_is_in_the_map():
    files = tree_files(ROOT)
    assert len(files) > 50, files  # the globs found the tree
    assert not missing_from_map(ROOT), ("add these to docs/design.md §0's table of files",
                                        missing_from_map(ROOT))
    assert not map_names_nothing(ROOT), map_names_nothing(ROOT)


def test_comments_cite_files_that_exist():
    assert not dead_citations(ROOT)


# ---- calls across layers ---------------------------------------------------------

C_SOURCES = ("src/*.[ch]", "src/mlflow/*.[ch]", "cli/*.[ch]", "python/scopemeter/*.c")
CODE_ONLY = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
# a definition of a function with external linkage: its name at the start of
# a line (the type before it), the parameters, and the body's brace alone on
# the next line (the tree's style); static ones are private to their file
DEFINITION = re.compile(r"^(?!static\b|typedef\b|extern\b|return\b|#)[A-Za-z_][\w \t*]*?"
                        r"\b([A-Za-z_]\w*)\s*\([^;{}]*?\)\s*\n\{", re.M)
WORD = re.compile(r"\b[A-Za-z_]\w*\b")


def layer(rel):
    """0 parsers, 1 core, 2 MLflow, 3 surfaces (docs/design.md §0)."""
    if re.match(r"src/parse[_.]", rel):
        return 0
    if re.match(r"src/[^/]+$", rel):
        return 1
    if rel.startswith("src/mlflow/"):
        return 2
    return 3


def code_of(root, rel):
    return CODE_ONLY.sub(" ", open(os.path.join(root, rel), encoding="utf-8").read())


def calls_between_files(root):
    """{(file, file it names a function of): [names]}, read from the code
    (comments and strings left out), a function pointer counting as a call."""
    files = tree_files(root, C_SOURCES)
    defined = {}
    for f in files:
        for name in DEFINITION.findall(code_of(root, f)):
            defined.setdefault(name, f)
    edges = {}
    for f in files:
        for word in sorted(set(WORD.findall(code_of(root, f)))):
            g = defined.get(word)
            if g and g != f:
                edges.setdefault((f, g), []).append(word)
    return edges


def upward_calls(root):
    return sorted((f, g, names) for (f, g), names in calls_between_files(root).items()
                  if layer(f) < layer(g))


def test_no_file_calls_into_a_higher_layer():
    edges = calls_between_files(ROOT)
    assert len(edges) > 100, len(edges)  # the definitions were found
    assert not upward_calls(ROOT)


def _tree(tmp_path, files):
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return str(tmp_path)


GOOD = {
    "docs/design.md": "# d\n\n## 0. Source map\n\n| `src/a.c` | a |\n| `src/parse_x.c` | x |\n"
                      "| `src/mlflow/m.c` | m |\n\n## 1. Next\n\n`src/b.c` is not the map\n",
    "src/a.c": "/* a.c: see parse_x.c and tests/c/t.c, the kernel's fs/proc/base.c */\n"
               "int sm__a(void)\n{\n    return sm__x(1);\n}\n",
    "src/parse_x.c": "/* parse_x.c */\nint sm__x(int v)\n{\n    return v; /* sm__a( */\n}\n",
    "src/mlflow/m.c": "static int helper(void)\n{\n    return sm__a();\n}\n",
    "tests/c/t.c": "",
}


def test_the_map_checks_can_fail(tmp_path):
    root = _tree(tmp_path, GOOD)
    assert (missing_from_map(root), map_names_nothing(root), dead_citations(root),
            upward_calls(root)) == ([], [], [], [])
    _tree(tmp_path, {"src/b.c": "/* b.c: what gone.c did, and src/mlflow/gone.h */\n"})
    assert missing_from_map(root) == ["src/b.c"]  # named only after §0
    assert dead_citations(root) == [("src/b.c", "gone.c"), ("src/b.c", "src/mlflow/gone.h")]
    os.remove(os.path.join(root, "src/mlflow/m.c"))
    assert map_names_nothing(root) == ["src/mlflow/m.c"]


def test_the_calls_check_can_fail(tmp_path):
    """A parser calling a core function, the core naming an MLflow one (as a
    pointer too), are found; a name in a comment is not a call."""
    root = _tree(tmp_path, dict(GOOD, **{
        "src/parse_x.c": "int sm__x(int v)\n{\n    return v + sm__a();\n}\n",
        "src/b.c": "static int (*f)(void) = sm__m;\n",
        "src/mlflow/m.c": "int sm__m(void)\n{\n    return 0;\n}\n"}))
    assert upward_calls(root) == [("src/b.c", "src/mlflow/m.c", ["sm__m"]),
                                  ("src/parse_x.c", "src/a.c", ["sm__a"])]


# the parts of the NVIDIA collector, one job a file (src/gpu_int.h lists
# them), wherever in src/ they are kept
GPU_PARTS = re.compile(r"src/(?:[^/]+/)*(?:coll_gpu|gpu_\w+)\.c$")


def circles(root, among="src/mlflow/"):
    """The circles of calls between the .c files among a folder (a prefix)
    or a pattern's files: each a sorted list of files that reach one another
    (a strongly connected set)."""
    inside = among.match if hasattr(among, "match") else (lambda f: f.startswith(among))
    graph = {}
    for (f, g) in calls_between_files(root):
        if inside(f) and inside(g) and f.endswith(".c"):
            graph.setdefault(f, set()).add(g)

    def reach(a):
        seen, todo = set(), [a]
        while todo:
            for n in graph.get(todo.pop(), ()):
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        return seen

    found = []
    for f in sorted(graph):
        ring = sorted({f} | {g for g in reach(f) if f in reach(g)})
        if len(ring) > 1 and ring not in found:
            found.append(ring)
    return found


def test_the_mlflow_layer_has_no_circle_of_calls():
    """The files of src/mlflow/ stack (docs/design.md §0): answer.c at the
    bottom, one request, the retry loop over it, the calls, the policy, the
    sinks on top; none calls back into a file that calls it."""
    assert not circles(ROOT)


def test_the_nvidia_collector_has_no_circle_of_calls():
    """The parts of the NVIDIA collector stack (src/gpu_int.h): coll_gpu.c
    on top, the tags (gpu_events.c) and a sample's queries (gpu_query.c),
    who holds the memory (gpu_holders.c) and which GPUs (gpu_select.c), the
    NVML binding (gpu_nvml.c) at the bottom; none calls back into a file
    that calls it."""
    parts = [f for f in tree_files(ROOT, C_SOURCES) if GPU_PARTS.match(f)]
    assert len(parts) >= 6, parts  # the split is there
    calls = {(f, g) for (f, g) in calls_between_files(ROOT)
             if GPU_PARTS.match(f) and GPU_PARTS.match(g)}
    assert len(calls) >= 8, sorted(calls)  # the parts call one another
    assert not circles(ROOT, GPU_PARTS)


def test_the_circle_check_can_fail(tmp_path):
    root = _tree(tmp_path, dict(GOOD, **{
        "src/mlflow/a.c": "int sm__a1(void)\n{\n    return sm__b1();\n}\n",
        "src/mlflow/b.c": "int sm__b1(void)\n{\n    return sm__c1();\n}\n",
        "src/mlflow/c.c": "int sm__c1(void)\n{\n    return sm__a1() + sm__d1();\n}\n",
        "src/mlflow/d.c": "int sm__d1(void)\n{\n    return 0;\n}\n"}))
    assert circles(root) == [["src/mlflow/a.c", "src/mlflow/b.c", "src/mlflow/c.c"]]
    # the GPU parts: the binding calling back up into the collector
    root = _tree(tmp_path, {
        "src/coll_gpu.c": "int sm__g1(void)\n{\n    return sm__q1();\n}\n",
        "src/gpu_query.c": "int sm__q1(void)\n{\n    return sm__n1();\n}\n",
        "src/gpu_nvml.c": "int sm__n1(void)\n{\n    return sm__g1();\n}\n"})
    assert circles(root, GPU_PARTS) == [["src/coll_gpu.c", "src/gpu_nvml.c", "src/gpu_query.c"]]
    assert GPU_PARTS.match("src/collect/gpu_query.c")  # kept in a folder of src/ too
