"""Whether a comparison, or a run about to become a baseline, can vouch for every condition.

The gate fails closed (docs/reliability.md, "The gate fails closed"): a row that could not
have shown a change of ``max_mde`` is not a pass, whatever the verdict word says of the
other rows.  Two kinds are told apart, because their fixes differ:

* a row that **lost twins**: both runs ran more twins than it compares (episodes of either
  run ended without an outcome), and with every twin it would have seen max_mde.  An
  outage in the baseline or the run is the usual cause; it fails whenever ``too-small`` is
  among the verdicts the gate fails on (``--prove-allow-underpowered`` does not spare it:
  the design was fine, the episodes were lost);
* a row that is **blind by design**: too few replicates even with every twin.  It fails
  on ``too-small`` unless the user allowed an underpowered design.

A condition none of whose twins has an outcome in both runs has no row for its events at
all (only its ``no outcome`` row): it lost every twin, and fails the same way.

:func:`thin_baseline` asks the same question of a run about to be saved as a baseline: a
condition whose episodes with an outcome are too few for the design check, while every
episode it ran would have been enough, lost them (an outage) and would make every later
gate blind.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import final

from ..declare.spec import condition_label, quoted_label
from ..record import has_outcome
from ..stats import Comparison, Row, design_check, limits
from ..store import Run
from ..store.baselines import MAX_ERRORED
from .pairing import NO_OUTCOME, Prepared, declarations_of
from .reading import RunIndex

__all__ = ["Vouch", "thin_baseline", "vouch"]

Key = tuple[str, str]


@final
@dataclass(frozen=True, slots=True)
class Vouch:
    """The rows the gate fails on for being blind, why (with the fix), and what it was told
    not to fail on (said whenever it spared something)."""

    failing: tuple[Row, ...]  # blind rows, undecided, that fail the gate
    reasons: tuple[str, ...]  # lines for the gate's reasons
    notes: tuple[str, ...]  # what the gate was told not to fail on, when it mattered


def _shown(labels: Sequence[str], most: int = 5) -> str:
    return ", ".join(map(quoted_label, labels[:most])) + (" ..." if len(labels) > most else "")


def _sizes(key: Key, paired: bool, indexes: tuple[RunIndex, RunIndex]
           ) -> tuple[int, int, int, int]:
    """(planned before, planned after, without an outcome before, after) for a condition:
    the twins both runs ran (paired), or each run's episodes."""
    found = [index.conditions.get(key) for index in indexes]
    outcomes = [{} if entry is None else entry.outcomes for entry in found]
    lost = [sum(1 for o in arm.values() if o is None) for arm in outcomes]
    if paired:
        twins = set(outcomes[0]) & set(outcomes[1])
        return len(twins), len(twins), lost[0], lost[1]
    return len(outcomes[0]), len(outcomes[1]), lost[0], lost[1]


def _would_see(row: Row, planned: tuple[int, int], comparison: Comparison) -> bool:
    """Whether the row, at its base rate, would see max_mde in every direction it is blind
    to with the twins (episodes) both runs planned."""
    n_before, n_after = planned
    if n_before <= 0 or n_after <= 0:
        return False
    x = min(n_before, round(row.before * n_before))
    found = limits(x, n_before, None if row.paired else n_after, paired=row.paired,
                   alpha=comparison.alpha, power=comparison.power)
    chosen = {"rise": found.rise, "fall": found.fall}
    return all(chosen[d].sees(comparison.max_mde) for d in row.blind)


