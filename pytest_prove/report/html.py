"""A report as one self-contained HTML page: a heat-map per event, and the full table.

Two pages: the comparison of two runs (:func:`render_html`, from a
:class:`~pytest_prove.review.Review`) and one run on its own (:func:`render_run_html`, from a
:class:`~pytest_prove.review.describe.Description`: each condition's rate of each event with
its exact interval). Both compute nothing statistical. Axis values are laid out in the order
the sweep declared them, and the page opens on its worst cell (see :func:`worst_first`).

The page loads nothing (inline CSS and JS, a Content-Security-Policy that forbids every
request). Every text that came from a rollout is escaped with :func:`html.escape`; the data
the script reads is JSON inside a ``<script type="application/json">`` with ``<``, ``>``
and ``&`` written as ``\\u003c``, ``\\u003e`` and ``\\u0026``, and the script writes it
with ``textContent`` only.

Colour marks flagged rows only (red where the flag leans worse, green where it leans safer;
solid when the verdict counts the row): an unflagged cell is not a finding, so it stays grey.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from typing import Any

from pytest_prove.review import Review
from pytest_prove.review.describe import Description, Rate
from pytest_prove.review.labels import Labels
from pytest_prove.stats import Row

from ._format import REPORT_SCHEMA_VERSION, q_text, rate, signed
from .notes import run_set_aside, set_aside
from .terminal import bound_text, margin_line, verdict_line

__all__ = ["AxisError", "choose_axes", "render_html", "render_run_html", "worst_first",
           "worst_rate_first"]


class AxisError(ValueError):
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
    if row.counted:
        return f"{row.direction} (counted by the verdict)"
    if row.flag:
        return f"flagged, leaning {row.leaning}" if row.leaning != "none" else "flagged"
    if row.blind:
        return f"could not see a {' or '.join(row.blind)} of the size asked"
    return "unchanged"


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
    # p-values equal to 12 digits are a tie (a failure and a success that mirror each other
    # differ in the last bits); a tie goes to the larger change, then to a failure.
    counted.sort(key=lambda i: (float(f"{rows[i].p_holm:.12g}"), -abs(rows[i].change),
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
        key = ", ".join(f"{a}={value(item[1], a)}" for a in others)
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


def _sections(events: dict[str, list[tuple[int, str]]], worse: dict[str, str], labels: Labels,
              x: str | None, y: str | None, cell: CellRenderer, order: Sequence[int],
              empty: str = "not compared") -> str:
    """One section per event: its grids and the panel that shows the chosen cell, which
    starts on the event's worst cell (the first of ``order`` among its rows); a grid's cell
    without a row reads ``empty``."""
    rank = {i: n for n, i in enumerate(order)}
    out = []
    for event, members in events.items():
        mine = [i for i, _ in members if i in rank]
        start = min(mine, key=rank.__getitem__) if mine else None
        out.append(
            f'<section class="event" aria-label="event {_e(event)}">'
            f"<h2>{_e(event)} <span class=\"muted\">(worse when it {worse[event]})</span></h2>"
            f'<div class="grids">'
            f'{"".join(_grids(event, members, labels, x, y, cell, start, empty))}'
            f'</div><aside class="details" aria-live="polite" aria-label="details of the '
            f'chosen cell"></aside></section>'
        )
    return "".join(out)


#: Nothing may load: no request leaves the page, whatever a rollout wrote into it.
_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"

_CSS = """
:root{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d1d1f;background:#fff}
body{max-width:72rem;margin:1.5rem auto;padding:0 1rem;line-height:1.4}
h1{font-size:1.3rem;margin:.2rem 0}.verdict{font-size:1.05rem;margin:.4rem 0 1rem}
.word-worse{color:#b3261e}.word-safer{color:#1b6e3a}
section.event{margin:1.5rem 0;display:grid;grid-template-columns:minmax(0,1fr) 20rem;gap:1rem}
section.event h2{grid-column:1/-1;font-size:1.1rem;margin:0}
table.grid{border-collapse:separate;border-spacing:3px;margin-bottom:.8rem}
table.grid caption{text-align:left;font-weight:600;padding:.2rem 0}
table.grid th{font-weight:600;font-size:.85rem;padding:.2rem .4rem;text-align:left}
td.cell{background:#f2f2f4;border:2px solid transparent;border-radius:6px;padding:.35rem .5rem;
 min-width:8.5rem;font-variant-numeric:tabular-nums;font-size:.85rem;cursor:default;
 vertical-align:top}
td.cell span{display:block}td.cell .ch{font-weight:600}
td.cell .lim,td.cell .qq,td.cell .mg{color:#555;font-size:.78rem}
td.cell.empty{color:#888;font-style:italic}
td.cell.worse{background:#fbe3e1}td.cell.safer{background:#dff3e5}td.cell.flag{background:#fff3cd}
td.cell.worse.counted{background:#e8928a}td.cell.safer.counted{background:#8fd0a4}
td.cell:focus,td.cell:hover{border-color:#2452c9;outline:none}
.details{border:1px solid #d0d0d5;border-radius:8px;padding:.7rem .9rem;font-size:.88rem;
 align-self:start;position:sticky;top:1rem}
.details dl{display:grid;grid-template-columns:auto 1fr;gap:.15rem .7rem;margin:0}
.details dt{color:#555}.details dd{margin:0;overflow-wrap:anywhere}
table.full{border-collapse:collapse;font-size:.82rem;width:100%}
table.full th,table.full td{border-bottom:1px solid #e3e3e6;padding:.25rem .4rem;text-align:left}
table.full td.n{text-align:right;font-variant-numeric:tabular-nums}
.legend span{display:inline-block;padding:.05rem .45rem;border-radius:4px;margin-right:.4rem}
.muted{color:#555;font-size:.85rem}
"""

_JS = """
(function(){
  var data = JSON.parse(document.getElementById('prove-data').textContent);
  var fields = data.fields;
  function show(panel, row){
    var dl = document.createElement('dl');
    fields.forEach(function(f){
      var v = row[f[0]]; if (v === null || v === undefined) { return; }
      var dt = document.createElement('dt'); dt.textContent = f[1];
      var dd = document.createElement('dd'); dd.textContent = String(v);
      dd.setAttribute('data-field', f[0]);
      dl.appendChild(dt); dl.appendChild(dd);
    });
    panel.replaceChildren(dl);
  }
  document.querySelectorAll('section.event').forEach(function(section){
    var panel = section.querySelector('.details');
    var cells = Array.prototype.slice.call(section.querySelectorAll('td.cell[data-i]'));
    function pick(cell){ show(panel, data.rows[Number(cell.getAttribute('data-i'))]); }
    cells.forEach(function(cell){
      cell.addEventListener('focus', function(){ pick(cell); });
      cell.addEventListener('mouseenter', function(){ pick(cell); });
    });
    var start = section.querySelector('td.cell[data-start]') || cells[0];
    if (start) { pick(start); }
    section.querySelectorAll('table.grid').forEach(function(grid){
      grid.addEventListener('keydown', function(ev){
        var cell = ev.target.closest('td'); if (!cell) { return; }
        var tr = cell.parentElement, rows = Array.prototype.slice.call(grid.tBodies[0].rows);
        var r = rows.indexOf(tr), c = Array.prototype.indexOf.call(tr.cells, cell);
        var moves = {ArrowRight:[0,1],ArrowLeft:[0,-1],ArrowDown:[1,0],ArrowUp:[-1,0]};
        var m = moves[ev.key];
        if (ev.key === 'Home') { m = [0, 1 - c]; } else if (ev.key === 'End') {
          m = [0, tr.cells.length - 1 - c]; }
        if (!m) { return; }
        ev.preventDefault();
        var nr = Math.min(Math.max(r + m[0], 0), rows.length - 1);
        var nc = Math.min(Math.max(c + m[1], 1), rows[nr].cells.length - 1);
        var next = rows[nr].cells[nc];
        if (next && next !== cell) {
          cell.setAttribute('tabindex', '-1'); next.setAttribute('tabindex', '0'); next.focus();
        }
      });
    });
  });
  // The page opens on its worst cell (see worst_first): focused, so the arrows start there.
  if (data.worst !== null) {
    var worst = document.querySelector('td.cell[data-i="' + data.worst + '"]');
    if (worst) { worst.focus(); }
  }
})();
"""

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


def _page(*, title: str, header: str, sections: str, table: str, notes: Sequence[str],
          method: str, data: dict[str, Any]) -> str:
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title><style>{_CSS}</style></head>
<body>
<header>{header}</header>
<main>{sections}
<h2>Every row</h2>{table}
{''.join(notes)}
<p class="muted">{_e(method)}</p>
</main>
<script type="application/json" id="prove-data">{_script_json(data)}</script>
<script>{_JS}</script>
</body></html>
"""


def _axes_note(x: str | None, y: str | None) -> str:
    return (f"grid: {_e(x or 'one condition')} across" + (f", {_e(y)} down" if y else "")
            + ", values in the order the sweep declared them (choose the axes with --x and "
              "--y)")


def _opens_on(condition: str, event: str, why: str) -> str:
    return (f'<p class="muted" id="opens-on">The page opens on the worst cell: '
            f"{_e(condition)}, {_e(event)} ({why}).</p>")


def _events(conditions: Sequence[tuple[str, str]]) -> dict[str, list[tuple[int, str]]]:
    """Each event's rows, as (index, condition label), in the order the events first come."""
    found: dict[str, list[tuple[int, str]]] = {}
    for i, (condition, event) in enumerate(conditions):
        found.setdefault(event, []).append((i, condition))
    return found


def render_html(review: Review, *, x: str | None = None, y: str | None = None) -> str:
    """The page: verdict first, a grid per event, details on focus or hover, the full table;
    it opens on the worst cell."""
    comparison, labels, prepared = review.require_comparison(), review.labels, review.prepared
    x, y = choose_axes(labels, x, y)
    verdict = comparison.verdict
    rows = comparison.rows
    order = worst_first(rows)
    fields = _FIELDS + (_MARGIN_FIELDS if comparison.margin is not None else [])
    data = {"schema_version": REPORT_SCHEMA_VERSION, "fields": fields,
            "worst": order[0] if order else None,
            "rows": [_row_data(i, r, labels) for i, r in enumerate(rows)]}
    worse = {r.event: "rises" if r.worse_when == "rise" else "falls" for r in rows}
    sections = _sections(_events([(r.condition, r.event) for r in rows]), worse, labels, x, y,
                         lambda i, focusable, start: _cell(i, rows[i], focusable, start), order)
    table = ['<table class="full"><thead><tr>' + "".join(
        f"<th>{h}</th>" for h in ("condition", "case", "event", "before", "after", "change",
                                  "interval", "p", "q", "verdict", "rise", "fall"))
             + ("<th>margin</th><th>margin p</th><th>bound</th>"
                if comparison.margin is not None else "")
             + "</tr></thead><tbody>"]
    for r in rows:
        case = labels.cases.get(r.condition)
        extra = "" if r.margin is None else (
            f"<td>{_e(_margin_word(r))}</td><td class=\"n\">{q_text(r.margin.p)}</td>"
            f"<td class=\"n\">{_e(bound_text(r.margin.bound))}</td>")
        table.append(
            f"<tr><td>{_e(r.condition)}</td><td>{_e(case) if case is not None else ''}</td>"
            f"<td>{_e(r.event)}</td><td class=\"n\">{rate(r.before)}</td>"
            f"<td class=\"n\">{rate(r.after)}</td><td class=\"n\">{signed(r.change)}</td>"
            f"<td class=\"n\">[{signed(r.interval.low)}, {signed(r.interval.high)}]</td>"
            f"<td class=\"n\">{q_text(r.p)}</td><td class=\"n\">{q_text(r.q_value)}</td>"
            f"<td>{_e(_status(r))}</td><td class=\"n\">{_e(r.rise)}</td>"
            f"<td class=\"n\">{_e(r.fall)}</td>{extra}</tr>")
    table.append("</tbody></table>")
    notes = [f"<p><b>{_e(head.capitalize())}</b>: {text}</p>"
             for head, text in set_aside(review, _e)]
    opens = ""
    if order:
        worst = rows[order[0]]
        why = (f"counted worse, Holm p {q_text(worst.p_holm)}" if worst.counted
               else f"leaning worse, change {signed(worst.change)}, q {q_text(worst.q_value)}")
        opens = _opens_on(worst.condition, worst.event, why)
    said = margin_line(comparison)
    margin_said = "" if said is None else f'\n<p class="verdict margin">{_e(said)}</p>'
    header = f"""<h1 class="word-{_e(verdict.word.split()[0])}">{_e(verdict.word)}</h1>
<p class="verdict">{_e(verdict_line(comparison))}</p>{margin_said}
<p class="muted">{_e(labels.before)} → {_e(labels.after)}, {comparison.m} tests,
{'paired on shared seeds' if prepared.paired else 'unpaired'}; {_axes_note(x, y)}. Use the arrow
keys in a grid, or hover a cell, to read its details.</p>{opens}
<p class="legend muted"><span style="background:#e8928a">worse, counted</span><span
style="background:#fbe3e1">flagged, leaning worse</span><span style="background:#dff3e5">flagged,
leaning safer</span><span style="background:#f2f2f4">not flagged</span></p>"""
    return _page(title=f"pytest-prove: {verdict.word}: {labels.before} → {labels.after}",
                 header=header, sections=sections, table="".join(table), notes=notes,
                 method=comparison.method + ("" if comparison.margin is None
                                             else f". {comparison.margin.method}"),
                 data=data)


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
    table = ['<table class="full"><thead><tr>' + "".join(
        f"<th>{h}</th>" for h in ("condition", "case", "event", "episodes", "rate",
                                  f"{level} interval")) + "</tr></thead><tbody>"]
    for r in rows:
        case = labels.cases.get(r.condition)
        table.append(
            f"<tr><td>{_e(r.condition)}</td><td>{_e(case) if case is not None else ''}</td>"
            f"<td>{_e(r.event)}</td><td class=\"n\">{r.x} of {r.n}</td>"
            f"<td class=\"n\">{rate(r.rate)}</td>"
            f"<td class=\"n\">[{rate(r.low)}, {rate(r.high)}]</td></tr>")
    table.append("</tbody></table>")
    notes = [f"<p><b>{_e(head.capitalize())}</b>: {text}</p>"
             for head, text in run_set_aside(found, _e)]
    opens = ""
    if order:
        worst = rows[order[0]]
        opens = _opens_on(worst.condition, worst.event,
                          f"{'highest' if worst.worse_when == 'rise' else 'lowest'} rate, "
                          f"{rate(worst.rate)}")
    run = labels.after
    header = f"""<h1>run {_e(run)}</h1>
<p class="verdict">{len(found.run.episodes)} episodes; each condition's rate of each event with
its {level} exact interval (Clopper-Pearson). One run on its own: nothing is compared, so no
cell is coloured; compare it with a baseline for a verdict.</p>
<p class="muted">{_axes_note(x, y)}. Use the arrow keys in a grid, or hover a cell, to read its
details.</p>{opens}"""
    return _page(title=f"pytest-prove: run {run}", header=header, sections=sections,
                 table="".join(table), notes=notes, method=found.method, data=data)
