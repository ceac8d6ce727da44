"""Binomial probabilities for the exact power sums: one table of log k!, and windows.

A window of Binomial(n, p) holds all but 3e-17 of its probability (Bernstein's inequality);
the power sums leave out the outcomes beyond it. The probabilities come from a table of log k!
grown on demand, so the sums are accurate to rounding (about 1e-11 of the power at 5,000
replicates).
"""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt
from scipy import special  # type: ignore[import-untyped]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

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
