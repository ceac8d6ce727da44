"""The comparison as a JSON document.

Reads a :class:`~pytest_prove.review.Review`; computes nothing statistical. The document
carries ``schema_version`` so that a reader can refuse a newer shape.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_prove.review import Review

from ._format import REPORT_SCHEMA_VERSION
from .terminal import verdict_line

__all__ = ["REPORT_SCHEMA_VERSION", "comparison_document", "render_json"]


def comparison_document(review: Review) -> dict[str, Any]:
    """The comparison and what was set aside, as plain JSON-able data."""
    comparison, labels, prepared = review.require_comparison(), review.labels, review.prepared
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "kind": "comparison",
        "before": labels.before,
        "after": labels.after,
        "paired": prepared.paired,
        "verdict": comparison.verdict.word,
        "verdict_line": verdict_line(comparison),
        "comparison": comparison.to_dict(),
        "conditions": {
            label: {"axes": dict(labels.axes.get(label, {})),
                    "case_id": labels.cases.get(label)}
            for label in dict.fromkeys(r.condition for r in comparison.rows)
        },
        "not_run": list(prepared.not_run),
        "new": list(prepared.new),
        "left_out": dict(prepared.left_out),
        "missing": prepared.missing,
        "no_outcome": dict(prepared.no_outcome),
        "unpaired": dict(prepared.unpaired),
        "mirrored": dict(prepared.mirrored),
    }


def render_json(review: Review) -> str:
    return json.dumps(comparison_document(review), indent=2,
                      ensure_ascii=False, allow_nan=False) + "\n"
