"""The HTML report's metric rows: a forest plot of shifts per metric, and their table.

Reads a :class:`~pytest_prove.review.metrics.MetricReview`; computes nothing statistical.
Each metric gets one inline SVG, a line per compared condition: the Hodges-Lehmann shift
(after minus before, in the metric's units) as a dot, its interval (at the level the review
tested it, 1 - q/m) as a bar, an end the interval leaves unbounded drawn to the plot's edge
with an arrow, the row's detection limit (the smallest shift the worse way it would flag 4
times in 5) as a tick, its margin (``--prove-metric-margin``) as a dashed tick, zero as the
reference line, and at the right the row's verdict word and its shift as a share of the
baseline's median. Colour follows the outcome plot's: red for a row that got worse, green
for safer, a diamond on both (the verdict counts them), grey otherwise.

The figures carry ``role="img"`` with a title and a description, and the table after them
gives every number drawn, in words, for a screen reader and a search of the page. Like the
outcome plot, every axis writes its ticks as ``<g class="tick">`` (a line at the value and
its label), so a reader of the SVG can invert the scale.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from pytest_prove.review.metrics import MetricReview, MetricRow

from ._format import plain_text, q_text
from .figures import Scale, _domain, _n, _signed_tick, _x_axis, short_forms
from .metrics import _order, limit_text, metric_margin_line, metric_verdict_line, number

__all__ = ["METRIC_CSS", "metric_header", "metric_order", "metric_plot", "metric_section"]

#: The metric section's styles, added to the page's only when it has metric rows (so a page
#: without them is the page it was, byte for byte); the colours are report.css's variables,
#: light and dark.
METRIC_CSS = """\
section.metrics{margin:1.5rem 0}section.metrics h2{font-size:1.1rem;margin:0 0 .4rem}
section.metrics h3{margin:.8rem 0 .2rem}
g.mr .lab{font-size:11px}g.mr.counted .lab{font-weight:700}
g.mr .ci,g.mr .arrow{stroke:var(--pt);stroke-width:2;stroke-linecap:round;fill:none}
g.mr .tk.lim{stroke:var(--tick);stroke-width:1.5}
g.mr .tk.mg{stroke:var(--margin);stroke-width:1.5;stroke-dasharray:3 2}
g.mr .pt{fill:var(--pt)}g.mr .cm{fill:none;stroke-width:1.8}
g.mr.worse .ci,g.mr.worse .arrow,g.mr.worse .cm{stroke:var(--pt-worse)}
g.mr.worse .pt{fill:var(--pt-worse)}
g.mr.safer .ci,g.mr.safer .arrow,g.mr.safer .cm{stroke:var(--pt-safer)}
g.mr.safer .pt{fill:var(--pt-safer)}
g.mr.blind .ci{stroke-dasharray:2 3}
g.mr .vw{font-size:11px;fill:var(--muted)}g.mr .vw .rel{fill:var(--muted)}
g.mr.worse .vw{fill:var(--word-worse);font-weight:700}
g.mr.safer .vw{fill:var(--word-safer);font-weight:700}
g.mr.blind .vw{fill:var(--pt-flag)}
table.metric-rows td.w.worse{color:var(--word-worse);font-weight:700}
table.metric-rows td.w.safer{color:var(--word-safer);font-weight:700}
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _toward_worse(row: MetricRow, value: float) -> float:
    """``value`` (a shift) as a move the worse way: positive when it is worse."""
    return value if row.better == "lower" else -value


def metric_order(rows: Sequence[MetricRow]) -> list[int]:
    """The indices of one metric's ``rows``, the worst first: rows that got worse (the
    smallest Holm-adjusted p first), then the rest by their shift toward worse, the largest
    first (rows with no shift, nothing compared, last)."""
    def key(i: int) -> tuple[int, float, int]:
        row = rows[i]
        if row.word == "worse":
            return 0, row.p_adjusted, i
        shift = row.test.shift
        if not math.isfinite(shift):
            return 2, 0.0, i
        return 1, -_toward_worse(row, shift), i

    return sorted(range(len(rows)), key=key)


def _tone(row: MetricRow) -> str:
    if row.word == "worse":
        return "worse counted"
    if row.word == "safer":
        return "safer counted"
    return "blind" if row.word == "too small to tell" else "plain"


def _share(row: MetricRow) -> str:
    relative = row.test.relative
    return "" if relative is None or not math.isfinite(relative) else f"{relative:+.0%}"


def _signed_margin(row: MetricRow) -> float | None:
    """The row's margin as a shift (the worse way of its metric), None without one."""
    if row.margin is None:
        return None
    return row.margin if row.better == "lower" else -row.margin


_WIDTH = 720.0
_LABEL_END = 176.0
_PLOT = (190.0, 560.0)
_WORD = 572.0
_TOP = 30.0
_ROW = 18.0


