"""What differs between the environments two compared runs recorded (declare/environment.py).

A difference never changes the verdict: a changed model or prompt is usually the change
under test.  The declared variables (``prove_record_env``) are what the user says the agent
is, so a difference in one of them is taken for the change under test; a difference in
anything else (the models seen in spans, a package, Python, the platform) is one the user
did not declare, and the reports add the stale-baseline warning to it: if it was not
changed on purpose, the provider or the installation moved under the baseline, and the
baseline may be stale.  A run saved before runs recorded their environment reads as not
recorded, and nothing is compared.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, final

from ..store import Run
from .labels import label_of

__all__ = ["EnvironmentDiff", "EnvironmentReview", "environment_of", "environment_review",
           "refresh_command"]

NOT_RECORDED: Final = "not recorded"


@final
@dataclass(frozen=True, slots=True)
class EnvironmentDiff:
    """One thing that differs: ``kind`` is ``variable``, ``models``, ``package`` or
    ``platform``; ``before`` and ``after`` as a person reads them (a secret's digest, never
    its value); ``declared``: a declared variable, taken for the change under test."""

    kind: str
    name: str
    before: str
    after: str
    declared: bool

    def text(self) -> str:
        return f"{self.name} {self.before} -> {self.after}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "before": self.before,
                "after": self.after, "declared": self.declared}


@final
@dataclass(frozen=True, slots=True)
class EnvironmentReview:
    """The two runs' environments read side by side."""

    before: str  # the runs' labels
    after: str
    before_record: Mapping[str, Any] | None  # None: not recorded
    after_record: Mapping[str, Any] | None
    differences: tuple[EnvironmentDiff, ...]
    #: What refreshes the earlier run (a baseline's update command), for the warning.
    refresh: str

    @property
    def recorded(self) -> bool:
        """Whether both runs recorded their environment (so that it was compared)."""
        return self.before_record is not None and self.after_record is not None

    @property
    def undeclared(self) -> tuple[EnvironmentDiff, ...]:
        """The differences the user did not declare as the change (the stale warning's)."""
        return tuple(d for d in self.differences if not d.declared)

    def to_json(self) -> dict[str, Any]:
        return {"before": None if self.before_record is None else dict(self.before_record),
                "after": None if self.after_record is None else dict(self.after_record),
                "recorded": {"before": self.before_record is not None,
                             "after": self.after_record is not None},
                "differs": bool(self.differences),
                "differences": [d.to_json() for d in self.differences],
                "stale_warning": bool(self.undeclared), "refresh": self.refresh}


def environment_of(run: Run) -> Mapping[str, Any] | None:
    """A run's recorded environment, or None when it has none (saved before it was
    recorded, or damaged into something else)."""
    found = run.manifest.get("environment")
    return found if isinstance(found, Mapping) else None


def refresh_command(run: Run) -> str:
    """How the user refreshes ``run`` as the earlier side of a comparison."""
    if run.is_baseline:
        return (f"pytest --prove-baseline={shlex.quote(run.name)} "
                "--prove-update-baseline")
    return f"a new run of the sweep in place of {label_of(run)!r}"


def _variable_text(entry: object) -> str:
    if not isinstance(entry, Mapping):
        return NOT_RECORDED
    if entry.get("unset"):
        return "unset"
    if isinstance(entry.get("digest"), str):
        return f"(secret, digest {entry['digest']})"
    value = entry.get("value")
    if not isinstance(value, str):
        return NOT_RECORDED
    return value if value and value.strip() == value and " " not in value else repr(value)


def _models(record: Mapping[str, Any]) -> list[str]:
    """The model names spans named: those of the responses (they name the version served),
    else those of the requests."""
    models = record.get("models")
    if not isinstance(models, Mapping):
        return []
    for kind in ("response", "request"):
        seen = models.get(kind)
        if isinstance(seen, Mapping) and seen:
            return sorted(str(n) for n in seen)
    return []


def _mapping(record: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    found = record.get(key)
    return found if isinstance(found, Mapping) else {}


def _differences(before: Mapping[str, Any],
                 after: Mapping[str, Any]) -> list[EnvironmentDiff]:
    found: list[EnvironmentDiff] = []
    mine, theirs = _mapping(before, "variables"), _mapping(after, "variables")
    for name in [*mine, *(n for n in theirs if n not in mine)]:
        was, now = _variable_text(mine.get(name)), _variable_text(theirs.get(name))
        if mine.get(name) != theirs.get(name):
            found.append(EnvironmentDiff("variable", str(name), was, now, declared=True))
    models_before, models_after = _models(before), _models(after)
    if models_before != models_after and models_before and models_after:
        found.append(EnvironmentDiff("models", "model seen", ", ".join(models_before),
                                     ", ".join(models_after), declared=False))
    mine, theirs = _mapping(before, "packages"), _mapping(after, "packages")
    for name in [n for n in mine if n in theirs]:
        if mine[name] != theirs[name]:
            found.append(EnvironmentDiff(
                "package", str(name), str(mine[name] or "not installed"),
                str(theirs[name] or "not installed"), declared=False))
    # The system and machine, not the kernel's or the OS's version (CI machines change it
    # from one job to the next); the whole platform is shown by show.
    if before.get("system") != after.get("system"):
        found.append(EnvironmentDiff("platform", "platform", str(before.get("system")),
                                     str(after.get("system")), declared=False))
    return found


def environment_review(before: Run, after: Run) -> EnvironmentReview:
    """``after``'s environment read against ``before``'s."""
    was, now = environment_of(before), environment_of(after)
    differences = () if was is None or now is None else tuple(_differences(was, now))
    return EnvironmentReview(before=label_of(before), after=label_of(after),
                             before_record=was, after_record=now, differences=differences,
                             refresh=refresh_command(before))
