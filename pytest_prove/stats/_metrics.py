"""Metric rows: is a number an episode reports (a judge's score, its duration, its cost) shifted
after the change, per condition?

Paired rows (the runs share a salt, so replicate i of a condition ran on one seed before and
after) are tested with Wilcoxon's signed-rank test on the twins' differences; unpaired rows with
the Wilcoxon-Mann-Whitney rank-sum test. Both are rank tests, chosen because agent metrics are
rarely normal: latencies have heavy right tails, judges' scores sit on a few values with many
ties, costs are often zero. Under "the change did nothing" a pair's two values are exchangeable,
so the signs of the differences are fair coins given their absolute values: the signed-rank
statistic's null distribution, conditional on the observed ranks (midranks for ties, zero
differences left out as Wilcoxon did), is computed exactly by counting sign assignments
(:func:`signed_rank_null`), which scipy's exact method does not do once there are ties. Rows
too large to count use the normal approximation with the same tie correction, which is then
accurate to far below any level used.

Each row also gets the Hodges-Lehmann estimate of the shift (the median of the Walsh averages
of the differences, or of all after-minus-before differences when unpaired) and the
distribution-free interval around it that inverts the same test, in the metric's units.

A row's detection limit is the smallest shift, in the metric's units, that its test at level
alpha would flag in the worse direction 4 times in 5, computed from the baseline's own values
before anything runs: both runs are simulated from the baseline's values (drawn with
replacement), the after run's plus the shift, each twin independent of its partner. Twins
that agree more than independent draws (the usual case: one seed, one task) make the real
test more powerful, so the limit never promises more than the design delivers. Like every
power, it is an average over the runs a design could give, the baseline's among them (see
:func:`metric_limit` for how a baseline's own sampling error is allowed for). The simulation
draws a fixed number of runs on a fixed seed, so a limit is the same on every machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
import numpy.typing as npt
from scipy import special, stats  # type: ignore[import-untyped]

from ._roots import boundary

__all__ = ["METRIC_LIMIT_RUNS", "MetricLimit", "MetricTest", "RankTest", "metric_limit",
           "metric_test", "outward_units", "rank_sum_test", "signed_rank_null",
           "signed_rank_test"]

FloatArray = npt.NDArray[np.float64]
Better = Literal["higher", "lower"]

#: Above this many (rank, sum) cells the signed-rank null is approximated instead of counted:
#: counting costs n * sum(2 * ranks) additions, a few hundred pairs in a few milliseconds.
_EXACT_CELLS: Final = 40_000_000
#: Simulated after runs behind each detection limit (the power at the limit is estimated to
#: within 2 * sqrt(0.8 * 0.2 / 1000) = 0.025, and the bisection stops at a
#: five-hundredth of the baseline's spread: the printed limit is rounded up past both).
METRIC_LIMIT_RUNS: Final = 1000
#: Walsh averages or pairwise differences beyond this many are not formed for the interval;
#: its ends then come from the normal approximation of the estimate.
_MAX_DIFFERENCES: Final = 20_000_000


def _values(name: str, values: npt.ArrayLike) -> FloatArray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} holds a value that is not a finite number (NaN or infinity)")
    return array


def signed_rank_null(weights: npt.NDArray[np.int64]) -> FloatArray:
    """The exact null distribution of the signed-rank sum when each weight is counted with
    probability 1/2, independently: entry s is P(sum of the counted weights == s).

    ``weights`` are twice the midranks of the absolute differences (integers, so ties cost
    nothing). Built one weight at a time: the distribution with a weight is the mean of the
    distribution without it and the same shifted by the weight."""
    total = int(weights.sum())
    dist = np.zeros(total + 1)
    dist[0] = 1.0
    top = 0
    for w in weights.tolist():
        shifted = dist[:top + 1].copy()
        dist[:top + 1] *= 0.5
        dist[w:w + top + 1] += 0.5 * shifted
        top += w
    return dist


@dataclass(frozen=True, slots=True)
class RankTest:
    """A rank test's p-values: ``p`` two-sided, ``p_up`` for "after is larger" and
    ``p_down`` for "after is smaller"; ``n`` the pairs (paired) or values compared."""

    p: float
    p_up: float
    p_down: float
    n: int
    exact: bool


def signed_rank_test(differences: npt.ArrayLike) -> RankTest:
    """Wilcoxon's signed-rank test of "the differences are symmetric about 0", conditional on
    their absolute values: zeros left out, ties given their midranks, exact when counting is
    cheap (see :data:`_EXACT_CELLS`), else the normal approximation with the tie correction
    (no continuity correction, as scipy's ``method="approx"``)."""
    d = _values("differences", differences)
    d = d[d != 0.0]
    n = len(d)
    if n == 0:
        return RankTest(1.0, 1.0, 1.0, 0, True)
    ranks = stats.rankdata(np.abs(d))
    weights = np.rint(2.0 * ranks).astype(np.int64)
    observed = int(weights[d > 0].sum())
    total = int(weights.sum())
    if n * total <= _EXACT_CELLS:
        dist = signed_rank_null(weights)
        p_up = float(min(1.0, dist[observed:].sum()))
        p_down = float(min(1.0, dist[:observed + 1].sum()))
        exact = True
    else:
        mean = total / 2.0
        sd = math.sqrt(float(np.sum(weights.astype(np.float64) ** 2)) / 4.0)
        z = (observed - mean) / sd
        p_up = float(special.ndtr(-z))
        p_down = float(special.ndtr(z))
        exact = False
    return RankTest(min(1.0, 2.0 * min(p_up, p_down)), p_up, p_down, n, exact)


def rank_sum_test(before: npt.ArrayLike, after: npt.ArrayLike) -> RankTest:
    """The Wilcoxon-Mann-Whitney rank-sum test of "before and after come from one
    distribution", by scipy (exact for small samples without ties, else the normal
    approximation with the tie and continuity corrections)."""
    x = _values("before", before)
    y = _values("after", after)
    if len(x) == 0 or len(y) == 0:
        return RankTest(1.0, 1.0, 1.0, len(x) + len(y), True)
    up = float(stats.mannwhitneyu(y, x, alternative="greater", method="auto").pvalue)
    down = float(stats.mannwhitneyu(y, x, alternative="less", method="auto").pvalue)
    exact = bool(len(x) < 8 and len(y) < 8 and len(np.unique(np.concatenate([x, y])))
                 == len(x) + len(y))
    # scipy's two-sided p is twice the smaller one-sided p (capped at 1), for both methods
    return RankTest(min(1.0, 2.0 * min(up, down)), up, down, len(x) + len(y), exact)


#: Up to these sizes an interval's ends come from the exact null distribution of the rank
#: statistic (as without ties); past them, from its normal approximation.
_EXACT_INTERVAL_PAIRS: Final = 300
_EXACT_INTERVAL_CELLS: Final = 40_000


def _order_statistic_rank(count: int, sd: float, level: float,
                          null: FloatArray | None = None) -> int:
    """How many of ``count`` sorted Walsh averages (or differences) each end of a
    level-``level`` interval leaves out: the largest d with P(statistic <= d) <= (1 - level)
    / 2 under ``null`` (entry s: P(statistic == s)), which leaves the interval covering the
    shift 1 - 2 P(statistic <= d) of the time; -1 when even d = 0 covers less than
    ``level`` (too few values for any finite interval). Without ``null``, from the normal
    approximation of the statistic (mean count/2, standard deviation ``sd``)."""
    tail = (1.0 - level) / 2.0
    if null is not None:
        within = np.flatnonzero(np.cumsum(null) <= tail * (1.0 + 1e-9))
        return int(within[-1]) if within.size else -1
    z = float(special.ndtri(1.0 - tail))
    return max(0, math.floor(count / 2.0 - z * sd))


def _rank_sum_null(m: int, n: int) -> FloatArray:
    """The exact null distribution of the Mann-Whitney U of samples of ``m`` and ``n``
    distinct values: entry u is P(U == u), the Gaussian binomial coefficient's coefficients
    over C(m + n, m), built as the product over i of (1 - q**(n + i)) / (1 - q**i)."""
    size = m * n + 1
    poly = np.zeros(size)
    poly[0] = 1.0
    for i in range(1, m + 1):
        top = n + i
        if top < size:
            poly[top:] -= poly[:size - top].copy()
        for start in range(i):  # dividing by 1 - q**i: a running sum at stride i
            poly[start::i] = np.cumsum(poly[start::i])
    dist: FloatArray = poly / poly.sum()
    return dist


def _hodges_lehmann(differences: FloatArray, drop: int) -> tuple[float, float, float]:
    """The median of ``differences`` and the interval that leaves ``drop`` of them out at each
    end (the whole range of values when ``drop`` is 0, unbounded when it is -1)."""
    count = len(differences)
    estimate = float(np.median(differences))
    low_k, high_k = drop, count - 1 - drop
    if drop < 0 or low_k > high_k:
        return estimate, -math.inf, math.inf
    part = np.partition(differences, (low_k, high_k))
    return estimate, float(part[low_k]), float(part[high_k])


@dataclass(frozen=True, slots=True)
class MetricTest:
    """One metric row: the shift after minus before (Hodges-Lehmann) with its interval at
    ``level``, the test's p-values, and the baseline's median the shift is read against."""

    paired: bool
    n_before: int
    n_after: int
    shift: float
    low: float
    high: float
    level: float
    test: RankTest
    before_median: float

    @property
    def relative(self) -> float | None:
        """The shift as a share of the baseline's median (None when that median is 0)."""
        if self.before_median == 0.0:
            return None
        return self.shift / abs(self.before_median)

    @property
    def method(self) -> str:
        if self.paired:
            kind = "exact" if self.test.exact else "normal approximation"
            return (f"paired Wilcoxon signed-rank ({kind}, ties at midranks, zeros left out), "
                    "Hodges-Lehmann interval")
        return "unpaired Wilcoxon-Mann-Whitney rank-sum, Hodges-Lehmann interval"


def metric_test(before: npt.ArrayLike, after: npt.ArrayLike, *, paired: bool,
                level: float = 0.95) -> MetricTest:
    """Test one metric row: ``before`` and ``after`` the values of one condition's episodes
    (paired: twin i of each, same length), with an interval for the shift at ``level``."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be between 0 and 1, got {level!r}")
    x = _values("before", before)
    y = _values("after", after)
    median = float(np.median(x)) if len(x) else math.nan
    if paired:
        if len(x) != len(y):
            raise ValueError(f"paired values need one after value per before value, got "
                             f"{len(x)} and {len(y)}")
        d = y - x
        test = signed_rank_test(d)
        n = len(d)
        if n == 0:
            return MetricTest(True, 0, 0, math.nan, -math.inf, math.inf, level, test, median)
        count = n * (n + 1) // 2
        if count <= _MAX_DIFFERENCES:
            i, j = np.triu_indices(n)
            walsh = (d[i] + d[j]) / 2.0
            sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0)
            null = (signed_rank_null(np.arange(1, n + 1, dtype=np.int64))
                    if n <= _EXACT_INTERVAL_PAIRS else None)
            shift, low, high = _hodges_lehmann(walsh,
                                               _order_statistic_rank(count, sd, level, null))
        else:
            shift, low, high = _normal_interval(d, level)
        return MetricTest(True, n, n, shift, low, high, level, test, median)
    test = rank_sum_test(x, y)
    if len(x) == 0 or len(y) == 0:
        return MetricTest(False, len(x), len(y), math.nan, -math.inf, math.inf, level, test,
                          median)
    count = len(x) * len(y)
    if count <= _MAX_DIFFERENCES:
        differences = (y[:, None] - x[None, :]).ravel()
        sd = math.sqrt(len(x) * len(y) * (len(x) + len(y) + 1) / 12.0)
        null = (_rank_sum_null(min(len(x), len(y)), max(len(x), len(y)))
                if count <= _EXACT_INTERVAL_CELLS else None)  # symmetric in the two sizes
        shift, low, high = _hodges_lehmann(differences,
                                           _order_statistic_rank(count, sd, level, null))
    else:
        shift, low, high = _normal_interval(y, level, x)
    return MetricTest(False, len(x), len(y), shift, low, high, level, test, median)


def _normal_interval(y: FloatArray, level: float,
                     x: FloatArray | None = None) -> tuple[float, float, float]:
    """For rows too large to form every difference: the difference of medians (or the median
    difference) with a normal interval from the means' standard error, a wide stand-in."""
    z = float(special.ndtri(1.0 - (1.0 - level) / 2.0))
    if x is None:
        shift = float(np.median(y))
        se = float(np.std(y, ddof=1)) / math.sqrt(len(y))
    else:
        shift = float(np.median(y) - np.median(x))
        se = math.sqrt(float(np.var(y, ddof=1)) / len(y) + float(np.var(x, ddof=1)) / len(x))
    return shift, shift - z * 1.5 * se, shift + z * 1.5 * se


# ---------------------------------------------------------------------------
# detection limits


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
        n1, n2 = self._n1, self._n2
        n = n1 + n2
        var = n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1)))
        with np.errstate(invalid="ignore", divide="ignore"):
            z = (u - n1 * n2 / 2.0) / np.sqrt(var)
        return np.where(var > 0.0, z, 0.0)


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


