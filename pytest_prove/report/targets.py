"""The target rows as text: the terminal's lines, the gate reports', the markdown table, the
JSON document's part and the HTML report's section; and pass^k and pass@k by condition for
``pytest-prove show`` and the one-run report.

Reads a :class:`~pytest_prove.review.targets.TargetReview`; computes nothing statistical.
A row reads: its condition, the target, the rate with its exact bounds, and the word
(*meets target*, *misses target*, *too small to tell*, kept apart from the comparison's
four words). The bound beside the target is the one that decides it: the high end for
``<=``, the low end for ``>=``.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pytest_prove.review.labels import Labels
from pytest_prove.review.targets import (
    MEETS,
    MISSES,
    UNDECIDED,
    PassK,
    TargetReview,
    TargetRow,
)

from ._format import q_text, rate, table, terminal_text

__all__ = ["FAMILY_NOTE", "condition_target_lines", "pass_k_json", "pass_k_lines",
           "pass_k_markdown", "target_html", "target_json", "target_lines", "target_markdown",
           "target_summary", "target_verdict_line"]

#: Said when a run is both compared with a baseline and read against its targets.
FAMILY_NOTE = ("the targets are a Holm family of their own at q, apart from the "
               "comparison's (BH flags, Holm verdict): each asks another question (a rate "
               "against a fixed number, not a change), so each keeps its own error rate")


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else (plural or word + 's')}"


def _needed(row: TargetRow) -> str:
    if row.reason is not None:
        return "cannot be vouched for"
    if row.needed is None:
        return "more than 20,000 replicates a condition would decide it"
    return f"about {row.needed:,} replicates a condition would decide it"


def _said(row: TargetRow, text: Callable[[object], str] = terminal_text) -> str:
    side = "at most" if row.target.side == "<=" else "at least"
    return (f"{text(row.label)} {text(row.target.subject)} {rate(row.estimate)} (bound "
            f"{rate(row.bound)}; target {side} {row.target.rate:g})")


def _listed(rows: Sequence[TargetRow], most: int = 3) -> str:
    shown = [_said(r) for r in rows[:most]]
    more = len(rows) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def target_verdict_line(targets: TargetReview) -> str:
    """The targets' one line: how many rows miss, meet or are too small to tell."""
    rows = targets.rows
    missed = [r for r in rows if r.word == MISSES]
    met = [r for r in rows if r.word == MEETS]
    open_ = [r for r in rows if r.word == UNDECIDED]
    tail = f"{targets.method}"
    if missed:
        head = f"misses target: {_plural(len(missed), 'row')} ({_listed(missed)})"
    elif open_:
        head = (f"too small to tell: {_plural(len(open_), 'row')} not shown to meet "
                f"{'its target' if len(open_) == 1 else 'their targets'} "
                f"({_listed(open_)})")
    else:
        head = f"meets target: every one of {_plural(len(met), 'row')}"
    counts = f"{len(met)} meet, {len(missed)} miss, {len(open_)} too small to tell"
    return f"targets: {head}; {counts}; {tail}"


def _row_cells(row: TargetRow, text: Callable[[object], str]) -> list[str]:
    return [text(row.label), text(row.target.claim), str(row.n),
            f"{rate(row.estimate)} [{rate(row.low)}, {rate(row.high)}]",
            q_text(row.p_meets), q_text(row.p_misses),
            row.word if row.word != UNDECIDED else f"{row.word} ({_needed(row)})"]


_HEADER = ["condition", "target", "n", "rate [bounds]", "p meets", "p misses", "word"]


def target_lines(targets: TargetReview, *, verbose: bool = False,
                 compared: bool = False) -> list[str]:
    """The targets' lines in the terminal: the verdict line, the rows that miss or are too
    small to tell (every row with ``verbose``), the method and what to do."""
    lines = [target_verdict_line(targets)]
    shown = [r for r in targets.rows if verbose or r.word != MEETS or r.reason is not None]
    if shown:
        lines.extend("  " + line for line in table(
            _HEADER, [_row_cells(r, terminal_text) for r in shown], numeric=frozenset({2})))
    for row in targets.rows:
        if row.reason is not None:
            lines.append(f"  {terminal_text(row.label)} {terminal_text(row.target.claim)}: "
                         f"cannot be vouched for: {row.reason}")
    if compared:
        lines.append(f"  {FAMILY_NOTE}")
    if any(r.word == UNDECIDED for r in targets.rows):
        lines.append("  next: run more replicates (--prove-replicates N) to decide the rows "
                     "too small to tell; --prove-fail-on=not-met fails on them")
    return lines


