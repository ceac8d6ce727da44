"""Twin agreement in every renderer: how often the two episodes of one seed ended alike and
what it does to the paired test's power (:mod:`pytest_prove.review.twins`).

Terminal lines, markdown lines, the JSON object and an HTML section; each reads a
:class:`~pytest_prove.review.twins.TwinReview` and computes nothing statistical.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape as html_escape
from typing import Any

from pytest_prove.review.twins import TwinReview, TwinRow
from pytest_prove.stats import Comparison

from ._format import rate, terminal_text

__all__ = ["aa_lines", "twin_html", "twin_json", "twin_lines", "twin_markdown"]


def _percent(value: float) -> str:
    return f"{100.0 * value:.0f}%"


def _row_name(row: TwinRow, text: Callable[[str], str]) -> str:
    return f"{text(row.condition)} {text(row.event)}"


def _seeds(count: int) -> str:
    return f"{count} seed{'' if count == 1 else 's'}"


def _replicates(twins: TwinReview) -> str:
    def said(count: int | None) -> str:
        return "more than the search tries" if count is None else str(count)

    tests = f"{twins.m} test{'' if twins.m == 1 else 's'}"
    return (f"a paired design sees {rate(twins.max_mde)} (max_mde) over {tests} with "
            f"{said(twins.replicates_at_agreement)} replicates per condition at this "
            f"agreement (its {_percent(twins.pooled.level)} lower bound), "
            f"{said(twins.replicates_independent)} with independent twins")


def _sees(row: TwinRow) -> str:
    """What the row's paired test sees at its twins' agreement, in words."""
    if row.limit.status == "sequential":
        return "no limit of its own (a sequential run: the design's power instead)"
    return f"sees a {row.direction} of {row.limit} (independent twins: {row.independent})"


def _limit_cell(row: TwinRow) -> str:
    return ("sequential" if row.limit.status == "sequential"
            else f"{row.direction} {row.limit}")


def _summary(twins: TwinReview, text: Callable[[str], str]) -> list[str]:
    """The agreement's line and the power's line."""
    conditions = len({r.condition for r in twins.rows})
    line = (f"twins ended alike in {_percent(twins.rate)} of {_seeds(twins.twins)}"
            f" ({conditions} condition{'' if conditions == 1 else 's'})")
    lowest = twins.lowest
    if lowest is not None and conditions > 1 and lowest.agreement.rate < 1.0:
        a = lowest.agreement
        line += (f"; least alike: {_row_name(lowest, text)}, {_percent(a.rate)} of {a.n} "
                 f"(b {a.before_only} before only, c {a.after_only} after only)")
    elif lowest is not None and conditions == 1:
        a = lowest.agreement
        line += f" (b {a.before_only} before only, c {a.after_only} after only)"
    lines = [line]
    weakest = twins.weakest
    if weakest is not None:
        lines.append(
            f"at this agreement the paired test sees a {weakest.direction} of {weakest.limit} "
            f"in {_row_name(weakest, text)} (independent twins: {weakest.independent}); "
            + _replicates(twins))
    return lines


def twin_lines(twins: TwinReview | None, *, verbose: bool = False) -> list[str]:
    """The terminal's lines: the agreement, what it means for power, and with ``verbose``
    one line a row."""
    if twins is None:
        return []
    first, *rest = _summary(twins, terminal_text)
    lines = [first, *(f"twins: {line}" for line in rest)]
    if verbose:
        for r in twins.rows:
            a = r.agreement
            lines.append(
                f"twins {_row_name(r, terminal_text)}: alike {a.alike} of {a.n} "
                f"({_percent(a.rate)}), b {a.before_only}, c {a.after_only}; {_sees(r)}")
    return lines


def twin_markdown(twins: TwinReview | None, escape: Callable[[str], str]) -> list[str]:
    """Markdown lines: the summary, then a table of every row's twins."""
    if twins is None:
        return []
    lines = [f"**Twins**: {escape(line)}" for line in _summary(twins, str)[:1]]
    lines += [escape(line[0].upper() + line[1:]) for line in _summary(twins, str)[1:]]
    lines += ["", "| condition | event | twins alike | b | c | limit at this agreement "
              "| independent twins |", "|---|---|--:|--:|--:|--:|--:|"]
    for r in twins.rows:
        a = r.agreement
        lines.append(f"| {escape(r.condition)} | {escape(r.event)} | {a.alike} of {a.n} "
                     f"({_percent(a.rate)}) | {a.before_only} | {a.after_only} | "
                     f"{_limit_cell(r)} | {r.independent} |")
    return [*lines, ""]


