"""The baseline's own rates, as the design check reads them before a run against it.

Each row a run will test (a rollout's condition and one of its events) shows, in the
baseline, x episodes with the event of n with an outcome, counted as the comparison counts
them (``pairing.event_flags``). The design check turns each into an exact interval on the
row's base rate (``stats.baseline_intervals``); a row the baseline does not hold is (0, 0),
which reads as any base rate.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..store import Run
from .reading import read_run

__all__ = ["baseline_counts"]

#: One row: rollout id, condition key, event.
Row = tuple[str, str, str]


def baseline_counts(baseline: Run, rows: Sequence[Row]) -> list[tuple[int, int]]:
    """Each row's (episodes with the event, episodes with an outcome) in ``baseline``."""
    index = read_run(baseline)
    found: list[tuple[int, int]] = []
    for rollout, key, event in rows:
        entry = index.conditions.get((rollout, key))
        outcomes = [] if entry is None else [o for o in entry.outcomes.values()
                                             if o is not None]
        found.append((sum(1 for o in outcomes if o == event), len(outcomes)))
    return found
