"""Metric rows' detection limits: the smallest shift in the worse direction a row's test
would flag 4 times in 5, simulated from the baseline's own values (see :func:`metric_limit`;
the tests themselves are in :mod:`._metrics`).

The simulation runs in every review, so its statistics are computed for many simulated runs
at once: the signed-rank z from sorted integer keys, the rank sums from counts of each
distinct value (:class:`_RankSums`), runs in blocks that stop once the answer is known; for
a metric on a grid, both statistics from counts of each grid value and difference
(:class:`_GridSums`, :class:`_GridPairs`); each gives the z that ranking the runs afresh
gives, bit for bit (tests/test_stats_metrics.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
from scipy import special  # type: ignore[import-untyped]

from ._metrics import Better, FloatArray, _values
from ._roots import boundary

__all__ = ["METRIC_LIMIT_RUNS", "MetricLimit", "metric_limit"]

#: Simulated after runs behind each detection limit (the power at the limit is estimated to
#: within 2 * sqrt(0.8 * 0.2 / 1000) = 0.025, and the bisection stops at a
#: five-hundredth of the baseline's spread: the printed limit is rounded up past both).
METRIC_LIMIT_RUNS: Final = 1000


def _signed_rank_z(d: FloatArray) -> FloatArray:
    """The signed-rank statistic's z, row by row of ``d`` (runs by pairs), zeros left out and
    ties at midranks, as :func:`signed_rank_test`'s normal approximation computes it.

    The midranks are those ``scipy.stats.rankdata`` gives (the tests check it bit for bit),
    found faster: each absolute difference's bits (a non-negative float orders as its bits,
    as an unsigned integer) shifted left by one, with the sign in the freed bit, sorted as
    integers, which sorts the sizes and carries each one's sign along without an argsort.
    A tie group of sizes from position ``first`` to ``last`` (from 0) gets the midrank
    (first + last) / 2 + 1, a half-integer; every sum below is of halves and quarters far
    below 2**53, so it is exact whatever its order or its closed form."""
    n = d.shape[1]
    one = np.uint64(1)
    keys = (np.abs(d).view(np.uint64) << one) | (d > 0.0).astype(np.uint64)
    keys.sort(axis=1)
    positive = (keys & one).astype(np.float64)
    sizes = keys >> one
    zeros = (n - np.count_nonzero(sizes, axis=1)).astype(np.float64)
    place = np.arange(n, dtype=np.float64)
    # Without ties, the nonzero sizes (after the zeros) hold the ranks 1 to k, k of them:
    # their sum is k(k + 1)/2, their squares' k(k + 1)(2k + 1)/6, and the positive ones' the
    # positions' sum less the zeros once for each.
    k = n - zeros
    plus = positive @ (place + 1.0) - zeros * positive.sum(axis=1)
    total = k * (k + 1.0) / 2.0
    squares = k * (k + 1.0) * (2.0 * k + 1.0) / 6.0
    change = sizes[:, 1:] != sizes[:, :-1]
    tied = np.flatnonzero(~change.all(axis=1))  # (two zeros are a tie too)
    if tied.size:  # the runs with a tie: each group's positions get their mean
        starts = np.ones((tied.size, n), dtype=bool)
        starts[:, 1:] = change[tied]
        ends = np.ones((tied.size, n), dtype=bool)
        ends[:, :-1] = change[tied]
        first = np.maximum.accumulate(np.where(starts, place, 0.0), axis=1)
        last = np.minimum.accumulate(np.where(ends, place, n - 1.0)[:, ::-1], axis=1)[:, ::-1]
        midranks = (first + last) / 2.0 + 1.0 - zeros[tied, None]
        ranks = np.where(sizes[tied] == 0, 0.0, midranks)  # among the nonzero sizes
        plus[tied] = (positive[tied] * ranks).sum(axis=1)
        total[tied] = ranks.sum(axis=1)
        squares[tied] = (ranks ** 2).sum(axis=1)
    var = squares / 4.0
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (plus - total / 2.0) / np.sqrt(var)
    return np.where(var > 0.0, z, 0.0)


class _RankSums:
    """The rank-sum statistic's z (tie-corrected, no continuity correction) of many simulated
    runs at once, for any shift of the after runs, when every value is one of a few values.

    Both runs of a simulated comparison draw the baseline's values, so a run is its counts of
    each distinct value (``before`` and ``after``: runs by values, ``values`` sorted and
    distinct). At a shift s, U counts the pairs with after + s above before, a half for a
    tie, and the tie correction sums t**3 - t over the pooled sample's groups of equal
    values: both come from the counts and from where each shifted value falls among the
    values, without ranking the runs again at each shift. The floats compared are those
    ranking would compare (each after value plus the one shift), so U and the correction are
    the ones midranks give, exactly: small integers and halves.

    The tie correction's t**3 - t of each run's counts is kept per value and summed per run
    once; a shift changes only the values an after value now ties, whose terms are swapped.
    Every term and sum is an integer far below 2**53, so the correction is the one summing
    the pooled counts afresh gives, bit for bit."""

    __slots__ = ("_after", "_after_cubes", "_after_total", "_before", "_before_cubes",
                 "_before_total", "_below", "_n1", "_n2", "_values")

    def __init__(self, values: FloatArray, before: npt.NDArray[np.int64],
                 after: npt.NDArray[np.int64]) -> None:
        self._values = values
        self._before = _counts(before, len(values))
        self._after = _counts(after, len(values))
        # _below[:, i]: how many of a run's before values are among the i smallest values
        self._below = np.concatenate([np.zeros((len(before), 1)),
                                      np.cumsum(self._before, axis=1)], axis=1)
        self._n1 = before.shape[1]
        self._n2 = after.shape[1]
        self._before_cubes = _cubed(self._before)
        self._after_cubes = _cubed(self._after)
        self._before_total = self._before_cubes.sum(axis=1)
        self._after_total = self._after_cubes.sum(axis=1)

    def z(self, shift: float) -> FloatArray:
        """Each run's z with ``shift`` added to its after values."""
        values, before, after = self._values, self._before, self._after
        shifted = values + shift
        low = np.searchsorted(values, shifted, side="left")
        high = np.searchsorted(values, shifted, side="right")  # low + 1 on a tie
        beaten = self._below[:, low] + 0.5 * (self._below[:, high] - self._below[:, low])
        u = np.einsum("rk,rk->r", after, beaten)
        tied = high > low
        if len(np.unique(shifted)) == len(shifted):
            # each shifted value ties at most one value, and no other shifted value: the
            # groups are the before counts, with the tied after counts joined to theirs
            ties = self._before_total + self._after_total
            if tied.any():
                where = low[tied]
                ties = (ties - self._before_cubes[:, where].sum(axis=1)
                        - self._after_cubes[:, tied].sum(axis=1)
                        + _cubed(before[:, where] + after[:, tied]).sum(axis=1))
        else:  # the shift made two values one float: group the pooled values as they are
            ties = _cubes(_pooled_groups(values, shifted, before, after))
        return _rank_sum_z(u, ties, self._n1, self._n2)


