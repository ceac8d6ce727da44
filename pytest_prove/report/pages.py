"""The pages of ``pytest-prove serve`` that the HTML report has no page for: the runs and
baselines, a run's ``show`` text and episodes, one episode, a condition's trend, and a
refusal; and the nav every page of the app opens with, put into the report's own pages
(:func:`with_nav`).

Every page is the report's: its CSS (``static/report.css``), its escaping (every text that
came from a rollout or the store through :func:`html.escape`), nothing loaded from
anywhere.  These pages need no script.  Links are to the app's own paths, each part
percent-encoded (:func:`link`).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import quote, urlencode

from pytest_prove.review.tallies import RunLine
from pytest_prove.review.trend import Trend

from ._format import rate
from .html import _static

__all__ = ["EpisodeLink", "error_page", "flips_section", "index_page", "link", "page", "run_extras",
           "text_page", "trend_choices_page", "trend_page", "with_nav"]

#: What the app's own pages add to the report's CSS: the nav, text blocks, the runs table.
_CSS: Final = """
nav.app{display:flex;gap:1rem;align-items:baseline;border-bottom:1px solid var(--line);
 padding:.2rem 0 .5rem;margin-bottom:1rem;font-size:.9rem}
nav.app b{margin-right:.5rem}nav.app a{color:var(--focus)}
pre.text{font-size:.8rem;overflow:auto;border:1px solid var(--line);border-radius:8px;
 padding:.6rem .8rem;white-space:pre-wrap;overflow-wrap:anywhere}
