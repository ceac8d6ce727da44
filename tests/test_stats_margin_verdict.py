"""The margin verdict of compare(margin=...): its three words, the Holm-adjusted per-row
claims beside the sweep-wide one, a significant rise below the margin, and no change at all
to a comparison without a margin."""

from __future__ import annotations

import pytest

from pytest_prove.stats import Pairs, RowInput, compare


def _row(condition: str, x0: int, x1: int, n: int = 400, event: str = "failed") -> RowInput:
    return RowInput(condition, event, "rise", x0, n, x1, n)


def test_every_row_within_is_the_sweep_claim() -> None:
    found = compare([_row("a", 40, 38), _row("b", 80, 78)], margin=0.1)
    assert found.margin is not None and found.margin.word == "within margin"
    assert found.margin.holds and not found.margin.not_within
    assert all(r.within and r.margin is not None and r.margin.bound < 0.1
               for r in found.rows)
    assert "intersection-union test, Berger 1982" in found.margin.method
    assert found.to_dict()["margin"]["word"] == "within margin"


def test_a_row_not_shown_within_is_named_with_replicates() -> None:
    found = compare([_row("a", 40, 38, n=60), _row("b", 12, 22, n=60)], margin=0.2)
    assert found.margin is not None
    assert found.margin.word == "not shown within margin"
    assert [r.condition for r in found.margin.not_within]
    needed = found.margin.replicates_needed
    assert needed is not None and needed > 60 and found.margin.replicates_exact
    for row in found.margin.not_within:
        assert row.margin is not None and row.margin.bound > 0.2 and row.margin.p > 0.05


def test_a_significant_worsening_beyond_the_margin() -> None:
    found = compare([_row("a", 40, 160), _row("b", 40, 40)], margin=0.05)
    assert found.verdict.word == "worse"
    assert found.margin is not None and found.margin.word == "beyond margin"
    assert [r.condition for r in found.margin.beyond] == ["a"]


def test_a_significant_rise_smaller_than_the_margin() -> None:
    """Worse (the rise is real) and within the margin (it is below D) at once."""
    n = 1000
    found = compare([RowInput("a", "failed", "rise", 130, n, 170, n,
                              Pairs(n, 100, 30, 70))], margin=0.1)
    assert found.verdict.word == "worse"
    assert found.margin is not None and found.margin.word == "within margin"


def test_per_row_claims_are_holm_adjusted() -> None:
    rows = [_row(name, 40, 40, n=200) for name in "abcdefgh"]
    found = compare(rows, margin=0.06)
    sweep = [r.within for r in found.rows]
    alone = [r.within_alone for r in found.rows]
    assert all(r.margin_holm is not None and r.margin is not None
               and r.margin_holm >= r.margin.p for r in found.rows)
    assert sum(alone) <= sum(sweep)


def test_a_success_is_tested_by_its_absence() -> None:
    success = compare([RowInput("a", "resolved", "fall", 180, 200, 165, 200)], margin=0.2)
    failure = compare([RowInput("a", "failed", "rise", 20, 200, 35, 200)], margin=0.2)
    assert success.rows[0].margin == failure.rows[0].margin


def test_without_a_margin_nothing_changes() -> None:
    rows = [_row("a", 40, 60), _row("b", 80, 78)]
    plain = compare(rows)
    assert plain.margin is None and all(r.margin is None for r in plain.rows)
    assert "margin" not in plain.to_dict() and "margin" not in plain.rows[0].to_dict()
    with_margin = compare(rows, margin=0.1)
    assert with_margin.verdict == plain.verdict


@pytest.mark.parametrize("value", [0, 1, -0.5, float("nan"), "0.1"])
def test_a_bad_margin_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match="margin must be a number strictly between 0 and 1"):
        compare([_row("a", 1, 1)], margin=value)  # type: ignore[arg-type]
