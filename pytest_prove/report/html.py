"""A report as one self-contained HTML page: a heat-map per event, and the full table.

Two pages: the comparison of two runs (:func:`render_html`, from a
:class:`~pytest_prove.review.Review`) and one run on its own (:func:`render_run_html`, from a
:class:`~pytest_prove.review.describe.Description`: each condition's rate of each event with
its exact interval). Both compute nothing statistical. Axis values are laid out in the order
the sweep declared them, and the page opens on its worst cell (see :func:`worst_first`).

The page loads nothing (its CSS and JS inline, copied from the package data files
``report/static/report.css`` and ``report.js``; a Content-Security-Policy that forbids every
request). Every text that came from a rollout is escaped with :func:`html.escape`; the data
the script reads is JSON inside a ``<script type="application/json">`` with ``<``, ``>``
and ``&`` written as ``\\u003c``, ``\\u003e`` and ``\\u0026``, and the script writes it
with ``textContent`` only.

Colour marks flagged rows only (red where the flag leans worse, green where it leans safer;
solid when the verdict counts the row): an unflagged cell is not a finding, so it stays grey.
A run with targets adds their grids, laid out by :func:`_grids` too, each cell toned and
marked by its target row's word (report/targets.py).
"""

from __future__ import annotations

import functools
import html
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import resources
from typing import Any

from pytest_prove.declare.spec import condition_label
from pytest_prove.errors import ProveError
from pytest_prove.review import Review
from pytest_prove.review.describe import Description, Rate
from pytest_prove.review.figures import Figures
from pytest_prove.review.labels import Labels
from pytest_prove.stats import Row

from ._format import REPORT_SCHEMA_VERSION, q_text, rate, signed, status_text
from .figures import cost_figure, forest_plot, step_figures
from .html_twins import twins_section
from .metric_plot import METRIC_CSS, metric_header, metric_section
from .notes import run_set_aside, set_aside, unfinished
from .terminal import bound_text, margin_line, verdict_line

__all__ = ["AxisError", "choose_axes", "render_html", "render_run_html", "worst_first",
           "worst_rate_first"]


class AxisError(ProveError, ValueError):
    """An axis asked for (--x, --y) that no condition has."""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _script_json(data: object) -> str:
    text = json.dumps(data, ensure_ascii=False, allow_nan=False)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def choose_axes(labels: Labels, x: str | None, y: str | None) -> tuple[str | None,
                                                                                str | None]:
    """The heat-map's axes: those asked for, else the first two axes the conditions have."""
    names = labels.axis_names()
    for label, asked in (("--x", x), ("--y", y)):
        if asked is not None and asked not in names:
            raise AxisError(
                f"{label} {asked!r} is not an axis of these runs; axes: "
                f"{', '.join(names) or 'none (each rollout has one condition)'}"
            )
    if x is not None and x == y:
        raise AxisError(f"--x and --y both name {x!r}; choose two different axes")
    rest = [n for n in names if n not in (x, y)]
    if x is None and rest:
        x = rest.pop(0)
    if y is None and rest:
        y = rest.pop(0)
    return x, y


def _status(row: Row) -> str:
    return status_text(row, counted="{direction} (counted by the verdict)",
                       leaning="flagged, leaning {leaning}",
                       blind="could not see a {blind} of the size asked", either=" or ")


def _tone(row: Row) -> str:
    if not row.flag and not row.counted:
        return ""
    tone = "worse" if row.leaning == "worse" else "safer" if row.leaning == "safer" else "flag"
    return f"{tone} counted" if row.counted else tone


def _row_data(index: int, row: Row, labels: Labels) -> dict[str, Any]:
    return {
        "i": index,
        "condition": row.condition,
        "case": labels.cases.get(row.condition),
        "event": row.event,
        "before": f"{rate(row.before)} ({row.x_before}/{row.n_before})",
        "after": f"{rate(row.after)} ({row.x_after}/{row.n_after})",
        "change": signed(row.change),
        "interval": f"[{signed(row.interval.low)}, {signed(row.interval.high)}] at "
                    f"{100 * row.interval.level:.2f}%",
        "p": q_text(row.p),
        "q": q_text(row.q_value),
        "rise": str(row.rise),
        "fall": str(row.fall),
        "status": _status(row),
        "design": "paired" if row.paired else "unpaired",
        **({} if row.margin is None else {
            "margin": _margin_word(row),
            "margin_p": q_text(row.margin.p),
            "bound": bound_text(row.margin.bound)}),
    }


