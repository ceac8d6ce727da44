"""What a change to a baseline does (``pytest-prove baseline-diff OLD NEW``): per condition
and event, the rate before and after, and, when the two share their salt, the replicates
whose outcome changed.

A baseline decides every later gate, and a pull request that changes one shows a reviewer
lines of digits.  This reads the two files as the gate would and says what moved: a failure
rate that rose in the baseline lets a worse agent through later.  Descriptive only: no
test, no verdict (the runs behind the two files are not a comparison anyone planned).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, final

from ..declare.spec import NO_OUTCOME_EVENT, condition_label
from ..record import identity
from ..store import Run
from .pairing import rollout_label

__all__ = ["BaselineDiff", "ConditionChange", "EventRate", "diff_baselines", "ending_word"]


@final
@dataclass(frozen=True, slots=True)
class EventRate:
    """One event of a condition, in each baseline: how many episodes had it, out of how
    many (with an outcome, or all of them for ``no outcome``)."""

    event: str
    kind: str  # failure, success or no outcome
    before: int
    before_of: int
    after: int
    after_of: int

    @property
    def rate_before(self) -> float | None:
        return self.before / self.before_of if self.before_of else None

    @property
    def rate_after(self) -> float | None:
        return self.after / self.after_of if self.after_of else None

    @property
    def changed(self) -> bool:
        return (self.before, self.before_of) != (self.after, self.after_of)

    def to_json(self) -> dict[str, Any]:
        return {"event": self.event, "kind": self.kind, "before": self.before,
                "before_of": self.before_of, "rate_before": self.rate_before,
                "after": self.after, "after_of": self.after_of, "rate_after": self.rate_after}


@final
@dataclass(frozen=True, slots=True)
class ConditionChange:
    """One condition of either baseline: its episodes in each (0 where it is absent), its
    events' rates, and the replicates whose ending changed (replicate, before, after)."""

    rollout: str
    key: str
    label: str
    episodes_before: int
    episodes_after: int
    events: tuple[EventRate, ...]
    flipped: tuple[tuple[int, str, str], ...]
    only_before: tuple[int, ...]  # replicates only the old baseline holds
    only_after: tuple[int, ...]

    @property
    def changed(self) -> bool:
        return bool(self.flipped or self.only_before or self.only_after
                    or any(e.changed for e in self.events))

    def to_json(self) -> dict[str, Any]:
        return {"rollout": self.rollout, "condition_key": self.key, "label": self.label,
                "episodes_before": self.episodes_before, "episodes_after": self.episodes_after,
                "events": [e.to_json() for e in self.events],
                "changed_replicates": [{"replicate": r, "before": b, "after": a}
                                       for r, b, a in self.flipped],
                "only_before": list(self.only_before), "only_after": list(self.only_after)}


@final
@dataclass(frozen=True, slots=True)
class BaselineDiff:
    """Two baselines read side by side."""

    old: Run
    new: Run
    same_salt: bool
    conditions: tuple[ConditionChange, ...]
    #: What the headers say differently that bears on a gate: declarations (outcomes,
    #: failures, successes), replicates, the salt.
    header: tuple[str, ...]

    @property
    def changed(self) -> tuple[ConditionChange, ...]:
        return tuple(c for c in self.conditions if c.changed)

    @property
    def flips(self) -> int:
        return sum(len(c.flipped) for c in self.conditions)


def ending_word(record: Mapping[str, Any]) -> str:
    """How an episode ended, in a word: its outcome, or ``!KIND`` for one with an error."""
    error = record.get("error")
    if error is not None:
        return f"!{error.get('kind', 'errored')}"
    return str(record.get("outcome"))


def _declared(run: Run, rollout: str) -> tuple[list[str], list[str]]:
    info = (run.manifest.get("rollouts") or {}).get(rollout) or {}
    declaration = info.get("declaration") if isinstance(info, Mapping) else None
    if not isinstance(declaration, Mapping):
        return [], []
    return ([str(x) for x in declaration.get("failures") or ()],
            [str(x) for x in declaration.get("successes") or ()])


def _header_changes(old: Run, new: Run) -> list[str]:
    said = []
    if old.salt != new.salt:
        said.append(f"salt {old.salt} -> {new.salt}: the episodes ran on other seeds, so no "
                    "replicate is compared with its twin")
    old_rollouts = old.manifest.get("rollouts") or {}
    new_rollouts = new.manifest.get("rollouts") or {}
    for rollout in sorted(set(old_rollouts) & set(new_rollouts)):
        before = (old_rollouts.get(rollout) or {}).get("declaration") or {}
        after = (new_rollouts.get(rollout) or {}).get("declaration") or {}
        for field in ("outcomes", "failures", "successes", "replicates"):
            if before.get(field) != after.get(field):
                said.append(f"{rollout}: {field} {before.get(field)!r} -> "
                            f"{after.get(field)!r}")
    return said


def diff_baselines(old: Run, new: Run) -> BaselineDiff:
    """Read ``new`` against ``old``: per condition of either, its events' rates in each
    and (same salt) the replicates whose ending changed."""
    same_salt = old.salt == new.salt
    by: dict[tuple[str, str], list[dict[int, Mapping[str, Any]]]] = {}
    conditions: dict[tuple[str, str], Mapping[str, Any]] = {}
    for side, run in enumerate((old, new)):
        for record in run.episodes:
            rollout, key, replicate = identity(record)
            by.setdefault((rollout, key), [{}, {}])[side][replicate] = record
            conditions.setdefault((rollout, key), record.get("condition") or {})
    changes = []
    for (rollout, key), (before, after) in sorted(by.items()):
        failures, successes = _declared(new if after else old, rollout)
        counted = [Counter(ending_word(r) for r in side.values()) for side in (before, after)]
        outcomes = [sum(n for word, n in c.items() if not word.startswith("!"))
                    for c in counted]
        events = [EventRate(event, kind, counted[0][event], outcomes[0], counted[1][event],
                            outcomes[1])
                  for kind, names in (("failure", failures), ("success", successes))
                  for event in names]
        missing = [sum(n for word, n in c.items() if word.startswith("!")) for c in counted]
        events.append(EventRate(NO_OUTCOME_EVENT, "no outcome", missing[0], len(before),
                                missing[1], len(after)))
        flipped: list[tuple[int, str, str]] = []
        if same_salt:
            for replicate in sorted(set(before) & set(after)):
                was, now = ending_word(before[replicate]), ending_word(after[replicate])
                if was != now:
                    flipped.append((replicate, was, now))
        label = condition_label(dict(conditions[(rollout, key)]))
        named = rollout_label(new if after else old, rollout, [r for r, _ in by])
        changes.append(ConditionChange(
            rollout=rollout, key=key, label=f"{label} of {named}",
            episodes_before=len(before), episodes_after=len(after), events=tuple(events),
            flipped=tuple(flipped), only_before=tuple(sorted(set(before) - set(after))),
            only_after=tuple(sorted(set(after) - set(before)))))
    return BaselineDiff(old=old, new=new, same_salt=same_salt, conditions=tuple(changes),
                        header=tuple(_header_changes(old, new)))


