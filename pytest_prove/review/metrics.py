"""Metric rows: each declared metric of each compared condition, after against before.

A rollout that declares metrics (``metrics={"judge": "higher"}``, ``--prove-metrics``) stores
their values with each episode that ends in an outcome. Here every (condition, metric) of the
new run's declarations becomes a row: paired on the twins when the runs share a salt (the
same replicates :mod:`.pairing` matches), unpaired otherwise, tested by
:func:`~pytest_prove.stats.metric_test` (Wilcoxon signed-rank or rank-sum, a Hodges-Lehmann
shift with its interval in the metric's units). The metric rows are one family of their
own, under Holm at ``q``, apart from the outcome rows (which keep their own BH flags and
Holm verdict): putting both in one family would change the outcome verdicts of every
existing gate the day a metric is declared. Each family controls its own error rate at q,
and the method line says so.

A row is *worse* when its Holm-adjusted p is at most q and its shift goes the declared wrong
way, *safer* the other way; *too small to tell* when it is not and no shift of any size
would have been flagged 4 times in 5 (its detection limit, from the baseline's own values);
else *no significant change*. A condition whose baseline holds no values of a metric the new
run declares cannot be vouched for on it: the review says so, with the fix (save the
baseline again with the metric declared).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, final

from ..declare.metrics import Better, MetricMargin
from ..declare.spec import Declaration
from ..record import has_outcome
from ..stats import MetricLimit, MetricTest, holm, metric_limit, metric_test
from ..stats._results import Word
from ..store import Run
from .pairing import Prepared, declarations_of

__all__ = ["MetricReview", "MetricRow", "metric_review"]

Key = tuple[str, str]
#: Rows whose baseline has more values than this get no detection limit (its simulation
#: grows with the values; the shift and its interval are still given).
_MAX_LIMIT_VALUES: Final = 2000
#: A review with more metric rows than this gives no row a limit: each is a simulation of
#: about a second, and a gate should not wait minutes for them (``--prove-plan`` prints every
#: row's limit before the run). Whether a row could flag anything is still known exactly.
MAX_LIMIT_ROWS: Final = 64


@final
@dataclass(frozen=True, slots=True)
class MetricRow:
    """One (condition, metric): its test, its Holm-adjusted p, its word and its limit."""

    condition: str
    metric: str
    better: str  # "higher" or "lower": which way is better
    test: MetricTest
    p_adjusted: float
    word: Word
    limit: MetricLimit | None
    key: Key
    #: With a metric margin: its size in the metric's units (None: a share of a median of
    #: 0, which no shift can be read against), the interval's end on the worse side as a
    #: shift the worse way, and what that says: "within margin", "not shown within margin"
    #: or "beyond margin".
    margin: float | None = None
    bound: float | None = None
    margin_word: str | None = None

    @property
    def within(self) -> bool:
        return self.margin_word == "within margin"

    @property
    def moved(self) -> bool:
        return self.word in ("worse", "safer")

    def to_dict(self) -> dict[str, Any]:
        test = self.test

        def finite(value: float) -> float | None:
            return value if math.isfinite(value) else None

        return {
            "condition": self.condition, "metric": self.metric, "better": self.better,
            "paired": test.paired, "n_before": test.n_before, "n_after": test.n_after,
            "shift": finite(test.shift), "low": finite(test.low), "high": finite(test.high),
            "interval_level": test.level, "before_median": finite(test.before_median),
            "relative": test.relative, "p": test.test.p, "p_adjusted": self.p_adjusted,
            "verdict": self.word,
            "limit": None if self.limit is None else self.limit.value,
            "limit_relative": None if self.limit is None else self.limit.relative,
            **({} if self.margin_word is None else {
                "margin": self.margin, "bound": self.bound, "margin_verdict": self.margin_word}),
        }


@final
@dataclass(frozen=True, slots=True)
class MetricReview:
    """Every metric row of a review, and what could not be vouched for."""

    rows: tuple[MetricRow, ...]
    q: float
    paired: bool
    #: Why some (condition, metric) could not be compared, with the fix: the baseline holds
    #: none of its values.
    unvouched: tuple[str, ...] = ()
    #: The rows got no limit: there were more than :data:`MAX_LIMIT_ROWS`.
    limits_skipped: bool = False
    #: The run was sequential: its looks stopped on the outcome rows, and the metric rows
    #: were tested once, at the end, on the episodes the looks ran.
    sequential: bool = False
    #: There are no outcome rows: the rollouts compared declare metrics only.
    alone: bool = False

    @property
    def m(self) -> int:
        return len(self.rows)

    @property
    def worse(self) -> tuple[MetricRow, ...]:
        return tuple(r for r in self.rows if r.word == "worse")

    @property
    def blind(self) -> tuple[MetricRow, ...]:
        return tuple(r for r in self.rows if r.word == "too small to tell")

    @property
    def not_within(self) -> tuple[MetricRow, ...]:
        """The rows with a margin that were not shown within it."""
        return tuple(r for r in self.rows if r.margin_word is not None and not r.within)

    @property
    def with_margin(self) -> bool:
        return any(r.margin_word is not None for r in self.rows)

    @property
    def method(self) -> str:
        test = ("paired Wilcoxon signed-rank (exact, ties at midranks, zeros left out)"
                if self.paired else "unpaired Wilcoxon-Mann-Whitney rank-sum")
        level = 1.0 - self.q / max(1, self.m)
        margin = ("; a margin is shown held when the interval's worse end is inside it "
                  f"(one-sided at q/(2m) = {self.q / (2 * max(1, self.m)):.3g} a row, "
                  "Bonferroni)" if self.with_margin else "")
        looks = ("; the run was sequential and its looks stop on the outcome rows only: "
                 "metric rows are tested once, at the end, on the episodes the looks ran, "
                 "with no correction for the looks, so a condition stopped early tests its "
                 "metrics on fewer episodes (less power: see each row's limit)"
                 if self.sequential else "")
        return (f"metric rows: {test}, Hodges-Lehmann shift after minus before with its "
                f"{level:.2%} interval; Holm over the {self.m} metric row(s) at q={self.q:g}, "
                + ("the only family: the rollouts declare metrics and no outcomes"
                   if self.alone else "a family of their own, apart from the outcome rows")
                + f"{margin}{looks}")

    def to_dict(self) -> dict[str, Any]:
        return {"q": self.q, "m": self.m, "paired": self.paired, "method": self.method,
                "rows": [r.to_dict() for r in self.rows],
                "worse": [{"condition": r.condition, "metric": r.metric}
                          for r in self.worse],
                "unvouched": list(self.unvouched),
                **({"sequential": True} if self.sequential else {})}


def declares_metrics(run: Run) -> bool:
    """Whether any rollout of ``run``'s manifest declares a metric (cheap: no episode read)."""
    for info in (run.manifest.get("rollouts") or {}).values():
        declaration = info.get("declaration") if isinstance(info, Mapping) else None
        if isinstance(declaration, Mapping) and declaration.get("metrics"):
            return True
    return False


