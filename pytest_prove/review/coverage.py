"""Which conditions of a baseline a run left uncompared, and whether the user asked for it.

A gate must never read as a pass because it compared less than the baseline
holds.  A baseline condition the run has no outcome for is either left out on
purpose (deselected with ``-k``/``-m``/``--lf``, skipped, or in a file outside
the paths the session was given) or missing by mistake: the test moved or was
renamed, its parametrize values changed, or its episodes never ended with an
outcome.  Only the first kind may leave a gate passing, reported as *not run*.

What the run selected is read from its manifest (``plan`` and ``selection``,
written by the session), so the session and ``pytest-prove check`` decide alike.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, final

from ..declare.spec import condition_label, quoted_label
from ..store import Run
from ..store.merging import missing_slices
from .reading import RunIndex, read_run

#: The states of a condition a sequential run stopped before its last look (stats' STOPPED,
#: written out: this module does not import the statistics).
_STOPPED = ("worse", "safer", "no change of max_mde", "no worsening of max_mde",
            "within margin")

__all__ = ["Coverage", "coverage", "node_is_within", "run_notes", "unfinished", "unfinished_reason"]

#: Why a baseline condition was not compared, worded for a person; the first three are
#: the user's choice and leave the gate as it is, the others fail it.
DESELECTED = "deselected (-k, -m, --lf or --deselect)"
SKIPPED = "skipped"
OUTSIDE = "in a file outside the paths this session collected"
NARROWED = "not collected: --lf or a node id narrowed what pytest collected"
IGNORED = "in a file that --ignore left out"
NO_OUTCOME_ANYWHERE = "ended without an outcome in every episode"


@final
@dataclass(frozen=True, slots=True)
class Coverage:
    """The baseline's conditions this run has no outcome for, by reason."""

    on_purpose: Mapping[str, tuple[str, ...]]  # reason -> condition labels
    by_mistake: Mapping[str, tuple[str, ...]]
    compared: int  # baseline conditions the run has an outcome for
    total: int  # baseline conditions with an outcome

    @property
    def ok(self) -> bool:
        return not self.by_mistake and self.compared > 0

    def failure(self, baseline: str, after: str) -> str | None:
        """The gate's reason to fail, with the fix, or None when the coverage is fine.

        ``baseline`` is the baseline's own name (what --prove-save-baseline takes), ``after``
        the run's."""
        if self.ok:
            return None
        parts = []
        for reason, labels in self.by_mistake.items():
            shown = ", ".join(map(quoted_label, labels[:6])) + (" ..." if len(labels) > 6
                                                                 else "")
            parts.append(f"{len(labels)} {reason}: {shown}")
        if self.total == 0:
            head = (f"nothing was compared: baseline {baseline!r} holds no condition with an "
                    f"outcome to compare run {after!r} with")
        elif self.compared == 0:
            head = (f"nothing was compared: none of the {self.total} condition(s) of baseline "
                    f"{baseline!r} has an outcome in run {after!r}")
        else:
            head = (f"only {self.compared} of the {self.total} condition(s) of baseline "
                    f"{baseline!r} were compared")
        tail = "; ".join(parts) if parts else "the run left them all out"
        fixes = []
        if any(reason != NO_OUTCOME_ANYWHERE for reason in self.by_mistake):
            fixes.append("A test that moved or was renamed gets new ids: give the rollout a "
                         "stable id with @prove.rollout(id=...) (or target_id in a spec), or "
                         "make a new baseline on purpose with --prove-save-baseline "
                         f"{baseline}")
        if NO_OUTCOME_ANYWHERE in self.by_mistake:
            fixes.append("Missing outcomes are ignored (--prove-missing=ignore), so a "
                         "condition with none cannot be compared: fix what stops its "
                         "episodes, or let the gate test them (--prove-missing=test)")
        return f"{head}; {tail}. " + " ".join(fixes)


def _dropped(table: object) -> dict[tuple[str, str], set[int]]:
    """The replicates a selection dropped, ``{(rollout, condition key): {replicate}}``, from
    the manifest's ``{rollout: {condition key: [replicates]}}``."""
    found: dict[tuple[str, str], set[int]] = {}
    if isinstance(table, Mapping):
        for rollout_id, conditions in table.items():
            if not isinstance(conditions, Mapping):
                continue
            for key, replicates in conditions.items():
                if isinstance(replicates, list):
                    found[(str(rollout_id), str(key))] = {
                        r for r in replicates if isinstance(r, int)}
    return found


def _sizes(plan: object) -> dict[str, int]:
    """Each rollout's replicates a condition, from the manifest's plan."""
    if not isinstance(plan, Mapping):
        return {}
    return {str(rid): int(info.get("replicates") or 0) for rid, info in plan.items()
            if isinstance(info, Mapping)}


def node_is_within(node: str, paths: Iterable[str]) -> bool:
    """Whether the node id ``node`` (rootdir-relative) lies under one of ``paths``: folders,
    files or node ids as the session's arguments named them, rootdir-relative."""
    file_part = node.split("::", 1)[0]
    for path in paths:
        path = path.rstrip("/") or "."
        if path == "." or node == path or node.startswith(path + "::"):
            return True
        if "::" not in path and (file_part == path or file_part.startswith(path + "/")):
            return True
    return False


