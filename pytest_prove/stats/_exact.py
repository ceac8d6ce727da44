"""Exact tests on one (condition, event) row: Fisher's for two independent arms, McNemar's for
matched twins.

Both are conditional tests. Fisher's conditions on the total number of events, which leaves the
before arm's count hypergeometric under no change; McNemar's conditions on the number of
discordant twins, which leaves the after-only count Binomial(d, 1/2) under no change.
"""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt
from scipy import special  # type: ignore[import-untyped]

from . import _dist
from ._binomial import _log_factorials
from ._check import check_count, check_counts

__all__ = [
    "binom_cdf",
    "fisher_exact_p",
    "fisher_margin_pvalues",
    "fisher_p",
    "mcnemar_exact_p",
    "mcnemar_midp",
    "mcnemar_midp_array",
    "midp",
]

FloatArray = npt.NDArray[np.float64]

# Two tables are "equally probable" when their probabilities agree to this relative tolerance,
# as in R's fisher.test; floating-point ties (e.g. the mirror table when n1 == n2) then count
# on both sides, as they do exactly in scipy.
_TIE = 1.0 + 1e-7


def fisher_margin_pvalues(n1: int, n2: int, total: int) -> tuple[int, FloatArray]:
    """Two-sided Fisher p-values of every table with arms ``n1``, ``n2`` and ``total`` events.

    Returns ``(lo, p)`` where ``p[i]`` is the p-value of the table whose first arm has
    ``lo + i`` events. Under no change the first arm's count is hypergeometric,

        P(x) = C(n1, x) C(n2, t - x) / C(n1 + n2, t),   max(0, t - n2) <= x <= min(t, n1),

    and the two-sided p-value of x sums P over every table no more probable than x
    (the definition of scipy.stats.fisher_exact and of R's fisher.test).
    """
    lo = max(0, total - n2)
    hi = min(total, n1)
    # log k! looked up in one table (special.gammaln(k + 1), the same numbers) rather than
    # six gammaln calls a margin: a region of unequal arms asks for every margin.
    lf = _log_factorials(max(n1, n2))
    x = np.arange(lo, hi + 1)
    logp = lf[n1] - lf[x] - lf[n1 - x] + lf[n2] - lf[total - x] - lf[n2 - total + x]
    pmf = np.exp(logp - logp.max())
    pmf /= pmf.sum()
    order = np.sort(pmf)
    cumulative = np.cumsum(order)
    idx = np.searchsorted(order, pmf * _TIE, side="right") - 1
    p = np.minimum(cumulative[idx], 1.0)
    return lo, p


@functools.lru_cache(maxsize=2048)
def _margin(n1: int, n2: int, total: int) -> tuple[int, FloatArray]:
    lo, p = fisher_margin_pvalues(n1, n2, total)
    p.setflags(write=False)
    return lo, p


def fisher_p(x1: int, n1: int, x2: int, n2: int) -> float:
    """:func:`fisher_exact_p` without its input checks, each margin's p-values computed once
    (a comparison and its fragility search ask for many tables of the same few margins)."""
    lo, p = _margin(n1, n2, x1 + x2)
    return float(p[x1 - lo])


def fisher_exact_p(x1: int, n1: int, x2: int, n2: int) -> float:
    """Two-sided p-value of Fisher's exact test of ``x1``/``n1`` against ``x2``/``n2``.

    Equal to ``scipy.stats.fisher_exact([[x1, n1 - x1], [x2, n2 - x2]]).pvalue``.
    """
    x1, n1 = check_counts("x1", x1, "n1", n1)
    x2, n2 = check_counts("x2", x2, "n2", n2)
    return fisher_p(x1, n1, x2, n2)


def mcnemar_exact_p(b: int, c: int) -> float:
    """Exact (conventional) two-sided McNemar p-value on ``b`` and ``c`` discordant pairs.

    p = min(1, 2 P(X <= min(b, c))), X ~ Binomial(b + c, 1/2); as statsmodels'
    ``mcnemar(table, exact=True)``.
    """
    b = check_count("b", b)
    c = check_count("c", c)
    d = b + c
    if d == 0:
        return 1.0
    return float(min(1.0, 2.0 * _dist.binom_cdf(min(b, c), d, 0.5)))


def mcnemar_midp(b: int, c: int) -> float:
    """Two-sided mid-p McNemar test on ``b`` and ``c`` discordant pairs.

    mid-p = exact p - P(X = min(b, c)) = 2 P(X < k) + P(X = k), k = min(b, c),
    X ~ Binomial(b + c, 1/2) (Fagerland, Lydersen & Laake 2013, BMC Med Res Methodol 13:91,
    eq. 6). It is 1 when b == c.
    """
    b = check_count("b", b)
    c = check_count("c", c)
    return midp(b, c)


@functools.lru_cache(maxsize=4096)
def _midp_row(d: int) -> FloatArray:
    """The mid-p of every split (b, d - b) of d discordant pairs, b = 0..d."""
    b = np.arange(d + 1, dtype=np.int64)
    row = mcnemar_midp_array(b, d - b)
    row.setflags(write=False)
    return row


def midp(b: int, c: int) -> float:
    """:func:`mcnemar_midp` without its input checks, each d's mid-p values computed once."""
    return float(_midp_row(b + c)[b])


def binom_cdf(
    k: npt.NDArray[np.int64], n: npt.NDArray[np.int64] | int, p: float
) -> FloatArray:
    """P(Binomial(n, p) <= k) for integer arrays, 0 below the support and 1 above it: the
    special function behind scipy.stats.binom.cdf, without its per-call overhead."""
    k = np.asarray(k)
    n_arr = np.broadcast_to(np.asarray(n), k.shape)
    inside = np.clip(k, 0, n_arr)
    value = special.bdtr(inside, n_arr, p)
    return np.asarray(np.where(k < 0, 0.0, np.where(k >= n_arr, 1.0, value)), dtype=np.float64)


def mcnemar_midp_array(
    b: npt.NDArray[np.int64], c: npt.NDArray[np.int64]
) -> FloatArray:
    """Vectorised mid-p over arrays of discordant counts (unchecked; for the power code)."""
    k = np.minimum(b, c)
    d = b + c
    # F(k) + F(k - 1) is 2 F(k) - P(X = k), without the cancellation when both are tiny.
    midp = binom_cdf(k, d, 0.5) + binom_cdf(k - 1, d, 0.5)
    midp = np.where(d == 0, 1.0, midp)
    return np.asarray(np.minimum(midp, 1.0), dtype=np.float64)
