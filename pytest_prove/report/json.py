"""The comparison as a JSON document, the context every report shares, and ``write_report``.

Reads a :class:`~pytest_prove.stats.Comparison`; computes nothing statistical. The document
carries ``schema_version`` so that a reader can refuse a newer shape.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pytest_prove.stats import Comparison

from .terminal import verdict_line

__all__ = [
    "REPORT_SCHEMA_VERSION",
    "ReportContext",
    "comparison_document",
    "render_json",
    "write_report",
]

#: The shape of every JSON document the reports and the command line write.
REPORT_SCHEMA_VERSION: Final = 1

SUFFIXES: Final = (".html", ".md", ".json")


@dataclass(frozen=True, slots=True)
class ReportContext:
    """What a report says besides the comparison: which runs, and each condition's axes.

    ``axes`` maps a row's condition label to its axis values (the heat-map's coordinates);
    ``cases`` maps it to the case_id its episodes recorded. Both come from the rollout and
    are escaped by every renderer.
    """

    before: str
    after: str
    paired: bool = False
    not_run: tuple[str, ...] = ()
    new: tuple[str, ...] = ()
    left_out: Mapping[str, int] = field(default_factory=dict)
    axes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    cases: Mapping[str, str] = field(default_factory=dict)

    def axis_names(self) -> list[str]:
        """Every axis any condition has, in the order first met."""
        names: dict[str, None] = {}
        for values in self.axes.values():
            names.update(dict.fromkeys(values))
        return list(names)


def comparison_document(comparison: Comparison, context: ReportContext) -> dict[str, Any]:
    """The comparison and its context as plain JSON-able data."""
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "kind": "comparison",
        "before": context.before,
        "after": context.after,
        "paired": context.paired,
        "verdict": comparison.verdict.word,
        "verdict_line": verdict_line(comparison),
        "comparison": comparison.to_dict(),
        "conditions": {
            label: {"axes": dict(context.axes.get(label, {})),
                    "case_id": context.cases.get(label)}
            for label in dict.fromkeys(r.condition for r in comparison.rows)
        },
        "not_run": list(context.not_run),
        "new": list(context.new),
        "left_out": dict(context.left_out),
    }


def render_json(comparison: Comparison, context: ReportContext) -> str:
    return json.dumps(comparison_document(comparison, context), indent=2,
                      ensure_ascii=False, allow_nan=False) + "\n"


def write_report(path: Path, comparison: Comparison, context: ReportContext, *,
                 x: str | None = None, y: str | None = None) -> Path:
    """Write the report whose kind the suffix names (.html, .md or .json)."""
    suffix = path.suffix.lower()
    if suffix == ".json":
        text = render_json(comparison, context)
    elif suffix == ".md":
        from .markdown import render_markdown

        text = render_markdown(comparison, context, verbose=True)
    elif suffix in (".html", ".htm"):
        from .html import render_html

        text = render_html(comparison, context, x=x, y=y)
    else:
        raise ValueError(
            f"report {str(path)!r}: unknown kind {suffix or '(no suffix)'!r}; name the file "
            f"with one of {', '.join(SUFFIXES)}"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
