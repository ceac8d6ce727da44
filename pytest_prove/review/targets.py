"""Target rows: each condition's rate read against the absolute targets its rollout declares
(docs/targets.md), on one run alone, no baseline needed.

Per rollout, condition and target: the exact one-sided binomial test both ways
(:func:`pytest_prove.stats.target_test`) on the run's own outcomes, the episodes each
condition ran read as the comparison reads them (:func:`.reading.read_run`); Holm over the
session's target rows at q (a family of their own, apart from the comparison's). A row
*meets target*, *misses target* or is *too small to tell*, with the replicates that would
decide it.

Episodes without an outcome (errors, timeouts, crashes) are counted against whichever
claim they could flatter: each claim is tested as if every one of them had gone the way
that makes the claim hardest to show. A condition more than ``max_errored`` of whose
episodes ended without one cannot be vouched for: its row fails the gate, with the reason,
unless it is shown to miss its target anyway.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, final

from ..declare.spec import condition_label
from ..declare.targets import NO_OUTCOME_EVENT, Side, Target, declares_targets
from ..record import Missing
from ..stats import (
    TargetTest,
    holm_targets,
    pass_at_k,
    pass_hat_k,
    target_replicates,
    target_test,
)
from ..store import Run
from .pairing import declarations_of, rollout_label
from .reading import RunIndex, read_run

__all__ = ["MEETS", "MISSES", "UNDECIDED", "PassK", "TargetReview", "TargetRow", "gate_targets",
           "has_targets", "pass_k", "target_review"]

MEETS: Final = "meets target"
MISSES: Final = "misses target"
UNDECIDED: Final = "too small to tell"
Word = Literal["meets target", "misses target", "too small to tell"]

#: The largest number of replicates the advice searches (target_replicates' default).
MAX_REPLICATES: Final = 20000


@final
@dataclass(frozen=True, slots=True)
class TargetRow:
    """One condition's test of one target."""

    rollout_id: str
    rollout: str  # as a person reads it
    condition: str  # the condition's label
    key: str  # the condition's key
    target: Target
    n: int  # episodes counted
    unknown: int  # of them, episodes without an outcome (counted against each claim)
    estimate: float  # the rate (pass^k, pass@k: its unbiased estimate)
    low: float  # exact bounds on it (each one-sided at q)
    high: float
    p_meets: float  # Holm-adjusted over the session's target rows
    p_misses: float
    word: Word
    #: Replicates a condition would need to decide it (too small to tell), None past
    #: MAX_REPLICATES; and why the row cannot be vouched for, if it cannot.
    needed: int | None = None
    reason: str | None = None

    @property
    def upper_end(self) -> bool:
        """Whether :attr:`bound` is the interval's high end (else its low end)."""
        return (self.target.side == "<=") != (self.word == MISSES)

    @property
    def bound(self) -> float:
        """The bound beside the target, the end of the exact interval that decides the row:
        for a row shown to miss, the end on the target's wrong side (``<=``: the low end,
        even the least the rate could be is over the target); otherwise the end the target
        must clear to be met (``<=``: the high end; ``>=``: the low end)."""
        return self.high if self.upper_end else self.low

    @property
    def label(self) -> str:
        return f"{self.rollout} · {self.condition}" if self.rollout else self.condition


@final
@dataclass(frozen=True, slots=True)
class TargetReview:
    """Every target row of a run, and how they were tested."""

    rows: tuple[TargetRow, ...]
    q: float
    distance: float  # the distance the advice sizes for (--prove-max-mde)

    @property
    def method(self) -> str:
        return (f"exact one-sided binomial tests, both ways, per condition; Holm "
                f"over the {len(self.rows)} target row{'s' if len(self.rows) != 1 else ''} "
                f"at q={self.q:g}")


def has_targets(run: Run | Mapping[str, Any]) -> bool:
    """Whether any rollout of ``run`` (or of a run's manifest) declares a target."""
    return declares_targets(run.manifest if isinstance(run, Run) else run)


