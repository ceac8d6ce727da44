"""A run's episodes read once for a comparison: what pairing, labels and coverage need.

A review of a million episodes against a million read each episode's fields many times over:
once per event of its row, and again for the case check, the labels, the coverage and the
faults, each through the mapping protocol of the store's :class:`~..store.episodes.StoredEpisode`.
:func:`read_run` walks a run's episodes once and keeps, per condition, each replicate's
outcome (None without one) and the few things the later stages ask of the first episode
that has them; those stages then read this index and give what they gave reading the
episodes themselves.  A ``StoredEpisode`` is read by its attributes (an unset field reads as
absent); any other mapping (an errored episode, a run of an older format) by its keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, final

from ..record import left_out_reason_of
from ..store import Run
from ..store.episodes import StoredEpisode

__all__ = ["Condition", "RunIndex", "read_run"]

Key = tuple[str, str]  # (rollout id, condition key)

#: The value of a field a :class:`StoredEpisode`'s line left out (msgspec's ``UNSET``, which the
#: review layer does not import): the default of its outcome.
_UNSET: Final = dict(zip(reversed(StoredEpisode.__struct_fields__),
                         reversed(StoredEpisode.__struct_defaults__), strict=False))["outcome"]


@final
class Condition:
    """One condition's episodes in one run, as a comparison reads them."""

    __slots__ = ("case_at", "case_condition", "cases", "condition", "outcome_condition", "outcomes")

    def __init__(self, condition: Mapping[str, Any]) -> None:
        #: The axis values of its first episode (``record.get("condition") or {}``).
        self.condition = condition
        #: Each replicate's outcome, None for one without (the last episode of a replicate
        #: wins, as it would in a dict of episodes by replicate).
        self.outcomes: dict[int, Any] = {}
        #: The axis values of its first episode with an outcome; None when none has one.
        self.outcome_condition: Mapping[str, Any] | None = None
        #: The case ids its episodes recorded (``str``), in the order first met.
        self.cases: dict[str, None] = {}
        #: The axis values of its first episode with a case id, and where that episode is
        #: among the run's.
        self.case_condition: Mapping[str, Any] | None = None
        self.case_at = -1


@final
@dataclass(frozen=True, slots=True)
class RunIndex:
    """A run's episodes by condition, in the order each condition was first met."""

    conditions: dict[Key, Condition]
    #: Episodes without an outcome, by :func:`~..record.left_out_reason`, in the order met.
    left_out: dict[str, int] = field(default_factory=dict)
    #: The episodes whose ``chaos`` is a mapping, in their order (few, when any).
    chaos: list[Mapping[str, Any]] = field(default_factory=list)


def read_run(run: Run) -> RunIndex:
    """Walk ``run``'s episodes once (see the module's docstring)."""
    conditions: dict[Key, Condition] = {}
    left_out: dict[str, int] = {}
    chaos_found: list[Mapping[str, Any]] = []
    unset, episode_type, mapping = _UNSET, StoredEpisode, Mapping
    last_rollout: Any = None
    last_key: Any = None
    entry: Condition | None = None
    for position, record in enumerate(run.episodes):
        if isinstance(record, episode_type):
            rollout, condition_key = record.rollout, record.condition_key
            replicate = record.replicate
            outcome = record.outcome
            if outcome is unset:
                outcome = None
            error: Any = record.error
            if error is unset:
                error = None
            meta = record.meta
            condition: Any = record.condition
            if type(condition) is not dict:  # a value the mapping reads otherwise
                condition = record.get("condition")
            chaos = getattr(record, "chaos", None)
        else:
            rollout, condition_key = record["rollout"], record["condition_key"]
            replicate = record["replicate"]
            outcome = record.get("outcome")
            error = record.get("error")
            meta = record.get("meta")
            condition = record.get("condition")
            chaos = record.get("chaos")
        if entry is None or rollout != last_rollout or condition_key != last_key \
                or type(rollout) is not str or type(condition_key) is not str:
            key = (str(rollout), str(condition_key))
            entry = conditions.get(key)
            if entry is None:
                entry = conditions[key] = Condition(condition or {})
            last_rollout, last_key = rollout, condition_key
        if error is None and outcome is not None:
            entry.outcomes[int(replicate)] = outcome
            if entry.outcome_condition is None:
                entry.outcome_condition = condition or {}
        else:
            entry.outcomes[int(replicate)] = None
            reason = left_out_reason_of(error)
            left_out[reason] = left_out.get(reason, 0) + 1
        if meta:
            case = meta.get("case_id")
            if case is not None:
                entry.cases[str(case)] = None
                if entry.case_condition is None:
                    entry.case_condition = condition or {}
                    entry.case_at = position
        if chaos is not None and isinstance(chaos, mapping):
            chaos_found.append(record)
    return RunIndex(conditions, left_out, chaos_found)
