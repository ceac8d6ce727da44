"""stats/_dist.py returns what scipy.stats returns, bit for bit, edges and bad parameters
included: the engine computes its distributions there so that no session imports
scipy.stats (0.7 s) unless a statistic that needs it runs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import stats

from pytest_prove.stats import _dist

K = np.array([-3, -1, 0, 1, 2, 5, 9, 10, 11, 30, 499, 500, 501])
N = np.array([0, 1, 2, 10, 30, 500])
P = np.array([0.0, 1e-9, 0.02, 0.3, 0.5, 0.77, 1.0 - 1e-9, 1.0, -0.1, 1.1, np.nan])
Q = np.array([0.0, 1e-15, 1e-6, 0.025, 0.2, 0.5, 0.8, 0.975, 1 - 1e-9, 1.0, -0.5, 1.5,
              np.nan])


def same(got: Any, want: Any) -> None:
    assert type(got) is type(want)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want), strict=True)


@pytest.mark.parametrize("name", ["cdf", "sf", "pmf"])
def test_binomial_at_counts_matches_scipy(name: str) -> None:
    k, n, p = np.meshgrid(K, N, P, indexing="ij")
    same(getattr(_dist, f"binom_{name}")(k, n, p), getattr(stats.binom, name)(k, n, p))
    # scalars give scalars, as scipy's do
    for args in [(3, 10, 0.5), (0, 0, 0.3), (12, 10, 0.5), (-1, 10, 0.5), (2, 7, 1.5)]:
        same(getattr(_dist, f"binom_{name}")(*args), getattr(stats.binom, name)(*args))


def test_binomial_between_counts_matches_scipy() -> None:
    k = np.array([-0.5, 0.5, 2.5, 9.99, np.inf, -np.inf, np.nan])[:, None]
    for name in ("cdf", "sf", "pmf"):
        same(getattr(_dist, f"binom_{name}")(k, N, 0.3), getattr(stats.binom, name)(k, N, 0.3))


@pytest.mark.parametrize("name", ["ppf", "isf"])
def test_binomial_quantiles_match_scipy(name: str) -> None:
    q, n, p = np.meshgrid(Q, N, P, indexing="ij")
    same(getattr(_dist, f"binom_{name}")(q, n, p), getattr(stats.binom, name)(q, n, p))
    same(getattr(_dist, f"binom_{name}")(0.05, 40, 0.1), getattr(stats.binom, name)(0.05, 40, 0.1))


# Boost's root finding gives up (and warns, from scipy.stats too) at a few extreme corners.
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", ["ppf", "isf"])
def test_beta_quantiles_match_scipy(name: str) -> None:
    a = np.array([0.0, 0.5, 1.0, 3.0, 40.0, 401.0, -1.0])
    q, x, y = np.meshgrid(Q, a, a, indexing="ij")
    same(getattr(_dist, f"beta_{name}")(q, x, y), getattr(stats.beta, name)(q, x, y))
    same(getattr(_dist, f"beta_{name}")(0.025, 3, 18), getattr(stats.beta, name)(0.025, 3, 18))


def test_normal_matches_scipy() -> None:
    x = np.array([-np.inf, -40.0, -3.0, -0.0, 0.0, 1.959963984540054, 8.5, 40.0, np.inf,
                  np.nan])
    same(_dist.norm_ppf(Q), stats.norm.ppf(Q))
    same(_dist.norm_isf(Q), stats.norm.isf(Q))
    same(_dist.norm_cdf(x), stats.norm.cdf(x))
    same(_dist.norm_sf(x), stats.norm.sf(x))
    for q in (0.025, 0.5, 0.8, 1e-300):
        same(_dist.norm_ppf(q), stats.norm.ppf(q))
        same(_dist.norm_isf(q), stats.norm.isf(q))
    same(_dist.norm_cdf(-1.5), stats.norm.cdf(-1.5))
    same(_dist.norm_sf(2), stats.norm.sf(2))


def test_chi_square_tail_matches_scipy() -> None:
    x = np.array([-1.0, 0.0, 1e-12, 0.5, 3.841458820694124, 30.0, 900.0, np.inf, np.nan])
    for df in (1, 2, 7, 0, -1):
        same(_dist.chi2_sf(x, df), stats.chi2.sf(x, df))
        same(_dist.chi2_sf(3.2, df), stats.chi2.sf(3.2, df))
