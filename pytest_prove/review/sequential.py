"""A sequential run read look by look against its (complete) baseline.

:class:`Looks` takes the run's episodes as they are stored, takes a condition's look k once
its first ``design.looks[k]`` replicates have all ended, and decides every condition with
:func:`pytest_prove.stats.decide` (docs/statistics.md, "Sequential runs"). A look's rows are
made by :func:`~pytest_prove.review.pairing.prepare` on that condition's episodes alone (the
baseline's, and the run's replicates below the look's size), so they pair and count exactly as
a fixed comparison does. A look, once taken, never changes: its rows are kept.

:func:`sequential_comparison` turns the decisions into the comparison a report renders: each
condition's rows at the look it stopped at (or its last), tested on their sequential p-values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, final

from ..declare.spec import condition_label
from ..stats import (
    FUTILE,
    STOPPED,
    Comparison,
    ConditionDecision,
    MarginTest,
    RowDecision,
    RowInput,
    SequentialDesign,
    SequentialRow,
    compare,
    decide,
    design_from_dict,
)
from ..store import Run
from .pairing import Missing, prepare, rollout_label

__all__ = ["Looks", "looks_of", "sequential_comparison", "sequential_lines"]

Key = tuple[str, str]  # (rollout id, condition key)
DECIDED = STOPPED  # the states of a condition stopped before its last look


def _name(key: Key) -> str:
    """The condition's name inside the engine: unique across rollouts."""
    return f"{key[0]}\x1f{key[1]}"


@final
@dataclass(slots=True)
class Looks:
    """The looks of a sequential run, as its episodes arrive."""

    baseline: Run
    design: SequentialDesign
    salt: str
    rollouts: Mapping[str, Any]  # the run's manifest "rollouts" (declarations)
    events: Sequence[str] | None = None
    missing: Missing = "test"
    margin: float | None = None  # --prove-margin: also tested at the looks (stats.decide)
    before: dict[Key, list[Mapping[str, Any]]] = field(default_factory=dict)
    after: dict[Key, dict[int, dict[str, Any]]] = field(default_factory=dict)
    labels: dict[Key, str] = field(default_factory=dict)
    #: Per condition, its rows at each look taken: {event: (worse_when, RowInput)}.
    taken: dict[Key, list[dict[str, tuple[str, RowInput]]]] = field(default_factory=dict)
    decisions: dict[Key, ConditionDecision] = field(default_factory=dict)
    rows: tuple[RowDecision, ...] = ()

    def __post_init__(self) -> None:
        for record in self.baseline.episodes:
            key = (str(record["rollout"]), str(record["condition_key"]))
            self.before.setdefault(key, []).append(record)
        rollouts = sorted({k[0] for k in self.before})
        for key, records in self.before.items():
            label = condition_label(records[0].get("condition") or {})
            if len(rollouts) > 1:
                label = f"{rollout_label(self.baseline, key[0], rollouts)} · {label}"
            self.labels[key] = label

    def decided(self, key: Key) -> ConditionDecision | None:
        """The condition's decision once it stopped (worse, safer, no change), else None."""
        found = self.decisions.get(key)
        return found if found is not None and found.state in DECIDED else None

    def add(self, records: Iterable[Mapping[str, Any]]) -> list[tuple[Key, ConditionDecision]]:
        """Take stored episodes; return the conditions this decided (newly stopped)."""
        touched: set[Key] = set()
        for record in records:
            key = (str(record["rollout"]), str(record["condition_key"]))
            if self.decided(key) is not None or key not in self.before:
                continue  # a stopped condition's late episodes, or one with no baseline
            self.after.setdefault(key, {})[int(record["replicate"])] = dict(record)
            touched.add(key)
        grew = [key for key in sorted(touched) if self._take(key)]
        if not grew:
            return []
        before = {k: d.state for k, d in self.decisions.items()}
        self._decide()
        return [(k, d) for k, d in self.decisions.items()
                if d.state in DECIDED and before.get(k) not in DECIDED]

    def _take(self, key: Key) -> bool:
        """Take every look of ``key`` whose replicates have all ended; True if one was."""
        have = self.after.get(key, {})
        looks = self.taken.setdefault(key, [])
        grew = False
        while len(looks) < len(self.design.looks):
            size = self.design.looks[len(looks)]
            if any(r not in have for r in range(size)):
                break
            looks.append(self._rows(key, size))
            grew = True
        return grew

    def _rows(self, key: Key, size: int) -> dict[str, tuple[str, RowInput]]:
        manifest = {**self.baseline.manifest,
                    "rollouts": {**(self.baseline.manifest.get("rollouts") or {}),
                                 **self.rollouts}}
        before = dataclasses.replace(self.baseline, episodes=tuple(self.before[key]))
        chosen = self.after[key]
        after = dataclasses.replace(
            self.baseline, manifest={**manifest, "salt": self.salt},
            episodes=tuple(chosen[r] for r in range(size)))
        prepared = prepare(before, after, self.events or None, missing=self.missing)
        return {row.event: (row.worse_when, dataclasses.replace(row, condition=_name(key)))
                for row in prepared.rows}

    def _sequential_rows(self) -> list[SequentialRow]:
        rows: list[SequentialRow] = []
        for key in sorted(self.taken):
            looks = self.taken[key]
            if not looks:
                continue
            events: dict[str, str] = {}
            for look in looks:
                for event, (worse_when, _) in look.items():
                    events.setdefault(event, worse_when)
            for event, worse_when in events.items():
                rows.append(SequentialRow(
                    _name(key), event, "rise" if worse_when == "rise" else "fall",
                    tuple(look[event][1] if event in look else None for look in looks)))
        return rows

    def _decide(self) -> None:
        rows = self._sequential_rows()
        decided_rows, conditions = decide(self.design, rows, margin=self.margin)
        self.rows = decided_rows
        keys = {_name(k): k for k in self.taken}
        for decision in conditions:
            key = keys[decision.condition]
            if self.decided(key) is not None:
                continue  # a stopped condition keeps the decision it stopped with
            self.decisions[key] = dataclasses.replace(decision, condition=self.labels[key])

    def finish(self) -> None:
        """Decide once more with every look taken (the session's end)."""
        if self.taken:
            self._decide()

    def manifest(self) -> dict[str, Any]:
        """What the stored run records of its looks and decisions."""
        conditions: dict[str, dict[str, Any]] = {}
        for key, looks in sorted(self.taken.items()):
            decision = self.decisions.get(key)
            conditions.setdefault(key[0], {})[key[1]] = {
                "looks": len(looks),
                "state": "open" if decision is None else decision.state,
                "look": None if decision is None else decision.look,
                "replicates": None if decision is None else decision.replicates,
                "reason": None if decision is None else decision.reason,
            }
        return {"design": self.design.to_dict(), "conditions": conditions,
                **({} if self.margin is None else {"margin": self.margin})}