def condition_target_lines(rows: Iterable[TargetRow]) -> list[str]:
    """A failed gate report's lines for one condition's target rows."""
    lines = []
    for row in rows:
        if row.reason is not None:
            lines.append(f"target {row.target.claim}: cannot be vouched for: {row.reason}")
            continue
        lines.append(f"{row.word}: {_said(row)}, exact bounds [{rate(row.low)}, "
                     f"{rate(row.high)}] over {row.n} episodes, Holm p meets "
                     f"{q_text(row.p_meets)}, p misses {q_text(row.p_misses)}")
        if row.word == UNDECIDED:
            lines.append(f"  {_needed(row)}")
    return lines


def _md(value: object) -> str:
    return terminal_text(value, 120).replace("|", "\\|")


def target_markdown(targets: TargetReview, *, compared: bool = False) -> list[str]:
    """The markdown report's section on the targets."""
    lines = ["", "### Targets", "", target_verdict_line(targets).removeprefix("targets: "), "",
             "| " + " | ".join(_HEADER) + " |", "|" + "---|" * len(_HEADER)]
    lines.extend("| " + " | ".join(_row_cells(r, _md)) + " |" for r in targets.rows)
    if compared:
        lines.extend(["", FAMILY_NOTE[0].upper() + FAMILY_NOTE[1:] + "."])
    return lines


def target_json(targets: TargetReview) -> dict[str, Any]:
    """The targets as the JSON report holds them."""
    return {
        "q": targets.q, "method": targets.method,
        "rows": [{"rollout": r.rollout_id, "condition": r.condition, "condition_key": r.key,
                  "target": r.target.claim, "event": r.target.subject,
                  "side": r.target.side, "rate": r.target.rate, "k": r.target.k,
                  "n": r.n, "without_outcome": r.unknown, "estimate": r.estimate,
                  "low": r.low, "high": r.high, "bound": r.bound, "p_meets": r.p_meets,
                  "p_misses": r.p_misses, "word": r.word, "replicates_needed": r.needed,
                  "cannot_vouch": r.reason} for r in targets.rows]}


_CLASS = {MEETS: "meets", MISSES: "misses", UNDECIDED: "undecided"}

#: A word's short form in a grid's cell (a mark and a word: the tone is never the only sign).
_SHORT = {MEETS: "✓ meets", MISSES: "✗ misses", UNDECIDED: "? too small"}

#: The target's tones: blue, orange and grey with stripes (Okabe-Ito's blue and orange, which
#: stay apart under each kind of colour blindness), each with its mark and word in the cell.
TARGET_CSS = (
    ":root{--t-meets:#cfe3f7;--t-misses:#f9d2a8;--t-open:#ececef;--t-open2:#dcdce1;"
    "--t-edge-meets:#0072b2;--t-edge-misses:#c05600;--t-edge-open:#77777f}"
    "@media (prefers-color-scheme: dark){:root{--t-meets:#173a5c;--t-misses:#5c3410;"
    "--t-open:#2a2a2f;--t-open2:#34343a;--t-edge-meets:#56b4e9;--t-edge-misses:#e69f00;"
    "--t-edge-open:#a1a1a8}}"
    "section.targets section.event{grid-template-columns:minmax(0,1fr)}"
    "td.cell.target-meets{background:var(--t-meets);border-left:4px solid var(--t-edge-meets)}"
    "td.cell.target-misses{background:var(--t-misses);"
    "border-left:4px solid var(--t-edge-misses)}"
    "td.cell.target-undecided{background:repeating-linear-gradient(135deg,var(--t-open) 0 6px,"
    "var(--t-open2) 6px 12px);border-left:4px dashed var(--t-edge-open)}"
    "td.cell.target-unvouched{background:var(--t-misses);"
    "border-left:4px dashed var(--t-edge-misses)}"
    "tr.target-meets td{background:var(--t-meets)}tr.target-misses td{background:var(--t-misses)}"
    "tr.target-undecided td{background:var(--t-open)}"
    ".legend .l-t-meets{background:var(--t-meets)}.legend .l-t-misses{background:var(--t-misses)}"
    ".legend .l-t-open{background:var(--t-open)}")

