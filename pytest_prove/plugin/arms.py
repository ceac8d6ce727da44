"""The end of a session whose rollouts declare arms: each arm compared with the reference.

With no baseline, the run's arms are compared with its reference arm (:mod:`..review.arms`),
and that review is the session's: its gate, its reports and its summary are a baseline
comparison's, the reference arm read as the baseline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..declare.seeds import split_arm
from ..store.arms import ArmsOf, arms_of

if TYPE_CHECKING:
    from ..declare.prices import Prices
    from ..review import Review
    from ..store import Run
    from .settings import Settings
    from .state import ItemPlan

__all__ = ["arm_cost_lines", "check_arms", "drift_lines", "review_arms", "run_cost_lines"]


def check_arms(selected: Mapping[str, tuple[ItemPlan, set[str]]],
               settings: Settings) -> str | None:
    """Why this run's arms cannot go with the baseline or the resumed run, before any
    rollout runs (None when they agree); the fix is in the message."""
    mine: dict[str, list[str] | None] = {}
    references: dict[str, str | None] = {}
    for rollout_id, (plan, _) in selected.items():
        base = split_arm(rollout_id)[0] if plan.arm else rollout_id
        mine[base] = list(plan.declaration.arms) or None
        references[base] = plan.declaration.reference_arm
    if settings.sequential and any(mine.values()):
        return ("--prove-sequential takes its looks against a baseline, and a rollout with "
                "arms is compared with its own reference arm, which sequential looks do not "
                "read yet; run the arms without --prove-sequential")
    for kind, name, theirs in settings.arm_references:
        for base, arms in sorted(mine.items()):
            held = theirs.get(base)
            if kind == "baseline" and arms and not (held and references[base] in held):
                return (f"{base} declares arms ({', '.join(arms)}), and baseline {name!r} "
                        f"holds no arm {references[base]} of it to check for drift (a "
                        "baseline is compared with the reference arm it was saved with). "
                        f"Drop --prove-baseline={name}: the arms are compared with each "
                        "other, on the same seeds, with no baseline; or save a baseline from "
                        "a session with these arms (--prove-save-baseline) to check it for "
                        "drift later (docs/arms.md)")
            if base not in theirs:
                continue
            if kind == "baseline" and held and not arms:
                return (f"baseline {name!r} holds arms of {base} ({', '.join(held)}), and "
                        "this rollout declares none, so nothing in it pairs with one "
                        "arm alone; declare the same arms and drop --prove-baseline (the "
                        "arms compare with each other), or save a baseline without arms "
                        "(--prove-save-baseline) and compare with that")
            if kind == "run" and held != arms:
                return (f"run {name!r} was run with the arms {_shown(held)} of {base}, and "
                        f"the rollout now declares {_shown(arms)}: resumed, the run would "
                        "hold replicates of arms the other never ran, and compare arms "
                        "that did not run side by side; declare the arms it ran "
                        f"({_shown(held)}) to resume it, or start a new run")
    return None


def _shown(arms: list[str] | None) -> str:
    return "none" if not arms else "[" + ", ".join(arms) + "]"


def review_arms(run: Run, settings: Settings, asked: Mapping[str, Any], *,
                baseline: Run | None = None) -> tuple[Review | None, str | None, list[str]]:
    """The run's arms compared with its reference arm, as a baseline comparison is: the
    review (None: nothing compared), the refusal, and the notes to print (what was
    compared, or an arm that did not run, e.g. left out by -k; with ``baseline``, the
    drift check's lines)."""
    drift = [] if baseline is None else drift_lines(baseline, run, settings, asked)
    from ..declare.seeds import arm_rollout
    from ..declare.spec import SpecError
    from ..review import CaseMixError, DeclarationError
    from ..review.arms import arms_review

    found = arms_of(run.manifest)
    ran = {str(r.get("rollout")) for r in run.episodes}
    missing = sorted(f"{arm} of {base}" for base, info in found.items() for arm in info.arms
                     if arm_rollout(base, arm) not in ran)
    if missing and baseline is not None:
        # --prove-baseline asks for a verdict on the change, and the arms hold it: with an
        # arm left out, no condition's change was judged, so the gate cannot pass.
        return None, (
            f"no verdict: --prove-baseline={baseline.name} asks whether the change made things "
            f"worse, and the change is judged between the arms, but no episode of arm "
            f"{', '.join(missing)} ran in this session (left out by the selection?), so no "
            "condition was compared. Run every arm (drop the -k or the paths that leave one "
            f"out), or drop --prove-baseline={baseline.name} to run one arm alone without a "
            "verdict"), drift
    if missing:
        # An arm left out on purpose (-k cheaper runs one arm) and no verdict asked for:
        # nothing to compare it with, said; the session passes as one without a baseline.
        return None, None, [
            f"arms not compared: no episode of arm {', '.join(missing)} ran in this session "
            "(left out by the selection?); run every arm to compare them", *drift]
    try:
        review = arms_review(run, q=settings.q, max_mde=settings.max_mde, **asked)
    except (DeclarationError, CaseMixError, SpecError, ValueError) as exc:
        return None, str(exc), drift
    return review, None, [*(_compared_line(info, baseline is not None)
                            for info in found.values()), *drift]


def drift_lines(baseline: Run, run: Run, settings: Settings,
                asked: Mapping[str, Any]) -> list[str]:
    """The drift check's lines: the run's reference arm against the baseline's, paired by
    seed. A significant difference is the baseline's drift, said with the conditions and
    the fix; the gate never reads it (the arms' comparison judges the change)."""
    from ..declare.spec import SpecError
    from ..review import CaseMixError, DeclarationError
    from ..review.arms import drift_review

    try:
        found = drift_review(baseline, run, q=settings.q, max_mde=settings.max_mde, **asked)
    except (DeclarationError, CaseMixError, SpecError, ValueError) as exc:
        return [f"drift check not made against baseline {baseline.name!r}: {exc}"]
    if found is None:
        return [f"drift check not made: baseline {baseline.name!r} holds no reference arm "
                "of this run's rollouts"]
    arms = ", ".join(sorted({info.reference for info in arms_of(run.manifest).values()}))
    comparison = found.comparison
    if comparison is None or comparison.verdict.word not in ("worse", "safer"):
        word = "nothing to compare" if comparison is None else comparison.verdict.word
        return [f"drift check: arm {arms} against baseline {baseline.name!r} on the same "
                f"seeds: {word}; the baseline has not been shown to drift (the gate reads the "
                "arms' comparison only)"]
    moved = [*comparison.verdict.worse, *comparison.verdict.safer]
    conditions = ", ".join(dict.fromkeys(r.condition for r in moved))
    rows = "; ".join(f"{r.condition} {r.event} {r.before:.3f} -> {r.after:.3f}"
                     for r in moved[:6])
    return [f"the baseline has drifted: arm {arms} ran the same code on the same seeds as "
            f"baseline {baseline.name!r} and differs significantly in {conditions} ({rows}); "
            "something besides the change moved (the model behind its name, a dependency, "
            "the infrastructure). The gate judges the change by the arms' comparison only, "
            "which ran side by side in this session, and does not blame it for the drift. "
            f"Refresh the baseline: pytest --prove-baseline={baseline.name} "
            "--prove-update-baseline (after review), or a session without --prove-baseline "
            f"and with --prove-save-baseline={baseline.name}"]


def run_cost_lines(run: Run, prices: Prices) -> list[str]:
    """The session's cost line, and with arms each arm's line after it."""
    from .budget import cost_lines

    lines = cost_lines(run, prices)
    return lines + arm_cost_lines(run, prices) if arms_of(run.manifest) else lines


def arm_cost_lines(run: Run, prices: Prices) -> list[str]:
    """What each arm used and cost, per episode: one line an arm (none without tokens)."""
    from ..report._format import money, terminal_text
    from ..review.cost import cost_of
    from ..store.arms import arm_run

    arms = list(dict.fromkeys(a for info in arms_of(run.manifest).values() for a in info.arms))
    lines = []
    for arm in arms:
        cost = cost_of(arm_run(run, arm), prices)
        if not cost.models or not cost.episodes:
            continue
        models = ", ".join(terminal_text(m.model) for m in cost.models)
        price = cost.price
        each = "" if price is None else (
            f", {money(price)}: {money(price / cost.episodes)} per episode")
        lines.append(f"arm {arm}: tokens: {cost.input:,} input and {cost.output:,} output in "
                     f"{cost.calls:,} calls over {cost.episodes:,} episodes ({models}){each}")
    return lines


def _compared_line(info: ArmsOf, drift: bool) -> str:
    """What the session compared, said once a rollout: the gate read no baseline."""
    others = ", ".join(info.compared)
    read = ("the baseline is read for the drift check alone" if drift
            else "no baseline read")
    return (f"arms of {info.rollout}: {others} compared with the reference arm "
            f"{info.reference}, twin by twin on the same seeds in this run ({read})")