def _node_of(run: Run, baseline: Run, rollout_id: str) -> str | None:
    for source in (baseline, run):
        info = (source.manifest.get("rollouts") or {}).get(rollout_id) or {}
        node = info.get("node") if isinstance(info, dict) else None
        if isinstance(node, str) and node:
            return node
    # Older baselines: a rollout without id= is known by its node id.
    return rollout_id if "::" in rollout_id else None


def _keys(table: object) -> dict[str, set[str]]:
    """``{rollout: [condition keys]}`` from a manifest, tolerating what is not that."""
    found: dict[str, set[str]] = {}
    if isinstance(table, Mapping):
        for rollout_id, keys in table.items():
            if isinstance(keys, Mapping):
                keys = keys.get("conditions")
            if isinstance(keys, list):
                found[str(rollout_id)] = {str(k) for k in keys}
    return found


def _look_alikes(baseline: Run, run: Run, baseline_rollouts: set[str],
                 indexes: tuple[RunIndex, RunIndex]) -> dict[str, str]:
    """Rollouts of the baseline that the run has not, each mapped to a rollout that only the
    run has and that shares its short name or its set of conditions: a move or a rename,
    which a test path that leaves the old file out would otherwise hide."""
    def conditions(index: RunIndex) -> dict[str, frozenset[str]]:
        found: dict[str, set[str]] = defaultdict(set)
        for rollout_id, key in index.conditions:
            found[rollout_id].add(key)
        return {rid: frozenset(keys) for rid, keys in found.items()}

    def short(source: Run, rollout_id: str) -> str:
        info = (source.manifest.get("rollouts") or {}).get(rollout_id)
        return str(info.get("label") or rollout_id) if isinstance(info, Mapping) else rollout_id

    old, new = conditions(indexes[0]), conditions(indexes[1])
    gone = baseline_rollouts - set(new)
    arrived = set(new) - set(old)
    found = {}
    for rollout_id in sorted(gone):
        for other in sorted(arrived):
            if short(baseline, rollout_id) == short(run, other) or old[rollout_id] == new[other]:
                found[rollout_id] = other
                break
    return found


def coverage(baseline: Run, run: Run, *, missing_tested: bool = True,
             indexes: tuple[RunIndex, RunIndex] | None = None) -> Coverage:
    """Classify every baseline condition that ``run`` has no outcome for.

    With ``missing_tested``, a condition whose episodes all ended without an outcome is
    compared (its share of missing outcomes is tested), not left out.  ``indexes``: both
    runs as :func:`.reading.read_run` reads them (read here if not given)."""
    if indexes is None:
        indexes = (read_run(baseline), read_run(run))
    labels: dict[tuple[str, str], str] = {}
    for found, entry in indexes[0].conditions.items():
        # With missing outcomes tested, a condition none of whose episodes has an outcome
        # is still compared (on its share of them).
        condition = entry.condition if missing_tested else entry.outcome_condition
        if condition is not None:
            labels[found] = condition_label(condition)
    ran = set(indexes[1].conditions)
    with_outcome = {identity for identity, entry in indexes[1].conditions.items()
                    if entry.outcome_condition is not None}
    manifest: Mapping[str, Any] = run.manifest
    plan = _keys(manifest.get("plan"))
    selection = manifest.get("selection")
    selection = selection if isinstance(selection, Mapping) else {}
    dropped = _dropped(selection.get("deselected"))
    sizes = _sizes(manifest.get("plan"))
    deselected = {(rid, key) for (rid, key), replicates in dropped.items()
                  if len(replicates) >= sizes.get(rid, 0)}
    skipped = _keys(selection.get("skipped"))
    paths = [str(p) for p in selection.get("paths") or [] if isinstance(p, str)]
    ignored = [str(p) for p in selection.get("ignored") or [] if isinstance(p, str)]
    skipped_files = {str(p) for p in selection.get("skipped_files") or [] if isinstance(p, str)}
    narrowed = bool(selection.get("narrowed"))
    moved_to = _look_alikes(baseline, run, {rollout for rollout, _ in labels}, indexes)
    many = len({rollout for rollout, _ in labels}) > 1
    on_purpose: dict[str, list[str]] = defaultdict(list)
    by_mistake: dict[str, list[str]] = defaultdict(list)
    compared = 0
    for (rollout_id, key), label in sorted(labels.items()):
        if (rollout_id, key) in with_outcome or (missing_tested and (rollout_id, key) in ran):
            compared += 1
            continue
        shown = f"{rollout_id} · {label}" if many else label
        if (rollout_id, key) in deselected:
            on_purpose[DESELECTED].append(shown)
        elif key in skipped.get(rollout_id, ()):
            on_purpose[SKIPPED].append(shown)
        elif (rollout_id, key) in ran:
            by_mistake[NO_OUTCOME_ANYWHERE].append(shown)
        elif key in plan.get(rollout_id, ()):
            by_mistake["were collected but did not run"].append(shown)
        elif rollout_id in plan and narrowed:
            on_purpose[NARROWED].append(shown)
        elif rollout_id in plan:
            by_mistake[f"are no longer collected in {rollout_id} (its parametrize values or "
                       "axes changed)"].append(shown)
        elif rollout_id in moved_to:
            by_mistake[f"belong to rollout {rollout_id}, which looks moved or renamed to "
                       f"{moved_to[rollout_id]} (same name or conditions, a new id)"
                       ].append(shown)
        else:
            node = _node_of(run, baseline, rollout_id) if "selection" in manifest else None
            if node is not None and node.split("::", 1)[0] in skipped_files:
                on_purpose[SKIPPED].append(shown)
            elif node is not None and node_is_within(node, ignored):
                on_purpose[IGNORED].append(shown)
            elif node is not None and narrowed and node_is_within(
                    node, [p.split("::", 1)[0] for p in paths]):
                on_purpose[NARROWED].append(shown)
            elif node is not None and not node_is_within(node, paths):
                on_purpose[OUTSIDE].append(shown)
            else:
                by_mistake[f"belong to rollout {rollout_id}, which this session did not "
                           "collect (was it moved or renamed?)"].append(shown)
    return Coverage(on_purpose={k: tuple(v) for k, v in on_purpose.items()},
                    by_mistake={k: tuple(v) for k, v in by_mistake.items()},
                    compared=compared, total=len(labels))


