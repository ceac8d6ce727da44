"""A run whose rollouts declare arms, read as two runs: the reference arm and the others.

A rollout declared with ``arms=[...]`` stores each arm as a rollout of its own
(``support@arm:cheaper``, :func:`~..declare.seeds.arm_rollout`), every arm of a replicate on
one seed.  :func:`arm_runs` splits such a run into the two runs a baseline comparison reads:
``before`` holds the reference arm's episodes, once for every arm compared with it and
under that arm's id, and ``after`` the compared arms' episodes.  Every pair of twins then
shares its rollout id, condition key, replicate and seed, and :func:`~..review.review` (its
pairing, gate, metrics, every report) reads them as it reads a run against its baseline.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, final

import msgspec

from ..declare.seeds import arm_rollout, split_arm
from ..record import StoreError
from .runs import Run

__all__ = ["ArmsOf", "arm_run", "arm_runs", "arms_of", "declared_arms", "one_arm",
           "reference_runs"]


@final
@dataclass(frozen=True, slots=True)
class ArmsOf:
    """One rollout's arms in a run: its own id, its arms in order, its reference arm."""

    rollout: str
    arms: tuple[str, ...]
    reference: str
    #: The arms the run holds a rollout entry for (an arm deselected by -k has none).
    present: tuple[str, ...]

    @property
    def compared(self) -> tuple[str, ...]:
        """The arms compared with the reference."""
        return tuple(a for a in self.arms if a != self.reference)


def arms_of(manifest: Mapping[str, Any]) -> dict[str, ArmsOf]:
    """Each rollout of the run that declares arms, by its own id (empty: no arms)."""
    found: dict[str, ArmsOf] = {}
    rollouts = manifest.get("rollouts")
    plan = manifest.get("plan")
    ids = [*(rollouts or {}), *(plan or {})] if isinstance(rollouts, Mapping) else []
    for rollout_id in dict.fromkeys(ids):
        base, arm = split_arm(str(rollout_id))
        if arm is None:
            continue
        info = (rollouts or {}).get(rollout_id)
        declaration = info.get("declaration") if isinstance(info, Mapping) else None
        arms = declaration.get("arms") if isinstance(declaration, Mapping) else None
        if not isinstance(arms, list) or arm not in arms:
            continue
        reference = declaration.get("reference") if isinstance(declaration, Mapping) else None
        held = found.get(base)
        present = (*held.present, arm) if held is not None else (arm,)
        found[base] = ArmsOf(base, tuple(map(str, arms)),
                             str(reference) if isinstance(reference, str) else str(arms[0]),
                             present)
    return found


def declared_arms(manifest: Mapping[str, Any]) -> dict[str, list[str] | None]:
    """Each rollout of a run or baseline by its own id: the arms it declares, or None."""
    found: dict[str, list[str] | None] = {}
    rollouts = manifest.get("rollouts")
    for rollout_id in [*(rollouts if isinstance(rollouts, Mapping) else {}),
                       *(manifest.get("plan") or {})]:
        base, arm = split_arm(str(rollout_id))
        if arm is None:
            found.setdefault(base, None)
    for base, info in arms_of(manifest).items():
        found[base] = list(info.arms)
    return found


def _renamed(record: Mapping[str, Any], rollout: str) -> Mapping[str, Any]:
    if isinstance(record, msgspec.Struct):
        return msgspec.structs.replace(record, rollout=rollout)
    return {**record, "rollout": rollout}


def _keyed(table: object, ids: Mapping[str, str]) -> dict[str, Any]:
    """A manifest table keyed by rollout id (``rollouts``, ``plan``, a selection's), with
    the entries of ``ids`` (new id -> the stored id it copies) alone."""
    if not isinstance(table, Mapping):
        return {}
    return {new: copy.deepcopy(table[old]) for new, old in ids.items() if old in table}


def _manifest(run: Run, ids: Mapping[str, str], side: str, arms: Mapping[str, str]
              ) -> dict[str, Any]:
    manifest = dict(run.manifest)
    manifest["run_id"] = f"{run.run_id}:{side}"
    manifest["name"] = f"{run.name}:{side}"
    manifest["paired_with"] = None
    manifest.pop("sequential", None)
    for key in ("rollouts", "plan"):
        manifest[key] = _keyed(run.manifest.get(key), ids)
    for info in manifest["rollouts"].values():
        if isinstance(info, dict):
            info.pop("arm", None)
    for new, info in manifest["rollouts"].items():
        if isinstance(info, dict) and new in arms:
            info["arm"] = arms[new]  # the arm compared, for the gate's reports
    selection = run.manifest.get("selection")
    if isinstance(selection, Mapping):
        manifest["selection"] = {
            **selection, **{key: _keyed(selection.get(key), ids)
                            for key in ("deselected", "skipped")}}
    shard = run.manifest.get("shard")
    if isinstance(shard, Mapping) and isinstance(shard.get("slice"), Mapping):
        manifest["shard"] = {**shard, "slice": _keyed(shard["slice"], ids)}
    return manifest


