"""From two stored runs to the rows the statistics engine tests.

This is where episodes become counts: twins are matched by replicate when the
runs share a salt, conditions of the baseline that the new run did not cover
are set aside as *not run*, and a condition that ran more than one case is
refused by name before anything is compared.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, final

from ..declare.spec import Declaration, SpecError, condition_label
from ..errors import ProveError
from ..stats import Pairs, RowInput
from ..store import Run

__all__ = ["CaseMixError", "Prepared", "RefusalError", "declarations_of", "prepare",
           "rollout_label"]


class CaseMixError(ProveError, ValueError):
    """Some condition's episodes recorded more than one case_id."""


class RefusalError(ProveError, ValueError):
    """A question these runs cannot answer (nothing to compare, no outcome named), with the
    reason and the fix."""


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


def _has_outcome(record: Mapping[str, Any]) -> bool:
    return record.get("error") is None and record.get("outcome") is not None


def _left_out_reason(record: Mapping[str, Any]) -> str:
    error = record.get("error") or {}
    kind = str(error.get("kind", "errored"))
    return {"no_outcome": "no outcome", "exception": "errored"}.get(kind, kind)


def check_cases(*runs: Run) -> None:
    """Refuse, by name, every condition whose episodes ran more than one case."""
    problems: list[str] = []
    for run in runs:
        cases: dict[tuple[str, str], set[str]] = defaultdict(set)
        labels: dict[tuple[str, str], str] = {}
        for record in run.episodes:
            case = (record.get("meta") or {}).get("case_id")
            if case is None:
                continue
            key = (str(record["rollout"]), str(record["condition_key"]))
            cases[key].add(str(case))
            labels[key] = condition_label(record.get("condition") or {})
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


def prepare(before: Run, after: Run, events: Sequence[str] | None = None,
            *, paired: bool | None = None) -> Prepared:
    """The (condition, event) rows of ``after`` against ``before``.

    Runs that share a salt are paired (twins matched by replicate, both with an
    outcome) unless ``paired=False``; otherwise each arm counts all its episodes
    that ended in an outcome.
    """
    check_cases(before, after)
    declarations = declarations_of(before, after)
    if paired is None:
        paired = bool(before.salt) and before.salt == after.salt
    elif paired and before.salt != after.salt:
        raise ValueError(
            f"runs {before.name!r} and {after.name!r} have different salts, so their episodes "
            "have no twins; compare them unpaired, or run the new one with --prove-baseline"
        )
    grouped: dict[tuple[str, str], dict[str, dict[int, Mapping[str, Any]]]] = defaultdict(
        lambda: {"before": {}, "after": {}}
    )
    conditions: dict[tuple[str, str], Mapping[str, Any]] = {}
    left_out: dict[str, int] = defaultdict(int)
    for arm, run in (("before", before), ("after", after)):
        for record in run.episodes:
            key = (str(record["rollout"]), str(record["condition_key"]))
            conditions.setdefault(key, record.get("condition") or {})
            arms = grouped[key]  # the condition exists even when nothing had an outcome
            if _has_outcome(record):
                arms[arm][int(record["replicate"])] = record
            else:
                left_out[f"{_left_out_reason(record)} ({arm})"] += 1

    chosen = tuple(events) if events else ()
    if chosen:
        known = {e for d in declarations.values() for e in d.events}
        unknown = [e for e in chosen if e not in known]
        if unknown:
            raise SpecError(
                f"event {unknown[0]!r} is not a declared failure or success of these runs; "
                f"declared: {', '.join(sorted(known)) or 'none'}"
            )
    rollouts = sorted({k[0] for k in grouped})
    many = len(rollouts) > 1
    rows: list[RowInput] = []
    not_run: list[str] = []
    new: list[str] = []
    used_events: list[str] = []
    for key in sorted(grouped, key=lambda k: (k[0], k[1])):
        rollout_id, _ = key
        label = condition_label(conditions[key])
        if many:
            label = f"{rollout_label(after, rollout_id, rollouts)} · {label}"
        arms = grouped[key]
        declaration = declarations.get(rollout_id)
        if declaration is None:
            continue
        if not arms["after"]:
            not_run.append(label)
            continue
        if not arms["before"]:
            new.append(label)
            continue
        b, a = arms["before"], arms["after"]
        twins = sorted(set(b) & set(a)) if paired else []
        if paired and not twins:
            not_run.append(label)
            continue
        for event in chosen or declaration.events:
            if event not in declaration.events:
                continue
            if event not in used_events:
                used_events.append(event)
            worse_when = declaration.worse_when(event)
            if paired:
                both = sum(1 for r in twins
                           if b[r]["outcome"] == event and a[r]["outcome"] == event)
                before_only = sum(1 for r in twins
                                  if b[r]["outcome"] == event and a[r]["outcome"] != event)
                after_only = sum(1 for r in twins
                                 if b[r]["outcome"] != event and a[r]["outcome"] == event)
                n = len(twins)
                rows.append(RowInput(
                    condition=label, event=event, worse_when=worse_when,
                    x_before=both + before_only, n_before=n,
                    x_after=both + after_only, n_after=n,
                    pairs=Pairs(n=n, both=both, before_only=before_only, after_only=after_only),
                ))
            else:
                rows.append(RowInput(
                    condition=label, event=event, worse_when=worse_when,
                    x_before=sum(1 for r in b.values() if r["outcome"] == event),
                    n_before=len(b),
                    x_after=sum(1 for r in a.values() if r["outcome"] == event),
                    n_after=len(a),
                ))
    return Prepared(rows=tuple(rows), paired=paired, events=tuple(used_events),
                    not_run=tuple(not_run), new=tuple(new), left_out=dict(left_out))
