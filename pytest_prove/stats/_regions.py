"""Rejection regions of the two exact tests at one level, split by direction.

Fisher's two-sided test on two arms and McNemar's mid-p test on twins. Each row of a region
is a tail (checked when the region is built), which is what lets power be summed in O(n) per
evaluation (see ``_exact_power``).

Fisher's region for equal arms is found along its boundary: under no change, with n1 = n2, the
margin-t hypergeometric is symmetric, so the two-sided p-value of a table below the centre is
twice its lower tail, and that tail is carried from table to table by the recurrences
F_t(x + 1) = F_t(x) + f_t(x + 1) and F_(t+1)(x) = F_t(x) - f_t(x)(n - x)/(2n - t). O(n) work
instead of O(n^2 log n); unequal arms keep the margin-by-margin enumeration.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from . import _dist
from ._binomial import _log_factorials
from ._exact import fisher_margin_pvalues
from ._roots import bisect

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class _FisherRegion:
    """Rejection region of the two-sided Fisher test at one level, split by direction.

    For each before count x1, ``up[x1]`` is the smallest after count rejected as a rise
    (n2 + 1 if none) and ``down[x1]`` the largest rejected as a fall (-1 if none). Rows where
    the rejected set is not a tail are kept whole in ``irregular`` (none were seen in practice,
    and none can occur with equal arms, but the power stays exact if one does).
    """

    n1: int
    n2: int
    up: IntArray
    down: IntArray
    irregular_up: tuple[tuple[int, IntArray], ...]
    irregular_down: tuple[tuple[int, IntArray], ...]


@functools.lru_cache(maxsize=32)
def _fisher_region(n1: int, n2: int, alpha: float) -> _FisherRegion:
    if n1 == n2:
        return _fisher_region_equal(n1, alpha)
    return _fisher_region_by_margin(n1, n2, alpha)


def _fisher_region_by_margin(n1: int, n2: int, alpha: float) -> _FisherRegion:
    """Every margin's two-sided p-values enumerated: O(n^2 log n), for unequal arms."""
    up_mask = np.zeros((n1 + 1, n2 + 1), dtype=bool)
    down_mask = np.zeros((n1 + 1, n2 + 1), dtype=bool)
    # Every margin's p-values, then every table's direction at once.
    x1_parts, x2_parts, p_parts = [], [], []
    for total in range(n1 + n2 + 1):
        lo, p = fisher_margin_pvalues(n1, n2, total)
        x1_parts.append(np.arange(lo, lo + p.size))
        x2_parts.append(total - x1_parts[-1])
        p_parts.append(p)
    x1, x2 = np.concatenate(x1_parts), np.concatenate(x2_parts)
    rejected = np.concatenate(p_parts) <= alpha
    # A rise: the after rate x2/n2 above the before rate x1/n1.
    rise = rejected & (x2 * n1 > x1 * n2)
    fall = rejected & (x2 * n1 < x1 * n2)
    up_mask[x1[rise], x2[rise]] = True
    down_mask[x1[fall], x2[fall]] = True
    any_up = up_mask.any(axis=1)
    up = np.where(any_up, np.argmax(up_mask, axis=1), n2 + 1).astype(np.int64)
    any_down = down_mask.any(axis=1)
    down = np.where(any_down, n2 - np.argmax(down_mask[:, ::-1], axis=1), -1).astype(np.int64)
    cols = np.arange(n2 + 1)
    tail_up = cols[None, :] >= up[:, None]
    tail_down = cols[None, :] <= down[:, None]
    irregular_up = tuple(
        (int(i), np.flatnonzero(up_mask[i]).astype(np.int64))
        for i in np.flatnonzero((up_mask != tail_up).any(axis=1))
    )
    irregular_down = tuple(
        (int(i), np.flatnonzero(down_mask[i]).astype(np.int64))
        for i in np.flatnonzero((down_mask != tail_down).any(axis=1))
    )
    return _FisherRegion(n1, n2, up, down, irregular_up, irregular_down)