def arm_run(run: Run, arm: str) -> Run:
    """The episodes of ``run``'s arm ``arm`` alone (every rollout's, under their stored ids),
    as a run named ``RUN:ARM``: what one arm did and cost."""
    return _only(run, {str(rid) for rid in (run.manifest.get("rollouts") or {})
                       if split_arm(str(rid))[1] == arm}, arm)


def one_arm(run: Run, arm: str) -> Run:
    """``run``'s arm ``arm`` as a run of its own, ``RUN:ARM``: its episodes under their
    rollouts' own ids, so that two arms of one run read as a run and its baseline
    (``pytest-prove cost RUN:current RUN:cheaper``); a :class:`StoreError` naming the arms
    when the run has no such arm."""
    found = arms_of(run.manifest)
    ids = {base: arm_rollout(base, arm) for base, info in found.items() if arm in info.arms}
    if not ids:
        arms = sorted({a for info in found.values() for a in info.arms})
        raise StoreError(
            f"run {run.name!r} has no arm {arm!r}" + (
                f"; its arms: {', '.join(arms)} (name one as {run.name}:ARM)" if arms else
                "; it declares no arms (RUN:ARM names an arm of a run with arms)"))
    stored = {own: base for base, own in ids.items()}
    return Run(run_id=f"{run.run_id}:{arm}", name=f"{run.name}:{arm}",
               manifest=_manifest(run, ids, arm, {}),
               episodes=tuple(_renamed(r, stored[str(r.get("rollout"))]) for r in run.episodes
                              if str(r.get("rollout")) in stored),
               path=run.path, notes=run.notes)


def _only(run: Run, ids: Collection[str], side: str) -> Run:
    """``run`` with the rollouts of ``ids`` alone, named ``RUN:SIDE``."""
    kept = {rid: rid for rid in ids}
    return Run(run_id=f"{run.run_id}:{side}", name=f"{run.name}:{side}",
               manifest=_manifest(run, kept, side, {}),
               episodes=tuple(r for r in run.episodes if str(r.get("rollout")) in kept),
               path=run.path, notes=run.notes)


def reference_runs(baseline: Run, run: Run) -> tuple[Run, Run] | None:
    """The drift check's two runs: the reference arm of each of ``run``'s rollouts, in the
    baseline (saved from a session with the same arms) and in ``run``; None when the
    baseline holds none of them."""
    ids = {arm_rollout(base, info.reference) for base, info in arms_of(run.manifest).items()}
    held = ids & {str(rid) for rid in (baseline.manifest.get("rollouts") or {})}
    if not held:
        return None
    side = "+".join(sorted({str(split_arm(rid)[1]) for rid in held}))
    return _only(baseline, held, side), _only(run, held, side)


def arm_runs(run: Run, arms: Collection[str] | None = None) -> tuple[Run, Run]:
    """``run``'s reference arms and its other arms (those of ``arms`` alone, when given) as
    the ``before`` and ``after`` of a comparison (see the module's docstring); a
    :class:`StoreError` when the run declares no arms or names none of ``arms``."""
    found = arms_of(run.manifest)
    if not found:
        raise StoreError(f"run {run.name!r} declares no arms: its rollouts ran once per "
                         "replicate; compare it with a baseline instead")
    known = sorted({a for info in found.values() for a in info.compared})
    if arms is not None and not set(arms) & set(known):
        raise StoreError(f"run {run.name!r} compares no arm named {', '.join(sorted(arms))}; "
                         f"its arms compared with a reference are {', '.join(known)}")
    before_ids: dict[str, str] = {}  # the id in the split run -> the stored id it copies
    after_ids: dict[str, str] = {}
    arm_of: dict[str, str] = {}
    copies: dict[str, list[str]] = {}  # a reference arm's stored id -> the ids it takes
    for base, info in found.items():
        reference = arm_rollout(base, info.reference)
        for arm in info.compared:
            if arms is not None and arm not in arms:
                continue
            own = arm_rollout(base, arm)
            before_ids[own], after_ids[own], arm_of[own] = reference, own, arm
            copies.setdefault(reference, []).append(own)
    before_episodes: list[Mapping[str, Any]] = []
    after_episodes: list[Mapping[str, Any]] = []
    for record in run.episodes:
        rollout = str(record.get("rollout"))
        for own in copies.get(rollout, ()):
            before_episodes.append(_renamed(record, own))
        if rollout in after_ids:
            after_episodes.append(record)
    references = {base: info.reference for base, info in found.items()}
    side = "+".join(dict.fromkeys(references.values()))
    compared = "+".join(dict.fromkeys(arm_of.values()))
    before = Run(run_id=f"{run.run_id}:{side}", name=f"{run.name}:{side}",
                 manifest=_manifest(run, before_ids, side, arm_of),
                 episodes=tuple(before_episodes), path=run.path, notes=run.notes)
    after = Run(run_id=f"{run.run_id}:{compared}", name=f"{run.name}:{compared}",
                manifest=_manifest(run, after_ids, compared, arm_of),
                episodes=tuple(after_episodes), path=run.path, notes=())
    return before, after