def _values(run: Run, keys: Collection[Key]) -> dict[Key, dict[int, Mapping[str, float]]]:
    """Each compared condition's episodes with an outcome: replicate -> its metrics' values
    (empty when it has none)."""
    found: dict[Key, dict[int, Mapping[str, float]]] = defaultdict(dict)
    for record in run.episodes:
        key = (str(record["rollout"]), str(record["condition_key"]))
        if key not in keys or not has_outcome(record):
            continue
        found[key][int(record["replicate"])] = record.get("metrics") or {}
    return found


def metric_review(before: Run, after: Run, prepared: Prepared, *, q: float,
                  limits: bool = True,
                  margins: Mapping[str, MetricMargin] | None = None,
                  sequential: bool = False, alone: bool = False) -> MetricReview | None:
    """The metric rows of ``after`` against ``before`` (None: no rollout of ``after``
    declares a metric). ``margins``: each metric's margin (--prove-metric-margin), whose
    rows then say whether the shift is shown within it."""
    if not declares_metrics(after):
        return None
    declarations: dict[str, Declaration] = declarations_of(after)
    labels: dict[Key, str] = dict(prepared.compared)
    keys = [k for k in labels if declarations.get(k[0]) is not None
            and declarations[k[0]].metrics]
    old, new = _values(before, set(keys)), _values(after, set(keys))
    found: list[tuple[Key, str, Better, list[float], list[float]]] = []
    unvouched: list[str] = []
    for key in keys:
        label = labels[key]
        b_all, a_all = old.get(key, {}), new.get(key, {})
        for name, better in declarations[key[0]].metric_directions.items():
            b = {r: v[name] for r, v in b_all.items() if name in v}
            a = {r: v[name] for r, v in a_all.items() if name in v}
            if not a_all:
                continue
            if len(a) < len(a_all) or 0 < len(b) < len(b_all):
                arm, count, of = ((after.name, len(a), len(a_all)) if len(a) < len(a_all)
                                  else (before.name, len(b), len(b_all)))
                why = (" (a model they used has no declared price: declare it in ini "
                       "prove_prices)" if name == "cost" else "")
                unvouched.append(
                    f"metric {name!r} of {label} cannot be compared: run {arm!r} holds its "
                    f"values for {count} of its {of} episodes with an outcome{why}; give "
                    "every episode a value, or pass --prove-fail-on=no-too-small to let the "
                    "gate pass without it on purpose")
                continue
            if not b:
                unvouched.append(
                    f"metric {name!r} of {label} cannot be compared: baseline "
                    f"{before.name!r} holds none of its values (it was saved before the "
                    f"metric was declared); save the baseline again with it declared "
                    f"(pytest --prove-baseline={before.name} --prove-update-baseline, or "
                    f"--prove-save-baseline={before.name}), or pass --prove-fail-on="
                    "no-too-small to let the gate pass without it on purpose")
                continue
            if prepared.paired:
                twins = sorted(set(b) & set(a))
                found.append((key, name, better, [b[r] for r in twins], [a[r] for r in twins]))
            else:
                found.append((key, name, better, list(b.values()), list(a.values())))
    m = len(found)
    level = 1.0 - q / max(1, m)
    tests = [metric_test(x, y, paired=prepared.paired, level=level) for _, _, _, x, y in found]
    adjusted: Sequence[float] = list(holm([t.test.p for t in tests])) if tests else []
    rows: list[MetricRow] = []
    limits = limits and m <= MAX_LIMIT_ROWS
    for (key, name, better, x, y), test, p in zip(found, tests, adjusted, strict=True):
        limit = (metric_limit(x, len(y), paired=prepared.paired,
                              better=better, alpha=q / m)
                 if limits and y and len(x) <= _MAX_LIMIT_VALUES else None)
        made = MetricRow(labels[key], name, better, test, float(p),
                         _word(test, float(p), q, better, limit, m), limit, key)
        if margins and name in margins:
            made = _with_margin(made, margins[name])
        rows.append(made)
    return MetricReview(tuple(rows), q, prepared.paired, tuple(unvouched),
                        limits_skipped=bool(found) and not limits, sequential=sequential,
                        alone=alone)


