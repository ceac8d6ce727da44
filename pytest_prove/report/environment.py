"""What the environments of two compared runs differ in, worded once for every renderer, and
one run's recorded environment for ``show``.

A difference never changes the verdict; one the user did not declare as the change (anything
but a ``prove_record_env`` variable) carries the stale-baseline warning and the command that
refreshes the baseline.  Lines are ``(head, text)`` as in :mod:`.notes`, every value from
the store through the renderer's ``esc``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_prove.review import Review

__all__ = ["environment_notes", "recorded_lines"]

_NOT_RECORDED = ("not recorded (it was made by a pytest-prove that did not record the "
                 "environment)")


def environment_notes(review: Review, esc: Callable[[str], str]) -> list[tuple[str, str]]:
    """The difference between the runs' environments, and the stale-baseline warning."""
    found = review.environment
    if found is None:
        return []
    before, after = esc(found.before), esc(found.after)
    if found.before_record is None and found.after_record is None:
        return []
    if not found.recorded:
        missing = before if found.before_record is None else after
        return [("environment", f"the environment of {missing} is {_NOT_RECORDED}, so the "
                                "two runs' environments were not compared (a run records "
                                "it now, and a baseline saved from one keeps it)")]
    if not found.differences:
        return []
    said = "; ".join(f"{esc(d.name)} {esc(d.before)} -> {esc(d.after)}"
                     for d in found.differences)
    lines = [("environment", f"the environment differs from {before}'s: {said} (this does "
                             "not change the verdict)")]
    undeclared = found.undeclared
    if undeclared:
        what = ", ".join(esc(d.name) for d in undeclared)
        declared = [esc(d.name) for d in found.differences if d.declared]
        because = ("" if not declared else
                   f" (the declared change is {', '.join(declared)}; the rest may follow "
                   "from it)")
        verb = "was" if len(undeclared) == 1 else "were"
        lines.append(("stale baseline?", f"{what} {verb} not declared as the change{because}: "
                                         "if you did not change this, the baseline may be "
                                         f"stale: refresh it with {esc(found.refresh)}"))
    return lines


def _variable(entry: object) -> str:
    if not isinstance(entry, Mapping):
        return "?"
    if entry.get("unset"):
        return "unset"
    if isinstance(entry.get("digest"), str):
        return f"secret, digest {entry['digest']}"
    return repr(entry.get("value"))


def recorded_lines(record: object, esc: Callable[[str], str]) -> list[str]:
    """A run's recorded environment, for ``show``: one line each part."""
    if not isinstance(record, Mapping):
        return [f"environment: {_NOT_RECORDED}"]
    lines: list[str] = []
    variables: Any = record.get("variables") or {}
    if isinstance(variables, Mapping) and variables:
        lines.append("environment: " + ", ".join(f"{esc(str(n))}={esc(_variable(v))}"
                                                 for n, v in variables.items()))
    else:
        lines.append("environment: no variable declared (prove_record_env)")
    packages: Any = record.get("packages") or {}
    if isinstance(packages, Mapping) and packages:
        lines.append("packages: " + ", ".join(f"{esc(str(n))} {esc(str(v or 'not installed'))}"
                                              for n, v in packages.items()))
    if record.get("platform"):
        lines.append(f"platform: {esc(str(record['platform']))}")
    models: Any = record.get("models") or {}
    seen = [f"{esc(str(n))} ({c} span{'s' if c != 1 else ''}, {kind})"
            for kind in ("request", "response")
            for n, c in sorted(((models.get(kind) or {}) if isinstance(models, Mapping)
                                else {}).items())]
    lines.append("models seen in spans: " + (", ".join(seen) if seen else "none"))
    return lines
