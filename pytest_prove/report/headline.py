"""The gate's line, said before the outcome rows' verdict when the metric rows or the target
rows fail the gate and that verdict alone reads as a pass.

``no significant change: ...`` heads a comparison whose outcome rows moved nothing; when a
metric got worse (or a target was missed) the gate fails all the same, and a reader of the
first line must not take the run for a pass. :func:`gate_headline` words that first line,
once for every renderer: which part fails, the rows it names, and the outcome rows' own
word after it (their verdict line follows unchanged). A session without metrics or targets,
or whose outcome rows fail the gate themselves, has none, and reads as it always did.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ._format import terminal_text

if TYPE_CHECKING:
    # Only its type: the session's summary imports this module.
    from pytest_prove.review import Review

__all__ = ["failed_parts", "gate_headline"]

_SHOWN = 3


def _names(names: Sequence[str]) -> str:
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return ", ".join(names[:_SHOWN]) + more


def _outcomes_fail(review: Review) -> bool:
    """Whether the outcome rows fail the gate on their own (their verdict line says so)."""
    gate, comparison = review.gate, review.comparison
    if comparison is None:
        return False
    return ((comparison.verdict.word == "worse" and "worse" in gate.fail_on)
            or bool(gate.blind)
            or (comparison.margin is not None and not comparison.margin.holds
                and "not-within" in gate.fail_on))


def failed_parts(review: Review) -> list[str]:
    """The parts whose verdict fails the gate, of ``outcomes``, ``metrics`` and ``targets``
    (the gate's other reasons, such as an unfinished run, aside)."""
    gate = review.gate
    parts = ["outcomes"] if _outcomes_fail(review) else []
    if gate.metrics:
        parts.append("metrics")
    if any(r.reason is None for r in gate.targets):
        parts.append("targets")
    return parts


def _metric_part(review: Review, text: Callable[[object], str]) -> list[str]:
    said = []
    by_word: dict[str, list[str]] = {}
    for row in review.gate.metrics:
        if row.word == "worse":
            word = "worse"
        elif row.word == "too small to tell":
            word = "too small to tell"
        else:
            word = "not shown within margin"
        by_word.setdefault(word, []).append(f"{text(row.metric)} in {text(row.condition)}")
    for word in ("worse", "not shown within margin", "too small to tell"):
        if word in by_word:
            said.append(f"metrics {word} ({_names(by_word[word])})")
    return said


def _target_part(review: Review, text: Callable[[object], str]) -> list[str]:
    said = []
    by_word: dict[str, list[str]] = {}
    for row in review.gate.targets:
        if row.reason is None:
            by_word.setdefault(row.word, []).append(
                f"{text(row.target.claim)} in {text(row.label)}")
    for word, shown in by_word.items():
        head = "target missed" if word.startswith("misses") else f"target {word}"
        said.append(f"{head} ({_names(shown)})")
    return said


def gate_headline(review: Review, text: Callable[[object], str] = terminal_text
                  ) -> str | None:
    """``gate failed: metrics worse (latency_s in ticket=refund); outcome rows: no
    significant change``, or None: the metric and target rows fail nothing, or the summary's
    first line already says the gate fails (the outcome rows fail it, or, of metric rows
    alone, their own line reads *worse*). ``text`` escapes what a rollout wrote."""
    gate = review.gate
    said = [*_metric_part(review, text), *_target_part(review, text)]
    if not said or _outcomes_fail(review):
        return None
    comparison = review.comparison
    if comparison is None:
        metrics = review.metrics
        if (metrics is not None and metrics.worse and "worse" in gate.fail_on
                and not any(r.reason is None for r in gate.targets)):
            return None
        return "gate failed: " + "; ".join(said)
    return "gate failed: " + "; ".join(said) + f"; outcome rows: {comparison.verdict.word}"
