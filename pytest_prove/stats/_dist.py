"""The few ``scipy.stats`` distribution functions the engine uses, without ``scipy.stats``.

Importing ``scipy.stats`` takes about 0.7 s of CPU (``python -X importtime``), more than a
small pytest session does in all: every session that runs a design check, and every xdist
worker, paid it.  Each function here computes what the ``scipy.stats`` method of the same
name returns, bit for bit: the same special function (``scipy.special``; the Boost-based
binomial and beta functions are the ufuncs ``scipy.stats`` itself calls) behind the same
handling of the support's edges and of invalid parameters (``rv_continuous`` /
``rv_discrete``: 0 or 1 outside the support, the support's ends at probability 0 and 1,
NaN for parameters out of range).  tests/test_dist.py compares them with ``scipy.stats``
over grids that include every edge.

A scipy whose ``scipy.special`` lacks those ufuncs (older than 1.12) falls back to
``scipy.stats`` itself, imported on first use: the same numbers, the old cost.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special  # type: ignore[import-untyped]

try:  # scipy >= 1.12: the Boost distributions scipy.stats calls live in scipy.special
    from scipy.special._ufuncs import (  # type: ignore[import-untyped]
        _beta_ppf,
        _binom_cdf,
        _binom_isf,
        _binom_pmf,
        _binom_ppf,
        _binom_sf,
    )

    _OWN = True
except ImportError:  # pragma: no cover - older scipy
    _OWN = False


def _stats() -> Any:
    from scipy import stats  # type: ignore[import-untyped, unused-ignore]  # only on an old scipy

    return stats


def _out(output: np.ndarray[Any, Any]) -> Any:
    """A scalar for a scalar input, as scipy.stats returns."""
    return output[()] if output.ndim == 0 else output


# Normal ----------------------------------------------------------------------------------

def norm_ppf(q: Any) -> Any:
    """``scipy.stats.norm.ppf(q)``."""
    return _out(np.asarray(special.ndtri(np.asarray(q)) * 1.0 + 0.0))


def norm_isf(q: Any) -> Any:
    """``scipy.stats.norm.isf(q)``."""
    return _out(np.asarray(-special.ndtri(np.asarray(q)) * 1.0 + 0.0))


def norm_cdf(x: Any) -> Any:
    """``scipy.stats.norm.cdf(x)``."""
    return _out(np.asarray(special.ndtr(np.asarray(x, dtype=np.float64))))


def norm_sf(x: Any) -> Any:
    """``scipy.stats.norm.sf(x)``."""
    return _out(np.asarray(special.ndtr(-np.asarray(x, dtype=np.float64))))


# Chi-square ------------------------------------------------------------------------------

def chi2_sf(x: Any, df: Any) -> Any:
    """``scipy.stats.chi2.sf(x, df)``: 1 at and below 0."""
    x, df = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(df))
    ok = df > 0
    output = np.zeros(x.shape)
    output[~ok | np.isnan(x)] = np.nan
    output[ok & (x <= 0)] = 1.0
    inside = ok & (x > 0) & (x < np.inf)
    if inside.any():
        output[inside] = special.chdtrc(df[inside], x[inside])
    return _out(output)


# Beta ------------------------------------------------------------------------------------

def _beta_q(q: Any, a: Any, b: Any, at_zero: float,
            inner: Any) -> Any:
    q, a, b = np.broadcast_arrays(np.asarray(q), np.asarray(a), np.asarray(b))
    ok = (a > 0) & (b > 0)
    output = np.full(q.shape, np.nan)
    output[ok & (q == 0)] = at_zero
    output[ok & (q == 1)] = 1.0 - at_zero
    inside = ok & (q > 0) & (q < 1)
    if inside.any():
        output[inside] = inner(q[inside], a[inside], b[inside]) * 1.0 + 0.0
    return _out(output)


def beta_ppf(q: Any, a: Any, b: Any) -> Any:
    """``scipy.stats.beta.ppf(q, a, b)``."""
    if not _OWN:  # pragma: no cover
        return _stats().beta.ppf(q, a, b)
    return _beta_q(q, a, b, 0.0, _beta_ppf)


def beta_isf(q: Any, a: Any, b: Any) -> Any:
    """``scipy.stats.beta.isf(q, a, b)``."""
    return _beta_q(q, a, b, 1.0, lambda q_, a_, b_: special.betainccinv(a_, b_, q_))


# Binomial --------------------------------------------------------------------------------

def _binom_args(k: Any, n: Any, p: Any) -> tuple[Any, Any, Any, Any]:
    k, n, p = np.broadcast_arrays(np.asarray(k), np.asarray(n), np.asarray(p))
    ok = (n >= 0) & (n == np.round(n)) & (p >= 0) & (p <= 1)
    return k, n, p, ok


def binom_cdf(k: Any, n: Any, p: Any) -> Any:
    """``scipy.stats.binom.cdf(k, n, p)``: 0 below the support, 1 from n on."""
    if not _OWN:  # pragma: no cover
        return _stats().binom.cdf(k, n, p)
    k, n, p, ok = _binom_args(k, n, p)
    output = np.zeros(k.shape)
    output[k >= n] = 1.0
    output[~ok | np.isnan(k)] = np.nan
    inside = ok & (k >= 0) & (k < n) & np.isfinite(k)
    if inside.any():
        output[inside] = np.clip(_binom_cdf(np.floor(k[inside]), n[inside], p[inside]), 0, 1)
    return _out(output)


def binom_sf(k: Any, n: Any, p: Any) -> Any:
    """``scipy.stats.binom.sf(k, n, p)``: 1 below the support, 0 from n on."""
    if not _OWN:  # pragma: no cover
        return _stats().binom.sf(k, n, p)
    k, n, p, ok = _binom_args(k, n, p)
    output = np.zeros(k.shape)
    output[~ok | np.isnan(k)] = np.nan
    output[((k < 0) | np.isneginf(k)) & ok] = 1.0
    inside = ok & (k >= 0) & (k < n) & np.isfinite(k)
    if inside.any():
        output[inside] = np.clip(_binom_sf(np.floor(k[inside]), n[inside], p[inside]), 0, 1)
    return _out(output)


def binom_pmf(k: Any, n: Any, p: Any) -> Any:
    """``scipy.stats.binom.pmf(k, n, p)``: 0 off the support and between its integers."""
    if not _OWN:  # pragma: no cover
        return _stats().binom.pmf(k, n, p)
    k, n, p, ok = _binom_args(k, n, p)
    output = np.zeros(k.shape)
    output[~ok | np.isnan(k)] = np.nan
    inside = ok & (k >= 0) & (k <= n) & (k == np.floor(k))
    if inside.any():
        output[inside] = np.clip(_binom_pmf(k[inside], n[inside], p[inside]), 0, 1)
    return _out(output)


def _binom_q(q: Any, n: Any, p: Any, kind: str, inner: Any) -> Any:
    q, n, p, ok = _binom_args(q, n, p)
    output = np.full(q.shape, np.nan)
    low, high = ok & (q == 0), ok & (q == 1)
    if kind == "ppf":  # P = 0 -> below the support, P = 1 -> n
        output[low] = -1.0
        output[high] = n[high]
    else:  # isf: the mirror
        output[high] = -1.0
        output[low] = n[low]
    inside = ok & (q > 0) & (q < 1)
    if inside.any():
        output[inside] = inner(q[inside], n[inside], p[inside]) + 0
    return _out(output)


def binom_ppf(q: Any, n: Any, p: Any) -> Any:
    """``scipy.stats.binom.ppf(q, n, p)``."""
    if not _OWN:  # pragma: no cover
        return _stats().binom.ppf(q, n, p)
    return _binom_q(q, n, p, "ppf", _binom_ppf)


def binom_isf(q: Any, n: Any, p: Any) -> Any:
    """``scipy.stats.binom.isf(q, n, p)``."""
    if not _OWN:  # pragma: no cover
        return _stats().binom.isf(q, n, p)
    return _binom_q(q, n, p, "isf", _binom_isf)
