"""Input checks shared by the public functions: one place, one wording.

Every message names the argument, the value received and what was expected, so that a
caller several layers up (the plugin, the command line) can show it unchanged.
"""

from __future__ import annotations

import math
import numbers
import operator

__all__ = [
    "check_count",
    "check_counts",
    "check_design",
    "check_direction",
    "check_level",
    "check_power",
    "check_probability",
    "check_q",
]


def check_count(name: str, value: object) -> int:
    """Return ``value`` as an int if it is a non-negative integer, else raise ValueError."""
    if type(value) is int and value >= 0:  # the common case, without the ABC checks below
        return value
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    if not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    try:
        as_int = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}") from None
    if as_int < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {as_int}")
    return int(as_int)


def check_counts(x_name: str, x: object, n_name: str, n: object) -> tuple[int, int]:
    """Check a count of events ``x`` out of ``n`` trials: ``0 <= x <= n``."""
    xi = check_count(x_name, x)
    ni = check_count(n_name, n)
    if xi > ni:
        raise ValueError(f"{x_name} must be at most {n_name} ({ni}), got {xi}")
    return xi, ni


def _check_open_unit(name: str, value: object, expected: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number {expected}, got {value!r}")
    as_float = float(value)
    if not (math.isfinite(as_float) and 0.0 < as_float < 1.0):
        raise ValueError(f"{name} must be a number {expected}, got {value!r}")
    return as_float


def check_q(value: object, name: str = "q") -> float:
    """A false-discovery or family-wise rate: strictly between 0 and 1."""
    return _check_open_unit(name, value, "strictly between 0 and 1")


def check_level(value: object, name: str = "level") -> float:
    """A confidence level such as 0.95: strictly between 0 and 1."""
    return _check_open_unit(name, value, "strictly between 0 and 1 (e.g. 0.95)")


def check_probability(value: object, name: str) -> float:
    """A probability in the closed interval [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number between 0 and 1, got {value!r}")
    as_float = float(value)
    if not (math.isfinite(as_float) and 0.0 <= as_float <= 1.0):
        raise ValueError(f"{name} must be a number between 0 and 1, got {value!r}")
    return as_float


def check_power(power: object) -> float:
    """The power asked of a limit: strictly between 0 and 1."""
    return check_q(power, "power")


def check_direction(direction: str) -> None:
    """A direction of change: 'rise' or 'fall'."""
    if direction not in ("rise", "fall"):
        raise ValueError(f"direction must be 'rise' or 'fall', got {direction!r}")


def check_design(n_before: object, n_after: object, paired: bool) -> tuple[int, int]:
    """The arms of a design, (n1, n2): ``n_after`` None means n_before; a paired design has
    one count of twins; both arms at least one replicate."""
    n1 = check_count("n_before", n_before)
    n2 = n1 if n_after is None else check_count("n_after", n_after)
    if paired and n2 != n1:
        raise ValueError(
            f"a paired design has one count of twins; got n_before={n1} and n_after={n2}"
        )
    if n1 == 0 or n2 == 0:
        raise ValueError(f"both arms need at least one replicate, got {n1} and {n2}")
    return n1, n2
