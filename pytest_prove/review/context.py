"""What every report of one run against another says besides the comparison: the runs'
names, each condition's row label and axis values, its case, and what was not compared."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, final

from ..spec import condition_label
from ..store import Run
from .pairing import Prepared, rollout_label

__all__ = ["ReportContext", "keys_and_labels", "label_of", "report_context"]

Key = tuple[str, str]  # (rollout id, condition key)


@final
@dataclass(frozen=True, slots=True)
class ReportContext:
    """What a report says besides the comparison: which runs, and each condition's axes.

    ``axes`` maps a row's condition label to its axis values (the heat-map's coordinates);
    ``cases`` maps it to the case_id its episodes recorded. Both come from the rollout and
    are escaped by every renderer.
    """

    before: str
    after: str
    paired: bool = False
    not_run: tuple[str, ...] = ()
    new: tuple[str, ...] = ()
    left_out: Mapping[str, int] = field(default_factory=dict)
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


def report_context(before: Run, after: Run, prepared: Prepared) -> ReportContext:
    """The context every report of ``after`` against ``before`` shares."""
    labels = keys_and_labels(before, after)
    cases: dict[str, str] = {}
    for run in (before, after):
        for record in run.episodes:
            case = (record.get("meta") or {}).get("case_id")
            if case is not None:
                label = labels[(str(record["rollout"]), str(record["condition_key"]))][0]
                cases.setdefault(label, str(case))
    return ReportContext(
        before=label_of(before), after=label_of(after), paired=prepared.paired,
        not_run=prepared.not_run, new=prepared.new, left_out=dict(prepared.left_out),
        axes={label: axes for label, axes in labels.values()}, cases=cases,
    )
