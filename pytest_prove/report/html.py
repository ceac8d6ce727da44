"""The comparison as one self-contained HTML page: a heat-map per event, and the full table.

Reads a :class:`~pytest_prove.review.Review`; computes nothing statistical. The page loads
nothing (inline CSS and JS, a Content-Security-Policy that forbids every request). Every text
that came from a rollout is escaped with :func:`html.escape`; the data the script reads is
JSON inside a ``<script type="application/json">`` with ``<``, ``>`` and ``&`` written as
``\\u003c``, ``\\u003e`` and ``\\u0026``, and the script writes it with ``textContent`` only.

Colour marks flagged rows only (red where the flag leans worse, green where it leans safer;
solid when the verdict counts the row): an unflagged cell is not a finding, so it stays grey.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

from pytest_prove.review import Review
from pytest_prove.review.labels import Labels
from pytest_prove.stats import Row

from ._format import REPORT_SCHEMA_VERSION, q_text, rate, signed
from .notes import set_aside
from .terminal import verdict_line

__all__ = ["AxisError", "choose_axes", "render_html"]


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
    }


def _ordered(values: Sequence[Any]) -> list[Any]:
    unique = list(dict.fromkeys(values))
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in unique):
        return sorted(unique)
    return unique


def _cell(index: int, row: Row, first: bool) -> str:
    tone = _tone(row)
    label = (f"{row.condition}, {row.event}: before {rate(row.before)}, after "
             f"{rate(row.after)}, change {signed(row.change)}, q {q_text(row.q_value)}")
    return (
        f'<td role="gridcell" class="cell {tone}" tabindex="{0 if first else -1}" '
        f'data-i="{index}" aria-label="{_e(label)}">'
        f'<span class="ba">{rate(row.before)} → {rate(row.after)}</span>'
        f'<span class="ch">{signed(row.change)}</span>'
        f'<span class="qq">q {q_text(row.q_value)}</span>'
        f'<span class="lim">rise {_e(row.rise)} · fall {_e(row.fall)}</span></td>'
    )


def _grids(event: str, rows: Sequence[tuple[int, Row]], labels: Labels,
           x: str | None, y: str | None) -> list[str]:
    def value(row: Row, axis: str | None) -> Any:
        if axis is None:
            return ""
        return labels.axes.get(row.condition, {}).get(axis, "—")

    others = [a for a in labels.axis_names() if a not in (x, y)]
    slices: dict[str, list[tuple[int, Row]]] = {}
    for item in rows:
        axes = labels.axes.get(item[1].condition, {})
        key = ", ".join(f"{a}={axes.get(a, '—')}" for a in others)
        slices.setdefault(key, []).append(item)
    out: list[str] = []
    for key, members in slices.items():
        xs = _ordered([value(r, x) for _, r in members])
        ys = _ordered([value(r, y) for _, r in members])
        at = {(str(value(r, y)), str(value(r, x))): (i, r) for i, r in members}
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
                                 "not compared</td>")
                else:
                    cells.append(_cell(found[0], found[1], first))
                    first = False
            body.append("<tr>" + "".join(cells) + "</tr>")
        body.append("</tbody></table>")
        out.append("\n".join(body))
    return out


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
td.cell .lim,td.cell .qq{color:#555;font-size:.78rem}
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
  var fields = [['condition','condition'],['case','case'],['event','event'],['before','before'],
    ['after','after'],['change','change'],['interval','interval'],['p','p'],['q','q'],
    ['rise','rise limit'],['fall','fall limit'],['status','verdict'],['design','design']];
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
    if (cells.length) { pick(cells[0]); }
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
})();
"""


def render_html(review: Review, *, x: str | None = None, y: str | None = None) -> str:
    """The page: verdict first, a grid per event, details on focus or hover, the full table."""
    comparison, labels, prepared = review.require_comparison(), review.labels, review.prepared
    x, y = choose_axes(labels, x, y)
    verdict = comparison.verdict
    indexed = list(enumerate(comparison.rows))
    data = {"schema_version": REPORT_SCHEMA_VERSION,
            "rows": [_row_data(i, r, labels) for i, r in indexed]}
    by_event: dict[str, list[tuple[int, Row]]] = {}
    for i, r in indexed:
        by_event.setdefault(r.event, []).append((i, r))
    sections = []
    for event, rows in by_event.items():
        worse = "rises" if rows[0][1].worse_when == "rise" else "falls"
        sections.append(
            f'<section class="event" aria-label="event {_e(event)}">'
            f"<h2>{_e(event)} <span class=\"muted\">(worse when it {worse})</span></h2>"
            f'<div class="grids">{"".join(_grids(event, rows, labels, x, y))}</div>'
            f'<aside class="details" aria-live="polite" aria-label="details of the chosen '
            f'cell"></aside></section>'
        )
    table = ['<table class="full"><thead><tr>' + "".join(
        f"<th>{h}</th>" for h in ("condition", "case", "event", "before", "after", "change",
                                  "interval", "p", "q", "verdict", "rise", "fall"))
             + "</tr></thead><tbody>"]
    for _, r in indexed:
        case = labels.cases.get(r.condition)
        table.append(
            f"<tr><td>{_e(r.condition)}</td><td>{_e(case) if case is not None else ''}</td>"
            f"<td>{_e(r.event)}</td><td class=\"n\">{rate(r.before)}</td>"
            f"<td class=\"n\">{rate(r.after)}</td><td class=\"n\">{signed(r.change)}</td>"
            f"<td class=\"n\">[{signed(r.interval.low)}, {signed(r.interval.high)}]</td>"
            f"<td class=\"n\">{q_text(r.p)}</td><td class=\"n\">{q_text(r.q_value)}</td>"
            f"<td>{_e(_status(r))}</td><td class=\"n\">{_e(r.rise)}</td>"
            f"<td class=\"n\">{_e(r.fall)}</td></tr>")
    table.append("</tbody></table>")
    notes = []
    for head, text in set_aside(review, _e):
        notes.append(f"<p><b>{_e(head.capitalize())}</b>: {text}</p>")
    axes_note = (f"grid: {_e(x or 'one condition')} across"
                 + (f", {_e(y)} down" if y else "")
                 + " (choose with --x and --y)")
    title = f"pytest-prove: {verdict.word}: {labels.before} → {labels.after}"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title><style>{_CSS}</style></head>
<body>
<header><h1 class="word-{_e(verdict.word.split()[0])}">{_e(verdict.word)}</h1>
<p class="verdict">{_e(verdict_line(comparison))}</p>
<p class="muted">{_e(labels.before)} → {_e(labels.after)}, {comparison.m} tests,
{'paired on shared seeds' if prepared.paired else 'unpaired'}; {axes_note}. Use the arrow keys
in a grid, or hover a cell, to read its details.</p>
<p class="legend muted"><span style="background:#e8928a">worse, counted</span><span
style="background:#fbe3e1">flagged, leaning worse</span><span style="background:#dff3e5">flagged,
leaning safer</span><span style="background:#f2f2f4">not flagged</span></p></header>
<main>{''.join(sections)}
<h2>Every row</h2>{''.join(table)}
{''.join(notes)}
<p class="muted">{_e(comparison.method)}</p>
</main>
<script type="application/json" id="prove-data">{_script_json(data)}</script>
<script>{_JS}</script>
</body></html>
"""
