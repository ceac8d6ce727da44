"""From two stored runs to the rows the statistics engine tests.

This is where episodes become counts: twins are matched by replicate when the
runs share a salt, conditions of the baseline that the new run did not cover
are set aside as *not run*, and a condition that ran more than one case is
refused by name before anything is compared.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, final

from ..declare.chaos import FaultCount, chaos_differences, chaos_refusal, count_faults
from ..declare.spec import NO_OUTCOME_EVENT, Declaration, SpecError, condition_label
from ..errors import ProveError
from ..record import MISSING_MODES, Missing, has_outcome, left_out_reason
from ..store import Run
from ..store.merging import manifest_declarations
from .reading import RunIndex, read_run

if TYPE_CHECKING:  # the statistics load with the first row made, not with the listing of runs
    from ..stats import RowInput

__all__ = ["MISSING_MODES", "NO_OUTCOME", "CaseMixError", "DeclarationError", "Missing",
           "Prepared", "RefusalError", "check_declarations", "declarations_of", "event_flags",
           "group_episodes", "prepare", "rollout_label"]

Key = tuple[str, str]  # (rollout id, condition key)

#: The event of the row that tests missing outcomes: an episode ended without one.
NO_OUTCOME: Final = NO_OUTCOME_EVENT



class CaseMixError(ProveError, ValueError):
    """Some condition's episodes recorded more than one case_id."""


class RefusalError(ProveError, ValueError):
    """A question these runs cannot answer (nothing to compare, no outcome named), with the
    reason and the fix."""


class DeclarationError(RefusalError):
    """A rollout declares its outcomes otherwise in one run than in the other: a verdict
    would read one run under the other's declaration."""


def _terms(declaration: object) -> dict[str, list[str]] | None:
    """What a verdict reads of a stored declaration: its outcomes, failures and successes
    (the events are failures then successes), each as a sorted list."""
    if not isinstance(declaration, Mapping):
        return None
    return {part: sorted(map(str, declaration.get(part) or ()))
            for part in ("outcomes", "failures", "successes")}


def check_declarations(before: Run, after: Run) -> None:
    """Refuse, with the fix, when a rollout both runs hold declares its outcomes, failures
    or successes otherwise in each (merge refuses shards that differ the same way)."""
    old, new = manifest_declarations(before.manifest), manifest_declarations(after.manifest)
    named = f"baseline:{before.name}" if before.is_baseline else before.name
    problems = []
    for rollout_id in sorted(set(old) & set(new)):
        was, now = _terms(old[rollout_id]), _terms(new[rollout_id])
        if was is None or now is None or was == now:
            continue
        changed = "; ".join(
            f"{part} {was[part]} in {named}, {now[part]} in {after.name}"
            for part in ("failures", "successes", "outcomes") if was[part] != now[part])
        problems.append(f"{rollout_label(after, rollout_id)}: {changed}")
    if problems:
        shown = " | ".join(problems[:4]) + (" ..." if len(problems) > 4 else "")
        raise DeclarationError(
            f"refused to compare: the declarations differ ({shown}), so a verdict would read "
            f"{named} under the declaration of {after.name}. If the change is on "
            f"purpose, review it and replace the baseline (pytest --prove-baseline="
            f"{before.name} --prove-update-baseline, or --prove-save-baseline={before.name}); "
            "otherwise restore the declaration")


@final
@dataclass(frozen=True, slots=True)
class Prepared:
    """The rows to test, and what was left out and why."""

    rows: tuple[RowInput, ...]
    paired: bool
    events: tuple[str, ...]
    not_run: tuple[str, ...]  # labels of baseline conditions this run did not cover
    new: tuple[str, ...]  # labels of conditions only the new run has
    left_out: Mapping[str, int]  # episodes not compared, by reason, over both runs
    mirrored: Mapping[str, str] = field(default_factory=dict)  # success -> its mirror failure
    missing: Missing = "test"  # how episodes without an outcome were read
    no_outcome: Mapping[str, int] = field(default_factory=dict)  # label -> episodes, none
    # with an outcome, of conditions not compared (missing outcomes ignored)
    unpaired: Mapping[str, int] = field(default_factory=dict)  # arm -> replicates, no twin
    #: The (rollout id, condition key) of each row, in the order of ``rows``.
    keys: tuple[Key, ...] = ()
    #: Rollouts whose injected faults differ between the runs, compared as asked
    #: (``chaos_differs``): (rollout, before's chaos, after's), as a person reads them.
    chaos: tuple[tuple[str, str, str], ...] = ()
    #: The faults injected, by arm ("before", "after") and condition label (runs with chaos).
    faults: Mapping[str, Mapping[str, FaultCount]] = field(default_factory=dict)
    #: Every compared condition's label by (rollout id, condition key): those with rows,
    #: and those of a rollout that declares metrics only (compared on its metric rows).
    compared: Mapping[Key, str] = field(default_factory=dict)
    #: The conditions of rollouts that declare metrics only with twins (or, unpaired,
    #: episodes) that ended in both runs: compared on their metric rows, with no outcome row.
    measured: frozenset[Key] = frozenset()


