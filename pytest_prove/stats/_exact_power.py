"""Exact power: the probability that one row's own test rejects, in one direction.

The test's rejection region is enumerated once per design and level (``_regions``), and the
probability of landing in it is summed over the binomial outcomes. Power is a polynomial in
the after rate p1, hence continuous, and it rises with the change.

Designs
-------
unpaired (Fisher)
    before ~ Binomial(n1, p0) and after ~ Binomial(n2, p1), independent.
paired (McNemar mid-p)
    n twins; within a twin, before ~ Bernoulli(p0) and after ~ Bernoulli(p1), drawn
    independently given the condition's rates. A twin is before-only with probability
    p0 (1 - p1) and after-only with probability (1 - p0) p1. An agent served by an LLM does not
    replay on a seed, so twins are not copies; if they are positively correlated, discordant
    twins are rarer, the test is more powerful, and a limit computed under this model errs on
    the large (safe) side.

How it stays fast
-----------------
Each row of a rejection region is a tail, so power is a sum over one arm's outcomes of its
probability times one binomial tail of the other: O(n) per evaluation, not O(n^2). Outcomes
beyond a window of the binomial that holds all but 3e-17 of its probability (Bernstein's
inequality) are left out of the sums (``_binomial``). Power sums are accurate to rounding,
about 1e-11 of the power at 5,000 replicates; limits move by far less than printed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import special  # type: ignore[import-untyped]

from ._binomial import _LOG_ZERO, _TAIL, _binom_pmf, _log_factorials, _logs, _window, _window_pmf
from ._check import check_design, check_direction, check_probability, check_q
from ._regions import _fisher_region, _FisherRegion, _mcnemar_region

__all__ = ["PAIRED_MODEL", "detection_power"]

Direction = Literal["rise", "fall"]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
PowerAt = Callable[[FloatArray], FloatArray]

PAIRED_MODEL = (
    "twins drawn independently given the condition's rates (before ~ Bernoulli(p0), "
    "after ~ Bernoulli(p1)); positively correlated twins only make the test stronger, "
    "so the paired limit is conservative"
)


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
    n1, n2 = check_design(n_before, n_after, paired)
    alpha = check_q(alpha, "alpha")
    if direction is None:
        direction = "rise" if p1 >= p0 else "fall"
    check_direction(direction)
    return float(_power_batch(paired, n1, n2, alpha, np.array([p0]), np.array([p1]), direction)[0])
