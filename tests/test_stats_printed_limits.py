"""Every printed detection limit is rounded outward: the change the text names is detected at
least 4 times in 5 (issue 12), checked by exact power at the printed figure."""

from __future__ import annotations

import pytest

from pytest_prove.stats import Pairs, RowInput, compare, detection_power, outward


def _rows(n: int, paired: bool) -> list[RowInput]:
    rows = []
    for i, x in enumerate((0, 1, 3, 9, 25, 60, 140, 333, n // 2, n - 40, n - 3, n)):
        after = min(n, x + 1)
        pairs = Pairs(n=n, both=x, before_only=0, after_only=after - x) if paired else None
        rows.append(RowInput(f"c{i}", "unresolved", "rise", x, n, after, n, pairs=pairs))
    return rows


@pytest.mark.parametrize(("n", "paired"), [(1000, False), (5000, True)])
def test_printed_limits_are_at_least_the_exact_ones_and_keep_their_power(
        n: int, paired: bool) -> None:
    comparison = compare(_rows(n, paired))
    checked = 0
    for row in comparison.rows:
        document = row.to_dict()
        for direction in ("rise", "fall"):
            limit = document[direction]
            if limit["value"] is None:
                assert limit["shown"] == limit["status"]
                continue
            shown = float(limit["shown"])
            assert shown >= limit["value"], (row.condition, direction, limit)
            p0 = row.before
            p1 = p0 + shown if direction == "rise" else p0 - shown
            p1 = min(max(p1, 0.0), 1.0)
            power = detection_power(p0, p1, n, n, paired=paired, alpha=comparison.q / comparison.m,
                                    direction=direction)  # type: ignore[arg-type]
            assert power >= 0.8, (row.condition, direction, limit, power)
            checked += 1
    assert checked >= 16


def test_rounding_up_shows_what_rounding_to_nearest_hid() -> None:
    """The issue's two figures: 0.00924 read 0.009, and 0.0013 read 0.001."""
    assert outward(0.00924) == "0.0093"
    assert outward(0.0013) == "0.0013"
    assert outward(0.1501) == "0.151" and outward(0.15) == "0.150"
    assert outward(0.00999) == "0.010"
    for value in (0.000123, 0.00924, 0.0301, 0.1, 0.45678, 0.999):
        assert float(outward(value)) >= value
        assert float(outward(value)) - value < max(0.001, value * 0.1)
