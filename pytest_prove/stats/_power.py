"""Detection limits: the smallest change one row alone would be flagged for.

A row's limit is the smallest rise (or fall) from its base rate p0 (its rate before) at which its
own test, at level alpha = q/m, rejects in that direction with probability ``power`` (0.8, "4
times in 5"). Power is computed exactly: the test's rejection region is enumerated once per
design and level, and the probability of landing in it is summed over the binomial outcomes.
Power is a polynomial in the after rate p1, hence continuous, and it rises with the change, so
the limit is found by bisection on the change.

Designs
-------
unpaired (Fisher)
    before ~ Binomial(n1, p0) and after ~ Binomial(n2, p1), independent.
paired (McNemar mid-p)
    n twins; within a twin, before ~ Bernoulli(p0) and after ~ Bernoulli(p1), drawn
    independently given the condition's rates. A twin is before-only with probability
    p0 (1 - p1) and after-only with probability (1 - p0) p1. An agent served by an LLM does not
    replay on a seed, so twins are not copies; if they are positively correlated, discordant
    twins are rarer, the test is more powerful, and this limit errs on the large (safe) side.

How it stays fast
-----------------
* Each row of a rejection region is a tail (checked when the region is built), so power is a
  sum over one arm's outcomes of its probability times one binomial tail of the other: O(n) per
  evaluation, not O(n^2). Outcomes beyond a window of the binomial that holds all but 3e-17 of
  its probability (Bernstein's inequality) are left out of the sums.
* Fisher's region for equal arms is found along its boundary: under no change, with n1 = n2,
  the margin-t hypergeometric is symmetric, so the two-sided p-value of a table below the
  centre is twice its lower tail, and that tail is carried from table to table by the
  recurrences F_t(x + 1) = F_t(x) + f_t(x + 1) and F_(t+1)(x) = F_t(x) - f_t(x)(n - x)/(2n - t).
  O(n) work instead of O(n^2 log n); unequal arms keep the margin-by-margin enumeration.
* The design check does not compute a limit at every base rate k/n. Power falls as p0 rises
  with p1 fixed (both tests' regions are monotone; checked when built), so p0 + limit(p0)
  never falls with p0, and for base rates a <= p0 <= b,

      limit(p0) <= w  whenever  power(b, a + w) >= target.

  A candidate worst limit comes from the symmetry power(p0, p1) = power(1 - p1, 1 - p0)
  (swap the runs, count non-events): the worst base rate lies near (1 - limit)/2. The bound
  then clears whole blocks of base rates in one evaluation each, and any single base rate it
  cannot clear has its limit computed. The result is the maximum over every k/n, as a
  rate-by-rate scan gives it (tests compare the two). The replicate search checks each size
  tried at every base rate the same way.
* Power sums are accurate to rounding, about 1e-11 of the power at 5,000 replicates (the
  binomial probabilities come from a table of log k!); limits move by far less than printed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import special, stats  # type: ignore[import-untyped]

from ._check import check_count, check_counts, check_probability, check_q
from ._exact import fisher_margin_pvalues

__all__ = [
    "PAIRED_MODEL",
    "DesignCheck",
    "Limit",
    "Limits",
    "design_check",
    "detection_power",
    "fall_limit",
    "limits",
    "replicates_for",
    "rise_limit",
]

Direction = Literal["rise", "fall"]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
PowerAt = Callable[[FloatArray], FloatArray]

PAIRED_MODEL = (
    "twins drawn independently given the condition's rates (before ~ Bernoulli(p0), "
    "after ~ Bernoulli(p1)); positively correlated twins only make the test stronger, "
    "so the paired limit is conservative"
)

# Largest design the replicate search will try; beyond it the answer is "more than this".
MAX_REPLICATES_UNPAIRED = 5_000
MAX_REPLICATES_PAIRED = 100_000


@dataclass(frozen=True, slots=True)
class Limit:
    """A detection limit: ``value`` when ``status == "ok"``, else ``None``.

    ``"no room"``: the rate cannot move that way (0 for a fall, 1 for a rise).
    ``"none detectable"``: no change of any size is flagged with the asked power.
    """

    value: float | None
    status: Literal["ok", "no room", "none detectable"]

    def sees(self, change: float) -> bool:
        """True when a change of this size would be flagged with the asked power."""
        return self.value is not None and self.value <= change + 1e-12

    def __str__(self) -> str:
        return f"{self.value:.3f}" if self.value is not None else self.status


@dataclass(frozen=True, slots=True)
class Limits:
    rise: Limit
    fall: Limit


@dataclass(frozen=True, slots=True)
class DesignCheck:
    """The worst rise limit over base rates for a design, before anything runs."""

    replicates: int
    m: int
    paired: bool
    q: float
    max_mde: float
    power: float
    worst_limit: float | None  # None: some base rate has no detectable rise at all
    worst_base_rate: float
    ok: bool
    replicates_needed: int | None  # None when ok, or when more than the search's ceiling
    method: str


# --------------------------------------------------------------------------- binomials

# Stands for log(0): times a positive count it sends exp() to 0, times a zero count it is 0.
_LOG_ZERO = -1e6
# Bernstein: P(|X - np| >= h) <= 2 exp(-_TAIL) for h = _TAIL/3 + sqrt((_TAIL/3)^2 + 2 _TAIL npq).
_TAIL = 39.0
_LOG_FACTORIALS: list[FloatArray] = [np.zeros(1)]


def _log_factorials(top: int) -> FloatArray:
    """log k! for k = 0..top at least (one table, grown on demand)."""
    table = _LOG_FACTORIALS[0]
    if table.size <= top:
        size = max(top + 1, 2 * table.size)
        table = np.asarray(special.gammaln(np.arange(size, dtype=np.float64) + 1.0),
                           dtype=np.float64)
        _LOG_FACTORIALS[0] = table
    return table


def _logs(p: FloatArray) -> tuple[FloatArray, FloatArray]:
    """log p and log(1 - p), with _LOG_ZERO standing for log 0."""
    logp = np.full(p.shape, _LOG_ZERO)
    logq = np.full(p.shape, _LOG_ZERO)
    np.log(p, out=logp, where=p > 0.0)
    np.log1p(-p, out=logq, where=p < 1.0)
    return logp, logq


def _binom_pmf(
    k: IntArray, n: IntArray | int, logp: FloatArray, logq: FloatArray, top: int
) -> FloatArray:
    """P(Binomial(n, p) = k), 0 outside 0 <= k <= n (broadcasting; ``top`` >= every n)."""
    lf = _log_factorials(top)
    inside = (k >= 0) & (k <= n)
    kc = np.clip(k, 0, n)
    value = lf[n] - lf[kc] - lf[n - kc] + kc * logp + (n - kc) * logq
    return np.asarray(np.where(inside, np.exp(value), 0.0), dtype=np.float64)


@functools.lru_cache(maxsize=16)
def _log_choose(n: int) -> FloatArray:
    """log C(n, k) for k = 0..n."""
    lf = _log_factorials(n)
    k = np.arange(n + 1)
    return np.asarray(lf[n] - lf[k] - lf[n - k], dtype=np.float64)


def _window(n: int, p: FloatArray, tail: float = _TAIL) -> tuple[IntArray, int]:
    """First outcome of a window of each Binomial(n, p[k]) that holds all but 2 exp(-tail)
    of its probability (3e-17 by default), and a width common to all of them; every window
    lies within 0..n."""
    if p.size == 0:
        return np.zeros(0, dtype=np.int64), 1
    third = tail / 3.0
    half = third + np.sqrt(third * third + 2.0 * tail * n * p * (1.0 - p))
    mean = n * p
    lo = np.maximum(np.floor(mean - half), 0.0).astype(np.int64)
    width = min(int((np.ceil(mean + half) - lo).max()) + 1, n + 1)
    return np.minimum(lo, n + 1 - width), width


def _window_pmf(n: int, p: FloatArray, lo: IntArray, width: int) -> FloatArray:
    """P(Binomial(n, p[k]) = lo[k] + j) for j < width, a window within 0..n."""
    k = lo[:, None] + np.arange(width)
    logp, logq = _logs(p)
    value = _log_choose(n)[k] + (n * logq)[:, None] + k * (logp - logq)[:, None]
    return np.asarray(np.exp(value), dtype=np.float64)


# --------------------------------------------------------------------------- regions


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
    for total in range(n1 + n2 + 1):
        lo, p = fisher_margin_pvalues(n1, n2, total)
        x1 = np.arange(lo, lo + p.size)
        x2 = total - x1
        rejected = p <= alpha
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
        z = float(stats.norm.isf(alpha / 2.0))
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

    z = float(stats.norm.isf(alpha / 2.0))
    g = np.floor((d - z * np.sqrt(d)) / 2.0).astype(np.int64)
    near = np.flatnonzero((g >= 2) & (g + 1 < hi))
    if near.size:
        size, base = d[near], g[near] - 2
        lf = _log_factorials(n)

        def term(b: IntArray) -> FloatArray:  # P(B = b), B ~ Binomial(size, 1/2)
            return np.asarray(np.exp(lf[size] - lf[b] - lf[size - b] - size * np.log(2.0)),
                              dtype=np.float64)

        f0 = np.asarray(stats.binom.cdf(base, size, 0.5), dtype=np.float64)  # F(g - 2)
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
    while True:
        active = np.flatnonzero(hi - lo > 1)
        if active.size == 0:
            break
        mid = (lo[active] + hi[active]) // 2
        midp = stats.binom.cdf(mid, d[active], 0.5) + stats.binom.cdf(mid - 1, d[active], 0.5)
        ok = midp <= alpha
        lo[active] = np.where(ok, mid, lo[active])
        hi[active] = np.where(ok, hi[active], mid)
    return lo


# --------------------------------------------------------------------------- power


@dataclass(frozen=True, slots=True)
class _Fisher:
    """Power of one Fisher design. ``monotone``: every rise row is a tail and its start never
    falls as x1 grows, so power(p0, p1) in the rise direction falls as p0 rises."""

    region: _FisherRegion
    monotone: bool

    def prepare(self, p0: FloatArray, direction: Direction, tail: float = _TAIL) -> PowerAt:
        """Power at (p0[k], p1[k]) as a function of p1, the before arm's part done once:
        sum over x1 of P(X1 = x1) P(X2 in the region's row x1). Leaving out the outcomes
        beyond the windows (``tail``) can only lower the result."""
        region = self.region
        n1, n2 = region.n1, region.n2
        lo1, width1 = _window(n1, p0, tail)
        weight = _window_pmf(n1, p0, lo1, width1)
        x1 = lo1[:, None] + np.arange(width1)
        rise = direction == "rise"
        bound = (region.up if rise else region.down)[x1]
        irregular = [
            (x1 == row, cols)
            for row, cols in (region.irregular_up if rise else region.irregular_down)
        ]

        def power_at(p1: FloatArray) -> FloatArray:
            lo2, width2 = _window(n2, p1, tail)
            pmf2 = _window_pmf(n2, p1, lo2, width2)
            table = np.zeros((p1.size, width2 + 1))
            if rise:  # table[j] = P(X2 >= lo2 + j)
                np.cumsum(pmf2[:, ::-1], axis=1, out=table[:, width2 - 1::-1])
                index = np.minimum(np.maximum(bound - lo2[:, None], 0), width2)
            else:  # table[j] = P(X2 <= lo2 + j - 1)
                np.cumsum(pmf2, axis=1, out=table[:, 1:])
                index = np.minimum(np.maximum(bound - lo2[:, None] + 1, 0), width2)
            inner = np.take_along_axis(table, index, axis=1)
            if irregular:
                log_p1, log_q1 = _logs(p1)
                for mask, cols in irregular:
                    value = _binom_pmf(cols[None, :], n2, log_p1[:, None], log_q1[:, None],
                                       n2).sum(axis=1)
                    inner = np.where(mask, value[:, None], inner)
            return np.asarray(np.einsum("ij,ij->i", weight, inner), dtype=np.float64)

        return power_at


@dataclass(frozen=True, slots=True)
class _Paired:
    """Power of one paired design under the independent-twins model. ``monotone``: bcrit
    steps by 0 or 1 from d to d + 1, so the rise region (b <= bcrit[b + c], c > b) only
    grows as b falls or c grows, and power falls as p0 rises (p1 fixed)."""

    bcrit: IntArray
    monotone: bool
    log_choose: FloatArray  # log C(d, bcrit[d]); _LOG_ZERO where bcrit[d] < 0
    factor: FloatArray  # (d + 1)/(bcrit[d] + 1) - 1 where bcrit steps up from d, else -1
    first_step: int  # the d at which bcrit steps from -1 to 0 (-1 if it never does)

    def prepare(self, p0: FloatArray, direction: Direction, tail: float = _TAIL) -> PowerAt:
        """A twin is before-only with probability p0 (1 - p1) and after-only with
        (1 - p0) p1; the number of discordant twins d is Binomial(n, their sum), and given d
        the minority side (before-only for a rise) is Binomial(d, its share s) and must be at
        most bcrit[d]. That conditional cdf is carried from d to d + 1 by
        P(B_(d+1) <= k) = P(B_d <= k) - s P(B_d = k), plus P(B_(d+1) = k + 1) =
        P(B_d = k) s (d + 1)/(k + 1) when bcrit steps up. Leaving out the d beyond the window
        (``tail``) can only lower the result."""
        bcrit = self.bcrit
        log_choose, factor, first_step = self.log_choose, self.factor, self.first_step
        n = bcrit.size - 1
        unit_steps = self.monotone

        def power_at(p1: FloatArray) -> FloatArray:
            p_before_only = p0 * (1.0 - p1)
            p_after_only = (1.0 - p0) * p1
            p_discordant = p_before_only + p_after_only
            minority = p_before_only if direction == "rise" else p_after_only
            live = p_discordant > 0.0
            share = np.where(live, minority / np.where(live, p_discordant, 1.0), 0.0)
            p_discordant = np.where(live, p_discordant, 0.0)
            lo, width = _window(n, p_discordant, tail)
            weight = _window_pmf(n, p_discordant, lo, width)
            d = lo[:, None] + np.arange(width)
            crit = bcrit[d]
            if unit_steps and width > 1:
                log_s, log_t = _logs(share)
                d0, c0 = d[:, 0], crit[:, 0]
                first = np.where(c0 < 0, 0.0, special.bdtr(np.maximum(c0, 0), d0, share))
                here, now = d[:, :-1], crit[:, :-1]
                # P(B_(d+1) <= bcrit[d+1]) - P(B_d <= bcrit[d]) = s P(B_d = bcrit[d]) times
                # factor[d]: -1, or (d + 1)/(bcrit[d] + 1) - 1 where bcrit steps up
                step = np.exp(log_choose[here] + now * (log_s - log_t)[:, None]
                              + here * log_t[:, None] + log_s[:, None]) * factor[here]
                if first_step >= 0:  # from -1 to 0: + P(B_(d+1) = 0) = (1 - s)^(d + 1)
                    column = first_step - lo
                    rows = np.flatnonzero((column >= 0) & (column < width - 1))
                    step[rows, column[rows]] += np.exp((first_step + 1) * log_t[rows])
                inner = np.empty((share.size, width))
                inner[:, 0] = first
                np.cumsum(step, axis=1, out=inner[:, 1:])
                inner[:, 1:] += first[:, None]
                np.minimum(np.maximum(inner, 0.0, out=inner), 1.0, out=inner)
            else:
                inner = np.where(crit < 0, 0.0, special.bdtr(np.maximum(crit, 0), d,
                                                             share[:, None]))
            power = np.einsum("ij,ij->i", weight, inner)
            return np.asarray(np.where(live, power, 0.0), dtype=np.float64)

        return power_at


_Evaluator = _Fisher | _Paired


@functools.lru_cache(maxsize=64)
def _evaluator(paired: bool, n1: int, n2: int, alpha: float) -> _Evaluator:
    if paired:
        bcrit = _mcnemar_region(n1, alpha)
        steps = np.diff(bcrit)
        lf = _log_factorials(n1)
        d = np.arange(n1 + 1)
        b = np.maximum(bcrit, 0)
        log_choose = np.where(bcrit >= 0, lf[d] - lf[b] - lf[d - b], _LOG_ZERO)
        factor = np.full(n1 + 1, -1.0)
        up = np.flatnonzero((steps > 0) & (bcrit[:-1] >= 0))
        factor[up] = (up + 1) / (bcrit[up] + 1) - 1.0
        starts = np.flatnonzero((bcrit[:-1] < 0) & (bcrit[1:] >= 0))
        return _Paired(bcrit, bool(((steps == 0) | (steps == 1)).all()),
                       np.asarray(log_choose, dtype=np.float64), factor,
                       int(starts[0]) if starts.size else -1)
    region = _fisher_region(n1, n2, alpha)
    monotone = not region.irregular_up and bool((np.diff(region.up) >= 0).all())
    return _Fisher(region, monotone)


def _power_batch(
    paired: bool, n1: int, n2: int, alpha: float,
    p0: FloatArray, p1: FloatArray, direction: Direction,
) -> FloatArray:
    return _evaluator(paired, n1, n2, alpha).prepare(p0, direction)(p1)


def detection_power(
    p_before: float,
    p_after: float,
    n_before: int,
    n_after: int | None = None,
    *,
    paired: bool,
    alpha: float,
    direction: Direction | None = None,
) -> float:
    """Exact probability that one row is rejected at level ``alpha`` in ``direction``.

    ``direction`` defaults to the direction of the change (rise when p_after >= p_before).
    """
    p0 = check_probability(p_before, "p_before")
    p1 = check_probability(p_after, "p_after")
    n1, n2 = _design(n_before, n_after, paired)
    alpha = check_q(alpha, "alpha")
    if direction is None:
        direction = "rise" if p1 >= p0 else "fall"
    _check_direction(direction)
    return float(_power_batch(paired, n1, n2, alpha, np.array([p0]), np.array([p1]), direction)[0])


# --------------------------------------------------------------------------- limits

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
    lo = np.zeros(p0.size)
    hi = top.copy()
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        hit = power_at(np.minimum(np.maximum(p0 + sign * mid, 0.0), 1.0)) >= power
        hi = np.where(hit, mid, hi)
        lo = np.where(hit, lo, mid)
    return hi


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


def _design(n_before: object, n_after: object, paired: bool) -> tuple[int, int]:
    n1 = check_count("n_before", n_before)
    n2 = n1 if n_after is None else check_count("n_after", n_after)
    if paired and n2 != n1:
        raise ValueError(
            f"a paired design has one count of twins; got n_before={n1} and n_after={n2}"
        )
    if n1 == 0 or n2 == 0:
        raise ValueError(f"both arms need at least one replicate, got {n1} and {n2}")
    return n1, n2


def _check_direction(direction: str) -> None:
    if direction not in ("rise", "fall"):
        raise ValueError(f"direction must be 'rise' or 'fall', got {direction!r}")


def _check_power(power: object) -> float:
    return check_q(power, "power")


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
    n1, n2 = _design(n1, n_after, paired)
    alpha = check_q(alpha, "alpha")
    power = _check_power(power)
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


# --------------------------------------------------------------------------- replicates


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
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return hi


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
    power = _check_power(power)
    for direction in directions:
        _check_direction(direction)
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
    z_a = float(stats.norm.isf(alpha / 2.0))
    z_b = float(stats.norm.isf(1.0 - power))
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
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return hi


# --------------------------------------------------------------------------- design check


def _scan_rates(n: int, max_mde: float) -> FloatArray:
    """Base rates k/n a condition of n replicates can show, with room for a rise of max_mde.
    (A fall from p0 mirrors a rise from 1 - p0, so these also cover every fall.)"""
    k = np.arange(n + 1)
    rates = k / n
    return np.asarray(rates[rates <= 1.0 - max_mde + 1e-12], dtype=np.float64)


# Designs with at most this many base rates to scan are scanned rate by rate.
_SCAN_ALL = 24
# Bisection steps of the coarse-to-fine search for a candidate worst base rate.
_SEED_BISECTIONS = 12
# A limit found by bisection lies within room / 2**_BISECTIONS above the root: clearing base
# rates at the candidate minus this keeps a rate-by-rate scan's maximum.
_GUARD = 2.0 ** -_BISECTIONS
# Windows of the power sums when clearing blocks: all but 4e-9 of each binomial. The sums
# then fall short of the power by at most that, so a block cleared is cleared; a single rate
# not cleared is looked at again with the full windows.
_CLEAR_TAIL = 20.0
# Blocks tested per evaluation (bounds the memory of very large designs).
_CHUNK = 512


def _worst_rise_scan(
    paired: bool, n: int, alpha: float, power: float, max_mde: float
) -> tuple[float | None, float]:
    """The worst rise limit by computing the limit at every base rate."""
    rates = _scan_rates(n, max_mde)
    found = _cached_limits(paired, n, n, [float(r) for r in rates], alpha, power, "rise")
    worst: float = -1.0
    worst_p0 = 0.0
    for p0, limit in zip(rates, found, strict=True):
        if limit.value is None:
            return None, float(p0)
        if limit.value > worst:
            worst, worst_p0 = limit.value, float(p0)
    return worst, worst_p0


def _clear_blocks(
    a: IntArray, b: IntArray, clears: Callable[[IntArray, IntArray], BoolArray],
    on_single: Callable[[IntArray], bool],
) -> bool:
    """Clear the blocks of base rates [a, b], halving every block ``clears`` rejects; single
    rates it rejects go to ``on_single`` (which may stop the search by returning False).
    True when every block was cleared or handed over."""
    while a.size:
        ok = np.concatenate([clears(a[i : i + _CHUNK], b[i : i + _CHUNK])
                             for i in range(0, a.size, _CHUNK)])
        a, b = a[~ok], b[~ok]
        single = a == b
        if single.any() and not on_single(a[single]):
            return False
        a, b = a[~single], b[~single]
        mid = (a + b) // 2
        a, b = np.concatenate((a, mid + 1)), np.concatenate((mid, b))
    return True


def _fitted_blocks(last: int, widths: IntArray) -> tuple[IntArray, IntArray]:
    """Blocks over base rates 0..last, right to left, the one ending at b ``widths[b]`` wide."""
    starts: list[int] = []
    ends: list[int] = []
    b = last
    while b >= 0:
        a = max(0, b - int(widths[b]) + 1)
        starts.append(a)
        ends.append(b)
        b = a - 1
    return np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)


def _worst_rise(
    paired: bool, n: int, alpha: float, power: float, max_mde: float
) -> tuple[float | None, float]:
    """The worst rise limit over the base rates k/n with room for max_mde, and where.

    Equal to the rate-by-rate scan (:func:`_worst_rise_scan`; a test compares them): the
    first base rate with no detectable rise if there is one, else the largest limit, at the
    smallest base rate that has it.
    """
    rates = _scan_rates(n, max_mde)
    evaluator = _evaluator(paired, n, n, alpha)
    if rates.size <= _SCAN_ALL or not evaluator.monotone:
        return _worst_rise_scan(paired, n, alpha, power, max_mde)
    last = rates.size - 1

    def reaches(k: int) -> bool:
        p0 = rates[k : k + 1]
        at = evaluator.prepare(p0, "rise")(np.clip(p0 + (1.0 - p0), 0.0, 1.0))
        return bool(at[0] >= power)

    if not reaches(last):
        # Power at p1 = 1 falls as p0 rises: bisect for the first rate that cannot reach it.
        lo, hi = -1, last
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if reaches(mid):
                lo = mid
            else:
                hi = mid
        return None, float(rates[hi])

    def limits_at(ks: IntArray, steps: int) -> FloatArray:
        p0 = rates[ks]
        return _bisect(evaluator.prepare(p0, "rise"), p0, 1.0 - p0, 1.0, power, steps)

    # A candidate. Both tests are unchanged by swapping the runs and complementing the
    # outcomes, so power(p0, p1) = power(1 - p1, 1 - p0): the curve of limits is symmetric
    # and a smooth one peaks where p0 + p1 = 1, at p0 = (1 - limit)/2. Rough limits on a
    # coarse grid give the limit; exact ones at the grid rates nearest that point, and at the
    # coarse maximum, give the candidate.
    coarse = np.unique(np.rint(np.linspace(0, last, 17)).astype(np.int64))
    rough = limits_at(coarse, _SEED_BISECTIONS)
    best, worst = int(coarse[int(np.argmax(rough))]), -1.0
    guess = float(rough.max())
    for _ in range(4):
        centre = int(np.floor(n * (1.0 - guess) / 2.0))
        near = np.arange(centre - 2, centre + 4)
        ks = np.unique(np.clip(np.concatenate((near, [best])), 0, last))
        values = limits_at(ks, _BISECTIONS)
        i = int(np.argmax(values))
        if values[i] > worst:
            best, worst = int(ks[i]), float(values[i])
        if guess == worst or not (near[0] < best < near[-1]):
            guess = worst
            continue
        break

    # Then every base rate: cleared in blocks by the bound (with windows left a little
    # narrower: a lower bound on power only makes clearing harder), or its limit computed.
    def clears(a: IntArray, b: IntArray) -> BoolArray:
        p1 = np.minimum(rates[a] + (worst - _GUARD), 1.0)
        return evaluator.prepare(rates[b], "rise", _CLEAR_TAIL)(p1) >= power

    def on_single(ks: IntArray) -> bool:
        nonlocal worst, best
        while ks.size:
            # The likeliest few first: the rest may clear under the new worst.
            top = ks[np.argsort(-limits_at(ks, 20), kind="stable")[:3]] if ks.size > 3 else ks
            for k, value in zip(top, limits_at(top, _BISECTIONS), strict=True):
                if value > worst or (value == worst and k < best):
                    worst, best = float(value), int(k)
            ks = np.setdiff1d(ks, top)
            if ks.size:
                ks = ks[~clears(ks, ks)]
        return True

    # Block [a, b] clears when limit(b) + (b - a)/n <= worst: sized from the limits known so
    # far (interpolated; a block sized too wide only costs a split).
    known = np.concatenate((coarse, ks))
    order = np.argsort(known, kind="stable")
    estimate = np.interp(np.arange(last + 1), known[order],
                         np.concatenate((rough, values))[order])
    widths = 1 + np.floor(0.8 * n * np.maximum(worst - estimate, 0.0)).astype(np.int64)
    _clear_blocks(*_fitted_blocks(last, widths), clears, on_single)
    return worst, float(rates[best])


def _sees_grid(
    paired: bool, n: int, alpha: float, power: float, max_mde: float
) -> bool:
    """Whether every base rate k/n with room sees a rise of max_mde: power(p0, p0 + max_mde)
    >= power at each (as :func:`_sees_all` on the whole scan), with blocks of base rates
    cleared at once by the bound power(p0, p0 + c) >= power(b, a + c) for a <= p0 <= b."""
    rates = _scan_rates(n, max_mde)
    evaluator = _evaluator(paired, n, n, alpha)
    if rates.size <= _SCAN_ALL or not evaluator.monotone:
        return _sees_all(paired, n, rates, alpha, power, max_mde, "rise")
    last = rates.size - 1

    def sees(ks: IntArray) -> bool:
        p0 = rates[ks]
        return bool((evaluator.prepare(p0, "rise")(np.minimum(p0 + max_mde, 1.0))
                     >= power).all())

    # The weakest base rates first (near (1 - max_mde)/2, by the symmetry of power): most
    # sizes that fail, fail there.
    centre = int(np.floor(n * (1.0 - max_mde) / 2.0))
    if not sees(np.unique(np.clip(np.arange(centre - 2, centre + 4), 0, last))):
        return False

    def clears(a: IntArray, b: IntArray) -> BoolArray:
        p1 = np.minimum(rates[a] + max_mde, 1.0)
        return evaluator.prepare(rates[b], "rise", _CLEAR_TAIL)(p1) >= power

    # Blocks sized from rough limits on a coarse grid (a block too wide only costs a split).
    coarse = np.unique(np.rint(np.linspace(0, last, 17)).astype(np.int64))
    p0 = rates[coarse]
    rough = _bisect(evaluator.prepare(p0, "rise"), p0, 1.0 - p0, 1.0, power, _SEED_BISECTIONS)
    estimate = np.interp(np.arange(last + 1), coarse, rough)
    widths = 1 + np.floor(0.8 * n * np.maximum(max_mde - estimate, 0.0)).astype(np.int64)
    return _clear_blocks(*_fitted_blocks(last, widths), clears, sees)


def design_method(paired: bool, m: int, q: float, power: float) -> str:
    if paired:
        test = f"exact McNemar mid-p on twins; model: {PAIRED_MODEL}"
    else:
        test = "Fisher's exact test, two-sided"
    return f"{test}; level q/m = {q:g}/{m}, power {power:g}, exact"


def design_check(
    replicates: int,
    m: int,
    *,
    paired: bool,
    q: float = 0.05,
    max_mde: float = 0.20,
    power: float = 0.8,
) -> DesignCheck:
    """Check a design before it runs: the worst rise limit over base rates must not exceed
    ``max_mde``; if it does, give the replicates per condition that bring it there.

    Base rates considered are every k/replicates a condition can show (k = 0..replicates)
    with room for a rise of max_mde; the worst is found without computing every limit (see
    the module docstring) and equals the rate-by-rate maximum. The replicate search doubles
    from replicates + 1, then bisects, each size checked on its own full set of base rates.
    """
    n = check_count("replicates", replicates)
    m = check_count("m", m)
    if n == 0 or m == 0:
        raise ValueError(f"replicates and m must be positive, got replicates={n}, m={m}")
    q = check_q(q)
    max_mde = check_q(max_mde, "max_mde")
    power = _check_power(power)
    alpha = q / m
    worst, worst_p0 = _worst_rise(paired, n, alpha, power, max_mde)
    ok = worst is not None and worst <= max_mde + 1e-12
    needed: int | None = None
    if not ok:
        ceiling = MAX_REPLICATES_PAIRED if paired else MAX_REPLICATES_UNPAIRED
        needed = _smallest_n(
            lambda size: _sees_grid(paired, size, alpha, power, max_mde), n + 1, ceiling
        )
    return DesignCheck(
        replicates=n,
        m=m,
        paired=paired,
        q=q,
        max_mde=max_mde,
        power=power,
        worst_limit=worst,
        worst_base_rate=worst_p0,
        ok=ok,
        replicates_needed=needed,
        method=design_method(paired, m, q, power),
    )