# Half-width of the band of margins searched around the guessed boundary of each row.
_BAND = 6


def _fisher_region_equal(n: int, alpha: float) -> _FisherRegion:
    """The region for two arms of n, along its boundary in O(n).

    With equal arms the margin-t null distribution of the before count, f_t(x) =
    C(n, x) C(n, t - x) / C(2n, t), is symmetric about t/2, so a table (x1, t - x1) with
    x1 < t/2 (a rise) has two-sided p-value 2 F_t(x1), F_t the lower tail. F_t(x1) falls as t
    grows, so row x1 is rejected from the first margin where 2 F_t(x1) <= alpha on: a tail.
    The lower tails are carried along a path through every row (see the module docstring),
    each row searched in a band of margins around a normal-approximation guess; a row whose
    boundary falls outside its band is searched along its whole length. Falls follow by
    symmetry: (x1, x2) is rejected as a fall exactly when (n - x1, n - x2) is as a rise.
    """
    big = 2 * n
    lf = _log_factorials(big)
    constant = 2.0 * lf[n] - lf[big]

    def pmf(t: IntArray, x: IntArray | int) -> FloatArray:
        y = t - x
        inside = (x >= 0) & (x <= n) & (y >= 0) & (y <= n)
        xc = np.clip(x, 0, n)
        yc = np.clip(y, 0, n)
        tc = np.clip(t, 0, big)
        value = (constant - lf[xc] - lf[n - xc] - lf[yc] - lf[n - yc]
                 + lf[tc] + lf[big - tc])
        return np.asarray(np.where(inside, np.exp(value), 0.0), dtype=np.float64)

    up = np.full(n + 1, n + 1, dtype=np.int64)  # row n has no room for a rise
    if n >= 1:
        rows = np.arange(n, dtype=np.int64)
        t_min = 2 * rows + 1  # the first table of the row that is a rise: x2 = x1 + 1
        t_max = rows + n  # x2 = n
        z = float(_dist.norm_isf(alpha / 2.0))
        guess = t_min.astype(np.float64)
        for _ in range(4):  # t = 2 x1 + 1 + z sd_t(2 X): the normal approximation's boundary
            guess = np.clip(t_min + z * np.sqrt(guess * (big - guess) / max(big - 1, 1)),
                            t_min, t_max)
        start = np.clip(np.rint(guess).astype(np.int64) - _BAND, t_min, t_max)
        start = np.maximum.accumulate(start)  # stays within [t_min, t_max], both increasing

        # F at (x1, start[x1]) for every row, by the two recurrences along the path.
        anchor = np.empty(n)
        anchor[0] = pmf(start[:1], 0)[0]  # F_t(0) = f_t(0)
        if n > 1:
            nxt = rows[1:]
            gain = pmf(start[:-1], nxt)  # F_t(x + 1) = F_t(x) + f_t(x + 1)
            steps = start[1:] - start[:-1]
            loss = np.zeros(n - 1)
            for j in range(int(steps.max())):  # then margin by margin up to the next start
                t = start[:-1] + j
                drop = pmf(t, nxt) * (n - nxt) / np.maximum(big - t, 1)
                loss += np.where(steps > j, drop, 0.0)
            anchor[1:] = anchor[0] + np.cumsum(gain - loss)

        width = 2 * _BAND + 4
        t = start[:, None] + np.arange(width)
        valid = t <= t_max[:, None]
        x = rows[:, None]
        drop = pmf(t[:, :-1], x) * (n - x) / np.maximum(big - t[:, :-1], 1)
        tails = anchor[:, None] - np.concatenate(
            (np.zeros((n, 1)), np.cumsum(drop, axis=1)), axis=1)
        rejected = valid & (2.0 * tails <= alpha)
        found = rejected.any(axis=1)
        first = np.argmax(rejected, axis=1)
        up[:n] = np.where(found, start + first - rows, n + 1)
        bracketed = np.where(found, (first > 0) | (start == t_min),
                             start + width - 1 >= t_max)
        for row in np.flatnonzero(~bracketed):
            up[row] = _equal_row_boundary(pmf, n, alpha, int(row), int(t_min[row]),
                                          int(t_max[row]), int(start[row]), float(anchor[row]))
    down = (n - up[::-1]).astype(np.int64)  # n + 1 (no rise) becomes -1 (no fall)
    return _FisherRegion(n, n, up, down, (), ())


