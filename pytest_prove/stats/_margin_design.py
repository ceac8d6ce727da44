"""The margin's design check: how many replicates let "every row within the margin" hold.

Before a sweep runs, the design check asks whether, when nothing changed, every one of its m
rows would be shown within the margin D (each at level q, the intersection-union test of
``_margin``) with probability ``power``, rows independent; and if not, how many replicates
would. The test's exact p-value is computed as in ``_margin``; large designs (thousands of
replicates) are handled without the whole outcome grid: each row's count is found by
bisection (the score rises with the second count on every design enumerated), and the
critical value by bisection on the statistic.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import special  # type: ignore[import-untyped]

from ._check import check_count, check_q
from ._margin import _check_margin, _grid, _nuisance_range, _quick_counts, _region_probability, _sup
from ._roots import boundary, smallest

__all__ = [
    "EXACT_SEARCH_UP_TO",
    "MARGIN_CEILING",
    "MarginDesignCheck",
    "margin_design_check",
    "margin_replicates",
    "replicates_needed",
    "within_power",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# The design check's search for its region asks alpha times this at the peaks it looks at.
_SEARCH_SLACK = 1.0 - 1e-4


@functools.lru_cache(maxsize=256)
def _quick_region(paired: bool, n: int, margin: float, alpha: float) -> IntArray:
    """The rejection region of the design with n replicates in each run (n twins), as each
    first count's number of second counts: every outcome scoring at or below the largest z
    whose p-value is at most alpha. Bisection on z, from the normal quantile outward."""
    grid = _grid(*_nuisance_range(paired, margin), n)
    start = float(special.ndtri(alpha))
    # The supremum sits at nearly the same nuisance values for every z near the normal
    # quantile: the bisection looks only around the peaks of the full grid's tail, asking
    # a hair less than alpha there (the peaks lie between its points), and the result is
    # checked on the full grid, refined; a peak it misses joins the search.
    counts = _quick_counts(paired, n, n, margin, start)
    local = np.zeros(0)
    last = grid.size - 1
    for _ in range(6):
        # The peaks of the full grid's tail for the region at hand, finely, join the search.
        values = _region_probability(paired, n, n, counts, grid, margin)
        padded = np.concatenate(([-1.0], values, [-1.0]))
        peaks = np.flatnonzero((values >= padded[:-2]) & (values >= padded[2:]))
        high = peaks[values[peaks] >= 0.9 * values.max()]
        top = high[np.argsort(-values[high], kind="stable")[:64]]
        local = np.unique(np.concatenate([local, *[
            np.linspace(grid[max(i - 1, 0)], grid[min(i + 1, last)], 9) for i in top]]))
        counts = _critical_counts(paired, n, margin, alpha * _SEARCH_SLACK, local, start)
        if _sup(paired, n, n, margin, counts, grid) <= alpha:
            break
    else:
        counts = _critical_counts(paired, n, margin, alpha, grid, start)
    counts.setflags(write=False)
    return counts


def _critical_counts(paired: bool, n: int, margin: float, alpha: float, grid: FloatArray,
                     start: float) -> IntArray:
    """The region of the largest z (to 1e-7) whose supremum over ``grid`` is at most alpha."""

    def passes(z: float) -> bool:
        return _sup(paired, n, n, margin, _quick_counts(paired, n, n, margin, z),
                    grid, refine=False) <= alpha

    lo, hi = start - 0.5, start + 0.5
    step = 0.5
    while not passes(lo):
        step *= 2.0
        hi, lo = lo, lo - step
        if lo < -1e3:
            return np.zeros(n + 1, dtype=np.int64)
    while passes(hi):
        step *= 2.0
        lo, hi = hi, hi + step
    return _quick_counts(paired, n, n, margin, boundary(passes, hi, lo, width=1e-7))


def unchanged_nuisance(paired: bool, base: FloatArray, kappa: float = 1.0) -> FloatArray:
    """The nuisance value when nothing changed at each base rate: the base rate itself, or
    (paired) the before-only rate kappa p (1 - p): kappa 1 for twins independent given the
    rate, less for twins that agree more often (``_twins``)."""
    return np.asarray(kappa * base * (1.0 - base) if paired else base, dtype=np.float64)


def within_power(paired: bool, n: int, margin: float, alpha: float,
                 base: FloatArray, kappa: float = 1.0) -> FloatArray:
    """P(a row is shown within the margin at level alpha) when nothing changed, at each
    base rate, with n replicates in each run (paired: n twins at discordance ratio
    ``kappa``; 1: independent)."""
    counts = _quick_region(paired, n, margin, alpha)
    return _region_probability(paired, n, n, counts,
                               unchanged_nuisance(paired, base, kappa), 0.0)


@functools.lru_cache(maxsize=256)
def _weakest(paired: bool, n: int, margin: float, alpha: float,
             kappa: float = 1.0) -> tuple[float, float]:
    """The smallest power over base rates k/n when nothing changed, and where: a coarse
    grid, then every k/n near its weakest point. (Power is the same at p and 1 - p, by
    swapping the runs and counting non-events, and weakest near 1/2.)"""
    coarse = np.linspace(0.0, 1.0, 41)
    values = within_power(paired, n, margin, alpha, coarse, kappa)
    centre = float(coarse[int(np.argmin(values))])
    k = np.arange(n + 1)
    near = k[np.abs(k / n - centre) <= max(0.03, 2.0 / n)] / n
    fine = within_power(paired, n, margin, alpha, near, kappa)
    i = int(np.argmin(fine))
    if fine[i] <= values.min():
        return float(fine[i]), float(near[i])
    j = int(np.argmin(values))
    return float(values[j]), float(coarse[j])


@dataclass(frozen=True, slots=True)
class MarginDesignCheck:
    """Whether n replicates per condition let the sweep-wide claim "every row within the
    margin" hold with probability ``power`` when nothing changed, and how many would."""

    replicates: int
    m: int
    paired: bool
    q: float
    margin: float
    power: float  # for the whole sweep
    row_power: float  # asked of each row: power ** (1 / m)
    weakest_power: float  # the row power at the weakest base rate with these replicates
    weakest_base_rate: float
    ok: bool
    replicates_needed: int | None  # None when ok, or beyond the search's ceiling
    method: str
    replicates_exact: bool = True  # False: the normal approximation (a large design)
    #: From the baseline's rates (``_margin_rates``): the claim's power, the product of each
    #: row's weakest within its interval, and whether the design passes for any base rate.
    claim_power: float | None = None
    ok_any_rate: bool | None = None

    @property
    def sweep_power(self) -> float:
        """The probability the claim holds for the whole sweep when nothing changed."""
        return self.weakest_power ** self.m if self.claim_power is None else self.claim_power


