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
from pytest_prove.review.figures import Figures
from pytest_prove.review.labels import Labels
from pytest_prove.stats import Row

from ._format import REPORT_SCHEMA_VERSION, q_text, rate, signed
from .figures import cost_figure, forest_order, forest_plot, step_figures
from .notes import run_set_aside, set_aside, unfinished
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

_CSS = """
:root{color-scheme:light dark;--fg:#1d1d1f;--bg:#fff;--muted:#555;--line:#e3e3e6;
 --cell:#f2f2f4;--worse:#fbe3e1;--worse-c:#e8928a;--safer:#dff3e5;--safer-c:#8fd0a4;
 --flag:#fff3cd;--focus:#2452c9;--sel:#dbe5ff;--word-worse:#b3261e;--word-safer:#1b6e3a;
 --pt:#3a3a3c;--pt-worse:#c62828;--pt-safer:#1b7a3e;--pt-flag:#a66a00;--tick:#7a7a80;
 --axis:#ececf0;--zero:#6e6e73;--margin:#7b3fb3;--before:#7a7a80;--after:#1f5fd1;
 --band-before:rgba(122,122,128,.16);--band-after:rgba(31,95,209,.16);
 --m0:#1f5fd1;--m1:#e07b00;--m2:#2e8b57;--m3:#a23bb0;--m4:#c0392b;--m5:#5f6b7a;
 font-family:system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);
 background:var(--bg)}
@media (prefers-color-scheme: dark){:root{--fg:#e8e8ed;--bg:#161618;--muted:#a1a1a8;
 --line:#2f2f33;--cell:#26262a;--worse:#4a2422;--worse-c:#8e3b33;--safer:#1f3a28;
 --safer-c:#2f7047;--flag:#453a17;--focus:#7aa2ff;--sel:#23345c;--word-worse:#ff8a80;
 --word-safer:#7fd69b;--pt:#d6d6dc;--pt-worse:#ff7b72;--pt-safer:#6fdc8c;--pt-flag:#f2c14e;
 --tick:#9a9aa2;--axis:#2c2c31;--zero:#a1a1a8;--margin:#c79bf2;--before:#a1a1a8;
 --after:#7aa2ff;--band-before:rgba(161,161,168,.18);--band-after:rgba(122,162,255,.2);
 --m0:#7aa2ff;--m1:#f5a54a;--m2:#5fcf8f;--m3:#d68be0;--m4:#ff7b72;--m5:#a7b1be}}
body{max-width:72rem;margin:1.5rem auto;padding:0 1rem;line-height:1.4;background:var(--bg)}
h1{font-size:1.3rem;margin:.2rem 0}.verdict{font-size:1.05rem;margin:.4rem 0 1rem}
h3{font-size:1rem;margin:.6rem 0 .3rem}
.word-worse{color:var(--word-worse)}.word-safer{color:var(--word-safer)}
section.event{margin:1.5rem 0;display:grid;grid-template-columns:minmax(0,1fr) 20rem;gap:1rem}
section.event h2{grid-column:1/-1;font-size:1.1rem;margin:0}
table.grid{border-collapse:separate;border-spacing:3px;margin-bottom:.8rem}
table.grid caption{text-align:left;font-weight:600;padding:.2rem 0}
table.grid th{font-weight:600;font-size:.85rem;padding:.2rem .4rem;text-align:left}
td.cell{background:var(--cell);border:2px solid transparent;border-radius:6px;
 padding:.35rem .5rem;min-width:8.5rem;font-variant-numeric:tabular-nums;font-size:.85rem;
 cursor:default;vertical-align:top}
td.cell span{display:block}td.cell .ch{font-weight:600}
td.cell .lim,td.cell .qq,td.cell .mg{color:var(--muted);font-size:.78rem}
td.cell.empty{color:var(--muted);font-style:italic}
td.cell.worse{background:var(--worse)}td.cell.safer{background:var(--safer)}
td.cell.flag{background:var(--flag)}
td.cell.worse.counted{background:var(--worse-c)}td.cell.safer.counted{background:var(--safer-c)}
td.cell.sel{border-color:var(--focus)}
td.cell:focus,td.cell:hover{border-color:var(--focus);outline:2px solid var(--focus);
 outline-offset:1px}
.details{border:1px solid var(--line);border-radius:8px;padding:.7rem .9rem;font-size:.88rem;
 align-self:start;position:sticky;top:1rem}
.details dl{display:grid;grid-template-columns:auto 1fr;gap:.15rem .7rem;margin:0}
.details dt{color:var(--muted)}.details dd{margin:0;overflow-wrap:anywhere}
table.full{border-collapse:collapse;font-size:.82rem;width:100%}
table.full th,table.full td{border-bottom:1px solid var(--line);padding:.25rem .4rem;
 text-align:left}
table.full td.n{text-align:right;font-variant-numeric:tabular-nums}
.legend span{display:inline-block;padding:.05rem .45rem;border-radius:4px;margin-right:.4rem}
.legend .l-worse-c{background:var(--worse-c)}.legend .l-worse{background:var(--worse)}
.legend .l-safer{background:var(--safer)}.legend .l-plain{background:var(--cell)}
.muted{color:var(--muted);font-size:.85rem}
.sr-only{position:absolute;width:1px;height:1px;padding:0;margin:-1px;overflow:hidden;
 clip:rect(0,0,0,0);white-space:nowrap;border:0}
svg{max-width:100%;height:auto;font-size:11px;font-family:inherit;display:block}
svg text{fill:var(--fg)}
.axis line{stroke:var(--axis);stroke-width:1}.axis text{fill:var(--muted);font-size:10px}
.axl{fill:var(--muted);font-size:10px}
.forest{margin:.2rem 0 .8rem}
body.big .forest-box,body.big section.steps,body.big section.cost,body.big div.every{
 content-visibility:auto;contain-intrinsic-size:auto 30rem}
figcaption code{white-space:nowrap}
.forest-box{max-height:34rem;overflow:auto;border:1px solid var(--line);border-radius:8px;
 padding:.3rem}
.forest-box:focus{outline:2px solid var(--focus);outline-offset:2px}
.forest .legend{margin:.2rem 0}.forest .legend span{padding:0;margin-right:.8rem}
line.zero{stroke:var(--zero);stroke-width:1.2}
.margin line{stroke:var(--margin);stroke-width:1.5;stroke-dasharray:5 3}
.margin text{fill:var(--margin);font-size:10px}
g.fr{cursor:pointer}rect.hl{fill:var(--sel)}g.fr:hover .lab{text-decoration:underline}
g.fr .lab{font-size:11px}g.fr.counted .lab{font-weight:700}
g.fr .ci{stroke:var(--pt);stroke-width:2;stroke-linecap:round}
g.fr .tk{stroke:var(--tick);stroke-width:1.5}
g.fr .pt{fill:var(--pt)}
g.fr.worse .ci,g.fr.worse .cm{stroke:var(--pt-worse)}g.fr.worse .pt{fill:var(--pt-worse)}
g.fr.safer .ci,g.fr.safer .cm{stroke:var(--pt-safer)}g.fr.safer .pt{fill:var(--pt-safer)}
g.fr.flag .ci,g.fr.flag .cm{stroke:var(--pt-flag)}g.fr.flag .pt{fill:var(--pt-flag)}
g.fr .cm{fill:none;stroke-width:1.8}
.figures h2{font-size:1.1rem;margin:1.6rem 0 .2rem}
section.steps{margin:0 0 1.4rem}
.steps-row{display:flex;flex-wrap:wrap;gap:1rem;align-items:flex-start}
.steps-row figure.pooled{margin:0;flex:0 1 30rem}
.logrank{flex:1 1 18rem;font-size:.88rem}.logrank p{margin:.2rem 0 .5rem}
.logrank p:first-child{font-weight:600}
figure{margin:0}figcaption{font-size:.8rem;color:var(--muted)}
.smalls{display:flex;flex-wrap:wrap;gap:.6rem;margin-top:.6rem}
.smalls figure{flex:0 0 14.5rem}
path.cv{fill:none;stroke-width:2}path.cv.before{stroke:var(--before);stroke-dasharray:5 3}
path.cv.after{stroke:var(--after)}
circle.end.before{fill:var(--before)}circle.end.after{fill:var(--after)}
path.band.before{fill:var(--band-before)}path.band.after{fill:var(--band-after)}
.key{margin-right:.8rem;white-space:nowrap}
.sw{display:inline-block;width:1.4rem;height:.7rem;margin-right:.3rem;vertical-align:middle;
 border-radius:2px}
svg.sw-line{display:inline-block;vertical-align:middle;margin-right:.3rem}
.sw.seg.m0,rect.m0{background:var(--m0);fill:var(--m0)}
.sw.seg.m1,rect.m1{background:var(--m1);fill:var(--m1)}
.sw.seg.m2,rect.m2{background:var(--m2);fill:var(--m2)}
.sw.seg.m3,rect.m3{background:var(--m3);fill:var(--m3)}
.sw.seg.m4,rect.m4{background:var(--m4);fill:var(--m4)}
.sw.seg.m5,rect.m5{background:var(--m5);fill:var(--m5)}
.val{font-size:10px;fill:var(--muted)}
.ratio{font-weight:700}
section.cost p{margin:.2rem 0}section.cost figure{margin:.6rem 0}
section.cost figcaption{margin-left:11rem}
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
    var box = section.querySelector('.forest-box');
    var marks = box ? Array.prototype.slice.call(box.querySelectorAll('g.fr[data-i]')) : [];
    var cellOf = {}, markOf = {}, current = null;
    cells.forEach(function(c){ cellOf[c.getAttribute('data-i')] = c; });
    marks.forEach(function(g){ markOf[g.getAttribute('data-i')] = g; });
    // One selection per event, shown in the grid (a ring, and the cell Tab reaches) and in
    // the forest plot (a band), and read out in the details panel.
    function select(i, from){
      i = String(i);
      if (current !== null && current !== i) {
        if (cellOf[current]) { cellOf[current].classList.remove('sel');
          cellOf[current].setAttribute('aria-selected', 'false'); }
        if (markOf[current]) { markOf[current].classList.remove('sel'); }
      }
      current = i;
      var cell = cellOf[i], mark = markOf[i];
      if (cell) {
        cell.classList.add('sel'); cell.setAttribute('aria-selected', 'true');
        // The chosen cell is the one Tab reaches in its grid.
        cell.closest('table.grid').querySelectorAll('td.cell[tabindex="0"]').forEach(
          function(c){ if (c !== cell) { c.setAttribute('tabindex', '-1'); } });
        cell.setAttribute('tabindex', '0');
      }
      if (mark) {
        mark.classList.add('sel');
        var band = box.querySelector('rect.hl'), dot = mark.querySelector('circle.pt');
        band.setAttribute('y', String(Number(dot.getAttribute('cy')) - 9));
        if (from !== 'init') {
          var r = mark.getBoundingClientRect(), b = box.getBoundingClientRect();
          if (r.top < b.top) { box.scrollTop -= b.top - r.top + 6; }
          else if (r.bottom > b.bottom) { box.scrollTop += r.bottom - b.bottom + 6; }
        }
      }
      if (box) { box.setAttribute('data-selected', i); }
      show(panel, data.rows[Number(i)]);
    }
    cells.forEach(function(cell){
      cell.addEventListener('focus', function(){ select(cell.getAttribute('data-i'), 'grid'); });
      cell.addEventListener('mouseenter', function(){
        show(panel, data.rows[Number(cell.getAttribute('data-i'))]); });
    });
    marks.forEach(function(g){
      g.addEventListener('click', function(){ select(g.getAttribute('data-i'), 'forest');
        box.focus({preventScroll: true}); });
      g.addEventListener('mouseenter', function(){
        show(panel, data.rows[Number(g.getAttribute('data-i'))]); });
    });
    if (box) {
      box.addEventListener('keydown', function(ev){
        var at = current !== null && markOf[current] ? marks.indexOf(markOf[current]) : -1;
        var page = Math.max(1, Math.floor(box.clientHeight / 20));
        var moves = {ArrowDown: 1, ArrowUp: -1, PageDown: page, PageUp: -page};
        var next;
        if (ev.key in moves) { next = at < 0 ? 0 : at + moves[ev.key]; }
        else if (ev.key === 'Home') { next = 0; }
        else if (ev.key === 'End') { next = marks.length - 1; }
        else { return; }
        ev.preventDefault();
        next = Math.min(Math.max(next, 0), marks.length - 1);
        if (marks[next]) { select(marks[next].getAttribute('data-i'), 'forest'); }
      });
    }
    var start = section.querySelector('td.cell[data-start]') || cells[0];
    if (start) { select(start.getAttribute('data-i'), 'init'); }
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


#: From this many rows on, the page lays out its large blocks (forest plots, figures, the
#: table of every row) only near the screen (CSS content-visibility): a page of 4,000 rows
#: then opens in about half the time. A smaller page is laid out whole, so that a full-page
#: screenshot or a search of its text needs no scrolling.
BIG_PAGE = 400


def _page(*, title: str, header: str, sections: str, table: str, notes: Sequence[str],
          method: str, data: dict[str, Any], figures: str = "") -> str:
    big = ' class="big"' if len(data["rows"]) >= BIG_PAGE else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<meta name="color-scheme" content="light dark">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title><style>{_CSS}</style></head>
<body{big}>
<header>{header}</header>
<main>{sections}{figures}
<h2>Every row</h2><div class="every">{table}</div>
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


def _forest(rows: Sequence[Row], order: Sequence[int], level: float,
            margin: float | None) -> Callable[[int, str, list[int]], str]:
    def draw(place: int, event: str, members: list[int]) -> str:
        drawn = forest_order(rows, members, order)
        plot = forest_plot(event, rows, drawn, level=level, margin=margin, uid=f"f{place}")
        hint = (f"forest plot of {event}, worst first: up and down arrows (Home, End, Page Up, "
                "Page Down) move through the conditions, with the grid and the details")
        return (f'<figure class="forest"><p class="legend muted" aria-hidden="true"><span>● '
                f"change</span><span>━ simultaneous {100 * level:.2f}% interval</span><span>┃ "
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
                         figure=_forest(rows, order, level, margin))
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
    incomplete = "".join(f'\n<p class="verdict"><b>{_e(head.capitalize())}</b>: {_e(text)}</p>'
                         for head, text in unfinished(review))
    header = f"""<h1 class="word-{_e(verdict.word.split()[0])}">{_e(verdict.word)}</h1>
<p class="verdict">{_e(verdict_line(comparison))}</p>{margin_said}{incomplete}
<p class="muted">{_e(labels.before)} → {_e(labels.after)}, {comparison.m} tests,
{'paired on shared seeds' if prepared.paired else 'unpaired'}; {_axes_note(x, y)}. Use the arrow
keys in a grid, or hover a cell, to read its details.</p>{opens}
<p class="legend muted"><span class="l-worse-c">worse, counted</span><span
class="l-worse">flagged, leaning worse</span><span class="l-safer">flagged,
leaning safer</span><span class="l-plain">not flagged</span></p>"""
    return _page(title=f"pytest-prove: {verdict.word}: {labels.before} → {labels.after}",
                 header=header, sections=sections, table="".join(table), notes=notes,
                 method=comparison.method + ("" if comparison.margin is None
                                             else f". {comparison.margin.method}"),
                 data=data, figures=_figures(figures, labels))


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