class _GridSums:
    """:class:`_RankSums` at no shift, for a metric on a grid: one before sample (``before``:
    codes into ``grid``, runs by values) against each after sample a grid limit tries.

    Unshifted, every after value ties the before values equal to it, so a run's U is the sum
    over the values of its after count times its before values below plus half those equal,
    and the tie correction is t**3 - t of the pooled counts: what ``_RankSums(grid, before,
    after).z(0.0)`` gives, bit for bit (every term and sum is an integer or a half far below
    2**53, exact in any order), the before sample counted once rather than at every step."""

    __slots__ = ("_beaten", "_before", "_before_codes", "_grid", "_n1", "_offsets")

    def __init__(self, grid: FloatArray, before: npt.NDArray[np.int64]) -> None:
        self._grid = grid
        self._before_codes = before
        self._before = _counts(before, len(grid))
        below = np.cumsum(self._before, axis=1) - self._before
        self._beaten = below + 0.5 * self._before
        self._n1 = before.shape[1]
        self._offsets = len(grid) * np.arange(before.shape[0])[:, None]

    def z(self, after: npt.NDArray[np.int64]) -> FloatArray:
        """Each run's z, its after values' codes ``after`` (runs by values)."""
        counts = _counts(after, len(self._grid), self._offsets)
        u = np.einsum("rk,rk->r", counts, self._beaten)
        ties = _cubes(self._before + counts)
        return _rank_sum_z(u, ties, self._n1, after.shape[1])


