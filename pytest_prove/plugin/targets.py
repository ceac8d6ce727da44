"""Absolute targets in a session (docs/targets.md): the checks before any rollout runs, the
plan's lines, and the gate of a run read against its targets.

Before anything runs: a ``--prove-target`` (or ini ``prove_targets``) that no selected
rollout can take, a target held to a condition no selected rollout has, a pass^k needing
more tries than a condition runs, a sequential run with targets (refused this version: its
looks are the comparison's), and a target design too small to decide its target (the
design check: the replicates each condition needs so that an agent better than the target
by ``--prove-max-mde`` is shown to meet it, and one worse by as much is shown to miss it,
4 times in 5 each) are refused with the fix. At the end, without a baseline, the session
reads the run against its targets here (with one, :func:`pytest_prove.review.review` does).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..declare.targets import Target, declared_events
from ..declare.targets_of import takes

if TYPE_CHECKING:
    from ..review.targets import TargetReview, TargetRow
    from ..store import Run
    from .settings import Settings
    from .state import ItemPlan

__all__ = ["check_targets", "run_gate", "target_design"]

Selected = Mapping[str, tuple["ItemPlan", set[str]]]


def _conditions(keys: set[str]) -> list[dict[str, Any]]:
    found = []
    for key in sorted(keys):
        try:
            value = json.loads(key)
        except ValueError:
            continue
        found.append(value if isinstance(value, dict) else {})
    return found


def check_targets(selected: Selected, settings: Settings) -> str | None:
    """Why the session's targets cannot be used, before any rollout runs; None when they
    can."""
    if not selected:
        return None
    plans = [plan for plan, _ in selected.values()]
    for target in settings.targets:
        if not any(takes(plan.declaration, target) for plan in plans):
            declared = sorted({o for p in plans for o in p.declaration.outcomes})
            what = ("pass^k and pass@k count the declared successes, and no selected rollout "
                    "declares one" if target.kind != "rate" else
                    f"no selected rollout declares the event {target.event!r} "
                    f"({declared_events(declared)})")
            return (f"{settings.targets_from}: target {target.text!r}: {what}; name a "
                    "declared event, or drop the target")
    found: list[tuple[str, Target]] = []
    for rollout_id, (plan, keys) in selected.items():
        conditions = _conditions(keys)
        for target in plan.declaration.target_list:
            if target.condition and not any(target.applies(c) for c in conditions):
                return (f"{target.where or settings.targets_from}: target {target.text!r} "
                        f"holds for a condition that rollout {plan.label} does not run (its "
                        f"conditions: {', '.join(_label(c) for c in conditions[:5])}); write "
                        "the axis and value as the condition's label shows them")
            if target.k > plan.total:
                return (f"{target.where or settings.targets_from}: target {target.text!r} "
                        f"asks about {target.k} tries, and {plan.label} runs {plan.total} "
                        f"replicate{'s' if plan.total != 1 else ''} a condition; run at least "
                        f"{target.k} (--prove-replicates) or lower k")
            found.append((rollout_id, target))
    if found and settings.sequential:
        return ("--prove-sequential cannot be used with targets yet: a sequential run stops "
                "each condition on its looks against the baseline, and a target's test is "
                "not read at those looks, so stopping would not keep the targets' error "
                "rates; drop --prove-sequential (and ini prove_sequential) to test the "
                "targets, or drop the targets")
    return None


def _label(condition: Mapping[str, Any]) -> str:
    from ..declare.spec import condition_label

    return condition_label(condition)


def _rows(selected: Selected) -> int:
    return sum(sum(1 for c in _conditions(keys) for t in plan.declaration.target_list
                   if t.applies(c)) for plan, keys in selected.values())


def target_design(selected: Selected, settings: Settings) -> tuple[list[str], str | None]:
    """The plan's lines on the targets (the replicates each needs) and why the design is
    refused, or None; ([], None) when no selected rollout has a target."""
    rows = _rows(selected)
    if not rows:
        return [], None
    from ..review.targets import distance_for, replicates_needed

    lines = [f"targets: {rows} target row{'s' if rows != 1 else ''} (each condition and "
             f"its targets), Holm q {settings.q:g} over them; the replicates a condition "
             "needs so that an agent better than the target by the distance is shown to "
             "meet it, and one worse by it to miss it, 4 times in 5 each:"]
    short: list[str] = []
    for plan, _keys in selected.values():
        for target in plan.declaration.target_list:
            distance = distance_for(target, settings.max_mde)
            needed = replicates_needed(target, settings.max_mde, settings.q, rows)
            enough = needed is not None and needed <= plan.total
            need = "more than 20,000" if needed is None else f"{needed:,}"
            shown = "" if distance is None else f" (distance {distance:g})"
            lines.append(f"  {plan.label} {target.text}: {need}{shown}; it runs "
                         f"{plan.total:,}: {'ok' if enough else 'too few'}")
            if not enough:
                short.append(f"{plan.label} {target.text} needs {need} replicates a "
                             f"condition{shown} and runs {plan.total:,}")
    if not short or settings.allow_underpowered:
        if short:
            lines.append("  --prove-allow-underpowered: the run goes ahead; rows too small "
                         "to tell do not fail the gate (unless --prove-fail-on=not-met)")
        return lines, None
    return lines, ("design check failed for the targets: " + "; ".join(short[:3])
                   + (" ..." if len(short) > 3 else "")
                   + ". Run more replicates (--prove-replicates N), accept a larger "
                   "distance (--prove-max-mde, or ~D after a target's rate), or run anyway "
                   "with --prove-allow-underpowered")


def run_gate(run: Run, settings: Settings, missing: str
             ) -> tuple[TargetReview | None, tuple[TargetRow, ...], list[str], list[str]]:
    """A run without a baseline read against its targets: (the rows, those that fail the
    gate, the reasons it cannot vouch for some, what it was told not to fail on)."""
    from ..review.coverage import unfinished_reason
    from ..review.targets import gate_targets, target_review

    targets = target_review(run, q=settings.q, max_mde=settings.max_mde,
                            missing="ignore" if missing == "ignore" else "test",
                            max_errored=settings.max_errored)
    failing, reasons, notes = gate_targets(targets, settings.fail_on)
    found = list(reasons)
    unfinished = unfinished_reason(run)
    if unfinished is not None:
        found.append(unfinished)
    return targets, failing, found, list(notes)
