"""Table 11: the server's capacity (bench/server_capacity.py, its own servers;
full runs only unless named in --only)."""
import json
import os
import subprocess
import sys

import benchlib as B


def section11(c):
    """Table 11: the server's capacity (bench/server_capacity.py, its own servers)."""
    out = os.path.join(c.tmp, "capacity.json")
    p = subprocess.run([sys.executable, os.path.join(B.BENCH, "server_capacity.py"),
                        "--build", c.build, "--json", out], capture_output=True, text=True,
                       timeout=7200)
    if p.returncode != 0:
        raise RuntimeError(f"server_capacity.py exited {p.returncode}: {p.stderr[-500:]}")
    c.tables.append(p.stdout.strip())
    with open(out) as f:
        c.results["11"] = json.load(f)
