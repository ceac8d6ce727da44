"""The comparison (or one run on its own) as a JSON document.

Reads a :class:`~pytest_prove.review.Review` or a
:class:`~pytest_prove.review.describe.Description`; computes nothing statistical. The document
carries ``schema_version`` so that a reader can refuse a newer shape, and ``kind``
(``comparison`` or ``run``).
"""

from __future__ import annotations

import json
from typing import Any

from pytest_prove.review import Review
from pytest_prove.review.describe import Description

from ._format import REPORT_SCHEMA_VERSION
from .terminal import margin_line, verdict_line

__all__ = ["REPORT_SCHEMA_VERSION", "comparison_document", "render_json", "render_run_json",
           "run_document"]


def comparison_document(review: Review) -> dict[str, Any]:
    """The comparison and what was set aside, as plain JSON-able data."""
    if review.metrics_only:
        return _metrics_only(review)
    comparison, labels, prepared = review.require_comparison(), review.labels, review.prepared
    document: dict[str, Any] = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "kind": "comparison",
        "before": labels.before,
        "after": labels.after,
        "paired": prepared.paired,
        "verdict": comparison.verdict.word,
        "verdict_line": verdict_line(comparison),
        "comparison": comparison.to_dict(),
        **({} if comparison.margin is None else {
            "margin": comparison.margin.word, "margin_line": margin_line(comparison)}),
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
        **({} if not (prepared.chaos or prepared.faults) else {"chaos": {
            # Runs whose faults differ, compared as asked; the faults each run injected.
            "differs": [{"rollout": rid, "before": mine, "after": theirs}
                        for rid, mine, theirs in prepared.chaos],
            "faults": {arm: {label: c.to_json() for label, c in counts.items()}
                       for arm, counts in prepared.faults.items()}}}),
    }
    from .twins import twin_json

    document.update(twin_json(review.twins))  # paired rows: how often twins ended alike
    # Whether the comparison vouches for every condition: an incomplete run, conditions
    # that never ran (the gate's reasons beside the verdict), and how each run ended.
    return _tail(review, document)


def _metrics_only(review: Review) -> dict[str, Any]:
    """The document of rollouts that declare metrics and no outcomes: no outcome rows
    (``comparison`` null), the metric rows' word as the verdict."""
    from .metrics import METRICS_ONLY, metric_verdict_line, metric_word

    metrics, labels, prepared = review.metrics, review.labels, review.prepared
    assert metrics is not None
    document: dict[str, Any] = {
        "schema_version": REPORT_SCHEMA_VERSION, "kind": "comparison",
        "before": labels.before, "after": labels.after, "paired": prepared.paired,
        "verdict": metric_word(metrics), "verdict_line": metric_verdict_line(metrics),
        "comparison": None, "outcome_rows": METRICS_ONLY,
        "conditions": {label: {"axes": dict(labels.axes.get(label, {})),
                               "case_id": labels.cases.get(label)}
                       for label in dict.fromkeys(r.condition for r in metrics.rows)},
        "not_run": list(prepared.not_run), "new": list(prepared.new),
        "left_out": dict(prepared.left_out), "missing": prepared.missing,
        "no_outcome": dict(prepared.no_outcome), "unpaired": dict(prepared.unpaired),
    }
    return _tail(review, document)


def _tail(review: Review, document: dict[str, Any]) -> dict[str, Any]:
    """The runs, what the gate could not vouch for, the notes, the metric rows and a
    sequential run's stops, added to ``document``."""
    labels = review.labels
    document["runs"] = {arm: {"name": label, "status": "baseline" if run.is_baseline
                              else run.status}
                        for arm, label, run in (("before", labels.before, review.before),
                                                ("after", labels.after, review.after))}
    document["incomplete"] = list(review.gate.reasons)
    if review.metrics is not None or review.targets is not None:
        # The gate as a whole, beside the outcome rows' "verdict": which parts fail it, and
        # the line the summary starts with (the gate's, when metric or target rows fail it
        # and the outcome rows' verdict alone would read as a pass). A document without
        # metric or target rows, whose "verdict" is the whole answer, stays as it was.
        from .headline import failed_parts, gate_headline

        document["gate"] = {"failed": review.gate.failed, "failed_on": failed_parts(review),
                            "headline": gate_headline(review, str) or document["verdict_line"]}
    document["notes"] = list(review.notes)
    if review.environment is not None:  # what differs between the runs' environments
        from .environment import environment_notes

        document["environment"] = {**review.environment.to_json(), "said": [
            f"{head}: {text}" for head, text in environment_notes(review, str)]}
    if review.metrics is not None:  # the metric rows (a rollout declares metrics)
        from .metrics import metric_margin_line, metric_verdict_line

        said = metric_margin_line(review.metrics)
        document["metrics"] = {**review.metrics.to_dict(),
                               "verdict_line": metric_verdict_line(review.metrics),
                               **({} if said is None else {"margin_line": said})}
    if review.targets is not None:  # the target rows (a rollout declares targets)
        from .targets import FAMILY_NOTE, target_json

        document["targets"] = {**target_json(review.targets), "family": FAMILY_NOTE}
    if review.sequential:  # --prove-sequential: how each condition stopped
        document["sequential"] = [{"condition": label or None, "decision": reason}
                                  for label, reason in review.sequential]
    return document


def render_json(review: Review) -> str:
    return json.dumps(comparison_document(review), indent=2,
                      ensure_ascii=False, allow_nan=False) + "\n"


def run_document(found: Description) -> dict[str, Any]:
    """One run's rates and intervals, and what was left out, as plain JSON-able data."""
    rows, labels = found.require_rows(), found.labels
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "kind": "run",
        "run": labels.after,
        "run_id": found.run.run_id,
        "status": found.run.status,
        "episodes": len(found.run.episodes),
        "level": found.level,
        "method": found.method,
        "rows": [{**r.to_dict(), "case_id": labels.cases.get(r.condition)} for r in rows],
        "conditions": {
            label: {"axes": dict(labels.axes.get(label, {})),
                    "case_id": labels.cases.get(label)}
            for label in dict.fromkeys(r.condition for r in rows)
        },
        "left_out": dict(found.left_out),
        "missing": found.missing,
        "no_outcome": dict(found.no_outcome),
    }


def render_run_json(found: Description) -> str:
    document = run_document(found)
    if found.targets is not None:  # the target rows and pass^k (a rollout declares targets)
        from .targets import pass_k_json, target_json

        document["targets"] = target_json(found.targets)
        document["pass_k"] = pass_k_json(found.pass_k)
    return json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
