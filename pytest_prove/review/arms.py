"""The arms of one run compared: each arm with the reference arm, as a baseline is.

:func:`arms_review` reads a run whose rollouts declare arms (``@prove.rollout(arms=[...])``)
as two runs (:func:`~..store.arms.arm_runs`: the reference arm's episodes and the other
arms', twins on one seed) and reviews them with :func:`~.review`, so that the engine, the
gate, the margin, the metric and target rows, the cost and every report read the arms'
comparison as they read a run against its baseline.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from ..store import Run
from ..store.arms import ArmsOf, arm_runs, arms_of, reference_runs
from . import Review, review

__all__ = ["ArmsOf", "arm_runs", "arms_of", "arms_review", "drift_review"]


def arms_review(run: Run, *, arms: Collection[str] | None = None, **asked: Any) -> Review:
    """``run``'s arms (those of ``arms`` alone, when given) against its reference arm,
    paired by seed, per condition: :func:`~.review`'s ``Review``, ``before`` the reference
    arm and ``after`` the others. ``asked``: :func:`~.review`'s keywords."""
    before, after = arm_runs(run, arms)
    return review(before, after, **asked)


def drift_review(baseline: Run, run: Run, **asked: Any) -> Review | None:
    """The drift check: ``run``'s reference arm against the same arm in ``baseline`` (saved
    from a session with these arms), paired by seed (the run took the baseline's salt).
    The same code on the same seeds: a significant difference is the world that moved (a
    provider, a dependency), not the change. None when the baseline holds no such arm."""
    found = reference_runs(baseline, run)
    if found is None:
        return None
    return review(found[0], found[1], **asked)

