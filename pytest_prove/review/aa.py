"""An A/A check: the same code run twice on the same seeds, read as a comparison.

Nothing changed between the two runs, so every row that reads worse or safer is a false
alarm, and how often twins ended alike is the user's own noise floor: an agent that replays
on a seed has agreement near 1, one whose episodes are a fresh draw each time about what
independent twins give. Runs on different salts have no twins and are refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import final

from ..store import Run, Store
from . import RefusalError, Review, review
from .pairing import Missing

__all__ = ["AAReview", "aa_of", "observed_agreement"]


@final
@dataclass(frozen=True, slots=True)
class AAReview:
    """The comparison of two runs of the same code, and its false alarms."""

    review: Review
    worse: int  # rows counted worse: false alarms, since nothing changed
    safer: int


def aa_of(done: Review) -> AAReview:
    """``done`` read as an A/A check; refused when its runs share no salt (no twins)."""
    before, after = done.before, done.after
    if not before.salt or before.salt != after.salt:
        raise RefusalError(
            f"an A/A check reads twins, and runs {done.labels.before!r} and "
            f"{done.labels.after!r} ran on different salts, so no seed ran in both; run the "
            "same code twice on one salt (pytest --prove-salt=WORD, twice) and name those two "
            "runs")
    _check_two(before, after, done.labels.before, done.labels.after)
    verdict = done.require_comparison().verdict
    return AAReview(done, len(verdict.worse), len(verdict.safer))


def _check_two(before: Run, after: Run, first: str, second: str) -> None:
    """Refuse one run read against itself (a baseline holds the id of the run it was saved
    from): its twins are the same episodes, so they agree whatever the agent does."""
    if before.run_id == after.run_id:
        raise RefusalError(
            f"{first!r} and {second!r} are the same run ({before.run_id}), so each twin is "
            "one episode read twice and agrees with itself whatever the agent does; name two "
            "runs of the same code on one salt")


def observed_agreement(store: Store, names: Sequence[str], *, q: float, max_mde: float,
                       missing: Missing = "test") -> Review:
    """The paired comparison whose twins a design reads (--prove-agreement-from): two runs
    ``A,B`` on one salt, or one run read against the run it was paired with (its baseline,
    as that baseline stood: refused when the baseline was replaced since)."""
    if len(names) == 2:
        before, after = store.open(names[0]), store.open(names[1])
    else:
        after = store.open(names[0])
        paired = after.manifest.get("paired_with") or {}
        baseline = paired.get("baseline") if isinstance(paired, dict) else None
        if not baseline:
            raise RefusalError(
                f"run {after.name!r} was not paired with a baseline, so it has no twins to "
                "read; name two runs of one salt instead (--prove-agreement-from=A,B), or a "
                "run made with --prove-baseline")
        before = store.open(f"baseline:{baseline}")
        if before.run_id != paired.get("run_id"):
            raise RefusalError(
                f"run {after.name!r} was paired with baseline {baseline!r} as it stood then "
                f"(run {paired.get('run_id')}), and the baseline has been replaced since; "
                "name both runs instead (--prove-agreement-from=A,B)")
    if not before.salt or before.salt != after.salt:
        raise RefusalError(
            f"runs {before.name!r} and {after.name!r} ran on different salts, so no seed ran "
            "in both and there are no twins to read; name two runs of one salt")
    _check_two(before, after, before.name, after.name)
    done = review(before, after, events=None, q=q, max_mde=max_mde, fail_on=frozenset(),
                  missing=missing)
    if done.twins is None:
        raise RefusalError(
            f"runs {before.name!r} and {after.name!r} share no paired condition with an "
            "outcome, so there are no twins to read; name runs of the rollouts you run")
    return done
