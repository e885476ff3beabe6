"""The receipt line and the write-load cap as a collecting worker prints them
(docs/design.md §5: the effective interval is printed and tagged)."""
import os
import re
import subprocess

from conftest import clean_env


def _run(bin_, tmp_path, **env):
    e = clean_env(**env)
    p = subprocess.run([os.path.abspath(bin_), "run", "--all-workers", "--interval", "1", "--jsonl",
                        str(tmp_path / "points.jsonl"), "--", "true"],
                       env=e, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    return p.stderr


def test_receipt_states_the_capped_period(scopemeter_bin, tmp_path):
    err = _run(scopemeter_bin, tmp_path, RANK=0, LOCAL_RANK=0, WORLD_SIZE=8, LOCAL_WORLD_SIZE=1)
    # 8 collectors > 4: period raised to 10 x ceil(8/4) = 20 s, and the receipt says 20 s
    assert "write-load cap: 8 collectors > 4" in err, err
    m = re.search(r"collecting (\d+) series every ([0-9.]+) s \((\d+) collectors\)", err)
    assert m, err
    assert float(m.group(2)) == 20.0
    assert int(m.group(3)) == 8


def test_receipt_without_cap(scopemeter_bin, tmp_path):
    err = _run(scopemeter_bin, tmp_path, RANK=0, LOCAL_RANK=0, WORLD_SIZE=4, LOCAL_WORLD_SIZE=1)
    assert "write-load cap" not in err
    m = re.search(r"collecting (\d+) series every ([0-9.]+) s \((\d+) collectors\)", err)
    assert m, err
    assert float(m.group(2)) == 1.0
    assert int(m.group(3)) == 4
