"""The fast design check against brute force: regions, power sums and the worst base rate.

The design check avoids three costs of the direct computation: it finds Fisher's region along
its boundary instead of enumerating every margin, it sums power over windows of outcomes
instead of every outcome, and it clears blocks of base rates with a monotonicity bound instead
of computing a limit at each one. Each shortcut is checked here against the direct way.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from scipy import stats

from pytest_prove.stats import _power, design_check, detection_power, mcnemar_midp
from pytest_prove.stats._exact import mcnemar_midp_array

ALPHAS = (0.3, 0.05, 0.05 / 16, 0.05 / 1000, 1e-7)


@pytest.mark.parametrize("alpha", ALPHAS)
def test_fisher_region_along_the_boundary_equals_every_margin_enumerated(alpha: float) -> None:
    for n in [*range(1, 61), 97, 190, 401]:
        fast = _power._fisher_region_equal(n, alpha)
        full = _power._fisher_region_by_margin(n, n, alpha)
        assert full.irregular_up == () and full.irregular_down == ()
        np.testing.assert_array_equal(fast.up, full.up, err_msg=f"n={n}")
        np.testing.assert_array_equal(fast.down, full.down, err_msg=f"n={n}")


@pytest.mark.parametrize("alpha", ALPHAS)
def test_mcnemar_region_equals_its_definition(alpha: float) -> None:
    for n in (1, 2, 5, 17, 64, 190, 333):
        bcrit = _power._mcnemar_region(n, alpha)
        for d in range(n + 1):
            b = np.arange((d + 1) // 2)  # b < d/2
            rejected = b[mcnemar_midp_array(b, d - b) <= alpha]
            assert bcrit[d] == (rejected.max() if rejected.size else -1), (n, d)


_region_by_margin = functools.cache(_power._fisher_region_by_margin)


def _fisher_power_full(n: int, p0: float, p1: float, alpha: float, rise: bool) -> float:
    """Every outcome of both arms, scipy's binomials, the region enumerated margin by margin."""
    region = _region_by_margin(n, n, alpha)
    before = stats.binom.pmf(np.arange(n + 1), n, p0)
    inner = (stats.binom.sf(region.up - 1, n, p1) if rise
             else stats.binom.cdf(region.down, n, p1))
    return float(before @ inner)


def _paired_power_full(n: int, p0: float, p1: float, alpha: float, rise: bool) -> float:
    """Every number of discordant twins, scipy's binomial cdf at each."""
    bcrit = _power._mcnemar_region(n, alpha)
    before_only, after_only = p0 * (1 - p1), (1 - p0) * p1
    discordant = before_only + after_only
    share = (before_only if rise else after_only) / discordant
    d = np.arange(n + 1)
    inner = np.where(bcrit < 0, 0.0, stats.binom.cdf(bcrit, d, share))
    return float(stats.binom.pmf(d, n, discordant) @ inner)


@pytest.mark.parametrize(("n", "tolerance"), [(40, 1e-13), (300, 1e-12), (1500, 1e-11)])
@pytest.mark.parametrize(("p0", "p1"), [(0.0, 0.07), (0.02, 0.1), (0.4, 0.48), (0.47, 0.5),
                                        (0.8, 0.86), (0.9, 1.0), (0.3, 0.25), (0.6, 0.5)])
def test_windowed_power_equals_the_full_sum(n: int, tolerance: float, p0: float,
                                            p1: float) -> None:
    # The windows leave out less than 3e-17; what differs is rounding: the engine's binomial
    # probabilities come from a table of log k!, whose rounding grows with n (about 1e-12 of
    # the probability at 1,500 replicates, against scipy's 1e-15).
    rise = p1 >= p0
    for alpha in (0.05 / 2, 0.05 / 1000):
        fisher = detection_power(p0, p1, n, paired=False, alpha=alpha)
        assert fisher == pytest.approx(_fisher_power_full(n, p0, p1, alpha, rise),
                                       abs=tolerance)
        paired = detection_power(p0, p1, n, paired=True, alpha=alpha)
        assert paired == pytest.approx(_paired_power_full(n, p0, p1, alpha, rise),
                                       abs=tolerance)


