"""What the HTML report draws beside its grids, computed by the functions the commands use.

:func:`figures_of` gathers, for a :class:`~pytest_prove.review.Review`:

- per failure the runs' episodes ended with, when either run recorded steps: where those
  episodes stopped, by step, in each run (:func:`~.steps.where`, the figures
  ``pytest-prove where RUN --event E`` prints), the same per condition (``where`` on the
  run's episodes of that condition alone), and the log-rank test of the two runs
  (:func:`~.steps.compare_steps`, what ``pytest-prove compare A B --event E`` prints with its
  default ``--q 0.05 --max-hr 2``; here from the endings the curves were drawn from, by
  :func:`~.steps.where_of` and :func:`~.steps.compare_endings`, which both commands call);
- what each run cost, when either recorded token usage (:func:`~.cost.cost_of` and
  :func:`~.cost.compare_costs` with :func:`~.cost.prices_for`, what ``pytest-prove cost A B``
  prints).

Nothing here computes a figure of its own: every number comes from those functions, so the
pictures and the commands cannot disagree. A figure that cannot be made (a run without
steps, a price list that does not parse) is left out with a note saying why.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, final

from ..errors import ProveError
from ..record import steps_of
from ..store import Run
from . import Review
from .cost import CostComparison, compare_costs, cost_of, prices_for, tokens_of
from .labels import keys_and_labels
from .pairing import NO_OUTCOME
from .steps import (
    Ending,
    StepComparison,
    Where,
    compare_endings,
    endings,
    event_of,
    where,
    where_of,
)

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


def _by_condition(run: Run) -> dict[tuple[str, str], Run]:
    """``run`` split by (rollout, condition key): one run per condition, with only its
    episodes (one pass over the run, however many conditions are drawn)."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for record in run.episodes:
        groups.setdefault((str(record["rollout"]), str(record["condition_key"])),
                          []).append(record)
    return {key: dataclasses.replace(run, episodes=tuple(records))
            for key, records in groups.items()}


def _where_or_none(run: Run, event: str,
                   found: tuple[list[Ending], Counter[str]] | None = None) -> Where | None:
    """``where(run, event)``, from the run's endings when the caller has them; None where it
    refuses."""
    try:
        if found is None:
            return where(run, event)
        chosen, _ = event_of(event, run)
        return where_of(run, chosen, *found)
    except ProveError:
        return None


def _step_figure(review: Review, event: str, order: Sequence[str],
                 split: tuple[dict[tuple[str, str], Run], dict[tuple[str, str], Run]],
                 keys: Mapping[str, tuple[str, str]]) -> StepFigure:
    before, after = review.before, review.after
    notes: list[str] = []
    test: StepComparison | None = None
    # Each run's endings once, for its curve and for the test (what where and compare_steps
    # each find by themselves).
    ended = (endings(before, event), endings(after, event))
    pooled = (_where_or_none(before, event, ended[0]), _where_or_none(after, event, ended[1]))
    missing = [label for label, found in zip((review.labels.before, review.labels.after),
                                             pooled, strict=True) if found is None]
    if missing:
        # compare_steps would say the runs share no condition: say what is missing instead.
        notes.append(f"no log-rank test: no episode of {' or '.join(map(repr, missing))} "
                     "stopped at a recorded step")
    else:
        try:
            chosen, _ = event_of(event, before, after)
            test = compare_endings(before, after, chosen, *ended, q=STEPS_Q,
                                   max_hr=STEPS_MAX_HR)
        except ProveError as exc:
            notes.append(str(exc))
    drawn = [c for c in order if c in keys][:CONDITIONS_DRAWN]

    def alone(parts: dict[tuple[str, str], Run], run: Run, condition: str) -> Where | None:
        part = parts.get(keys[condition], dataclasses.replace(run, episodes=()))
        return _where_or_none(part, event)

    conditions = tuple(ConditionSteps(c, alone(split[0], before, c), alone(split[1], after, c))
                       for c in drawn)
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
        split = (_by_condition(review.before), _by_condition(review.after))
        keys = {label: key for key, (label, _)
                in keys_and_labels(review.before, review.after).items()}
        for event in _failures(review):
            mine = [rows[i].condition for i in ranked if rows[i].event == event]
            steps.append(_step_figure(review, event, mine, split, keys))
    cost: CostComparison | None = None
    if any(tokens_of(r) for run in (review.before, review.after) for r in run.episodes):
        try:
            cost = compare_costs(*(cost_of(run, prices_for(run, prices_from))
                                   for run in (review.before, review.after)))
        except ProveError as exc:
            notes.append(f"cost not shown: {exc}")
    return Figures(tuple(steps), cost, tuple(notes))
