"""`scopemeter run` is the subreaper of CMD's tree (docs/cli.md, Signals;
docs/design.md §9), issue 33 item 2, through the CLI with --jsonl:

- CMD's child starts 4 grandchildren that burn CPU and exits: the orphans are
  reparented to scopemeter, not to init, so process_count and
  process_cpu_utilization_percentage see them; once they end they are reaped
  (the count comes back down while CMD still runs); scopemeter exits with
  CMD's own status;
- an orphan that outlives CMD is left running: scopemeter exits when CMD does
  and does not signal it.
"""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import clean_env

BURN = """
    import os, sys, time
    d = sys.argv[1]
    if os.fork() == 0:                      # the child: 4 grandchildren, then it exits
        for _ in range(4):
            if os.fork() == 0:
                end = time.monotonic() + 3
                while time.monotonic() < end:
                    pass
                os._exit(0)
        os._exit(0)
    os.wait()                               # the child is gone: its 4 are orphans now
    open(os.path.join(d, "orphaned"), "w").close()
    time.sleep(6)                           # they burn 3 s, then end; CMD goes on
    sys.exit(3)
"""

OUTLIVE = """
    import os, sys, time
    if os.fork() == 0:
        if os.fork() == 0:
            os.setsid()                     # not in CMD's group: no forwarded signal either
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):            # the test reads scopemeter's pipes to their end
                os.dup2(null, fd)
            time.sleep(120)
            os._exit(0)
        os._exit(0)
    os.wait()
    time.sleep(0.5)
"""


def series(path, name):
    out = []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r["kind"] == "metric" and name in r["key"]:
                out.append((r["step"], r["value"]))
    return [v for _, v in sorted(out)]


def run_under(scopemeter_bin, tmp_path, text, timeout):
    """CMD (text, a Python script given tmp_path) under scopemeter run --jsonl."""
    src = tmp_path / "cmd.py"
    src.write_text(textwrap.dedent(text))
    out = tmp_path / "p.jsonl"
    p = subprocess.run([scopemeter_bin, "run", "--jsonl", str(out), "--interval", "0.5", "--",
                        sys.executable, str(src), str(tmp_path)],
                       env=clean_env(), capture_output=True, text=True, timeout=timeout)
    return p, out, src


@pytest.mark.timeout(90)
def test_orphaned_grandchildren_stay_in_the_tree(scopemeter_bin, tmp_path):
    p, out, _ = run_under(scopemeter_bin, tmp_path, BURN, 60)
    assert p.returncode == 3, p.stderr          # CMD's own status, not an orphan's
    assert (tmp_path / "orphaned").exists()
    count = series(out, "process_count")
    cpu = series(out, "process_cpu_utilization_percentage")
    # scopemeter + CMD + the 4 orphans (on main: 2, and the CPU 0.0)
    assert max(count) >= 6, (count, cpu)
    assert max(cpu) > 50, (count, cpu)
    # reaped when they end: the tree is scopemeter and CMD again, no zombie counted
    assert 2 in count[count.index(max(count)):], count


@pytest.mark.timeout(60)
def test_orphan_outliving_cmd_is_left_running(scopemeter_bin, tmp_path):
    p, _, src = run_under(scopemeter_bin, tmp_path, OUTLIVE, 30)
    assert p.returncode == 0, p.stderr
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if str(src).encode() in f.read():
                    left.append(int(pid))
        except OSError:
            pass  # exited meanwhile
    try:
        assert len(left) == 1, left             # still running, not signalled
    finally:
        for pid in left:
            os.kill(pid, signal.SIGKILL)