def _stopped(sequential: object) -> set[tuple[str, str]]:
    """The conditions a sequential run decided before their last look (its manifest's
    ``sequential``): their replicates not run were never meant to be."""
    found: set[tuple[str, str]] = set()
    conditions = sequential.get("conditions") if isinstance(sequential, Mapping) else None
    if not isinstance(conditions, Mapping):
        return found
    for rollout_id, keys in conditions.items():
        if isinstance(keys, Mapping):
            found.update((str(rollout_id), str(key)) for key, info in keys.items()
                         if isinstance(info, Mapping)
                         and info.get("state") in _STOPPED)
    return found


def unfinished(run: Run) -> int | None:
    """Replicates the run selected (its plan, less what it left out on purpose) that have no
    episode; None when the run has no plan to tell (a run of an older pytest-prove)."""
    plan = run.manifest.get("plan")
    if run.is_baseline or not isinstance(plan, Mapping):
        return None
    selection = run.manifest.get("selection")
    selection = selection if isinstance(selection, Mapping) else {}
    dropped = _dropped(selection.get("deselected"))
    skipped = _keys(selection.get("skipped"))
    have = {(str(r["rollout"]), str(r["condition_key"]), int(r["replicate"]))
            for r in run.episodes}
    stopped = _stopped(run.manifest.get("sequential"))
    missing = 0
    for rollout_id, info in plan.items():
        if not isinstance(info, Mapping):
            continue
        replicates = int(info.get("replicates") or 0)
        for key in info.get("conditions") or []:
            if key in skipped.get(str(rollout_id), ()) or (str(rollout_id), str(key)) in stopped:
                continue
            left_out = dropped.get((str(rollout_id), str(key)), set())
            missing += sum(1 for r in range(replicates)
                           if r not in left_out and (str(rollout_id), str(key), r) not in have)
    return missing


def unfinished_reason(run: Run) -> str | None:
    """Why ``run`` cannot be read as finished (capped, or replicates it selected have no
    episode), or None when it is complete or left out only what it meant to."""
    if run.is_baseline or run.status == "complete":
        return None
    # A run whose writer never wrote its final manifest (killed, the disk full, or still
    # being written): whatever its episodes hold, nothing says it left anything out on
    # purpose.
    cut_short = "ended" in run.manifest and run.manifest["ended"] is None
    if cut_short and run.manifest.get("merged"):
        return (f"run {run.name!r} is a merge that stopped before writing its final manifest "
                "(killed, or the disk filled), so nothing says it holds every shard's "
                "episodes; merge the shards again into a new name (pytest-prove merge RUN... "
                "--name NEW) and delete this run")
    merged = missing_slices(run.manifest, run.name)
    if merged is not None:
        return merged
    if run.status == "capped":
        return (f"run {run.name!r} is capped: the token cap stopped it before it finished; "
                f"finish it with pytest --prove-resume={run.name}")
    missing = unfinished(run)
    if not missing and cut_short:
        return (f"run {run.name!r} did not finish: its session stopped before writing the "
                "run's final manifest (killed, the disk filled, or it is still running); "
                f"finish it with pytest --prove-resume={run.name}")
    if missing == 0:
        return None
    count = "" if missing is None else f": {missing} replicates it selected have no episode"
    return f"run {run.name!r} is incomplete{count}; finish it with pytest --prove-resume={run.name}"


def run_notes(run: Run) -> list[str]:
    """What a reader of a comparison should know of ``run``: how it is unfinished."""
    reason = unfinished_reason(run)
    if reason is not None:
        return [reason]
    if not run.is_baseline and run.status != "complete":
        return [f"run {run.name!r} ran only part of its sweep, on purpose (-k, -m, a path or "
                "a skip)"]
    return []