def _with_margin(row: MetricRow, margin: MetricMargin) -> MetricRow:
    """``row`` with its margin's verdict: the interval's end on the worse side (a shift the
    worse way, in the metric's units) inside the margin is *within*; its other end past the
    margin, *beyond*; else *not shown within*."""
    from dataclasses import replace

    size, relative = margin
    test = row.test
    units: float | None = size
    if relative:
        median = test.before_median
        units = size * abs(median) if math.isfinite(median) and median != 0.0 else None
    sign = 1.0 if row.better == "lower" else -1.0
    worst, best = ((test.high, test.low) if sign > 0 else (-test.low, -test.high))
    if units is None or not math.isfinite(worst):
        word = "not shown within margin"
    elif worst < units:
        word = "within margin"
    elif best > units:
        word = "beyond margin"
    else:
        word = "not shown within margin"
    return replace(row, margin=units, bound=worst if math.isfinite(worst) else None,
                   margin_word=word)


def _reachable(test: MetricTest, alpha: float) -> bool:
    """Whether the row's test could reach ``alpha`` at all, with the most extreme values its
    sizes allow (every twin moved the same way; every after value past every before one)."""
    if test.paired:
        return test.n_after > 0 and 2.0 ** (1 - test.n_after) <= alpha
    return test.n_before > 0 and test.n_after > 0 and (
        2.0 / math.comb(test.n_before + test.n_after, test.n_before) <= alpha)