class _GridPairs:
    """The signed-rank z of many simulated paired runs of a metric on a grid, from counts.

    A run's differences are after minus twin, both grid values (``twins``: the twins' codes
    into ``grid``, runs by pairs), so each is one of the few differences of two grid values:
    a run is its count of each size of difference and, of those, how many are positive. A
    group of equal sizes holds consecutive ranks, whose mean is its midrank: what
    :func:`_signed_rank_z` gives for ``grid[after] - grid[twins]``, bit for bit (its sums
    are of halves and quarters far below 2**53, exact in any order, and so are these)."""

    __slots__ = ("_grid", "_group", "_groups", "_offsets", "_positive", "_size", "_twins")

    def __init__(self, grid: FloatArray, twins: npt.NDArray[np.int64]) -> None:
        size = len(grid)
        differences = (grid[:, None] - grid[None, :]).ravel()  # [after code * size + twin]
        sizes, group = np.unique(np.abs(differences), return_inverse=True)
        # group 0 is the size 0 when a difference is zero (always: a value less itself)
        self._groups = len(sizes)
        self._group = group.reshape(-1)  # (numpy 2.0 and 2.1 shape it as the input)
        self._positive = (differences > 0.0).astype(np.float64)
        self._twins = twins
        self._offsets = self._groups * np.arange(twins.shape[0])[:, None]
        self._size = size
        self._grid = grid

    def z(self, after: npt.NDArray[np.int64]) -> FloatArray:
        """Each run's z, its after values' codes ``after`` (runs by pairs)."""
        runs, groups = self._twins.shape[0], self._groups
        pair = after * self._size + self._twins
        flat = (self._group[pair] + self._offsets).ravel()
        counts = np.bincount(flat, minlength=runs * groups).reshape(runs, groups)
        ups = np.bincount(flat, weights=self._positive[pair].ravel(),
                          minlength=runs * groups).reshape(runs, groups)
        counts = counts.astype(np.float64)
        nonzero, ups = counts[:, 1:], ups[:, 1:]
        through = np.cumsum(nonzero, axis=1)  # ranks up to each group's last, among nonzero
        midranks = (2.0 * through - nonzero + 1.0) / 2.0
        plus = (ups * midranks).sum(axis=1)
        total = (nonzero * midranks).sum(axis=1)
        squares = (nonzero * midranks ** 2).sum(axis=1)
        var = squares / 4.0
        with np.errstate(invalid="ignore", divide="ignore"):
            z = (plus - total / 2.0) / np.sqrt(var)
        return np.where(var > 0.0, z, 0.0)


def _rank_sum_z(u: FloatArray, ties: FloatArray, n1: int, n2: int) -> FloatArray:
    """Each run's rank-sum z from its U and its tie sum (t**3 - t over the pooled groups),
    samples of ``n1`` and ``n2``: 0 where the pooled values are all one."""
    n = n1 + n2
    var = n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1)))
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (u - n1 * n2 / 2.0) / np.sqrt(var)
    found: FloatArray = np.where(var > 0.0, z, 0.0)
    return found