def declarations_of(*runs: Run) -> dict[str, Declaration]:
    """Every rollout's declaration, the later run's winning where both have one."""
    found: dict[str, Declaration] = {}
    for run in runs:
        for rollout_id, info in (run.manifest.get("rollouts") or {}).items():
            try:
                found[rollout_id] = Declaration.from_json(info["declaration"])
            except (KeyError, TypeError, SpecError):
                continue
    return found


def rollout_label(run: Run, rollout_id: str, among: Sequence[str] = ()) -> str:
    """A rollout's short name (its function's), or its id where another rollout of
    ``among`` has the same short name (two files may each hold a ``test_r``)."""
    def short(rid: str) -> str:
        info = (run.manifest.get("rollouts") or {}).get(rid) or {}
        return str(info.get("label") or rid)

    name = short(rollout_id)
    if any(other != rollout_id and short(other) == name for other in among):
        return rollout_id
    return name


def check_chaos(before: Run, after: Run, *, chaos_differs: bool = False,
                ) -> tuple[tuple[str, str, str], ...]:
    """The rollouts whose injected faults differ between the runs; refused unless
    ``chaos_differs`` (the user asked for exactly that comparison: whether the agent survives
    the faults). Twins ran on the same seeds, but under other faults they answer another
    question than "did the change make it worse"."""
    found = tuple(chaos_differences(before.manifest.get("rollouts"),
                                    after.manifest.get("rollouts")))
    if found and not chaos_differs:
        raise RefusalError(chaos_refusal(found, before.name, after.name))
    return found


def check_cases(*runs: Run, indexes: Sequence[RunIndex] | None = None) -> None:
    """Refuse, by name, every condition whose episodes ran more than one case.

    ``indexes``: the runs already read by :func:`.reading.read_run`, in the same order."""
    problems: list[str] = []
    for number, run in enumerate(runs):
        index = indexes[number] if indexes is not None else read_run(run)
        cases: dict[tuple[str, str], set[str]] = {}
        labels: dict[tuple[str, str], str] = {}
        for key, entry in index.conditions.items():
            if entry.cases:
                cases[key] = set(entry.cases)
                labels[key] = condition_label(entry.case_condition or {})
        for key, found in sorted(cases.items()):
            if len(found) > 1:
                shown = ", ".join(sorted(found)[:8]) + (", ..." if len(found) > 8 else "")
                problems.append(
                    f"condition {labels[key]} of {rollout_label(run, key[0])} in run "
                    f"{run.name!r} ran {len(found)} cases ({shown})"
                )
    if problems:
        raise CaseMixError(
            "refused to compare: " + "; ".join(problems) + ". Each case must be its own "
            "condition: make the case a parametrize argument (or an [axes.NAME] of the spec) "
            "whose values are the cases, and pick the case from it, never from the seed"
        )


def _counts(before: Mapping[int, bool], after: Mapping[int, bool],
            twins: Sequence[int]) -> tuple[int, int, int]:
    """(both, before only, after only): twins with the event in both runs, in one only."""
    both = sum(1 for r in twins if before[r] and after[r])
    before_only = sum(1 for r in twins if before[r] and not after[r])
    after_only = sum(1 for r in twins if not before[r] and after[r])
    return both, before_only, after_only


def _flags(event: str, outcomes: Mapping[int, Any]) -> dict[int, bool]:
    """:func:`event_flags` of replicates given by their outcome (None: without one)."""
    if event == NO_OUTCOME:
        return {r: outcome is None for r, outcome in outcomes.items()}
    return {r: outcome == event for r, outcome in outcomes.items() if outcome is not None}


