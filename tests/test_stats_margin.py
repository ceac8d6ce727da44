"""The margin test (stats/_margin.py, _margin_design.py, _scores.py): its score statistics
against independent computations, its exact size at the margin by enumeration, and its
one-sided bound."""

from __future__ import annotations

import importlib.util
import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize

from pytest_prove.stats import margin_test, margin_test_paired, margin_test_unpaired
from pytest_prove.stats._margin import _quick_p, margin_design
from pytest_prove.stats._scores import mn_score, tango_scores

_SPEC = importlib.util.spec_from_file_location(
    "prove_bench_margin_size", Path(__file__).resolve().parent.parent / "bench" / "margin_size.py")
assert _SPEC is not None and _SPEC.loader is not None
margin_size = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = margin_size  # its dataclasses look their module up there
_SPEC.loader.exec_module(margin_size)

# --------------------------------------------------------------------------- statistics


def _restricted_p0(x0: int, n0: int, x1: int, n1: int, d: float) -> float:
    """The restricted MLE of the before rate under p1 = p0 + d, as the root of the score
    equation (bracketed by the ends of the feasible range), found numerically."""
    lo, hi = max(0.0, -d), min(1.0, 1.0 - d)

    def score(p0: float) -> float:
        p1 = p0 + d
        return x0 / p0 - (n0 - x0) / (1 - p0) + x1 / p1 - (n1 - x1) / (1 - p1)

    eps = 1e-13
    a, b = lo + eps, hi - eps
    if score(a) <= 0:
        return lo
    if score(b) >= 0:
        return hi
    return float(optimize.brentq(score, a, b, xtol=1e-15, rtol=1e-15, maxiter=500))


def _brute_mn(x0: int, n0: int, x1: int, n1: int, d: float) -> float:
    p0 = _restricted_p0(x0, n0, x1, n1, d)
    p1 = p0 + d
    n = n0 + n1
    variance = (p1 * (1 - p1) / n1 + p0 * (1 - p0) / n0) * n / (n - 1)
    return (x1 / n1 - x0 / n0 - d) / math.sqrt(variance)


