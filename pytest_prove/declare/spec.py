"""The declaration of a sweep: outcomes, axes, replicates (TOML sweep specs: :mod:`.sweep`).

A :class:`Declaration` is what ``@prove.rollout(...)`` and a ``prove_*.toml``
file both say.  Conditions are built from axis values; a condition's key is
canonical JSON of its values, so it is the same on every run and machine.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar, final

from ..errors import ProveError
from .capture import CaptureConfig, CaptureError
from .chaos import ChaosConfig, ChaosError
from .episode import storable_text
from .metrics import Better, MetricError, directions
from .seeds import ARM_MARK
from .targets import Target, TargetError, check_target_events, parse_targets

__all__ = ["Axis", "Declaration", "SpecError", "axis_text", "condition_key", "condition_label",
           "quoted_label"]

Scalar = str | int | float | bool | None
_Config = TypeVar("_Config")


class SpecError(ProveError, ValueError):
    """A declaration or a sweep spec that cannot be used, with what to fix."""


#: The event pytest-prove tests for episodes that ended without an outcome (no outcome,
#: an error, a timeout, a crash); no rollout may declare an outcome of that name.
NO_OUTCOME_EVENT: Final = "no outcome"


def episode_timeout(value: object, what: str = "--prove-episode-timeout") -> float:
    """Seconds an episode may run: a finite number above zero."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and value > 0):
        raise SpecError(f"{what} must be a number of seconds above 0, got {value!r}")
    return float(value)


def _names(what: str, values: object) -> tuple[str, ...]:
    if values is None:
        return ()
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise SpecError(f"{what} must be a list of outcome names, got {values!r}")
    names = tuple(values)
    for name in names:
        if not isinstance(name, str) or not name:
            raise SpecError(f"{what} must hold non-empty strings, got {name!r}")
        if not storable_text(name):
            raise SpecError(f"{what} names {name!r}, which holds a lone surrogate that UTF-8 "
                            "cannot store; use plain text")
        if name == NO_OUTCOME_EVENT:
            raise SpecError(f"{what} names {name!r}, which pytest-prove keeps for episodes "
                            "that end without an outcome; give the outcome another name")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SpecError(f"{what} names {', '.join(dupes)} more than once")
    return names


@final
@dataclass(frozen=True, slots=True)
class Axis:
    """One axis of a sweep: a name and the values it takes."""

    name: str
    values: tuple[Scalar, ...]
    kind: Literal["categorical", "continuous"] = "categorical"

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise SpecError(f"an axis needs a non-empty name, got {self.name!r}")
        if not storable_text(self.name):
            raise SpecError(f"axis {self.name!r} has a name with a lone surrogate, which "
                            "UTF-8 cannot store; use plain text")
        if not self.values:
            raise SpecError(f"axis {self.name!r} has no values; give it at least one")
        for value in self.values:
            if self.kind == "continuous" and (
                isinstance(value, bool) or not isinstance(value, int | float)
            ):
                raise SpecError(
                    f"axis {self.name!r} is continuous, so its values must be numbers; "
                    f"got {value!r}"
                )
            if isinstance(value, float) and not math.isfinite(value):
                raise SpecError(f"axis {self.name!r} has a non-finite value {value!r}")
            if not isinstance(value, Scalar):
                raise SpecError(
                    f"axis {self.name!r} values must be strings, numbers, booleans or null; "
                    f"got {value!r}"
                )
            if isinstance(value, str) and not storable_text(value):
                raise SpecError(f"axis {self.name!r} has the value {value!r}, which holds a "
                                "lone surrogate that UTF-8 cannot store; use plain text")
        keys = [json.dumps(v) for v in self.values]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise SpecError(f"axis {self.name!r} lists {', '.join(dupes)} more than once")