a{color:var(--focus)}
.progress{font-variant-numeric:tabular-nums}
form.pick{display:flex;gap:.6rem;flex-wrap:wrap;align-items:end;margin:1rem 0}
form.pick label{display:flex;flex-direction:column;font-size:.85rem}
form.pick select,form.pick button{font:inherit;font-size:.95rem;padding:.2rem .4rem}
"""

#: (an episode's id as a user reads it, its condition, its replicate, how it ended)
EpisodeLink = tuple[str, str, int, str]


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def link(*parts: str, query: Mapping[str, str] | None = None) -> str:
    """An app path made of ``parts``, each percent-encoded whole (a ``/`` in a part is
    encoded too, so a part stays one segment), with ``query``; escaped for an attribute."""
    path = "/" + "/".join(quote(p, safe="") for p in parts)
    if query:
        path += "?" + urlencode(query)
    return _e(path)


def nav(store: str) -> str:
    return (f'<nav class="app"><b>pytest-prove serve</b><a href="/">runs</a>'
            f'<a href="/trend">trend</a><span class="muted">{_e(store)} · read only</span>'
            "</nav>")


def page(title: str, body: str, store: str, *, refresh: int | None = None) -> str:
    """A page of the app: the report's CSS, the nav, ``body`` (HTML, already escaped)."""
    again = "" if refresh is None else f'\n<meta http-equiv="refresh" content="{refresh}">'
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="color-scheme" content="light dark">
<meta name="viewport" content="width=device-width, initial-scale=1">{again}
<title>{_e(title)}</title><style>
{_static("report.css")}{_CSS}</style></head>
<body>
{nav(store)}
<main>
{body}
</main>
</body></html>
"""


def with_nav(document: str, store: str, extra: str = "", *,
             refresh: int | None = None) -> str:
    """One of the report's own pages (render_html, render_run_html) with the app's nav and
    ``extra`` at the top of its body, its CSS, and a refresh when ``refresh`` is given."""
    head = f"<style>{_CSS}</style>"
    if refresh is not None:
        head += f'<meta http-equiv="refresh" content="{refresh}">'
    document = document.replace("</head>", head + "</head>", 1)
    start = document.index("<body")
    end = document.index(">", start) + 1
    return document[:end] + "\n" + nav(store) + extra + document[end:]


def text_page(title: str, heading: str, lines: Sequence[str], store: str, *,
              before: str = "") -> str:
    """A page of text lines (a command's output), escaped, in a ``<pre>``."""
    return page(title, f"<h1>{_e(heading)}</h1>{before}\n{pre(lines)}", store)


def pre(lines: Sequence[str]) -> str:
    return f'<pre class="text">{_e(chr(10).join(lines))}</pre>'


def error_page(status: int, reason: str, message: str, store: str) -> str:
    """A refusal as a page: what was asked, why not, and where to go."""
    return page(f"pytest-prove serve: {status} {reason}",
                f"<h1>{status} {_e(reason)}</h1>\n{pre([message])}\n"
                '<p class="muted">next: the runs and baselines are listed at '
                '<a href="/">/</a></p>', store)


# --------------------------------------------------------------------------- the runs


def _status_cell(row: RunLine, extras: Mapping[str, Any]) -> str:
    status = _e(row["status"])
    if row.get("damaged"):
        return f'<td>damaged<br><span class="muted">{_e(row["damaged"])}</span></td>'
    progress = extras.get("progress")
    if progress is None:
        return f"<td>{status}</td>"
    done, planned = progress
    of = f" of {planned:,} planned" if planned else ""
    share = f" ({100 * done / planned:.0f}%)" if planned else ""
    if extras.get("live"):
        return f'<td class="progress">being written: {done:,}{of} episodes{share}</td>'
    return (f'<td class="progress">not ended: {done:,}{of} episodes{share}; its session '
            f"stopped (pytest --prove-resume={_e(row['name'])} finishes it)</td>")


def _run_row(row: RunLine, extras: Mapping[str, Any]) -> str:
    name = str(row["name"])
    label = f'<a href="{link("run", name)}">{_e(name)}</a>' if not row.get("damaged") \
        else _e(name)
    paired = row.get("paired_with")
    pairing = "-"
    if paired and not row.get("damaged"):
        pairing = (f'<a href="{link("run", "baseline:" + str(paired))}">baseline:'
                   f'{_e(paired)}</a> · <a href="'
                   f'{link("compare", query={"a": "baseline:" + str(paired), "b": name})}">'
                   "compare</a>")
    return (f"<tr><td>{label}</td>{_status_cell(row, extras)}"
            f'<td class="n">{int(row["episodes"]):,}</td>'
            f"<td>{_e(extras.get('salt') or '-')}</td><td>{pairing}</td>"
            f"<td>{_e(str(row['started'])[:19] or '-')}</td>"
            f'<td class="n">{_e(extras.get("cost") or "-")}</td></tr>')


def _table(rows: Sequence[RunLine], extras: Mapping[str, Mapping[str, Any]]) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("name", "status", "episodes", "salt",
                                             "paired with", "started", "cost"))
    body = "".join(_run_row(r, extras.get(str(r["run_id"])) or {}) for r in rows)
    return f'<table class="full"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _pick(names: Sequence[str]) -> str:
    """Two lists of every run and baseline, and a button: a form sent by GET to /compare
    (no script)."""
    def select(field: str, chosen: int) -> str:
        options = "".join(f'<option{" selected" if i == chosen else ""}>{_e(n)}</option>'
                          for i, n in enumerate(names))
        return f'<label>{"A (before)" if field == "a" else "B (after)"}<select name="{field}">' \
               f"{options}</select></label>"
    if len(names) < 2:
        return ""
    return (f'<form class="pick" method="get" action="/compare">{select("a", 0)}'
            f'{select("b", len(names) - 1)}<button type="submit">compare</button></form>')


