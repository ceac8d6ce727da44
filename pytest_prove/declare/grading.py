"""Graders: functions that turn an agent's answer into an outcome (and metrics).

A rollout may return the agent's answer with its episode (``prove.Episode(answer=...)``)
and name a grader (``grader="module:function"``): ``function(answer, condition)`` returns
the episode's outcome, as a string, or ``(outcome, {metric: value})``, or a
``prove.Episode(outcome, metrics=...)``.  The same function grades a stored run again with
``pytest-prove regrade RUN --grader module:function``, without running the agent.

Every way a grader can fail names the grader, the episode and the fix: it cannot be
imported, it raises, it returns something that is not an outcome, an outcome the rollout
does not declare, or a metric it does not.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, final

from ..errors import ProveError
from .episode import Episode
from .metrics import MetricError, check_metric_values
from .spec import Declaration, grader_name

__all__ = ["MAX_ANSWER_BYTES", "Graded", "GraderError", "answer_size", "grade",
           "load_grader"]

#: The most bytes of an answer (as JSON) an episode keeps: a larger one is not stored, and
#: its size is, so that a regrade says why it cannot grade that episode.
MAX_ANSWER_BYTES: Final = 65_536

Grader = Callable[[Any, dict[str, Any]], Any]


class GraderError(ProveError):
    """A grader cannot be imported, or is not a function."""


def answer_size(answer: object) -> int:
    """The bytes ``answer`` takes in the store (its JSON, UTF-8)."""
    return len(json.dumps(answer, ensure_ascii=False, allow_nan=False).encode("utf-8"))


def load_grader(name: str, root: Path | None = None) -> Grader:
    """The function ``name`` (``module:function``) names, imported with ``root`` (the
    project's folder) first on the import path when given.  Not cached here: a module
    imported once is in ``sys.modules``, so an episode's lookup is a dictionary's."""
    checked = grader_name(name, "a grader")
    module_name, _, function_name = checked.partition(":")
    return _load(module_name, function_name, None if root is None else str(root))


def _load(module_name: str, function_name: str, root: str | None) -> Grader:
    added = root is not None and root not in sys.path
    if added:
        sys.path.insert(0, str(root))
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's to fix
        where = f" (looked in {root} and on the import path)" if root else ""
        raise GraderError(
            f"grader {module_name}:{function_name}: cannot import {module_name!r}{where}: "
            f"{type(exc).__name__}: {exc}; put {module_name.replace('.', '/')}.py in the "
            "project's folder or on PYTHONPATH") from None
    finally:
        if added:
            sys.path.remove(str(root))
    function = getattr(module, function_name, None)
    if not callable(function):
        found = "" if function is None else f" ({type(function).__name__}, not a function)"
        raise GraderError(
            f"grader {module_name}:{function_name}: {module_name!r} has no function "
            f"{function_name!r}{found}; define def {function_name}(answer, condition) in "
            f"{getattr(module, '__file__', module_name)}")
    return function  # type: ignore[no-any-return]


@final
@dataclass(frozen=True, slots=True)
class Graded:
    """What a grader made of one answer: an outcome and metrics, or why it could not."""

    outcome: str | None
    metrics: dict[str, float] = field(default_factory=dict)
    error: str | None = None


def _shape(value: object) -> tuple[str | None, Mapping[str, Any]] | None:
    if isinstance(value, str):
        return value, {}
    if isinstance(value, Episode):
        return value.outcome, value.metrics
    if (isinstance(value, tuple) and len(value) == 2
            and (value[0] is None or isinstance(value[0], str))
            and isinstance(value[1], Mapping)):
        return value[0], value[1]
    return None


def grade(grader: Grader, name: str, answer: object, condition: Mapping[str, Any],
          declaration: Declaration) -> Graded:
    """``grader``'s outcome and metrics for ``answer`` on ``condition``, checked against
    ``declaration``; a grader that raises or returns what the rollout cannot store is an
    error of that episode (``Graded.error``), not of the run."""
    try:
        value = grader(answer, dict(condition))
    except Exception as exc:  # noqa: BLE001 - the grader's failure is the episode's
        return Graded(None, error=f"grader {name} raised {type(exc).__name__}: {exc}")
    shaped = _shape(value)
    if shaped is None:
        return Graded(None, error=(
            f"grader {name} returned {value!r:.120} ({type(value).__name__}); return an "
            "outcome's name, (outcome, {metric: value}) or prove.Episode(outcome, "
            "metrics={...})"))
    outcome, metrics = shaped
    if declaration.outcomes and outcome not in declaration.outcomes:
        return Graded(None, error=(
            f"grader {name} returned the outcome {outcome!r}, which the rollout does not "
            f"declare ({', '.join(declaration.outcomes)}); return one of them"))
    if not declaration.outcomes and outcome is not None:
        return Graded(None, error=(
            f"grader {name} returned the outcome {outcome!r}, but the rollout declares "
            "metrics and no outcomes; return (None, {metric: value})"))
    try:
        checked = check_metric_values(dict(metrics))
    except MetricError as exc:
        return Graded(None, error=f"grader {name}: {exc}")
    declared = declaration.metric_directions
    unknown = [m for m in checked if m not in declared]
    if unknown:
        return Graded(None, error=(
            f"grader {name} returned the metric {unknown[0]!r}, which the rollout does not "
            f"declare; declare it on @prove.rollout (metrics={{{unknown[0]!r}: "
            "\"higher\"}) or leave it out"))
    return Graded(outcome, checked)
