"""How the runs and their conditions are named to the user: each run's name, each
condition's row label and axis values, and the case its episodes recorded."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, final

from ..declare.spec import condition_label
from ..store import Run
from .pairing import rollout_label

__all__ = ["Labels", "keys_and_labels", "label_of", "labels_of"]

Key = tuple[str, str]  # (rollout id, condition key)


@final
@dataclass(frozen=True, slots=True)
class Labels:
    """The names a report uses: which runs, and each condition's axes and case.

    ``axes`` maps a row's condition label to its axis values (the heat-map's coordinates);
    ``cases`` maps it to the case_id its episodes recorded. Both come from the rollout and
    are escaped by every renderer.
    """

    before: str
    after: str
    axes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    cases: Mapping[str, str] = field(default_factory=dict)

    def axis_names(self) -> list[str]:
        """Every axis any condition has, in the order first met."""
        names: dict[str, None] = {}
        for values in self.axes.values():
            names.update(dict.fromkeys(values))
        return list(names)


def label_of(run: Run) -> str:
    """How a run is named to the user: its name, or ``baseline:NAME``."""
    return f"baseline:{run.name}" if run.is_baseline else run.name


def keys_and_labels(before: Run, after: Run) -> dict[Key, tuple[str, dict[str, Any]]]:
    """Each condition's row label (as :func:`~.pairing.prepare` writes it) and its axis
    values, with the rollout's name among them when the runs hold more than one rollout."""
    records = [r for run in (before, after) for r in run.episodes]
    rollouts = sorted({str(r["rollout"]) for r in records})
    many = len(rollouts) > 1
    found: dict[Key, tuple[str, dict[str, Any]]] = {}
    for record in records:
        key = (str(record["rollout"]), str(record["condition_key"]))
        if key in found:
            continue
        condition = dict(record.get("condition") or {})
        label = condition_label(condition)
        if many:
            name = rollout_label(after, key[0], rollouts)
            label = f"{name} · {label}"
            condition = {"rollout": name, **condition}
        found[key] = (label, condition)
    return found


def labels_of(before: Run, after: Run) -> Labels:
    """The names every report of ``after`` against ``before`` uses."""
    labels = keys_and_labels(before, after)
    cases: dict[str, str] = {}
    for run in (before, after):
        for record in run.episodes:
            case = (record.get("meta") or {}).get("case_id")
            if case is not None:
                label = labels[(str(record["rollout"]), str(record["condition_key"]))][0]
                cases.setdefault(label, str(case))
    return Labels(
        before=label_of(before), after=label_of(after),
        axes={label: axes for label, axes in labels.values()}, cases=cases,
    )
