"""The comparison as GitHub-flavoured markdown (a report file, or the CI step summary).

Reads a :class:`~pytest_prove.review.Review`; computes nothing statistical. Every piece of
text that came from a rollout or the store (condition labels, case ids, events, run names) goes
through :func:`escape`, so that GitHub, which renders markdown and HTML, shows it as typed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from pytest_prove.review import Review
from pytest_prove.review.describe import Description
from pytest_prove.stats import Row

from ._format import q_text, rate, signed, status_text, terminal_text
from .notes import run_set_aside, set_aside, unfinished
from .terminal import bound_text, margin_line, margin_next, verdict_line

__all__ = ["append_step_summary", "escape", "render_markdown", "render_run_markdown"]


#: Every character GitHub's markdown could read as syntax, as a character reference (which
#: CommonMark always reads as text): links, images and autolinks (``http:``, ``www.``), HTML,
#: code, emphasis, strikethrough, headings, math, mentions, emoji; the pipe stays a
#: backslash escape, the one form a GFM table cell takes.
_MARKDOWN = str.maketrans({
    **{c: f"&#{ord(c)};" for c in "\\`*_~[]()!#$:@"},
    "&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|",
})
_WWW = re.compile(r"(?i)(?<=www)\.")
#: The limit for a line of ours that quotes rollout text already shortened for the terminal.
_OURS = 4000


def escape(text: object, limit: int = 200) -> str:
    """``text`` as it reads, inside a table cell or a line of GitHub markdown: on one line,
    at most ``limit`` characters before escaping (a step summary holds at most 1 MiB)."""
    return _WWW.sub("&#46;", terminal_text(text, limit).translate(_MARKDOWN))


def _status(row: Row) -> str:
    return status_text(row, counted="**{direction}**", leaning="flagged ({leaning})",
                       blind="blind to {blind}", either="+")


def _headline(review: Review, word: str) -> list[str]:
    """The heading, the verdict's word; when the metric or target rows fail the gate and
    that word alone reads as a pass, which part fails, and the gate's line under it."""
    from .headline import failed_parts, gate_headline

    said = gate_headline(review, lambda text: escape(text, _OURS))
    if said is None:
        return [f"### pytest-prove: {word}", ""]
    parts = " and ".join(p for p in failed_parts(review) if p != "outcomes")
    return [f"### pytest-prove: gate failed on {parts}", "", f"**{said}**", ""]


def render_markdown(review: Review, *, verbose: bool = False) -> str:
    """The summary: the verdict first, the rows that matter (all with ``verbose``), the
    method, and what to do next."""
    if review.metrics_only:
        return _metrics_only(review, verbose)
    comparison, labels, prepared = review.require_comparison(), review.labels, review.prepared
    verdict = comparison.verdict
    lines = [
        *_headline(review, escape(verdict.word)),
        escape(verdict_line(comparison), _OURS),
        "",
        *([] if comparison.margin is None else [
            f"**{escape(comparison.margin.word)}**: "
            + escape(str(margin_line(comparison)).partition(": ")[2], _OURS), ""]),
        *(f"**{escape(head.capitalize(), _OURS)}**: {escape(text, _OURS)}\n"
          for head, text in unfinished(review)),
        f"<code>{escape(labels.before)}</code> → <code>{escape(labels.after)}</code>, "
        f"{comparison.m} tests "
        f"({'paired on shared seeds' if prepared.paired else 'unpaired'})",
        "",
    ]
    shown = list(comparison.rows) if verbose else [
        r for r in comparison.rows
        if r.moved or r.blind or (r.margin is not None and not r.within)]
    with_margin = comparison.margin is not None
    if shown:
        lines += [
            "| condition | case | event | before | after | change | interval | q | verdict "
            "| rise | fall |" + (" margin p | bound | margin |" if with_margin else ""),
            "|---|---|---|--:|--:|--:|---|--:|---|--:|--:|"
            + ("--:|--:|---|" if with_margin else ""),
        ]
        for r in shown:
            case = labels.cases.get(r.condition)
            extra = ""
            if r.margin is not None:
                word = "beyond" if r.beyond else "within" if r.within else "not within"
                extra = (f" {escape(q_text(r.margin.p))} | {bound_text(r.margin.bound)} | "
                         f"{word} |")
            lines.append(
                f"| {escape(r.condition)} | {escape(case) if case is not None else ''} | "
                f"{escape(r.event)} | {rate(r.before)} | {rate(r.after)} | "
                f"{signed(r.change)} | [{signed(r.interval.low)}, "
                f"{signed(r.interval.high)}] | {escape(q_text(r.q_value))} | {_status(r)} | "
                f"{r.rise} | {r.fall} |{extra}"
            )
        lines.append("")
    hidden = comparison.m - len(shown)
    if hidden:
        lines += [f"{hidden} rows unchanged and able to see {rate(comparison.max_mde)} are not "
                  "shown.", ""]
    if review.metrics is not None:
        from .metrics import metric_markdown

        lines += metric_markdown(review.metrics, lambda text: escape(text, _OURS), verbose)
    if review.targets is not None:
        from .targets import target_markdown

        lines += [*target_markdown(review.targets, compared=True), ""]
    from .twins import twin_markdown

    lines += twin_markdown(review.twins, lambda text: escape(text, _OURS))
    for head, text in set_aside(review, escape):
        lines += [f"{escape(head.capitalize(), _OURS)}: {text}", ""]
    lines += [f"<sub>{escape(comparison.method, _OURS)}</sub>", ""]
    if comparison.margin is not None:
        lines += [f"<sub>{escape(comparison.margin.method, _OURS)}</sub>", ""]
        advice = margin_next(comparison)
        if advice is not None:
            lines += [escape(advice[0].upper() + advice[1:], _OURS), ""]
    if verdict.word == "worse":
        lines.append("Next: read where the failing episodes stop: "
                     f"<code>pytest-prove where {escape(labels.after)} --event EVENT</code>.")
    elif verdict.word == "too small to tell" and verdict.replicates_needed is not None:
        lines.append(f"Next: run {verdict.replicates_needed} replicates per condition in both "
                     "runs, or accept a larger change (max_mde).")
    else:
        lines.append("Next: nothing to do; keep this run as the baseline when you accept it.")
    return "\n".join(lines) + "\n"


