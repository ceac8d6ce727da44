"""The HTML report's pictures, as inline SVG: a forest plot per event, step curves per
failure, and the cost of each condition.

Every number drawn comes from the review (the comparison's rows, and
:class:`~pytest_prove.review.figures.Figures`, made by the functions ``where``, ``compare``
and ``cost`` print from); this module only places them. Each figure is an ``<svg
role="img">`` with a ``<title>`` and a ``<desc>``, and its numbers are also given as text:
the forest plot's in the grid's cells and the table of every row, the step curves' and the
cost's in a table hidden from sight but read by a screen reader.

Coordinates are written with two decimals; every axis carries its ticks as ``<g
class="tick">`` holding a ``<line>`` at the value and a ``<text>`` naming it, so a reader of
the SVG (the tests do) can invert the scale.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from pytest_prove.review.cost import ConditionCost, CostComparison, RunCost
from pytest_prove.review.figures import Figures, StepFigure
from pytest_prove.review.steps import Where
from pytest_prove.stats import Row

from ._format import money, rate, signed
from .cost import format_comparison
from .drilldown import compare_steps_lines

__all__ = ["cost_figure", "forest_plot", "short_forms", "step_figures"]


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _n(value: float) -> str:
    return f"{value:.2f}"


@dataclass(frozen=True, slots=True)
class Scale:
    """A linear map of values [lo, hi] onto pixels [a, b]."""

    lo: float
    hi: float
    a: float
    b: float

    def __call__(self, value: float) -> float:
        span = self.hi - self.lo
        return self.a + (value - self.lo) / span * (self.b - self.a) if span else self.a


def _step(span: float, ticks: int, *, whole: bool = False) -> float:
    """A round tick step giving about ``ticks`` intervals over ``span`` (a whole number with
    ``whole``)."""
    if span <= 0:
        return 1.0
    raw = span / ticks
    power = 10.0 ** math.floor(math.log10(raw))
    if whole and power < 1:
        return 1.0
    for factor in ((1.0, 2.0, 5.0, 10.0) if whole else (1.0, 2.0, 2.5, 5.0, 10.0)):
        if raw <= factor * power * (1 + 1e-9):
            return factor * power
    return 10.0 * power


def _domain(values: Iterable[float], ticks: int = 5) -> tuple[float, float, float]:
    """The nice domain around ``values`` (tick multiples at both ends) and its step."""
    found = list(values)
    lo, hi = min(found), max(found)
    if hi - lo < 1e-9:
        lo, hi = lo - 0.05, hi + 0.05
    step = _step(hi - lo, ticks)
    lo = math.floor(lo / step + 1e-9) * step
    hi = math.ceil(hi / step - 1e-9) * step
    return lo, hi, step


def _ticks(lo: float, hi: float, step: float) -> list[float]:
    count = round((hi - lo) / step)
    return [round(lo + k * step, 10) for k in range(count + 1)]


def _axis(kind: str, scale: Scale, step: float, label: Callable[[float, int], str],
          tick: Callable[[float, str], str]) -> str:
    """An axis's grid: ``tick`` draws each tick's line and text at its value, given its
    label (every label with the decimals the step needs)."""
    digits = _decimals(step)
    ticks = "".join(f'<g class="tick">{tick(value, label(value, digits))}</g>'
                    for value in _ticks(scale.lo, scale.hi, step))
    return f'<g class="axis {kind}">{ticks}</g>'


def _x_axis(scale: Scale, step: float, y0: float, y1: float,
            label: Callable[[float, int], str], text_y: float) -> str:
    """Vertical grid lines from y0 to y1 at each tick, labelled at text_y."""
    def tick(value: float, text: str) -> str:
        x = _n(scale(value))
        return (f'<line x1="{x}" x2="{x}" y1="{_n(y0)}" y2="{_n(y1)}"/>'
                f'<text x="{x}" y="{_n(text_y)}" text-anchor="middle">{text}</text>')
    return _axis("x", scale, step, label, tick)


def _y_axis(scale: Scale, step: float, x0: float, x1: float,
            label: Callable[[float, int], str]) -> str:
    """Horizontal grid lines from x0 to x1 at each tick, labelled left of x0."""
    def tick(value: float, text: str) -> str:
        y = _n(scale(value))
        return (f'<line x1="{_n(x0)}" x2="{_n(x1)}" y1="{y}" y2="{y}"/>'
                f'<text x="{_n(x0 - 4)}" y="{_n(scale(value) + 3.5)}" text-anchor="end">'
                f"{text}</text>")
    return _axis("y", scale, step, label, tick)


def _ends(text: str, limit: int) -> str:
    """``text`` in ``limit`` characters: its start and its end around an ellipsis (the end of
    a condition's label is its last axis, the one that tells neighbours apart)."""
    if len(text) <= limit:
        return text
    head = (limit - 1) * 2 // 3
    return f"{text[:head]}…{text[len(text) - (limit - 1 - head):]}"


def short_forms(labels: Iterable[str], limit: int) -> dict[str, str]:
    """Each label as a figure writes it in ``limit`` characters (:func:`_ends`), never two
    alike: labels that would read the same once shortened are widened, up to the whole
    label, until they differ."""
    unique = list(dict.fromkeys(labels))
    width = dict.fromkeys(unique, limit)
    while True:
        shown = {label: _ends(label, width[label]) for label in unique}
        readers: dict[str, list[str]] = {}
        for label, text in shown.items():
            readers.setdefault(text, []).append(label)
        alike = [label for group in readers.values() if len(group) > 1 for label in group
                 if width[label] < len(label)]
        if not alike:
            return shown
        for label in alike:
            width[label] += 4


def _decimals(value: float) -> int:
    """The decimals that write ``value`` (a tick step) exactly, up to 6."""
    for digits in range(0, 6):
        if abs(round(value, digits) - value) < 1e-9:
            return digits
    return 6


def _signed_tick(value: float, digits: int) -> str:
    return "0" if abs(value) < 1e-12 else f"{value:+.{digits}f}"


def _plain_tick(value: float, digits: int) -> str:
    return f"{value:.{digits}f}"


def _money_tick(value: float, digits: int) -> str:
    return f"${value:.{digits}f}"


# --------------------------------------------------------------------------- forest plot


def _tone(row: Row) -> str:
    if not row.flag and not row.counted:
        return "plain"
    tone = "worse" if row.leaning == "worse" else "safer" if row.leaning == "safer" else "flag"
    return f"{tone} counted" if row.counted else tone


FOREST_WIDTH = 720.0
_LABEL_END = 214.0
_PLOT = (232.0, 700.0)
_TOP = 30.0
_ROW = 18.0


def forest_plot(event: str, rows: Sequence[Row], order: Sequence[int], *, level: float,
                margin: float | None = None, uid: str = "f") -> str:
    """One event's forest plot: a line per row of ``order`` (indices into ``rows``, drawn top
    to bottom), the change as a dot, the simultaneous interval as a bar, the rise and fall
    limits as ticks, zero (and ``margin``, the change toward worse a margin test allows) as
    reference lines; rows the verdict counts carry a diamond."""
    drawn = [rows[i] for i in order]
    worse_when = drawn[0].worse_when if drawn else "rise"
    signed_margin = None if margin is None else (margin if worse_when == "rise" else -margin)
    values = [0.0]
    for row in drawn:
        values += [row.interval.low, row.interval.high, row.change]
        if row.rise.value is not None:
            values.append(row.rise.value)
        if row.fall.value is not None:
            values.append(-row.fall.value)
    if signed_margin is not None:
        values.append(signed_margin)
    lo, hi, step = _domain(values, 6)
    x = Scale(max(lo, -1.0), min(hi, 1.0), *_PLOT)
    bottom = _TOP + _ROW * len(drawn) + 4
    height = bottom + 8
    counted = [r for r in drawn if r.counted]
    title = f"Forest plot of {event}: the change of each condition, in the grid's order"
    desc = (f"{len(drawn)} conditions; each line shows the change after minus before as a dot, "
            f"its exact simultaneous interval (covering at least {100 * level:.2f}%) as a "
            "bar, and the rise and fall "
            "detection limits as short ticks; zero is the vertical reference line"
            + (f", and the margin {signed(signed_margin)} a dashed one"
               if signed_margin is not None else "")
            + f". {len(counted)} counted by the verdict"
            + (": " + "; ".join(f"{r.condition} {signed(r.change)}" for r in counted[:5])
               if counted else "")
            + ". The grid above and the table of every row below give each number.")
    out = [f'<svg class="forest-svg" role="img" viewBox="0 0 {_n(FOREST_WIDTH)} {_n(height)}" '
           f'width="{_n(FOREST_WIDTH)}" aria-labelledby="{uid}-t {uid}-d" '
           f'data-event="{_e(event)}"><title id="{uid}-t">{_e(title)}</title>'
           f'<desc id="{uid}-d">{_e(desc)}</desc>',
           _x_axis(x, step, _TOP - 6, bottom, _signed_tick, 14)]
    zero = _n(x(0.0))
    out.append(f'<line class="zero" x1="{zero}" x2="{zero}" y1="{_n(_TOP - 6)}" '
               f'y2="{_n(bottom)}"/>')
    if signed_margin is not None:
        at = _n(x(signed_margin))
        out.append(f'<g class="margin"><line x1="{at}" x2="{at}" y1="{_n(_TOP - 6)}" '
                   f'y2="{_n(bottom)}"/><text x="{at}" y="{_n(_TOP - 9)}" '
                   f'text-anchor="middle">margin {signed(signed_margin)}</text></g>')
    out.append(f'<rect class="hl" x="0" y="-{_n(_ROW)}" width="{_n(FOREST_WIDTH)}" '
               f'height="{_n(_ROW)}"/><g class="rows">')
    shown = short_forms((r.condition for r in drawn), 30)
    for place, (i, row) in enumerate(zip(order, drawn, strict=True)):
        out.append(_forest_row(i, row, _TOP + _ROW * place + _ROW / 2, x,
                               shown[row.condition]))
    out.append("</g></svg>")
    return "".join(out)


def _forest_row(index: int, row: Row, y: float, x: Scale, label: str) -> str:
    cy = _n(y)
    # No <title> or band per line: at 1,000 conditions x 4 events each would add 4,000
    # elements; the details panel names the line hovered, and one band marks the chosen.
    parts = [f'<g class="fr {_tone(row)}" data-i="{index}" pointer-events="bounding-box">',
             f'<text class="lab" x="{_n(_LABEL_END)}" y="{_n(y + 4)}" text-anchor="end">'
             f"{_e(label)}</text>",
             f'<line class="ci" x1="{_n(x(row.interval.low))}" x2="{_n(x(row.interval.high))}" '
             f'y1="{cy}" y2="{cy}"/>']
    for name, value in (("rise", row.rise.value), ("fall", row.fall.value)):
        if value is not None:
            at = _n(x(value if name == "rise" else -value))
            parts.append(f'<line class="tk {name}" x1="{at}" x2="{at}" y1="{_n(y - 5)}" '
                         f'y2="{_n(y + 5)}"/>')
    cx = x(row.change)
    if row.counted:
        parts.append(f'<path class="cm" d="M{_n(cx)} {_n(y - 7)}L{_n(cx + 7)} {cy}L{_n(cx)} '
                     f'{_n(y + 7)}L{_n(cx - 7)} {cy}Z"/>')
    parts.append(f'<circle class="pt" cx="{_n(cx)}" cy="{cy}" r="3.5"/></g>')
    return "".join(parts)


# --------------------------------------------------------------------------- step curves


def _curve(found: Where) -> tuple[tuple[int, ...], tuple[float, ...], tuple[float, ...],
                                  tuple[float, ...]]:
    failed = found.incidence.curve("failed")
    return found.incidence.steps, failed.incidence, failed.low, failed.high


def _step_path(steps: Sequence[int], values: Sequence[float], x: Scale, y: Scale) -> str:
    """The cumulative share as a step function: 0 until the first step, then each step's
    share from that step to the next, the last one's for one step (as its band is)."""
    parts = [f"M{_n(x(x.lo))} {_n(y(0.0))}"]
    for step, value in zip(steps, values, strict=True):
        parts.append(f"H{_n(x(step))}V{_n(y(value))}")
    if steps:
        parts.append(f"H{_n(x(steps[-1] + 1))}")
    return "".join(parts)


def _band_path(steps: Sequence[int], low: Sequence[float], high: Sequence[float], x: Scale,
               y: Scale) -> str:
    """The band as the curve is drawn: each step's from that step to the next, and the last
    step's for one step (ending it at the last step drew that step's band with no width, so
    the band read at the last step was the step before's)."""
    top = [(x(s), y(h)) for s, h in zip(steps, high, strict=True)]
    end = x(steps[-1] + 1) if steps else x(x.hi)
    upper = "".join(f"L{_n(px)} {_n(py)}" for px, py in _stairs(top, end))
    lower_points = list(_stairs([(x(s), y(v)) for s, v in zip(steps, low, strict=True)], end))
    lower = "".join(f"L{_n(px)} {_n(py)}" for px, py in reversed(lower_points))
    return f"M{_n(x(steps[0]))} {_n(y(0.0))}{upper}{lower}Z" if steps else ""


def _stairs(points: Sequence[tuple[float, float]], end: float) -> Iterable[tuple[float, float]]:
    for k, (px, py) in enumerate(points):
        yield px, py
        yield (points[k + 1][0] if k + 1 < len(points) else end), py


def _step_svg(figure: StepFigure, before: Where | None, after: Where | None, *, big: bool,
              x_hi: float, y_hi: float, y_step: float, title: str, desc: str, uid: str,
              before_label: str, after_label: str) -> str:
    width, height = (480.0, 230.0) if big else (230.0, 130.0)
    left, right, top, bottom = (48.0, 12.0, 12.0, 36.0) if big else (40.0, 8.0, 8.0, 26.0)
    x = Scale(0.0, x_hi, left, width - right)
    y = Scale(0.0, y_hi, height - bottom, top)
    x_step = _step(x_hi, 6 if big else 3, whole=True)
    x_top = math.ceil(x_hi / x_step - 1e-9) * x_step
    x = Scale(0.0, x_top, left, width - right)
    out = [f'<svg class="steps-svg{" big" if big else ""}" role="img" '
           f'viewBox="0 0 {_n(width)} {_n(height)}" width="{_n(width)}" '
           f'aria-labelledby="{uid}-t {uid}-d" data-event="{_e(figure.event)}">'
           f'<title id="{uid}-t">{_e(title)}</title><desc id="{uid}-d">{_e(desc)}</desc>',
           _x_axis(x, x_step, top, height - bottom, _plain_tick, height - bottom + 13),
           _y_axis(y, y_step, left, width - right, _plain_tick)]
    if big:
        out.append(f'<text class="axl" x="{_n((left + width - right) / 2)}" '
                   f'y="{_n(height - 4)}" text-anchor="middle">step</text>')
    for name, found, label in (("before", before, before_label), ("after", after, after_label)):
        if found is None:
            continue
        steps, values, low, high = _curve(found)
        if big and found.incidence.bootstrap:
            out.append(f'<path class="band {name}" d="{_band_path(steps, low, high, x, y)}"/>')
        out.append(f'<path class="cv {name}" data-run="{_e(label)}" '
                   f'd="{_step_path(steps, values, x, y)}"/>'
                   f'<circle class="end {name}" cx="{_n(x(steps[-1]))}" '
                   f'cy="{_n(y(values[-1]))}" r="{3 if big else 2}"/>')
    out.append("</svg>")
    return "".join(out)


def _share_by(found: Where | None) -> dict[int, float]:
    if found is None:
        return {}
    steps, values, _, _ = _curve(found)
    return dict(zip(steps, values, strict=True))


def _final(found: Where | None) -> str:
    if found is None:
        return "no episode stopped at a step"
    steps, values, _, _ = _curve(found)
    return f"{rate(values[-1])} by step {steps[-1]}"


def step_figures(figures: Figures, before_label: str, after_label: str) -> str:
    """Per failure: where its episodes stopped, both runs pooled (with the 95% bootstrap band
    ``where`` prints) and each condition alone, and the log-rank test beside them."""
    out: list[str] = []
    for k, figure in enumerate(figures.steps):
        pooled = [w for w in (figure.before, figure.after) if w is not None]
        each = [w for c in figure.conditions for w in (c.before, c.after) if w is not None]
        if not pooled:
            continue
        # One step of room after the last, so that its jump is not drawn on the edge.
        x_hi = float(max(w.incidence.steps[-1] for w in pooled + each)) + 1
        _, y_hi, y_step = _domain([0.0, max([max(_curve(w)[3]) for w in pooled] + [0.01])], 4)
        _, small_hi, small_step = _domain(
            [0.0, max([max(_curve(w)[1]) for w in each] + [0.01])], 2)
        event = figure.event
        title = f"Share of episodes ended {event} by step, {before_label} and {after_label}"
        desc = (f"Cumulative share (Aalen-Johansen) of episodes that ended {event}, by the step "
                f"they stopped at; {before_label} dashed, {after_label} solid, with 95% "
                f"bootstrap bands. By the last step: {before_label} {_final(figure.before)}, "
                f"{after_label} {_final(figure.after)}. The table after the figure gives every "
                "step.")
        big = _step_svg(figure, figure.before, figure.after, big=True, x_hi=x_hi, y_hi=y_hi,
                        y_step=y_step, title=title, desc=desc, uid=f"s{k}",
                        before_label=before_label, after_label=after_label)
        test = (figure.test and compare_steps_lines(figure.test)) or []
        said = [test[0]] + [line for line in test if line.startswith("statistic:")] if test \
            else [figure.note or "no log-rank test"]
        small = []
        captions = short_forms((c.condition for c in figure.conditions), 40)
        for n, c in enumerate(figure.conditions):
            if c.before is None and c.after is None:
                continue
            small.append(
                f'<figure class="small" data-condition="{_e(c.condition)}">'
                + _step_svg(figure, c.before, c.after, big=False, x_hi=x_hi, y_hi=small_hi,
                            y_step=small_step, uid=f"s{k}c{n}",
                            title=f"{c.condition}: share ended {event} by step",
                            desc=f"{before_label} {_final(c.before)}; {after_label} "
                                 f"{_final(c.after)}",
                            before_label=before_label, after_label=after_label)
                + f"<figcaption>{_e(captions[c.condition])}</figcaption></figure>")
        rest = (f'<p class="muted">{figure.not_drawn} more condition(s) not drawn; '
                f"<code>pytest-prove where RUN --event {_e(event)}</code> prints the pooled "
                "figures.</p>" if figure.not_drawn else "")
        out.append(
            f'<section class="steps" aria-labelledby="s{k}-h" data-event="{_e(event)}">'
            f'<h3 id="s{k}-h">Where the episodes that ended {_e(event)} stopped</h3>'
            f'<div class="steps-row"><figure class="pooled">{big}<figcaption>'
            f'{_legend(before_label, after_label)}all conditions, as <code>pytest-prove where RUN '
            f"--event {_e(event)}</code> prints them</figcaption></figure>"
            f'<div class="logrank">' + "".join(f"<p>{_e(line)}</p>" for line in said)
            + "</div></div>"
            + _steps_table(figure, before_label, after_label, f"s{k}")
            + (f'<div class="smalls">{"".join(small)}</div>' if small else "") + rest
            + "</section>")
    return "".join(out)


def _swatch(name: str) -> str:
    """A short stretch of the run's curve, drawn with the curve's own class (so its colour and
    dashes are the curve's; a dashed CSS border 2 px high drew a solid line)."""
    return (f'<svg class="sw-line" viewBox="0 0 22 4" width="22" height="4" aria-hidden="true">'
            f'<path class="cv {name}" d="M0 2H22"/></svg>')


def _legend(before_label: str, after_label: str) -> str:
    return (f'<span class="key">{_swatch("before")}{_e(before_label)} '
            f'{_swatch("after")}{_e(after_label)}</span> ')


def _steps_table(figure: StepFigure, before_label: str, after_label: str, uid: str) -> str:
    a, b = _share_by(figure.before), _share_by(figure.after)
    body = "".join(
        f"<tr><td>{s}</td><td>{rate(a[s]) if s in a else ''}</td>"
        f"<td>{rate(b[s]) if s in b else ''}</td></tr>" for s in sorted(set(a) | set(b)))
    return (f'<table class="sr-only" id="{uid}-table"><caption>share of episodes ended '
            f"{_e(figure.event)} by step</caption><thead><tr><th>step</th>"
            f"<th>{_e(before_label)}</th><th>{_e(after_label)}</th></tr></thead>"
            f"<tbody>{body}</tbody></table>")


# --------------------------------------------------------------------------- cost


def _cost_label(c: ConditionCost, multi: bool) -> str:
    return f"{c.rollout} {c.label}" if multi else c.label


@dataclass(frozen=True, slots=True)
class _Bar:
    condition: str
    run: str  # "before" / "after"
    label: str  # the run's name
    episodes: int
    segments: tuple[tuple[str, float, float | None], ...]  # model, tokens/ep, price/ep

    @property
    def tokens(self) -> float:
        return sum(s[1] for s in self.segments)

    @property
    def price(self) -> float | None:
        prices = [s[2] for s in self.segments]
        return None if not prices or any(p is None for p in prices) else sum(
            p for p in prices if p is not None)


def _bars(cost: RunCost, name: str, label: str, multi: bool) -> dict[tuple[str, str], _Bar]:
    out = {}
    for c in cost.conditions:
        n = c.episodes or 1
        out[(c.rollout, c.condition_key)] = _Bar(
            _cost_label(c, multi), name, label, c.episodes,
            tuple((m.model, (m.input + m.output) / n, None if m.price is None else m.price / n)
                  for m in c.models))
    return out


COST_DRAWN = 40  # conditions drawn in the cost figure at most
_COST_WIDTH = 720.0
_COST_LABEL = 170.0
_COST_BARS = (178.0, 560.0)


def _cost_svg(groups: Sequence[tuple[str, _Bar | None, _Bar | None]], models: Sequence[str],
              metric: str, uid: str, title: str, desc: str) -> str:
    """Bars per condition, before over after, each split by model; the ratio at the right."""
    def value(bar: _Bar) -> float | None:
        return bar.tokens if metric == "tokens" else bar.price

    known = [v for _, b, a in groups for bar in (b, a) if bar is not None
             for v in [value(bar)] if v is not None]
    _, hi, step = _domain([0.0, max([*known, 0.0]) or 1.0], 4)
    x = Scale(0.0, hi, *_COST_BARS)
    row, gap, top = 14.0, 10.0, 24.0
    height = top + len(groups) * (2 * row + gap) + 4
    label = _plain_tick if metric == "tokens" else _money_tick
    out = [f'<svg class="cost-svg" role="img" viewBox="0 0 {_n(_COST_WIDTH)} {_n(height)}" '
           f'width="{_n(_COST_WIDTH)}" aria-labelledby="{uid}-t {uid}-d" data-metric="{metric}">'
           f'<title id="{uid}-t">{_e(title)}</title><desc id="{uid}-d">{_e(desc)}</desc>',
           _x_axis(x, step, top - 6, height - 4, label, 12),
           f'<text class="axl" x="{_n(_COST_BARS[1] + 80)}" y="12" text-anchor="middle">'
           "after / before</text>"]
    names = short_forms((condition for condition, _, _ in groups), 24)
    for k, (condition, before, after) in enumerate(groups):
        y0 = top + k * (2 * row + gap)
        # The whole label on hover (at most COST_DRAWN of them).
        out.append(f'<g class="cg" data-condition="{_e(condition)}">'
                   f'<text class="lab" x="{_n(_COST_LABEL - 4)}" y="{_n(y0 + row + 3)}" '
                   f'text-anchor="end"><title>{_e(condition)}</title>'
                   f'{_e(names[condition])}</text>')
        for j, bar in enumerate((before, after)):
            if bar is None:
                continue
            y = y0 + j * row
            total = value(bar)
            out.append(f'<g class="bar {bar.run}" data-run="{_e(bar.label)}" '
                       f'data-value="{total if total is not None else ""}">')
            at = 0.0
            for model, tokens, price in bar.segments:
                part = tokens if metric == "tokens" else price
                if part is None:
                    continue
                m = models.index(model) % 6
                out.append(f'<rect class="seg m{m}" data-model="{_e(model)}" '
                           f'x="{_n(x(at))}" y="{_n(y + 1)}" width="{_n(x(at + part) - x(at))}" '
                           f'height="{_n(row - 2)}"/>')
                at += part
            shown = ("no price" if total is None else
                     f"{total:,.0f}" if metric == "tokens" else money(total, tiny=True))
            out.append(f'<text class="val" x="{_n(x(at) + 4)}" y="{_n(y + row - 3)}">'
                       f"{'before' if bar.run == 'before' else 'after'} {shown}</text></g>")
        if before is not None and after is not None:
            b, a = value(before), value(after)
            if a is not None and b:
                out.append(f'<text class="ratio" x="{_n(_COST_BARS[1] + 80)}" '
                           f'y="{_n(y0 + row + 3)}" text-anchor="middle">×{a / b:.2f}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def cost_figure(cost: CostComparison) -> str:
    """Tokens and price per episode by condition, before and after, as bars split by model,
    with the ratio after/before; the lines ``pytest-prove cost A B`` starts with above."""
    before, after = cost.before, cost.after
    multi = len({c.rollout for c in (*before.conditions, *after.conditions)}) > 1
    a_bars = _bars(before, "before", before.run, multi)
    b_bars = _bars(after, "after", after.run, multi)
    keys = list(dict.fromkeys([*a_bars, *b_bars]))
    groups = [((a_bars.get(k) or b_bars[k]).condition, a_bars.get(k), b_bars.get(k))
              for k in keys]
    every = len(groups)
    if every > COST_DRAWN:
        # Bars for a thousand conditions are a picture nobody reads (and tens of thousands
        # of pixels the browser must lay out): the costliest per episode, before or after,
        # are drawn, costliest first, and the command that lists them all is named.
        groups = sorted(groups, key=lambda g: -max(
            bar.tokens for bar in g[1:] if bar is not None))[:COST_DRAWN]
    models = sorted({m.model for run in (before, after) for m in run.models})
    head = [line for line in format_comparison(cost)[:2] if line]
    swatches = "".join(f'<span class="key"><span class="sw seg m{n % 6}"></span>{_e(m)}</span> '
                       for n, m in enumerate(models))
    which = ("each condition" if every == len(groups) else
             f"the {len(groups)} conditions of {every:,} that take the most tokens per episode "
             "in either run, costliest first")
    desc_tokens = (f"Input plus output tokens per episode of {which}, {before.run} "
                   f"above {after.run}, split by model; the ratio after/before at the right. "
                   "The table after the figure gives every number drawn.")
    figures = [_cost_svg(groups, models, "tokens", "c0",
                         "Tokens per episode by condition and model", desc_tokens)]
    if any(bar.price is not None for _, b, a in groups for bar in (b, a) if bar is not None):
        figures.append(_cost_svg(
            groups, models, "price", "c1", "Price per episode by condition and model",
            desc_tokens.replace("Input plus output tokens", "The price").replace(
                "the ratio", "the price ratio")))
    table = ["<table class=\"sr-only\"><caption>cost per episode by condition, run and "
             "model</caption><thead><tr><th>condition</th><th>run</th><th>model</th>"
             "<th>tokens per episode</th><th>price per episode</th></tr></thead><tbody>"]
    for condition, b, a in groups:
        for bar in (b, a):
            if bar is None:
                continue
            for model, tokens, price in bar.segments:
                table.append(f"<tr><td>{_e(condition)}</td><td>{_e(bar.label)}</td>"
                             f"<td>{_e(model)}</td><td>{tokens:,.0f}</td>"
                             f"<td>{money(price, tiny=True)}</td></tr>")
    table.append("</tbody></table>")
    return ('<section class="cost" aria-labelledby="cost-h"><h2 id="cost-h">Cost</h2>'
            + "".join(f"<p>{_e(line)}</p>" for line in head)
            + f'<p class="legend muted">{swatches}</p>'
            + ("" if every == len(groups) else
               f'<p class="muted">drawn: the {len(groups)} conditions of {every:,} that take '
               "the most tokens per episode in either run, costliest first; "
               f"<code>pytest-prove cost {_e(before.run)} {_e(after.run)}</code> lists every "
               "one</p>")
            + "".join(f"<figure>{f}<figcaption>{caption}</figcaption></figure>"
                      for f, caption in zip(figures, (
                          "input and output tokens per episode, by model",
                          "price per episode, by model, at the declared prices"), strict=False))
            + "".join(table)
            + "</section>")
