"""The source map's directions (docs/design.md §0) hold.  The core's folders
are its layers, bottom to top: src/parse/ (pure parsers: libc and their
own header only), src/util/, src/identity/, src/collect/, src/engine/,
src/api/; then src/mlflow/ (the MLflow layer), then the surfaces (cli/,
python/scopemeter/).  A file's layer is its folder's: a source file in no
layer's folder fails, and so does an #include of a header of a higher layer
or a call (naming a function) defined in a higher layer's file; inside one
folder the files' calls make no circle.  The core never includes an MLflow,
libcurl or jansson header; the surfaces include of the core and the MLflow
layer only what docs/internals.md lists as borrowed, and name only the sm__
functions it lists.  Read from the #include lines and the code, so a new
file is checked the day it is added.  The map itself is the one list of
files: every source file is in it, every file it names exists, and no
comment cites a source file that does not exist.  Each check is a function
of a tree, held to a broken tree too (the *_can_fail tests)."""
import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
MLFLOW = {"scopemeter_mlflow.h", "mlflow_rest.h", "rest_private.h", "curl_api.h", "answer.h",
          "deliver.h", "jansson.h"}
LIBC_OK = re.compile(r"^(std[a-z]+|string|strings|errno|limits|math|ctype|inttypes|stddef|"
                     r"stdarg|stdint|stdbool|stdio|stdlib|sys/types)\.h$")

# The layers, bottom to top (docs/design.md §0): the folders of each; a
# file may include and call what its own layer and the ones below define.
LAYERS = (("src/parse/",), ("src/util/",), ("src/identity/",), ("src/collect/",),
          ("src/engine/",), ("src/api/",), ("src/mlflow/",), ("cli/", "python/scopemeter/"))
CORE = LAYERS[:6]
SURFACES = len(LAYERS) - 1
# the public headers: the core's (internal.h includes it) and the MLflow layer's
PUBLIC = {"include/scopemeter.h": 1, "include/scopemeter_mlflow.h": 6}
# where a quoted #include is looked for after the includer's own folder
# (meson.build's inc: include/, src/ and the core's folders)
INC_DIRS = ("include", "src") + tuple(folder.rstrip("/") for (folder,) in CORE)


def includes(path):
    text = open(path, encoding="utf-8").read()
    return [(kind, name) for kind, name in INCLUDE.findall(text)]


def files(pattern, root=ROOT):
    return sorted(glob.glob(os.path.join(root, pattern), recursive=True))


def layer(rel):
    """The index in LAYERS of rel's folder; None outside every layer's."""
    if rel in PUBLIC:
        return PUBLIC[rel]
    for i, folders in enumerate(LAYERS):
        if any(rel.startswith(f) and "/" not in rel[len(f):] for f in folders):
            return i
    return None


def core_files(root=ROOT):
    return [f for (folder,) in CORE for f in files(folder + "*.[ch]", root)]


def test_the_core_does_not_include_mlflow_or_its_libraries():
    core = core_files()
    assert len(core) > 20, core  # the glob found the tree
    bad = [(os.path.relpath(f, ROOT), n) for f in core for _, n in includes(f)
           if os.path.basename(n) in MLFLOW or n.startswith("curl/") or "mlflow/" in n]
    assert not bad, bad


def test_the_core_knows_no_mlflow_setting():
    """A sink's settings are opaque to the core (src/engine/sink.h:
    sm_sink_config carries a settings pointer): the run id, the HTTP headers
    and the bound of the run check belong to the MLflow layer that builds
    them."""
    words = re.compile(r"\b(run_id|headers|check_s)\b")
    bad = [(os.path.relpath(f, ROOT), w) for f in core_files()
           for w in words.findall(open(f, encoding="utf-8").read())]
    assert not bad, bad


def impure_parsers(root):
    """(file, include) for every include of src/parse/ that is neither libc
    nor a header of src/parse/ itself: the parsers are pure."""
    parsers = files("src/parse/*.[ch]", root)
    own = {os.path.basename(f) for f in parsers if f.endswith(".h")}
    return [(os.path.relpath(f, root), n) for f in parsers for kind, n in includes(f)
            if not (n in own or (kind == "<" and LIBC_OK.match(n)))]


def test_parsers_are_pure():
    assert len(files("src/parse/parse_*.c")) >= 3
    assert not impure_parsers(ROOT)


