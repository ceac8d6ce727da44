"""Score statistics for a change in a rate: after minus before equal to a given delta.

Each is the observed change minus delta over its standard error, the nuisance rate replaced
by its maximum-likelihood estimate under the null (the change exactly delta):

* paired twins: Tango's score statistic (Tango 1998, Stat Med 17:891-908), whose inversion
  is the paired interval (``_intervals``) and which orders the outcomes of the paired margin
  test (``_margin``);
* unpaired arms: the Miettinen-Nurminen score statistic (Miettinen & Nurminen 1985, Stat Med
  4:213-226), which orders the outcomes of the unpaired margin test.

Each is written once, over numpy arrays; the one-row forms call it.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

__all__ = ["mn_score", "mn_scores", "tango_score", "tango_scores"]

FloatArray = npt.NDArray[np.float64]


def _standardised(numerator: FloatArray, variance: FloatArray) -> FloatArray:
    """numerator / sqrt(variance); where the variance is 0, 0 for a zero numerator and an
    infinity of its sign otherwise."""
    positive = variance > 0.0
    degenerate = np.where(numerator == 0.0, 0.0, np.copysign(np.inf, numerator))
    return np.asarray(
        np.where(positive, numerator / np.sqrt(np.where(positive, variance, 1.0)), degenerate),
        dtype=np.float64)


def tango_scores(b: FloatArray, c: FloatArray, n: FloatArray | int,
                 delta: FloatArray | float) -> FloatArray:
    """Tango's score statistic for H0: change = delta on n twins (Tango 1998, eqs. 3-5), for
    arrays of counts (n and delta arrays too, or one number each).

    ``b`` counts twins with the event before only, ``c`` after only; the change is
    pi_c - pi_b, estimated by (c - b)/n. Then

        Z(delta) = (c - b - n delta) / sqrt(n (2 q + delta (1 - delta)))

    where q is the restricted maximum-likelihood estimate of pi_b under the null,
    q = (sqrt(B^2 - 4 A C) - B) / (2 A), A = 2n, B = -c - b + (2n - c + b) delta,
    C = -b delta (1 - delta). At delta = 0, Z is McNemar's (c - b)/sqrt(b + c). Z falls as
    delta rises.
    """
    big_b = -c - b + (2 * n - c + b) * delta
    discriminant = big_b**2 + 8.0 * n * b * delta * (1.0 - delta)
    # The discriminant is a sum of squares in exact arithmetic; clamp rounding below zero.
    q = (np.sqrt(np.maximum(discriminant, 0.0)) - big_b) / (4.0 * n)
    variance = n * (2.0 * q + delta * (1.0 - delta))
    return _standardised(c - b - n * delta, variance)


def tango_score(b: int, c: int, n: int, delta: float) -> float:
    """:func:`tango_scores` of one row: ``b`` of n twins had the event before only, ``c``
    after only; the statistic for H0: change = delta."""
    return float(tango_scores(np.array([float(b)]), np.array([float(c)]), n, delta)[0])


def mn_scores(x0: FloatArray, n0: int, x1: FloatArray, n1: int, margin: float) -> FloatArray:
    """Miettinen-Nurminen score statistics for H0: p1 - p0 = margin, for arrays of counts.

    Arm 0 is before (x0 of n0), arm 1 after (x1 of n1). The restricted estimates solve the
    likelihood equations under p1 = p0 + margin: a cubic, solved in closed form
    (Farrington & Manning 1990, appendix; Miettinen & Nurminen 1985), then

        Z = (x1/n1 - x0/n0 - margin) / sqrt((p1~(1 - p1~)/n1 + p0~(1 - p0~)/n0) N / (N - 1))

    with N = n0 + n1. Negative Z is evidence that the change is below the margin.
    """
    if margin < 0:
        # The closed form picks its root for a positive margin; a negative one is the
        # positive margin with the arms swapped, and the sign of the statistic with them.
        return -mn_scores(x1, n1, x0, n0, -margin)
    d = margin
    p1h = x1 / n1
    p0h = x0 / n0
    n_all = n0 + n1
    total = x0 + x1
    l3 = float(n_all)
    l2 = (n1 + 2.0 * n0) * d - n_all - total
    # n0 * d, as Miettinen and Nurminen have it: statsmodels 0.15 has x0 * d here, whose
    # root does not maximise the restricted likelihood (statsmodels issue 10269).
    l1 = (n0 * d - n_all - 2.0 * x0) * d + total
    l0 = x0 * d * (1.0 - d)
    v = (l2 / (3.0 * l3)) ** 3 - l1 * l2 / (6.0 * l3**2) + l0 / (2.0 * l3)
    inner = np.maximum((l2 / (3.0 * l3)) ** 2 - l1 / (3.0 * l3), 0.0)
    u = np.where(v >= 0.0, 1.0, -1.0) * np.sqrt(inner)
    u3 = u**3
    ratio = np.where(u3 == 0.0, 1.0, np.clip(v / np.where(u3 == 0.0, 1.0, u3), -1.0, 1.0))
    w = (math.pi + np.arccos(ratio)) / 3.0
    p0t = np.clip(2.0 * u * np.cos(w) - l2 / (3.0 * l3), max(0.0, -d), min(1.0, 1.0 - d))
    p1t = p0t + d
    n_all = n0 + n1
    variance = (p1t * (1.0 - p1t) / n1 + p0t * (1.0 - p0t) / n0) * n_all / (n_all - 1.0)
    numerator = p1h - p0h - d
    return _standardised(numerator, variance)


def mn_score(x0: int, n0: int, x1: int, n1: int, margin: float) -> float:
    """:func:`mn_scores` of one row."""
    return float(mn_scores(np.array([float(x0)]), n0, np.array([float(x1)]), n1, margin)[0])
