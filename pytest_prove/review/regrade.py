"""Grading a stored run again: the agent's answers it kept, given to another grader (or the
same one again), without running the agent.

:func:`regrade` returns the episodes of the new run (each on its seed, with the grader's
outcome and metrics, or the reason it could not be graded) and, per condition, what
changed; with ``times`` >= 2 it grades every answer that many times and says how often the
grader agreed with itself and what share of each metric's variance is its own noise.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, final

from ..declare.grading import MAX_ANSWER_BYTES, Grader, grade
from ..declare.metrics import MEASURED
from ..declare.spec import Declaration, condition_label
from ..store import Run
from .labels import label_of
from .pairing import RefusalError

__all__ = ["ConditionGrading", "Regrade", "regrade"]


@final
@dataclass(frozen=True, slots=True)
class ConditionGrading:
    """One condition of a regrade: how many episodes were graded, how their outcomes moved,
    how many could not be graded, and (graded more than once) the grader's agreement with
    itself and each metric's share of variance that is the grader's own noise."""

    condition: str
    graded: int
    moved: tuple[tuple[str, str, int], ...]  # (old outcome, new outcome, episodes)
    errors: int
    agreement: float | None = None
    noise: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"condition": self.condition, "graded": self.graded,
                "moved": [{"from": a, "to": b, "episodes": n} for a, b, n in self.moved],
                "errors": self.errors, "agreement": self.agreement, "noise": self.noise}


@final
@dataclass(frozen=True, slots=True)
class Regrade:
    """The episodes of the regraded run, and what changed per condition."""

    source: str
    grader: str
    times: int
    episodes: tuple[dict[str, Any], ...]
    conditions: tuple[ConditionGrading, ...]
    first_error: str | None  # the first episode's error, said in full

    @property
    def changed(self) -> int:
        return sum(n for c in self.conditions for _, _, n in c.moved)

    @property
    def errors(self) -> int:
        return sum(c.errors for c in self.conditions)

    @property
    def graded(self) -> int:
        return sum(c.graded for c in self.conditions)


def _declarations(run: Run) -> dict[str, Declaration]:
    found = {}
    for rollout, info in (run.manifest.get("rollouts") or {}).items():
        declaration = info.get("declaration") if isinstance(info, Mapping) else None
        if isinstance(declaration, Mapping):
            found[str(rollout)] = Declaration.from_json(declaration)
    return found


def _error(record: Mapping[str, Any], message: str) -> dict[str, Any]:
    """``record`` as an episode that could not be graded: no outcome, the reason, its answer
    kept (a better grader may grade it)."""
    failed = {k: v for k, v in dict(record).items() if k != "metrics"}
    failed["outcome"] = None
    failed["error"] = {"kind": "contract", "type": "GraderError", "message": message}
    return failed


def _no_answer(record: Mapping[str, Any]) -> str:
    size = record.get("answer_bytes")
    if isinstance(size, int):
        return (f"its answer was {size:,} bytes, more than the {MAX_ANSWER_BYTES:,} an "
                "episode keeps, so it was not stored")
    return "it has no stored answer (its rollout did not keep answers: keep_answers=True)"


def _noise(values: Sequence[Sequence[float]]) -> float | None:
    """The share of the variance of every grading that lies within episodes (the grader's
    own noise): mean within-episode variance over the total variance; None when the
    gradings do not vary at all."""
    if not values or len(values[0]) < 2:
        return None
    total = statistics.pvariance([v for row in values for v in row])
    if total == 0.0:
        return None
    within = statistics.fmean(statistics.pvariance(row) for row in values)
    return min(1.0, within / total)


def regrade(run: Run, grader: Grader, name: str, *, times: int = 1) -> Regrade:
    """Grade the answers ``run`` kept with ``grader`` (``times`` times each)."""
    label = label_of(run)
    if run.is_baseline and not any("answer" in r or "answer_bytes" in r
                                   for r in run.episodes):
        raise RefusalError(
            f"{label} is a baseline, which keeps no answers; regrade the run it was saved "
            "from (pytest-prove runs lists it), or run the sweep again with keep_answers=True")
    if not any("answer" in r for r in run.episodes):
        raise RefusalError(
            f"run {label!r} kept no answers, so there is nothing to grade: declare "
            "keep_answers=True (or grader=\"module:function\") on the rollout, return "
            "prove.Episode(outcome, answer=...), and run the sweep again")
    declarations = _declarations(run)
    episodes: list[dict[str, Any]] = []
    moved: dict[str, Counter[tuple[str, str]]] = {}
    graded: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    agree: Counter[str] = Counter()
    metric_values: dict[str, dict[str, list[list[float]]]] = {}
    first_error: str | None = None
    for record in run.episodes:
        condition = condition_label(dict(record.get("condition") or {}))
        declaration = declarations.get(str(record["rollout"]))
        old = record.get("outcome")
        if old is None or declaration is None:
            episodes.append(dict(record))  # it ended without an outcome: nothing to grade
            continue
        if "answer" not in record:
            errors[condition] += 1
            message = _no_answer(record)
            first_error = first_error or message
            episodes.append(_error(record, message))
            continue
        results = [grade(grader, name, record["answer"], record.get("condition") or {},
                         declaration) for _ in range(times)]
        first = results[0]
        if first.error is not None:
            errors[condition] += 1
            first_error = first_error or first.error
            episodes.append(_error(record, first.error))
            continue
        graded[condition] += 1
        if times > 1 and all(r.error is None for r in results):
            agree[condition] += len({r.outcome for r in results}) == 1
            for metric in first.metrics:
                if all(metric in r.metrics for r in results):
                    metric_values.setdefault(condition, {}).setdefault(metric, []).append(
                        [r.metrics[metric] for r in results])
        new = dict(record)
        new["outcome"] = MEASURED if first.outcome is None else first.outcome
        if first.metrics or "metrics" in record:
            new["metrics"] = {**dict(record.get("metrics") or {}), **first.metrics}
        if str(new["outcome"]) != str(old):
            moved.setdefault(condition, Counter())[(str(old), str(new["outcome"]))] += 1
        episodes.append(new)
    order = list(dict.fromkeys(condition_label(dict(r.get("condition") or {}))
                               for r in run.episodes))
    conditions = []
    for condition in order:
        noise = {m: share for m, grid in metric_values.get(condition, {}).items()
                 if (share := _noise(grid)) is not None}
        conditions.append(ConditionGrading(
            condition, graded[condition],
            tuple((a, b, n) for (a, b), n in sorted(moved.get(condition, Counter()).items())),
            errors[condition],
            agree[condition] / graded[condition] if times > 1 and graded[condition] else None,
            noise))
    return Regrade(label, name, times, tuple(episodes), tuple(conditions), first_error)