def _cubed(t: FloatArray) -> FloatArray:
    """t**3 - t of each entry (integers: exact while below 2**53)."""
    cubed: FloatArray = t * t * t - t
    return cubed


def _cubes(t: FloatArray) -> FloatArray:
    """Per row, the sum of t**3 - t over its entries (a tie group of t values each)."""
    cubes: FloatArray = (t ** 3 - t).sum(axis=1)
    return cubes


def _pooled_groups(values: FloatArray, shifted: FloatArray, before: FloatArray,
                   after: FloatArray) -> FloatArray:
    """Per run, how many of its pooled values are each distinct float among ``values`` (the
    before run's) and ``shifted`` (the after run's)."""
    _, where = np.unique(np.concatenate([shifted, values]), return_inverse=True)
    groups = np.zeros((2 * len(values), int(where.max()) + 1))
    groups[np.arange(2 * len(values)), where] = 1.0
    result: FloatArray = after @ groups[:len(values)] + before @ groups[len(values):]
    return result


def _counts(codes: npt.NDArray[np.int64], size: int,
            offsets: npt.NDArray[np.int64] | None = None) -> FloatArray:
    """Per row of ``codes`` (indices into ``size`` values), how often each value occurs
    (``offsets``: ``size`` times each row's number, as a column, when the caller keeps it)."""
    runs = codes.shape[0]
    if offsets is None:
        offsets = size * np.arange(runs)[:, None]
    flat = (codes + offsets).ravel()
    return np.bincount(flat, minlength=runs * size).reshape(runs, size).astype(np.float64)


@dataclass(frozen=True, slots=True)
class MetricLimit:
    """The smallest shift in the worse direction one row would flag ``power`` of the time at
    ``alpha``, in the metric's units (``value``, signed: negative when lower is worse) and as a
    share of the baseline's median (``relative``); ``value`` is None when no shift within 1,000
    times the baseline's spread would be flagged (e.g. a metric the baseline holds constant)."""

    value: float | None
    relative: float | None
    alpha: float
    power: float
    runs: int


def metric_limit(baseline: npt.ArrayLike, n_after: int, *, paired: bool, better: Better,
                 alpha: float, power: float = 0.8, runs: int = METRIC_LIMIT_RUNS,
                 seed: int = 20261204) -> MetricLimit:
    """The detection limit of one metric row whose baseline values are ``baseline`` and whose
    after run will have ``n_after`` episodes (paired: as many twins), at two-sided level
    ``alpha``.

    Both runs are simulated by drawing the baseline's values with replacement, the after run's
    with the shift added (:func:`_plug_in_limit`). The baseline is itself a sample, so a limit
    read from it is off by a share that shrinks with its size, and a shift at a limit read too
    small is flagged less often than promised, more than one read too large makes up for. So
    the limit is read at a power above ``power``, chosen so that over baselines of this size a
    shift at the limit is flagged ``power`` of the time: if the power is Phi(a * shift - z) in
    the shift and log a is off by s (its spread over :data:`_LIMIT_RESAMPLES` resamples of the
    baseline), a limit read at power Phi(w) is flagged Phi(w / sqrt(1 + (z + w)**2 * s**2)) of
    the time on average, and w is solved for."""
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError(f"alpha and power must be between 0 and 1, got {alpha!r}, {power!r}")
    x = _values("baseline", baseline)
    if n_after < 1 or len(x) == 0:
        return MetricLimit(None, None, alpha, power, runs)
    if paired and n_after > len(x):
        raise ValueError(f"a paired row has at most {len(x)} twins, asked for {n_after}")
    rng = np.random.default_rng(seed)
    sign = 1.0 if better == "lower" else -1.0
    z_needed = float(special.ndtri(1.0 - alpha / 2.0))
    wanted = float(special.ndtri(power))
    resampled = [_plug_in_limit(x[rng.integers(0, len(x), len(x))], n_after, paired, sign,
                                z_needed, power, _RESAMPLE_RUNS, rng, steps=_RESAMPLE_STEPS)
                 for _ in range(_LIMIT_RESAMPLES)]
    found = [v for v in resampled if v is not None and v > 0.0]
    if len(found) < _LIMIT_RESAMPLES:
        # Some resamples of the baseline see no shift at all: too few distinct values to say.
        return MetricLimit(None, None, alpha, power, runs)
    spread = float(np.std(np.log(found), ddof=1))
    w = _calibrated_power(wanted, z_needed, spread)
    if w is None:
        return MetricLimit(None, None, alpha, power, runs)
    high = _plug_in_limit(x, n_after, paired, sign, z_needed, float(special.ndtr(w)), runs, rng)
    if high is None:
        return MetricLimit(None, None, alpha, power, runs)
    median = float(np.median(x))
    return MetricLimit(sign * high, None if median == 0.0 else high / abs(median), alpha,
                       power, runs)


