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

import functools
import math
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
import numpy.typing as npt
from scipy import special  # type: ignore[import-untyped]

__all__ = ["Better", "FloatArray", "MetricTest", "RankTest", "metric_test", "outward_units",
           "rank_sum_test", "signed_rank_null", "signed_rank_test"]

FloatArray = npt.NDArray[np.float64]
Better = Literal["higher", "lower"]

#: Above this many (rank, sum) cells the signed-rank null is approximated instead of counted:
#: counting costs n * sum(2 * ranks) additions, a few hundred pairs in a few milliseconds.
_EXACT_CELLS: Final = 40_000_000
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
    from scipy import stats  # type: ignore[import-untyped, unused-ignore]  # here: 0.7 s to import

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
    from scipy import stats  # type: ignore[import-untyped, unused-ignore]

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


@functools.lru_cache(maxsize=64)
def _rank_sum_null(m: int, n: int) -> FloatArray:
    """The exact null distribution of the Mann-Whitney U of samples of ``m`` and ``n``
    distinct values: entry u is P(U == u), the Gaussian binomial coefficient's coefficients
    over C(m + n, m), built as the product over i of (1 - q**(n + i)) / (1 - q**i).

    Kept for the sizes last asked (read-only): a review tests every condition of a metric on
    samples of one size, and building it is most of an unpaired test (4 ms at 40 and 40)."""
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
    dist.flags.writeable = False
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
