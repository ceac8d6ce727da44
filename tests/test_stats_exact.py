"""Exact tests and multiplicity adjustments against scipy and statsmodels.

Property tests: 1,000 tables or p-value families each, derandomized (a fixed seed and no
example database), so a failure reproduces exactly.
"""

from __future__ import annotations

import gc
import math
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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

PROPERTY = settings(max_examples=1000, derandomize=True, database=None, deadline=None)


@st.composite
def two_arms(draw: st.DrawFn) -> tuple[int, int, int, int]:
    n1 = draw(st.integers(1, 250))
    n2 = draw(st.integers(1, 250))
    return draw(st.integers(0, n1)), n1, draw(st.integers(0, n2)), n2


@pytest.mark.slow
@PROPERTY
@given(two_arms())
def test_fisher_matches_scipy(table: tuple[int, int, int, int]) -> None:
    x1, n1, x2, n2 = table
    expected = stats.fisher_exact([[x1, n1 - x1], [x2, n2 - x2]]).pvalue
    assert fisher_exact_p(x1, n1, x2, n2) == pytest.approx(expected, abs=1e-9)


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
@PROPERTY
@given(st.integers(0, 300), st.integers(0, 300))
def test_mcnemar_exact_and_midp_match_statsmodels_and_their_definition(b: int, c: int) -> None:
    # One property run for the two McNemar p-values (they were two tests of the same pairs
    # (b, c), each drawing its own 1,000): the exact one is statsmodels', ...
    expected = mcnemar([[10, b], [c, 10]], exact=True).pvalue
    assert mcnemar_exact_p(b, c) == pytest.approx(expected, abs=1e-12)
    # ... and mid-p = exact conditional p - P(X = min(b, c)), X ~ Binomial(b + c, 1/2)
    # (Fagerland, Lydersen & Laake 2013, BMC Med Res Methodol 13:91).
    d = b + c
    if d == 0:
        assert mcnemar_midp(b, c) == 1.0
        return
    k = min(b, c)
    exact = 2 * stats.binom.cdf(k, d, 0.5)  # uncapped, so that b == c gives exactly 1
    expected = min(1.0, exact - stats.binom.pmf(k, d, 0.5))
    assert mcnemar_midp(b, c) == pytest.approx(expected, abs=1e-12)
    assert mcnemar_midp(b, c) <= mcnemar_exact_p(b, c) + 1e-15


pvalue_lists = st.lists(
    st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, 1e-6, 0.01, 0.05, 1.0])),
    min_size=1,
    max_size=60,
)


@pytest.mark.slow
@PROPERTY
@given(pvalue_lists, st.sampled_from([0.01, 0.05, 0.1]))
def test_holm_and_benjamini_hochberg_match_statsmodels(pvalues: list[float], q: float) -> None:
    # One property run for both adjustments (they were two tests of the same strategy, each
    # drawing its own 1,000 families; hypothesis' drawing was most of their cost).
    # statsmodels' holm branch calls gc.collect() on every call (40 ms here); it computes
    # nothing, so it is stubbed to keep 1,000 examples fast.
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
