"""What the end of a pytest session prints in its ``pytest-prove`` section.

The verdict first (or why there is none), then the rows that matter, what was left out,
the run and where it was stored, what it cost, and the next step.  With pytest's ``-q``
only the verdict line, every reason the gate failed and where the run and any report or
baseline were written.  Reads the session's outcome and the review; computes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._format import plain_text, terminal_text
from .notes import set_aside

if TYPE_CHECKING:
    # Only its type: every session prints this summary, and importing the review would
    # import the engine (numpy, scipy) into sessions that compare nothing.
    from pytest_prove.review import Review

__all__ = ["no_rollout_ran", "summary_lines"]


def no_rollout_ran(baseline: str, stopped: object = None) -> str:
    if stopped:
        return (f"gate failed: the session stopped ({stopped}) before any rollout ran, so "
                f"nothing was compared with baseline {baseline!r}")
    return (f"gate failed: no rollout ran in this session, so nothing was compared with "
            f"baseline {baseline!r}. Run the tests that made it (were they moved or renamed, "
            "or did -k select none of them?)")


def _spared(review: Review) -> list[str]:
    """What the gate was told not to fail on, when it spared something: never silent."""
    return [f"pytest-prove: note: {plain_text(note)}" for note in review.gate.notes]


def _headline(review: Review) -> list[str]:
    """The gate's line when the metric or target rows fail it and the outcome rows' verdict
    alone would read as a pass (:mod:`.headline`); said first."""
    from .headline import gate_headline

    said = gate_headline(review)
    return [] if said is None else [f"pytest-prove: {plain_text(said)}"]


def _left_aside(review: Review | None) -> list[str]:
    if review is None:
        return []
    return [f"{head}: {text}" for head, text in set_aside(review, terminal_text)]


def _quiet_lines(*, refusal: str | None, review: Review | None, notes: Sequence[str],
                 ended: bool, manifest: Mapping[str, Any], where: str,
                 capped: str | None) -> list[str]:
    """What ``-q`` keeps: why the gate failed (never left out), the verdict line, and where
    the run, the report and any baseline went (the notes say what was written, or not)."""
    lines: list[str] = []
    if capped is not None:
        lines.append(f"pytest-prove: {capped}; no new episode started, run "
                     f"{terminal_text(str(manifest['name']))!r} is marked capped")
    if refusal is not None:
        lines.append(f"pytest-prove: {plain_text(refusal)}")
    if review is not None:
        lines.extend(_headline(review))
        lines.extend(f"pytest-prove: gate failed: {plain_text(reason)}"
                     for reason in review.gate.reasons)
        if review.comparison is not None:
            from .terminal import margin_line, verdict_line

            lines.append(verdict_line(review.comparison))
            said = margin_line(review.comparison)
            if said is not None:
                lines.append(said)
        if review.metrics is not None:
            from .metrics import metric_margin_line, metric_verdict_line

            lines.append(metric_verdict_line(review.metrics))
            said = metric_margin_line(review.metrics)
            if said is not None:
                lines.append(said)
        lines.extend(_spared(review))
        from .environment import environment_notes

        # Of the environment, only the stale-baseline warning (a difference not declared as
        # the change): the rest is said without -q.
        lines.extend(f"{head}: {text}" for head, text in environment_notes(review,
                                                                           terminal_text)
                     if head == "stale baseline?")
    if ended:
        lines.append(f"run {terminal_text(str(manifest['name']))!r} ({manifest['status']}) "
                     f"stored in {where}")
    lines.extend(map(plain_text, notes))
    return lines


def _metrics_only(manifest: Mapping[str, Any]) -> bool:
    """Whether every rollout of the run declares metrics and no outcomes."""
    found = [(info or {}).get("declaration") or {}
             for info in (manifest.get("rollouts") or {}).values()]
    return bool(found) and all(not d.get("outcomes") and d.get("metrics") for d in found)


def summary_lines(*, refusal: str | None, review: Review | None, after: str | None,
                  notes: Sequence[str], verbose: bool, ended: bool,
                  manifest: Mapping[str, Any], counts: Mapping[str, int], where: str,
                  cost: Sequence[str], capture: Sequence[str], capped: str | None,
                  suggest_baseline: bool, quiet: bool = False, targets: Any = None,
                  target_gate: Sequence[Any] = ((), (), ())) -> list[str]:
    """The section's lines: with ``quiet`` (pytest's ``-q``) only what :func:`_quiet_lines`
    keeps, with ``verbose`` every row of the table. ``targets``: a run without a baseline
    read against its targets, and ``target_gate`` its (failing rows, reasons, notes)."""
    if targets is not None or (review is not None and review.targets is not None):
        from .targets import target_summary

        return target_summary(summary_lines, targets, target_gate, review=review,
                              quiet=quiet, verbose=verbose, refusal=refusal, after=after,
                              notes=notes, ended=ended, manifest=manifest, counts=counts,
                              where=where, cost=cost, capture=capture, capped=capped,
                              suggest_baseline=suggest_baseline)
    if quiet:
        return _quiet_lines(refusal=refusal, review=review, notes=notes, ended=ended,
                            manifest=manifest, where=where, capped=capped)
    lines: list[str] = []
    if refusal is not None:
        lines.append(f"pytest-prove: {plain_text(refusal)}")
    if review is not None:
        lines.extend(_headline(review))
        lines.extend(f"pytest-prove: gate failed: {plain_text(reason)}"
                     for reason in review.gate.reasons)
        if review.comparison is not None and after is not None:
            from .terminal import format_comparison
            from .twins import twin_lines

            lines.extend(format_comparison(review.comparison, before=review.before.name,
                                           after=after, verbose=verbose,
                                           beside=twin_lines(review.twins, verbose=verbose)))
        if review.metrics is not None:
            from .metrics import metric_lines

            lines.extend(metric_lines(review.metrics, verbose=verbose))
        lines.extend(_spared(review))
    lines.extend(_left_aside(review))
    if ended:
        name = str(manifest["name"])
        status = manifest["status"]
        ended_well = ("measured (metrics only)" if _metrics_only(manifest)
                      else "with an outcome")
        lines.append(
            f"run {terminal_text(name)!r} ({status}): {counts['episodes']} episodes, "
            f"{counts['with_outcome']} {ended_well}, {counts['no_outcome']} with none, "
            f"{counts['errored']} errored; stored in {where}")
        lines.extend(cost)
        lines.extend(capture)
        if capped is not None:
            lines.insert(0, f"pytest-prove: {capped}; no new episode started, run {name!r} is "
                            "marked capped")
            lines.append(f"next: raise the cap, or finish the run later with "
                         f"--prove-resume={name}")
        elif status == "incomplete":
            lines.append(f"next: finish it with --prove-resume={name}")
        elif suggest_baseline:
            lines.append("next: keep it as a baseline with --prove-save-baseline NAME, then "
                         "compare later runs with --prove-baseline NAME")
    lines.extend(map(plain_text, notes))
    return lines
