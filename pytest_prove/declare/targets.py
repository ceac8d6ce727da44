"""Absolute reliability targets: "refund resolves at least 90% of the time", "all 8 of 8
tries succeed at least half the time", declared on the decorator (``targets=``), in a sweep
spec (``[targets]``), in ini (``prove_targets``) or on the command line (``--prove-target``).

A target is written ``EVENT OP RATE``, optionally after the condition it holds for:

* ``EVENT`` is a declared outcome, ``no outcome`` (episodes that ended without one), or
  ``pass^K`` (all K tries of the condition succeed) or ``pass@K`` (at least one of K does),
  both on the declared successes, K >= 1;
* ``OP`` is ``<=`` (the rate must be at most RATE) or ``>=`` (at least RATE);
* ``RATE`` is a number strictly between 0 and 1, or a percentage (``90%``);
* ``~D`` after the rate sizes the design check for the distance D instead of
  ``--prove-max-mde`` (``resolved>=0.9~0.05``);
* a condition, before a colon: ``ticket=refund: resolved>=0.9`` (several axes with commas,
  ``ticket=refund, model=mini: resolved>=0.9``, or spaces as a label writes them). Without
  one the target holds for every condition of the rollout.

On the decorator and in a sweep spec the event (with its condition) is the key and the side
and rate its value: ``targets={"unresolved": "<= 0.10", "ticket=refund: pass^8": ">= 0.5"}``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, final

from ..errors import ProveError

__all__ = ["NO_OUTCOME_EVENT", "Side", "Target", "TargetError", "check_target_events",
           "declared_events", "declares_targets", "parse_target", "parse_target_lines",
           "parse_targets"]

Side = Literal["<=", ">="]
Kind = Literal["rate", "pass^k", "pass@k"]

#: The event of episodes that ended without an outcome (declare/spec.py has the same name).
NO_OUTCOME_EVENT: Final = "no outcome"

_PASS: Final = re.compile(r"^pass([\^@])\s*(-?\d+)$")
_RATE: Final = re.compile(r"^(<=|>=)\s*(\S+)(\s*~\s*\S+)?$")
_EXAMPLE: Final = 'resolved>=0.9, unresolved<=0.1, pass^8>=0.5 or "ticket=refund: resolved>=0.9"'


class TargetError(ProveError, ValueError):
    """A target that cannot be read or used, with where it was written and the fix."""


@final
@dataclass(frozen=True, slots=True)
class Target:
    """One target: the rate of ``event`` (or of pass^k / pass@k on the successes) is
    ``side`` ``rate``, in every condition or in those ``condition`` names."""

    event: str
    side: Side
    rate: float
    k: int = 1
    kind: Kind = "rate"
    #: The condition it holds for, as (axis, value as written) pairs; () for every one.
    condition: tuple[tuple[str, str], ...] = ()
    #: Where it was written (for messages), not part of what it is.
    where: str = field(default="", compare=False)
    #: The distance its design is sized for (``~D`` after the rate); None: --prove-max-mde.
    distance: float | None = None

    @property
    def subject(self) -> str:
        """What is measured, as written: ``resolved``, ``pass^8``."""
        if self.kind == "rate":
            return self.event
        return f"pass{'^' if self.kind == 'pass^k' else '@'}{self.k}"

    @property
    def claim(self) -> str:
        """The target without its condition: ``resolved>=0.9`` (``~0.05``: its distance)."""
        spread = "" if self.distance is None else f"~{self.distance:g}"
        return f"{self.subject}{self.side}{self.rate:g}{spread}"

    @property
    def text(self) -> str:
        """The target as it is written back: ``ticket=refund: resolved>=0.9``."""
        if not self.condition:
            return self.claim
        return f"{', '.join(f'{a}={v}' for a, v in self.condition)}: {self.claim}"

    def applies(self, condition: Mapping[str, object]) -> bool:
        """Whether it holds for ``condition`` (axis values as a condition label shows them)."""
        return all(a in condition and _shown(condition[a]) == v for a, v in self.condition)


def _shown(value: object) -> str:
    """An axis value as written in a target (and in a condition's label)."""
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _refuse(where: str, written: str, why: str) -> TargetError:
    return TargetError(f"{where}: target {written!r} {why}; write EVENT<=RATE or "
                       f"EVENT>=RATE, e.g. {_EXAMPLE} (docs/targets.md)")


def _condition(text: str, where: str, written: str) -> tuple[tuple[str, str], ...]:
    found: list[tuple[str, str]] = []
    # Axes with commas (ticket=refund, model=mini), or with spaces as a condition's label
    # writes them (ticket=refund model=mini); a value may hold a space when commas part them.
    parts = [word for part in text.split(",")
             for word in (part.split() if part.count("=") > 1 else [part])]
    for part in parts:
        axis, sep, value = part.partition("=")
        axis, value = axis.strip(), value.strip()
        if not sep or not axis or not value:
            raise _refuse(where, written, f"names the condition {text.strip()!r}, which is "
                          "not AXIS=VALUE (commas between axes)")
        if any(a == axis for a, _ in found):
            raise _refuse(where, written, f"names the axis {axis!r} twice")
        found.append((axis, value))
    return tuple(found)


def _rate(text: str, where: str, written: str) -> float:
    number = text.strip()
    percent = number.endswith("%")
    try:
        rate = float(number.removesuffix("%")) / (100.0 if percent else 1.0)
    except ValueError:
        raise _refuse(where, written, f"has the rate {number!r}, which is not a number") \
            from None
    if not math.isfinite(rate) or not 0 <= rate <= 1:
        raise TargetError(
            f"{where}: target {written!r} has the rate {number}, outside [0, 1]; a rate is a "
            "share of episodes, e.g. 0.9 or 90%")
    if rate in (0, 1):
        raise TargetError(
            f"{where}: target {written!r} asks for a rate of exactly {rate:g}, which no "
            "number of replicates can show met (one episode the other way would break it, "
            "and none may be unseen); ask for a rate just inside, e.g. "
            f"{'<=0.01' if rate == 0 else '>=0.99'}")
    return rate


def parse_target(text: str, where: str = "--prove-target") -> Target:
    """One target as written on the command line or in ini: ``[COND: ]EVENT OP RATE``."""
    written = text.strip()
    if not isinstance(text, str) or not written:
        raise _refuse(where, str(text), "is empty")
    head, sep, rest = written.partition(":")
    condition: tuple[tuple[str, str], ...] = ()
    body = written
    if sep and "=" in head and not head.rstrip().endswith(("<", ">")):
        condition, body = _condition(head, where, written), rest
    at = max(body.rfind("<="), body.rfind(">="))
    if at < 0:
        for wrong in ("<", ">", "=", "\u2264", "\u2265"):
            if wrong in body:
                raise _refuse(where, written, f"compares with {wrong!r}")
        raise _refuse(where, written, "has no <= or >=")
    event, side_rate = body[:at].strip(), body[at:]
    if not event:
        raise _refuse(where, written, "names no event")
    side: Side = "<=" if side_rate.startswith("<=") else ">="
    number, tilde, spread = side_rate[2:].partition("~")
    rate = _rate(number, where, written)
    found = _made(event, side, rate, condition, where, written)
    if not tilde:
        return found
    try:
        distance = float(spread.strip())
    except ValueError:
        distance = math.nan
    if not (math.isfinite(distance) and 0 < distance < 1):
        raise TargetError(
            f"{where}: target {written!r} sizes its design for the distance "
            f"{spread.strip()!r}; write ~D with 0 < D < 1 after the rate (resolved>=0.9~0.05: "
            "the replicates that show an agent at 0.95 meets it and one at 0.85 misses it)")
    return replace(found, distance=distance)


def _made(event: str, side: Side, rate: float, condition: tuple[tuple[str, str], ...],
          where: str, written: str) -> Target:
    found = _PASS.match(event.replace(" ", ""))
    if found is None:
        return Target(event, side, rate, 1, "rate", condition, where)
    k = int(found.group(2))
    if k < 1:
        raise TargetError(
            f"{where}: target {written!r} asks for pass{found.group(1)}{k}; k counts the "
            "tries of a condition, so it is a whole number of at least 1 (pass^1 is the "
            "success rate itself)")
    kind: Kind = "pass^k" if found.group(1) == "^" else "pass@k"
    return Target(f"pass{found.group(1)}{k}", side, rate, k, kind, condition, where)


def parse_targets(declared: object, where: str) -> tuple[Target, ...]:
    """A ``targets=`` mapping (or a sweep spec's ``[targets]`` table) as targets, in the
    order given: ``{"unresolved": "<= 0.10", "ticket=refund: pass^8": ">= 0.5"}``. A list
    of whole targets (``["unresolved<=0.10"]``) is read too."""
    if declared is None:
        return ()
    if isinstance(declared, str):
        raise TargetError(f"{where} must map each event to its side and rate, e.g. "
                          f'{{"unresolved": "<= 0.10"}}; got the text {declared!r:.80}')
    found: list[Target] = []
    if isinstance(declared, Mapping):
        for key, value in declared.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TargetError(
                    f"{where}: {key!r} = {value!r:.60} is not a target; map the event to "
                    'its side and rate as text, e.g. "unresolved" = "<= 0.10"')
            if not _RATE.match(value.strip()):
                raise TargetError(
                    f"{where}: {key!r} = {value!r:.60} is not a side and a rate; write "
                    f'"<= RATE" or ">= RATE", e.g. "{key}" = "<= 0.10"')
            found.append(parse_target(f"{key}{value.strip()}", where))
    elif isinstance(declared, Iterable):
        for item in declared:
            if not isinstance(item, str):
                raise TargetError(f"{where}: {item!r:.60} is not a target; write it as "
                                  f"text, e.g. {_EXAMPLE}")
            found.append(parse_target(item, where))
    else:
        raise TargetError(f"{where} must map each event to its side and rate, e.g. "
                          f'{{"unresolved": "<= 0.10"}}; got {declared!r:.80}')
    return _unique(found, where)


def parse_target_lines(text: str, where: str = "ini prove_targets") -> tuple[Target, ...]:
    """ini ``prove_targets``: one target a line (``#`` starts a comment); each error names
    the line of the value it is on."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if line:
            found.append(parse_target(line, f"{where}, line {number} of its value"))
    return _unique(found, where)


def _unique(found: Iterable[Target], where: str) -> tuple[Target, ...]:
    kept: dict[tuple[Any, ...], Target] = {}
    for target in found:
        key = (target.subject, target.side, target.condition)
        was = kept.get(key)
        if was is not None and was.rate != target.rate:
            raise TargetError(f"{where}: {was.text!r} and {target.text!r} ask the same of one "
                              "rate with two values; keep one")
        kept.setdefault(key, target)
    return tuple(kept.values())


def check_target_events(targets: Iterable[Target], outcomes: Iterable[str],
                        successes: Iterable[str], where: str) -> None:
    """Refuse a target whose event the rollout does not declare (``no outcome`` always
    is), or a pass^k / pass@k target of a rollout that declares no success."""
    declared = list(outcomes)
    wins = list(successes)
    for target in targets:
        if target.kind != "rate":
            if not wins:
                raise TargetError(
                    f"{target.where or where}: target {target.text!r}: pass^k and pass@k "
                    "count the declared successes, and this rollout declares none; declare "
                    'successes=[...] (e.g. successes=["resolved"]) or target an outcome')
            continue
        if target.event != NO_OUTCOME_EVENT and target.event not in declared:
            raise TargetError(
                f"{target.where or where}: target {target.text!r} names the event "
                f"{target.event!r}, which is not declared ({declared_events(declared)}); "
                "name one of them, or declare it")


def declared_events(declared: Iterable[str]) -> str:
    """The events a target may name, said plainly (a rollout of metrics only has one)."""
    names = list(declared)
    if not names:
        return (f"the rollout declares metrics and no outcomes, so its one event is "
                f"{NO_OUTCOME_EVENT!r}; a metric is held to its baseline by "
                "--prove-metric-margin, not by a target")
    return f"declared: {', '.join(names)}, and {NO_OUTCOME_EVENT!r}"


def declares_targets(manifest: Mapping[str, Any]) -> bool:
    """Whether any rollout of a run's ``manifest`` declares a target."""
    for info in (manifest.get("rollouts") or {}).values():
        if isinstance(info, Mapping) and isinstance(info.get("declaration"), Mapping) \
                and info["declaration"].get("targets"):
            return True
    return False
