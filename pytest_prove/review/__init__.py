"""The read side: two stored runs in, one result object out.

:func:`review` pairs the runs, labels their conditions, sets aside what was not run, is new
or was left out, compares what is left and decides the gate; the session and every command
of the command line call it with the same arguments.  The cost of runs
(:mod:`.cost`), where episodes stop (:mod:`.steps`), fix-check's cases (:mod:`.fixcheck`)
and the tallies of one run (:mod:`.tallies`) live beside it.  Pytest-free and renderer-free:
it imports only the store, the declaration and the statistics.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, final

from ..declare.metrics import MetricMargin
from ..store import Run
from .coverage import Coverage, coverage, run_notes, unfinished_reason
from .environment import EnvironmentReview, environment_review
from .labels import Labels, label_of, labels_of
from .pairing import (
    MISSING_MODES,
    NO_OUTCOME,
    CaseMixError,
    DeclarationError,
    Missing,
    Prepared,
    RefusalError,
    prepare,
)
from .reading import read_run

# The statistics (numpy, scipy) are imported when a review is made, not with this package:
# a command that only lists runs (pytest-prove runs) reads the store through it.
if TYPE_CHECKING:
    from ..stats import Comparison, Row
    from .metrics import MetricReview, MetricRow
    from .sequential import Looks
    from .targets import TargetReview, TargetRow
    from .twins import TwinReview

__all__ = [
    "MISSING_MODES",
    "NO_OUTCOME",
    "CaseMixError",
    "DeclarationError",
    "Gate",
    "Labels",
    "Missing",
    "RefusalError",
    "Review",
    "label_of",
    "review",
]


@final
@dataclass(frozen=True, slots=True)
class Gate:
    """Whether the comparison fails, and why: the verdict named in ``fail_on``, or one of
    ``reasons`` (less compared than the baseline holds, an unfinished run, rows that lost
    twins), which fail whatever the verdict.  ``blind``: the rows that could not have shown
    max_mde and fail the gate (``too-small``), whatever the verdict word; ``notes``: what
    the gate was told not to fail on, said whenever it spared something."""

    verdict_failed: bool
    reasons: tuple[str, ...]
    fail_on: frozenset[str]
    blind: tuple[Row, ...] = ()
    notes: tuple[str, ...] = ()
    #: The metric rows that fail it: moved the worse way, or blind (with too-small).
    metrics: tuple[MetricRow, ...] = ()
    #: The target rows that fail it: missed, cannot be vouched for, or (not-met) undecided.
    targets: tuple[TargetRow, ...] = ()

    @property
    def failed(self) -> bool:
        return self.verdict_failed or bool(self.reasons)


@final
@dataclass(frozen=True, slots=True)
class Review:
    """``after`` read against ``before``: everything a report or a gate needs."""

    before: Run
    after: Run
    prepared: Prepared
    comparison: Comparison | None  # None: no condition has an outcome in both runs
    labels: Labels  # how the runs and conditions are named
    coverage: Coverage
    notes: tuple[str, ...]  # how either run is unfinished (coverage.run_notes)
    gate: Gate
    #: A sequential run (--prove-sequential): (condition label, how it stopped), the first
    #: with an empty label saying how the run went as a whole.
    sequential: tuple[tuple[str, str], ...] = ()
    #: The metric rows (None: no rollout of the new run declares a metric).
    metrics: MetricReview | None = None
    #: The target rows (None: no rollout of the new run declares a target).
    targets: TargetReview | None = None
    #: What differs between the environments the two runs recorded (never the verdict).
    environment: EnvironmentReview | None = None
    #: How often twins ended alike, row by row (None: no paired row): ``review/twins.py``.
    twins: TwinReview | None = None

    @property
    def metrics_only(self) -> bool:
        """Whether the comparison is metric rows alone: the rollouts compared declare metrics
        and no outcomes (and none of their episodes ended without one)."""
        return self.comparison is None and self.metrics is not None and bool(self.metrics.rows)

    def require_compared(self) -> None:
        """Refuse, saying why, when there is nothing to compare: no outcome row and no
        metric row."""
        if not self.metrics_only:
            self.require_comparison()

    def require_comparison(self) -> Comparison:
        """The comparison, or a refusal saying why there is none."""
        if self.comparison is None:
            raise RefusalError(
                f"runs {self.labels.before!r} and {self.labels.after!r} share no condition "
                "with an outcome in both, so there is nothing to compare; compare runs of the "
                "same rollout")
        return self.comparison


def _misnamed(before: Run, after: Run, labels: Labels) -> list[str]:
    """Why the two runs named cannot be a gate's (a command line's slip, e.g. ``check RUN
    BASELINE`` or one variable twice), or nothing: a run read against itself (a baseline
    holds the id of the run it was saved from) shows no change whatever the agent did, and
    a baseline read as the new run turns a worse agent into a safer one."""
    fix = ("name the baseline first and the new run second (pytest-prove check "
           "baseline:NAME RUN)")
    if before.run_id == after.run_id:
        return [f"{labels.before!r} and {labels.after!r} are the same run "
                f"({before.run_id}), and a run compared with itself shows no change whatever "
                f"the agent did; {fix}"]
    if after.is_baseline and not before.is_baseline:
        return [f"the new run named, {labels.after!r}, is a baseline, and the baseline named, "
                f"{labels.before!r}, is a run: read this way round, a worse agent reads "
                f"safer; {fix}, here pytest-prove check {labels.after} {labels.before}"]
    return []


def _check_margin_names(margins: Mapping[str, MetricMargin], after: Run) -> None:
    """Refuse a metric margin naming a metric no compared rollout declares (a misspelt
    name would leave its metric without the claim asked for)."""
    from .pairing import declarations_of

    declared = {name for d in declarations_of(after).values() for name in d.metric_directions}
    unknown = sorted(set(margins) - declared)
    if unknown:
        raise RefusalError(
            f"--prove-metric-margin names {', '.join(map(repr, unknown))}, which no rollout "
            f"of the run declares (declared: {', '.join(sorted(declared)) or 'none'}); "
            "name a declared metric, or declare it (metrics= or [metrics])")


def review(before: Run, after: Run, *, events: Sequence[str] | None, q: float,
           max_mde: float, fail_on: Collection[str], missing: Missing = "test",
           margin: float | None = None, chaos_differs: bool = False,
           sequential: Looks | None = None, allow_underpowered: bool = False,
           max_errored: float | None = None,
           metric_margin: Mapping[str, MetricMargin] | None = None) -> Review:
    """Compare ``after`` with ``before`` and decide the gate.

    ``missing`` says how episodes without an outcome are read: tested as the event
    ``no outcome`` of their condition (``"test"``), or left out (``"ignore"``, for missing
    outcomes known to be infrastructure). ``chaos_differs`` compares runs whose injected
    faults differ (refused otherwise: see :func:`.pairing.check_chaos`).

    ``margin`` adds the margin test of every row; the gate then fails, when ``fail_on``
    holds ``not-within``, unless every row is shown within it.

    ``fail_on`` is the set of verdicts the gate fails on, as
    :func:`pytest_prove.config.values.gate_fails_on` resolves it. With ``too-small`` in it, a row
    that could not have shown a change of ``max_mde`` fails the gate whatever the verdict
    word (:mod:`.vouch`); ``allow_underpowered`` spares the rows blind by design, never those
    that lost twins. A compared condition more than ``max_errored`` of whose baseline
    episodes ended without an outcome fails it too (default: the bound a baseline is saved
    with, ``store.baselines.MAX_ERRORED``).

    Refuses with :class:`CaseMixError` (a condition ran more than one case),
    :class:`~pytest_prove.declare.spec.SpecError` (an event no rollout declares) or ``ValueError``.

    ``sequential``: the looks of a sequential run (:mod:`.sequential`); the comparison is then
    theirs (each condition at the look it stopped at, on sequential p-values), and the review
    says how each condition stopped.
    """
    from ..stats import compare
    from .metrics import failing_rows, gate_metrics, metric_review
    from .twins import twin_review

    for run in (before, after):
        replayed = sum(1 for r in run.episodes if r.get("replayed"))
        if replayed:
            raise RefusalError(
                f"{label_of(run)} holds {replayed} replayed episode(s) (--prove-cache="
                "replay): a replayed run is not evidence, its model calls were answered "
                "from the cache and not by the model as it is today; compare runs made "
                "without the cache, or with --prove-cache=record")
    # Each run's episodes read once, for the rows, the labels and the coverage alike.
    indexes = (read_run(before), read_run(after))
    prepared = prepare(before, after, events or None, missing=missing,
                       chaos_differs=chaos_differs, indexes=indexes)
    lines: tuple[tuple[str, str], ...] = ()
    if sequential is None and "sequential" in after.manifest:
        # A stored sequential run read again (the command line): its looks, as its session
        # took them, decide; never the fixed test on the counts it stopped at.
        from .sequential import looks_of

        sequential = looks_of(before, after, events=events, missing=missing, margin=margin)
    if sequential is not None:
        from .sequential import sequential_comparison, sequential_lines

        comparison = sequential_comparison(sequential, max_mde=max_mde, margin=margin)
        lines = sequential_lines(sequential)
    else:
        comparison = (compare(prepared.rows, q=q, max_mde=max_mde,
                              mirrored=prepared.mirrored, margin=margin)
                      if prepared.rows else None)
    if margin is not None and comparison is None and prepared.compared:
        raise RefusalError(
            f"a margin ({margin:g}) is a margin on the outcome rows' rates, and runs "
            f"{before.name!r} and {after.name!r} have none: their rollouts declare metrics "
            "and no outcomes; give each metric its margin in the session "
            "(--prove-metric-margin, e.g. judge=0.05) instead")
    labels = labels_of(before, after, indexes)
    covered = coverage(before, after, missing_tested=missing == "test", indexes=indexes)
    word = None if comparison is None else comparison.verdict.word
    from .vouch import vouch

    blind = vouch(comparison, prepared, indexes, fail_on=fail_on,
                  allow_underpowered=allow_underpowered, before=labels.before,
                  after=labels.after, sequential=sequential is not None,
                  **({} if max_errored is None else {"max_errored": max_errored}))
    verdict_failed = ((word == "worse" and "worse" in fail_on)
                      or bool(blind.failing)
                      or (comparison is not None and comparison.margin is not None
                          and not comparison.margin.holds and "not-within" in fail_on))
    # A gate that compared less than the baseline holds, read a run that did not finish,
    # or rows that lost twins, is never a pass.
    reasons: list[str] = list(blind.reasons)
    if metric_margin:
        _check_margin_names(metric_margin, after)
    # A sequential run's looks stop on the outcome rows; its metric rows are tested once,
    # here, on every episode the looks ran (never left out: a metric that got worse fails).
    metrics = metric_review(before, after, prepared, q=q, margins=metric_margin,
                            sequential=sequential is not None,
                            alone=comparison is None and bool(prepared.measured))
    gap = covered.failure(before.name, labels.after)
    if gap is not None:
        reasons.append(gap)
    elif comparison is None and not (metrics is not None and metrics.rows):
        # (A rollout that declares metrics only is compared on its metric rows alone.)
        reasons.append(f"nothing was compared: no condition of run {labels.after!r} has an "
                       f"outcome in {labels.before!r} as well")
    unfinished = unfinished_reason(after)
    if unfinished is not None:
        reasons.append(unfinished)
    reasons.extend(_misnamed(before, after, labels))
    notes = tuple(note for run in (before, after) for note in run_notes(run))
    spared = list(blind.notes)
    metrics_failed, metric_reasons, metric_notes = gate_metrics(
        metrics, fail_on, allow_underpowered)
    verdict_failed = verdict_failed or metrics_failed
    reasons.extend(metric_reasons)
    if "worse" not in fail_on:
        spared.insert(0, "a 'worse' verdict does not fail this gate: --prove-fail-on leaves "
                         "worse out (no-worse)" + (
                             ", and this verdict is 'worse'" if word == "worse" else ""))
    if (margin is not None and "not-within" not in fail_on and comparison is not None
            and comparison.margin is not None and not comparison.margin.holds):
        spared.append(f"{comparison.margin.word!r} does not fail this gate: --prove-fail-on "
                      "leaves not-within out (no-not-within)")
    spared.extend(metric_notes)
    targets: TargetReview | None = None
    target_failing: tuple[TargetRow, ...] = ()
    from .targets import has_targets

    if has_targets(after):  # the engine's target tests only when a target is declared
        from .targets import gate_targets, target_review

        targets = target_review(after, q=q, max_mde=max_mde, missing=missing,
                                index=indexes[1], **({} if max_errored is None
                                                     else {"max_errored": max_errored}))
        target_failing, target_reasons, target_notes = gate_targets(targets, fail_on)
        verdict_failed = verdict_failed or any(r.reason is None for r in target_failing)
        reasons.extend(target_reasons)
        spared.extend(target_notes)
    return Review(before=before, after=after, prepared=prepared, comparison=comparison,
                  labels=labels, coverage=covered, notes=notes,
                  gate=Gate(verdict_failed, tuple(reasons), frozenset(fail_on),
                            blind=blind.failing, notes=tuple(spared),
                            metrics=tuple(failing_rows(metrics, fail_on, allow_underpowered)),
                            targets=target_failing),
                  sequential=lines, metrics=metrics, targets=targets,
                  environment=environment_review(before, after),
                  twins=twin_review(comparison))