def _margin_word(row: Row) -> str:
    if row.margin is None:
        return ""
    return "beyond" if row.beyond else "within" if row.within else "not within"


def worst_first(rows: Sequence[Row]) -> list[int]:
    """The indices of the rows that moved the worse way, the worst first; the page opens on
    the first. Worst means, in this order:

    1. rows the verdict counts as worse, the smallest Holm-adjusted p first (the most
       significant worsening), among equal p the larger change, then a failure's row;
    2. any other row whose change leans worse, the largest change relative to its
       detection limit that way first (``rise`` for a failure, ``fall`` for a success: how
       close it came to what the row could have flagged); rows with no limit that way
       (none detectable) follow, the largest change first.

    Rows that did not move the worse way are not listed: with none, the page opens on the
    first cell and takes no focus."""
    counted = [i for i, r in enumerate(rows) if r.counted and r.direction == "worse"]
    # p-values and changes equal to 12 digits are a tie (a failure and a success that mirror
    # each other differ in the last bits: 19/30 - 2/30 is not 28/30 - 11/30 in floating
    # point); a tie goes to the larger change, then to a failure.
    counted.sort(key=lambda i: (float(f"{rows[i].p_holm:.12g}"),
                                -float(f"{abs(rows[i].change):.12g}"),
                                rows[i].worse_when != "rise", i))
    rest = [i for i, r in enumerate(rows) if i not in set(counted) and r.leaning == "worse"]

    def toward_limit(i: int) -> tuple[int, float, int]:
        row = rows[i]
        limit = row.rise if row.worse_when == "rise" else row.fall
        if limit.value:
            return 0, -abs(row.change) / limit.value, i
        return 1, -abs(row.change), i

    return counted + sorted(rest, key=toward_limit)


def worst_rate_first(rows: Sequence[Rate]) -> list[int]:
    """A single run's rows, the worst first: the highest rate of a failure (or of episodes
    without an outcome) first, then the lowest rate of a success; rows at 0 failures or
    every success are not listed."""
    failing = [i for i, r in enumerate(rows) if r.worse_when == "rise" and r.x > 0]
    short = [i for i, r in enumerate(rows) if r.worse_when == "fall" and r.x < r.n]
    return (sorted(failing, key=lambda i: (-rows[i].rate, -rows[i].n, i))
            + sorted(short, key=lambda i: (rows[i].rate, -rows[i].n, i)))


def _cell(index: int, row: Row, focusable: bool, start: bool) -> str:
    tone = _tone(row)
    label = (f"{row.condition}, {row.event}: before {rate(row.before)}, after "
             f"{rate(row.after)}, change {signed(row.change)}, q {q_text(row.q_value)}")
    return (
        f'<td role="gridcell" class="cell {tone}" tabindex="{0 if focusable else -1}" '
        f'data-i="{index}"{" data-start" if start else ""} aria-label="{_e(label)}">'
        f'<span class="ba">{rate(row.before)} → {rate(row.after)}</span>'
        f'<span class="ch">{signed(row.change)}</span>'
        f'<span class="qq">q {q_text(row.q_value)}</span>'
        f'<span class="lim">rise {_e(row.rise)} · fall {_e(row.fall)}</span>'
        + ("" if row.margin is None else
           f'<span class="mg">{_e(_margin_word(row))}, ≤ {_e(bound_text(row.margin.bound))}'
           '</span>')
        + '</td>'
    )


def _rate_cell(index: int, row: Rate, focusable: bool, start: bool) -> str:
    label = (f"{row.condition}, {row.event}: {rate(row.rate)}, {row.x} of {row.n}, interval "
             f"{rate(row.low)} to {rate(row.high)}")
    return (
        f'<td role="gridcell" class="cell" tabindex="{0 if focusable else -1}" '
        f'data-i="{index}"{" data-start" if start else ""} aria-label="{_e(label)}">'
        f'<span class="ch">{rate(row.rate)}</span>'
        f'<span class="ba">{row.x} of {row.n}</span>'
        f'<span class="lim">[{rate(row.low)}, {rate(row.high)}]</span></td>'
    )


