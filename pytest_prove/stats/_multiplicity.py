"""Adjusted p-values over the family of m (condition, event) tests.

A row is compared with q through its adjusted p-value: adjusted <= q is the same decision as the
step-up or step-down rule at q, and the adjusted value is what the table prints.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ._check import check_probability

__all__ = ["benjamini_hochberg", "holm"]

FloatArray = npt.NDArray[np.float64]


def _as_pvalues(pvalues: Sequence[float] | FloatArray) -> FloatArray:
    array = np.asarray(pvalues, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"pvalues must be a one-dimensional sequence, got shape {array.shape}")
    bad = ~((array >= 0.0) & (array <= 1.0))  # also catches NaN
    if bad.any():
        i = int(np.argmax(bad))
        check_probability(float(array[i]), f"pvalues[{i}]")
    return array


def holm(pvalues: Sequence[float] | FloatArray) -> FloatArray:
    """Holm's step-down adjusted p-values (Holm 1979, Scand J Stat 6:65-70).

    With p_(1) <= ... <= p_(m), the adjusted value of p_(i) is
    max_{j <= i} min(1, (m - j + 1) p_(j)); rejecting where it is <= q controls the
    family-wise error rate at q. Equal to statsmodels' ``multipletests(method="holm")``.
    """
    p = _as_pvalues(pvalues)
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    raw = p[order] * np.arange(m, 0, -1, dtype=np.float64)
    adjusted_sorted = np.minimum(np.maximum.accumulate(raw), 1.0)
    adjusted = np.empty(m, dtype=np.float64)
    adjusted[order] = adjusted_sorted
    return adjusted


def benjamini_hochberg(pvalues: Sequence[float] | FloatArray) -> FloatArray:
    """Benjamini-Hochberg step-up adjusted p-values (Benjamini & Hochberg 1995, JRSS B 57:289).

    The adjusted value of p_(i) is min_{j >= i} min(1, m p_(j) / j); rejecting where it is
    <= q controls the false discovery rate at q for independent tests. Equal to statsmodels'
    ``multipletests(method="fdr_bh")``.
    """
    p = _as_pvalues(pvalues)
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    # p / (i / m), the same floating-point steps as statsmodels' fdr_bh.
    raw = p[order] / (np.arange(1, m + 1, dtype=np.float64) / m)
    adjusted_sorted = np.minimum(np.minimum.accumulate(raw[::-1])[::-1], 1.0)
    adjusted = np.empty(m, dtype=np.float64)
    adjusted[order] = adjusted_sorted
    return adjusted
