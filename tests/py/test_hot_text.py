"""The functions a recording runs lie together in the text of what ships
(meson.build: gold's --section-ordering-file with the lists scripts/hot-text
makes), so the kernel's fault-around (64 kB of page cache mapped around each
page fault) maps them and not the code between them: what keeps the CLI over
https at 5 MB and the front at 1 MB (bench/README.md "The CLI over https",
"The front at 1 MB").

A layout check, not a timing: the smallest stretch of text that holds 3/4 of
the listed functions' bytes holds little else (~1.0x in order of use; 1.3x
(the CLI, the extension) to 2.1x (the TLS modules) in link order).  3/4, not
all: a function the list names may be run on one path only (one kind of
certificate, one surface).  Linked without gold (no ld.gold) the order is not
made: skipped, and said.  Not seen here: a stale list (scripts/hot-text).
"""
import os
import re
import subprocess

import pytest

pytestmark = pytest.mark.timeout(60)

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
# object (relative to the build) -> its list, and how many of its functions
# the list must name at least (scripts/hot-text found the recording's code)
OBJECTS = {
    "cli/scopemeter-https.so": ("src/link/tls-hot.txt", 1000),
    "python/scopemeter-https-sys.so": ("src/link/tls-hot.txt", 300),  # libcurl only
    "cli/scopemeter": ("src/link/hot.txt", 250),
    "python/_native.abi3.so": ("src/link/hot.txt", 250),
}
CLONE = re.compile(r"\.(localalias|part\.\d+|constprop\.\d+|isra\.\d+)$")


def hot_names(listing):
    with open(os.path.join(ROOT, listing)) as f:
        return {ln.strip()[len(".text."):] for ln in f if ln.startswith(".text.")}


def tightest(at, share):
    """Bytes of the smallest stretch of text holding `share` of the bytes of
    the functions at `at` ((address, size), sorted)."""
    need = share * sum(s for _, s in at)
    best, j, acc = None, 0, 0
    for i in range(len(at)):
        while j < len(at) and acc < need:
            acc += at[j][1]
            j += 1
        if acc < need:
            break
        span = at[j - 1][0] + at[j - 1][1] - at[i][0]
        best = span if best is None else min(best, span)
        acc -= at[i][1]
    return best, need


@pytest.mark.parametrize("obj", sorted(OBJECTS))
def test_the_functions_a_recording_runs_are_linked_together(scopemeter_bin, obj):
    build = os.environ.get("SCOPEMETER_BUILD") or os.path.dirname(os.path.dirname(scopemeter_bin))
    listing, least = OBJECTS[obj]
    hot = hot_names(listing)
    path = os.path.join(build, obj)
    if not os.path.exists(path):
        pytest.skip(f"{path} not built (no bundled dependencies, or no Python headers)")
    notes = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True).stdout
    if ".note.gnu.gold-version" not in notes:
        pytest.skip(f"{obj} was not linked by gold: its text is in link order")
    syms = subprocess.run(["nm", "-S", "--defined-only", path], capture_output=True,
                          text=True, check=True).stdout
    at = sorted((int(a, 16), int(s, 16)) for a, s, t, n in
                (ln.split() for ln in syms.splitlines() if len(ln.split()) == 4)
                if t in "tT" and (n in hot or CLONE.sub("", n) in hot))
    assert len(at) > least, (obj, len(at))
    best, need = tightest(at, 0.75)
    assert best < 1.15 * need, (obj, best, need)


def test_the_cli_does_not_load_libm(scopemeter_bin):
    """Loading libm alone made ~300-390 kB of it resident in the CLI (its
    IFUNC resolvers run at load; bench/README.md table 5): no function of
    the CLI's may need it (coll_container.c's tenths(), number.h's
    sm__floor, where -Os would call floor).  A training process has libm
    already (Python): only the CLI is checked."""
    dyn = subprocess.run(["readelf", "-dW", scopemeter_bin], capture_output=True, text=True,
                         check=True).stdout
    needed = [ln.split("[")[1].rstrip("]") for ln in dyn.splitlines() if "(NEEDED)" in ln]
    assert needed and not [n for n in needed if n.startswith("libm.")], needed