def metric_plot(metric: str, rows: Sequence[MetricRow], order: Sequence[int], *,
                uid: str) -> str:
    """One metric's forest plot: a line per row of ``order`` (indices into ``rows``, all of
    that metric, drawn top to bottom)."""
    drawn = [rows[i] for i in order]
    values = [0.0]
    for row in drawn:
        values += [v for v in (row.test.shift, row.test.low, row.test.high)
                   if math.isfinite(v)]
        if row.limit is not None and row.limit.value is not None:
            values.append(row.limit.value)
        margin = _signed_margin(row)
        if margin is not None:
            values.append(margin)
    lo, hi, step = _domain(values, 5)
    x = Scale(lo, hi, *_PLOT)
    bottom = _TOP + _ROW * len(drawn) + 4
    better = drawn[0].better if drawn else "lower"
    level = drawn[0].test.level if drawn else 0.95
    moved = [r for r in drawn if r.word in ("worse", "safer")]
    title = (f"Forest plot of the metric {metric} ({better} is better): the shift of each "
             "condition, worst first")
    desc = (f"{len(drawn)} conditions; each line shows the shift after minus before in "
            f"{metric}'s units (Hodges-Lehmann) as a dot, its {100 * level:.2f}% interval as a "
            "bar (an arrow where it is unbounded), and the detection limit (the smallest shift "
            "the worse way the row would flag 4 times in 5) as a short tick"
            + ("; the margin as a dashed tick" if any(r.margin is not None for r in drawn)
               else "")
            + "; zero is the vertical reference line, and the verdict is written at the right"
            + f". {len(moved)} moved significantly"
            + (": " + "; ".join(f"{r.condition} {r.word} {number(r.test.shift, True)}"
                                for r in moved[:5]) if moved else "")
            + ". The table after the figures gives each number.")
    out = [f'<svg class="metric-svg" role="img" viewBox="0 0 {_n(_WIDTH)} '
           f'{_n(bottom + 8)}" width="{_n(_WIDTH)}" aria-labelledby="{uid}-t {uid}-d" '
           f'data-metric="{_e(metric)}" data-better="{_e(better)}">'
           f'<title id="{uid}-t">{_e(title)}</title><desc id="{uid}-d">{_e(desc)}</desc>',
           _x_axis(x, step, _TOP - 6, bottom, _signed_tick, 14)]
    zero = _n(x(0.0))
    out.append(f'<line class="zero" x1="{zero}" x2="{zero}" y1="{_n(_TOP - 6)}" '
               f'y2="{_n(bottom)}"/><g class="rows">')
    shown = short_forms((r.condition for r in drawn), 28)
    for place, (i, row) in enumerate(zip(order, drawn, strict=True)):
        out.append(_row(i, row, _TOP + _ROW * place + _ROW / 2, x, shown[row.condition]))
    out.append("</g></svg>")
    return "".join(out)


def _row(index: int, row: MetricRow, y: float, x: Scale, label: str) -> str:
    cy = _n(y)
    test = row.test
    parts = [f'<g class="mr {_tone(row)}" data-i="{index}" data-word="{_e(row.word)}" '
             f'data-condition="{_e(row.condition)}">'
             f'<text class="lab" x="{_n(_LABEL_END)}" y="{_n(y + 4)}" text-anchor="end">'
             f"{_e(label)}</text>"]
    if test.n_after and (math.isfinite(test.low) or math.isfinite(test.high)
                         or math.isfinite(test.shift)):
        low = x(test.low) if math.isfinite(test.low) else x.a
        high = x(test.high) if math.isfinite(test.high) else x.b
        opened = " ".join(name for name, value in (("open-low", test.low),
                                                   ("open-high", test.high))
                          if not math.isfinite(value))
        parts.append(f'<line class="ci{" " + opened if opened else ""}" x1="{_n(low)}" '
                     f'x2="{_n(high)}" y1="{cy}" y2="{cy}"/>')
        for end, at, way in (("open-low", low, -1.0), ("open-high", high, 1.0)):
            if end in opened:
                parts.append(f'<path class="arrow" d="M{_n(at)} {cy}L{_n(at - way * 6)} '
                             f'{_n(y - 4)}M{_n(at)} {cy}L{_n(at - way * 6)} {_n(y + 4)}"/>')
    if row.limit is not None and row.limit.value is not None:
        spot = _n(x(row.limit.value))
        parts.append(f'<line class="tk lim" x1="{spot}" x2="{spot}" y1="{_n(y - 5)}" '
                     f'y2="{_n(y + 5)}"/>')
    margin = _signed_margin(row)
    if margin is not None:
        spot = _n(x(margin))
        parts.append(f'<line class="tk mg" x1="{spot}" x2="{spot}" y1="{_n(y - 7)}" '
                     f'y2="{_n(y + 7)}"/>')
    if math.isfinite(test.shift):
        cx = x(test.shift)
        if row.word in ("worse", "safer"):
            parts.append(f'<path class="cm" d="M{_n(cx)} {_n(y - 7)}L{_n(cx + 7)} {cy}'
                         f'L{_n(cx)} {_n(y + 7)}L{_n(cx - 7)} {cy}Z"/>')
        parts.append(f'<circle class="pt" cx="{_n(cx)}" cy="{cy}" r="3.5"/>')
    share = _share(row)
    parts.append(f'<text class="vw" x="{_n(_WORD)}" y="{_n(y + 4)}">{_e(row.word)}'
                 + (f'<tspan class="rel"> {_e(share)}</tspan>' if share else "")
                 + "</text></g>")
    return "".join(parts)


