"""Detection limits and the design check: reference figures, exact power, invariants."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from pytest_prove.stats import (
    Limit,
    design_check,
    detection_power,
    fall_limit,
    fisher_exact_p,
    limits,
    mcnemar_midp,
    replicates_for,
    rise_limit,
)

ALPHA_16 = 0.05 / 16


def test_reference_paired_base_zero() -> None:
    # Poisson Prove's worked example: 190 twins, base rate 0, 16 tests, q 0.05 -> 0.059.
    limit = rise_limit(0, 190, paired=True, alpha=ALPHA_16)
    assert limit.status == "ok"
    assert limit.value is not None and round(limit.value, 3) == 0.059
    assert f"{limit}" == "0.060"  # printed rounded up: never a promise below the exact limit
    assert fall_limit(0, 190, paired=True, alpha=ALPHA_16) == Limit(None, "no room")


def test_reference_design_check_fisher() -> None:
    # The reference tool's dry run: Fisher, 16 tests, 190 replicates a cell -> 0.198 at 0.400.
    check = design_check(190, 16, paired=False)
    assert round(check.worst_limit or 0.0, 3) == 0.198
    assert round(check.worst_base_rate, 3) == 0.400
    assert check.ok and check.replicates_needed is None


def test_reference_design_check_paired() -> None:
    """The reference tool printed 0.200 at 0.400 for the paired design; its paired model is
    not published. Ours (independent twins) gives 0.195 at the same base rate, slightly below
    Fisher's 0.198, as expected of a test that uses the pairing."""
    check = design_check(190, 16, paired=True)
    assert round(check.worst_limit or 0.0, 3) == 0.195
    assert round(check.worst_base_rate, 3) == 0.400
    assert check.ok


@pytest.mark.parametrize("paired", [False, True])
def test_design_check_gives_the_replicates_that_pass(paired: bool) -> None:
    check = design_check(100, 16, paired=paired)
    assert not check.ok
    assert check.worst_limit is not None and check.worst_limit > 0.20
    needed = check.replicates_needed
    assert needed is not None and 150 < needed < 200
    assert design_check(needed, 16, paired=paired).ok
    assert not design_check(needed - 1, 16, paired=paired).ok


def _fisher_power_by_enumeration(n1: int, n2: int, p0: float, p1: float, alpha: float) -> float:
    total = 0.0
    for x1, x2 in itertools.product(range(n1 + 1), range(n2 + 1)):
        if x2 * n1 > x1 * n2 and fisher_exact_p(x1, n1, x2, n2) <= alpha:
            total += stats.binom.pmf(x1, n1, p0) * stats.binom.pmf(x2, n2, p1)
    return total


def _paired_power_by_enumeration(n: int, p0: float, p1: float, alpha: float) -> float:
    probs = [p0 * (1 - p1), (1 - p0) * p1]
    total = 0.0
    for b in range(n + 1):
        for c in range(n + 1 - b):
            if c > b and mcnemar_midp(b, c) <= alpha:
                total += stats.multinomial.pmf([b, c, n - b - c], n, [*probs, 1 - sum(probs)])
    return total


@pytest.mark.parametrize(("n1", "n2", "p0", "p1"), [(12, 12, 0.1, 0.6), (9, 15, 0.3, 0.8),
                                                    (20, 20, 0.0, 0.4)])
def test_fisher_power_is_exact(n1: int, n2: int, p0: float, p1: float) -> None:
    ours = detection_power(p0, p1, n1, n2, paired=False, alpha=0.05)
    assert ours == pytest.approx(_fisher_power_by_enumeration(n1, n2, p0, p1, 0.05), abs=1e-12)


@pytest.mark.parametrize(("n", "p0", "p1"), [(15, 0.1, 0.6), (20, 0.4, 0.7), (25, 0.0, 0.3)])
def test_paired_power_is_exact_under_the_model(n: int, p0: float, p1: float) -> None:
    ours = detection_power(p0, p1, n, paired=True, alpha=0.05)
    assert ours == pytest.approx(_paired_power_by_enumeration(n, p0, p1, 0.05), abs=1e-12)


@pytest.mark.parametrize("paired", [False, True])
@pytest.mark.parametrize("p0", [0.0, 0.05, 0.3, 0.5, 0.85])
def test_power_rises_with_the_change(paired: bool, p0: float) -> None:
    # The bisection that finds a limit relies on this.
    rises = np.linspace(p0, 1.0, 60)
    power = [detection_power(p0, float(p1), 60, paired=paired, alpha=ALPHA_16) for p1 in rises]
    assert np.all(np.diff(power) >= -1e-12)
    falls = np.linspace(p0, 0.0, 60)
    power = [detection_power(p0, float(p1), 60, paired=paired, alpha=ALPHA_16,
                             direction="fall") for p1 in falls]
    assert np.all(np.diff(power) >= -1e-12)


@pytest.mark.parametrize("paired", [False, True])
@pytest.mark.parametrize("x0", [0, 19, 76, 150])
def test_power_at_the_limit_is_the_target(paired: bool, x0: int) -> None:
    found = limits(x0, 190, paired=paired, alpha=ALPHA_16, power=0.8)
    p0 = x0 / 190
    for limit, sign in ((found.rise, 1), (found.fall, -1)):
        if limit.value is None:
            continue
        at = detection_power(p0, p0 + sign * limit.value, 190, paired=paired, alpha=ALPHA_16)
        assert at == pytest.approx(0.8, abs=1e-6)


@pytest.mark.parametrize("paired", [False, True])
def test_limit_shrinks_as_replicates_grow(paired: bool) -> None:
    values = [rise_limit(n // 5, n, paired=paired, alpha=ALPHA_16).value for n in
              (50, 100, 200, 400, 800)]
    assert all(v is not None for v in values)
    assert values == sorted(values, reverse=True)  # type: ignore[type-var]


def test_statuses() -> None:
    assert rise_limit(190, 190, paired=False, alpha=ALPHA_16) == Limit(None, "no room")
    # One failure in 190: a fall of at most 0.005 cannot be flagged at 16 tests.
    assert fall_limit(1, 190, paired=True, alpha=ALPHA_16).status == "none detectable"
    assert str(fall_limit(1, 190, paired=True, alpha=ALPHA_16)) == "none detectable"


def test_replicates_for_a_base_rate() -> None:
    needed = replicates_for(0.4, paired=False, alpha=ALPHA_16, max_mde=0.2)
    assert needed is not None
    assert rise_limit(int(0.4 * needed), needed, paired=False, alpha=ALPHA_16).value is not None


def test_limit_input_errors() -> None:
    with pytest.raises(ValueError, match=r"x_before must be at most n_before \(10\), got 12"):
        rise_limit(12, 10, paired=False, alpha=0.01)
    with pytest.raises(ValueError, match="alpha must be a number strictly between 0 and 1"):
        rise_limit(1, 10, paired=False, alpha=0.0)
    with pytest.raises(ValueError, match="one count of twins"):
        rise_limit(1, 10, 12, paired=True, alpha=0.01)
    with pytest.raises(ValueError, match="q must be a number strictly between 0 and 1, got 2"):
        design_check(190, 16, paired=False, q=2)
