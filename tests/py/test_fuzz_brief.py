"""Brief fuzzing of every parser of outside input (docs/hardening.md).

Runs tests/fuzz/run-brief: builds the libFuzzer targets with clang, ASan and
UBSan in build-fuzz and fuzzes each for SM_FUZZ_SECONDS (5 s here unless
set; the script's own default is 20 s).  Any crash, sanitizer report, leak, timeout or OOM fails
the test; the script's table (executions, coverage, corpus) is printed.
"""
import os
import shutil
import subprocess

import pytest

from conftest import ROOT

SCRIPT = os.path.join(ROOT, "tests", "fuzz", "run-brief")
# 5 s a target here (run-brief alone: 20 s): CI's hour holds the portability
# and scale tiers too (8 s: 130 s of CI's 3474 s of pytest, 2026-12-06; 5 s
# cuts about 36 s, two targets at a time); each target's seed corpus runs
# whole first, so a regression on a known input fails at any length.  Longer runs:
# SM_FUZZ_SECONDS=600 tests/fuzz/run-brief
SECONDS = int(os.environ.get("SM_FUZZ_SECONDS", "5"))

# run-brief's own bound below (the build, then every target), with room
pytestmark = [pytest.mark.fuzz, pytest.mark.timeout(660 + 40 * SECONDS)]


def _has_libfuzzer():
    """clang that can link -fsanitize=fuzzer (libclang-rt-*-dev installed)."""
    if shutil.which("clang") is None:
        return False, "clang not installed (scripts/install-deps installs it)"
    p = subprocess.run(
        ["clang", "-fsanitize=fuzzer,address,undefined", "-x", "c", "-", "-o", os.devnull],
        input="int LLVMFuzzerTestOneInput(const char *d, unsigned long n)"
              "{(void)d;(void)n;return 0;}\n",
        capture_output=True, text=True)
    if p.returncode != 0:
        return False, "clang cannot link libFuzzer: " + p.stderr.strip().splitlines()[-1]
    return True, ""


def test_fuzz_brief():
    ok, why = _has_libfuzzer()
    if not ok:
        pytest.skip(why)
    secs = SECONDS
    env = dict(os.environ, SM_FUZZ_SECONDS=str(secs))
    # build (first time) + every target's run, with room
    p = subprocess.run([SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600 + 40 * secs)
    print(p.stdout)
    assert p.returncode == 0, f"run-brief failed:\n{p.stdout}\n{p.stderr}"
    rows = [l.split() for l in p.stdout.splitlines()[1:] if l.startswith("fuzz_")]
    assert rows, p.stdout
    for row in rows:
        assert row[-1] == "ok", row
        assert int(row[1]) > 0, f"{row[0]} executed nothing"