#: Renders the cell of row ``index``: (index, focusable, the section's first cell).
CellRenderer = Callable[[int, bool, bool], str]


def _grids(event: str, members: Sequence[tuple[int, str]], labels: Labels,
           x: str | None, y: str | None, cell: CellRenderer, start: int | None,
           empty: str = "not compared") -> list[str]:
    """The grids of one event: ``members`` are its rows' (index, condition label); one grid
    per value of the axes beyond ``x`` and ``y``; values in the order the sweep declared
    them. The cell of row ``start`` (else each grid's first) is the one Tab reaches."""
    def value(condition: str, axis: str | None) -> Any:
        if axis is None:
            return ""
        return labels.axes.get(condition, {}).get(axis, "—")

    others = [a for a in labels.axis_names() if a not in (x, y)]
    # The grids of the further axes' values come in the order those were declared too.
    along = {a: labels.ordered(a, [value(c, a) for _, c in members]) for a in others}
    slices: dict[str, list[tuple[int, str]]] = {}
    places: dict[str, tuple[int, ...]] = {}
    for item in members:
        key = condition_label({a: value(item[1], a) for a in others}) if others else ""
        slices.setdefault(key, []).append(item)
        places.setdefault(key, tuple(along[a].index(value(item[1], a)) for a in others))
    out: list[str] = []
    for key in sorted(slices, key=lambda k: places[k]):
        grid_members = slices[key]
        xs = labels.ordered(x, [value(c, x) for _, c in grid_members])
        ys = labels.ordered(y, [value(c, y) for _, c in grid_members])
        at = {(str(value(c, y)), str(value(c, x))): i for i, c in grid_members}
        focus = start if start in at.values() else None
        caption = f"{event}" + (f" · {key}" if key else "")
        body = [f'<table class="grid" role="grid" aria-label="{_e(caption)}">',
                # The section's heading names the event; a caption only names a slice.
                f"<caption>{_e(key)}</caption>" if key else "",
                f'<thead><tr><th scope="col">{_e(y or "")} \\ {_e(x or "")}</th>'
                + "".join(f'<th scope="col">{_e(v)}</th>' for v in xs) + "</tr></thead><tbody>"]
        first = True
        for yv in ys:
            cells = [f'<th scope="row">{_e(yv)}</th>']
            for xv in xs:
                found = at.get((str(yv), str(xv)))
                if found is None:
                    cells.append('<td role="gridcell" class="cell empty" tabindex="-1">'
                                 f"{_e(empty)}</td>")
                else:
                    focusable = found == focus if focus is not None else first
                    cells.append(cell(found, focusable, found == start))
                    first = False
            body.append("<tr>" + "".join(cells) + "</tr>")
        body.append("</tbody></table>")
        out.append("\n".join(body))
    return out


def _target_grids(x: str | None, y: str | None) -> Callable[..., list[str]]:
    """A target's grids, laid out as an event's (report/targets.py colours their cells)."""
    return lambda name, members, labels, cell: _grids(name, members, labels, x, y, cell, None,
                                                      "no target")


def _sections(events: dict[str, list[tuple[int, str]]], worse: dict[str, str], labels: Labels,
              x: str | None, y: str | None, cell: CellRenderer, order: Sequence[int],
              empty: str = "not compared",
              figure: Callable[[int, str, list[int]], str] | None = None) -> str:
    """One section per event: its grids, its ``figure`` (the forest plot, given the event's
    place, name and row indices) and the panel that shows the chosen cell, which starts on
    the event's worst cell (the first of ``order`` among its rows); a grid's cell without a
    row reads ``empty``."""
    rank = {i: n for n, i in enumerate(order)}
    out = []
    for place, (event, members) in enumerate(events.items()):
        mine = [i for i, _ in members if i in rank]
        start = min(mine, key=rank.__getitem__) if mine else None
        out.append(
            f'<section class="event" aria-label="event {_e(event)}">'
            f"<h2>{_e(event)} <span class=\"muted\">(worse when it {worse[event]})</span></h2>"
            f'<div class="grids">'
            f'{"".join(_grids(event, members, labels, x, y, cell, start, empty))}'
            f'{figure(place, event, [i for i, _ in members]) if figure else ""}'
            f'</div><aside class="details" aria-live="polite" aria-label="details of the '
            f'chosen cell"></aside></section>'
        )
    return "".join(out)