#: Lays out one target's grids, as the page's grids of an event: (the grid's name, its rows'
#: (index, condition label), the names the conditions go by, the cell of a row).
TargetGrids = Callable[[str, Sequence[tuple[int, str]], Labels, Callable[[int, bool, bool], str]],
                       list[str]]


def _relation(row: TargetRow) -> str:
    bound, target = float(f"{row.bound:.12g}"), row.target.rate
    return "<" if bound < target else ">" if bound > target else "="


def _beside(row: TargetRow) -> str:
    """The rate, and the bound beside the target: ``0.380 (bound 0.440) > 0.25``."""
    return (f"{rate(row.estimate)} (bound {rate(row.bound)}) {_relation(row)} "
            f"{row.target.rate:g}")


def _cell_words(row: TargetRow) -> str:
    """What a target's cell says, in words (its title and its label for a screen reader)."""
    side = "at most" if row.target.side == "<=" else "at least"
    end = "high" if row.upper_end else "low"
    place = {"<": "below", ">": "above", "=": "at"}[_relation(row)]
    said = (f"{row.label}, target {row.target.subject} {side} {row.target.rate:g}: "
            f"{row.word}; rate {rate(row.estimate)} over {row.n} episodes, exact bounds "
            f"{rate(row.low)} to {rate(row.high)}, the {end} end {rate(row.bound)} {place} "
            "the target")
    if row.reason is not None:
        return f"{row.label}, target {row.target.claim}: cannot be vouched for: {row.reason}"
    if row.word == UNDECIDED:
        said += f"; {_needed(row)}"
    return said


def _target_cell(row: TargetRow) -> Callable[[bool], str]:
    esc = html.escape
    tone = "unvouched" if row.reason is not None else _CLASS[row.word]
    short = "! cannot vouch" if row.reason is not None else _SHORT[row.word]
    words = esc(_cell_words(row), quote=True)

    def cell(focusable: bool) -> str:
        # No data-i: the page's script reads a cell's details from the rows of its events,
        # and a target's cell says everything in its text and its label.
        return (f'<td role="gridcell" class="cell target-{tone}" '
                f'tabindex="{0 if focusable else -1}" title="{words}" aria-label="{words}">'
                f'<span class="ch">{esc(short)}</span><span class="ba">{esc(_beside(row))}'
                f'</span><span class="lim">n {row.n}</span></td>')
    return cell


def _grid_labels(rows: Sequence[TargetRow], labels: Labels) -> Labels:
    """The names of the target rows' conditions: the page's axes where it knows the row's
    label, else the label as a condition of its own (a grid never puts two rows in one cell)."""
    return Labels(before=labels.before, after=labels.after,
                  axes={r.label: labels.axes.get(r.label) or {"condition": r.label}
                        for r in rows},
                  order=labels.order)


def _target_sections(targets: TargetReview, labels: Labels, grids: TargetGrids) -> str:
    esc = html.escape
    by: dict[str, list[int]] = {}
    for i, r in enumerate(targets.rows):
        by.setdefault(r.target.claim, []).append(i)
    named = _grid_labels(targets.rows, labels)
    cells = [_target_cell(r) for r in targets.rows]

    def cell(i: int, focusable: bool, _start: bool) -> str:
        return cells[i](focusable)

    out = []
    for claim, members in by.items():
        first = targets.rows[members[0]].target
        side, end = ("at most", "high") if first.side == "<=" else ("at least", "low")
        drawn = grids(f"target {claim}", [(i, targets.rows[i].label) for i in members], named,
                      cell)
        out.append(f'<section class="event" aria-label="target {esc(claim)}">'
                   f"<h3>{esc(first.subject)} {side} {first.rate:g} <span class=\"muted\">"
                   f"(a cell: its word; the rate, the {end} end of its exact bounds and the "
                   "target; its episodes)</span></h3>"
                   f'<div class="grids">{"".join(drawn)}</div></section>')
    return "".join(out)


