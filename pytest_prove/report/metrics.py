"""The metric rows as text: the terminal's and the gate reports' lines, and the markdown table.

Reads a :class:`~pytest_prove.review.metrics.MetricReview`; computes nothing statistical.
A shift is after minus before in the metric's own units (Hodges-Lehmann) with its interval,
then as a share of the baseline's median; ``limit`` is the smallest shift the worse way
that row would flag 4 times in 5, rounded outward (:func:`~pytest_prove.stats.outward_units`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence

from pytest_prove.review.metrics import MAX_LIMIT_ROWS, MetricReview, MetricRow
from pytest_prove.stats import MetricLimit, outward_units

from ._format import plain_text, q_text, terminal_text

__all__ = ["METRICS_ONLY", "condition_metric_lines", "limit_text", "metric_lines",
           "metric_margin_line", "metric_markdown", "metric_verdict_line", "metric_word",
           "number"]

#: What a report of metric rows alone says of the outcome rows it has none of.
METRICS_ONLY = ("no outcome rows: the rollouts compared declare metrics and no outcomes, so "
                "their metric rows are the comparison")


def number(value: float, signed: bool = False) -> str:
    """A metric's value: 3 significant digits (``-`` when it is not finite)."""
    if not math.isfinite(value):
        return "-"
    text = f"{value:+.3g}" if signed else f"{value:.3g}"
    return text


def _share(value: float | None) -> str:
    return "" if value is None or not math.isfinite(value) else f" ({value:+.0%})"


def limit_text(limit: MetricLimit | None) -> str:
    """A row's detection limit, rounded outward, with its share of the baseline's median."""
    if limit is None:
        return "-"
    if limit.value is None:
        return "none"
    text = outward_units(limit.value)
    if not text.startswith("-"):
        text = "+" + text
    if limit.relative is not None:
        text += f" ({'-' if limit.value < 0 else '+'}{math.ceil(100 * limit.relative)}%)"
    return text


def _shift(row: MetricRow) -> str:
    return number(row.test.shift, signed=True) + _share(row.test.relative)


def _interval(row: MetricRow) -> str:
    return f"[{number(row.test.low, True)}, {number(row.test.high, True)}]"


def _said(row: MetricRow, text: Callable[[object], str] = terminal_text) -> str:
    return (f"{text(row.metric)} in {text(row.condition)} {_shift(row)} "
            f"{_interval(row)}")


def metric_word(metrics: MetricReview) -> str:
    """The metric rows' verdict in one of the four words (a report of metric rows alone
    heads with it): worse before safer before too small to tell."""
    if metrics.worse:
        return "worse"
    if any(r.word == "safer" for r in metrics.rows):
        return "safer"
    if metrics.blind:
        return "too small to tell"
    return "no significant change"


def metric_verdict_line(metrics: MetricReview) -> str:
    """The metric rows' answer on one line: which got worse (or safer), else that none
    moved significantly."""
    worse, safer = metrics.worse, [r for r in metrics.rows if r.word == "safer"]
    if worse:
        head = (f"metrics: worse: {'; '.join(_said(r) for r in worse[:3])}"
                + (f" and {len(worse) - 3} more" if len(worse) > 3 else ""))
    elif safer:
        head = f"metrics: safer: {'; '.join(_said(r) for r in safer[:3])}"
    elif metrics.m == 0:
        # Every declared metric lacked its values (the gate's lines above say which and why).
        return "metrics: none compared: no metric row had values on both sides"
    elif metrics.blind and len(metrics.blind) == metrics.m:
        head = "metrics: too small to tell: no row could have flagged a shift of any size"
    elif metrics.blind:
        blind = metrics.blind
        named = ", ".join(f"{terminal_text(r.metric)} in {terminal_text(r.condition)}"
                          for r in blind[:3])
        head = (f"metrics: too small to tell: nothing moved significantly, but "
                f"{len(blind)} of {metrics.m} row(s) could not have flagged a shift of any "
                f"size: {named}" + (f" and {len(blind) - 3} more" if len(blind) > 3 else ""))
    else:
        head = f"metrics: no significant change in {metrics.m} metric row(s)"
    return head + f" (Holm over {metrics.m} at q={metrics.q:g})"


def _margin_said(row: MetricRow, text: Callable[[object], str] = terminal_text) -> str:
    bound = "-" if row.bound is None else number(row.bound, signed=True)
    margin = "-" if row.margin is None else number(row.margin, signed=True)
    return (f"{text(row.metric)} in {text(row.condition)} (the worse way: bound {bound}, "
            f"margin {margin})")


def metric_margin_line(metrics: MetricReview) -> str | None:
    """The margin's claim on one line (None: no metric margin was asked for)."""
    if not metrics.with_margin:
        return None
    rows = [r for r in metrics.rows if r.margin_word is not None]
    missed = metrics.not_within
    if not missed:
        return (f"metrics within margin: every one of {len(rows)} metric row(s) with a margin "
                "is shown within it")
    beyond = [r for r in missed if r.margin_word == "beyond margin"]
    word = "beyond margin" if beyond else "not shown within margin"
    return (f"metrics {word}: " + "; ".join(_margin_said(r) for r in missed[:3])
            + (f" and {len(missed) - 3} more" if len(missed) > 3 else ""))


def _order(row: MetricRow) -> tuple[int, str, str]:
    rank = {"worse": 0, "safer": 1, "too small to tell": 2}.get(row.word, 3)
    return rank, row.condition, row.metric