#: Nothing may load: no request leaves the page, whatever a rollout wrote into it.
_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"


@functools.cache
def _static(name: str) -> str:
    """The page's CSS or script, shipped beside this module as package data
    (``report/static/``, declared in pyproject.toml so that a wheel carries it)."""
    return (resources.files("pytest_prove.report") / "static" / name).read_text(encoding="utf-8")

#: The details panel of a comparison's cell: (field, name shown).
_FIELDS = [["condition", "condition"], ["case", "case"], ["event", "event"],
           ["before", "before"], ["after", "after"], ["change", "change"],
           ["interval", "interval"], ["p", "p"], ["q", "q"], ["rise", "rise limit"],
           ["fall", "fall limit"], ["status", "verdict"], ["design", "design"]]

#: The panel's margin fields, with --prove-margin.
_MARGIN_FIELDS = [["margin", "margin"], ["margin_p", "margin p"],
                  ["bound", "upper bound (one-sided)"]]

#: The details panel of a single run's cell.
_RATE_FIELDS = [["condition", "condition"], ["case", "case"], ["event", "event"],
                ["episodes", "episodes"], ["rate", "rate"], ["interval", "interval"],
                ["reads", "reads"]]


#: From this many rows on, the page lays out its large blocks (forest plots, figures, the
#: table of every row) only near the screen (CSS content-visibility): a page of 4,000 rows
#: then opens in about half the time. A smaller page is laid out whole, so that a full-page
#: screenshot or a search of its text needs no scrolling.
BIG_PAGE = 400


def _page(*, title: str, header: str, sections: str, table: str, notes: Sequence[str],
          method: str, data: dict[str, Any], figures: str = "", css: str = "") -> str:
    big = ' class="big"' if len(data["rows"]) >= BIG_PAGE else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<meta name="color-scheme" content="light dark">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title><style>
{_static("report.css")}{css}</style></head>
<body{big}>
<header>{header}</header>
<main>{sections}{figures}
<h2>Every row</h2><div class="every">{table}</div>
{''.join(notes)}
<p class="muted">{_e(method)}</p>
</main>
<script type="application/json" id="prove-data">{_script_json(data)}</script>
<script>
{_static("report.js")}</script>
</body></html>
"""


def _every_row(header: Sequence[str], labels: Labels,
               rows: Iterable[tuple[str, str, str]]) -> str:
    """The table of every row under ``header``: each row's condition, its case and its event,
    escaped, then the rest of its cells, given as ``(condition, event, cells)``."""
    body = "".join(
        f"<tr><td>{_e(condition)}</td><td>{'' if case is None else _e(case)}</td>"
        f"<td>{_e(event)}</td>{cells}</tr>"
        for condition, event, cells in rows
        for case in [labels.cases.get(condition)])
    return (f'<table class="full"><thead><tr>{"".join(f"<th>{h}</th>" for h in header)}'
            f"</tr></thead><tbody>{body}</tbody></table>")


def _notes(said: Iterable[tuple[str, str]]) -> list[str]:
    """What the review set aside, a paragraph each (the text is escaped already)."""
    return [f"<p><b>{_e(head.capitalize())}</b>: {text}</p>" for head, text in said]


def _axes_note(x: str | None, y: str | None) -> str:
    return (f"grid: {_e(x or 'one condition')} across" + (f", {_e(y)} down" if y else "")
            + ", values in the order the sweep declared them (pytest-prove report ... --x AXIS "
              "--y AXIS draws other axes)")


def _opens_on(condition: str, event: str, why: str) -> str:
    return (f'<p class="muted" id="opens-on">The page opens on the worst cell: '
            f"{_e(condition)}, {_e(event)} ({why}).</p>")


def _events(conditions: Sequence[tuple[str, str]]) -> dict[str, list[tuple[int, str]]]:
    """Each event's rows, as (index, condition label), in the order the events first come."""
    found: dict[str, list[tuple[int, str]]] = {}
    for i, (condition, event) in enumerate(conditions):
        found.setdefault(event, []).append((i, condition))
    return found