def index_page(store: str, runs: Sequence[RunLine], baselines: Sequence[RunLine],
               extras: Mapping[str, Mapping[str, Any]], *, refresh: int | None) -> str:
    """The runs and baselines: name, status (with its progress while being written),
    episodes, salt, pairing, start and cost; a form to compare any two."""
    if not runs and not baselines:
        body = ("<h1>no runs yet</h1><p>Nothing is stored here yet. Run a sweep, e.g. "
                "<code>pytest --prove-save-baseline current</code>, then reload.</p>")
        return page("pytest-prove serve: no runs", body, store, refresh=refresh)
    live = sum(1 for r in runs if (extras.get(str(r["run_id"])) or {}).get("live"))
    said = (f'<p class="verdict">{live} run(s) being written: this page reloads every '
            f"{refresh} s.</p>" if live and refresh else "")
    names = [str(r["name"]) for r in [*baselines, *runs] if not r.get("damaged")]
    body = (f"<h1>{len(runs)} run(s) and {len(baselines)} baseline(s)</h1>{said}"
            f"{_pick(names)}<h2>Runs</h2>{_table(runs, extras)}"
            f"<h2>Baselines</h2>{_table(baselines, extras) if baselines else '<p>none</p>'}"
            '<p class="muted">next: open a run, or compare two (a baseline first); the trend '
            'page follows one condition across runs.</p>')
    return page("pytest-prove serve: runs", body, store, refresh=refresh)


# --------------------------------------------------------------------------- one run


def run_extras(name: str, show: Sequence[str], episodes: Sequence[EpisodeLink], total: int,
               paired: str | None, refused: str | None = None) -> str:
    """What the run's page shows above its report: what ``show`` says, a link to compare it
    with its baseline, why it has no report (``refused``), and ``episodes`` (the first of
    its ``total``), each a link to its page."""
    parts = [f'<section class="show"><h2>pytest-prove show {_e(name)}</h2>{pre(show)}']
    if paired:
        target = link("compare", query={"a": "baseline:" + paired, "b": name})
        parts.append(f'<p><a href="{target}">compare with baseline:{_e(paired)}</a></p>')
    if refused:
        parts.append(f'<p class="verdict">No report of this run: {_e(refused)}</p>')
    rows = "".join(
        f'<tr><td><a href="{link("episode", name, item)}">{_e(item)}</a></td>'
        f"<td>{_e(condition)}</td><td class=\"n\">{replicate}</td><td>{_e(ended)}</td></tr>"
        for item, condition, replicate, ended in episodes)
    more = (f'<p class="muted">the first {len(episodes)} of {total} episodes are listed</p>'
            if total > len(episodes) else "")
    parts.append(f"<details><summary>{total} episodes</summary>"
                 '<table class="full"><thead><tr><th>episode</th><th>condition</th>'
                 "<th>replicate</th><th>ended</th></tr></thead>"
                 f"<tbody>{rows}</tbody></table>{more}</details></section>")
    return "".join(parts)


# --------------------------------------------------------------------------- the trend


def _svg(trend: Trend) -> str:
    """The rates and their intervals, one column a run, on a 0..1 scale."""
    points = trend.points
    width, height, left, top = max(240, 60 + 48 * len(points)), 220, 40, 12
    plot = height - top - 30

    def y(value: float) -> float:
        return top + plot * (1 - value)

    grid = "".join(
        f'<line x1="{left}" x2="{width - 8}" y1="{y(v):.1f}" y2="{y(v):.1f}"></line>'
        f'<text x="{left - 6}" y="{y(v) + 3:.1f}" text-anchor="end">{v:g}</text>'
        for v in (0.0, 0.25, 0.5, 0.75, 1.0))
    marks = []
    for i, p in enumerate(points):
        x = left + 24 + 48 * i
        marks.append(
            f'<g class="fr"><title>{_e(p.run)}: {rate(p.rate)} ({p.x}/{p.n}), interval '
            f"[{rate(p.low)}, {rate(p.high)}]</title>"
            f'<line class="ci" x1="{x}" x2="{x}" y1="{y(p.low):.1f}" y2="{y(p.high):.1f}">'
            f'</line><circle class="pt" cx="{x}" cy="{y(p.rate):.1f}" r="3.5"></circle>'
            f'<text class="axl" x="{x}" y="{height - 12}" text-anchor="middle">{i + 1}</text>'
            "</g>")
    return (f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
            f'role="img" aria-label="rate by run"><g class="axis">{grid}</g>'
            f'{"".join(marks)}</svg>')