def target_html(targets: TargetReview, labels: Labels | None = None,
                grids: TargetGrids | None = None) -> str:
    """The HTML report's section: per target, a grid of the conditions as the page lays out
    its events' (``grids``, given the page's ``labels``), each cell coloured and marked by the
    row's word with the rate and the bound beside the target; then one row a target."""
    esc = html.escape
    cells = []
    for r in targets.rows:
        cells.append(
            f'<tr class="target-{_CLASS[r.word]}"><td>{esc(r.label)}</td>'
            f"<td>{esc(r.target.claim)}</td><td>{rate(r.estimate)}</td>"
            f"<td>{rate(r.bound)}</td><td>{r.n}</td><td>{esc(r.word)}"
            f"{'' if r.reason is None else ': ' + esc(r.reason)}</td></tr>")
    drawn = ""
    if labels is not None and grids is not None:
        drawn = ('<p class="legend muted"><span class="l-t-meets">✓ meets target</span><span '
                 'class="l-t-misses">✗ misses target</span><span class="l-t-open">? too small '
                 'to tell</span><span class="l-t-misses">! cannot be vouched for</span></p>'
                 + _target_sections(targets, labels, grids))
    return ('<section class="targets"><h2>Targets</h2>'
            f"<p>{esc(target_verdict_line(targets).removeprefix('targets: '))}</p>"
            f"<style>{TARGET_CSS}</style>{drawn}"
            "<table><thead><tr><th>condition</th><th>target</th><th>rate</th>"
            "<th>bound</th><th>n</th><th>word</th></tr></thead><tbody>"
            + "".join(cells) + "</tbody></table></section>")


def pass_k_lines(found: Sequence[PassK]) -> list[str]:
    """pass^k and pass@k by condition (k in 1, 2, 4, 8, capped at its replicates)."""
    rows = [[terminal_text(p.label), str(p.n),
             "  ".join(f"^{k} {hat:.3f}" for k, hat, _ in p.values),
             "  ".join(f"@{k} {at:.3f}" for k, _, at in p.values)] for p in found]
    if not rows:
        return []
    return ["pass^k (all k tries succeed) and pass@k (at least one does), unbiased from "
            "each condition's replicates:",
            *("  " + line for line in table(["condition", "n", "pass^k", "pass@k"], rows,
                                            numeric=frozenset({1})))]


def pass_k_json(found: Sequence[PassK]) -> list[dict[str, Any]]:
    """pass^k and pass@k by condition, as the JSON report holds them."""
    return [{"condition": p.label, "n": p.n, "successes": p.successes,
             "pass_hat_k": {str(k): hat for k, hat, _ in p.values},
             "pass_at_k": {str(k): at for k, _, at in p.values}} for p in found]


def pass_k_markdown(found: Sequence[PassK]) -> list[str]:
    """The one-run markdown report's pass^k table."""
    if not found:
        return []
    return ["", "### pass^k and pass@k", "",
            "pass^k: all k tries succeed; pass@k: at least one does (unbiased estimates).", "",
            "| condition | n | pass^k | pass@k |", "|---|---|---|---|",
            *(f"| {_md(p.label)} | {p.n} | "
              + ", ".join(f"{k}: {hat:.3f}" for k, hat, _ in p.values) + " | "
              + ", ".join(f"{k}: {at:.3f}" for k, _, at in p.values) + " |" for p in found)]


def target_summary(summary: Callable[..., list[str]], targets: TargetReview | None,
                   target_gate: Sequence[Any], *, review: Any, quiet: bool, verbose: bool,
                   **rest: Any) -> list[str]:
    """The session's section with the targets: the lines ``summary`` gives without them,
    and the targets' own (their verdict line under ``-q``) before the run's line; without
    a baseline, why the gate failed first."""
    from dataclasses import replace

    from ._format import plain_text

    compared = review is not None and review.targets is not None
    shown = review.targets if compared else targets
    assert shown is not None
    lines = summary(review=replace(review, targets=None) if compared else review,
                    quiet=quiet, verbose=verbose, **rest)
    own = ([target_verdict_line(shown)] if quiet else
           target_lines(shown, verbose=verbose, compared=compared))
    if not compared:
        own = [*(f"pytest-prove: gate failed: {plain_text(r)}" for r in target_gate[1]),
               *own, *(f"pytest-prove: note: {plain_text(n)}" for n in target_gate[2])]
    at = next((i for i, line in enumerate(lines) if line.startswith("run ")), len(lines))
    if not compared:
        at = next((i for i, line in enumerate(lines)
                   if not line.startswith("pytest-prove: ")), len(lines))
    return [*lines[:at], *own, *lines[at:]]
