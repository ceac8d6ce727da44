"""What a comparison set aside, worded once for every renderer: conditions not run, new,
without any outcome, replicates without a twin, and how episodes without an outcome were
read.

Each line is ``(head, text)``: the renderer writes the head its own way (``not run:`` in a
terminal, bold in markdown) and passes every value that came from a rollout or the store
through its own escape, given as ``esc``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from ..declare.chaos import FaultCount

if TYPE_CHECKING:
    # Only its type: the session's summary imports this module, and importing the review
    # would import the engine into sessions that compare nothing.
    from pytest_prove.review import Review
    from pytest_prove.review.describe import Description

__all__ = ["fault_text", "run_set_aside", "set_aside", "unfinished"]

_SHOWN = 6


def _some(values: Sequence[str], esc: Callable[[str], str]) -> str:
    more = f" and {len(values) - _SHOWN} more" if len(values) > _SHOWN else ""
    return ", ".join(esc(v) for v in values[:_SHOWN]) + more


def _by_reason(counts: Mapping[str, int], esc: Callable[[str], str]) -> str:
    return ", ".join(f"{n} {esc(reason)}" for reason, n in sorted(counts.items()))


def _no_outcome(counts: Mapping[str, int], esc: Callable[[str], str],
                fate: str) -> tuple[str, str]:
    """The conditions none of whose episodes had an outcome; ``fate``: what became of them."""
    shown = [f"{esc(label)} ran {n} episode(s), none had an outcome"
             for label, n in list(counts.items())[:_SHOWN]]
    more = len(counts) - len(shown)
    return ("no outcome", f"{'; '.join(shown)}{f'; and {more} more' if more > 0 else ''}"
                          f" ({fate}: missing outcomes are ignored)")


def _without_outcome(left_out: Mapping[str, int], missing: str, esc: Callable[[str], str],
                     read: str) -> tuple[str, str]:
    """The episodes without an outcome, by reason: left out on request (``--missing
    ignore``), else ``read`` says how they were read."""
    reasons = _by_reason(left_out, esc)
    total = sum(left_out.values())
    if missing == "ignore":
        return ("missing outcomes ignored", f"{total} episode(s) without an outcome were "
                                            f"left out on request ({reasons})")
    return "without an outcome", f"{total} episode(s) ({reasons}); {read}"


def _kinds(by_kind: Mapping[str, int]) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in by_kind.items() if n) or "none"


def fault_text(counts: Mapping[str, FaultCount], esc: Callable[[str], str]) -> str:
    """The faults chaos injected into a run, in all and by condition."""
    episodes = sum(c.episodes for c in counts.values())
    hit = sum(c.hit for c in counts.values())
    calls = sum(c.calls for c in counts.values())
    kinds: dict[str, int] = {}
    for count in counts.values():
        for kind, n in count.by_kind.items():
            kinds[kind] = kinds.get(kind, 0) + n
    faults = sum(kinds.values())
    by_condition = "; ".join(f"{esc(label)} {c.faults} in {c.calls} calls, {c.hit} of "
                             f"{c.episodes} episodes hit"
                             for label, c in list(counts.items())[:_SHOWN])
    more = f"; and {len(counts) - _SHOWN} more conditions" if len(counts) > _SHOWN else ""
    return (f"{faults} fault(s) in {calls} HTTP calls ({_kinds(kinds)}); {hit} of {episodes} "
            f"episodes had at least one. By condition: {by_condition}{more}")
def _whole(text: str, esc: Callable[[str], str]) -> str:
    """``text`` escaped by ``esc`` without being shortened (a terminal's escape keeps the
    ends of a long value only): in pieces short enough to be kept whole."""
    return "".join(esc(text[i:i + 60]) for i in range(0, len(text), 60))


def set_aside(review: Review, esc: Callable[[str], str]) -> list[tuple[str, str]]:
    """The lines, as ``(head, text)``, in the order a reader needs them."""
    prepared = review.prepared
    before, after = esc(review.labels.before), esc(review.labels.after)
    from .environment import environment_notes

    lines = environment_notes(review, esc)
    lines += [
        ("sequential", f"{esc(label)}: {_whole(reason, esc)}" if label else _whole(reason, esc))
        for label, reason in review.sequential]
    if prepared.chaos:
        differ = "; ".join(f"{esc(rid)}: {esc(mine)} in {before}, {esc(theirs)} in {after}"
                           for rid, mine, theirs in prepared.chaos[:_SHOWN])
        lines.append(("faults differ", f"compared as asked ({differ}): the difference "
                                       "measures what these faults do to the agent"))
    for arm, injected in prepared.faults.items():
        lines.append((f"faults injected in {before if arm == 'before' else after}",
                      fault_text(injected, esc)))
    # A condition the run left out by mistake (it never ran: a kill, a rename) is no
    # partial run on purpose: the gate fails on it, and it is worded apart.
    mistaken = {label for labels in review.coverage.by_mistake.values() for label in labels}
    on_purpose = [c for c in prepared.not_run if c not in mistaken]
    never = [c for c in prepared.not_run if c in mistaken]
    if on_purpose:
        lines.append(("not run", f"{len(on_purpose)} condition(s) of {before} have no "
                                 f"episode to compare in {after} and are left out of the "
                                 f"verdict: {_some(on_purpose, esc)}"))
    if never:
        lines.append(("never ran", f"{len(never)} condition(s) of {before} have no episode "
                                   f"in {after}, which did not leave them out on purpose; "
                                   f"nothing vouches for them: {_some(never, esc)}"))
    if prepared.no_outcome:
        lines.append(_no_outcome(prepared.no_outcome, esc, "not compared"))
    if prepared.new:
        lines.append(("new", f"{len(prepared.new)} condition(s) only in {after}, not "
                             f"compared: {_some(prepared.new, esc)}"))
    if prepared.unpaired and not review.sequential:
        # (A sequential run leaves the baseline's later twins of a decided condition unread
        # on purpose: its own note says how many episodes ran.)
        counts = ", ".join(f"{n} of {after if arm == 'after' else before}"
                           for arm, n in sorted(prepared.unpaired.items(), reverse=True))
        lines.append(("unpaired", f"replicates with no twin in the other run were left out "
                                  f"({counts}); to pair them all, give both runs the same "
                                  "replicates (--prove-replicates, and no -k that picks "
                                  "replicates)"))
    if prepared.left_out:
        lines.append(_without_outcome(prepared.left_out, prepared.missing, esc,
                                      "a rise in their share is tested as the event 'no "
                                      "outcome' of their condition"))
    return lines


def unfinished(review: Review) -> list[tuple[str, str]]:
    """As ``(head, text)``, unescaped: why the comparison cannot vouch for every condition
    (``incomplete``: the gate's reasons beside the verdict, such as a run that did not
    finish or conditions that never ran), then any other note on how a run ended
    (``note``). A report says these right after its verdict."""
    reasons = list(dict.fromkeys(review.gate.reasons))
    return ([("incomplete", r) for r in reasons]
            + [("note", n) for n in dict.fromkeys(review.notes) if n not in reasons])


def run_set_aside(found: Description, esc: Callable[[str], str]) -> list[tuple[str, str]]:
    """What a single run's description left out or read apart, as ``(head, text)``."""
    lines: list[tuple[str, str]] = []
    if found.no_outcome:
        lines.append(_no_outcome(found.no_outcome, esc, "not shown"))
    if found.left_out:
        lines.append(_without_outcome(found.left_out, found.missing, esc,
                                      "each event's rate is over the episodes with an "
                                      "outcome, and their share is the event 'no outcome' of "
                                      "their condition"))
    return lines
