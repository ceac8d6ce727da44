"""Detection limits: the smallest change one row alone would be flagged for.

A row's limit is the smallest rise (or fall) from its base rate p0 (its rate before) at which its
own test, at level alpha = q/m, rejects in that direction with probability ``power`` (0.8, "4
times in 5"). Power is computed exactly (``_exact_power``); it is continuous in the after rate
and rises with the change, so the limit is found by bisection on the change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from ._check import check_counts, check_design, check_power, check_q
from ._exact_power import Direction, PowerAt, _evaluator
from ._roots import bisect

__all__ = ["Limit", "Limits", "fall_limit", "limits", "outward", "rise_limit"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def outward(value: float) -> str:
    """A detection limit as printed: rounded up, never down, so that the change the text
    names is detected at least as often as the exact limit promises (power rises with the
    change). Three decimals, or two significant digits below 0.01 where three decimals would
    read 0.00x: 0.00924 prints 0.0093, 0.0013 prints 0.0013, 0.1501 prints 0.151."""
    if not math.isfinite(value) or value <= 0:
        return f"{max(value, 0.0):.3f}"
    digits = 3 if value >= 0.01 else 1 - math.floor(math.log10(value))
    step = 10.0 ** -digits
    up = math.ceil(value / step) * step
    while float(f"{up:.{digits}f}") < value:  # the product rounded down a hair
        up += step
    if digits > 3 and up >= 0.01:
        digits = 3
    return f"{up:.{digits}f}"


@dataclass(frozen=True, slots=True)
class Limit:
    """A detection limit: ``value`` when ``status == "ok"``, else ``None``.

    ``"no room"``: the rate cannot move that way (0 for a fall, 1 for a rise).
    ``"none detectable"``: no change of any size is flagged with the asked power.
    ``"sequential"``: a row of a sequential run, which has no limit of its own: what its
    procedure detects is the design's (its power at max_mde, checked before the run), not
    the fixed test's limit at the look where its condition stopped.
    """

    value: float | None
    status: Literal["ok", "no room", "none detectable", "sequential"]

    def sees(self, change: float) -> bool:
        """True when a change of this size would be flagged with the asked power."""
        return self.value is not None and self.value <= change + 1e-12

    def __str__(self) -> str:
        """The printed limit: :func:`outward`, or the status."""
        return outward(self.value) if self.value is not None else self.status

    def to_dict(self) -> dict[str, object]:
        """The exact value, its status, and the text every report prints for it."""
        return {"value": self.value, "status": self.status, "shown": str(self)}


@dataclass(frozen=True, slots=True)
class Limits:
    rise: Limit
    fall: Limit


# Bisection steps: the bracket [0, room] shrinks to room / 2**32, far below the 3 decimals shown.
_BISECTIONS = 32
_LimitKey = tuple[bool, int, int, float, float, float, str]
_LIMIT_CACHE: dict[_LimitKey, Limit] = {}
_LIMIT_CACHE_SIZE = 1 << 17


def _bisect(
    power_at: PowerAt, p0: FloatArray, top: FloatArray, sign: float, power: float, steps: int
) -> FloatArray:
    """Smallest change in [0, top] (to top / 2**steps, from above) with power_at >= power, for
    every base rate at once; power must reach ``power`` at ``top``."""

    def reaches(rows: IntArray, change: FloatArray) -> BoolArray:
        return power_at(np.minimum(np.maximum(p0 + sign * change, 0.0), 1.0)) >= power

    return bisect(reaches, np.zeros(p0.size), top, steps=steps)[1]


def _limits_batch(
    paired: bool, n1: int, n2: int, p0s: FloatArray, alpha: float, power: float,
    direction: Direction,
) -> list[Limit]:
    """Limits at many base rates of one design at once, by a vectorised bisection on the
    change. Power rises with the change for these tests (each row of the rejection region is
    a tail, so a larger change moves every binomial into it stochastically; a property test
    checks it), so the first crossing of the target power is the only one."""
    sign = 1.0 if direction == "rise" else -1.0
    room = 1.0 - p0s if direction == "rise" else p0s.copy()
    result: list[Limit] = [Limit(None, "no room")] * p0s.size
    live = np.flatnonzero(room > 0.0)
    if live.size == 0:
        return result
    evaluator = _evaluator(paired, n1, n2, alpha)
    p0 = p0s[live]
    top = room[live]
    reachable = evaluator.prepare(p0, direction)(np.clip(p0 + sign * top, 0.0, 1.0)) >= power
    for i in live[~reachable]:
        result[int(i)] = Limit(None, "none detectable")
    p0 = p0[reachable]
    found = _bisect(evaluator.prepare(p0, direction), p0, top[reachable], sign, power,
                    _BISECTIONS)
    for i, value in zip(live[reachable], found, strict=True):
        result[int(i)] = Limit(float(value), "ok")
    return result


def _cached_limits(
    paired: bool, n1: int, n2: int, p0s: list[float], alpha: float, power: float,
    direction: Direction,
) -> list[Limit]:
    """Limits for base rates of one design, computing only those not seen before (a limit
    depends only on the design, the base rate, alpha, power and direction)."""
    keys = [(paired, n1, n2, p0, alpha, power, direction) for p0 in p0s]
    missing = sorted({key[3] for key in keys if key not in _LIMIT_CACHE})
    if missing:
        if len(_LIMIT_CACHE) + len(missing) > _LIMIT_CACHE_SIZE:
            _LIMIT_CACHE.clear()
        fresh = _limits_batch(paired, n1, n2, np.array(missing), alpha, power, direction)
        for p0, limit in zip(missing, fresh, strict=True):
            _LIMIT_CACHE[(paired, n1, n2, p0, alpha, power, direction)] = limit
    return [_LIMIT_CACHE[key] for key in keys]


def _limit(
    paired: bool, n1: int, n2: int, p0: float, alpha: float, power: float, direction: Direction
) -> Limit:
    return _cached_limits(paired, n1, n2, [p0], alpha, power, direction)[0]


def limits(
    x_before: int,
    n_before: int,
    n_after: int | None = None,
    *,
    paired: bool,
    alpha: float,
    power: float = 0.8,
) -> Limits:
    """Rise and fall limits of one row whose base count is ``x_before`` of ``n_before``.

    ``n_after`` defaults to ``n_before`` (and must equal it when paired: n is the number of
    twins). ``alpha`` is the row's share of the family, q/m.
    """
    x0, n1 = check_counts("x_before", x_before, "n_before", n_before)
    n1, n2 = check_design(n1, n_after, paired)
    alpha = check_q(alpha, "alpha")
    power = check_power(power)
    p0 = x0 / n1
    return Limits(
        _limit(paired, n1, n2, p0, alpha, power, "rise"),
        _limit(paired, n1, n2, p0, alpha, power, "fall"),
    )


def rise_limit(
    x_before: int,
    n_before: int,
    n_after: int | None = None,
    *,
    paired: bool,
    alpha: float,
    power: float = 0.8,
) -> Limit:
    """The smallest rise from x_before/n_before flagged with ``power`` at level ``alpha``."""
    return limits(x_before, n_before, n_after, paired=paired, alpha=alpha, power=power).rise


def fall_limit(
    x_before: int,
    n_before: int,
    n_after: int | None = None,
    *,
    paired: bool,
    alpha: float,
    power: float = 0.8,
) -> Limit:
    """The smallest fall from x_before/n_before flagged with ``power`` at level ``alpha``."""
    return limits(x_before, n_before, n_after, paired=paired, alpha=alpha, power=power).fall
