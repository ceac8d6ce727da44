"""The margin test: is a row's change toward worse shown to be less than a margin D?

One row, one-sided: H0: change >= D against H1: change < D, where the change is the rate of
the event that is worse (a failure, or the absence of a success) after minus before. A
p-value at most alpha shows the change is below D ("within the margin").

The statistic is the score statistic at the margin, with the nuisance rate replaced by its
maximum-likelihood estimate under H0 (restricted to change = D):

* paired twins: Tango's score statistic (Tango 1998, Stat Med 17:891-908), the statistic
  whose inversion is the paired interval in ``_intervals`` (both in ``_scores``);
* unpaired arms: the Miettinen-Nurminen score statistic (Miettinen & Nurminen 1985, Stat Med
  4:213-226), Farrington and Manning's (1990, Stat Med 9:1447-1454) with the variance
  multiplied by N/(N - 1); equal to statsmodels' ``test_proportions_2indep(method="score")``.

Referred to the normal distribution these tests are liberal at small n and near rates of 0
or 1 (``bench/margin_size.py`` prints by how much), so the p-value is exact and
unconditional instead (Chan 1998, Stat Med 17:1403-1413): the outcomes are ordered by the
score statistic, and the p-value of an outcome is the largest probability, over every value
of the nuisance rate with change exactly D, of an outcome ordered at or below it,

    p(x) = sup_{nuisance} P(Z(X) <= Z(x) | change = D).

Its size at the margin is then at most alpha for every nuisance value, which the bench
checks by enumeration. The supremum is taken over a grid even in the binomial standard
deviation (arcsine square-root scale) and refined around its largest points; within one
tail sum the probability moves only over a fraction of a standard deviation, so the grid
and refinement find it (the bench compares them with a grid ten times finer).

The ordering statistic is the score statistic made non-decreasing in the after count for
each before count (a running maximum), so that every region {Z <= z} is, for each before
count, a run of after counts from 0: each tail is one sum of binomial CDFs. Any fixed
ordering gives a valid exact test; this one equals the score statistic wherever that is
already monotone, which is almost everywhere.

For a success (``worse_when == "fall"``) the counts of its absence are tested. The design
check (how many replicates the margin needs) is in ``_margin_design``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import special  # type: ignore[import-untyped]

from ._binomial import _binom_pmf, _logs, _window, _window_pmf
from ._check import check_count, check_counts, check_q
from ._roots import bisect, boundary, smallest
from ._scores import mn_scores, tango_scores

__all__ = [
    "MarginDesign",
    "MarginTest",
    "margin_design",
    "margin_test",
    "margin_test_paired",
    "margin_test_unpaired",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

PAIRED_METHOD = ("exact unconditional test on Tango's score statistic at the margin "
                 "(sup over the discordance rate)")
UNPAIRED_METHOD = ("exact unconditional test on the Miettinen-Nurminen score statistic at "
                   "the margin (sup over the base rate)")

# Nuisance grid: this many points per unit of sqrt(n) on the arcsine-square-root scale,
# i.e. about 0.17 standard deviations apart, plus a floor for tiny n.
_GRID_PER_ROOT_N = 12
_GRID_FLOOR = 64
# Grid points whose neighbourhoods are searched more finely, and how finely.
_REFINE_TOP = 6
_REFINE_POINTS = 32
# Designs with more outcomes than this are tested without building their whole outcome grid
# (1001 x 1001: about 8 MB an array).
_WHOLE_GRID_UP_TO = 1_002_001
# The one-sided bound is found to this width (it prints with three decimals, rounded up).
_BOUND_WIDTH = 1e-4
# Outcomes whose scores differ by less than this (relative to 1 + |z|) are ties: equal in
# exact arithmetic (e.g. with equal arms, (x0, x1) and (n - x1, n - x0) have one change and
# one score), they differ only by floating-point rounding, and a tie is always in the tail.
# Without it, a tie fell in or out of the tail as rounding went at each margin, and the
# p-value jumped between two values as the margin moved (6/10 -> 3/10 at margin 0.1: 0.0495
# or 0.058), so the bound's bisection could contradict the decision.
_TIE = 1e-9


def _at_or_below(z: float) -> float:
    """The largest score counted as at or below z: z itself, and its ties."""
    return z + _TIE * (1.0 + abs(z)) if math.isfinite(z) else z


# --------------------------------------------------------------------------- designs


def _grid(lo: float, hi: float, n: int) -> FloatArray:
    """Nuisance values from lo to hi, even on the arcsine-square-root scale."""
    size = max(_GRID_FLOOR, math.ceil(_GRID_PER_ROOT_N * math.sqrt(n)))
    t = np.linspace(math.asin(math.sqrt(lo)), math.asin(math.sqrt(hi)), size)
    return np.asarray(np.clip(np.sin(t) ** 2, lo, hi), dtype=np.float64)


def _region_probability(paired: bool, n0: int, n1: int, counts: IntArray,
                        nuisance: FloatArray, change: float) -> FloatArray:
    """P(X in region) at each nuisance value (the before rate; paired, the before-only
    rate), the true change being ``change``. The region holds, for each first count i
    (x0; paired, b), the second counts (x1; paired, c) below ``counts[i]``.

    Nuisance values are taken in blocks of neighbours, each summed over the first counts
    within 9 standard deviations (plus 2) of its binomial means: what is left out weighs
    under 1e-18."""
    nu_all = np.asarray(nuisance, dtype=np.float64)
    out = np.empty(nu_all.size)
    order = np.argsort(nu_all, kind="stable")
    for at in range(0, nu_all.size, _BLOCK):
        rows_at = order[at:at + _BLOCK]
        nu = nu_all[rows_at][:, None]
        mean = n0 * np.clip(nu[:, 0], 0.0, 1.0)
        spread = 9.0 * np.sqrt(mean * (1.0 - np.clip(nu[:, 0], 0.0, 1.0))) + 2.0
        first_lo = max(0, int(np.floor((mean - spread).min())))
        first_hi = min(n0, int(np.ceil((mean + spread).max())))
        out[rows_at] = _block_probability(paired, n0, n1, counts, nu, change, first_lo,
                                          first_hi)
    return out


_BLOCK = 32
# The paired CDF is computed exactly at every this many first counts, carried between.
_ANCHOR_EVERY = 16
# A window of the second count leaves out under 1e-18 of its probability: 2 exp(-42.5).
_TAIL_18 = 42.5
# Blocks of at most this many (nuisance value, first count) cells ask bdtr at each.
_BDTR_UP_TO = 1024


def _block_probability(paired: bool, n0: int, n1: int, counts: IntArray, nu: FloatArray,
                       change: float, first_lo: int, first_hi: int) -> FloatArray:
    """P(X in region) at each nuisance value of a block (a column), summed over the first
    counts first_lo..first_hi: each first count's probability times the probability that the
    second count is below ``counts`` there."""
    first = np.arange(first_lo, first_hi + 1, dtype=np.int64)
    below = counts[first_lo:first_hi + 1] - 1  # the largest second count in the region
    base = np.clip(nu[:, 0], 0.0, 1.0)
    logp, logq = _logs(base)
    weight = _binom_pmf(first[None, :], n0, logp[:, None], logq[:, None], n0)
    if paired:
        # Given b before-only twins, the after-only count is Binomial(n - b, pc/(1 - pb)).
        after = np.clip(base + change, 0.0, 1.0)
        ratio = np.clip(after / np.maximum(1.0 - base, 1e-300), 0.0, 1.0)
        size = n0 - first
    else:
        ratio = np.clip(base + change, 0.0, 1.0)
        size = np.full(first.size, n1, dtype=np.int64)
    if ratio.size * first.size <= _BDTR_UP_TO:  # small: scipy at every cell costs less
        cdf = _bdtr(below, size, ratio)
    elif paired:
        cdf = _shrinking_cdf(n0, first, below, ratio)
    else:
        cdf = _window_cdf(n1, below, ratio)
    return np.asarray((weight * cdf).sum(axis=1), dtype=np.float64)


def _window_cdf(n: int, below: IntArray, p: FloatArray) -> FloatArray:
    """P(Binomial(n, p[r]) <= below[j]) for each row r and column j: each row's pmf over the
    window holding all but 1e-18 of it, normalised (which cancels the rounding its log
    factorials share), and summed once."""
    lo, width = _window(n, p, _TAIL_18)
    pmf = _window_pmf(n, p, lo, width)
    table = np.zeros((p.size, width + 1))
    np.cumsum(pmf / pmf.sum(axis=1, keepdims=True), axis=1, out=table[:, 1:])
    at = np.clip(below[None, :] + 1 - lo[:, None], 0, width)
    return np.asarray(np.take_along_axis(table, at, axis=1), dtype=np.float64)


def _shrinking_cdf(n: int, first: IntArray, below: IntArray, p: FloatArray) -> FloatArray:
    """P(Binomial(n - first[j], p[r]) <= below[j]) for each row r and column j (the paired
    design: the size falls by one from column to column, ``below`` moves by a step of at
    most one almost everywhere).

    One step from column j - 1 to j is exact arithmetic on two probabilities of
    Binomial(m, p), m = n - first[j]: dropping a trial adds p P(X = k) to P(X <= k), and a
    step of ``below`` adds or removes P(X = k + 1) or P(X = k). The CDF is computed by
    ``bdtr`` at every ``_ANCHOR_EVERY``-th column and wherever ``below`` jumps further, and
    carried by these steps between (rounding there stays under 1e-13)."""
    rows, cols = p.size, first.size
    size = n - first
    step = np.diff(below)
    anchor = np.zeros(cols, dtype=bool)
    anchor[::_ANCHOR_EVERY] = True
    anchor[1:] |= np.abs(step) > 1
    at = np.flatnonzero(anchor)
    exact = _bdtr(below[at], size[at], p)
    logp, logq = _logs(p)
    logp, logq = logp[:, None], logq[:, None]
    kept = _binom_pmf(below[None, :-1], size[None, 1:], logp, logq, n)
    moved = _binom_pmf(below[None, 1:], size[None, 1:], logp, logq, n)
    rise = np.zeros((rows, cols))
    rise[:, 1:] = (p[:, None] * kept + np.where(step == 1, moved, 0.0)
                   - np.where(step == -1, kept, 0.0))
    rise[:, at] = 0.0
    carried = np.cumsum(rise, axis=1)
    segment = np.cumsum(anchor) - 1
    return np.asarray(exact[:, segment] + carried - carried[:, at[segment]], dtype=np.float64)


def _bdtr(below: IntArray, size: IntArray, p: FloatArray) -> FloatArray:
    """P(Binomial(size[j], p[r]) <= below[j]) by scipy, 0 below 0 and 1 from size up."""
    shape = (p.size, below.size)
    inside = np.broadcast_to(np.minimum(np.maximum(below, 0), size), shape)
    cdf = special.bdtr(inside, np.broadcast_to(size, shape), np.broadcast_to(p[:, None], shape))
    return np.asarray(np.where(below < 0, 0.0, np.where(below >= size, 1.0, cdf)),
                      dtype=np.float64)


def _sup(paired: bool, n0: int, n1: int, margin: float, counts: IntArray,
         grid: FloatArray, refine: bool = True) -> float:
    """sup over the nuisance of P(X in region) with the change exactly the margin: a grid,
    then (``refine``) a finer grid around its largest points."""
    if not counts.any():
        return 0.0
    values = _region_probability(paired, n0, n1, counts, grid, margin)
    if not refine:
        return min(1.0, float(values.max()))
    top = np.argsort(-values, kind="stable")[:_REFINE_TOP]
    last = grid.size - 1
    around = np.concatenate([
        np.linspace(grid[max(i - 1, 0)], grid[min(i + 1, last)], _REFINE_POINTS)
        for i in top])
    finer = _region_probability(paired, n0, n1, counts, around, margin)
    return min(1.0, max(float(values.max()), float(finer.max())))


def _nuisance_range(paired: bool, margin: float) -> tuple[float, float]:
    lo = max(0.0, -margin)
    hi = (1.0 - margin) / 2.0 if paired else min(1.0, 1.0 - margin)
    return lo, hi


def _scores(paired: bool, n0: int, n1: int, margin: float, first: FloatArray,
            second: FloatArray) -> FloatArray:
    """The score statistic at the margin for outcomes (first, second); +inf for a paired
    outcome that cannot happen (b + c > n)."""
    if paired:
        score = tango_scores(first, second, n0, margin)
        return np.asarray(np.where(first + second <= n0, score, np.inf), dtype=np.float64)
    return mn_scores(first, n0, second, n1, margin)


@dataclass(frozen=True, eq=False)
class MarginDesign:
    """Everything about one design and margin that does not depend on the outcome: the
    ordering statistic over every outcome and the nuisance grid.

    Unpaired: outcomes (x0, x1), ``order[x0, x1]``; the nuisance is the before rate.
    Paired: outcomes (b, c) of discordant twins (b + c <= n; +inf elsewhere),
    ``order[b, c]``; the nuisance is the rate of before-only twins.
    """

    paired: bool
    n0: int
    n1: int
    margin: float
    score: FloatArray  # the score statistic over every outcome (+inf where impossible)
    order: FloatArray  # the ordering statistic: score, non-decreasing along axis 1
    grid: FloatArray

    def counts(self, z: float) -> IntArray:
        """For each first count, how many second counts are ordered at or below z."""
        return np.asarray((self.order <= _at_or_below(z)).sum(axis=1), dtype=np.int64)

    def sup_tail(self, z: float) -> float:
        """sup over the nuisance of P(order(X) <= z): the exact p-value of an outcome
        ordered at z."""
        return _sup(self.paired, self.n0, self.n1, self.margin, self.counts(z), self.grid)

    def critical(self, alpha: float) -> float:
        """The largest ordering value z whose p-value is at most alpha (-inf if none): the
        test rejects exactly the outcomes ordered at or below it."""
        return _critical(self, alpha)


@functools.lru_cache(maxsize=256)
def _critical(design: MarginDesign, alpha: float) -> float:
    values = np.unique(design.order[np.isfinite(design.order)])
    # The first value whose p-value is above alpha; the one before it is the critical one.
    above = smallest(lambda k: not design.sup_tail(float(values[k])) <= alpha, -1, values.size)
    return float(values[above - 1]) if above >= 1 else -math.inf


@functools.lru_cache(maxsize=16)
def margin_design(paired: bool, n0: int, n1: int, margin: float) -> MarginDesign:
    """The cached design of the margin test for n0 before and n1 after episodes (paired:
    n0 == n1 twins) and a margin in (-1, 1)."""
    if paired and n0 != n1:
        raise ValueError(f"a paired design has one count of twins, got {n0} and {n1}")
    first = np.arange(n0 + 1, dtype=np.float64)[:, None]
    second = np.arange(n1 + 1, dtype=np.float64)[None, :]
    shape = (n0 + 1, n1 + 1)
    score = _scores(paired, n0, n1, margin, np.broadcast_to(first, shape),
                    np.broadcast_to(second, shape))
    order = np.maximum.accumulate(score, axis=1)
    score.setflags(write=False)
    order.setflags(write=False)
    grid = _grid(*_nuisance_range(paired, margin), max(n0, n1))
    grid.setflags(write=False)
    return MarginDesign(paired, n0, n1, margin, score, order, grid)


def _quick_counts(paired: bool, n0: int, n1: int, margin: float, z: float) -> IntArray:
    """For each first count, how many second counts score at or below z, without the whole
    outcome grid: each row's first score above z, by bisection over all rows at once (each
    row's score rising in the second count, as it does on every design the tests and the
    bench enumerate)."""
    first = np.arange(n0 + 1, dtype=np.float64)
    width = (n0 - np.arange(n0 + 1, dtype=np.int64) + 1) if paired else np.full(
        n0 + 1, n1 + 1, dtype=np.int64)
    z = _at_or_below(z)

    def above(rows: IntArray, second: IntArray) -> BoolArray:
        return _scores(paired, n0, n1, margin, first[rows], second.astype(np.float64)) > z

    return bisect(above, np.full(n0 + 1, -1, dtype=np.int64), width, width=1)[1]


def _quick_p(paired: bool, n0: int, n1: int, first: int, second: int,
             margin: float) -> float:
    """The p-value at one margin without the whole outcome grid (for the bound's
    bisection and large designs): the observed row's running maximum, and each row's count
    by :func:`_quick_counts`. The same as the design's p-value wherever the score rises
    with the second count."""
    row = _scores(paired, n0, n1, margin, np.full(second + 1, float(first)),
                  np.arange(second + 1, dtype=np.float64))
    counts = _quick_counts(paired, n0, n1, margin, float(row.max()))
    grid = _grid(*_nuisance_range(paired, margin), max(n0, n1))
    return _sup(paired, n0, n1, margin, counts, grid)


# --------------------------------------------------------------------------- one row


@dataclass(frozen=True, slots=True)
class MarginTest:
    """One row's margin test: is its change toward worse shown to be below ``margin``?

    ``change`` is toward worse (the worse event's rate after minus before); ``statistic`` is
    the score statistic at the margin (negative leans within); ``p`` the exact
    unconditional one-sided p-value; ``bound`` the one-sided upper bound on the change at
    level 1 - ``alpha``: the smallest margin this row would be shown within at level alpha
    (the row is within ``margin`` exactly when ``bound <= margin``: the bound's search is
    anchored at the row's own margin and decision).
    """

    margin: float
    paired: bool
    change: float
    statistic: float
    p: float
    alpha: float
    bound: float
    method: str

    @property
    def within(self) -> bool:
        """Shown within the margin at level alpha."""
        return self.p <= self.alpha

    def to_dict(self) -> dict[str, object]:
        return {"margin": self.margin, "change": self.change, "statistic": self.statistic,
                "p": self.p, "alpha": self.alpha, "bound": self.bound,
                "within": self.within}


@functools.lru_cache(maxsize=8192)
def _test(paired: bool, n0: int, n1: int, first: int, second: int, margin: float,
          alpha: float) -> MarginTest:
    if (n0 + 1) * (n1 + 1) <= _WHOLE_GRID_UP_TO:
        design = margin_design(paired, n0, n1, margin)
        p = design.sup_tail(float(design.order[first, second]))
        statistic = float(design.score[first, second])
    else:  # a large design: its outcome grid is not built (see _quick_p)
        p = _quick_p(paired, n0, n1, first, second, margin)
        statistic = float(_scores(paired, n0, n1, margin, np.array([float(first)]),
                                  np.array([float(second)]))[0])
    change = (second - first) / n0 if paired else second / n1 - first / n0
    bound = _bound(paired, n0, n1, first, second, alpha, margin, p <= alpha)
    return MarginTest(margin=margin, paired=paired, change=change,
                      statistic=statistic, p=p, alpha=alpha,
                      bound=bound, method=PAIRED_METHOD if paired else UNPAIRED_METHOD)


def _bound(paired: bool, n0: int, n1: int, first: int, second: int, alpha: float,
           margin: float, within: bool) -> float:
    """The smallest margin whose p-value is at most alpha (to _BOUND_WIDTH, from above):
    the one-sided upper bound on the change. The p-value falls as the margin grows (up to
    the exact test's discreteness). The bisection is anchored at the row's own margin and
    decision: a row within ``margin`` has its bound searched at or below it, a row not
    within above it, so the bound never contradicts the decision (a row is within exactly
    when its bound is at most its margin). The bracket on the other side starts around the
    asymptotic bound (the score statistic at the normal quantile) and is widened until it
    holds the exact one."""

    def passes(value: float) -> bool:
        return _quick_p(paired, n0, n1, first, second, _round_margin(value)) <= alpha

    z = float(special.ndtri(alpha))

    def passes_asymptotically(value: float) -> bool:
        """The score at the margin at or below the normal quantile."""
        return not _scores(paired, n0, n1, _round_margin(value), np.array([float(first)]),
                           np.array([float(second)]))[0] > z

    start = boundary(passes_asymptotically, -1.0, 1.0, steps=50)
    width = 0.01
    if within:  # the margin passes: the turn is at or below it
        hi = margin
        lo = max(-1.0, min(start, margin) - width)
        while lo > -1.0 and passes(lo):
            width *= 2.0
            hi, lo = lo, max(-1.0, lo - width)
    else:  # the margin fails: the turn is above it
        lo = margin
        hi = min(1.0, max(start, margin) + width)
        while hi < 1.0 and not passes(hi):
            width *= 2.0
            lo, hi = hi, min(1.0, hi + width)
    return boundary(passes, lo, hi, width=_BOUND_WIDTH)


def _round_margin(value: float) -> float:
    """Margins tried by the bound's bisection, kept off the ends of (-1, 1)."""
    value = min(max(value, -1.0 + 1e-9), 1.0 - 1e-9)
    return value if abs(value) > 1e-9 else 1e-9


def _check_margin(margin: object) -> float:
    return check_q(margin, "margin")


def margin_test_unpaired(x_before: int, n_before: int, x_after: int, n_after: int,
                         margin: float, *, alpha: float = 0.05,
                         worse_when: Literal["rise", "fall"] = "rise") -> MarginTest:
    """The margin test of two independent arms: ``x_before`` of ``n_before`` episodes had
    the event before, ``x_after`` of ``n_after`` after. ``worse_when="fall"`` (a success)
    tests the counts of its absence."""
    x0, n0 = check_counts("x_before", x_before, "n_before", n_before)
    x1, n1 = check_counts("x_after", x_after, "n_after", n_after)
    if n0 == 0 or n1 == 0:
        raise ValueError(f"both arms need at least one episode, got {n0} and {n1}")
    margin = _check_margin(margin)
    alpha = check_q(alpha, "alpha")
    if worse_when == "fall":
        x0, x1 = n0 - x0, n1 - x1
    elif worse_when != "rise":
        raise ValueError(f"worse_when must be 'rise' or 'fall', got {worse_when!r}")
    return _test(False, n0, n1, x0, x1, margin, alpha)


def margin_test_paired(before_only: int, after_only: int, n: int, margin: float, *,
                       alpha: float = 0.05,
                       worse_when: Literal["rise", "fall"] = "rise") -> MarginTest:
    """The margin test of ``n`` twins: ``before_only`` had the event before only,
    ``after_only`` after only. ``worse_when="fall"`` (a success) swaps them: a twin that
    lost the success is a twin worse after."""
    b = check_count("before_only", before_only)
    c = check_count("after_only", after_only)
    n = check_count("n", n)
    if n == 0:
        raise ValueError("n must be positive to compare paired runs, got 0")
    if b + c > n:
        raise ValueError(f"before_only + after_only must be at most n ({n}), got {b + c}")
    margin = _check_margin(margin)
    alpha = check_q(alpha, "alpha")
    if worse_when == "fall":
        b, c = c, b
    elif worse_when != "rise":
        raise ValueError(f"worse_when must be 'rise' or 'fall', got {worse_when!r}")
    return _test(True, n, n, b, c, margin, alpha)


def margin_test(x_before: int, n_before: int, x_after: int, n_after: int, margin: float, *,
                alpha: float = 0.05, worse_when: Literal["rise", "fall"] = "rise",
                before_only: int | None = None, after_only: int | None = None) -> MarginTest:
    """The margin test of one row: paired when ``before_only`` and ``after_only`` are given
    (then n_before == n_after is the number of twins), unpaired otherwise."""
    if before_only is None and after_only is None:
        return margin_test_unpaired(x_before, n_before, x_after, n_after, margin, alpha=alpha,
                                    worse_when=worse_when)
    if before_only is None or after_only is None:
        raise ValueError("a paired row needs both before_only and after_only")
    if n_before != n_after:
        raise ValueError(f"a paired row has one count of twins, got {n_before} and {n_after}")
    return margin_test_paired(before_only, after_only, n_before, margin, alpha=alpha,
                              worse_when=worse_when)
