"""How the runs and their conditions are named to the user: each run's name, each
condition's row label and axis values, the order the sweep declared each axis's values in,
and the case its episodes recorded."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, final

from ..declare.spec import condition_label
from ..store import Run
from .pairing import rollout_label
from .reading import RunIndex, read_run

__all__ = ["Labels", "declared_order", "keys_and_labels", "label_of", "labels_of"]

Key = tuple[str, str]  # (rollout id, condition key)


@final
@dataclass(frozen=True, slots=True)
class Labels:
    """The names a report uses: which runs, and each condition's axes and case.

    ``axes`` maps a row's condition label to its axis values (the heat-map's coordinates);
    ``cases`` maps it to the case_id its episodes recorded. Both come from the rollout and
    are escaped by every renderer. ``order`` gives, per axis, its values in the order the
    sweep declared them (the parametrize list, the spec's ``values``), where the runs say.
    """

    before: str
    after: str
    axes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    cases: Mapping[str, str] = field(default_factory=dict)
    order: Mapping[str, Sequence[Any]] = field(default_factory=dict)

    def ordered(self, axis: str | None, values: Sequence[Any]) -> list[Any]:
        """``values`` (repeats dropped) as the sweep declared them; values it did not
        declare follow in the order given. Without a declared order, numbers are sorted."""
        unique = list(dict.fromkeys(values))
        declared = self.order.get(axis) if axis is not None else None
        if declared:
            rank = {_same(v): i for i, v in reversed(list(enumerate(declared)))}
            return sorted(unique, key=lambda v: rank.get(_same(v), len(rank)))
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in unique):
            return sorted(unique)
        return unique

    def grid_order(self, conditions: Sequence[str], x: str | None,
                   y: str | None) -> dict[str, tuple[int, ...]]:
        """Each condition's place in the order a report's grids are read: grid by grid (the
        axes beyond ``x`` and ``y``), row by row (``y``), left to right (``x``), each axis's
        values as the sweep declared them."""
        def value(condition: str, axis: str) -> Any:
            return self.axes.get(condition, {}).get(axis, "—")

        axes = [*(a for a in self.axis_names() if a not in (x, y)),
                *(a for a in (y, x) if a is not None)]
        values = {a: self.ordered(a, [value(c, a) for c in conditions]) for a in axes}
        return {c: tuple(values[a].index(value(c, a)) for a in axes) for c in conditions}

    def axis_names(self) -> list[str]:
        """Every axis any condition has, in the order first met."""
        names: dict[str, None] = {}
        for values in self.axes.values():
            names.update(dict.fromkeys(values))
        return list(names)


def _same(value: Any) -> str:
    """One text for values that are the same axis value (as JSON stores them)."""
    return json.dumps(value, sort_keys=True, default=str)


def declared_order(*runs: Run) -> dict[str, list[Any]]:
    """Per axis, its values in the order the sweep declared them: a spec's (or
    ``rollout(axes=)``'s) ``values``, and a parametrized test's values by their place in its
    parametrize list (the plan in the manifest). The first run that declares an axis wins."""
    order: dict[str, list[Any]] = {}
    for run in runs:
        manifest = run.manifest
        for info in (manifest.get("rollouts") or {}).values():
            axes = ((info or {}).get("declaration") or {}).get("axes") if isinstance(
                info, Mapping) else None
            if isinstance(axes, Mapping):
                for name, axis in axes.items():
                    values = axis.get("values") if isinstance(axis, Mapping) else None
                    if isinstance(values, list):
                        order.setdefault(str(name), list(values))
        for info in (manifest.get("plan") or {}).values():
            axes = info.get("axes") if isinstance(info, Mapping) else None
            if not isinstance(axes, Mapping):
                continue
            for name, positions in axes.items():
                if str(name) in order or not isinstance(positions, Mapping):
                    continue
                try:
                    placed = sorted(((int(k), v) for k, v in positions.items()),
                                    key=lambda kv: kv[0])
                except ValueError:
                    continue  # edited by hand: no order rather than a wrong one
                order[str(name)] = [v for _, v in placed]
    return order


def label_of(run: Run) -> str:
    """How a run is named to the user: its name, or ``baseline:NAME``."""
    return f"baseline:{run.name}" if run.is_baseline else run.name


def keys_and_labels(before: Run, after: Run,
                    indexes: tuple[RunIndex, RunIndex] | None = None,
                    ) -> dict[Key, tuple[str, dict[str, Any]]]:
    """Each condition's row label (as :func:`~.pairing.prepare` writes it) and its axis
    values, with the rollout's name among them when the runs hold more than one rollout.

    ``indexes``: both runs as :func:`.reading.read_run` reads them (read here if not given).
    """
    if indexes is None:
        indexes = (read_run(before), read_run(after))
    first: dict[Key, Mapping[str, Any]] = {}
    for index in indexes:
        for key, entry in index.conditions.items():
            if key not in first:
                first[key] = entry.condition
    rollouts = sorted({rollout for rollout, _ in first})
    many = len(rollouts) > 1
    found: dict[Key, tuple[str, dict[str, Any]]] = {}
    for key, axes in first.items():
        condition = dict(axes)
        label = condition_label(condition)
        if many:
            name = rollout_label(after, key[0], rollouts)
            label = f"{name} · {label}"
            condition = {"rollout": name, **condition}
        found[key] = (label, condition)
    return found


def labels_of(before: Run, after: Run,
              indexes: tuple[RunIndex, RunIndex] | None = None) -> Labels:
    """The names every report of ``after`` against ``before`` uses.

    ``indexes``: both runs as :func:`.reading.read_run` reads them (read here if not given).
    """
    if indexes is None:
        indexes = (read_run(before), read_run(after))
    labels = keys_and_labels(before, after, indexes)
    cases: dict[str, str] = {}
    for index in indexes:
        # Each condition's first case, in the order the conditions first met one: the
        # first episode with a case of each label wins, as reading them all would.
        for _, key, case in sorted((entry.case_at, key, next(iter(entry.cases)))
                                   for key, entry in index.conditions.items() if entry.cases):
            cases.setdefault(labels[key][0], case)
    return Labels(
        before=label_of(before), after=label_of(after),
        axes={label: axes for label, axes in labels.values()}, cases=cases,
        order=declared_order(after, before),
    )
