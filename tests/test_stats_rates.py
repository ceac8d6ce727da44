"""The Clopper-Pearson exact interval on one rate (a single run's description), checked against
scipy's binomtest, statsmodels and, by exact enumeration, its coverage promise."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint  # type: ignore[import-untyped]

from pytest_prove.stats import clopper_pearson_interval

LEVELS = (0.8, 0.9, 0.95, 0.99, 0.999)


def test_matches_scipy_and_statsmodels() -> None:
    """300 cases, every level at the edges (n = 1, 2 and the largest, 500; no events, all,
    one, all but one, half) and the rest drawn with numpy from a fixed seed (they were a
    hypothesis property of 300 derandomized examples, whose drawing cost as much as the
    checks). Every case against statsmodels' beta quantiles (computed for all at once); the
    edges and the first 50 drawn against scipy's binomtest too, whose root-finding costs 2 ms
    a case (it cost three quarters of the test)."""
    edges = [(x, n, level) for x, n in ((0, 1), (1, 1), (0, 2), (1, 2), (2, 2), (0, 500),
                                        (1, 500), (250, 500), (499, 500), (500, 500))
             for level in LEVELS]
    rng = np.random.default_rng(19)
    ns = rng.integers(1, 501, 300 - len(edges))
    xs = rng.integers(0, ns + 1)
    levels = rng.choice(LEVELS, ns.size)
    cases = edges + [(int(x), int(n), float(level))
                     for x, n, level in zip(xs, ns, levels, strict=True)]
    x_all, n_all, level_all = (np.array(column) for column in zip(*cases, strict=True))
    beta_low, beta_high = proportion_confint(x_all, n_all, alpha=1 - level_all, method="beta")
    for i, (x, n, level) in enumerate(cases):
        low, high = clopper_pearson_interval(x, n, level)
        assert (low, high) == pytest.approx((float(beta_low[i]), float(beta_high[i])),
                                            abs=1e-12), (x, n, level)
        assert 0.0 <= low <= x / n <= high <= 1.0, (x, n, level)
        if i < len(edges) + 50:
            exact = stats.binomtest(x, n).proportion_ci(confidence_level=level,
                                                        method="exact")
            # binomtest finds each end by root-finding, statsmodels by the beta quantile.
            assert low == pytest.approx(exact.low, abs=1e-9), (x, n, level)
            assert high == pytest.approx(exact.high, abs=1e-9), (x, n, level)


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