def _equal_row_boundary(
    pmf: Callable[[IntArray, IntArray | int], FloatArray], n: int, alpha: float, row: int,
    t_min: int, t_max: int, start: int, anchor: float,
) -> int:
    """up[row] from the lower tail at one margin, carried over every margin of the row."""
    t = np.arange(t_min, t_max + 1, dtype=np.int64)
    drop = pmf(t, row) * (n - row) / np.maximum(2 * n - t, 1)  # F_t - F_(t+1)
    at = start - t_min
    tails = np.empty(t.size)
    tails[at:] = anchor - np.concatenate(([0.0], np.cumsum(drop[at:-1])))
    tails[:at] = anchor + np.cumsum(drop[:at][::-1])[::-1]
    rejected = 2.0 * tails <= alpha
    if not rejected.any():
        return n + 1
    return int(t_min + np.argmax(rejected) - row)


@functools.lru_cache(maxsize=64)
def _mcnemar_region(n: int, alpha: float) -> IntArray:
    """For d = 0..n discordant twins, the largest minority count b (< d/2) whose mid-p is at
    most alpha, or -1 if none. The mid-p, F(b) + F(b - 1) with F the Binomial(d, 1/2) cdf,
    increases with b. It is within one of the normal approximation's
    g = floor((d - z sqrt(d))/2) nearly everywhere: F(g - 2) from the cdf and four terms
    added to it settle those d, and a vectorised bisection finds the rest."""
    d = np.arange(n + 1, dtype=np.int64)
    lo = np.full(n + 1, -1, dtype=np.int64)  # always "rejected" (virtual)
    hi = (d - 1) // 2 + 1  # never rejected (virtual): b must stay below d/2

    z = float(_dist.norm_isf(alpha / 2.0))
    g = np.floor((d - z * np.sqrt(d)) / 2.0).astype(np.int64)
    near = np.flatnonzero((g >= 2) & (g + 1 < hi))
    if near.size:
        size, base = d[near], g[near] - 2
        lf = _log_factorials(n)

        def term(b: IntArray) -> FloatArray:  # P(B = b), B ~ Binomial(size, 1/2)
            return np.asarray(np.exp(lf[size] - lf[b] - lf[size - b] - size * np.log(2.0)),
                              dtype=np.float64)

        f0 = np.asarray(_dist.binom_cdf(base, size, 0.5), dtype=np.float64)  # F(g - 2)
        f1 = f0 + term(base + 1)
        f2 = f1 + term(base + 2)
        f3 = f2 + term(base + 3)
        f4 = f3 + term(np.minimum(base + 4, size))
        # mid-p(g - 1) <= alpha < mid-p(g + 2), or g + 1 is the last b allowed
        settled = (f1 + f0 <= alpha) & ((f4 + f3 > alpha) | (g[near] + 2 >= hi[near]))
        rows = near[settled]
        found = g[near] - 1 + (f2 + f1 <= alpha) + ((f3 + f2 <= alpha) & (g[near] + 1 < hi[near]))
        lo[rows] = found[settled]
        hi[rows] = lo[rows] + 1

    def kept(rows: IntArray, b: IntArray) -> BoolArray:  # mid-p above alpha: not rejected
        midp = _dist.binom_cdf(b, d[rows], 0.5) + _dist.binom_cdf(b - 1, d[rows], 0.5)
        return np.asarray(~(midp <= alpha))

    return bisect(kept, lo, hi, width=1)[0]
