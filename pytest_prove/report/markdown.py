"""The comparison as GitHub-flavoured markdown (a report file, or the CI step summary).

Reads a :class:`~pytest_prove.stats.Comparison`; computes nothing statistical. Every piece of
text that came from a rollout (condition labels, case ids) is escaped for markdown tables and
HTML, since GitHub renders both.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

from pytest_prove.stats import Comparison, Row

from ._format import q_text, rate, signed
from .json import ReportContext
from .terminal import verdict_line

__all__ = ["append_step_summary", "escape", "render_markdown"]


def escape(text: str) -> str:
    """Text safe inside a markdown table cell (and as HTML, which GitHub also renders)."""
    return html.escape(str(text), quote=False).replace("|", "\\|").replace("\n", " ")


def _status(row: Row) -> str:
    if row.counted:
        return f"**{row.direction}**"
    if row.flag:
        return f"flagged ({row.leaning})" if row.leaning != "none" else "flagged"
    if row.blind:
        return f"blind to {'+'.join(row.blind)}"
    return "unchanged"


def render_markdown(comparison: Comparison, context: ReportContext, *,
                    verbose: bool = False) -> str:
    """The summary: the verdict first, the rows that matter (all with ``verbose``), the
    method, and what to do next."""
    verdict = comparison.verdict
    lines = [
        f"### pytest-prove: {escape(verdict.word)}",
        "",
        escape(verdict_line(comparison)),
        "",
        f"`{escape(context.before)}` → `{escape(context.after)}`, {comparison.m} tests "
        f"({'paired on shared seeds' if context.paired else 'unpaired'})",
        "",
    ]
    shown = list(comparison.rows) if verbose else [
        r for r in comparison.rows if r.moved or r.blind]
    if shown:
        lines += [
            "| condition | case | event | before | after | change | interval | q | verdict "
            "| rise | fall |",
            "|---|---|---|--:|--:|--:|---|--:|---|--:|--:|",
        ]
        for r in shown:
            case = context.cases.get(r.condition)
            lines.append(
                f"| {escape(r.condition)} | {escape(case) if case is not None else ''} | "
                f"{escape(r.event)} | {rate(r.before)} | {rate(r.after)} | "
                f"{signed(r.change)} | [{signed(r.interval.low)}, "
                f"{signed(r.interval.high)}] | {q_text(r.q_value)} | {_status(r)} | {r.rise} | "
                f"{r.fall} |"
            )
        lines.append("")
    hidden = comparison.m - len(shown)
    if hidden:
        lines += [f"{hidden} rows unchanged and able to see {rate(comparison.max_mde)} are not "
                  "shown.", ""]
    if context.not_run:
        lines += [f"Not run (left out of the verdict): "
                  f"{escape(', '.join(context.not_run))}", ""]
    if context.new:
        lines += [f"New, not in the baseline: {escape(', '.join(context.new))}", ""]
    if context.left_out:
        lines += ["Left out of the comparison: " + ", ".join(
            f"{n} {escape(reason)}" for reason, n in sorted(context.left_out.items())), ""]
    lines += [f"<sub>{escape(comparison.method)}</sub>", ""]
    if verdict.word == "worse":
        lines.append("Next: read where the failing episodes stop: "
                     f"`pytest-prove where {escape(context.after)} --event EVENT`.")
    elif verdict.word == "too small to tell" and verdict.replicates_needed is not None:
        lines.append(f"Next: run {verdict.replicates_needed} replicates per condition in both "
                     "runs, or accept a larger change (max_mde).")
    else:
        lines.append("Next: nothing to do; keep this run as the baseline when you accept it.")
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
