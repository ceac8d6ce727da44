"""The end of a session whose rollouts declare arms: each arm compared with the reference.

With no baseline, the run's arms are compared with its reference arm (:mod:`..review.arms`),
and that review is the session's: its gate, its reports and its summary are a baseline
comparison's, the reference arm read as the baseline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..store.arms import ArmsOf, arms_of

if TYPE_CHECKING:
    from .session import Outcome, ProveSession

__all__ = ["review_arms"]


def review_arms(session: ProveSession, outcome: Outcome) -> list[str]:
    """Compare the run's arms and set ``outcome`` as a baseline comparison does; the notes
    to print (an arm that did not run, e.g. left out by -k)."""
    from ..declare.spec import SpecError
    from ..review import CaseMixError, DeclarationError
    from ..review.arms import arms_review

    run = outcome.run = session.ended_run()
    found = arms_of(run.manifest)
    ran = {str(r.get("rollout")) for r in run.episodes}
    from ..declare.seeds import arm_rollout

    missing = sorted(f"{arm} of {base}" for base, info in found.items() for arm in info.arms
                     if arm_rollout(base, arm) not in ran)
    if missing:
        # An arm left out on purpose (-k cheaper runs one arm): nothing to compare it with.
        return [f"arms not compared: no episode of arm {', '.join(missing)} ran in this "
                "session (left out by the selection?); run every arm to compare them"]
    try:
        outcome.review = arms_review(run, q=session.settings.q,
                                     max_mde=session.settings.max_mde, **session.asked)
    except (DeclarationError, CaseMixError, SpecError, ValueError) as exc:
        outcome.refusal = str(exc)
        return []
    outcome.failed_gate = outcome.review.gate.failed
    return [_compared_line(info) for info in found.values()]


def _compared_line(info: ArmsOf) -> str:
    """What the session compared, said once a rollout: no baseline was read."""
    others = ", ".join(info.compared)
    return (f"arms of {info.rollout}: {others} compared with the reference arm "
            f"{info.reference}, twin by twin on the same seeds in this run (no baseline read)")
