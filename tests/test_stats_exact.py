"""Exact tests and multiplicity adjustments against scipy and statsmodels.

Checks over many inputs: 1,000 tables, pairs or p-value families each, drawn by numpy from a
fixed seed with the edges written in (an empty arm, all failures, n = 1, the largest n; ties,
zeros, ones and the levels themselves among p-values), so a failure reproduces exactly. They
were hypothesis properties of 1,000 examples each, derandomized: hypothesis' drawing, not the
comparisons, was most of their cost (4 s of the p-value families' 5).
"""

from __future__ import annotations

import gc
import math
from unittest import mock

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from pytest_prove.stats import (
    benjamini_hochberg,
    fisher_exact_p,
    holm,
    mcnemar_exact_p,
    mcnemar_midp,
)


def _two_arms(count: int, largest: int) -> list[tuple[int, int, int, int]]:
    """``count`` tables (x1, n1, x2, n2), each n from 1 to ``largest``, the edges first."""
    rng = np.random.default_rng(40)
    edges = [(0, 1, 0, 1), (1, 1, 1, 1), (0, 1, 1, 1), (1, 1, 0, 1),
             (0, largest, 0, largest), (largest, largest, largest, largest),
             (0, largest, largest, largest), (largest, largest, 0, 1), (0, 1, 0, largest),
             (3, 7, 0, largest), (0, 5, 5, 5)]
    n1 = rng.integers(1, largest + 1, count - len(edges))
    n2 = rng.integers(1, largest + 1, count - len(edges))
    x1 = rng.integers(0, n1 + 1)
    x2 = rng.integers(0, n2 + 1)
    return edges + [(int(a), int(m), int(b), int(k))
                    for a, m, b, k in zip(x1, n1, x2, n2, strict=True)]


def test_fisher_matches_scipy() -> None:
    for x1, n1, x2, n2 in _two_arms(1000, 250):
        expected = stats.fisher_exact([[x1, n1 - x1], [x2, n2 - x2]]).pvalue
        assert fisher_exact_p(x1, n1, x2, n2) == pytest.approx(expected, abs=1e-9), (
            x1, n1, x2, n2)


def _discordant_pairs(count: int, largest: int) -> list[tuple[int, int]]:
    """``count`` pairs (b, c) from 0 to ``largest``, the edges first."""
    rng = np.random.default_rng(41)
    edges = [(0, 0), (0, 1), (1, 0), (1, 1), (0, largest), (largest, 0), (largest, largest),
             (5, 5), (largest - 1, largest)]
    drawn = rng.integers(0, largest + 1, (count - len(edges), 2))
    return edges + [(int(b), int(c)) for b, c in drawn]


def test_mcnemar_exact_and_midp_match_statsmodels_and_their_definition() -> None:
    # One check of the two McNemar p-values on the same pairs (b, c): the exact one is
    # statsmodels', ...
    for b, c in _discordant_pairs(1000, 300):
        expected = mcnemar([[10, b], [c, 10]], exact=True).pvalue
        assert mcnemar_exact_p(b, c) == pytest.approx(expected, abs=1e-12), (b, c)
        # ... and mid-p = exact conditional p - P(X = min(b, c)), X ~ Binomial(b + c, 1/2)
        # (Fagerland, Lydersen & Laake 2013, BMC Med Res Methodol 13:91).
        d = b + c
        if d == 0:
            assert mcnemar_midp(b, c) == 1.0
            continue
        k = min(b, c)
        exact = 2 * stats.binom.cdf(k, d, 0.5)  # uncapped, so that b == c gives exactly 1
        expected = min(1.0, exact - stats.binom.pmf(k, d, 0.5))
        assert mcnemar_midp(b, c) == pytest.approx(expected, abs=1e-12), (b, c)
        assert mcnemar_midp(b, c) <= mcnemar_exact_p(b, c) + 1e-15, (b, c)


