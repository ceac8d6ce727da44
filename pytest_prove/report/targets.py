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


def target_html(targets: TargetReview) -> str:
    """The HTML report's section: one row a target, coloured by its word, the bound beside
    the target."""
    esc = html.escape
    cells = []
    for r in targets.rows:
        cells.append(
            f'<tr class="target-{_CLASS[r.word]}"><td>{esc(r.label)}</td>'
            f"<td>{esc(r.target.claim)}</td><td>{rate(r.estimate)}</td>"
            f"<td>{rate(r.bound)}</td><td>{r.n}</td><td>{esc(r.word)}"
            f"{'' if r.reason is None else ': ' + esc(r.reason)}</td></tr>")
    return ("<section><h2>Targets</h2>"
            f"<p>{esc(target_verdict_line(targets).removeprefix('targets: '))}</p>"
            "<style>.target-meets td{background:#e6f4ea}.target-misses td{background:#fce8e6}"
            ".target-undecided td{background:#fef7e0}</style>"
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