def _outage(prepared: Prepared, indexes: tuple[RunIndex, RunIndex], max_errored: float,
            before: str, after: str) -> tuple[list[str], list[str]]:
    """Conditions compared whose baseline episodes ended without an outcome in a share above
    ``max_errored`` (reasons), and those above the default that a widened bound let through
    (notes). What is left of such a condition is what an outage let through, not a sample
    of it; a run's own share is tested by its ``no outcome`` row, a baseline's only reads
    as "safer" there. With missing outcomes ignored (``--prove-missing=ignore``) the run has
    no such row, so its share is bounded the same way: else a change whose failures end
    without an outcome is left out of the comparison and passes."""
    reasons: list[str] = []
    notes: list[str] = []
    labels = dict(zip(prepared.keys, (r.condition for r in prepared.rows), strict=False))
    arms = [(0, before)] + ([(1, after)] if prepared.missing == "ignore" else [])
    for key, label in labels.items():
        for arm, named in arms:
            entry = indexes[arm].conditions.get(key)
            if entry is None or not entry.outcomes:
                continue
            lost = sum(1 for o in entry.outcomes.values() if o is None)
            total = len(entry.outcomes)
            share = lost / total
            if share > max_errored + 1e-12:
                fix = (f"Save the baseline anew from a run without the outage (pytest-prove "
                       f"show {named} -v lists the endings)" if arm == 0 else
                       f"Find why (pytest-prove show {named} -v lists the endings), fix it "
                       "and run again; --prove-missing=ignore leaves them out of the "
                       "comparison, so their share is not tested")
                reasons.append(
                    f"condition {quoted_label(label)}: {lost} of the {total} episodes of "
                    f"{named!r} ended without an outcome ({share:.2f}, more than "
                    f"{max_errored:g}), so what is left of it is what an outage let through, "
                    "not a sample of the agent, and no verdict on it can be vouched for. "
                    f"{fix}; --prove-max-errored raises the bound on purpose")
            elif share > MAX_ERRORED + 1e-12:
                notes.append(f"condition {quoted_label(label)}: {share:.2f} of the episodes "
                             f"of {named!r} ended without an outcome, above the default bound "
                             f"{MAX_ERRORED:g}, within --prove-max-errored {max_errored:g}")
    return reasons, notes


def vouch(comparison: Comparison | None, prepared: Prepared,
          indexes: tuple[RunIndex, RunIndex], *, fail_on: Collection[str],
          allow_underpowered: bool, before: str, after: str,
          max_errored: float = MAX_ERRORED, sequential: bool = False) -> Vouch:
    """The blind rows that fail the gate, with reasons and fixes (see the module).

    ``sequential``: the rows are a sequential run's, each condition read at the look it
    stopped at; the twins after it were never meant to be read, so none is lost."""
    reasons, notes = _outage(prepared, indexes, max_errored, before, after)
    failing: list[Row] = []
    small = "too-small" in fail_on
    keys = dict(zip((r.condition for r in prepared.rows), prepared.keys, strict=False))
    max_mde = 0.20 if comparison is None else comparison.max_mde
    # Conditions compared on their missing outcomes alone: no twin with an outcome in both.
    events: dict[Key, set[str]] = defaultdict(set)
    labels: dict[Key, str] = {}
    for given, at in zip(prepared.rows, prepared.keys, strict=False):
        events[at].add(given.event)
        labels[at] = given.condition
    # (A rollout of metrics only has no other row: its twins are compared on its metrics.)
    unvouched = [key for key, found in events.items()
                 if found == {NO_OUTCOME} and key not in prepared.measured]
    for key in unvouched:
        planned, _, lost_b, lost_a = _sizes(key, prepared.paired, indexes)
        text = (f"condition {quoted_label(labels[key])}: none of the {planned} "
                f"{'twins' if prepared.paired else 'episodes'} both runs ran has an outcome "
                f"in both ({lost_b} of {before!r} and {lost_a} of {after!r} ended without "
                "one), so its events were not compared at all; only its share of missing "
                "outcomes was")
        if small:
            reasons.append(f"{text}. {_lost_fix(before, after, lost_b, lost_a)}")
        else:
            notes.append(f"{text}, and the gate does not fail on it: --prove-fail-on "
                         "leaves too-small out")
    if comparison is None:
        return Vouch((), tuple(reasons), tuple(notes))
    # A blind row that lost twins fails even when it counted: what is left of its twins is
    # what an outage let through, not a sample of the condition. A row blind by design that
    # counted has shown its change; only the undecided ones are too small to tell.
    lost_rows: list[tuple[Row, int, int, int, int]] = []
    design_rows: list[Row] = []
    for row in comparison.rows:
        if not row.is_blind:
            continue
        found = keys.get(row.condition)
        if found is not None and row.event != NO_OUTCOME and not sequential:
            n_b, n_a, lost_b, lost_a = _sizes(found, row.paired, indexes)
            if (row.n_before < n_b or row.n_after < n_a) and _would_see(row, (n_b, n_a),
                                                                        comparison):
                lost_rows.append((row, n_b, n_a, lost_b, lost_a))
                continue
        if row.direction == "unchanged":
            design_rows.append(row)
    if lost_rows and small:
        failing.extend(r for r, *_ in lost_rows)
        by_condition: dict[str, list[tuple[Row, int, int, int, int]]] = defaultdict(list)
        for item in lost_rows:
            by_condition[item[0].condition].append(item)
        for condition, items in by_condition.items():
            first, n_b, n_a, lost_b, lost_a = items[0]
            named = ", ".join(f"{r.event} ({_limits_of(r)})" for r, *_ in items)
            compared = (f"{first.n_before} of the {n_b} twins both runs ran" if first.paired
                        else f"{first.n_before} of {n_b} episodes of {before!r} and "
                             f"{first.n_after} of {n_a} of {after!r}")
            reasons.append(
                f"condition {quoted_label(condition)} could not have shown a change of "
                f"{max_mde:.2f} in {named}: it compares only {compared} ({lost_b} of "
                f"{before!r} and {lost_a} of {after!r} ended without an outcome), and with "
                f"all of them it would have. {_lost_fix(before, after, lost_b, lost_a)}")
    elif lost_rows:
        design_rows.extend(r for r, *_ in lost_rows)
    if comparison.verdict.word == "worse" and "worse" in fail_on:
        design_rows = []  # the gate fails on the verdict; the table shows what is blind
    if design_rows and small and not allow_underpowered:
        failing.extend(design_rows)
        if comparison.verdict.word != "too small to tell":
            # The verdict word speaks of the rows that moved; these did not, and could not
            # have: say so, or a "safer" would hide them.
            needed = comparison.verdict.replicates_needed
            conditions = list(dict.fromkeys(r.condition for r in design_rows))
            reasons.append(
                f"the verdict {comparison.verdict.word!r} leaves {len(design_rows)} row(s) "
                f"that could not have shown a change of {max_mde:.2f} "
                f"({_shown(conditions)}): too small to tell there. "
                + (f"Run {needed} replicates a condition in both runs, or " if needed
                   else "Run more replicates, or ")
                + "pass --prove-allow-underpowered to accept it")
    elif design_rows:
        why = ("--prove-allow-underpowered" if small
               else "--prove-fail-on leaves too-small out")
        spared = list(dict.fromkeys(r.condition for r in design_rows))
        notes.append(f"{len(design_rows)} row(s) could not have shown a change of "
                     f"{max_mde:.2f} ({_shown(spared)}), and the gate does not fail on "
                     f"that: {why}")
    return Vouch(tuple(failing), tuple(reasons), tuple(notes))


