"""fix-check's statistics: the worked example's figures, scipy, statsmodels, enumeration.

Provenance of the reference figures: the reference tool's worked example (four cases, 190
repeats a case; the old run 1 harmful of 190 on one case and the new run 6 of 190 there, 0
elsewhere) reports observed 6, expected 3.500, variance 1.722, p = 0.122, and per case
Fisher p 0.122, BH q 0.486.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from scipy import stats

from pytest_prove.stats.fixcheck import Case, fix_check, power_at, repeats_needed

WORKED = [Case("reroute", 1, 190, 6, 190)] + [Case(n, 0, 190, 0, 190)
                                              for n in ("stuck", "rfi", "break")]


def test_worked_example_reference_figures() -> None:
    result = fix_check(WORKED)
    assert result.observed == 6
    assert round(result.expected, 3) == 3.500
    assert round(result.variance, 3) == 1.722
    assert round(result.p, 3) == 0.122
    assert result.informative == 1
    reroute = result.cases[0]
    assert (round(reroute.p, 3), round(reroute.q, 3)) == (0.122, 0.486)
    assert not reroute.flag
    assert 100 * result.risk_difference == pytest.approx(0.658, abs=1e-3)  # +0.7 points
    assert result.word == "no significant change"  # it could see 0.20 either way there is room
    assert result.fall.status == "none detectable"  # even every failure gone is too little


def test_exact_p_is_fisher_in_one_stratum() -> None:
    for x0, n0, x1, n1 in [(3, 40, 11, 40), (0, 25, 4, 30), (12, 50, 12, 50)]:
        ours = fix_check([Case("c", x0, n0, x1, n1)]).p
        theirs = stats.fisher_exact([[x1, n1 - x1], [x0, n0 - x0]]).pvalue
        assert ours == pytest.approx(theirs, rel=1e-9)


def test_exact_p_matches_enumeration_over_strata() -> None:
    cases = [Case("a", 2, 8, 5, 9), Case("b", 1, 6, 3, 7), Case("c", 4, 10, 4, 5)]
    supports = []
    for c in cases:
        k, total = c.x_old + c.x_new, c.n_old + c.n_new
        lo, hi = max(0, k - c.n_old), min(k, c.n_new)
        supports.append([(x, stats.hypergeom.pmf(x, total, k, c.n_new))
                         for x in range(lo, hi + 1)])
    dist: dict[int, float] = {}
    for combo in itertools.product(*supports):
        t = sum(x for x, _ in combo)
        dist[t] = dist.get(t, 0.0) + float(np.prod([p for _, p in combo]))
    observed = sum(c.x_new for c in cases)
    expected = sum(p for p in dist.values() if p <= dist[observed] * (1 + 1e-7))
    assert fix_check(cases).p == pytest.approx(expected, rel=1e-9)


def test_expected_and_variance_are_the_cmh_statistics() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        contingency = pytest.importorskip("statsmodels.stats.contingency_tables")
    cases = [Case("a", 5, 40, 12, 38), Case("b", 9, 40, 15, 41), Case("c", 2, 30, 7, 33)]
    tables = [np.array([[c.x_new, c.n_new - c.x_new], [c.x_old, c.n_old - c.x_old]])
              for c in cases]
    theirs = contingency.StratifiedTable(tables).test_null_odds(correction=False)
    ours = fix_check(cases)
    assert (ours.observed - ours.expected) ** 2 / ours.variance == pytest.approx(
        theirs.statistic, rel=1e-10)


def test_sato_variance_is_the_binomial_one_in_one_stratum() -> None:
    # Sato (1989): with one stratum the estimator is the usual unpooled variance.
    result = fix_check([Case("c", 10, 100, 25, 120)])
    p1, p0 = 25 / 120, 10 / 100
    se = np.sqrt(p1 * (1 - p1) / 120 + p0 * (1 - p0) / 100)
    assert result.risk_difference == pytest.approx(p1 - p0)
    assert (result.rd_high - result.rd_low) / 2 == pytest.approx(stats.norm.ppf(0.975) * se)


def test_direction_words() -> None:
    worse = fix_check([Case("a", 2, 100, 30, 100), Case("b", 3, 100, 25, 100)])
    assert worse.word == "worse" and worse.p < 1e-6
    safer = fix_check([Case("a", 2, 100, 30, 100)], worse_when="fall")
    assert safer.word == "safer"


def test_limits_shrink_with_repeats_and_meet_the_asked_power() -> None:
    base = np.array([0.1, 0.2, 0.05])
    small = fix_check([Case(str(i), round(p * 50), 50, round(p * 50), 50)
                       for i, p in enumerate(base)])
    large = fix_check([Case(str(i), round(p * 400), 400, round(p * 400), 400)
                       for i, p in enumerate(base)])
    assert small.rise.value is not None and large.rise.value is not None
    assert large.rise.value < small.rise.value
    rates = np.array([c.case.x_old / c.case.n_old for c in large.cases])
    n = np.full(3, 400.0)
    assert power_at(large.rise.value, rates, n, n, 0.05) == pytest.approx(0.8, abs=1e-6)


def test_repeats_needed_is_the_smallest_that_sees_max_mde() -> None:
    base = [0.1, 0.3]
    need = repeats_needed(base, max_mde=0.1)
    assert need is not None
    rates = np.array(base)

    def sees(n: int) -> bool:
        size = np.full(2, float(n))
        return all(power_at(d * 0.1, rates, size, size, 0.05) >= 0.8 for d in (1, -1))

    assert sees(need) and not sees(need - 1)
    too_small = fix_check([Case("a", 3, 30, 4, 30), Case("b", 9, 30, 10, 30)], max_mde=0.1)
    assert too_small.word == "too small to tell"
    assert too_small.repeats_needed == repeats_needed([0.1, 0.3], max_mde=0.1)