def test_the_mlflow_layer_does_not_include_a_surface():
    rest = files("src/mlflow/*.c") + files("src/mlflow/*.h")
    assert rest
    bad = [(os.path.relpath(f, ROOT), n) for f in rest for _, n in includes(f)
           if n in ("cli.h", "oom_guard.h") or n.startswith("Python")]
    assert not bad, bad


def test_the_rest_clients_private_header_stays_inside_it():
    """rest_private.h is what the REST client's files (rest_*.c) share; every
    other file reaches the client through mlflow_rest.h."""
    users = [os.path.relpath(f, ROOT) for f in files("src/**/*.[ch]") + files("cli/*.[ch]") +
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

SOURCES = ("src/**/*.[ch]", "cli/*.[ch]", "python/scopemeter/*.c",
           "python/scopemeter/*.py", "python/scopemeter/*/*.py", "python/scopemeter/*.pyi")
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
    return sorted({os.path.relpath(f, root) for p in patterns
                   for f in glob.glob(os.path.join(root, p), recursive=True)})


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


# ---- folders, includes and calls across layers ------------------------------

C_SOURCES = ("src/**/*.[ch]", "cli/*.[ch]", "python/scopemeter/*.c")
CODE_ONLY = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
# a definition of a function with external linkage: its name at the start of
# a line (the type before it), the parameters, and the body's brace alone on
# the next line (the tree's style); static ones are private to their file
DEFINITION = re.compile(r"^(?!static\b|typedef\b|extern\b|return\b|#)[A-Za-z_][\w \t*]*?"
                        r"\b([A-Za-z_]\w*)\s*\([^;{}]*?\)\s*\n\{", re.M)
WORD = re.compile(r"\b[A-Za-z_]\w*\b")


def unlayered(root):
    """The C files of src/, cli/ and python/scopemeter/ in no layer's folder
    (src/x.c, src/new/x.c): where a file sits says what it may use."""
    return [f for f in tree_files(root, C_SOURCES) if layer(f) is None]


def test_every_file_is_in_a_layers_folder():
    assert len(tree_files(ROOT, C_SOURCES)) > 60
    assert not unlayered(ROOT), ("a layer's folder, docs/design.md §0", unlayered(ROOT))


def resolve(root, rel, name):
    """The tree's file a quoted #include of rel names, as the compiler finds
    it (rel's own folder, then meson.build's inc); None for another
    project's header (Python.h, jansson.h)."""
    for d in (os.path.dirname(rel),) + INC_DIRS:
        path = os.path.normpath(os.path.join(d, name))
        if os.path.isfile(os.path.join(root, path)):
            return path
    return None


def upward_includes(root):
    """(file, header) for every quoted #include of a higher layer's header."""
    bad = []
    for f in tree_files(root, C_SOURCES):
        for kind, name in includes(os.path.join(root, f)):
            h = resolve(root, f, name) if kind == '"' else None
            if h and layer(f) is not None and layer(h) is not None and layer(h) > layer(f):
                bad.append((f, h))
    return sorted(bad)


def test_no_file_includes_a_higher_layers_header():
    assert not upward_includes(ROOT)


def code_of(root, rel):
    return CODE_ONLY.sub(" ", open(os.path.join(root, rel), encoding="utf-8").read())


def calls_between_files(root):
    """{(file, file it names a function of): [names]}, read from the code
    (comments and strings left out), a function pointer counting as a call.
    The callers are the .c files: a header's declaration names a function
    without using it (src/util/internal.h declares the private functions
    of every core layer; its includes are checked above)."""
    files = tree_files(root, C_SOURCES)
    defined = {}
    for f in files:
        for name in DEFINITION.findall(code_of(root, f)):
            defined.setdefault(name, f)
    edges = {}
    for f in (f for f in files if f.endswith(".c")):
        for word in sorted(set(WORD.findall(code_of(root, f)))):
            g = defined.get(word)
            if g and g != f:
                edges.setdefault((f, g), []).append(word)
    return edges


def upward_calls(root):
    return sorted((f, g, names) for (f, g), names in calls_between_files(root).items()
                  if layer(f) is not None and layer(g) is not None and layer(f) < layer(g))


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
    "docs/design.md": "# d\n\n## 0. Source map\n\n| `src/util/a.c` | a |\n"
                      "| `src/parse/parse_x.c` | x |\n| `src/parse/parse.h` | p |\n"
                      "| `src/mlflow/m.c` | m |\n\n## 1. Next\n\n`src/b.c` is not the map\n",
    "src/util/a.c": "/* a.c: see parse_x.c and tests/c/t.c, the kernel's fs/proc/base.c */\n"
                    '#include "parse.h"\n'
                    "int sm__a(void)\n{\n    return sm__x(1);\n}\n",
    "src/parse/parse.h": "#include <stddef.h>\nint sm__x(int v);\n",
    "src/parse/parse_x.c": '/* parse_x.c */\n#include <string.h>\n#include "parse.h"\n'
                           "int sm__x(int v)\n{\n    return v; /* sm__a( */\n}\n",
    "src/mlflow/m.c": "static int helper(void)\n{\n    return sm__a();\n}\n",
    "tests/c/t.c": "",
}


