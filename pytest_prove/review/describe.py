"""One run on its own: the rate of each event per condition, with an exact interval.

What a report shows when there is no baseline to compare with (``pytest-prove report RUN``,
``--prove-report`` in a session without ``--prove-baseline``). The counts are read as a
comparison reads them: an event's rate is over the episodes that ended with an outcome, and
with ``missing="test"`` a condition where some episode ended without one also gets the rate of
the event ``no outcome`` over all its episodes. The interval is Clopper-Pearson's, at
``level`` for each row on its own (not adjusted for the number of rows).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, final

from ..declare.spec import NO_OUTCOME_EVENT, SpecError, condition_label
from ..record import MISSING_MODES, Missing, has_outcome, left_out_reason
from ..stats import clopper_pearson_interval
from ..store import Run
from .labels import Labels, labels_of
from .pairing import declarations_of, rollout_label

__all__ = ["METHOD", "Description", "Rate", "describe"]

#: How every single-run report names its interval.
METHOD: Final = ("Clopper-Pearson exact interval, {level} for each row on its own (not "
                 "adjusted for the number of rows)")


@final
@dataclass(frozen=True, slots=True)
class Rate:
    """One (condition, event) of one run: x of n episodes, and the interval on x / n."""

    condition: str
    event: str
    worse_when: Literal["rise", "fall"]
    x: int
    n: int
    low: float
    high: float

    @property
    def rate(self) -> float:
        return self.x / self.n if self.n else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"condition": self.condition, "event": self.event, "worse_when": self.worse_when,
                "x": self.x, "n": self.n, "rate": self.rate,
                "interval": {"low": self.low, "high": self.high}}


@final
@dataclass(frozen=True, slots=True)
class Description:
    """A run described on its own: its rows, how they were read and what was left out."""

    run: Run
    labels: Labels  # before and after both name the run
    rows: tuple[Rate, ...]
    level: float
    missing: Missing
    left_out: Mapping[str, int] = field(default_factory=dict)  # reason -> episodes
    no_outcome: Mapping[str, int] = field(default_factory=dict)  # label -> episodes, none
    # with an outcome (with missing="ignore": nothing to show for them)
    #: A run whose rollouts declare targets: the target rows, and each condition's pass^k
    #: and pass@k (review/targets.py); None and () otherwise.
    targets: Any = None
    pass_k: tuple[Any, ...] = ()

    @property
    def method(self) -> str:
        return METHOD.format(level=f"{100 * self.level:g}%")

    def require_rows(self) -> tuple[Rate, ...]:
        """The rows, or a refusal saying why there are none."""
        if not self.rows:
            from .pairing import RefusalError

            found = declarations_of(self.run).values()
            if found and all(d.metrics_only for d in found):
                raise RefusalError(
                    f"run {self.labels.after!r} has no outcome rates to describe: its "
                    "rollouts declare metrics and no outcomes, and their metric rows are "
                    "read against a baseline; compare it with one (pytest-prove report "
                    f"BASELINE {self.labels.after} --out FILE, or --prove-baseline=NAME)")
            raise RefusalError(f"run {self.labels.after!r} holds no episode with an outcome "
                               "to describe; run a sweep first")
        return self.rows


def describe(run: Run, *, events: Sequence[str] | None = None, missing: Missing = "test",
             level: float = 0.95, q: float = 0.05, max_mde: float = 0.20,
             max_errored: float = 0.25) -> Description:
    """Each condition's rate of each event (the declared failures, then the successes, or
    ``events``) in ``run``; refuses an event no rollout declares with
    :class:`~pytest_prove.declare.spec.SpecError`."""
    if missing not in MISSING_MODES:
        raise ValueError(f"missing must be one of {', '.join(MISSING_MODES)}, got {missing!r}")
    declarations = declarations_of(run)
    chosen = tuple(events or ())
    if chosen:
        known = {e for d in declarations.values() for e in d.events}
        unknown = [e for e in chosen if e not in known]
        if unknown:
            raise SpecError(f"event {unknown[0]!r} is not a declared failure or success of "
                            f"run {run.name!r}; declared: {', '.join(sorted(known)) or 'none'}")
    by_condition: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    conditions: dict[tuple[str, str], Mapping[str, Any]] = {}
    left_out: dict[str, int] = defaultdict(int)
    for record in run.episodes:
        key = (str(record["rollout"]), str(record["condition_key"]))
        conditions.setdefault(key, record.get("condition") or {})
        by_condition[key].append(record)
        if not has_outcome(record):
            left_out[left_out_reason(record)] += 1
    rollouts = sorted({key[0] for key in by_condition})
    rows: list[Rate] = []
    no_outcome: dict[str, int] = {}
    for key in sorted(by_condition):
        declaration = declarations.get(key[0])
        if declaration is None:
            continue
        label = condition_label(dict(conditions[key]))
        if len(rollouts) > 1:
            label = f"{rollout_label(run, key[0], rollouts)} · {label}"
        every = by_condition[key]
        ended = [r for r in every if has_outcome(r)]
        if not ended and missing == "ignore":
            no_outcome[label] = len(every)
            continue
        wanted = [e for e in chosen if e in declaration.events] if chosen else declaration.events
        if ended:
            for event in wanted:
                rows.append(_rate(label, event, declaration.worse_when(event),
                                  sum(r["outcome"] == event for r in ended), len(ended), level))
        if missing == "test" and len(ended) < len(every):
            rows.append(_rate(label, NO_OUTCOME_EVENT, "rise", len(every) - len(ended),
                              len(every), level))
    found = Description(run=run, labels=labels_of(run, run), rows=tuple(rows), level=level,
                        missing=missing, left_out=dict(left_out), no_outcome=no_outcome)
    from .targets import has_targets

    if has_targets(run):  # the rows against the targets, and pass^k, only when declared
        from dataclasses import replace

        from .targets import pass_k, target_review

        found = replace(found, pass_k=pass_k(run), targets=target_review(
            run, q=q, max_mde=max_mde, missing=missing, max_errored=max_errored))
    return found


def _rate(label: str, event: str, worse_when: Literal["rise", "fall"], x: int, n: int,
          level: float) -> Rate:
    low, high = clopper_pearson_interval(x, n, level)
    return Rate(condition=label, event=event, worse_when=worse_when, x=x, n=n, low=low,
                high=high)
