"""The one number parser from Python (docs/design.md §8, "Numbers"):
_native.parse_number is src/util/number.c, so the front's lines are the CLI's and
the environment's, word for word; a number already typed is checked only for
its bounds and whole-ness."""
import subprocess

import pytest

from conftest import clean_env


@pytest.mark.parametrize("text", ["0x10", "1e3", " 1", "1 ", "", "-0", "nan", "inf", "abc"])
def test_text_is_refused_as_the_cli_refuses_it(scopemeter_bin, text):
    from scopemeter import _native
    p = subprocess.run([scopemeter_bin, "plan", "--workers", "4", "--interval", text],
                       env=clean_env(), capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    with pytest.raises(ValueError) as e:
        _native.parse_number(text, "--interval", _native.INTERVAL_MIN, _native.INTERVAL_MAX,
                             seconds=True)
    assert p.stderr == f"scopemeter plan: {e.value}\n"


def test_text_and_numbers():
    from scopemeter import _native
    assert _native.parse_number("0.5", "x", 0, 1) == 0.5
    assert _native.parse_number("007", "x", 0, 10, whole=True) == 7.0
    assert _native.parse_number(8.0, "workers", whole=True) == 8.0
    cases = [
        ((0, "interval", 0.01, 86400), dict(seconds=True),
         "interval must be between 0.01 and 86400 s, got 0"),
        ((2.5, "samples", 1, 100000), dict(whole=True),
         "samples must be a whole number between 1 and 100000, got 2.5"),
        ((8.5, "workers"), dict(whole=True), "workers must be a whole number, got 8.5"),
        ((float("inf"), "workers"), dict(whole=True), "workers must be a whole number, got inf"),
        ((float("nan"), "x", 0, 1), {}, "x must be between 0 and 1, got nan"),
        ((10**400, "workers", 1, 10), dict(whole=True), "workers must be between 1 and 10, got 1000"),
        (("1\0", "samples", 1, 10), dict(whole=True),
         "samples must be a whole number between 1 and 10, got '1?'"),
        (("8.0", "samples", 1, 10), dict(whole=True), "got '8.0'"),
    ]
    for args, kw, said in cases:
        with pytest.raises(ValueError) as e:
            _native.parse_number(*args, **kw)
        assert said in str(e.value), (args, str(e.value))
        assert "\n" not in str(e.value)


def test_wrong_type_is_type_error():
    from scopemeter import _native
    for bad in (True, [1], None, b"1"):
        with pytest.raises(TypeError):
            _native.parse_number(bad, "x", 0, 10)