def test_the_map_checks_can_fail(tmp_path):
    root = _tree(tmp_path, GOOD)
    assert (missing_from_map(root), map_names_nothing(root), dead_citations(root),
            upward_calls(root)) == ([], [], [], [])
    _tree(tmp_path, {"src/util/b.c": "/* b.c: what gone.c did, and src/mlflow/gone.h */\n"})
    assert missing_from_map(root) == ["src/util/b.c"]  # named only after §0
    assert dead_citations(root) == [("src/util/b.c", "gone.c"),
                                    ("src/util/b.c", "src/mlflow/gone.h")]
    os.remove(os.path.join(root, "src/mlflow/m.c"))
    assert map_names_nothing(root) == ["src/mlflow/m.c"]


def test_the_folder_check_can_fail(tmp_path):
    """A file beside the layers' folders, or in a folder that is no layer's."""
    root = _tree(tmp_path, GOOD)
    assert unlayered(root) == []
    _tree(tmp_path, {"src/b.c": "", "src/misc/c.h": "", "src/util/deeper/d.c": ""})
    assert unlayered(root) == ["src/b.c", "src/misc/c.h", "src/util/deeper/d.c"]


def test_the_include_check_can_fail(tmp_path):
    """A parser including the util layer's header, a util file including an
    engine header (the way log.c included sink.h), are found; an include
    downward or of another project's header is not."""
    root = _tree(tmp_path, dict(GOOD, **{
        "src/util/internal.h": '#include "scopemeter.h"\n',
        "include/scopemeter.h": "",
        "src/engine/sink.h": '#include "internal.h"\n',
        "src/engine/e.c": '#include "sink.h"\n#include "parse.h"\n#include "Python.h"\n'}))
    assert upward_includes(root) == [] and impure_parsers(root) == []
    _tree(tmp_path, {"src/parse/parse.h": '#include "internal.h"\n',
                     "src/util/a.c": '#include "sink.h"\n'})
    assert upward_includes(root) == [("src/parse/parse.h", "src/util/internal.h"),
                                     ("src/util/a.c", "src/engine/sink.h")]
    assert impure_parsers(root) == [("src/parse/parse.h", "internal.h")]


def test_the_calls_check_can_fail(tmp_path):
    """A parser calling a util function, the core naming an MLflow one (as a
    pointer too), are found; a name in a comment is not a call."""
    root = _tree(tmp_path, dict(GOOD, **{
        "src/parse/parse_x.c": "int sm__x(int v)\n{\n    return v + sm__a();\n}\n",
        "src/engine/b.c": "static int (*f)(void) = sm__m;\n",
        "src/mlflow/m.c": "int sm__m(void)\n{\n    return 0;\n}\n"}))
    assert upward_calls(root) == [("src/engine/b.c", "src/mlflow/m.c", ["sm__m"]),
                                  ("src/parse/parse_x.c", "src/util/a.c", ["sm__a"])]


# the parts of the NVIDIA collector, one job a file (src/collect/gpu_int.h lists
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


def test_no_layer_has_a_circle_of_calls():
    """The files of each folder stack (docs/design.md §0): in src/mlflow/
    `answer.c` at the bottom, one request, the retry loop over it, the
    calls, the policy, the sinks on top; in src/collect/ the collectors over
    cgroup.c and collectors.c; none calls back into a file that calls it."""
    assert {folder: circles(ROOT, folder) for (folder,) in LAYERS[:7]} == \
        {folder: [] for (folder,) in LAYERS[:7]}