def _forest(rows: Sequence[Row], place_of: Mapping[str, tuple[int, ...]], level: float,
            margin: float | None) -> Callable[[int, str, list[int]], str]:
    def draw(place: int, event: str, members: list[int]) -> str:
        # Every event's plot in one order, the grid's (read row by row): a condition is
        # found at the same height in each.
        drawn = sorted(members, key=lambda i: (place_of.get(rows[i].condition, ()), i))
        plot = forest_plot(event, rows, drawn, level=level, margin=margin, uid=f"f{place}")
        hint = (f"forest plot of {event}, in the grid's order: up and down arrows (Home, End, "
                "Page Up, Page Down) move through the conditions, with the grid and the "
                "details")
        return (f'<figure class="forest"><p class="legend muted" aria-hidden="true"><span>● '
                f"change</span><span>━ exact simultaneous interval, at least "
                f"{100 * level:.2f}%</span><span>┃ "
                "rise and fall limits</span><span>◇ counted by the verdict</span><span>│ zero"
                "</span>" + ("<span>┆ margin</span>" if margin is not None else "")
                + f'</p><div class="forest-box" tabindex="0" role="group" '
                f'aria-label="{_e(hint)}">{plot}</div></figure>')
    return draw


def _figures(figures: Figures | None, labels: Labels) -> str:
    if figures is None:
        return ""
    parts = []
    if figures.steps:
        parts.append("<h2>Where failing episodes stop</h2>"
                     + step_figures(figures, labels.before, labels.after))
    if figures.cost is not None:
        parts.append(cost_figure(figures.cost))
    parts.extend(f'<p class="muted">{_e(note)}</p>' for note in figures.notes)
    return f'<div class="figures">{"".join(parts)}</div>' if parts else ""