def twin_json(twins: TwinReview | None) -> dict[str, Any]:
    """The document's ``twins`` key (absent when no row is paired)."""
    if twins is None:
        return {}
    return {"twins": {**twins.to_dict(), "lines": _summary(twins, str)}}


def twin_html(twins: TwinReview | None) -> str:
    """A collapsed section: the summary and a table of every row's twins."""
    if twins is None:
        return ""
    e = html_escape
    body = "".join(
        f"<tr><td>{e(r.condition)}</td><td>{e(r.event)}</td>"
        f"<td class='n'>{r.agreement.alike} of {r.agreement.n} "
        f"({_percent(r.agreement.rate)})</td><td class='n'>{r.agreement.before_only}</td>"
        f"<td class='n'>{r.agreement.after_only}</td>"
        f"<td class='n'>{e(_limit_cell(r))}</td>"
        f"<td class='n'>{e(str(r.independent))}</td></tr>"
        for r in twins.rows)
    summary = _summary(twins, str)
    return (f'<details class="twins"><summary>{e(summary[0])}</summary>'
            + "".join(f"<p>{e(line)}</p>" for line in summary[1:])
            + "<table><thead><tr><th>condition</th><th>event</th><th>twins alike</th>"
            "<th>b</th><th>c</th><th>limit at this agreement</th>"
            f"<th>independent twins</th></tr></thead><tbody>{body}</tbody></table></details>")


def aa_lines(twins: TwinReview | None, comparison: Comparison, *, before: str,
             after: str) -> list[str]:
    """What an A/A check (the same code twice, on the same seeds) says: whether any row
    reads worse or safer, the twins' agreement, and the replicates a paired design needs at
    it: the noise floor the gate works against."""
    names = f"{terminal_text(before)} and {terminal_text(after)}"
    if twins is None:
        return [f"A/A: {names} have no paired row, so there are no twins to read; run the "
                "same code twice on one salt (pytest --prove-salt=WORD) and compare those"]
    verdict = comparison.verdict
    moved = [*verdict.worse, *verdict.safer]
    if moved:
        shown = ", ".join(f"{terminal_text(r.condition)} {terminal_text(r.event)} "
                          f"{rate(r.before)} -> {rate(r.after)}" for r in moved[:3])
        lines = [
            f"A/A: {len(verdict.worse)} row(s) read worse and {len(verdict.safer)} safer "
            f"although {names} ran the same code on the same seeds ({shown}). That is the "
            "noise floor the gate works against: a false alarm its level "
            f"q {comparison.q:g} allows now and then, which an agent that replays on a seed "
            "(agreement 1) never gives; if it comes back, the twins disagree more than "
            "chance allows (state kept between episodes, a provider that varies)"]
    else:
        lines = [f"A/A: no row reads worse or safer: {names} ran the same code on the same "
                 f"seeds, and the gate (q {comparison.q:g} over {comparison.m} tests) "
                 "raised no false alarm"]
    lines.extend(twin_lines(twins, verbose=True))
    low = min((r.agreement.rate for r in twins.rows), default=1.0)
    lines.append(
        f"A/A: agreement {_percent(twins.rate)} overall, {_percent(low)} in the least alike "
        "row; a reproducible agent has agreement near 1, and the nearer 1, the fewer "
        "replicates a paired comparison needs")
    lines.append(
        "next: let the design check read this agreement: pytest --prove-agreement-from="
        f"{terminal_text(before)},{terminal_text(after)}")
    return lines