def test_the_nvidia_collector_has_no_circle_of_calls():
    """The parts of the NVIDIA collector stack (src/collect/gpu_int.h): coll_gpu.c
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
        "src/mlflow/d.c": "int sm__d1(void)\n{\n    return 0;\n}\n",
        "src/collect/x.c": "int sm__x1(void)\n{\n    return sm__y1();\n}\n",
        "src/collect/y.c": "int sm__y1(void)\n{\n    return sm__x1();\n}\n"}))
    assert circles(root) == [["src/mlflow/a.c", "src/mlflow/b.c", "src/mlflow/c.c"]]
    assert circles(root, "src/collect/") == [["src/collect/x.c", "src/collect/y.c"]]
    # the GPU parts: the binding calling back up into the collector
    root = _tree(tmp_path, {
        "src/collect/coll_gpu.c": "int sm__g1(void)\n{\n    return sm__q1();\n}\n",
        "src/collect/gpu_query.c": "int sm__q1(void)\n{\n    return sm__n1();\n}\n",
        "src/collect/gpu_nvml.c": "int sm__n1(void)\n{\n    return sm__g1();\n}\n"})
    assert circles(root, GPU_PARTS) == [["src/collect/coll_gpu.c", "src/collect/gpu_nvml.c",
                                         "src/collect/gpu_query.c"]]


# ---- one rule, one file: whose process is this (src/collect/pidmap.c) ---------

# The pid rule's fingerprints in code (comments left out): a walk up the ppid
# chain (a variable set to a stat line's ppid, the walk's next step) and RANK
# read from another process's environ.  Storing a ppid in a table (coll_proc.c's
# scan) is not a walk.
PID_RULE = (re.compile(r"^\s*\*?\w+\s*=\s*[^;=\n]*(?:\.|->)ppid\s*;", re.M),
            re.compile(r'"/proc/%d/environ"|environ_int\s*\([^;]*"RANK"'))


def pid_rule_files(root):
    """The C files that follow a ppid chain or read RANK from an environ."""
    found = []
    for f in tree_files(root, C_SOURCES):
        text = C_COMMENT.sub(" ", open(os.path.join(root, f), encoding="utf-8").read())
        if any(p.search(text) for p in PID_RULE):
            found.append(f)
    return found


def test_whose_process_is_decided_in_one_file():
    """The GPU collectors ask src/collect/pidmap.c whose a process is; a
    second file walking the ppid chain or reading RANK from an environ
    would be the rule written twice (issue 45: gpu_holders.c and
    coll_amdgpu.c each had it)."""
    assert pid_rule_files(ROOT) == ["src/collect/pidmap.c"]


def test_the_pid_rule_check_can_fail(tmp_path):
    walk = ("static int pid_rank(int p)\n{\n    sm_pid_stat st;\n    while (p > 1) {\n"
            "        read_stat(p, &st);\n        p = st.ppid;\n    }\n    return p;\n}\n")
    env = ('static int env_rank(const char *buf, size_t n, int *r)\n{\n'
           '    return sm__environ_int(buf, n, "RANK", r);\n}\n')
    root = _tree(tmp_path, {"src/collect/pidmap.c": walk + env,
                            "src/collect/coll_proc.c": "void f(void)\n{\n"
                            "    s->scan[s->nscan].ppid = st.ppid; /* p = a.ppid; */\n}\n"})
    assert pid_rule_files(root) == ["src/collect/pidmap.c"]
    _tree(tmp_path, {"src/collect/coll_amdgpu.c": walk, "src/collect/gpu_holders.c": env})
    assert pid_rule_files(root) == ["src/collect/coll_amdgpu.c", "src/collect/gpu_holders.c",
                                    "src/collect/pidmap.c"]


# ---- what the surfaces borrow (docs/internals.md) ------------------------------

BORROWERS = ("cli/*.[ch]", "python/scopemeter/*.c")
SM_INTERNAL = re.compile(r"\bsm__\w+")


def borrow_list(root):
    """The headers (`src/...h`) and sm__ names docs/internals.md's section
    "What the surfaces borrow" lists."""
    text = open(os.path.join(root, "docs", "internals.md"), encoding="utf-8").read()
    start = text.index("\n## What the surfaces borrow")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end > 0 else len(text)]
    return (set(re.findall(r"`(src/[\w/.-]+\.h)`", section)),
            set(re.findall(r"`(sm__\w+)`", section)))


def unlisted_borrowing(root):
    """(file, header or name) for every header of src/ a surface includes,
    and every sm__ name of a src/ header it uses, that the list lacks."""
    headers, names = borrow_list(root)
    declared = {w for f in tree_files(root, ("src/**/*.h",))
                for w in SM_INTERNAL.findall(code_of(root, f))}
    bad = []
    for f in tree_files(root, BORROWERS):
        for kind, name in includes(os.path.join(root, f)):
            h = resolve(root, f, name) if kind == '"' else None
            if h and h.startswith("src/") and h not in headers:
                bad.append((f, h))
        bad += [(f, w) for w in sorted(set(SM_INTERNAL.findall(code_of(root, f))))
                if w in declared and w not in names]
    return sorted(bad)


def test_the_surfaces_borrow_only_what_is_listed():
    headers, names = borrow_list(ROOT)
    assert len(headers) >= 5 and len(names) >= 20, (headers, names)  # the list was read
    assert not unlisted_borrowing(ROOT), ("list it in docs/internals.md, or use the API",
                                          unlisted_borrowing(ROOT))


def test_the_borrow_check_can_fail(tmp_path):
    root = _tree(tmp_path, dict(GOOD, **{
        "docs/internals.md": "# i\n\n## What the surfaces borrow\n\n"
                             "| `src/util/number.h` | `sm__num_parse` |\n\n## Next\n\n"
                             "`src/util/internal.h` `sm__zalloc`\n",
        "src/util/number.h": "int sm__num_parse(const char *s);\n",
        "src/util/internal.h": "void *sm__zalloc(unsigned long n);\n",
        "cli/cli.h": "int sm__cli_own(void);\n",
        "cli/x.c": '#include "cli.h"\n#include "number.h"\n#include <stdio.h>\n'
                   "int sm__cli_own(void)\n{\n    return sm__num_parse(\"1\");\n}\n"}))
    assert unlisted_borrowing(root) == []
    _tree(tmp_path, {"python/scopemeter/_native.c":
                     '#include "internal.h"\n/* sm__zfree( */\n'
                     "static void *f(void)\n{\n    return sm__zalloc(1);\n}\n"})
    assert unlisted_borrowing(root) == [("python/scopemeter/_native.c", "sm__zalloc"),
                                        ("python/scopemeter/_native.c", "src/util/internal.h")]


# ---- one rule once: the wait-status map (issue 45) -----------------------------

RUN_END = "src/mlflow/run_end.c"
COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
WAIT_SIGNAL = re.compile(r"\bW(?:IFSIGNALED|TERMSIG)\b")
RUN_STATUS = re.compile(r'"(?:FINISHED|FAILED|KILLED)"')


def wait_status_maps(root):
    """The functions outside src/mlflow/run_end.c that read a signal from a
    wait status and name a run status: a second copy of the rule of how a
    recording ends (run_end.h), which would drift from the first.  A
    function is the text between two braces alone at the start of a line
    (the tree's style), comments left out, strings kept."""
    bad = []
    for f in tree_files(root, C_SOURCES):
        if f == RUN_END:
            continue
        text = COMMENTS.sub(" ", open(os.path.join(root, f), encoding="utf-8").read())
        for body in re.split(r"\n}\n", text):
            if WAIT_SIGNAL.search(body) and RUN_STATUS.search(body):
                name = re.findall(r"^\w[^\n(]*?(\w+)\(", body, re.M)
                bad.append((f, name[-1] if name else "?"))
    return sorted(bad)


def test_the_wait_status_map_is_written_once():
    assert os.path.exists(os.path.join(ROOT, RUN_END))
    assert not wait_status_maps(ROOT), ("ask sm__run_end_judge (src/mlflow/run_end.h)",
                                        wait_status_maps(ROOT))


def test_the_wait_status_check_can_fail(tmp_path):
    root = _tree(tmp_path, dict(GOOD, **{
        RUN_END: "void sm__run_end_judge(int ws)\n{\n    if (WIFSIGNALED(ws)) f(\"KILLED\");\n}\n",
        "cli/r.c": "/* WTERMSIG \"KILLED\" in a comment */\nstatic int code(int ws)\n{\n"
                   "    return WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : 0;\n}\n"}))
    assert wait_status_maps(root) == []
    _tree(tmp_path, {"cli/c.c": "static const char *judge(int ws)\n{\n"
                                "    if (WIFSIGNALED(ws) && WTERMSIG(ws) == 9)\n"
                                "        return \"KILLED\";\n    return \"FAILED\";\n}\n"})
    assert wait_status_maps(root) == [("cli/c.c", "judge")]