@final
@dataclass(frozen=True, slots=True)
class Declaration:
    """What a rollout declares: its outcomes, which count against it, and its size."""

    failures: tuple[str, ...]
    successes: tuple[str, ...] = ()
    outcomes: tuple[str, ...] = ()
    replicates: int = 100
    t_unit: str | None = None
    concurrency: int | None = None
    timeout: float | None = field(default=None, compare=False)  # seconds an episode may run
    axes: tuple[Axis, ...] | None = None
    rollout_id: str | None = None
    #: What to capture of its episodes' OpenTelemetry spans; a mapping is checked and
    #: becomes a CaptureConfig. None: the ini's capture settings, if any.
    capture: CaptureConfig | Mapping[str, Any] | None = field(default=None, compare=False)
    #: Faults to inject into its episodes' HTTP calls (docs/chaos.md); a mapping is checked
    #: and becomes a ChaosConfig. None: no fault injection.
    chaos: ChaosConfig | Mapping[str, Any] | None = field(default=None, compare=False)
    #: Stop each condition once it is decided against the baseline (docs/statistics.md,
    #: "Sequential runs"). None: as the session's --prove-sequential says.
    sequential: bool | None = field(default=None, compare=False)
    #: The metrics its episodes report, each with the direction that is better: a mapping
    #: ``{"judge": "higher"}`` becomes (name, direction) pairs in the order given.
    metrics: tuple[tuple[str, Better], ...] | Mapping[str, str] = ()
    #: Its absolute targets (docs/targets.md): ``{"unresolved": "<= 0.10"}`` becomes
    #: :class:`~.targets.Target` values, checked against the declared outcomes.
    targets: tuple[Target, ...] | Mapping[str, str] | Sequence[str] = field(
        default=(), compare=False)
    #: Keep each episode's answer (``prove.Episode(..., answer=...)``) in the store, for
    #: ``pytest-prove regrade`` (docs/grading.md); a grader implies it.
    keep_answers: bool = field(default=False, compare=False)
    #: ``module:function`` that maps an episode's answer and condition to its outcome (and
    #: metrics), for an episode that returns an answer and no outcome; None: no grader.
    grader: str | None = field(default=None, compare=False)
    #: Its arms (docs/arms.md): every (condition, replicate) runs once per arm on one seed,
    #: and each arm is compared with the reference arm. Empty: no arms.
    arms: tuple[str, ...] = ()
    #: The arm the others are compared with (None: the first arm).
    reference: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.metrics, tuple):
            try:
                object.__setattr__(self, "metrics", directions(self.metrics, "metrics="))
            except MetricError as exc:
                raise SpecError(str(exc)) from None
        failures = _names("failures", self.failures)
        successes = _names("successes", self.successes)
        outcomes = _names("outcomes", self.outcomes) or failures + successes
        object.__setattr__(self, "failures", failures)
        object.__setattr__(self, "successes", successes)
        object.__setattr__(self, "outcomes", outcomes)
        if not failures and not successes and (outcomes or not self.metrics):
            raise SpecError(
                "a rollout must declare at least one failure or success, "
                'e.g. failures=["unresolved"], successes=["resolved"], or, when only scores '
                'matter, metrics and no outcomes: metrics={"judge": "higher"}'
            )
        both = sorted(set(failures) & set(successes))
        if both:
            raise SpecError(f"{', '.join(both)} cannot be both a failure and a success")
        unknown = [n for n in failures + successes if n not in outcomes]
        if unknown:
            raise SpecError(
                f"{', '.join(unknown)} must be among the declared outcomes "
                f"({', '.join(outcomes)}); add it to outcomes"
            )
        if isinstance(self.replicates, bool) or not isinstance(self.replicates, int):
            raise SpecError(f"replicates must be an int, got {self.replicates!r}")
        if self.replicates < 1:
            raise SpecError(f"replicates must be >= 1, got {self.replicates}")
        if self.concurrency is not None and (
            isinstance(self.concurrency, bool)
            or not isinstance(self.concurrency, int)
            or self.concurrency < 1
        ):
            raise SpecError(f"concurrency must be an int >= 1, got {self.concurrency!r}")
        if self.sequential is not None and not isinstance(self.sequential, bool):
            raise SpecError(f"sequential must be a boolean (True or False; true or false in "
                            f"a sweep spec), got {self.sequential!r}")
        if self.timeout is not None:
            object.__setattr__(self, "timeout", episode_timeout(self.timeout, "timeout"))
        if self.t_unit is not None and (not isinstance(self.t_unit, str) or not self.t_unit):
            raise SpecError(f't_unit must be a word naming what t counts, e.g. "steps", '
                            f"got {self.t_unit!r}")
        for label, text in (("id", self.rollout_id), ("t_unit", self.t_unit)):
            if isinstance(text, str) and not storable_text(text):
                raise SpecError(f"the rollout's {label} {text!r} holds a lone surrogate, which "
                                "UTF-8 cannot store; use plain text")
        if self.capture is not None and not isinstance(self.capture, CaptureConfig):
            object.__setattr__(self, "capture",
                               _table(CaptureConfig.from_mapping, self.capture, "capture="))
        if self.chaos is not None and not isinstance(self.chaos, ChaosConfig):
            object.__setattr__(self, "chaos",
                               _table(ChaosConfig.from_mapping, self.chaos, "chaos="))
        if self.targets:
            self._check_targets()
        if not isinstance(self.keep_answers, bool):
            raise SpecError(f"keep_answers must be a boolean (True or False), got "
                            f"{self.keep_answers!r}")
        if self.grader is not None:
            object.__setattr__(self, "grader", grader_name(self.grader, "grader="))
        if self.arms or self.reference is not None:
            self._check_arms()
        if isinstance(self.rollout_id, str) and ARM_MARK in self.rollout_id:
            raise SpecError(f"the rollout's id {self.rollout_id!r} holds {ARM_MARK!r}, which "
                            "pytest-prove keeps for the ids of a rollout's arms; choose an id "
                            "without it")
        if self.axes is not None:
            names = [a.name for a in self.axes]
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise SpecError(f"axis {', '.join(dupes)} is declared more than once")

    def _check_arms(self) -> None:
        arms = self.arms
        if isinstance(arms, str) or not isinstance(arms, Iterable):
            raise SpecError(f'arms must be a list of names, e.g. arms=["current", "cheaper"], '
                            f"got {arms!r}")
        arms = tuple(arms)
        object.__setattr__(self, "arms", arms)
        for arm in arms:
            if not isinstance(arm, str) or not arm.isidentifier() or not arm.isascii():
                raise SpecError(
                    f"arm {arm!r} is not a name pytest-prove can use: an arm's name goes into "
                    "item ids (test_x[refund-r017-NAME]) and is selected with -k, so it must "
                    "be an identifier (ASCII letters, digits and '_', not starting with a "
                    "digit), e.g. 'cheaper' or 'gpt_4o_mini'")
        dupes = sorted({a for a in arms if arms.count(a) > 1})
        if dupes:
            raise SpecError(
                f"arms names {', '.join(dupes)} more than once; each arm needs its own name "
                "(for an A/A check of the same code, name the twin arm otherwise, e.g. "
                f"arms=[{dupes[0]!r}, {dupes[0] + '_again'!r}])")
        if len(arms) == 1:
            raise SpecError(f"arms lists one arm ({arms[0]!r}), and an arm is compared with "
                            "another; list two or more, e.g. arms=[\"current\", \"cheaper\"], "
                            "or leave arms out")
        if self.reference is not None and self.reference not in arms:
            raise SpecError(
                f"reference {self.reference!r} is not among the arms "
                f"({', '.join(arms) or 'none'}); name one of them, or leave reference out "
                "(the first arm is the reference)")
        if self.axes and any(a.name == "arm" for a in self.axes):
            raise SpecError("an axis named 'arm' cannot go with arms: the arm is given to "
                            "fn(cfg, seed) as cfg['arm']; rename the axis")

    @property
    def reference_arm(self) -> str | None:
        """The arm the others are compared with (None: no arms)."""
        if not self.arms:
            return None
        return self.reference if self.reference is not None else self.arms[0]

    def _check_targets(self) -> None:
        targets = self.targets
        try:
            if not (isinstance(targets, tuple)
                    and all(isinstance(t, Target) for t in targets)):
                targets = parse_targets(targets, "targets=")
                object.__setattr__(self, "targets", targets)
            check_target_events(targets, self.outcomes, self.successes, "targets=")
        except TargetError as exc:
            raise SpecError(str(exc)) from None

    @property
    def target_list(self) -> tuple[Target, ...]:
        """Its targets, as parsed."""
        return self.targets  # type: ignore[return-value]

    @property
    def metrics_only(self) -> bool:
        """Whether it declares metrics and no outcomes: its episodes are compared on their
        metric rows alone (docs/metrics.md, "Metrics without an outcome")."""
        return not self.outcomes

    @property
    def metric_directions(self) -> dict[str, Better]:
        """Each declared metric's better direction, by name."""
        return dict(self.metrics)  # type: ignore[arg-type]

    @property
    def events(self) -> tuple[str, ...]:
        """The events compared by default: the failures, then the successes."""
        return self.failures + self.successes

    @property
    def mirrors(self) -> dict[str, str]:
        """``{success: failure}`` for a success that is exactly the complement of a failure
        over the declared outcomes (two outcomes, one of each): every episode has one or the
        other, so the two rates move together and their tests give the same p-value, paired
        or not. Such a pair is one test."""
        if len(self.outcomes) == 2 and len(self.failures) == 1 and len(self.successes) == 1:
            return {self.successes[0]: self.failures[0]}
        return {}

    def tested(self, events: Sequence[str] | None = None) -> tuple[str, ...]:
        """The events of ``events`` (default: all declared) that are tested: a success whose
        mirror failure is among them is left to that failure."""
        chosen = self.events if events is None else tuple(events)
        mirrors = self.mirrors
        return tuple(e for e in chosen if mirrors.get(e) not in chosen)

    def worse_when(self, event: str) -> Literal["rise", "fall"]:
        """Which way ``event`` moving is worse: a failure rising, a success falling."""
        if event in self.failures:
            return "rise"
        if event in self.successes:
            return "fall"
        raise SpecError(
            f"event {event!r} is neither a declared failure ({', '.join(self.failures)}) "
            f"nor a success ({', '.join(self.successes) or 'none'})"
        )

    def conditions(self) -> list[dict[str, Scalar]]:
        """Every combination of axis values, in declaration order."""
        if not self.axes:
            return [{}]
        names = [a.name for a in self.axes]
        return [dict(zip(names, combo, strict=True)) for combo in
                itertools.product(*(a.values for a in self.axes))]

    def to_json(self) -> dict[str, Any]:
        """The declaration as stored in a manifest (with ``chaos`` and ``sequential`` only
        when it has them)."""
        found = {
            "outcomes": list(self.outcomes),
            "failures": list(self.failures),
            "successes": list(self.successes),
            "replicates": self.replicates,
            "t_unit": self.t_unit,
            "axes": None if self.axes is None else {
                a.name: {"type": a.kind, "values": list(a.values)} for a in self.axes
            },
        }
        if isinstance(self.chaos, ChaosConfig):
            found["chaos"] = self.chaos.to_json()
        if self.sequential is not None:
            found["sequential"] = self.sequential
        if self.metrics:
            found["metrics"] = self.metric_directions
        if self.targets:
            found["targets"] = [t.text for t in self.target_list]
        if self.grader is not None:
            found["grader"] = self.grader
        if self.keep_answers or self.grader is not None:
            found["keep_answers"] = True
        if self.arms:
            found["arms"] = list(self.arms)
            found["reference"] = self.reference_arm
        return found

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Declaration:
        """The inverse of :meth:`to_json`."""
        axes = data.get("axes")
        return cls(
            failures=tuple(data.get("failures", ())),
            successes=tuple(data.get("successes", ())),
            outcomes=tuple(data.get("outcomes", ())),
            replicates=int(data.get("replicates", 1)),
            t_unit=data.get("t_unit"),
            sequential=data.get("sequential"),
            metrics=data.get("metrics") or (),
            targets=data.get("targets") or (),
            keep_answers=bool(data.get("keep_answers", False)),
            grader=data.get("grader"),
            arms=tuple(data.get("arms") or ()),
            reference=data.get("reference"),
            axes=None if axes is None else tuple(
                Axis(name, tuple(a["values"]), a.get("type", "categorical"))
                for name, a in axes.items()
            ),
        )