def _counts(codes: npt.NDArray[np.int64], size: int) -> FloatArray:
    """Per row of ``codes`` (indices into ``size`` values), how often each value occurs."""
    runs = codes.shape[0]
    flat = (codes + size * np.arange(runs)[:, None]).ravel()
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
        twins = x[rng.integers(0, len(x), size=(runs, n_after))]
    else:
        before = codes[rng.integers(0, len(x), size=(runs, len(x)))]

    def moved(codes_now: npt.NDArray[np.int64], t: float,
              extra: npt.NDArray[np.bool_] | bool) -> npt.NDArray[np.int64]:
        return np.clip(codes_now + towards * (math.floor(t) + extra), 0, last)

    def reaches(t: float) -> bool:
        after = moved(after_codes, t, chance < t - math.floor(t))
        z = (_signed_rank_z(grid[after] - twins) if paired
             else _RankSums(grid, before, after).z(0.0))
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


def outward_units(value: float, digits: int = 2) -> str:
    """A metric's detection limit as printed: ``digits`` significant digits, rounded away from
    zero (a larger shift is detected at least as often), e.g. 0.4138 -> 0.42, -12.31 -> -13,
    1234.5 -> 1300."""
    if not math.isfinite(value) or value == 0.0:
        return f"{value:g}"
    size = abs(value)
    step = 10.0 ** (math.floor(math.log10(size)) - digits + 1)
    up = math.ceil(size / step - 1e-9) * step
    while up < size:
        up += step
    if math.floor(math.log10(up)) > math.floor(math.log10(size)):
        step *= 10.0  # 0.0999 rounds up to 0.10, which needs a digit less
    decimals = max(0, -math.floor(math.log10(step)))
    text = f"{up:.{decimals}f}"
    return f"-{text}" if value < 0 else text
