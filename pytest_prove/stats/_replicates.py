"""The replicate search: the smallest design at which given base rates see a change.

A size passes when every listed base rate has a limit at most max_mde in its direction, that
is when power(p0, p0 +- max_mde) reaches the asked power (power rises with the change). The
search starts from the normal approximation and brackets the answer with a few exact
evaluations.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from . import _dist
from ._check import check_direction, check_power, check_probability, check_q
from ._exact_power import Direction, _power_batch
from ._roots import smallest

__all__ = ["replicates_for"]

FloatArray = npt.NDArray[np.float64]

# Largest design the replicate search will try; beyond it the answer is "more than this".
MAX_REPLICATES_UNPAIRED = 5_000
MAX_REPLICATES_PAIRED = 100_000


def _sees_all(
    paired: bool, n: int, p0s: FloatArray, alpha: float, power: float, max_mde: float,
    direction: Direction,
) -> bool:
    """Whether every base rate in p0s has a limit at most max_mde in ``direction`` at n
    replicates: with power rising in the change, that is power(p0 +- max_mde) >= power."""
    if p0s.size == 0:
        return True
    sign = 1.0 if direction == "rise" else -1.0
    p1 = np.clip(p0s + sign * max_mde, 0.0, 1.0)
    return bool((_power_batch(paired, n, n, alpha, p0s, p1, direction) >= power).all())


def _smallest_n(passes: Callable[[int], bool], start: int, ceiling: int) -> int | None:
    """Smallest n in [start, ceiling] with passes(n), by doubling then bisection.

    Exact tests make the limit saw-toothed in n, so "passes" is monotone only up to a few
    replicates; the answer is an n that passes with n - 1 failing, the figure to plan with.
    """
    lo = max(1, start) - 1  # known (or assumed) to fail
    hi = max(1, start)
    while not passes(hi):
        lo = hi
        if hi >= ceiling:
            return None
        hi = min(ceiling, hi * 2)
    return smallest(passes, lo, hi)


def replicates_for(
    p_before: float,
    *,
    paired: bool,
    alpha: float,
    max_mde: float,
    power: float = 0.8,
    directions: tuple[Direction, ...] = ("rise", "fall"),
    start: int = 1,
) -> int | None:
    """Replicates per condition (twins, or each arm) at which a row with base rate
    ``p_before`` has limits at most ``max_mde`` in ``directions``; None above the ceiling."""
    p0 = check_probability(p_before, "p_before")
    alpha = check_q(alpha, "alpha")
    max_mde = check_q(max_mde, "max_mde")
    power = check_power(power)
    for direction in directions:
        check_direction(direction)
    return replicates_for_all(
        {direction: [p0] for direction in directions},
        paired=paired, alpha=alpha, max_mde=max_mde, power=power, start=start,
    )


def _normal_guess(
    base_rates: dict[Direction, FloatArray], alpha: float, power: float, max_mde: float
) -> int:
    """Replicates per arm the normal approximation to a two-sample comparison of proportions
    asks for (Fleiss, Levin & Paik 2003, eq. 4.14 without continuity correction), the largest
    over the base rates: only a starting point for the exact search."""
    z_a = float(_dist.norm_isf(alpha / 2.0))
    z_b = float(_dist.norm_isf(1.0 - power))
    guess = 1.0
    for direction, p0s in base_rates.items():
        sign = 1.0 if direction == "rise" else -1.0
        p1s = np.clip(p0s + sign * max_mde, 0.0, 1.0)
        mean = (p0s + p1s) / 2.0
        n = (z_a * np.sqrt(2 * mean * (1 - mean))
             + z_b * np.sqrt(p0s * (1 - p0s) + p1s * (1 - p1s))) ** 2 / max_mde**2
        if n.size:
            guess = max(guess, float(n.max()))
    return int(np.ceil(guess))


def replicates_for_all(
    base_rates: dict[Direction, list[float]],
    *,
    paired: bool,
    alpha: float,
    max_mde: float,
    power: float = 0.8,
    start: int = 1,
) -> int | None:
    """Replicates per condition at which every listed base rate sees max_mde in its listed
    direction (unchecked inputs; the engine's own entry point). The exact search starts from
    the normal approximation and brackets the answer within a few exact evaluations."""
    ceiling = MAX_REPLICATES_PAIRED if paired else MAX_REPLICATES_UNPAIRED
    arrays = {d: np.array(sorted(set(v)), dtype=np.float64) for d, v in base_rates.items()}

    def passes(n: int) -> bool:
        return all(
            _sees_all(paired, n, p0s, alpha, power, max_mde, direction)
            for direction, p0s in arrays.items()
        )

    known_fail = max(1, start) - 1
    hi = min(ceiling, max(known_fail + 1, _normal_guess(arrays, alpha, power, max_mde)))
    while not passes(hi):
        known_fail = hi
        if hi >= ceiling:
            return None
        hi = min(ceiling, int(hi * 1.25) + 1)
    lo = max(known_fail, int(hi * 0.85))
    if lo > known_fail and passes(lo):
        lo = known_fail
    return smallest(passes, lo, hi)