def render_html(review: Review, *, x: str | None = None, y: str | None = None,
                figures: Figures | None = None, margin: float | None = None) -> str:
    """The page: verdict first, a grid and a forest plot per event, details on focus or
    hover, the step curves and the cost when ``figures`` has them, the full table; it opens
    on the worst cell. ``margin`` (a change toward worse a margin test allows) is drawn as a
    reference line in each forest plot; by default, the comparison's own margin
    (``--prove-margin``), if it has one."""
    if review.metrics_only:
        return _metrics_only_page(review, figures)
    comparison, labels, prepared = review.require_comparison(), review.labels, review.prepared
    if margin is None and comparison.margin is not None:
        margin = comparison.margin.margin
    x, y = choose_axes(labels, x, y)
    verdict = comparison.verdict
    rows = comparison.rows
    order = worst_first(rows)
    fields = _FIELDS + (_MARGIN_FIELDS if comparison.margin is not None else [])
    data = {"schema_version": REPORT_SCHEMA_VERSION, "fields": fields,
            "worst": order[0] if order else None,
            "rows": [_row_data(i, r, labels) for i, r in enumerate(rows)]}
    worse = {r.event: "rises" if r.worse_when == "rise" else "falls" for r in rows}
    level = rows[0].interval.level if rows else 0.95
    sections = _sections(_events([(r.condition, r.event) for r in rows]), worse, labels, x, y,
                         lambda i, focusable, start: _cell(i, rows[i], focusable, start), order,
                         figure=_forest(rows, labels.grid_order([r.condition for r in rows],
                                                                x, y), level, margin))
    columns: tuple[str, ...] = ("condition", "case", "event", "before", "after", "change",
                                "interval", "p", "q", "verdict", "rise", "fall")
    if comparison.margin is not None:
        columns += ("margin", "margin p", "bound")
    table = _every_row(columns, labels, ((r.condition, r.event, (
        f"<td class=\"n\">{rate(r.before)}</td>"
        f"<td class=\"n\">{rate(r.after)}</td><td class=\"n\">{signed(r.change)}</td>"
        f"<td class=\"n\">[{signed(r.interval.low)}, {signed(r.interval.high)}]</td>"
        f"<td class=\"n\">{q_text(r.p)}</td><td class=\"n\">{q_text(r.q_value)}</td>"
        f"<td>{_e(_status(r))}</td><td class=\"n\">{_e(r.rise)}</td>"
        f"<td class=\"n\">{_e(r.fall)}</td>"
        + ("" if r.margin is None else
           f"<td>{_e(_margin_word(r))}</td><td class=\"n\">{q_text(r.margin.p)}</td>"
           f"<td class=\"n\">{_e(bound_text(r.margin.bound))}</td>"))) for r in rows))
    notes = _notes(set_aside(review, _e))
    opens = ""
    if order:
        worst = rows[order[0]]
        why = (f"counted worse, Holm p {q_text(worst.p_holm)}" if worst.counted
               else f"leaning worse, change {signed(worst.change)}, q {q_text(worst.q_value)}")
        opens = _opens_on(worst.condition, worst.event, why)
    said = margin_line(comparison)
    margin_said = "" if said is None else f'\n<p class="verdict margin">{_e(said)}</p>'
    metrics = review.metrics if review.metrics is not None and review.metrics.rows else None
    if metrics is not None:  # a page without metric rows stays as it was, byte for byte
        margin_said += metric_header(metrics)
        sections += metric_section(metrics)
    if review.targets is not None:  # the target rows, coloured by their word
        from .targets import target_html

        sections += target_html(review.targets, labels, _target_grids(x, y))
    from .twins import twin_html

    sections += twin_html(review.twins)  # paired rows: how often twins ended alike
    sections += twins_section(review)  # "" unless a flagged condition has changed twins
    incomplete = "".join(f'\n<p class="verdict"><b>{_e(head.capitalize())}</b>: {_e(text)}</p>'
                         for head, text in unfinished(review))
    heading, gate_said = _gate_heading(review, verdict.word)
    header = f"""{heading}{gate_said}
<p class="verdict">{_e(verdict_line(comparison))}</p>{margin_said}{incomplete}
<p class="muted">{_e(labels.before)} → {_e(labels.after)}, {comparison.m} tests,
{'paired on shared seeds' if prepared.paired else 'unpaired'}; {_axes_note(x, y)}. Use the arrow
keys in a grid, or hover a cell, to read its details.</p>{opens}
<p class="legend muted"><span class="l-worse-c">worse, counted</span><span
class="l-worse">flagged, leaning worse</span><span class="l-safer">flagged,
leaning safer</span><span class="l-plain">not flagged</span></p>"""
    return _page(title=f"pytest-prove: {_title_word(review, verdict.word)}: {labels.before} → "
                       f"{labels.after}",
                 header=header, sections=sections, table=table, notes=notes,
                 method=comparison.method + ("" if comparison.margin is None
                                             else f". {comparison.margin.method}"),
                 data=data, figures=_figures(figures, labels),
                 css="" if metrics is None else METRIC_CSS)


def _title_word(review: Review, word: str) -> str:
    """The verdict's word, or ``gate failed on metrics`` (targets) when those rows fail the
    gate and the word alone would read as a pass (:mod:`.headline`)."""
    from .headline import failed_parts, gate_headline

    if gate_headline(review, str) is None:
        return word
    return "gate failed on " + " and ".join(p for p in failed_parts(review) if p != "outcomes")


def _gate_heading(review: Review, word: str) -> tuple[str, str]:
    """The page's heading, and the gate's line under it when the metric or target rows fail
    the gate and the verdict's word alone would read as a pass (else nothing: a page without
    them stays as it was, byte for byte)."""
    from .headline import gate_headline

    said = gate_headline(review, str)
    if said is None:
        return f'<h1 class="word-{_e(word.split()[0])}">{_e(word)}</h1>', ""
    return (f'<h1 class="word-worse">{_e(_title_word(review, word))}</h1>',
            f'\n<p class="verdict"><b>{_e(said)}</b></p>')