def sequential_comparison(looks: Looks, *, max_mde: float,
                          margin: float | None = None) -> Comparison | None:
    """The comparison of a sequential run: each condition's rows at the look it stopped at
    (or its last look), tested on their sequential p-values (Holm over m on p*). Its rows
    have no limit of their own (``Limit`` status ``sequential``): a row is not counted as
    blind when its condition ruled max_mde out or the design's check passed (the procedure
    catches max_mde 4 times in 5 by design). With a ``margin``, each row's margin test is
    the sequential one over every look its condition took (``stats.sequential_margin_test``).
    Each row's interval is read at the look its condition stopped at, so it holds at every
    look of the design at once (``compare``'s ``looks``)."""
    from ..stats import final_margin_level, sequential_margin_test

    by_row = {(d.condition, d.event): d for d in looks.rows}
    inputs: list[RowInput] = []
    pvalues: list[float] = []
    ruled_out: list[bool] = []
    tests: list[MarginTest] = []
    names = {_name(k): k for k in looks.taken}
    for row in looks._sequential_rows():
        decision = by_row.get((row.condition, row.event))
        if decision is None:
            continue
        key = names[row.condition]
        stopped = looks.decisions.get(key)
        at = (stopped.look if stopped is not None and stopped.state in DECIDED
              else len(row.looks))
        counts = row.looks[at - 1] if at - 1 < len(row.looks) else None
        if counts is None:
            continue
        inputs.append(dataclasses.replace(counts, condition=looks.labels[key]))
        pvalues.append(decision.p_star)
        # A row sees max_mde when its condition ruled it out, or when the design's procedure
        # catches it 4 times in 5 (its check passed): a sequential row has no limit of its own.
        ruled_out.append(looks.design.ok
                         or (stopped is not None and stopped.state in FUTILE))
        if margin is not None:
            test = sequential_margin_test(row.looks, looks.design.looks, row.worse_when,
                                          margin, looks.design.q)
            assert test is not None  # the row has counts at ``at``
            tests.append(test)
    if not inputs:
        return None
    return compare(inputs, q=looks.design.q, max_mde=max_mde, pvalues=pvalues,
                   sees=ruled_out, m=max(looks.design.m, len(inputs)),
                   sequential=looks.design.method, margin=margin,
                   margin_tests=tests if margin is not None else None,
                   margin_level=final_margin_level(looks.design.looks, looks.design.q),
                   looks=len(looks.design.looks))