#: ``module:function``, or ``package.module:function``: where a grader lives.
_GRADER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")


def grader_name(text: object, where: str) -> str:
    """``text`` as a grader's ``module:function``, or a :class:`SpecError` with the form."""
    if not isinstance(text, str) or _GRADER.fullmatch(text.strip()) is None:
        raise SpecError(f"{where} must name a function as module:function (e.g. "
                        f"grader=\"graders:strict\", a function strict in graders.py beside "
                        f"the tests), got {text!r}")
    return text.strip()


def condition_key(condition: Mapping[str, Scalar]) -> str:
    """The stable key of a condition: canonical JSON of its values, sorted by axis name."""
    return json.dumps(dict(condition), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def condition_label(condition: Mapping[str, Scalar]) -> str:
    """How a person reads a condition: ``ticket=refund temperature=0.7``, its axes joined by
    spaces, so that in a list of conditions (joined by commas or semicolons) each reads as
    one unit.  Every renderer, message and node id names a condition so."""
    if not condition:
        return "(one condition)"
    return " ".join(f"{k}={axis_text(v)}" for k, v in condition.items())


def quoted_label(label: str, limit: int = 80) -> str:
    """A label as a message quotes it among others: a long one keeps its start and end around
    an ellipsis (both tell conditions apart), so that a list of them stays readable."""
    if len(label) <= limit:
        return label
    return f"{label[:limit * 2 // 3]}\u2026{label[-(limit // 3):]}"


def axis_text(value: Scalar) -> str:
    """An axis value as a condition's label writes it (:func:`condition_label`)."""
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _table(read: Callable[[object, str], _Config], data: object, where: str) -> _Config:
    """A ``[capture]`` or ``[chaos]`` table (or its keyword's mapping) as ``read`` reads it;
    its error, with the same words, a :class:`SpecError`."""
    try:
        return read(data, where)
    except (CaptureError, ChaosError) as exc:
        raise SpecError(str(exc)) from None
