"""sm__round1 (src/collect/collectors.c) against Python's own round(x, 1): what
MLflow's monitor logs.  tests/c/test_round1.c holds the arithmetic to the
printf("%.1f") + strtod pair on millions of values; this holds both to
Python on the values where they could part: exact ties (odd/4), the doubles
nearest the half-tenths (k/20, odd k) and their neighbours, every magnitude
around the 2^48 edge, subnormals, negatives and huge values."""
import math
import random
import subprocess

import pytest

from conftest import c_test_program


def values(n, rng):
    fixed = [0.0, 0.05, 0.15, 0.25, 0.35, 0.75, 1.25, 2.5, 2.675, 0.95, 9.95, 1e15 + 0.05,
             1e14 + 0.05, 2.0**48, 2.0**49, 2.0**52, 1e300, 1.7976931348623157e308, 5e-324,
             2.2250738585072014e-308, 281474976710655.75, 281474976710655.25]
    out = list(fixed)
    for _ in range(n):
        kind = rng.randrange(6)
        if kind == 0:
            x = rng.randrange(1, 2 ** rng.randrange(1, 51), 2) / 4      # exact ties
        elif kind == 1:
            x = rng.randrange(1, 2 ** rng.randrange(1, 54), 2) / 20     # near the half-tenths
        elif kind == 2:
            x = rng.random() * 2.0 ** rng.randrange(-20, 60)          # every magnitude
        elif kind == 3:
            x = rng.random() * 2.0 ** -rng.randrange(1000, 1075)      # subnormal and tiny
        elif kind == 4:
            x = rng.randrange(0, 2 ** rng.randrange(1, 54)) / 10      # logged values
        else:
            x = rng.random() * 100000.0
        out.append(x)
    more = []
    for x in out:  # neighbours and signs
        for y in (x, math.nextafter(x, math.inf), math.nextafter(x, -math.inf)):
            more += [y, -y]
    return more


@pytest.mark.timeout(120)
def test_round1_matches_python(scopemeter_bin, tmp_path):
    rng = random.Random(20261201)
    path = tmp_path / "values"
    with open(path, "w") as f:
        for x in values(40000, rng):
            f.write(f"{x.hex()} {round(x, 1).hex()}\n")
    r = subprocess.run([c_test_program(scopemeter_bin, "test_round1"), str(path)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 differ from Python's round" in r.stdout, r.stdout