def event_flags(event: str, records: Mapping[int, Mapping[str, Any]]) -> dict[int, bool]:
    """Whether each replicate had ``event``, as its row counts it: among the episodes with
    an outcome for a declared event; among every episode for :data:`NO_OUTCOME`."""
    if event == NO_OUTCOME:
        return {r: not has_outcome(rec) for r, rec in records.items()}
    return {r: rec["outcome"] == event for r, rec in records.items() if has_outcome(rec)}


Arms = dict[str, dict[int, Mapping[str, Any]]]


def group_episodes(before: Run, after: Run) -> tuple[dict[Key, Arms], dict[Key, Mapping[str, Any]],
                                                     dict[str, int]]:
    """Every episode by condition, arm (``before``, ``after``) and replicate; each condition's
    axis values; and the episodes without an outcome, by reason and arm."""
    every: dict[Key, Arms] = defaultdict(lambda: {"before": {}, "after": {}})
    conditions: dict[Key, Mapping[str, Any]] = {}
    left_out: dict[str, int] = defaultdict(int)
    for arm, run in (("before", before), ("after", after)):
        for record in run.episodes:
            key = (str(record["rollout"]), str(record["condition_key"]))
            conditions.setdefault(key, record.get("condition") or {})
            every[key][arm][int(record["replicate"])] = record
            if not has_outcome(record):
                left_out[f"{left_out_reason(record)} ({arm})"] += 1
    return every, conditions, left_out


_NONE: Final[dict[int, Any]] = {}


def _grouped(before: RunIndex, after: RunIndex
             ) -> tuple[dict[Key, tuple[Mapping[int, Any], Mapping[int, Any]]],
                        dict[Key, Mapping[str, Any]], dict[str, int]]:
    """:func:`group_episodes` of runs read by :func:`.reading.read_run`: each replicate's
    outcome (None: without one) by condition and arm, rather than its episode."""
    every: dict[Key, tuple[Mapping[int, Any], Mapping[int, Any]]] = {}
    conditions: dict[Key, Mapping[str, Any]] = {}
    for key, entry in before.conditions.items():
        found = after.conditions.get(key)
        every[key] = (entry.outcomes, _NONE if found is None else found.outcomes)
        conditions[key] = entry.condition
    for key, entry in after.conditions.items():
        if key not in every:
            every[key] = (_NONE, entry.outcomes)
            conditions[key] = entry.condition
    left_out: dict[str, int] = defaultdict(int)
    for arm, index in (("before", before), ("after", after)):
        for reason, count in index.left_out.items():
            left_out[f"{reason} ({arm})"] += count
    return every, conditions, left_out


def _row(label: str, event: str, worse_when: Literal["rise", "fall"],
         before: Mapping[int, bool], after: Mapping[int, bool], paired: bool) -> RowInput:
    """One row: whether each replicate had the event, before and after; twins matched by
    replicate when ``paired`` (the replicates both maps hold)."""
    from ..stats import Pairs, RowInput

    if paired:
        twins = sorted(set(before) & set(after))
        both, before_only, after_only = _counts(before, after, twins)
        n = len(twins)
        return RowInput(condition=label, event=event, worse_when=worse_when,
                        x_before=both + before_only, n_before=n,
                        x_after=both + after_only, n_after=n,
                        pairs=Pairs(n=n, both=both, before_only=before_only,
                                    after_only=after_only))
    return RowInput(condition=label, event=event, worse_when=worse_when,
                    x_before=sum(before.values()), n_before=len(before),
                    x_after=sum(after.values()), n_after=len(after))


