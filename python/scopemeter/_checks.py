"""_checks.py — the type and range checks of the public functions' arguments.

Why this file exists: enable_system_metrics(), disable_system_metrics() and
plan() check their arguments alike: a value of the wrong type is a
TypeError (a mistake in the call), a value out of range is said with the
words of the engine's one number parser (src/util/number.h) as the CLI says it.
Bounds come from the engine (_native), never a copy.
"""
from __future__ import annotations

import numbers
from typing import Literal, Optional, Union, overload

from . import _native


def _is_number(value: object) -> bool:
    """int, float and the other real numbers (numpy's included), not bool: True
    as an interval is a mistake, not 1 s."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _require_number(func: str, name: str, value: object, whole: bool = False) -> None:
    """The type check of every public function's numeric arguments: None (the
    default) or a number, else TypeError.  Its range is checked apart (a value
    out of range is one line in enable_system_metrics(), a ValueError in
    plan())."""
    if value is not None and not _is_number(value):
        what = "a whole number" if whole else "a number"
        raise TypeError(f"{func}(): {name} must be {what} or None, not {type(value).__name__}")


def _require_flag(func: str, name: str, value: object) -> None:
    """A flag (all_workers, container_limits): True or False (an int is taken
    as C takes it), else TypeError."""
    if not isinstance(value, int):
        raise TypeError(f"{func}(): {name} must be True or False, not {type(value).__name__}")


@overload
def _number(name: str, value: Optional[float], integer: Literal[True]) -> int: ...
@overload
def _number(name: str, value: Optional[float], integer: Literal[False]) -> float: ...


def _number(name: str, value: Optional[float], integer: bool) -> Union[int, float]:
    """interval / samples of enable_system_metrics(), whose type
    _require_number checked: None is the default (0 for the engine); anything
    else within the engine's bounds, checked and said by the engine's one
    number parser (src/util/number.h), as the CLI says them."""
    if value is None:
        return 0
    lo, hi = (1, _native.SAMPLES_MAX) if integer else (_native.INTERVAL_MIN, _native.INTERVAL_MAX)
    v = _native.parse_number(value, name, lo, hi, whole=integer, seconds=not integer)
    return int(v) if integer else v


@overload
def _plan_arg(name: str, value: Optional[float], integer: Literal[True] = ...) -> int: ...
@overload
def _plan_arg(name: str, value: Optional[float], integer: Literal[False]) -> float: ...


def _plan_arg(name: str, value: Optional[float], integer: bool = True) -> Union[int, float]:
    """One argument of plan(): None is the engine's default; a value of the
    wrong type is a TypeError, a fraction where a whole number is wanted (or
    inf, nan) a ValueError of the engine's one number parser here; its bounds
    are checked by the engine (sm_plan_estimate: they depend on each other,
    nodes <= pods), with the words of `scopemeter plan`."""
    default = _native.PLAN_DEFAULT
    _require_number("plan", name, value, whole=integer)
    if value is None:
        return default
    _native.parse_number(value, name, whole=integer)
    if integer:
        v = int(value)
        # outside a C int: the nearest invalid value, so the engine names the bound
        v = max(min(v, 2**31 - 1), -2**31)
        return v if v != default else default - 1  # an explicit -1 is not "default"
    f = float(value)
    return f if f != default else default - 1.0


def _detail(func: str, value: object) -> int:
    """detail= of enable_system_metrics() and plan(): None is the engine's
    default (SCOPEMETER_DETAIL for the monitor, "default" for the plan); a
    str other than "default" or "full" is a ValueError with the engine's
    words (docs/series.md "Levels"); another type a TypeError."""
    if value is None:
        return _native.PLAN_DEFAULT
    if not isinstance(value, str):
        raise TypeError(f"{func}(): detail must be 'default', 'full' or None, not "
                        f"{type(value).__name__}")
    return _native.parse_detail(value)