def trend_page(trend: Trend, store: str) -> str:
    """One condition's rate of one event in each run that holds it, oldest first: a
    picture and the table of the numbers."""
    what = f"{trend.event} in {trend.condition}" + (
        f" ({trend.rollout})" if trend.rollout else "")
    rows = "".join(
        f'<tr><td class="n">{i + 1}</td><td><a href="{link("run", p.run)}">{_e(p.run)}</a>'
        f"</td><td>{_e(p.started[:19] or '-')}</td><td class=\"n\">{p.x} of {p.n}</td>"
        f'<td class="n">{rate(p.rate)}</td>'
        f'<td class="n">[{rate(p.low)}, {rate(p.high)}]</td></tr>'
        for i, p in enumerate(trend.points))
    level = f"{100 * trend.level:g}%"
    table = (f'<table class="full"><thead><tr><th>#</th><th>run</th><th>started</th>'
             f"<th>episodes</th><th>rate</th><th>{level} interval</th></tr></thead>"
             f"<tbody>{rows}</tbody></table>")
    absent = ("" if not trend.absent else
              f'<p class="muted">not in: {_e(", ".join(trend.absent))}</p>')
    if not trend.points:
        body = (f"<h1>trend: {_e(what)}</h1><p class=\"verdict\">No run holds this "
                "condition with this event.</p>"
                '<p class="muted">next: choose one on <a href="/trend">the trend page</a></p>')
    else:
        body = (f"<h1>trend: {_e(what)}</h1><p class=\"verdict\">{len(trend.points)} run(s), "
                f"oldest first; last {rate(trend.points[-1].rate)} "
                f"({trend.points[-1].x} of {trend.points[-1].n}).</p>"
                f'<figure class="forest">{_svg(trend)}</figure>{table}{absent}'
                f'<p class="muted">{_e(trend.method)}</p>')
    return page(f"pytest-prove serve: trend of {what}", body, store)


def trend_choices_page(choices: Sequence[tuple[str, str, str]], store: str) -> str:
    """Every (rollout, condition, event) the stored runs hold, each a link to its trend."""
    rows = "".join(
        f'<tr><td>{_e(r)}</td><td><a href="'
        f'{link("trend", query={"rollout": r, "condition": c, "event": e})}">{_e(c)}</a>'
        f"</td><td>{_e(e)}</td></tr>" for r, c, e in choices)
    body = ("<h1>trend: choose a condition</h1><p>A condition's rate of one event in each "
            "run, oldest first, with its exact interval.</p>"
            + (f'<table class="full"><thead><tr><th>rollout</th><th>condition</th>'
               f"<th>event</th></tr></thead><tbody>{rows}</tbody></table>" if rows else
               "<p>No run holds an episode yet.</p>"))
    return page("pytest-prove serve: trend", body, store)


# --------------------------------------------------------------------------- flips


def flips_section(before: str, after: str, flipped: Sequence[tuple[str, str, str]], *,
                  shown: int = 200) -> str:
    """The twins whose ending changed, each a link to the episode of ``after`` beside its
    twin in ``before``: (episode id, condition, how each ended)."""
    if not flipped:
        return ""
    rows = "".join(
        f'<tr data-twins-of="{_e(condition)}">'
        f'<td><a href="{link("episode", after, item, query={"twin": before})}">'
        f"{_e(item)}</a></td><td>{_e(condition)}</td><td>{_e(ended)}</td></tr>"
        for item, condition, ended in flipped[:shown])
    more = (f'<p class="muted">the first {shown} of {len(flipped)} are listed; pytest-prove '
            f"flips {_e(before)} {_e(after)} -v lists them all</p>"
            if len(flipped) > shown else "")
    return (f'<details class="flips"><summary>{len(flipped)} twin(s) ended differently in '
            f"{_e(before)} and {_e(after)}: open one beside its twin (Enter on a cell of "
            "the grids goes to its condition's)</summary>"
            '<table class="full"><thead><tr><th>episode</th><th>condition</th>'
            f"<th>ended</th></tr></thead><tbody>{rows}</tbody></table>{more}</details>")
