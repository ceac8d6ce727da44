"""The targets a rollout runs with: its own, and those of the session (``--prove-target``,
ini ``prove_targets``) whose event it declares."""

from __future__ import annotations

from dataclasses import replace

from .spec import Declaration
from .targets import NO_OUTCOME_EVENT, Target

__all__ = ["takes", "with_targets"]


def takes(declaration: Declaration, target: Target) -> bool:
    """Whether a session's ``target`` is one of ``declaration``'s: its event is a declared
    outcome or ``no outcome``; pass^k and pass@k when it declares a success."""
    if target.kind != "rate":
        return bool(declaration.successes)
    return target.event == NO_OUTCOME_EVENT or target.event in declaration.outcomes


def with_targets(declaration: Declaration, targets: tuple[Target, ...]) -> Declaration:
    """``declaration`` with the session's ``targets`` it takes, after its own."""
    own = declaration.target_list
    taken = tuple(t for t in targets if takes(declaration, t) and t not in own)
    return replace(declaration, targets=own + taken) if taken else declaration