def _word(test: MetricTest, p: float, q: float, better: str, limit: MetricLimit | None,
          m: int) -> Word:
    if p <= q and test.test.n:
        up = test.test.p_up < test.test.p_down
        return "worse" if up == (better == "lower") else "safer"
    if not _reachable(test, q / m) or (limit is not None and limit.value is None
                                       and test.test.n):
        return "too small to tell"
    return "no significant change"


def gate_metrics(metrics: MetricReview | None, fail_on: Collection[str],
                 allow_underpowered: bool) -> tuple[bool, list[str], list[str]]:
    """What the metric rows do to the gate: whether a verdict fails it (a worse row, with
    ``worse`` in ``fail_on``; a blind row, with ``too-small``), its reasons (metrics the
    baseline cannot vouch for) and the notes on what it was told to spare."""
    if metrics is None:
        return False, [], []
    failed = bool(metrics.worse) and "worse" in fail_on
    notes: list[str] = []
    small = "too-small" in fail_on
    blind = metrics.blind
    if blind and small and not allow_underpowered:
        failed = True
    elif blind:
        notes.append(f"{len(blind)} metric row(s) too small to tell do not fail this gate "
                     "(--prove-fail-on leaves too-small out, or --prove-allow-underpowered)")
    reasons: list[str] = []
    if metrics.unvouched:
        if small:
            reasons.extend(metrics.unvouched)
        else:
            notes.append(f"{len(metrics.unvouched)} metric(s) the baseline holds no values "
                         "of were not compared, and do not fail this gate (--prove-fail-on "
                         "leaves too-small out)")
    if metrics.worse and "worse" not in fail_on:
        notes.append("a metric that got worse does not fail this gate: --prove-fail-on "
                     "leaves worse out (no-worse)")
    if metrics.not_within:
        if "not-within" in fail_on:
            failed = True
        else:
            notes.append(f"{len(metrics.not_within)} metric row(s) not shown within their "
                         "margin do not fail this gate: --prove-fail-on leaves not-within "
                         "out (no-not-within)")
    return failed, reasons, notes


def failing_rows(metrics: MetricReview | None, fail_on: Collection[str],
                 allow_underpowered: bool) -> Sequence[MetricRow]:
    """The metric rows that fail the gate, by condition (its reports name them)."""
    if metrics is None:
        return ()
    rows = list(metrics.worse) if "worse" in fail_on else []
    if "too-small" in fail_on and not allow_underpowered:
        rows += metrics.blind
    if "not-within" in fail_on:
        rows += metrics.not_within
    return rows


@final
@dataclass(frozen=True, slots=True)
class PlannedLimit:
    """One metric row's detection limit before anything runs (None: the baseline holds no
    values of the metric for the condition)."""

    rollout: str
    condition: str
    metric: str
    limit: MetricLimit | None


def planned_limits(baseline: Run, planned: Mapping[str, tuple[Declaration, Collection[str], int]],
                   *, paired: bool, q: float) -> list[PlannedLimit]:
    """The detection limit of every metric row the planned run will have, from the
    baseline's own values: ``planned`` maps each rollout id to its declaration, the condition
    keys it will run and the replicates of each. Holm's first step, q/m, is each row's level
    (its limit is read at least that strictly)."""
    from ..declare.spec import condition_label

    wanted = {(rid, key) for rid, (declaration, keys, _) in planned.items()
              if declaration.metrics for key in keys}
    values = _values(baseline, wanted)
    labels: dict[Key, str] = {}
    for record in baseline.episodes:
        ident = (str(record["rollout"]), str(record["condition_key"]))
        if ident in wanted and ident not in labels:
            labels[ident] = condition_label(record.get("condition") or {})
    rows = [(rid, ck, name, better, n)
            for rid, (declaration, keys, n) in sorted(planned.items())
            for ck in sorted(keys) if (rid, ck) in wanted
            for name, better in declaration.metric_directions.items()]
    m = max(1, len(rows))
    found: list[PlannedLimit] = []
    for rid, ck, name, better, n in rows:
        x = [v[name] for v in values.get((rid, ck), {}).values() if name in v]
        label = labels.get((rid, ck), ck)
        if not x:
            found.append(PlannedLimit(rid, label, name, None))
            continue
        found.append(PlannedLimit(rid, label, name, metric_limit(
            x, min(n, len(x)) if paired else n, paired=paired, better=better, alpha=q / m)))
    return found