def _limits_of(row: Row) -> str:
    """The limits of the directions a row is blind to, as printed."""
    return "/".join(f"{d} limit {row.rise if d == 'rise' else row.fall}" for d in row.blind)


def _lost_fix(before: str, after: str, lost_b: int, lost_a: int) -> str:
    where = before if lost_b >= lost_a else after
    return (f"Find why the episodes of {where!r} ended without an outcome (pytest-prove show "
            f"{where} -v lists them), fix it "
            "and run again" + ("; then save the baseline anew (--prove-save-baseline)"
                               if lost_b >= lost_a else "")
            + "; --prove-fail-on=no-too-small passes such a gate on purpose")


def thin_baseline(run: Run, *, q: float, max_mde: float) -> str | None:
    """Why ``run`` would make a thin baseline, or None: a condition whose episodes with an
    outcome fail the design check at ``max_mde`` (paired, as later gates read it) while the
    episodes it ran would pass it. A design too small from the start is the design
    check's business (``--prove-allow-underpowered``), not this one's."""
    declarations = declarations_of(run)
    ran: dict[Key, int] = defaultdict(int)
    kept: dict[Key, int] = defaultdict(int)
    names: dict[Key, str] = {}
    for record in run.episodes:
        key = (str(record["rollout"]), str(record["condition_key"]))
        ran[key] += 1
        if has_outcome(record):
            kept[key] += 1
        names.setdefault(key, condition_label(dict(record.get("condition") or {})))
    m = sum(len(declarations[rid].tested()) if rid in declarations else 1 for rid, _ in ran)
    if m == 0:
        return None
    checked: dict[int, bool] = {}

    def passes(n: int) -> bool:
        if n not in checked:
            checked[n] = n > 0 and design_check(n, m, paired=True, q=q, max_mde=max_mde).ok
        return checked[n]

    thin = [(names[key], kept[key], ran[key]) for key in sorted(ran)
            if kept[key] < ran[key] and not passes(kept[key]) and passes(ran[key])]
    if not thin:
        return None
    shown = ", ".join(f"{quoted_label(label)} ({kept} of {total})"
                      for label, kept, total in thin[:5]) + (" ..." if len(thin) > 5 else "")
    return (f"{len(thin)} condition(s) kept too few episodes with an outcome for a later "
            f"gate to see a change of {max_mde:.2f} ({q:g} over {m} tests, the design "
            f"check): {shown}")
