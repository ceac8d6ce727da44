"""Where episodes stop, by step: the endings ``where`` and ``compare`` read, and their tests.

An episode's time is the number of steps it recorded (else its ``t``); it ends with the
event at its last step, with another outcome (a competing end), by a timeout, or with no
outcome (censored where it stopped).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, final

from ..declare.episode import MAX_T
from ..record import steps_of
from ..store import Run
from .labels import label_of
from .pairing import RefusalError, declarations_of

if TYPE_CHECKING:
    from ..stats.steps import CauseTest, Incidence, LogRank

__all__ = ["Ending", "StepComparison", "Where", "compare_endings", "compare_steps", "endings",
           "event_of", "where", "where_of"]

_NO_STEP = "(no steps recorded)"


@final
@dataclass(frozen=True, slots=True)
class Ending:
    step: int
    cause: str | None  # "step:NAME" failed there; "ended:OUTCOME"; "timed out"; None censored
    cluster: str
    stratum: str

    @property
    def is_event(self) -> bool:
        return self.cause is not None and self.cause.startswith("step:")


def event_of(event: str | None, *runs: Run) -> tuple[str, Literal["rise", "fall"]]:
    """The outcome to follow (``event``, or the one declared failure) and which way is worse."""
    declarations = declarations_of(*runs)
    known: dict[str, Literal["rise", "fall"]] = {}
    for d in declarations.values():
        for outcome in d.outcomes:
            known.setdefault(outcome, "rise")
        for declared in d.events:
            known[declared] = d.worse_when(declared)
    if not declarations:
        for run in runs:
            for r in run.episodes:
                if r.get("outcome") is not None:
                    known.setdefault(str(r["outcome"]), "rise")
    if declarations and all(d.metrics_only for d in declarations.values()):
        raise RefusalError(
            f"there is no outcome to follow: the rollouts of "
            f"{' and '.join(repr(label_of(r)) for r in runs)} declare metrics and no "
            "outcomes; compare their metric rows with pytest-prove diff A B")
    if event is None:
        failures = sorted({f for d in declarations.values() for f in d.failures})
        if len(failures) == 1:
            return failures[0], "rise"
        raise RefusalError(f"name the outcome to follow with --event; declared failures: "
                           f"{', '.join(failures) or 'none'}")
    if event not in known:
        raise RefusalError(f"--event {event!r} is not an outcome of "
                           f"{' or '.join(repr(label_of(r)) for r in runs)}; outcomes: "
                           f"{', '.join(sorted(known)) or 'none'}")
    return event, known[event]


def endings(run: Run, event: str) -> tuple[list[Ending], Counter[str]]:
    """Where each episode stopped and how; and what was left out, by reason."""
    found: list[Ending] = []
    left: Counter[str] = Counter()
    for record in run.episodes:
        error = record.get("error")
        kind = None if error is None else str(error.get("kind", "errored"))
        if kind is not None and kind != "no_outcome" and "timeout" not in kind:
            left["errored"] += 1
            continue
        count, last = steps_of(record)
        t = record.get("t")
        if count:
            step = count
        elif isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t):
            if not 0 <= t <= MAX_T:
                # Stored by an older pytest-prove, which let t be any finite number: no step
                # index holds it (it overflowed the counting).
                left[f"t above {MAX_T:.0e}"] += 1
                continue
            step = round(t)
        else:
            left["no step recorded and no t"] += 1
            continue
        cause: str | None
        if kind is not None and "timeout" in kind:
            cause = "timed out"
        elif kind == "no_outcome":
            cause = None  # stopped with no outcome: censored where it stopped
        elif record.get("outcome") == event:
            cause = "step:" + (str(last) if count else _NO_STEP)
        else:
            cause = f"ended:{record.get('outcome')}"
        stratum = f"{record['rollout']}\x1f{record['condition_key']}"
        case = (record.get("meta") or {}).get("case_id")
        found.append(Ending(step, cause, str(case) if case is not None else stratum, stratum))
    return found, left


def baseline_of(run: Run) -> str:
    """The baseline the run was compared with when it ran, as a user names it."""
    paired = run.manifest.get("paired_with") or {}
    name = paired.get("baseline") if isinstance(paired, dict) else None
    return f"baseline:{name}" if name else "BASELINE"


@final
@dataclass(frozen=True, slots=True)
class Where:
    """Where the episodes of one run that ended with ``event`` stopped."""

    run: str
    event: str
    endings: tuple[Ending, ...]
    left_out: Counter[str]
    incidence: Incidence
    failed_causes: tuple[str, ...]  # "step:NAME" of every last step a failing episode had
    baseline: str  # the baseline it ran against, to name in the next command


def where(run: Run, event: str | None) -> Where:
    """Aalen-Johansen cumulative incidence of ``event`` by step (bootstrap over cases)."""
    chosen, _ = event_of(event, run)
    found, left = endings(run, chosen)
    return where_of(run, chosen, found, left)


def where_of(run: Run, event: str, found: Sequence[Ending], left: Counter[str]) -> Where:
    """:func:`where` of ``run`` from its :func:`endings` for ``event`` (a checked outcome),
    for a caller that has them already."""
    from ..stats.steps import aalen_johansen

    if not found:
        raise RefusalError(f"run {label_of(run)!r} has no episode that stopped at a step; "
                           "record steps with prove.step or return t")
    failed_causes = sorted({e.cause for e in found if e.cause and e.cause.startswith("step:")})
    incidence = aalen_johansen([e.step for e in found], [e.cause for e in found],
                               [e.cluster for e in found],
                               groups={"failed": failed_causes}, bootstrap=1000, seed=0)
    return Where(label_of(run), event, tuple(found), left, incidence, tuple(failed_causes),
                 baseline_of(run))


@final
@dataclass(frozen=True, slots=True)
class StepComparison:
    """Do episodes ending with ``event`` stop sooner in ``after``? The log-rank test and its
    word: different (episodes stop sooner or later), or unchanged (said with whether the
    test could have seen a hazard ratio of ``max_hr``)."""

    before: str
    after: str
    event: str
    word: str
    strata: int
    test: LogRank
    by_step: tuple[CauseTest, ...]
    detectable: float | None  # the smallest hazard ratio it could see (80% power)
    q: float
    max_hr: float
    left_before: Counter[str]
    left_after: Counter[str]


def compare_steps(before: Run, after: Run, event: str | None, *, q: float,
                  max_hr: float) -> StepComparison:
    """Log-rank over step index, stratified by condition; per step name a cause-specific
    log-rank with Benjamini-Hochberg at ``q``."""
    chosen, _ = event_of(event, before, after)
    return compare_endings(before, after, chosen, endings(before, chosen),
                           endings(after, chosen), q=q, max_hr=max_hr)


def compare_endings(before: Run, after: Run, event: str,
                    ended_before: tuple[Sequence[Ending], Counter[str]],
                    ended_after: tuple[Sequence[Ending], Counter[str]], *, q: float,
                    max_hr: float) -> StepComparison:
    """:func:`compare_steps` from the runs' :func:`endings` for ``event`` (a checked
    outcome), for a caller that has them already."""
    from ..stats.steps import detectable_hazard_ratio, logrank, logrank_by_cause

    chosen = event
    (a_all, left_a), (b_all, left_b) = ended_before, ended_after
    common = {e.stratum for e in a_all} & {e.stratum for e in b_all}
    if not common:
        raise RefusalError(
            f"runs {label_of(before)!r} and {label_of(after)!r} share no condition;"
            " compare runs of the same rollout")
    a = [e for e in a_all if e.stratum in common]
    b = [e for e in b_all if e.stratum in common]
    test = logrank([e.step for e in a], [e.is_event for e in a],
                   [e.step for e in b], [e.is_event for e in b],
                   [e.stratum for e in a], [e.stratum for e in b])
    per_step = logrank_by_cause(
        [e.step for e in a], [e.cause if e.is_event else None for e in a],
        [e.step for e in b], [e.cause if e.is_event else None for e in b],
        [e.stratum for e in a], [e.stratum for e in b], q=q)
    detectable = detectable_hazard_ratio(test.variance, alpha=q)
    if test.p <= q and test.hazard_ratio is not None:
        way = "sooner" if test.hazard_ratio > 1 else "later"
        word = f"different: {chosen} episodes stop {way} in {label_of(after)}"
    elif detectable is not None and detectable <= max_hr:
        # The rows' word (the grid's and the table's) for a row that did not move, never one
        # of the verdict's words, which are about rates (docs/statistics.md).
        word = f"unchanged: no difference shown in when {chosen} episodes stop"
    else:
        word = (f"unchanged as far as this run can tell: no difference shown in when "
                f"{chosen} episodes stop, and too few of them to see a hazard ratio of "
                f"{max_hr:g}")
    return StepComparison(label_of(before), label_of(after), chosen, word, len(common), test,
                          tuple(per_step), detectable, q, max_hr, left_a, left_b)