CASES = [(x0, n0, x1, n1, d)
         for n0, n1 in ((30, 30), (100, 100), (57, 190), (500, 500))
         for x0, x1 in ((0, 0), (1, 0), (n0 // 10, n1 // 10), (n0 // 3, n1 // 3 + 2),
                        (n0 // 2, n1 // 2), (n0 - 1, n1), (n0, n1 - 3))
         for d in (0.02, 0.05, 0.1)]


@pytest.mark.parametrize(("x0", "n0", "x1", "n1", "d"), CASES[::3])
def test_unpaired_score_is_the_miettinen_nurminen_statistic(
        x0: int, n0: int, x1: int, n1: int, d: float) -> None:
    assert mn_score(x0, n0, x1, n1, d) == pytest.approx(_brute_mn(x0, n0, x1, n1, d), abs=1e-9)


def test_unpaired_score_equals_statsmodels() -> None:
    """statsmodels' test_proportions_2indep(after, before, compare="diff", method="score",
    value=D, alternative="smaller") tests after - before >= D with the same statistic. Its
    0.15 release puts count0 where Miettinen and Nurminen have nobs0 in the cubic of the
    restricted estimate (statsmodels issue 10269), so its estimate is off wherever x0 != n0.
    Where it is the maximum-likelihood estimate (its score equation is zero) the statistics
    must agree to 1e-9; where it is not, ours must be the brute-force one."""
    from statsmodels.stats.proportion import (  # type: ignore[import-untyped]
        score_test_proportions_2indep,
        test_proportions_2indep,
    )

    agreed = 0
    for x0, n0, x1, n1, d in CASES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            theirs = test_proportions_2indep(x1, n1, x0, n0, value=d, compare="diff",
                                             method="score", alternative="smaller")
            held = score_test_proportions_2indep(x1, n1, x0, n0, value=d, compare="diff",
                                                 return_results=True)
        ours = mn_score(x0, n0, x1, n1, d)
        p0 = float(held.prop2_null)
        exact = _restricted_p0(x0, n0, x1, n1, d)
        if abs(p0 - exact) < 1e-9:
            assert ours == pytest.approx(float(theirs.statistic), abs=1e-9), (x0, n0, x1, n1, d)
            agreed += 1
        else:
            assert ours == pytest.approx(_brute_mn(x0, n0, x1, n1, d), abs=1e-9)
    # Rows with x0 == n0 (and the symmetric ones) are unaffected by the bug: some agree.
    assert agreed >= 6


def _brute_tango(b: int, c: int, n: int, d: float) -> float:
    """Tango's statistic with the restricted MLE of the before-only rate found numerically:
    the root of the trinomial likelihood's derivative under pi_c = pi_b + d (not Tango's
    closed form)."""
    rest = n - b - c

    def score(pb: float) -> float:  # the derivative of the trinomial log-likelihood
        pc = pb + d
        return b / pb + c / pc - 2 * rest / (1 - pb - pc)

    lo, hi = max(0.0, -d), (1 - d) / 2
    eps = 1e-13
    if b == 0 and c == 0:
        pb = lo
    elif rest == 0:
        pb = hi
    elif score(lo + eps) <= 0:
        pb = lo
    else:
        pb = float(optimize.brentq(score, lo + eps, hi - eps, xtol=1e-15, rtol=1e-15,
                                   maxiter=500))
    variance = n * (2 * pb + d * (1 - d))
    return (c - b - n * d) / math.sqrt(variance)


@pytest.mark.parametrize("n", [30, 100, 190, 500])
@pytest.mark.parametrize("d", [0.02, 0.05, 0.1])
def test_paired_score_is_tangos_statistic(n: int, d: float) -> None:
    for b, c in ((0, 0), (1, 0), (0, 3), (n // 10, n // 10), (n // 4, n // 5), (n // 2, 0),
                 (3, n // 3)):
        ours = float(tango_scores(np.array([float(b)]), np.array([float(c)]), n, d)[0])
        assert ours == pytest.approx(_brute_tango(b, c, n, d), abs=1e-7), (b, c)


# --------------------------------------------------------------------------- exact size


@pytest.mark.parametrize("paired", [False, True])
@pytest.mark.parametrize(("n", "d"), [(30, 0.05), (30, 0.1), (100, 0.02)])
def test_exact_size_at_the_margin_is_at_most_q(paired: bool, n: int, d: float) -> None:
    """A slice of bench/margin_size.py's grid: the probability of 'within the margin' when
    the change is exactly the margin, summed over every outcome, at each base rate."""
    size = margin_size.size_of(paired, n, d, q=0.05, step=0.01)
    assert size.exact <= 0.05
    assert size.exact > 0.03  # not a test that never says within
    # The test's supremum is not beaten by a grid ten times finer (beyond rounding).
    assert size.sup_shortfall <= 1.0 + 1e-6


def test_the_normal_score_test_is_liberal_where_the_exact_one_is_not() -> None:
    """Why the exact p-value: at n = 30 the score test referred to the normal rejects more
    than q of the time at the margin (bench/margin_size.py prints by how much)."""
    size = margin_size.size_of(False, 30, 0.05, q=0.05, step=0.01)
    assert size.asymptotic > 0.05 >= size.exact


# --------------------------------------------------------------------------- one row


def test_within_and_not_within() -> None:
    clear = margin_test_unpaired(20, 200, 18, 200, 0.1)
    assert clear.within and clear.p <= 0.05 and clear.bound < 0.1
    unclear = margin_test_unpaired(20, 200, 30, 200, 0.05)
    assert not unclear.within and unclear.bound > 0.05
    assert unclear.change == pytest.approx(0.05)


@pytest.mark.parametrize("paired", [False, True])
def test_bound_is_the_smallest_passing_margin(paired: bool) -> None:
    n, first, second = 100, 12, 15
    test = (margin_test_paired(first, second, n, 0.05) if paired
            else margin_test_unpaired(first, n, second, n, 0.05))
    assert _quick_p(paired, n, n, first, second, test.bound) <= 0.05
    assert _quick_p(paired, n, n, first, second, test.bound - 2e-4) > 0.05
    design = margin_design(paired, n, n, 0.05)
    assert design.sup_tail(float(design.order[first, second])) == pytest.approx(test.p)
    assert test.within == (test.bound <= 0.05)


def test_quick_p_equals_the_design_p() -> None:
    for paired in (False, True):
        design = margin_design(paired, 60, 60, 0.05)
        for first, second in ((0, 0), (5, 2), (20, 21), (30, 30), (59, 0)):
            if paired and first + second > 60:
                continue
            assert _quick_p(paired, 60, 60, first, second, 0.05) == pytest.approx(
                design.sup_tail(float(design.order[first, second])), rel=1e-12)


def test_a_success_tests_its_absence() -> None:
    # resolved 180 of 200 before, 170 after: the unresolved share rose 0.05.
    success = margin_test_unpaired(180, 200, 170, 200, 0.1, worse_when="fall")
    failure = margin_test_unpaired(20, 200, 30, 200, 0.1)
    assert success == failure
    lost = margin_test_paired(3, 9, 100, 0.1, worse_when="fall")
    assert lost == margin_test_paired(9, 3, 100, 0.1)
    assert margin_test(20, 200, 30, 200, 0.1) == failure


@pytest.mark.parametrize(("call", "message"), [
    (lambda: margin_test_unpaired(1, 10, 1, 10, 0.0), "margin must be a number strictly"),
    (lambda: margin_test_unpaired(1, 10, 1, 10, 1.0), "margin must be a number strictly"),
    (lambda: margin_test_unpaired(11, 10, 1, 10, 0.1), "x_before must be at most"),
    (lambda: margin_test_paired(6, 6, 10, 0.1), "at most n"),
    (lambda: margin_test(1, 10, 1, 12, 0.1, before_only=1, after_only=1), "one count"),
])
def test_bad_input_is_refused(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


# --------------------------------------------------------------------------- design check

_POWER_SPEC = importlib.util.spec_from_file_location(
    "prove_bench_margin_power",
    Path(__file__).resolve().parent.parent / "bench" / "margin_power.py")
assert _POWER_SPEC is not None and _POWER_SPEC.loader is not None
margin_power = importlib.util.module_from_spec(_POWER_SPEC)
sys.modules[_POWER_SPEC.name] = margin_power
_POWER_SPEC.loader.exec_module(margin_power)


@pytest.mark.parametrize("paired", [False, True], ids=["unpaired", "paired"])
@pytest.mark.parametrize("m", [1, 16])
def test_design_replicates_give_the_sweep_claim_four_times_in_five(paired: bool, m: int) -> None:
    """The smaller CI version of bench/margin_power.py (margin 0.2 instead of 0.1, so the
    designs are small): with the replicates the check asks and nothing changed, every one of
    m rows is shown within the margin in 0.80 +- 0.04 of 2,000 comparisons (fixed seed);
    one replicate fewer does not pass the check."""
    from pytest_prove.stats import margin_design_check, margin_replicates

    n = margin_replicates(paired, m, 0.05, 0.2)
    assert n is not None
    check = margin_design_check(n, m, paired=paired, margin=0.2)
    assert check.ok and check.replicates_needed is None
    assert check.row_power == pytest.approx(0.8 ** (1 / m))
    assert check.weakest_power >= check.row_power
    short = margin_design_check(n - 1, m, paired=paired, margin=0.2)
    assert not short.ok and short.replicates_needed == n
    share = margin_power.simulate(paired, n, m, 0.2, check.weakest_base_rate, 2_000,
                                  margin_power.SEED + m + 7 * paired)
    assert abs(share - 0.8) <= 0.04, share
    assert "intersection-union" in check.method


def test_design_check_region_is_the_tests_region() -> None:
    """The design check's region (found without the whole outcome grid) is the one the
    comparison's p-values reject."""
    from pytest_prove.stats._margin_design import _quick_region

    for paired in (False, True):
        design = margin_design(paired, 80, 80, 0.1)
        full = design.counts(design.critical(0.05))
        assert (full == _quick_region(paired, 80, 0.1, 0.05)).all()