MARGIN_CEILING = 20_000
#: Above this many replicates (by the normal approximation) the replicates needed are given
#: by the approximation, not searched exactly (each exact size costs seconds there), and
#: said to be approximate.
EXACT_SEARCH_UP_TO = 1_500


def _normal_guess(paired: bool, margin: float, alpha: float, row_power: float,
                  kappa: float = 1.0) -> int:
    """The replicates a normal approximation asks at base rate 1/2 (a starting point)."""
    z = float(special.ndtri(1.0 - alpha) + special.ndtri(row_power))
    # 2 p (1 - p) at p = 1/2: unpaired, and twins' discordance 2 kappa p (1 - p)
    variance = 0.5 * (kappa if paired else 1.0)
    return max(2, math.ceil(z * z * variance / (margin * margin)))


def _fewest(passes: Callable[[int], bool], guess: int, floor: int) -> int | None:
    """The fewest replicates above ``floor`` that pass, from a guess: stepping down from it
    until a size fails (or the floor), or up until one passes, then bisecting; it ends on a
    size that passes next to one that fails (or next to ``floor``). None beyond
    ``MARGIN_CEILING``."""
    guess = min(MARGIN_CEILING, max(floor + 1, guess))
    step = max(1, guess // 200)
    lo = hi = guess
    if passes(guess):
        while True:  # step down until a size fails, or the floor
            lo = max(floor, hi - step)
            if lo == floor or not passes(lo):
                break
            hi = lo
            step *= 2
    else:
        while True:
            lo, hi = hi, min(MARGIN_CEILING, hi + step)
            if passes(hi):
                break
            if hi >= MARGIN_CEILING:
                return None
            step *= 2
    return max(smallest(passes, lo, hi), 1)


def margin_replicates(paired: bool, m: int, q: float, margin: float,
                      power: float = 0.8, kappa: float = 1.0, above: int = 0) -> int | None:
    """The fewest replicates per condition (in each run) above ``above`` at which, when
    nothing changed, every row of m is shown within the margin at level q with probability
    at least ``power`` at every base rate, rows independent: each row with power ** (1 / m).
    ``kappa``: the twins' discordance ratio (paired; 1 for independent twins).

    The search asks the design check's own question (:func:`margin_design_check`, the
    power at the weakest base rate) of each size it tries, and ends on a size that passes
    next to one that fails (or next to ``above``): the figure returned passes the check and
    the one below it does not. (Power is not quite monotone in the replicates, the tests
    being discrete, so a smaller size further down may pass too; ``above``, the size that
    just failed, keeps the advice above it.) None beyond ``MARGIN_CEILING``."""
    row_power = power ** (1.0 / m)

    def passes(n: int) -> bool:
        return bool(_weakest(paired, n, margin, q, kappa)[0] >= row_power)

    return _fewest(passes, _normal_guess(paired, margin, q, row_power, kappa), max(0, above))


def replicates_needed(paired: bool, m: int, q: float, margin: float,
                      power: float = 0.8, kappa: float = 1.0,
                      above: int = 0) -> tuple[int | None, bool]:
    """The replicates per condition the margin claim over m rows needs, above ``above``
    (as :func:`margin_replicates`), and whether the figure is exact: above
    ``EXACT_SEARCH_UP_TO`` by the normal approximation the normal figure (at least
    ``above`` + 1) is given instead, and said to be approximate."""
    guess = _normal_guess(paired, margin, q, power ** (1.0 / m), kappa)
    if guess <= EXACT_SEARCH_UP_TO:
        return margin_replicates(paired, m, q, margin, power, kappa, above), True
    return max(guess, above + 1), False


def margin_design_check(replicates: int, m: int, *, paired: bool, margin: float,
                        q: float = 0.05, power: float = 0.8,
                        kappa: float = 1.0) -> MarginDesignCheck:
    """Check a design for the margin claim before it runs: with ``replicates`` per condition
    and nothing changed, is every one of the m rows shown within ``margin`` (each at level
    q, the intersection-union test) with probability ``power``? Rows taken as independent,
    each row needs power ** (1 / m); the power is computed exactly at the weakest base rate
    (k / replicates, near 1/2). ``kappa`` (paired): the twins' discordance ratio, 1 for
    independent twins; a bound from an observed agreement (``_twins.pooled_kappa``) lets
    the check ask for fewer replicates (the test's level does not depend on it)."""
    n = check_count("replicates", replicates)
    m = check_count("m", m)
    if n == 0 or m == 0:
        raise ValueError(f"replicates and m must be positive, got replicates={n}, m={m}")
    margin = _check_margin(margin)
    q = check_q(q)
    power = check_q(power, "power")
    row_power = power ** (1.0 / m)
    if not (math.isfinite(kappa) and 0.0 <= kappa <= 1.0):
        raise ValueError(f"kappa must be between 0 and 1, got {kappa!r}")
    weakest, where = _weakest(paired, n, margin, q, kappa)
    ok = weakest >= row_power
    needed, exact = (None, True) if ok else replicates_needed(paired, m, q, margin, power,
                                                              kappa, above=n)
    test = "Tango score, exact unconditional" if paired else (
        "Miettinen-Nurminen score, exact unconditional")
    model = ("; twins independent given the rate" if kappa == 1.0 else
             f"; twins at discordance ratio {kappa:.2f} (an observed agreement's bound)"
             ) if paired else ""
    return MarginDesignCheck(
        replicates=n, m=m, paired=paired, q=q, margin=margin, power=power,
        row_power=row_power, weakest_power=weakest, weakest_base_rate=where, ok=ok,
        replicates_needed=needed, replicates_exact=exact,
        method=(f"{test} at margin {margin:g}, each row at level q = {q:g} (intersection-"
                f"union); power {power:g} for all {m} rows = {row_power:.4f} per row "
                f"(rows independent){model}, exact"))
