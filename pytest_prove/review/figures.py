"""What the HTML report draws beside its grids, computed by the functions the commands use.

:func:`figures_of` gathers, for a :class:`~pytest_prove.review.Review`:

- per failure the runs' episodes ended with, when either run recorded steps: where those
  episodes stopped, by step, in each run (:func:`~.steps.where`, the figures
  ``pytest-prove where RUN --event E`` prints), the same per condition (``where`` on the
  run's episodes of that condition alone), and the log-rank test of the two runs
  (:func:`~.steps.compare_steps`, what ``pytest-prove compare A B --event E`` prints with its
  default ``--q 0.05 --max-hr 2``);
- what each run cost, when either recorded token usage (:func:`~.cost.cost_of` and
  :func:`~.cost.compare_costs` with :func:`~.cost.prices_for`, what ``pytest-prove cost A B``
  prints).

Nothing here computes a figure of its own: every number comes from those functions, so the
pictures and the commands cannot disagree. A figure that cannot be made (a run without
steps, a price list that does not parse) is left out with a note saying why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import final

from ..errors import ProveError
from ..record import steps_of
from ..store import Run
from . import Review
from .cost import CostComparison, compare_costs, cost_of, prices_for, tokens_of
from .labels import keys_and_labels
from .pairing import NO_OUTCOME
from .steps import StepComparison, Where, compare_steps, where

__all__ = ["ConditionSteps", "Figures", "StepFigure", "figures_of"]

#: ``pytest-prove compare``'s defaults, which the step figure's log-rank uses.
STEPS_Q = 0.05
STEPS_MAX_HR = 2.0
#: Conditions drawn one by one per failure (the worst first, as the forest plot orders
#: them); the rest are counted in a note.
CONDITIONS_DRAWN = 12


@final
@dataclass(frozen=True, slots=True)
class ConditionSteps:
    """Where one condition's failing episodes stopped, in each run (None: it has no
    episode that stopped at a step in that run)."""

    condition: str  # the row label the comparison uses
    before: Where | None
    after: Where | None


@final
@dataclass(frozen=True, slots=True)
class StepFigure:
    """One failure: where its episodes stopped in each run, pooled and per condition, and
    the log-rank test of the two runs (None with the refusal's text when it cannot run)."""

    event: str
    before: Where | None
    after: Where | None
    conditions: tuple[ConditionSteps, ...]
    not_drawn: int  # conditions beyond CONDITIONS_DRAWN
    test: StepComparison | None
    note: str | None  # why the test (or a run's curve) is missing


@final
@dataclass(frozen=True, slots=True)
class Figures:
    """The report's pictures beyond the grid: step curves per failure, and the cost."""

    steps: tuple[StepFigure, ...] = ()
    cost: CostComparison | None = None
    notes: tuple[str, ...] = ()  # figures left out, and why


def _has_steps(*runs: Run) -> bool:
    return any(steps_of(record)[0] for run in runs for record in run.episodes)


def _only(run: Run, key: tuple[str, str]) -> Run:
    """``run`` with only the episodes of one (rollout, condition key)."""
    return dataclasses.replace(run, episodes=tuple(
        r for r in run.episodes if (str(r["rollout"]), str(r["condition_key"])) == key))


def _where_or_none(run: Run, event: str) -> Where | None:
    try:
        return where(run, event)
    except ProveError:
        return None


def _step_figure(review: Review, event: str, order: Sequence[str]) -> StepFigure:
    before, after = review.before, review.after
    notes: list[str] = []
    test: StepComparison | None = None
    pooled = (_where_or_none(before, event), _where_or_none(after, event))
    missing = [label for label, found in zip((review.labels.before, review.labels.after),
                                             pooled, strict=True) if found is None]
    if missing:
        # compare_steps would say the runs share no condition: say what is missing instead.
        notes.append(f"no log-rank test: no episode of {' or '.join(map(repr, missing))} "
                     "stopped at a recorded step")
    else:
        try:
            test = compare_steps(before, after, event, q=STEPS_Q, max_hr=STEPS_MAX_HR)
        except ProveError as exc:
            notes.append(str(exc))
    keys = {label: key for key, (label, _) in keys_and_labels(before, after).items()}
    drawn = [c for c in order if c in keys][:CONDITIONS_DRAWN]
    conditions = tuple(
        ConditionSteps(c, _where_or_none(_only(before, keys[c]), event),
                       _where_or_none(_only(after, keys[c]), event)) for c in drawn)
    return StepFigure(event=event, before=pooled[0], after=pooled[1], conditions=conditions,
                      not_drawn=max(0, len([c for c in order if c in keys]) - len(drawn)),
                      test=test, note="; ".join(notes) or None)


def _failures(review: Review) -> list[str]:
    """The failures the comparison tested, in the order its rows first name them."""
    comparison = review.comparison
    if comparison is None:
        return []
    found: dict[str, None] = {}
    for row in comparison.rows:
        if row.worse_when == "rise" and row.event != NO_OUTCOME:
            found.setdefault(row.event)
    return list(found)


def figures_of(review: Review, prices_from: Path, *,
               order: Sequence[int] | None = None) -> Figures:
    """The step curves (when either run recorded steps) and the cost (when either run
    recorded token usage) of ``review``; prices are looked for from ``prices_from`` up, as
    ``pytest-prove cost`` does from the working folder. ``order`` ranks the comparison's
    rows (the report's worst first); a failure's conditions are drawn in that order."""
    notes: list[str] = []
    steps: list[StepFigure] = []
    comparison = review.comparison
    if comparison is not None and _has_steps(review.before, review.after):
        rows = comparison.rows
        ranked = list(order) if order is not None else []
        ranked += [i for i in range(len(rows)) if i not in set(ranked)]
        for event in _failures(review):
            mine = [rows[i].condition for i in ranked if rows[i].event == event]
            steps.append(_step_figure(review, event, mine))
    cost: CostComparison | None = None
    if any(tokens_of(r) for run in (review.before, review.after) for r in run.episodes):
        try:
            cost = compare_costs(*(cost_of(run, prices_for(run, prices_from))
                                   for run in (review.before, review.after)))
        except ProveError as exc:
            notes.append(f"cost not shown: {exc}")
    return Figures(tuple(steps), cost, tuple(notes))
