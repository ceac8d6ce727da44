"""What ``diff``, ``check`` and ``report`` print: the comparison's table and verdict, what
it set aside, the gate's reasons to fail, and a run left partial on purpose.

Every name that came from a rollout or the store goes through
:func:`~pytest_prove.report._format.terminal_text` in the lines; the documents keep them
whole.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from pytest_prove.declare.spec import NO_OUTCOME_EVENT, quoted_label
from pytest_prove.review import Review
from pytest_prove.review.aa import AAReview
from pytest_prove.review.describe import Description

from ._format import plain_text, terminal_text
from .json import comparison_document
from .notes import set_aside, unfinished
from .terminal import format_comparison
from .twins import aa_lines

__all__ = ["aa_answer", "check_document", "check_lines", "comparison_lines", "diff_lines",
           "partial_text", "report_lines", "run_note_lines", "run_report_lines", "verdict_word"]


def verdict_word(review: Review) -> str:
    """The comparison's verdict word; of metric rows alone (rollouts that declare metrics
    only), theirs."""
    if review.metrics_only:
        from .metrics import metric_word

        assert review.metrics is not None
        return metric_word(review.metrics)
    return review.require_comparison().verdict.word


def run_note_lines(review: Review) -> list[str]:
    """What the comparison left aside (not run, new, left out) and how either run is
    unfinished: worded here once, for every front door."""
    lines = [f"{head}: {text}" for head, text in set_aside(review, terminal_text)]
    lines.extend(f"note: {plain_text(note)}" for note in review.notes)
    return lines


def comparison_lines(review: Review, verbose: bool) -> list[str]:
    """The comparison's table and verdict, then the run notes."""
    if review.metrics_only:
        from .metrics import METRICS_ONLY

        lines = [f"{terminal_text(review.labels.before)} -> "
                 f"{terminal_text(review.labels.after)}: {METRICS_ONLY}"]
    else:
        from .twins import twin_lines

        lines = format_comparison(review.require_comparison(), before=review.labels.before,
                                  after=review.labels.after, verbose=verbose,
                                  beside=twin_lines(review.twins, verbose=verbose))
    if review.metrics is not None:
        from .metrics import metric_lines

        lines += metric_lines(review.metrics, verbose=verbose)
    if review.targets is not None:
        from .targets import target_lines

        lines += target_lines(review.targets, verbose=verbose, compared=True)
    return lines + run_note_lines(review)


def diff_lines(review: Review, verbose: bool) -> list[str]:
    lines = comparison_lines(review, verbose)
    comparison = review.comparison
    if comparison is not None and comparison.verdict.word == "worse":
        after = shlex.quote(review.labels.after)
        events = [r.event for r in comparison.verdict.worse if r.event != NO_OUTCOME_EVENT]
        if events:
            lines.append(plain_text(f"next: pytest-prove where {after} --event "
                                    f"{shlex.quote(events[0])}"))
        else:  # only missing outcomes rose: the episodes say why they ended
            lines.append(plain_text(f"next: pytest-prove show {after} (its errored and "
                                    "timed-out episodes, with their messages)"))
    return lines


def partial_text(review: Review) -> str | None:
    """How much of the baseline a run left out on purpose (-k, -m, --lf, a skip), or None
    when it ran every condition the baseline holds (or left some out by mistake, which
    fails the gate with its own reason)."""
    coverage = review.coverage
    left = [label for labels in coverage.on_purpose.values() for label in labels]
    if not left or coverage.by_mistake:
        return None
    why = "; ".join(f"{reason}: {', '.join(map(quoted_label, labels[:6]))}"
                    f"{' ...' if len(labels) > 6 else ''}"
                    for reason, labels in coverage.on_purpose.items())
    return (f"{len(left)} of the {coverage.total} condition(s) of {review.labels.before!r} "
            f"were not run ({why})")


def _partial_reason(review: Review, partial_ok: bool) -> str | None:
    """The check's reason to fail on a partial run it was not told about."""
    text = partial_text(review)
    if text is None or partial_ok:
        return None
    return (f"run {review.labels.after!r} is partial: {text}, so the verdict would cover only "
            "what ran; run every condition, or pass --partial if it is partial on purpose")