def _metrics_only(review: Review, verbose: bool) -> str:
    """The summary of rollouts that declare metrics and no outcomes: the metric rows are
    the comparison."""
    from .metrics import METRICS_ONLY, metric_markdown, metric_word

    metrics, labels = review.metrics, review.labels
    assert metrics is not None
    word = metric_word(metrics)
    lines = [*_headline(review, escape(word)),
             *(f"**{escape(head.capitalize(), _OURS)}**: {escape(text, _OURS)}\n"
               for head, text in unfinished(review)),
             f"<code>{escape(labels.before)}</code> → <code>{escape(labels.after)}</code>, "
             f"{metrics.m} metric rows "
             f"({'paired on shared seeds' if review.prepared.paired else 'unpaired'}); "
             f"{escape(METRICS_ONLY, _OURS)}", "",
             *metric_markdown(metrics, lambda text: escape(text, _OURS), verbose)]
    for head, text in set_aside(review, escape):
        lines += [f"{escape(head.capitalize(), _OURS)}: {text}", ""]
    lines.append("Next: find what moved the metric the worse way in the conditions named; "
                 "if the change is wanted, keep this run as the baseline." if word == "worse"
                 else "Next: nothing to do; keep this run as the baseline when you accept it.")
    return "\n".join(lines) + "\n"


def render_run_markdown(found: Description) -> str:
    """One run on its own: each condition's rate of each event with its exact interval."""
    rows, labels = found.require_rows(), found.labels
    level = f"{100 * found.level:g}%"
    lines = [
        f"### pytest-prove: run <code>{escape(labels.after)}</code>",
        "",
        f"{len(found.run.episodes)} episodes ({escape(found.run.status)}); each condition's "
        f"rate of each event with its {level} exact interval. Nothing is compared.",
        "",
        f"| condition | case | event | episodes | rate | {level} interval |",
        "|---|---|---|--:|--:|---|",
    ]
    for r in rows:
        case = labels.cases.get(r.condition)
        lines.append(f"| {escape(r.condition)} | {escape(case) if case is not None else ''} | "
                     f"{escape(r.event)} | {r.x} of {r.n} | {rate(r.rate)} | "
                     f"[{rate(r.low)}, {rate(r.high)}] |")
    if found.targets is not None:
        from .targets import pass_k_markdown, target_markdown

        lines += [*target_markdown(found.targets), *pass_k_markdown(found.pass_k)]
    lines.append("")
    for head, text in run_set_aside(found, escape):
        lines += [f"{escape(head.capitalize(), _OURS)}: {text}", ""]
    lines += [f"<sub>{escape(found.method, _OURS)}</sub>", "",
              "Next: keep a run as a baseline (<code>--prove-save-baseline NAME</code>) and "
              "compare later runs with it (<code>--prove-baseline NAME</code>)."]
    return "\n".join(lines) + "\n"


def append_step_summary(text: str) -> Path | None:
    """Append ``text`` to the file GITHUB_STEP_SUMMARY names, if it names one."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    path = Path(target)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text if text.endswith("\n") else text + "\n")
    return path
