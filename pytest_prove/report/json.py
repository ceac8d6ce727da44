"""The comparison as a JSON document.

Reads a :class:`~pytest_prove.stats.Comparison`; computes nothing statistical. The document
carries ``schema_version`` so that a reader can refuse a newer shape.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_prove.review.context import ReportContext
from pytest_prove.stats import Comparison

from ._format import REPORT_SCHEMA_VERSION
from .terminal import verdict_line

__all__ = ["REPORT_SCHEMA_VERSION", "comparison_document", "render_json"]


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