#: Resamples of the baseline whose limits measure how far a limit read from it may be off, the
#: simulated runs behind each and how finely each is found (in parts of the values' spread):
#: the noise of so few runs only widens the spread measured, which raises the limit.
_LIMIT_RESAMPLES: Final = 12
_RESAMPLE_RUNS: Final = 100
_RESAMPLE_STEPS: Final = 50
#: How finely the limit itself is found, in parts of the baseline values' spread.
_LIMIT_STEPS: Final = 500


def _calibrated_power(wanted: float, z: float, s: float) -> float | None:
    """The w with w / sqrt(1 + (z + w)**2 * s**2) == wanted (None when no power reaches it:
    the left side never exceeds 1 / s)."""
    def average(w: float) -> float:
        return w / math.sqrt(1.0 + (z + w) ** 2 * s ** 2)

    top = 8.0  # Phi(8) is 1 - 6e-16: no simulated power tells it from 1
    if average(top) < wanted:
        return None
    return boundary(lambda w: average(w) >= wanted, wanted, top, steps=60)


def _plug_in_limit(x: FloatArray, n_after: int, paired: bool, sign: float, z_needed: float,
                   power: float, runs: int, rng: np.random.Generator, *,
                   steps: int = _LIMIT_STEPS) -> float | None:
    """The size of the smallest shift flagged ``power`` of the time when both runs are drawn
    from ``x`` (the after run's shifted by ``sign`` times it): the same draws serve every
    shift tried, so the estimated power rises with the shift, and the shift is found by
    bisection to a ``steps``-th of the values' spread. None past 1,000 spreads."""
    drawn = rng.integers(0, len(x), size=(runs, n_after))
    # The share flagged is only ever compared with ``power``: reached when at least
    # ``needed`` runs are flagged (the share float(k) / runs as np.mean computes it).
    needed = _runs_needed(runs, power)
    grid = np.unique(x)
    if len(grid) <= _GRID_VALUES and len(grid) < len(x):
        return _grid_limit(x, grid, drawn, paired, sign, z_needed, needed, rng, steps)
    if paired:
        after = x[drawn]
        twins = x[rng.integers(0, len(x), size=(runs, n_after))]

        def reaches(shift: float) -> bool:
            # In blocks of runs, stopping once the answer is known: each run's z is its own
            # row's, so the runs left out would not have changed it.
            count = 0
            for start in range(0, runs, _RUNS_BLOCK):
                stop = min(runs, start + _RUNS_BLOCK)
                z = _signed_rank_z(after[start:stop] + sign * shift - twins[start:stop])
                count += int(np.count_nonzero(sign * z >= z_needed))
                if count >= needed:
                    return True
                if count + runs - stop < needed:
                    return False
            return count >= needed
    else:
        values, codes = np.unique(x, return_inverse=True)
        sums = _RankSums(values, codes[rng.integers(0, len(x), size=(runs, len(x)))],
                         codes[drawn])

        def reaches(shift: float) -> bool:
            z = sums.z(sign * shift)
            return int(np.count_nonzero(sign * z >= z_needed)) >= needed

    spread = float(np.subtract(*np.percentile(x, [75, 25]))) or float(np.ptp(x))
    if spread == 0.0:
        spread = abs(float(np.median(x))) or 1.0
    high = spread
    while not reaches(high):
        high *= 2.0
        if high > 1000.0 * spread:
            return None
    return boundary(reaches, 0.0, high, width=spread / steps)


