"""Plain-text lines for the pytest terminal summary (and the command line).

Reads a :class:`~pytest_prove.stats.Comparison`; computes nothing statistical. The first line
is the answer an agent developer came for (the word, then what it rests on), the table shows
only what moved or could not have moved visibly (every row with ``verbose``), and the last
lines say how it was tested and what to do next. Text from a rollout or the store (condition
labels, events, run names) goes through :func:`terminal_text`: one line, no control characters,
at most 80 characters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pytest_prove.declare.spec import NO_OUTCOME_EVENT
from pytest_prove.stats import Comparison, Fragility, Limit, Row, outward

from ._format import TableLine, plain_text, q_text, rate, signed, status_text, terminal_text

__all__ = ["bound_text", "condition_failure", "format_comparison", "margin_line",
           "margin_next", "verdict_line"]

_LIST_AT_MOST = 3


def _limit(limit: Limit) -> str:
    return str(limit)


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else (plural or word + 's')}"


def _event_words(row: Row) -> str:
    if row.event == NO_OUTCOME_EVENT:
        return "episodes that ended without an outcome"
    return terminal_text(row.event)


def _move(row: Row) -> str:
    change = f"{rate(row.before)} -> {rate(row.after)}"
    if row.event == NO_OUTCOME_EVENT:
        more = "more" if row.change > 0 else "fewer"
        return (f"{terminal_text(row.condition)}: {more} episodes ended without an outcome, "
                f"{change}")
    return f"{terminal_text(row.condition)} {terminal_text(row.event)} {change}"


def _listed(rows: Sequence[Row], said: Callable[[Row], str] = _move) -> str:
    """The first rows, each as ``said`` words it, then how many more."""
    shown = [said(r) for r in rows[:_LIST_AT_MOST]]
    more = len(rows) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _test_name(comparison: Comparison) -> str:
    return {
        "paired": "paired McNemar mid-p",
        "unpaired": "Fisher's exact test",
        "mixed": "McNemar mid-p (paired rows) and Fisher (unpaired rows)",
    }[comparison.design]


def verdict_line(comparison: Comparison) -> str:
    """The one line to read first: the word, then the facts it rests on."""
    verdict = comparison.verdict
    largest = "none" if verdict.largest_limit is None else outward(verdict.largest_limit)
    is_sequential = comparison.method.startswith("group-sequential")
    sequential = "group-sequential (exact, stopping early), " if is_sequential else ""
    # A sequential run's rows have no limit of their own (the fixed test's limit at the look
    # a condition stopped at is not what the procedure detects): the design's power is.
    read = ("limits: the sequential design's, none per row" if is_sequential
            else f"largest limit read {largest}")
    tail = (f"{read}; {sequential}{_test_name(comparison)}, "
            f"Holm q {comparison.q:g} over {comparison.m} tests")
    if verdict.word == "worse":
        conditions = len({r.condition for r in verdict.worse})
        head = f"worse: {_plural(conditions, 'condition')} got worse ({_listed(verdict.worse)})"
        if verdict.safer:
            head += f"; {len(verdict.safer)} got better ({_listed(verdict.safer)})"
        return f"{head}; {tail}"
    if verdict.word == "safer":
        conditions = len({r.condition for r in verdict.safer})
        return (f"safer: {_plural(conditions, 'condition')} got better "
                f"({_listed(verdict.safer)}) and none got worse; {tail}")
    mde = rate(comparison.max_mde)
    if verdict.word == "no significant change":
        # An unpaired sequential design stops a condition once a worsening is ruled out:
        # its power is for a worsening, not a change either way.
        change = "change" if comparison.design == "paired" else "worsening"
        could = (f"the sequential design could have shown a {change} of {mde} in every "
                 f"condition (its check of the power at {mde} passed, or the condition ruled "
                 f"it out)" if is_sequential
                 else f"every condition could have shown a change of {mde}")
        return f"no significant change: nothing changed significantly, and {could}; {tail}"
    blind = verdict.blind
    names = _listed(blind, lambda r: f"{_row_name(r)} ({'/'.join(r.blind)})")
    return (f"too small to tell: nothing changed significantly, but "
            f"{_plural(len(blind), 'row')} could not have shown a change of {mde}: {names}; "
            f"{tail}")


def _flips_text(fragility: Fragility) -> str:
    """Which flips would change the word: the first few whole, then how many more (the
    labels are the rollout's, each on one line)."""
    if not fragility.moves:
        return terminal_text(fragility.detail, 400)
    said = [f"{m.flips} after {'episode' if m.flips == 1 else 'episodes'} of "
            f"{terminal_text(m.condition)} made to "
            f"{'record' if m.toward == 'more' else 'not record'} {terminal_text(m.event)}"
            for m in fragility.moves[:_LIST_AT_MOST]]
    more = len(fragility.moves) - len(said)
    return "; ".join(said) + (f"; and {more} more" if more > 0 else "")


def _row_name(row: Row) -> str:
    return f"{terminal_text(row.condition)} {terminal_text(row.event)}"


def margin_line(comparison: Comparison) -> str | None:
    """The margin's answer, on its own line (None without a margin): the words are kept
    apart from the verdict's, which answers another question."""
    found = comparison.margin
    if found is None:
        return None
    d = rate(found.margin)
    m = comparison.m
    if found.word == "within margin":
        widest = max(comparison.rows, key=lambda r: r.margin.bound if r.margin else -1.0)
        bound = bound_text(widest.margin.bound) if widest.margin else "?"
        return (f"within margin {d}: every condition's change toward worse is shown to be "
                f"below {d} ({_plural(m, 'test')}, each at level {comparison.q:g}, so the "
                f"claim for all of them together holds at level {comparison.q:g}); the "
                f"largest upper bound is {bound} ({_row_name(widest)})")
    if found.word == "beyond margin":
        names = _listed(found.beyond, lambda r: (
            f"{_row_name(r)} {signed(_toward_worse(r))} (its interval starts at "
            f"{signed(r.interval.low if r.worse_when == 'rise' else -r.interval.high)})"))
        return (f"beyond margin {d}: {_plural(len(found.beyond), 'test')} got worse by more "
                f"than {d}: {names}")
    names = _listed(found.not_within, lambda r: (
        f"{_row_name(r)} (the data support a margin of "
        f"{bound_text(r.margin.bound) if r.margin else '?'}, "
        f"p {q_text(r.margin.p if r.margin else 1.0)})"))
    return (f"not shown within margin {d}: {len(found.not_within)} of {_plural(m, 'test')} "
            f"could not be shown below {d}: {names}")


def margin_next(comparison: Comparison) -> str | None:
    """What to do when the margin's claim does not hold (None when it does)."""
    found = comparison.margin
    if found is None or found.holds:
        return None
    if found.word == "beyond margin":
        return (f"next: {_plural(len(found.beyond), 'test')} got worse by more than "
                f"{rate(found.margin)}, so no number of replicates would show "
                f"{'it' if len(found.beyond) == 1 else 'them'} within it; look at where the "
                "failing episodes stop (pytest-prove where)")
    if found.replicates_needed is None:
        runs = "more replicates than the search tries"
    else:
        about = "" if found.replicates_exact else "about "
        runs = f"{about}{found.replicates_needed:,} replicates per condition in both runs"
    return (f"next: with {runs}, every condition would be shown within {rate(found.margin)} "
            f"4 times in 5 when nothing changed; or accept the margin the data support "
            f"(--prove-margin)")


def _margin_cell(row: Row) -> str:
    test = row.margin
    if test is None:
        return ""
    word = "beyond" if row.beyond else "within" if test.within else "not within"
    return f"{word} (p {q_text(test.p)}, bound {bound_text(test.bound)})"


def bound_text(bound: float) -> str:
    """A one-sided upper bound as printed: rounded up (outward) when positive."""
    return outward(bound) if bound > 0 else signed(bound)


def _toward_worse(row: Row) -> float:
    return row.change if row.worse_when == "rise" else -row.change


def _status(row: Row, max_mde: float) -> str:
    return status_text(row, counted="{direction}", leaning="flagged ({leaning})",
                       blind=f"blind to {{blind}} of {rate(max_mde)}", either="+")


def _order(row: Row) -> tuple[int, str, str]:
    rank = 0 if row.direction == "worse" else 1 if row.direction == "safer" else \
        2 if row.flag else 3 if row.blind else 4
    return rank, row.condition, row.event


def _table(rows: Sequence[Row], max_mde: float) -> list[str]:
    header: tuple[str, ...] = ("condition", "event", "before", "after", "change", "q",
                               "verdict", "interval", "rise", "fall")
    body: list[tuple[str, ...]] = [
        (terminal_text(r.condition), terminal_text(r.event), rate(r.before), rate(r.after),
         signed(r.change),
         q_text(r.q_value), _status(r, max_mde),
         f"[{signed(r.interval.low)}, {signed(r.interval.high)}]",
         _limit(r.rise), _limit(r.fall))
        for r in sorted(rows, key=_order)
    ]
    if any(r.margin is not None for r in rows):
        header = (*header, "margin")
        body = [(*line, _margin_cell(r))
                for line, r in zip(body, sorted(rows, key=_order), strict=True)]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    numeric = {2, 3, 4, 5}

    def render(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if i in numeric else c.ljust(w)
                 for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return TableLine("  ".join(parts).rstrip())

    return [render(header), *(render(line) for line in body)]


def format_comparison(
    comparison: Comparison, *, before: str, after: str, verbose: bool = False,
    beside: Sequence[str] = (),
) -> list[str]:
    """Lines for the terminal summary of a comparison of run ``before`` with run ``after``;
    ``beside``: lines said after the table, before the method (the twins' agreement)."""
    verdict = comparison.verdict
    before, after = terminal_text(before), terminal_text(after)
    lines = [verdict_line(comparison)]
    said = margin_line(comparison)
    if said is not None:
        lines.append(said)
    tallies = " · ".join(f"{terminal_text(t.event)}: {t.worse} worse, {t.safer} safer"
                         for t in verdict.by_event)
    lines.append(f"{before} -> {after}, {_plural(comparison.m, 'test')}; {tallies}")
    fragility = verdict.fragility
    if fragility.flips is not None:
        how = ("exhaustive search" if fragility.exhaustive
               else "greedy search, there may be fewer")
        lines.append(f"fragility: {_plural(fragility.flips, 'outcome')} flipped in {after} "
                     f"would change the word ({how}): {_flips_text(fragility)}")
    shown = list(comparison.rows) if verbose else [
        r for r in comparison.rows
        if r.moved or r.blind or (r.margin is not None and not r.within)
    ]
    if shown:
        lines.extend(_table(shown, comparison.max_mde))
    hidden = comparison.m - len(shown)
    if hidden:
        lines.append(f"{_plural(hidden, 'row')} unchanged and able to see "
                     f"{rate(comparison.max_mde)} not shown (-v shows every row)")
    lines.extend(beside)
    sequential = comparison.method.startswith("group-sequential")
    legend = ("rise/fall: 'sequential', a row of a sequential run has no limit of its own "
              "(the design's power at max_mde holds for every row"
              + ("" if comparison.design == "paired" else ", for a worsening") + ")"
              if sequential else
              f"rise/fall: the smallest change each row alone would be flagged for, 4 times "
              f"in 5, from its rate in {before}")
    if verbose:
        lines.append(f"method: {plain_text(comparison.method)}. {legend}")
        if comparison.paired_model is not None:
            lines.append(f"paired limits assume {comparison.paired_model}")
    else:
        # What reading the table needs; the test and its family are on the verdict line.
        together = ("" if sequential else f"the {comparison.m} intervals together hold the "
                    f"true changes {(1 - comparison.q) * 100:g}% of the time or more; ")
        lines.append(f"method: {together}{legend}; -v prints the method in full")
    if comparison.margin is not None:
        lines.append(f"margin method: {plain_text(comparison.margin.method)}. bound: the "
                     "smallest margin each test would be shown within, one-sided")
        advice = margin_next(comparison)
        if advice is not None:
            lines.append(advice)
    if verdict.word == "too small to tell":
        if verdict.replicates_needed is not None:
            lines.append(
                f"next: run {verdict.replicates_needed} replicates per condition in both runs "
                f"so every row can show a change of {rate(comparison.max_mde)}, or accept a "
                f"larger change (max_mde)"
            )
        else:
            lines.append(
                "next: more replicates per condition than the search tries would be needed "
                f"to show a change of {rate(comparison.max_mde)}; accept a larger change "
                "(max_mde) or split fewer conditions"
            )
    return lines


def condition_failure(comparison: Comparison, condition: str, *, before: str,
                      after: str) -> list[str]:
    """The failure text of one condition's gate report (what ``-rf``, ``--junitxml`` and the
    FAILURES section show): what failed in this condition, first, then its rows and how they
    were tested.  The verdict over every condition is the pytest-prove section's, said once."""
    rows = [r for r in comparison.rows if r.condition == condition]
    where = terminal_text(condition)
    runs = f"{terminal_text(before)} -> {terminal_text(after)}"
    worse = [r for r in rows if r.counted and r.direction == "worse"]
    found = comparison.margin
    beyond = [r for r in rows if found is not None and r in found.beyond]
    not_within = [r for r in rows if found is not None and r in found.not_within]
    blind = [r for r in rows if r.blind and not r.counted]
    if worse:
        head = "worse: " + "; ".join(f"{where} {_change(r)}" for r in worse)
    elif beyond and found is not None:
        head = (f"beyond margin {rate(found.margin)}: "
                + "; ".join(f"{where} {_change(r)}" for r in beyond))
    elif not_within and found is not None:
        head = (f"not shown within margin {rate(found.margin)}: " + "; ".join(
            f"{_row_name(r)} (the data support a margin of "
            f"{bound_text(r.margin.bound) if r.margin else '?'})" for r in not_within))
    elif blind:
        head = "too small to tell: " + "; ".join(
            f"{_row_name(r)} could not have shown a {' or '.join(r.blind)} of "
            f"{rate(comparison.max_mde)}" for r in blind)
    else:
        head = f"{where}: " + ("; ".join(_change(r) for r in rows) or "unchanged")
    return [
        f"{head}, {runs}",
        *_table(rows, comparison.max_mde),
        f"tested with {_test_name(comparison)}, Holm q {comparison.q:g} over "
        f"{_plural(comparison.m, 'test')} (the verdict over every condition and the method: "
        "the pytest-prove section)",
        *([] if found is None else [f"margin method: {plain_text(found.method)}"]),
    ]


def _change(row: Row) -> str:
    """A row's change in this condition: its event, the rates and q."""
    return (f"{_event_words(row)} {rate(row.before)} -> {rate(row.after)} "
            f"({signed(row.change)}, q {q_text(row.q_value)})")