_HEADER = ("condition", "metric", "better", "before", "shift", "interval", "p", "verdict",
           "limit")


def _cells(row: MetricRow) -> tuple[str, ...]:
    cells = (terminal_text(row.condition), terminal_text(row.metric), row.better,
             number(row.test.before_median), _shift(row), _interval(row),
             q_text(row.p_adjusted), row.word, limit_text(row.limit))
    if row.margin_word is None:
        return cells
    margin = "-" if row.margin is None else number(row.margin, signed=True)
    return (*cells, f"{row.margin_word.removesuffix(' margin')} {margin}")


def _header(rows: Sequence[MetricRow]) -> tuple[str, ...]:
    return (*_HEADER, "margin") if any(r.margin_word is not None for r in rows) else _HEADER


def _table(rows: Sequence[MetricRow]) -> list[str]:
    header = _header(rows)
    body = [_cells(r) for r in sorted(rows, key=_order)]
    body = [line if len(line) == len(header) else (*line, "") for line in body]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    numeric = {3, 4, 6}

    def render(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in numeric else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return [render(header), *(render(line) for line in body)]


def _legend(metrics: MetricReview) -> str:
    limit = ("limits not computed for more than "
             f"{MAX_LIMIT_ROWS} metric rows (--prove-plan --prove-baseline prints each)"
             if metrics.limits_skipped else "limit: the smallest shift the worse way each "
             "row would flag, 4 times in 5, from the baseline's values")
    return (f"method: {plain_text(metrics.method)}. before: the baseline's median; shift: "
            "after minus before in the metric's units (share of that median); p: "
            f"Holm-adjusted; {limit}")


def metric_lines(metrics: MetricReview, *, verbose: bool = False) -> list[str]:
    """The terminal's metric section: the answer, the rows that moved or are blind (every
    row with ``verbose``), what could not be compared, and how it was tested."""
    lines = [metric_verdict_line(metrics)]
    said = metric_margin_line(metrics)
    if said is not None:
        lines.append(said)
    shown = list(metrics.rows) if verbose else [
        r for r in metrics.rows if r.word != "no significant change"
        or (r.margin_word is not None and not r.within)]
    if shown:
        lines.extend(_table(shown))
    hidden = metrics.m - len(shown)
    if hidden:
        lines.append(f"{hidden} metric row(s) with no significant change not shown (-v shows "
                     "every row)")
    lines.extend(f"metrics not compared: {plain_text(text)}" for text in metrics.unvouched)
    lines.append(_legend(metrics))
    return lines


def condition_metric_lines(metrics: MetricReview | None, condition: str,
                           failing: Sequence[MetricRow] = (),
                           fail_on: Collection[str] = ("worse",)) -> list[str]:
    """The metric rows of one condition, for its gate report (every row of it), headed by
    what failed the gate among ``failing``: a metric worse, a margin not shown, a row too
    small to tell."""
    if metrics is None:
        return []
    rows = [r for r in metrics.rows if r.condition == condition]
    if not rows:
        return []
    failed = [r for r in failing if r.condition == condition]
    worse = [r for r in failed if r.word == "worse" and "worse" in fail_on]
    missed = [r for r in failed if r.margin_word is not None and not r.within]
    blind = [r for r in failed if r.word == "too small to tell"]
    where = terminal_text(condition)
    if worse:
        head = (f"metrics worse in {where}: "
                + "; ".join(f"{terminal_text(r.metric)} {_shift(r)} {_interval(r)}"
                            for r in worse))
    elif missed:
        head = (f"metrics not shown within margin in {where}: "
                + "; ".join(_margin_said(r) for r in missed))
    elif blind:
        head = (f"metrics too small to tell in {where}: "
                + ", ".join(terminal_text(r.metric) for r in blind)
                + " could not have flagged a shift of any size")
    else:
        head = metric_verdict_line(metrics)
    return [head, *_table(rows), _legend(metrics)]


def metric_markdown(metrics: MetricReview, escape: Callable[[object], str],
                    verbose: bool = False) -> list[str]:
    """The metric rows as markdown lines (a table), escaped as the rest of the report."""
    lines = [f"**{escape(metric_verdict_line(metrics))}**", ""]
    said = metric_margin_line(metrics)
    if said is not None:
        lines += [escape(said), ""]
    shown = list(metrics.rows) if verbose else [
        r for r in metrics.rows if r.word != "no significant change"
        or (r.margin_word is not None and not r.within)]
    if shown:
        header = _header(shown)
        lines += ["| " + " | ".join(header) + " |",
                  "|---|---|---|--:|--:|---|--:|---|--:|" + ("---|" if len(header) > 9 else "")]
        for r in sorted(shown, key=_order):
            cells = _cells(r)
            cells = cells if len(cells) == len(header) else (*cells, "")
            lines.append("| " + " | ".join(escape(c) for c in cells[:7])
                         + f" | **{escape(r.word)}** | "
                         + " | ".join(escape(c) for c in cells[8:]) + " |")
        lines.append("")
    hidden = metrics.m - len(shown)
    if hidden:
        lines += [f"{hidden} metric rows with no significant change are not shown.", ""]
    lines += [f"Metrics not compared: {escape(t)}\n" for t in metrics.unvouched]
    lines += [f"<sub>{escape(_legend(metrics))}</sub>", ""]
    return lines