def check_document(review: Review, *, partial_ok: bool = False) -> dict[str, Any]:
    gate = review.gate
    reasons = list(gate.reasons)
    partial = _partial_reason(review, partial_ok)
    if partial is not None:
        reasons.append(partial)
    return {**comparison_document(review),
            "fail_on": sorted(gate.fail_on), "failed": gate.failed or bool(reasons),
            "reasons": reasons, "partial": partial_text(review) is not None,
            "notes": list(gate.notes)}


def check_lines(review: Review, verbose: bool, *, partial_ok: bool = False) -> list[str]:
    gate = review.gate
    lines = comparison_lines(review, verbose)
    reasons = list(gate.reasons)
    partial = _partial_reason(review, partial_ok)
    if partial is not None:
        reasons.append(partial)
    if reasons:
        # The check fails whatever the verdict says (an incomplete merge, conditions not
        # collected or not run): that comes first, so a first line reading "no significant
        # change" is never taken for a pass; the reasons are repeated last, where CI logs
        # are read.
        failed = [f"check failed: {plain_text(r)}" for r in reasons]
        return failed + lines + [f"note: {plain_text(n)}" for n in gate.notes] + failed
    from .headline import gate_headline

    said = gate_headline(review)
    if said is not None:
        # The metric or target rows fail the check and the outcome rows' verdict, which
        # comes next, would read as a pass: the check's word comes first.
        lines.insert(0, f"check failed: {plain_text(said.removeprefix('gate failed: '))}")
    comparison = review.comparison
    word = verdict_word(review)
    margin = ("" if comparison is None or comparison.margin is None
              else f", the margin's {comparison.margin.word!r}")
    left = partial_text(review)
    if left is not None:
        lines.append(f"partial on purpose (--partial): {plain_text(left)}; they are left out "
                     "of the verdict")
    lines.extend(f"note: {plain_text(n)}" for n in gate.notes)
    metrics = ("" if not gate.metrics else ", the metrics' "
               + "; ".join(f"{r.word!r} of {terminal_text(r.metric)} in "
                           f"{terminal_text(r.condition)}" for r in gate.metrics[:3])
               + (" ..." if len(gate.metrics) > 3 else ""))
    if gate.targets:
        metrics += ", the targets' " + "; ".join(
            f"{r.word!r} of {terminal_text(r.target.claim)} in {terminal_text(r.label)}"
            for r in gate.targets[:3]) + (" ..." if len(gate.targets) > 3 else "")
    lines.append(f"check {'failed' if gate.verdict_failed else 'passed'}: the verdict is "
                 f"{word!r}{margin}{metrics}; --fail-on {','.join(sorted(gate.fail_on))}")
    return lines


def run_report_lines(found: Description, path: Path) -> list[str]:
    return [f"report of run {terminal_text(found.labels.after)} written to {path}: "
            f"{len(found.rows)} rates with {100 * found.level:g}% exact intervals, nothing "
            "compared", f"next: open {path}"]


def report_lines(review: Review, path: Path) -> list[str]:
    from .headline import gate_headline

    word = verdict_word(review)
    said = gate_headline(review)
    # the gate's line first when the metric or target rows fail it beside a word that reads
    # as a pass
    return [*([] if said is None else [plain_text(said)]),
            f"{word}: report of {terminal_text(review.labels.before)} -> "
            f"{terminal_text(review.labels.after)} written to {path}",
            *(f"{head}: {plain_text(text)}" for head, text in unfinished(review)),
            f"next: open {path}"]


def aa_answer(found: AAReview) -> tuple[dict[str, Any], list[str]]:
    """``pytest-prove aa``'s JSON document and lines: an A/A check's false alarms, its
    twins' agreement, and what the comparison left aside."""
    done = found.review
    lines = aa_lines(done.twins, done.require_comparison(), before=done.labels.before,
                     after=done.labels.after)
    document = {**comparison_document(done), "aa": {"worse": found.worse, "safer": found.safer}}
    return document, [*lines, *run_note_lines(done)]