def _table(metrics: MetricReview) -> str:
    margin = metrics.with_margin
    header = ["metric", "better", "condition", "before (median)", "shift", "share of before",
              f"{100 * (1 - metrics.q / max(1, metrics.m)):.2f}% interval", "p (Holm)",
              "verdict", "limit (share)"] + (["margin"] if margin else [])
    body = []
    for row in sorted(metrics.rows, key=_order):  # as the terminal's table: worse first
        test = row.test
        cells = [f"<td>{_e(row.metric)}</td><td>{_e(row.better)}</td>"
                 f"<td>{_e(row.condition)}</td>",
                 f'<td class="n">{number(test.before_median)}</td>',
                 f'<td class="n">{number(test.shift, True)}</td>',
                 f'<td class="n">{_e(_share(row) or "-")}</td>',
                 f'<td class="n">[{number(test.low, True)}, {number(test.high, True)}]</td>',
                 f'<td class="n">{q_text(row.p_adjusted)}</td>',
                 f'<td class="w {_tone(row).split()[0]}">{_e(row.word)}</td>',
                 f'<td class="n">{_e(limit_text(row.limit))}</td>']
        if margin:
            size = "-" if row.margin is None else number(row.margin, True)
            cells.append(f"<td>{_e(row.margin_word or '')}"
                         + (f" {_e(size)}" if row.margin_word else "") + "</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<table class="full metric-rows"><caption class="sr-only">every metric row'
            f'</caption><thead><tr>{"".join(f"<th>{_e(h)}</th>" for h in header)}</tr>'
            f'</thead><tbody>{"".join(body)}</tbody></table>')


def metric_header(metrics: MetricReview) -> str:
    """The metric rows' answer, and the margin's claim, for the page's header."""
    said = metric_margin_line(metrics)
    return (f'\n<p class="verdict metrics">{_e(metric_verdict_line(metrics))}</p>'
            + ("" if said is None else f'\n<p class="verdict margin">{_e(said)}</p>'))


def metric_section(metrics: MetricReview) -> str:
    """The page's metric section: a forest plot per metric (in the order the rows first name
    them), the table of every metric row, what could not be
    compared, and how they were tested."""
    names = list(dict.fromkeys(r.metric for r in metrics.rows))
    parts = ['<section class="metrics" aria-labelledby="metrics-h">'
             '<h2 id="metrics-h">Metrics</h2>']
    level = 100 * (1 - metrics.q / max(1, metrics.m))
    for k, name in enumerate(names):
        rows = [r for r in metrics.rows if r.metric == name]
        index = [i for i, r in enumerate(metrics.rows) if r.metric == name]
        order = metric_order(rows)
        plot = metric_plot(name, metrics.rows, [index[i] for i in order], uid=f"m{k}")
        better = rows[0].better
        hint = (f"forest plot of the metric {name}, worst first; the table of every metric "
                "row gives its numbers")
        parts.append(
            f'<figure class="forest metric" data-metric="{_e(name)}">'
            f'<h3>{_e(name)} <span class="muted">({_e(better)} is better; worse when it '
            f'{"rises" if better == "lower" else "falls"})</span></h3>'
            '<p class="legend muted" aria-hidden="true"><span>● shift (Hodges-Lehmann)</span>'
            f"<span>━ {level:.2f}% interval</span><span>┃ detection limit</span>"
            + ("<span>┆ margin</span>" if any(r.margin is not None for r in rows) else "")
            + "<span>◇ counted by the verdict</span><span>│ zero</span></p>"
            f'<div class="forest-box" tabindex="0" role="group" aria-label="{_e(hint)}">'
            f"{plot}</div><figcaption>shift after minus before, in {_e(name)}'s units; at "
            "the right, each row's verdict and its shift as a share of the baseline's "
            "median</figcaption></figure>")
    parts.append(_table(metrics))
    parts.extend(f'<p class="muted"><b>Not compared</b>: {_e(plain_text(text))}</p>'
                 for text in metrics.unvouched)
    if metrics.limits_skipped:
        parts.append('<p class="muted">Detection limits were not computed for this many '
                     "metric rows; <code>--prove-plan --prove-baseline=NAME</code> prints "
                     "each.</p>")
    parts.append(f'<p class="muted">{_e(plain_text(metrics.method))}</p></section>')
    return "".join(parts)