def _counts(target: Target, outcomes: Collection[object], successes: Collection[str],
            missing: Missing) -> tuple[int, int, int]:
    """(n, x, u) for a target: the episodes counted, those known to count toward the
    tested quantity (pass@k: the non-successes), and those without an outcome that might."""
    known = [o for o in outcomes if o is not None]
    none = len(outcomes) - len(known)
    if target.kind == "rate" and target.event == NO_OUTCOME_EVENT:
        return len(outcomes), none, 0
    n, u = (len(known), 0) if missing == "ignore" else (len(outcomes), none)
    if target.kind == "rate":
        return n, sum(1 for o in known if o == target.event), u
    wins = sum(1 for o in known if o in successes)
    if target.kind == "pass^k":
        return n, wins, u
    return n, len(known) - wins, u


def _tested(target: Target) -> tuple[float, Side]:
    """The target and side the test reads: pass@k >= t is (1 - p)^k <= 1 - t."""
    if target.kind == "pass@k":
        return 1.0 - target.rate, "<=" if target.side == ">=" else ">="
    return target.rate, target.side


def _test(target: Target, n: int, x: int, u: int, q: float) -> TargetTest:
    """Both claims, each as hard to show as the episodes without an outcome can make it:
    the meets test counts them toward the wrong side, the misses test toward the right."""
    rate, side = _tested(target)
    worst, best = (x + u, x) if side == "<=" else (x, x + u)
    meets = target_test(worst, n, rate, side, k=target.k, alpha=q)
    if u:
        meets = replace(meets, p_misses=target_test(best, n, rate, side, k=target.k,
                                                    alpha=q).p_misses)
    if target.kind == "pass@k":  # back on the pass@k scale
        meets = replace(meets, estimate=1.0 - meets.estimate, low=1.0 - meets.high,
                        high=1.0 - meets.low)
    return meets


def distance_for(target: Target, distance: float) -> float | None:
    """The distance a design is sized for: ``distance``, or as far as the rate can go
    when the target is nearer than that to 0 or 1 (None: not at all)."""
    rate, _ = _tested(target)
    found = min(target.distance or distance, rate, 1.0 - rate)
    return found if found > 0 else None


def replicates_needed(target: Target, distance: float, q: float, rows: int) -> int | None:
    """The replicates a condition needs for ``target`` to be shown met by an agent better
    than it by ``distance`` and missed by one worse by it, 4 times in 5 each, at Holm's first
    step over ``rows`` rows; None past MAX_REPLICATES."""
    rate, side = _tested(target)
    found = distance_for(target, distance)
    if found is None:
        return None
    return target_replicates(rate, found, side, k=target.k, alpha=q, rows=max(rows, 1),
                             max_n=MAX_REPLICATES)


def target_review(run: Run, *, q: float, max_mde: float, missing: Missing = "test",
                  max_errored: float = 0.25, index: RunIndex | None = None
                  ) -> TargetReview | None:
    """The target rows of ``run`` (None: no rollout of it declares a target)."""
    if not has_targets(run):
        return None
    index = read_run(run) if index is None else index
    declarations = declarations_of(run)
    found: list[tuple[str, str, str, str, Target, int, int, int, TargetTest | None,
                      str | None]] = []
    many = len(declarations) > 1
    for (rollout_id, key), entry in index.conditions.items():
        declaration = declarations.get(rollout_id)
        if declaration is None or not declaration.targets:
            continue
        outcomes = list(entry.outcomes.values())
        label = condition_label(entry.condition)
        rollout = rollout_label(run, rollout_id) if many else ""
        for target in declaration.target_list:
            if not target.applies(entry.condition):
                continue
            n, x, u = _counts(target, outcomes, declaration.successes, missing)
            reason = None
            if n < max(target.k, 1):
                reason = (f"{n} episode{'s' if n != 1 else ''} with an outcome, fewer than "
                          f"the {target.k} {target.subject} needs")
            none = sum(1 for o in outcomes if o is None)
            if none and outcomes and none / len(outcomes) > max_errored:
                reason = (f"{none} of its {len(outcomes)} episodes ended without an outcome, "
                          f"more than --prove-max-errored {max_errored:g} allows: the rate "
                          "cannot be vouched for; fix what made them err (pytest-prove show "
                          "RUN lists them) and run again")
            test = None if n < max(target.k, 1) else _test(target, n, x, u, q)
            found.append((rollout_id, rollout, label, key, target, n, x, u, test, reason))
    tested = [row[8] for row in found]
    adjusted = iter(holm_targets([t for t in tested if t is not None], q=q)
                    if any(t is not None for t in tested) else [])
    rows = []
    for rollout_id, rollout, label, key, target, n, _x, u, test, reason in found:
        if test is None:
            rows.append(TargetRow(rollout_id, rollout, label, key, target, n, u, 0.0, 0.0, 1.0,
                                  1.0, 1.0, UNDECIDED, None, reason))
            continue
        p_meets, p_misses = next(adjusted)
        word: Word = MEETS if p_meets <= q else MISSES if p_misses <= q else UNDECIDED
        needed = None
        if word == UNDECIDED:
            needed = replicates_needed(replace(target, distance=None),
                                       max(abs(test.estimate - target.rate), 0.01), q,
                                       len(found))
        rows.append(TargetRow(rollout_id, rollout, label, key, target, n, u, test.estimate,
                              test.low, test.high, p_meets, p_misses, word, needed,
                              None if word == MISSES else reason))
    return TargetReview(tuple(rows), q, max_mde)


