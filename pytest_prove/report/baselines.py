"""What ``baseline-diff`` and ``baseline-text`` print: what a change to a baseline does,
condition by condition, and a baseline as plain text, one line per replicate (git's
textconv).

Every name that came from a rollout or the store goes through
:func:`~pytest_prove.report._format.terminal_text` in the lines; the document keeps them
whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_prove.declare.spec import condition_label
from pytest_prove.review.baseline_diff import BaselineDiff, EventRate, ending_word

from ._format import table, terminal_text

__all__ = ["baseline_diff_document", "baseline_diff_lines", "baseline_text_lines",
           "condition_label_of"]


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _event_row(e: EventRate) -> tuple[str, ...]:
    moved = ""
    if e.rate_before is not None and e.rate_after is not None and e.changed:
        moved = f"{e.rate_after - e.rate_before:+.3f}"
    return (f"    {terminal_text(e.event)} ({e.kind})", _rate(e.rate_before), "->",
            _rate(e.rate_after), moved, f"{e.before} of {e.before_of}",
            f"{e.after} of {e.after_of}")


def _baseline_name(run: Any) -> str:
    return f"{terminal_text(run.name)!r} ({terminal_text(str(run.path), 120)}, " \
           f"{len(run.episodes)} episodes)"


def baseline_diff_lines(d: BaselineDiff, verbose: bool = False) -> list[str]:
    """What a change to a baseline does, condition by condition: the changed ones first
    (each event's rate before and after, the replicates that now end otherwise), then how
    many did not change."""
    changed = d.changed
    lines = [f"baseline-diff: {_baseline_name(d.old)} -> {_baseline_name(d.new)}"]
    if not changed and not d.header:
        lines.append(f"no change: the two baselines hold the same endings in all "
                     f"{len(d.conditions)} condition(s)")
        return lines
    pairing = ("same salt: each replicate is read beside its twin on the same seed"
               if d.same_salt else
               "other salts: the episodes ran on other seeds, so only rates are compared")
    lines.append(f"{len(changed)} of {len(d.conditions)} condition(s) changed"
                 + (f"; {d.flips} replicate(s) end otherwise on the same seed"
                    if d.same_salt else "") + f" ({pairing})")
    for said in d.header:
        lines.append(f"header: {terminal_text(said, 200)}")
    for change in changed:
        what = [f"{change.episodes_before} -> {change.episodes_after} episodes"]
        if change.episodes_before == 0:
            what = [f"new: {change.episodes_after} episodes"]
        elif change.episodes_after == 0:
            what = [f"removed: it had {change.episodes_before} episodes"]
        if change.flipped:
            shown = change.flipped if verbose else change.flipped[:6]
            listed = ", ".join(f"r{r} {terminal_text(b, 30)} -> {terminal_text(a, 30)}"
                               for r, b, a in shown)
            more = len(change.flipped) - len(shown)
            what.append(f"{len(change.flipped)} replicate(s) changed: {listed}"
                        + (f" and {more} more (-v lists them)" if more else ""))
        lines.append(f"{terminal_text(change.label, 120)}: {'; '.join(what)}")
        rows = [_event_row(e) for e in change.events
                if e.changed or change.episodes_before == 0 or change.episodes_after == 0]
        lines += table(("", "before", "", "after", "change", "before (n)", "after (n)"), rows,
                       frozenset({1, 3, 4, 5, 6}))[1:]
    same = len(d.conditions) - len(changed)
    if same:
        lines.append(f"unchanged: {same} condition(s) hold the same endings")
    lines.append("a failure rate that rose (or a success rate that fell) in the baseline "
                 "makes later gates easier to pass; next: check that the new baseline was "
                 "saved from a complete run of the agent as merged (pytest "
                 "--prove-save-baseline NAME)")
    return lines


def baseline_diff_document(d: BaselineDiff) -> dict[str, Any]:
    """``baseline-diff --json``: every condition of either baseline, changed or not."""
    return {"old": {"name": d.old.name, "path": str(d.old.path), "salt": d.old.salt,
                    "episodes": len(d.old.episodes)},
            "new": {"name": d.new.name, "path": str(d.new.path), "salt": d.new.salt,
                    "episodes": len(d.new.episodes)},
            "same_salt": d.same_salt, "header": list(d.header),
            "changed": len(d.changed), "changed_replicates": d.flips,
            "conditions": [c.to_json() for c in d.conditions]}


def baseline_text_lines(run: Any, refused: str | None = None, raw: str = "") -> list[str]:
    """A baseline as plain text, one line per replicate (``git diff`` shows an outcome that
    changed as one line): its header's gist, then each condition's endings.  A file that
    is refused: the reason, then its raw lines."""
    if refused is not None:
        return [f"damaged baseline: {terminal_text(refused, 400)}", *raw.splitlines()]
    m = run.manifest
    lines = [f"baseline {terminal_text(run.name)!r}: salt {terminal_text(run.salt)}, "
             f"{len(run.episodes)} episodes, saved {m.get('saved', '-')} from run "
             f"{terminal_text(str(m.get('run_id', '-')))}"]
    for rollout, info in sorted((m.get("rollouts") or {}).items()):
        declaration = info.get("declaration") or {} if isinstance(info, Mapping) else {}
        lines.append(f"rollout {terminal_text(rollout)}: outcomes "
                     f"{', '.join(map(str, declaration.get('outcomes') or ()))}; failures "
                     f"{', '.join(map(str, declaration.get('failures') or ()))}; successes "
                     f"{', '.join(map(str, declaration.get('successes') or ()))}")
    last = None
    for record in sorted(run.episodes, key=lambda r: (str(r["rollout"]),
                                                      str(r["condition_key"]),
                                                      int(r["replicate"]))):
        condition = (str(record["rollout"]), str(record["condition_key"]))
        label = terminal_text(condition_label_of(record), 120)
        if condition != last:
            last = condition
            lines.append(f"condition {label} of {terminal_text(condition[0])}")
        lines.append(f"  {label} r{record['replicate']}: {terminal_text(ending_word(record))}")
    return lines


def condition_label_of(record: Mapping[str, Any]) -> str:
    """An episode's condition as a person reads it."""
    return condition_label(dict(record.get("condition") or {}))