#: Simulated runs whose z a paired limit's simulation computes at a time (see ``reaches``).
_RUNS_BLOCK: Final = 125
#: A baseline of this many distinct values or fewer, some of them repeated, is a metric on a
#: grid (a judge's 1 to 5, a count of steps), whose values move from one grid value to
#: another rather than by any amount (see :func:`_grid_limit`).
_GRID_VALUES: Final = 20


def _grid_limit(x: FloatArray, grid: FloatArray, drawn: npt.NDArray[np.int64], paired: bool,
                sign: float, z_needed: float, needed: int, rng: np.random.Generator,
                steps: int) -> float | None:
    """:func:`_plug_in_limit` for a metric on a grid (``grid``: its distinct values, sorted).

    Adding a shift to every value is no change such a metric can make: a judge's scores stay
    on 1 to 5. Worse, it breaks every tie of after with before the same way, which a rank test
    reads as a clear shift, so a shift of 0.002 was "flagged 4 times in 5" while a tenth of
    the answers dropping a whole point was flagged once in five. Here a change of t steps
    moves each after value floor(t) grid values the worse way, and one more with chance
    t - floor(t) (one uniform draw per value, the same for every t, so the power rises with
    t), stopping at the grid's end. The limit is the smallest t flagged ``power`` of the
    time, given as the shift of the mean it makes on the baseline's own values, in the
    metric's units; None when even moving every value to the grid's end is not flagged."""
    runs, n_after = drawn.shape
    _, codes = np.unique(x, return_inverse=True)
    after_codes = codes[drawn]
    chance = rng.random(size=drawn.shape)
    towards = 1 if sign > 0 else -1  # lower is better: worse is up the grid
    last = len(grid) - 1
    if paired:
        pairs = _GridPairs(grid, codes[rng.integers(0, len(x), size=(runs, n_after))])
    else:
        sums = _GridSums(grid, codes[rng.integers(0, len(x), size=(runs, len(x)))])

    def moved(codes_now: npt.NDArray[np.int64], t: float,
              extra: npt.NDArray[np.bool_] | bool) -> npt.NDArray[np.int64]:
        shifted = codes_now + towards * (math.floor(t) + extra)  # a new array: clipped in place
        return np.minimum(np.maximum(shifted, 0, out=shifted), last, out=shifted)

    def reaches(t: float) -> bool:
        after = moved(after_codes, t, chance < t - math.floor(t))
        z = pairs.z(after) if paired else sums.z(after)
        return int(np.count_nonzero(sign * z >= z_needed)) >= needed

    if not reaches(float(last)):
        return None
    t = boundary(reaches, 0.0, float(last), width=1.0 / steps)
    whole, part = math.floor(t), t - math.floor(t)
    mean_shift = ((1.0 - part) * np.mean(grid[moved(codes, whole, False)] - x)
                  + part * np.mean(grid[moved(codes, whole, True)] - x))
    return abs(float(mean_shift))


def _runs_needed(runs: int, power: float) -> int:
    """The fewest of ``runs`` flagged runs whose share, ``float(k) / runs`` as ``np.mean``
    of the flags gives it, is at least ``power`` (``runs + 1``: none)."""
    k = max(0, min(runs, math.ceil(power * runs)))
    while k > 0 and (k - 1) / runs >= power:
        k -= 1
    while k <= runs and k / runs < power:
        k += 1
    return k
