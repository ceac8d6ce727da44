"""The Clopper-Pearson exact interval on one rate (a single run's description), checked against
scipy's binomtest, statsmodels and, by exact enumeration, its coverage promise."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.proportion import proportion_confint  # type: ignore[import-untyped]

from pytest_prove.stats import clopper_pearson_interval

PROPERTY = settings(max_examples=300, derandomize=True, database=None, deadline=None)


@PROPERTY
@given(st.integers(1, 500), st.data(), st.sampled_from([0.8, 0.9, 0.95, 0.99, 0.999]))
def test_matches_scipy_and_statsmodels(n: int, data: st.DataObject, level: float) -> None:
    x = data.draw(st.integers(0, n))
    low, high = clopper_pearson_interval(x, n, level)
    exact = stats.binomtest(x, n).proportion_ci(confidence_level=level, method="exact")
    # binomtest finds each end by root-finding, statsmodels by the beta quantile.
    assert low == pytest.approx(exact.low, abs=1e-9)
    assert high == pytest.approx(exact.high, abs=1e-9)
    beta = proportion_confint(x, n, alpha=1 - level, method="beta")
    assert (low, high) == pytest.approx((float(beta[0]), float(beta[1])), abs=1e-12)
    assert 0.0 <= low <= x / n <= high <= 1.0


@pytest.mark.parametrize("n", [1, 7, 30, 200])
@pytest.mark.parametrize("rate", [0.01, 0.1, 0.37, 0.5, 0.9])
def test_covers_at_least_its_level(n: int, rate: float) -> None:
    """Summed over every count the run could have seen, the intervals that hold ``rate``
    have probability at least 0.95 (Clopper-Pearson is conservative, never short)."""
    covered = sum(float(stats.binom.pmf(x, n, rate)) for x in range(n + 1)
                  if clopper_pearson_interval(x, n)[0] <= rate <= clopper_pearson_interval(x, n)[1])
    assert covered >= 0.95 - 1e-12


def test_edges_and_bad_input() -> None:
    assert clopper_pearson_interval(0, 0) == (0.0, 1.0)
    assert clopper_pearson_interval(0, 10)[0] == 0.0
    assert clopper_pearson_interval(10, 10)[1] == 1.0
    # 0 of 10: the upper end solves (1 - p)^10 = 0.025.
    assert clopper_pearson_interval(0, 10)[1] == pytest.approx(1 - 0.025 ** 0.1, abs=1e-12)
    for args in ((3, 2), (-1, 5), (1, 5, 1.0), (1, 5, 0.0)):
        with pytest.raises(ValueError):
            clopper_pearson_interval(*args)  # type: ignore[arg-type]