def _pvalue_families(count: int) -> list[list[float]]:
    """``count`` families of 1 to 60 p-values: uniform ones mixed with the values where the
    adjustments turn (0, 1e-6, the levels 0.01, 0.05 and 0.1, 1; the smallest float, the
    largest below 1, values a hair either side of 0.05) and with ties, the edges first."""
    rng = np.random.default_rng(42)
    special = np.array([0.0, 1e-6, 0.01, 0.05, 0.1, 1.0, 5e-324, 1.0 - 2.0 ** -53,
                        np.nextafter(0.05, 0.0), np.nextafter(0.05, 1.0)])
    families: list[list[float]] = [[0.0], [1.0], [0.05], [0.5] * 60, [0.0] * 60, [1.0] * 60,
                                   [0.01, 0.05, 0.1], list(special)]
    while len(families) < count:
        size = int(rng.integers(1, 61))
        values = rng.random(size)
        pick = rng.random(size)
        values = np.where(pick < 0.3, special[rng.integers(0, len(special), size)], values)
        if size > 1 and rng.random() < 0.3:  # a tie
            values[rng.integers(0, size)] = values[rng.integers(0, size)]
        families.append([float(v) for v in values])
    return families


def test_holm_and_benjamini_hochberg_match_statsmodels() -> None:
    # One check of both adjustments on the same families, each at a level of its own.
    # statsmodels' holm branch calls gc.collect() on every call (40 ms here); it computes
    # nothing, so it is stubbed to keep 1,000 families fast.
    levels = np.random.default_rng(43).choice([0.01, 0.05, 0.1], 1000)
    for pvalues, q in zip(_pvalue_families(1000), levels, strict=True):
        with mock.patch.object(gc, "collect", lambda *args: 0):
            reject, adjusted, _, _ = multipletests(pvalues, alpha=q, method="holm")
        ours = holm(pvalues)
        np.testing.assert_allclose(ours, adjusted, rtol=1e-12, atol=1e-15)
        np.testing.assert_array_equal(ours <= q, reject)
        reject, adjusted, _, _ = multipletests(pvalues, alpha=q, method="fdr_bh")
        ours = benjamini_hochberg(pvalues)
        np.testing.assert_allclose(ours, adjusted, rtol=1e-12, atol=1e-15)
        np.testing.assert_array_equal(ours <= q, reject)


def test_fisher_known_value() -> None:
    # R: fisher.test(matrix(c(3, 7, 8, 2), 2, byrow = TRUE))$p.value = 0.06978
    assert fisher_exact_p(3, 10, 8, 10) == pytest.approx(0.0697785, abs=1e-7)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: fisher_exact_p(-1, 10, 2, 10), "x1 must be a non-negative integer, got -1"),
        (lambda: fisher_exact_p(11, 10, 2, 10), r"x1 must be at most n1 \(10\), got 11"),
        (lambda: fisher_exact_p(1.5, 10, 2, 10), "x1 must be a non-negative integer"),
        (lambda: mcnemar_midp(-2, 3), "b must be a non-negative integer, got -2"),
        (lambda: holm([0.1, 1.5]), r"pvalues\[1\] must be a number between 0 and 1, got 1.5"),
        (lambda: benjamini_hochberg([math.nan]), r"pvalues\[0\] must be a number between 0"),
    ],
)
def test_bad_input_is_named(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_cached_unchecked_pvalues_equal_the_checked_ones() -> None:
    # compare() and the fragility search use per-margin and per-d caches without input checks.
    from pytest_prove.stats._exact import fisher_p, midp

    rng = np.random.default_rng(7)
    for _ in range(2000):
        n1, n2 = (int(v) for v in rng.integers(1, 120, 2))
        x1, x2 = int(rng.integers(0, n1 + 1)), int(rng.integers(0, n2 + 1))
        expected = stats.fisher_exact([[x1, n1 - x1], [x2, n2 - x2]]).pvalue
        assert fisher_p(x1, n1, x2, n2) == fisher_exact_p(x1, n1, x2, n2)
        assert fisher_p(x1, n1, x2, n2) == pytest.approx(expected, abs=1e-9)
        b, c = (int(v) for v in rng.integers(0, 150, 2))
        assert midp(b, c) == mcnemar_midp(b, c)
