"""The target rows' reading of one condition (review/targets.py): episodes without an
outcome count against whichever claim they could flatter, pass@k is tested as the rate
target on the non-successes it is equivalent to, and the words follow the Holm-adjusted
p-values at q."""

from __future__ import annotations

import math

import pytest

from pytest_prove.declare.targets import parse_target
from pytest_prove.review.targets import _counts, _test, distance_for
from pytest_prove.stats import pass_at_k, target_test


def test_episodes_without_an_outcome_count_against_each_claim() -> None:
    target = parse_target("unresolved<=0.3")
    outcomes = ["unresolved"] * 5 + ["resolved"] * 35 + [None] * 10
    n, x, u = _counts(target, outcomes, ("resolved",), "test")
    assert (n, x, u) == (50, 5, 10)
    found = _test(target, n, x, u, 0.05)
    # meets reads the 10 as unresolved (15 of 50), misses as resolved (5 of 50)
    assert found.p_meets == target_test(15, 50, 0.3, "<=").p_meets
    assert found.p_misses == target_test(5, 50, 0.3, "<=").p_misses
    assert found.p_meets > target_test(5, 50, 0.3, "<=").p_meets
    # a success target: meets reads them as failures, misses as successes
    wins = parse_target("resolved>=0.6")
    n, x, u = _counts(wins, outcomes, ("resolved",), "test")
    found = _test(wins, n, x, u, 0.05)
    assert found.p_meets == target_test(35, 50, 0.6, ">=").p_meets
    assert found.p_misses == target_test(45, 50, 0.6, ">=").p_misses
    # --prove-missing=ignore leaves them out of the count
    assert _counts(target, outcomes, ("resolved",), "ignore") == (40, 5, 0)
    # and a target on "no outcome" counts them as its events, over every episode
    assert _counts(parse_target("no outcome<=0.1"), outcomes, ("resolved",), "test") == (
        50, 10, 0)


def test_pass_at_k_is_tested_on_the_non_successes_and_shown_on_its_own_scale() -> None:
    target = parse_target("pass@4>=0.9")
    outcomes = ["resolved"] * 12 + ["unresolved"] * 18
    n, x, u = _counts(target, outcomes, ("resolved",), "test")
    assert (n, x, u) == (30, 18, 0)  # the non-successes
    found = _test(target, n, x, u, 0.05)
    same = target_test(18, 30, 0.1, "<=", k=4)  # (1 - p)^4 <= 0.1
    assert (found.p_meets, found.p_misses) == (same.p_meets, same.p_misses)
    assert math.isclose(found.estimate, pass_at_k(12, 30, 4))
    assert math.isclose(found.low, 1 - same.high) and math.isclose(found.high, 1 - same.low)
    assert found.low <= found.estimate <= found.high


@pytest.mark.parametrize(("text", "distance", "expected"), [
    ("unresolved<=0.25", 0.2, 0.2),
    ("resolved>=0.9", 0.2, 0.1),  # as far as the rate can go
    ("no outcome<=0.05", 0.2, 0.05),
    ("pass@2>=0.95", 0.2, 0.05),
])
def test_the_design_distance_stays_inside_zero_and_one(text: str, distance: float,
                                                       expected: float) -> None:
    found = distance_for(parse_target(text), distance)
    assert found is not None and math.isclose(found, expected)