def sequential_lines(looks: Looks) -> tuple[tuple[str, str], ...]:
    """How the sequential run went, for every renderer: the method and its looks, then each
    condition and how it stopped (decided conditions first)."""
    design = looks.design
    planned = design.replicates * len(looks.taken)
    # The replicates the looks read (a worker may have finished a few more of a condition
    # before its decision reached it: stored, not read).
    ran = sum(design.looks[len(taken) - 1] for taken in looks.taken.values() if taken)
    stopped = [k for k in looks.taken if looks.decided(k) is not None]
    head = (f"{len(stopped)} of {len(looks.taken)} condition(s) decided before their last look; "
            f"{ran:,} of {planned:,} planned episodes read ({_looks_text(design.looks)})")
    order = sorted(looks.taken, key=lambda k: (looks.decided(k) is None, looks.labels[k]))
    lines = [("", head)]
    for key in order:
        decision = looks.decisions.get(key)
        lines.append((looks.labels[key], "no look taken" if decision is None
                      else decision.reason))
    return tuple(lines)


def _looks_text(looks: Sequence[int]) -> str:
    """The looks in a few words: "a look every 4 replicates up to 220"."""
    step = looks[0]
    if len(looks) > 3 and all(looks[i + 1] - looks[i] == step for i in range(len(looks) - 2)):
        return f"a look every {step} replicates up to {looks[-1]}"
    return f"looks at {', '.join(map(str, looks))} replicates"


def looks_of(before: Run, after: Run, *, events: Sequence[str] | None,
             missing: Missing, margin: float | None = None) -> Looks | None:
    """The looks of a stored sequential run (its manifest's ``sequential``), taken again from
    its episodes: each condition up to the looks it took in its session (episodes a worker
    finished after its decision are not read); None for a run that is not sequential.
    Raises ValueError when the record is damaged or the run is not paired with ``before``."""
    recorded = after.manifest.get("sequential")
    if recorded is None:
        return None
    if not isinstance(recorded, Mapping):
        raise ValueError(f"run {after.name!r}: its record of looks is damaged")
    try:
        design = design_from_dict(recorded.get("design"))
    except ValueError as exc:
        raise ValueError(f"run {after.name!r}: {exc}") from None
    if not before.salt or before.salt != after.salt:
        raise ValueError(
            f"run {after.name!r} is sequential: its looks were read against the baseline it "
            f"was paired with, and {before.name!r} has another salt; compare it with that "
            "baseline")
    taken: dict[Key, int] = {}
    conditions = recorded.get("conditions")
    for rollout_id, keys in (conditions.items() if isinstance(conditions, Mapping) else ()):
        for key, info in (keys.items() if isinstance(keys, Mapping) else ()):
            count = info.get("looks") if isinstance(info, Mapping) else None
            if isinstance(count, int) and 0 < count <= len(design.looks):
                taken[(str(rollout_id), str(key))] = design.looks[count - 1]
    # The looks are taken again as the session took them, with its margin (a margin stops
    # no row for futility): then decided once more with ``margin``, the one asked now.
    recorded_margin = recorded.get("margin")
    looks = Looks(before, design, after.salt, after.manifest.get("rollouts") or {},
                  events=events, missing=missing,
                  margin=float(recorded_margin) if isinstance(recorded_margin, (int, float))
                  else None)
    looks.add(r for r in after.episodes
              if int(r["replicate"]) < taken.get((str(r["rollout"]), str(r["condition_key"])),
                                                 0))
    looks.margin = margin
    looks.finish()
    return looks