def _metrics_only_page(review: Review, figures: Figures | None) -> str:
    """The page of rollouts that declare metrics and no outcomes: no grid of outcome rows;
    the metric rows' forest plots and table are the comparison."""
    from .metrics import METRICS_ONLY, metric_word

    metrics, labels = review.metrics, review.labels
    assert metrics is not None
    word = metric_word(metrics)
    incomplete = "".join(f'\n<p class="verdict"><b>{_e(head.capitalize())}</b>: {_e(text)}</p>'
                         for head, text in unfinished(review))
    heading, gate_said = _gate_heading(review, word)
    header = f"""{heading}{gate_said}{metric_header(metrics)}\
{incomplete}
<p class="muted">{_e(labels.before)} → {_e(labels.after)}, {metrics.m} metric rows,
{'paired on shared seeds' if review.prepared.paired else 'unpaired'}; {_e(METRICS_ONLY)}.</p>"""
    data = {"schema_version": REPORT_SCHEMA_VERSION, "fields": _FIELDS, "worst": None,
            "rows": []}
    return _page(title=f"pytest-prove: {_title_word(review, word)}: {labels.before} → "
                       f"{labels.after}",
                 header=header, sections=metric_section(metrics),
                 table=f'<p class="muted">{_e(METRICS_ONLY)}; the table of every metric row '
                       "is under Metrics above.</p>",
                 notes=_notes(set_aside(review, _e)), method=metrics.method, data=data,
                 figures=_figures(figures, labels), css=METRIC_CSS)


def _rate_data(index: int, row: Rate, labels: Labels, level: float) -> dict[str, Any]:
    return {
        "i": index,
        "condition": row.condition,
        "case": labels.cases.get(row.condition),
        "event": row.event,
        "episodes": f"{row.x} of {row.n}",
        "rate": rate(row.rate),
        "interval": f"[{rate(row.low)}, {rate(row.high)}] at {100 * level:g}%, "
                    "Clopper-Pearson exact",
        "reads": f"worse when it {'rises' if row.worse_when == 'rise' else 'falls'}",
    }


def render_run_html(found: Description, *, x: str | None = None,
                    y: str | None = None) -> str:
    """One run's page: per event a grid of each condition's rate and its exact interval,
    details on focus or hover, the full table; it opens on the worst cell (the highest
    failure rate, see :func:`worst_rate_first`)."""
    rows, labels = found.require_rows(), found.labels
    x, y = choose_axes(labels, x, y)
    order = worst_rate_first(rows)
    data = {"schema_version": REPORT_SCHEMA_VERSION, "fields": _RATE_FIELDS,
            "worst": order[0] if order else None,
            "rows": [_rate_data(i, r, labels, found.level) for i, r in enumerate(rows)]}
    worse = {r.event: "rises" if r.worse_when == "rise" else "falls" for r in rows}
    sections = _sections(_events([(r.condition, r.event) for r in rows]), worse, labels, x, y,
                         lambda i, focusable, start: _rate_cell(i, rows[i], focusable, start),
                         order, empty="no rate")
    level = f"{100 * found.level:g}%"
    table = _every_row(
        ("condition", "case", "event", "episodes", "rate", f"{level} interval"), labels,
        ((r.condition, r.event, f"<td class=\"n\">{r.x} of {r.n}</td>"
                                f"<td class=\"n\">{rate(r.rate)}</td>"
                                f"<td class=\"n\">[{rate(r.low)}, {rate(r.high)}]</td>")
         for r in rows))
    notes = _notes(run_set_aside(found, _e))
    if found.targets is not None:  # the target rows, coloured by their word
        from .targets import target_html

        sections += target_html(found.targets, labels, _target_grids(x, y))
    opens = ""
    if order:
        worst = rows[order[0]]
        opens = _opens_on(worst.condition, worst.event,
                          f"{'highest' if worst.worse_when == 'rise' else 'lowest'} rate, "
                          f"{rate(worst.rate)}")
    run = labels.after
    tinted = "" if found.targets is None else " but a target's (by its word, under Targets)"
    header = f"""<h1>run {_e(run)}</h1>
<p class="verdict">{len(found.run.episodes)} episodes; each condition's rate of each event with
its {level} exact interval (Clopper-Pearson). One run on its own: nothing is compared, so no
cell is coloured{tinted}; compare it with a baseline for a verdict.</p>
<p class="muted">{_axes_note(x, y)}. Use the arrow keys in a grid, or hover a cell, to read its
details.</p>{opens}"""
    return _page(title=f"pytest-prove: run {run}", header=header, sections=sections,
                 table=table, notes=notes, method=found.method, data=data)
