"""What a rollout returns, and the checks an ending must pass.

An :class:`Episode` is checked where it is made (numbers, ``meta``) and again
against the rollout's declaration when the plugin receives it (the outcome).
Every message names the value and what was expected.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Final, final

from ..errors import ProveError
from .metrics import MetricError, check_metric_values

__all__ = ["MAX_T", "Episode", "NoOutcome", "RolloutContractError", "check_meta",
           "check_number", "unstorable"]

#: The largest ``t`` or ``horizon`` an episode may give: a trillion of its ``t_unit`` (steps,
#: seconds, tokens) is past any episode, and larger values overflowed where episodes stop
#: (``pytest-prove where``: ``t=1e300`` ended in an OverflowError).
MAX_T: Final = 10**12


class RolloutContractError(ProveError, ValueError):
    """A rollout broke its contract: a wrong return value, an undeclared outcome..."""


@final
class NoOutcome(Exception):  # noqa: N818 - it reads as what it means: the episode had no outcome
    """Raise in a rollout when the episode could not end in any outcome.

    The episode is stored with no outcome (and the reason), left out of every
    comparison, and the pytest item is skipped: ``raise prove.NoOutcome("rate limited")``.
    """

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason: Final = reason


def check_number(name: str, value: object) -> float | int | None:
    """``value`` as a finite real number, or ``None``; anything else is an error."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RolloutContractError(
            f"Episode {name} must be a number or None, got {value!r} ({type(value).__name__})"
        )
    if not math.isfinite(value):
        raise RolloutContractError(f"Episode {name} must be finite, got {value!r}")
    return value


def check_meta(meta: object) -> dict[str, Any]:
    """``meta`` as a JSON-serialisable dict with string keys, or an error that says why not."""
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise RolloutContractError(
            f"Episode meta must be a dict, got {type(meta).__name__}: {meta!r:.80}"
        )
    if not meta:
        return meta
    for key in meta:
        if not isinstance(key, str):
            raise RolloutContractError(
                f"Episode meta keys must be strings, got the key {key!r} ({type(key).__name__})"
            )
    try:
        # ensure_ascii=False, then UTF-8, as the store writes it: a lone surrogate passes
        # json.dumps alone and would fail only when the episode is written.
        json.dumps(meta, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        found = unstorable(meta, "meta")
        if found is not None:
            where, why = found
            raise RolloutContractError(
                f"Episode meta must be JSON-serialisable, and {where} is not: {why}; meta may "
                "hold finite numbers, text UTF-8 can hold, booleans, None, lists and dicts"
            ) from None
        raise RolloutContractError(
            "Episode meta must be JSON-serialisable (str, int, float, bool, None, list, "
            f"dict): {exc}"
        ) from None
    case_id = meta.get("case_id")
    if case_id is not None and (isinstance(case_id, bool) or not isinstance(case_id, str | int)):
        raise RolloutContractError(
            f"Episode meta['case_id'] must be a string or an int, got {case_id!r}"
        )
    return meta


def unstorable(value: object, where: str) -> tuple[str, str] | None:
    """The part of ``value`` a store line cannot hold, and why; ``None`` when it can hold all.

    A store line is JSON written as UTF-8, so NaN and infinity (not JSON), text with
    a lone surrogate such as ``"\\ud800"`` (not UTF-8) and any object other than str,
    int, float, bool, None, list, tuple and dict cannot be in it.  ``where`` names
    ``value``; the part is named from it with its value, e.g. ``meta['s'][1]='\\ud800'``.
    """
    if value is None or isinstance(value, bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else (
            f"{where}={value!r}", "JSON holds no NaN or infinity")
    if isinstance(value, str):
        return None if storable_text(value) else (
            f"{where}={value!r:.80}", "it holds a lone surrogate, which UTF-8 cannot store")
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and not storable_text(key):
                return (f"{where}[{key!r:.80}]",
                        "its key holds a lone surrogate, which UTF-8 cannot store")
            if not isinstance(key, str | int | float | bool | None):
                return f"{where}[{key!r:.80}]", "its key is not a string"
            found = unstorable(item, f"{where}[{key!r:.80}]")
            if found is not None:
                return found
        return None
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = unstorable(item, f"{where}[{index}]")
            if found is not None:
                return found
        return None
    return f"{where}={value!r:.80}", f"{type(value).__name__} is not a JSON type"


def storable_text(text: str) -> bool:
    """Whether UTF-8 can hold ``text``: a lone surrogate (``"\\ud800"``) it cannot."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@final
@dataclass(frozen=True, slots=True)
class Episode:
    """How one case ended on one seed.

    ``outcome`` is one of the rollout's declared outcomes; a rollout that declares metrics
    and no outcomes (only scores matter) gives none: ``prove.Episode(metrics={"judge": 0.8})``.
    ``t`` (when it ended, in the rollout's ``t_unit``) and ``horizon`` (the most ``t`` could
    have been) are numbers with ``0 <= t <= horizon``; when ``t`` is ``None`` and the
    rollout recorded steps with ``prove.step``, ``t`` is the number of steps.  ``meta`` is a
    JSON-serialisable dict; ``meta["case_id"]`` names the case the episode ran.
    ``metrics`` are the numbers the episode reports by name (``{"judge": 0.8}``), each one
    the rollout declares with the direction that is better (``metrics=`` of the decorator).
    ``answer`` is what the agent answered (text, or any JSON value): stored only when the
    rollout asks for it (``keep_answers=True``, or a ``grader=``), so that ``pytest-prove
    regrade`` can grade it again without running the agent (docs/grading.md).
    """

    outcome: str | None = None
    t: float | int | None = None
    horizon: float | int | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    answer: Any = None

    def __post_init__(self) -> None:
        if self.outcome is not None and (not isinstance(self.outcome, str)
                                         or not self.outcome):
            raise RolloutContractError(
                f"Episode outcome must be a non-empty string naming a declared outcome (or "
                f"None, for a rollout that declares metrics only), got {self.outcome!r}"
            )
        t = check_number("t", self.t)
        horizon = check_number("horizon", self.horizon)
        for name, value in (("t", t), ("horizon", horizon)):
            if value is not None and not 0 <= value <= MAX_T:
                raise RolloutContractError(
                    f"Episode {name} must be from 0 to {MAX_T:.0e} (in the rollout's t_unit), "
                    f"got {name}={value!r}")
        if t is not None and horizon is not None and t > horizon:
            raise RolloutContractError(
                f"Episode t must be within [0, horizon], got t={t} with horizon={horizon}"
            )
        object.__setattr__(self, "meta", check_meta(self.meta))
        try:
            object.__setattr__(self, "metrics", check_metric_values(self.metrics))
        except MetricError as exc:
            raise RolloutContractError(str(exc)) from None
        if self.answer is not None:
            found = unstorable(self.answer, "answer")
            if found is not None:
                raise RolloutContractError(
                    f"Episode answer must be text or a JSON value, and {found[0]} is not: "
                    f"{found[1]}")

    @property
    def case_id(self) -> str | int | None:
        """The case this episode ran, when the rollout recorded one."""
        value = self.meta.get("case_id")
        return value if isinstance(value, str | int) else None
