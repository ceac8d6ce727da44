"""A condition's rate across runs: the trend ``pytest-prove serve`` draws on its ``/trend``
page.

Each run is read on its own, as :mod:`.describe` reads one: an outcome's rate is over the
condition's episodes that ended with an outcome, ``no outcome``'s over all its episodes;
the interval is Clopper-Pearson's, exact, at ``level`` for each run on its own (not
adjusted for the number of runs).  Runs come in the order they started.  Nothing here tests
a change between runs: a trend is for reading, a verdict needs ``pytest-prove check``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, final

from ..declare.spec import NO_OUTCOME_EVENT, condition_label
from ..record import has_outcome
from ..stats import clopper_pearson_interval
from ..store import Run
from .labels import label_of
from .pairing import declarations_of

__all__ = ["METHOD", "Point", "Trend", "trend", "trend_choices"]

#: How the trend names its interval.
METHOD: Final = ("each run's rate with its Clopper-Pearson exact interval, {level} for each "
                 "run on its own (not adjusted for the number of runs); a trend is read, not "
                 "tested: compare two runs for a verdict")


@final
@dataclass(frozen=True, slots=True)
class Point:
    """One run's rate of the event in the condition: x of n episodes, and its interval."""

    run: str  # the run's label, as every command names it
    started: str
    x: int
    n: int
    low: float
    high: float

    @property
    def rate(self) -> float:
        return self.x / self.n if self.n else 0.0


@final
@dataclass(frozen=True, slots=True)
class Trend:
    """The points of one (rollout, condition, event), and the runs that do not hold it."""

    rollout: str | None
    condition: str
    event: str
    points: tuple[Point, ...]
    absent: tuple[str, ...]
    level: float

    @property
    def method(self) -> str:
        return METHOD.format(level=f"{100 * self.level:g}%")


def _rollout_names(run: Run, rollout_id: str) -> set[str]:
    info = (run.manifest.get("rollouts") or {}).get(rollout_id) or {}
    return {rollout_id, str(info.get("label") or rollout_id)}


def _matches(run: Run, record: Mapping[str, Any], rollout: str | None, condition: str,
             labels: dict[int, str]) -> bool:
    if rollout and rollout not in _rollout_names(run, str(record.get("rollout"))):
        return False
    held = record.get("condition") or {}
    label = labels.get(id(held))
    if label is None:
        label = labels[id(held)] = condition_label(dict(held))
    return label == condition


def trend(runs: Iterable[Run], *, rollout: str | None, condition: str, event: str,
          level: float = 0.95) -> Trend:
    """``event``'s rate in ``condition`` (as the comparison labels it, ``ticket=refund``) of
    ``rollout`` (its id or short name; None: any) in each of ``runs``, oldest first."""
    points: list[Point] = []
    absent: list[str] = []
    for run in sorted(runs, key=lambda r: r.started):
        labels: dict[int, str] = {}
        held = [r for r in run.episodes if _matches(run, r, rollout, condition, labels)]
        if event == NO_OUTCOME_EVENT:
            x, n = sum(not has_outcome(r) for r in held), len(held)
        else:
            ended = [r for r in held if has_outcome(r)]
            x, n = sum(r.get("outcome") == event for r in ended), len(ended)
        if not n:
            absent.append(label_of(run))
            continue
        low, high = clopper_pearson_interval(x, n, level)
        points.append(Point(label_of(run), run.started, x, n, low, high))
    return Trend(rollout or None, condition, event, tuple(points), tuple(absent), level)


def trend_choices(runs: Sequence[Run]) -> list[tuple[str, str, str]]:
    """Every (rollout, condition, event) the runs hold, by rollout short name: what the
    trend page offers to follow (the declared failures and successes, and ``no outcome``
    where an episode ended without one)."""
    found: set[tuple[str, str, str]] = set()
    for run in runs:
        declarations = declarations_of(run)
        seen: set[tuple[str, str, bool]] = set()
        for record in run.episodes:
            rid = str(record.get("rollout"))
            seen.add((rid, condition_label(dict(record.get("condition") or {})),
                      has_outcome(record)))
        for rid, label, ended in seen:
            name = str(((run.manifest.get("rollouts") or {}).get(rid) or {}).get("label")
                       or rid)
            declaration = declarations.get(rid)
            events = declaration.events if declaration is not None else ()
            found.update((name, label, e) for e in events)
            if not ended:
                found.add((name, label, NO_OUTCOME_EVENT))
    return sorted(found)
