"""The comparison: verdict words, row fields, fragility, JSON and the terminal lines."""

from __future__ import annotations

import json

import pytest

from pytest_prove.report.terminal import format_comparison
from pytest_prove.stats import Pairs, RowInput, compare


def _support(refund_after: int = 19) -> list[RowInput]:
    rows = []
    for ticket in ("refund", "password", "shipping"):
        after = refund_after if ticket == "refund" else 19
        rows.append(RowInput(f"ticket={ticket}", "unresolved", "rise", 19, 190, after, 190))
        rows.append(RowInput(f"ticket={ticket}", "resolved", "fall", 171, 190, 190 - after, 190))
    return rows


def test_worse_names_the_rows_and_counts_by_event() -> None:
    result = compare(_support(refund_after=67))
    verdict = result.verdict
    assert verdict.word == "worse"
    assert {(r.condition, r.event) for r in verdict.worse} == {
        ("ticket=refund", "unresolved"), ("ticket=refund", "resolved")}
    assert [(t.event, t.worse, t.safer) for t in verdict.by_event] == [
        ("unresolved", 1, 0), ("resolved", 1, 0)]
    row = next(r for r in result.rows if r.event == "unresolved" and r.counted)
    assert row.flag and row.direction == "worse" and row.change > 0
    assert row.interval.low > 0 and row.interval.level == pytest.approx(1 - 0.05 / 6)
    assert verdict.fragility.flips is not None and not verdict.fragility.exhaustive


def test_safer_when_only_improvements_count() -> None:
    rows = [RowInput("a", "failed", "rise", 60, 190, 10, 190),
            RowInput("b", "failed", "rise", 60, 190, 60, 190)]
    verdict = compare(rows).verdict
    assert verdict.word == "safer"
    assert [r.condition for r in verdict.safer] == ["a"]


def test_no_significant_change_when_every_row_could_see_max_mde() -> None:
    verdict = compare(_support()).verdict
    assert verdict.word == "no significant change"
    assert verdict.blind == () and verdict.replicates_needed is None
    assert verdict.fragility.exhaustive and verdict.fragility.flips is not None


def test_too_small_to_tell_names_rows_and_replicates() -> None:
    rows = [RowInput("small", "failed", "rise", 8, 20, 8, 20),
            RowInput("big", "failed", "rise", 19, 190, 19, 190)]
    result = compare(rows)
    verdict = result.verdict
    assert verdict.word == "too small to tell"
    assert [r.condition for r in verdict.blind] == ["small"]
    blind = verdict.blind[0]
    assert set(blind.blind) == {"rise", "fall"}
    needed = verdict.replicates_needed
    assert needed is not None and needed > 20
    # With that many replicates at the same base rate, the row would see max_mde both ways.
    bigger = compare([RowInput("small", "failed", "rise", round(0.4 * needed), needed,
                               round(0.4 * needed), needed),
                      RowInput("big", "failed", "rise", 19, 190, 19, 190)])
    small = next(r for r in bigger.rows if r.condition == "small")
    assert abs(small.before - 0.4) < 0.01


def test_a_direction_without_room_for_max_mde_does_not_block() -> None:
    # Base rate 0.95 on 20 replicates: no rise is detectable, but a rise of 0.20 is impossible
    # anyway, so only the fall (which 20 replicates cannot see either) is held against the row.
    rows = [RowInput("a", "right", "fall", 19, 20, 19, 20)]
    row = compare(rows).rows[0]
    assert row.rise.status == "none detectable"
    assert row.blind == ("fall",)


def test_paired_rows_use_mcnemar_and_tango() -> None:
    rows = [RowInput("reroute", "harmful", "rise", 1, 190, 6, 190, Pairs(190, 0, 1, 6)),
            RowInput("break", "harmful", "rise", 0, 190, 0, 190, Pairs(190, 0, 0, 0))]
    result = compare(rows, q=0.05)
    assert result.design == "paired" and result.paired_model is not None
    reroute = result.rows[0]
    assert reroute.p == pytest.approx(9 / 128, abs=1e-12)  # mid-p (1, 6): F(1) + F(0), d = 7
    assert reroute.fall.status == "none detectable"
    assert "independently" in result.paired_model


def test_to_dict_is_json_with_a_schema_version() -> None:
    result = compare(_support(refund_after=67))
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["schema_version"] == 1
    assert data["verdict"]["word"] == "worse"
    row = data["rows"][0]
    for key in ("condition", "event", "x_before", "n_before", "x_after", "n_after", "before",
                "after", "change", "p", "q", "flag", "counted", "direction", "interval",
                "rise", "fall"):
        assert key in row
    assert set(row["interval"]) == {"low", "high", "level"}
    assert set(row["rise"]) == {"value", "status", "shown"}
    assert float(row["rise"]["shown"]) >= row["rise"]["value"]
    assert data["verdict"]["fragility"]["exhaustive"] is False


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (RowInput("a", "x", "up", 1, 10, 1, 10), "worse_when must be 'rise' or 'fall'"),  # type: ignore[arg-type]
        (RowInput("a", "x", "rise", 11, 10, 1, 10), r"x_before must be at most .*n_before"),
        (RowInput("a", "x", "rise", 1, 10, 0, 0), "at least one episode"),
        (RowInput("a", "x", "rise", 1, 10, 2, 10, Pairs(10, 0, 2, 2)), "from its pairs"),
    ],
)
def test_bad_rows_are_named(row: RowInput, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compare([row])


def test_bad_settings_are_named() -> None:
    with pytest.raises(ValueError, match="q must be a number strictly between 0 and 1, got 0"):
        compare(_support(), q=0)
    with pytest.raises(ValueError, match="at least one"):
        compare([])


def test_terminal_puts_the_verdict_first_and_shows_only_what_moved() -> None:
    lines = format_comparison(compare(_support(refund_after=67)), before="base", after="cur")
    assert lines[0].startswith("worse: 1 condition got worse (ticket=refund")
    assert "0.100 -> 0.353" in lines[0] and "Holm q 0.05 over 6 tests" in lines[0]
    table = [line for line in lines if line.startswith("ticket=")]
    assert len(table) == 2 and all("worse" in line for line in table)
    assert any("-v shows every row" in line for line in lines)
    verbose = format_comparison(compare(_support(refund_after=67)), before="base", after="cur",
                                verbose=True)
    assert len([line for line in verbose if line.startswith("ticket=")]) == 6


def test_terminal_gives_the_next_step_when_too_small() -> None:
    rows = [RowInput("small", "failed", "rise", 8, 20, 8, 20)]
    lines = format_comparison(compare(rows), before="base", after="cur")
    assert lines[0].startswith("too small to tell:")
    assert "small failed (rise/fall)" in lines[0]
    assert lines[-1].startswith("next: run ")