def prepare(before: Run, after: Run, events: Sequence[str] | None = None,
            *, paired: bool | None = None, missing: Missing = "test",
            chaos_differs: bool = False,
            indexes: tuple[RunIndex, RunIndex] | None = None) -> Prepared:
    """The (condition, event) rows of ``after`` against ``before``.

    Runs that share a salt are paired (twins matched by replicate, both with an
    outcome) unless ``paired=False``; otherwise each arm counts all its episodes
    that ended in an outcome.  With ``missing="test"`` a condition where any episode of
    either run ended without an outcome (no outcome, errored, timed out, crashed) also gets
    the row :data:`NO_OUTCOME`: the share of its episodes without one, a rise being worse, so
    that failures which hide as missing outcomes are seen.  Runs where every episode has an
    outcome get no such row.

    Runs whose rollouts injected different faults (chaos) are refused unless
    ``chaos_differs``; see :func:`check_chaos`.

    ``indexes``: both runs as :func:`.reading.read_run` reads them (read here if not given).
    """
    if indexes is None:
        indexes = (read_run(before), read_run(after))
    check_cases(before, after, indexes=indexes)
    check_declarations(before, after)
    chaos = check_chaos(before, after, chaos_differs=chaos_differs)
    declarations = declarations_of(before, after)
    if paired is None:
        paired = bool(before.salt) and before.salt == after.salt
    elif paired and before.salt != after.salt:
        raise ValueError(
            f"runs {before.name!r} and {after.name!r} have different salts, so their episodes "
            "have no twins; compare them unpaired, or run the new one with --prove-baseline"
        )
    if missing not in MISSING_MODES:
        raise ValueError(f"missing must be one of {', '.join(MISSING_MODES)}, got {missing!r}")
    every, conditions, left_out = _grouped(*indexes)

    chosen = tuple(events) if events else ()
    if chosen:
        known = {e for d in declarations.values() for e in d.events}
        unknown = [e for e in chosen if e not in known]
        if unknown:
            raise SpecError(
                f"event {unknown[0]!r} is not a declared failure or success of these runs; "
                f"declared: {', '.join(sorted(known)) or 'none'}"
            )
    rollouts = sorted({k[0] for k in every})
    many = len(rollouts) > 1
    rows: list[RowInput] = []
    keys: list[Key] = []
    not_run: list[str] = []
    new: list[str] = []
    no_outcome: dict[str, int] = {}
    unpaired: dict[str, int] = defaultdict(int)
    used_events: list[str] = []
    mirrored: dict[str, str] = {}
    compared_labels: dict[Key, str] = {}
    measured: set[Key] = set()
    for key in sorted(every):
        rollout_id, _ = key
        label = condition_label(conditions[key])
        if many:
            label = f"{rollout_label(after, rollout_id, rollouts)} · {label}"
        declaration = declarations.get(rollout_id)
        if declaration is None:
            continue
        b_all, a_all = every[key]
        if not a_all:
            not_run.append(label)
            continue
        if not b_all:
            new.append(label)
            continue
        if paired:
            for arm, mine, theirs in (("before", b_all, a_all), ("after", a_all, b_all)):
                alone = len(set(mine) - set(theirs))
                if alone:
                    unpaired[arm] += alone
        b = {r: outcome for r, outcome in b_all.items() if outcome is not None}
        a = {r: outcome for r, outcome in a_all.items() if outcome is not None}
        twins = set(b) & set(a) if paired else set()
        compared = bool(twins) if paired else bool(b and a)
        lacking = len(b) < len(b_all) or len(a) < len(a_all)
        tests_missing = missing == "test" and lacking and (
            not paired or bool(set(b_all) & set(a_all)))
        if not compared and not tests_missing:
            if not a:
                no_outcome[label] = len(a_all)
            else:
                not_run.append(label)
            continue
        wanted = [e for e in chosen if e in declaration.events] if chosen else None
        tested = declaration.tested(wanted)
        mirrored.update({s: f for s, f in declaration.mirrors.items()
                         if f in tested and s in (wanted or declaration.events)})
        if compared and (tested or declaration.metrics_only):
            compared_labels[key] = label
            if declaration.metrics_only:
                measured.add(key)
        if compared:
            for event in tested:
                if event not in used_events:
                    used_events.append(event)
                rows.append(_row(label, event, declaration.worse_when(event),
                                 _flags(event, b), _flags(event, a), paired))
                keys.append(key)
        if tests_missing:
            if NO_OUTCOME not in used_events:
                used_events.append(NO_OUTCOME)
            rows.append(_row(label, NO_OUTCOME, "rise", _flags(NO_OUTCOME, b_all),
                             _flags(NO_OUTCOME, a_all), paired))
            keys.append(key)
            compared_labels[key] = label

    def label_of(record: Mapping[str, Any]) -> str:
        label = condition_label(record.get("condition") or {})
        return f"{rollout_label(after, str(record['rollout']), rollouts)} · {label}" \
            if many else label

    faults = {arm: found for arm, index in (("before", indexes[0]), ("after", indexes[1]))
              if (found := count_faults(index.chaos, label_of))}
    return Prepared(rows=tuple(rows), paired=paired, events=tuple(used_events),
                    not_run=tuple(not_run), new=tuple(new), left_out=dict(left_out),
                    mirrored=mirrored, missing=missing, no_outcome=no_outcome,
                    unpaired=dict(unpaired), keys=tuple(keys), chaos=chaos, faults=faults,
                    compared=compared_labels, measured=frozenset(measured))
