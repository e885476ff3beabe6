"""The JSONL file of `scopemeter run --jsonl` (docs/cli.md, Without a tracking
server), issue 33:

- item 3, a full disk: a real 64 KiB tmpfs mounted in a temporary directory
  with 4 KiB left.  The file must hold whole lines only (every line parses),
  the one warning is said once, and "N records written" is the number of lines
  on disk.  On main the file ended in a cut line and the count was short (29
  said, 35 whole lines).  The mount is removed in a finally block;
- item 10, its numbers: every value is the shortest decimal that reads back
  (Python's repr is that), 12.3 and not 12.300000000000001;
- item 12, the closing line: "logged 1 window", and "written" for a file.
"""
import json
import re
import subprocess

import pytest

from conftest import clean_env, is_root


@pytest.mark.timeout(60)
def test_full_disk_leaves_whole_lines_and_counts_them(scopemeter_bin, tmp_path):
    if not is_root():
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "full"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], check=True)
    try:
        with open(mnt / "fill", "wb") as f:
            f.write(b"\0" * (60 << 10))     # 4 KiB left
        out = mnt / "p.jsonl"
        p = subprocess.run([scopemeter_bin, "run", "--jsonl", str(out), "--interval", "0.05",
                            "--", "sleep", "2"],
                           env=clean_env(), capture_output=True, text=True, timeout=40)
        data = out.read_bytes()
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
    assert p.returncode == 0, p.stderr
    warnings = [ln for ln in p.stderr.splitlines() if "cannot write" in ln]
    assert len(warnings) == 1 and "No space left on device" in warnings[0], p.stderr
    said = re.search(r"(\d+) records written to", p.stderr)
    assert said, p.stderr
    assert data.endswith(b"\n"), data[-80:]     # no cut line
    lines = data.decode().splitlines()
    for line in lines:
        json.loads(line)
    assert int(said.group(1)) == len(lines), (said.group(0), len(lines))
    assert 0 < len(lines) < 100                  # the disk really filled


@pytest.mark.timeout(60)
def test_values_are_the_shortest_decimal_that_reads_back(scopemeter_bin, tmp_path):
    out = tmp_path / "p.jsonl"
    p = subprocess.run([scopemeter_bin, "run", "--jsonl", str(out), "--interval", "0.2", "--",
                        "sleep", "1"], env=clean_env(), capture_output=True, text=True,
                       timeout=40)
    assert p.returncode == 0, p.stderr
    texts = re.findall(r'"value":(-?[0-9][0-9.eE+-]*)', out.read_text())
    assert texts and any("." in t and not t.endswith(".0") for t in texts), texts
    # jansson writes an exponent without '+' and leading zeros (1e-7 for 1e-07)
    def exp_form(s):
        return re.sub(r"e([+-]?)0*(\d)", lambda m: "e" + m.group(1).replace("+", "") + m.group(2), s)
    for t in texts:
        assert exp_form(t) == exp_form(repr(float(t))), (t, repr(float(t)))


@pytest.mark.timeout(60)
def test_closing_line_of_one_window_into_a_file(scopemeter_bin, tmp_path):
    """issue 33 item 12: "logged 1 window", and a file's records are written, not
    delivered."""
    out = tmp_path / "p.jsonl"
    p = subprocess.run([scopemeter_bin, "run", "--jsonl", str(out), "--interval", "10", "--",
                        "true"], env=clean_env(), capture_output=True, text=True, timeout=40)
    assert p.returncode == 0, p.stderr
    lines = len(out.read_text().splitlines())
    closing = [ln for ln in p.stderr.splitlines() if "logged " in ln]
    assert len(closing) == 1, p.stderr
    assert re.search(rf"logged 1 window \(\d+ points, \d+ tags\): {lines} written, 0 dropped "
                     r"\(buffer full\), 0 refused, 0 not written at stop", closing[0]), closing[0]
    assert "delivered" not in closing[0] and f"{lines} records written to" in p.stderr