def gate_targets(targets: TargetReview | None, fail_on: Collection[str]
                 ) -> tuple[tuple[TargetRow, ...], tuple[str, ...], tuple[str, ...]]:
    """(the rows that fail the gate, the reasons of those it cannot vouch for, what it was
    told not to fail on). A row that misses its target fails unless ``no-missed`` is in
    ``fail_on``; one too small to tell fails with ``not-met``; one that cannot be vouched
    for always fails, with its reason."""
    if targets is None:
        return (), (), ()
    failing, reasons, notes = [], [], []
    for row in targets.rows:
        if row.reason is not None:
            failing.append(row)
            reasons.append(f"{row.label}: target {row.target.text} cannot be vouched for: "
                           f"{row.reason}")
        elif (row.word == MISSES and "no-missed" not in fail_on) or (
                row.word == UNDECIDED and "not-met" in fail_on):
            failing.append(row)
    spared = [r for r in targets.rows if r.word == MISSES and r.reason is None
              and "no-missed" in fail_on]
    if spared:
        notes.append(f"{len(spared)} target row{'s' if len(spared) != 1 else ''} "
                     f"{'miss' if len(spared) != 1 else 'misses'} its target and does not "
                     "fail this gate: --prove-fail-on leaves missed out (no-missed)")
    return tuple(failing), tuple(reasons), tuple(notes)


#: The k pass^k and pass@k are shown for (each capped at a condition's replicates).
SHOWN_K: Final = (1, 2, 4, 8)


@final
@dataclass(frozen=True, slots=True)
class PassK:
    """One condition's pass^k and pass@k: (k, pass^k, pass@k) for each k shown."""

    label: str
    n: int
    successes: int
    values: tuple[tuple[int, float, float], ...]


def pass_k(run: Run, index: RunIndex | None = None) -> tuple[PassK, ...]:
    """Each condition's pass^k and pass@k on its declared successes, unbiased from its
    replicates (episodes without an outcome count as tries that did not succeed), for k in
    1, 2, 4, 8 and the k of its pass^k and pass@k targets, capped at its replicates; ()
    when no rollout declares a success."""
    index = read_run(run) if index is None else index
    declarations = declarations_of(run)
    many = len(declarations) > 1
    found = []
    for (rollout_id, _key), entry in index.conditions.items():
        declaration = declarations.get(rollout_id)
        if declaration is None or not declaration.successes or not entry.outcomes:
            continue
        n = len(entry.outcomes)
        wins = sum(1 for o in entry.outcomes.values() if o in declaration.successes)
        label = condition_label(entry.condition)
        if many:
            label = f"{rollout_label(run, rollout_id)} · {label}"
        asked = {t.k for t in declaration.target_list if t.kind != "rate"}
        ks = sorted({min(k, n) for k in (*SHOWN_K, *asked)})
        found.append(PassK(label, n, wins, tuple((k, pass_hat_k(wins, n, k),
                                                  pass_at_k(wins, n, k)) for k in ks)))
    return tuple(found)
