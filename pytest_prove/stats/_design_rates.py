"""The design check from the baseline's own rates: the worst limit over the base rates each
row's baseline leaves plausible, rather than over every base rate from 0 to 1.

Where the estimate enters
-------------------------
Each row (condition and event) of the baseline shows x of n episodes with the event. Its
exact two-sided Clopper-Pearson interval at ``RATES_LEVEL`` (99%) holds the row's true base
rate with probability at least 0.99, whatever that rate is. The check then asks, for every
row, that a rise of max_mde from every base rate inside its interval (and, mirrored, a fall:
a fall from p is a rise from 1 - p once the runs are swapped and non-events counted, which
leaves both tests unchanged) be flagged with the asked power at level q/m. So for each row,
with probability at least 0.99 over the baseline's sampling, its power at max_mde is at least
the asked 0.8; unconditionally at least 0.99 x 0.8 = 0.792. That is the whole cost: the
tests themselves, and so their error rates, are the same exact tests whatever design chose
the replicates. (For every row of the sweep at once, by the union bound, the intervals hold
together with probability at least 1 - 0.01 m; the claim is made per row.)

The base rates looked at, for a design of n replicates, are every k/n inside a row's interval
and the interval's two ends, as the check over every base rate looks at every k/n: between
two of them a limit exceeds the one at the next k/n up by less than 1/n (p + limit(p) never
falls as p rises). A row the baseline does not hold (a new
condition) has the interval [0, 1]: any base rate, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from ._check import check_count, check_level, check_power, check_q
from ._design import _sees_grid, _worst_rise, design_method
from ._intervals import clopper_pearson_interval
from ._replicates import MAX_REPLICATES_PAIRED, MAX_REPLICATES_UNPAIRED, _smallest_n
from ._twins import _twin_power_many, twin_limits

__all__ = ["RATES_LEVEL", "RatesDesign", "baseline_intervals", "rates_design_check"]

FloatArray = npt.NDArray[np.float64]

#: The two-sided level of each row's Clopper-Pearson interval on its baseline rate.
RATES_LEVEL = 0.99

Interval = tuple[float, float]


def baseline_intervals(counts: Sequence[tuple[int, int]],
                       level: float = RATES_LEVEL) -> tuple[Interval, ...]:
    """Each row's exact two-sided interval on its base rate from the baseline's (x, n):
    [0, 1] for a row the baseline does not hold (n = 0)."""
    level = check_level(level)
    return tuple(clopper_pearson_interval(x, n, level) for x, n in counts)


def _rates_in(n: int, intervals: Sequence[Interval]) -> FloatArray:
    """Every k/n inside the intervals, and their ends (every interval at once: each k from
    0 to n is kept when it lies in one, the k/n the same floats as one interval at a time)."""
    if not intervals:
        return np.zeros(0)
    ends = np.array(intervals, dtype=np.float64).reshape(-1, 2)
    first = np.ceil(ends[:, 0] * n - 1e-9)[:, None]
    last = np.floor(ends[:, 1] * n + 1e-9)[:, None]
    k = np.arange(n + 1)
    inside = ((k >= first) & (k <= last)).any(axis=0)
    rates = np.concatenate((ends.ravel(), k[inside] / n))
    return np.asarray(np.unique(np.clip(rates, 0.0, 1.0)), dtype=np.float64)


def _rises(n: int, intervals: Sequence[Interval], max_mde: float
           ) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """The base rates of the rises to check at n replicates: the rates inside the intervals
    with room for a rise of max_mde, and 1 - p for those with room for a fall (a fall from p
    is a rise from 1 - p); and which of them are mirrored falls."""
    rates = _rates_in(n, intervals)
    rise = rates[rates <= 1.0 - max_mde + 1e-12]
    fall = 1.0 - rates[rates >= max_mde - 1e-12]
    return (np.concatenate((rise, fall)),
            np.concatenate((np.zeros(rise.size, bool), np.ones(fall.size, bool))))


def _whole(intervals: Sequence[Interval]) -> bool:
    """Whether some row may have any base rate (the check over every base rate then rules)."""
    return any(lo <= 0.0 and hi >= 1.0 for lo, hi in intervals)


def _sees(paired: bool, n: int, intervals: Sequence[Interval], alpha: float, power: float,
          max_mde: float, kappa: float | None) -> bool:
    """Whether every base rate of the intervals sees a rise (and fall) of max_mde."""
    if kappa is None and _whole(intervals):
        return _sees_grid(paired, n, alpha, power, max_mde)
    p0, _ = _rises(n, intervals, max_mde)
    if p0.size == 0:
        return True
    if kappa is None:
        # blocks of neighbouring rates cleared at once, as over every base rate
        return _sees_grid(paired, n, alpha, power, max_mde, np.unique(p0))
    p1 = np.minimum(p0 + max_mde, 1.0)
    return bool((_twin_power_many(n, p0, p1, kappa, alpha, "rise") >= power).all())


def _worst(paired: bool, n: int, intervals: Sequence[Interval], alpha: float, power: float,
           max_mde: float, kappa: float | None
           ) -> tuple[float | None, float, Literal["rise", "fall"]]:
    """The largest limit over the intervals' base rates (None: one sees no change of any
    size), the base rate where, and which way (a fall's base rate given as the row shows it)."""
    if kappa is None and _whole(intervals):
        worst, where = _worst_rise(paired, n, alpha, power, max_mde)
        return worst, where, "rise"
    p0, fall = _rises(n, intervals, max_mde)
    if p0.size == 0:
        return 0.0, 0.0, "rise"
    if kappa is None:
        # the search over every base rate, on these rates: blocks cleared by the bound
        rises = np.unique(p0)
        value, rate = _worst_rise(paired, n, alpha, power, max_mde, rises)
        # a rate both a rise and a mirrored fall reads as the rise (the scan's order)
        i = int(np.flatnonzero(np.isclose(p0, rate, rtol=0.0, atol=1e-15))[0])
        way: Literal["rise", "fall"] = "fall" if fall[i] else "rise"
        return value, (1.0 - rate if fall[i] else rate), way
    found = twin_limits(n, p0, kappa=kappa, alpha=alpha, power=power)
    values = np.array([np.inf if f.value is None else f.value for f in found])
    top = float(values.max())
    # The model is symmetric: a fall from 1 - p has the rise's limit from p, to rounding.
    # Of the largest (within rounding), the first rise, as the scan over every rate reads it.
    tied = np.flatnonzero(values >= top - 1e-9) if np.isfinite(top) else np.flatnonzero(
        ~np.isfinite(values))
    unmirrored = tied[~fall[tied]]
    i = int(unmirrored[0] if unmirrored.size else tied[0])
    way = "fall" if fall[i] else "rise"
    return (None if not np.isfinite(top) else top), (
        float(1.0 - p0[i]) if fall[i] else float(p0[i])), way


@dataclass(frozen=True, slots=True)
class RatesDesign:
    """The design check read at the baseline's rates, beside the one over every base rate."""

    replicates: int
    m: int
    paired: bool
    q: float
    max_mde: float
    power: float
    kappa: float | None  # paired: the twins' discordance ratio read (None: independent)
    level: float  # each row's interval on its base rate
    intervals: tuple[Interval, ...]
    worst_limit: float | None  # over the rates inside the intervals; None: none seen
    worst_base_rate: float
    worst_direction: Literal["rise", "fall"]
    ok: bool  # every row sees max_mde at every rate inside its interval
    #: The fewest replicates at which every row sees max_mde inside its interval (the
    #: search ends on a size that passes next to one that fails); None: over the ceiling.
    fewest: int | None
    #: The same over every base rate (the check without the baseline's rates).
    fewest_any_rate: int | None
    ok_any_rate: bool
    #: When not ok: the replicates that pass, searched above ``replicates`` (the power is
    #: not quite monotone in the replicates, so the advice never names a smaller design).
    replicates_needed: int | None
    method: str

    @property
    def only_from_rates(self) -> bool:
        """The design passes thanks to the baseline's rates alone."""
        return self.ok and not self.ok_any_rate


def rates_design_check(replicates: int, m: int, intervals: Sequence[Interval], *,
                       paired: bool, q: float = 0.05, max_mde: float = 0.20,
                       power: float = 0.8, kappa: float | None = None,
                       level: float = RATES_LEVEL) -> RatesDesign:
    """The design check of a sweep of m rows whose base rates are known to lie in
    ``intervals`` (one per row, e.g. :func:`baseline_intervals`): the worst rise or fall
    limit over the rates inside them at ``replicates``, whether it is at most max_mde, and
    the fewest replicates at which it would be; beside it, the fewest for every base rate.
    ``kappa`` (paired): the twins' discordance ratio (``_twins``), None for twins
    independent given the rate. See the module docstring for what the estimate costs."""
    n = check_count("replicates", replicates)
    m = check_count("m", m)
    if n == 0 or m == 0:
        raise ValueError(f"replicates and m must be positive, got replicates={n}, m={m}")
    q, max_mde, power = check_q(q), check_q(max_mde, "max_mde"), check_power(power)
    level = check_level(level)
    rows = tuple((float(lo), float(hi)) for lo, hi in intervals)
    if len(rows) != m:
        raise ValueError(f"one interval per row: m = {m}, got {len(rows)} intervals")
    for lo, hi in rows:
        if not 0.0 <= lo <= hi <= 1.0:
            raise ValueError(f"an interval must lie in [0, 1] with low <= high, got "
                             f"({lo}, {hi})")
    if kappa is not None and not (np.isfinite(kappa) and kappa >= 0.0):
        raise ValueError(f"kappa must be a number >= 0, got {kappa!r}")
    if kappa is not None and not paired:
        raise ValueError("kappa is the twins' discordance ratio: paired designs only")
    alpha = q / m
    ceiling = MAX_REPLICATES_PAIRED if paired else MAX_REPLICATES_UNPAIRED
    worst, where, way = _worst(paired, n, rows, alpha, power, max_mde, kappa)
    ok = _sees(paired, n, rows, alpha, power, max_mde, kappa)
    def sees(size: int) -> bool:
        return _sees(paired, size, rows, alpha, power, max_mde, kappa)

    fewest = _smallest_n(sees, 1, ceiling)
    needed = None if ok else _smallest_n(sees, n + 1, ceiling)
    if kappa is None:
        any_rate = _smallest_n(lambda size: _sees_grid(paired, size, alpha, power, max_mde),
                               1, ceiling)
        ok_any = _sees_grid(paired, n, alpha, power, max_mde)
    else:
        every = ((0.0, 1.0),)
        any_rate = _smallest_n(
            lambda size: _sees(paired, size, every, alpha, power, max_mde, kappa), 1, ceiling)
        ok_any = _sees(paired, n, every, alpha, power, max_mde, kappa)
    model = "" if kappa is None else f"; twins at discordance ratio {kappa:.2f}"
    return RatesDesign(
        replicates=n, m=m, paired=paired, q=q, max_mde=max_mde, power=power, kappa=kappa,
        level=level, intervals=rows, worst_limit=worst, worst_base_rate=where,
        worst_direction=way, ok=ok, fewest=fewest, fewest_any_rate=any_rate,
        ok_any_rate=ok_any, replicates_needed=needed,
        method=(f"{design_method(paired, m, q, power)}{model}; base rates within each "
                f"row's exact {100.0 * level:g}% interval from the baseline"))