def test_paired_power_with_a_region_starting_inside_the_window() -> None:
    # Few twins and a small alpha: bcrit is -1 for the first d of the window, then steps to 0.
    for n, alpha in ((12, 0.01), (30, 1e-4), (60, 1e-7)):
        for p0, p1 in ((0.0, 0.5), (0.1, 0.9), (0.3, 1.0)):
            ours = detection_power(p0, p1, n, paired=True, alpha=alpha)
            assert ours == pytest.approx(_paired_power_full(n, p0, p1, alpha, True), abs=1e-12)


@pytest.mark.parametrize("paired", [False, True])
def test_power_falls_as_the_base_rate_rises(paired: bool) -> None:
    # The bound that clears blocks of base rates: power(p0, p1) falls as p0 rises, p1 fixed.
    for n, alpha in ((37, 0.05 / 16), (190, 0.05 / 2), (800, 0.05 / 1000)):
        evaluator = _power._evaluator(paired, n, n, alpha)
        assert evaluator.monotone
        for p1 in (0.1, 0.45, 0.9, 1.0):
            p0 = np.linspace(0.0, p1, 120)
            power = evaluator.prepare(p0, "rise")(np.full(p0.size, p1))
            assert np.all(np.diff(power) <= 1e-12), (n, p1)


@pytest.mark.parametrize("paired", [False, True])
def test_power_is_unchanged_by_swapping_and_complementing(paired: bool) -> None:
    # power(p0, p1) = power(1 - p1, 1 - p0): why the worst base rate sits near (1 - limit)/2.
    rng = np.random.default_rng(5)
    p0, p1 = np.sort(rng.random((2, 40)), axis=0)
    for n in (25, 190):
        evaluator = _power._evaluator(paired, n, n, 0.05 / 16)
        there = evaluator.prepare(p0, "rise")(p1)
        back = evaluator.prepare(1.0 - p1, "rise")(1.0 - p0)
        np.testing.assert_allclose(there, back, rtol=0, atol=1e-12)


SIZES = [*range(25, 125, 9), 190, 257, 640]


@pytest.mark.parametrize("paired", [False, True], ids=["fisher", "paired"])
@pytest.mark.parametrize("m", [1, 2, 16, 1000])
def test_worst_rise_equals_the_rate_by_rate_scan(paired: bool, m: int) -> None:
    for n in SIZES:
        for max_mde in (0.2, 0.05):
            fast = _power._worst_rise(paired, n, 0.05 / m, 0.8, max_mde)
            scan = _power._worst_rise_scan(paired, n, 0.05 / m, 0.8, max_mde)
            assert fast == scan, (n, max_mde)


@pytest.mark.parametrize("paired", [False, True], ids=["fisher", "paired"])
def test_sees_every_base_rate_equals_the_rate_by_rate_check(paired: bool) -> None:
    alpha = 0.05 / 16
    for n in [*range(150, 200, 3), 400]:
        rates = _power._scan_rates(n, 0.2)
        expected = _power._sees_all(paired, n, rates, alpha, 0.8, 0.2, "rise")
        assert _power._sees_grid(paired, n, alpha, 0.8, 0.2) == expected, n


def test_largest_designs_as_the_rate_by_rate_scan_gave_them() -> None:
    # Figures of the previous implementation (a limit at every one of the 4,001 base rates:
    # 162 s unpaired, 773 s paired, on the development machine): 5,000 replicates, 2 tests.
    fisher = design_check(5_000, 2, paired=False)
    assert fisher.worst_limit == pytest.approx(0.03111174113601447, abs=1e-12)
    assert fisher.worst_base_rate == 0.4844 and fisher.ok
    paired = design_check(5_000, 2, paired=True)
    assert paired.worst_limit == pytest.approx(0.030830778638971976, abs=1e-12)
    assert paired.worst_base_rate == 0.4846 and paired.ok


def test_reference_paired_rise_limit_from_zero() -> None:
    # 190 twins at base rate 0, 16 tests: 0.059 (the reference figure), and the power there.
    limit = _power.limits(0, 190, paired=True, alpha=0.05 / 16).rise
    assert limit.value is not None and round(limit.value, 3) == 0.059
    assert f"{limit}" == "0.060"  # printed rounded up
    at = detection_power(0.0, limit.value, 190, paired=True, alpha=0.05 / 16)
    assert at == pytest.approx(0.8, abs=1e-6)
    # Nine after-only twins and no before-only one are the fewest the test flags.
    assert mcnemar_midp(0, 9) <= 0.05 / 16 < mcnemar_midp(0, 8)
