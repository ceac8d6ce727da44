"""Every printed number true (issue 36, item 5): what a report or a design check prints agrees
with what the engine decided, checked by enumeration."""

from __future__ import annotations

import pytest

from pytest_prove.stats import margin_test_paired, margin_test_unpaired


def _disagreements(sizes: range | tuple[int, ...], margin: float) -> list[tuple[object, ...]]:
    """Every outcome of n twins and of two arms of n whose margin bound contradicts its
    decision: within the margin with a bound above it, or not within with one at or below."""
    found: list[tuple[object, ...]] = []
    for n in sizes:
        for x0 in range(n + 1):
            for x1 in range(n + 1):
                test = margin_test_unpaired(x0, n, x1, n, margin)
                if test.within != (test.bound <= margin):
                    found.append(("unpaired", n, x0, x1, test.p, test.bound))
        for b in range(n + 1):
            for c in range(n + 1 - b):
                test = margin_test_paired(b, c, n, margin)
                if test.within != (test.bound <= margin):
                    found.append(("paired", n, b, c, test.p, test.bound))
    return found


def test_margin_bound_never_contradicts_the_decision() -> None:
    """The audit's cases: 6/10 -> 3/10 at margin 0.1 read "within margin 0.100 ... the
    largest upper bound is 0.116" (and two outcomes of 4 disagreed the same way). Every
    outcome of n = 4 and n = 10, both designs, at margin 0.1."""
    assert _disagreements((4, 10), 0.1) == []
    test = margin_test_unpaired(6, 10, 3, 10, 0.1)
    assert test.within == (test.bound <= 0.1)


@pytest.mark.slow
@pytest.mark.parametrize("margin", [0.1])
def test_margin_bound_never_contradicts_the_decision_up_to_30(margin: float) -> None:
    """The acceptance: no outcome at n <= 30 (two arms of n, or n twins) whose bound and
    decision disagree."""
    assert _disagreements(range(1, 31), margin) == []
